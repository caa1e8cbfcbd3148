"""The one integrity check of a plan file's stored bins, called by every reader (``report``, ``compare-plans``,
``train-report --plan``, the RETURNN-side class): a damaged or edited plan is one line naming the file."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..pure.stats import check_layout, check_no_repeat_in_sub_epochs
from ..pure.text import short_repr


def check_stored_layout(
    order: np.ndarray,
    bounds: np.ndarray,
    *,
    path: str,
    full_epoch_0idx: int,
    layout_idx: int,
    num_files: int,
    reads: Optional[np.ndarray] = None,
    partition_epoch: Optional[int] = None,
) -> None:
    """Refuse the stored bins of one full epoch unless, as stored (never recomputed), they give every one of the
    ``num_files`` files exactly once and no bin is empty (RETURNN asserts ``all(files_per_bin)``).

    A plan of corpora by weight gives ``reads`` (how often each file is read in the full epoch, instead of once) and
    its ``partition_epoch``: no sub-epoch may read a file twice.

    :raises ValueError: one line naming ``path``, the full epoch and layout, and what is wrong

    >>> check_stored_layout(np.array([0, 0, 2]), np.array([0, 1, 3]), path="p.npz", full_epoch_0idx=1,
    ...                     layout_idx=0, num_files=3)
    Traceback (most recent call last):
    ...
    ValueError: 'p.npz' is corrupt: full epoch 1 (layout 0): the bins do not cover every file entry exactly once (1 missing, 1 repeated); a plan must give every file once per full epoch: write the plan again (ShardPlanJob or `python -m i6_shard plan`)
    """
    name = short_repr(path)
    num_reads = num_files if reads is None else int(np.sum(reads))
    if (
        order.shape != (num_reads,)
        or bounds.ndim != 1
        or bounds.size < 2
        or (order.size and (int(order.min()) < 0 or int(order.max()) >= num_files))
        or bounds[0] != 0
        or bounds[-1] != num_reads
        or np.any(np.diff(bounds.astype(np.int64)) < 0)
    ):
        raise ValueError(
            f"{name} is corrupt: full epoch {full_epoch_0idx} (layout {layout_idx}) has file indices "
            "or bin bounds outside its files"
        )
    try:  # the stored bins as they are: every file exactly once, no empty bin (never a recomputation)
        check_layout(order, bounds, num_files=num_files, num_bins=len(bounds) - 1, reads=reads)
        if reads is not None:
            check_no_repeat_in_sub_epochs(order, bounds, partition_epoch=partition_epoch)
    except AssertionError as exc:
        raise ValueError(
            f"{name} is corrupt: full epoch {full_epoch_0idx} (layout {layout_idx}): {exc}; a plan "
            "must give every file once per full epoch: write the plan again (ShardPlanJob or "
            "`python -m i6_shard plan`)"
        ) from None

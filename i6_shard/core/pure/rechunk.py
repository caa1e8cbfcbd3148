"""Re-chunking by numbers: how many files a corpus needs so that no file is too big for a rank's share, and where
its sequences, in order, are cut into files of even size."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from .args import check_int, check_optional_int

__all__ = ["rechunk_num_files", "check_rechunk_args", "RECHUNK_UNITS"]

#: How much more files each step of :func:`num_files_for` tries, while a file is still too big.
_GROWTH = 1.1

#: The bound on the sub-epoch sizes a re-chunked corpus is made for: every sub-epoch within 10% of the mean.
RECHUNK_BOUND = 0.1
#: What a re-chunk makes even: the frames of the data stream (``seqLengths[:, 0]``) or the number of sequences.
RECHUNK_UNITS = ("frames", "seqs")


def check_rechunk_args(
    *, num_shards: Any, partition_epoch: Any, num_files: Any = None, unit: Any = "frames"
) -> Tuple[int, int, Optional[int], str]:
    """The arguments of a re-chunk checked (the CLI, the job and the I/O all call this), as plain ints.

    >>> check_rechunk_args(num_shards=4, partition_epoch=10, unit="bytes")
    Traceback (most recent call last):
    ...
    ValueError: unit='bytes': a re-chunk makes files even in one of ('frames', 'seqs'); use 'frames' to balance as the plan does by default
    """
    num_shards = check_int(num_shards, name="num_shards", minimum=1, hint="the training's ranks")
    partition_epoch = check_int(partition_epoch, name="partition_epoch", minimum=1, hint="sub-epochs per full epoch")
    num_files = check_optional_int(num_files, name="num_files", minimum=1, hint="or None: the rule's number")
    if unit not in RECHUNK_UNITS:
        raise ValueError(
            f"unit={unit!r}: a re-chunk makes files even in one of {RECHUNK_UNITS}; use 'frames' to balance as the "
            "plan does by default"
        )
    return num_shards, partition_epoch, num_files, unit


def max_file_share(bound: float = RECHUNK_BOUND) -> float:
    """The largest file a corpus may hold, as a share of a rank's share of a sub-epoch (``total / (W * P)``), so
    that ``equal_steps`` can drop nothing and keep every sub-epoch within ``bound`` of the mean: half the bound.

    Why half: a cut into bins of whole files misses a bin's share by at most half a file at each end, so a bin, and
    a sub-epoch of W such bins, is off by at most one file's share ``f``; that leaves ``bound - f`` for the files
    that ``equal_steps`` moves between sub-epochs to make the ranks' steps equal, each of which moves a sub-epoch
    by ``f / W``. With ``f = bound / 2`` a sub-epoch stays in bound with up to ``W / 2`` such moves, and a rank's
    bin holds ``2 / bound`` files (20 at 10%) to trade between the ranks of its sub-epoch.

    >>> max_file_share(0.1)
    0.05
    """
    if not 0 < bound < 1:
        raise ValueError(f"bound={bound!r}: give the sub-epoch bound as a share in (0, 1), e.g. 0.1")
    return bound / 2


def rechunk_num_files(
    *, num_shards: int, partition_epoch: int, num_seqs: Optional[int] = None, bound: float = RECHUNK_BOUND
) -> int:
    """The number of files of even size a re-chunk writes: ``ceil(num_shards * partition_epoch /
    max_file_share(bound))`` (``20 * W * P`` at 10%), so that a file is at most :func:`max_file_share` of a rank's
    share; at most ``num_seqs`` (a file holds at least one whole sequence) where it is known.

    >>> rechunk_num_files(num_shards=4, partition_epoch=10, num_seqs=10**6)
    800
    >>> rechunk_num_files(num_shards=4, partition_epoch=10, num_seqs=500)  # too few sequences: one per file
    500
    """
    for name, value in (("num_shards", num_shards), ("partition_epoch", partition_epoch), ("num_seqs", num_seqs)):
        check_optional_int(value, name=name, minimum=1)
    needed = math.ceil(round(num_shards * partition_epoch / max_file_share(bound), 9))
    return needed if num_seqs is None else min(num_seqs, needed)


def cut_even(costs: np.ndarray, *, num_files: int) -> np.ndarray:
    """Where sequences, kept in their order, are cut into ``num_files`` files of even cost: file ``k`` ends at the
    sequence boundary nearest to ``(k + 1) / num_files`` of the total, and holds at least one sequence. A file then
    misses ``total / num_files`` by at most one sequence's cost at each end.

    :param costs: int64 cost of each sequence in order (frames or 1), shape [num_seqs]
    :param num_files: 1 <= num_files <= num_seqs
    :return: int64 bounds, shape [num_files + 1]; file k holds sequences ``bounds[k]:bounds[k + 1]``

    >>> cut_even(np.array([5, 5, 5, 5, 100, 1]), num_files=2).tolist()
    [0, 4, 6]
    >>> cut_even(np.array([0, 0, 9]), num_files=3).tolist()  # every file holds a sequence
    [0, 1, 2, 3]
    """
    costs = np.asarray(costs, dtype=np.int64)
    num_seqs = int(costs.shape[0])
    if not 1 <= num_files <= num_seqs:
        raise ValueError(f"num_files={num_files!r}: give 1 to {num_seqs} (the number of sequences) files")
    ends = np.cumsum(costs)
    total = int(ends[-1]) if num_seqs else 0
    targets = np.arange(1, num_files, dtype=np.float64) * total / num_files
    after = np.searchsorted(ends, targets, side="left")  # first sequence whose end reaches the target
    before_end = np.where(after > 0, ends[np.maximum(after - 1, 0)], 0)
    nearer_before = (targets - before_end) <= (ends[np.minimum(after, num_seqs - 1)] - targets)
    inner = np.where(nearer_before, after, after + 1).astype(np.int64)
    idx = np.arange(1, num_files, dtype=np.int64)
    # at least one sequence per file: bounds strictly increasing, i.e. ``bound - k`` non-decreasing in [0, n - N]
    inner = np.clip(np.maximum.accumulate(inner - idx), 0, num_seqs - num_files) + idx if num_files > 1 else inner
    return np.concatenate([[0], inner, [num_seqs]]).astype(np.int64)


def num_files_for(costs: np.ndarray, *, num_shards: int, partition_epoch: int, bound: float = RECHUNK_BOUND) -> int:
    """The number of files :func:`cut_even` needs so that no file of ``costs`` (each sequence's, in order) is above
    :func:`max_file_share` of a rank's share: from :func:`rechunk_num_files`, 10% more at a time while the largest
    file is above it (a file of even cost overshoots its target by up to a sequence at each end, so long sequences
    against a rank's share need more files); at most one file per sequence (then a sequence above it stays above).

    >>> num_files_for(np.full(800, 100), num_shards=2, partition_epoch=2)  # 10 sequences each: 5% exactly
    80
    >>> num_files_for(np.full(1000, 100), num_shards=2, partition_epoch=2)  # 12.5 each would overshoot: 88 files
    88
    >>> num_files_for(np.array([90, 10] * 60), num_shards=2, partition_epoch=2)  # a 90 is above 5%: one per file
    120
    """
    costs = np.asarray(costs, dtype=np.int64)
    num_seqs = int(costs.shape[0])
    limit = max_file_share(bound) * float(costs.sum()) / (num_shards * partition_epoch)
    num_files = rechunk_num_files(
        num_shards=num_shards, partition_epoch=partition_epoch, num_seqs=num_seqs, bound=bound
    )
    while num_files < num_seqs:
        bounds = cut_even(costs, num_files=num_files)
        if np.add.reduceat(costs, bounds[:-1]).max() <= limit:
            break
        num_files = min(num_seqs, math.ceil(num_files * _GROWTH))
    return num_files

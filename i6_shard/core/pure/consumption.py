"""What a training consumed, from per-(sub-epoch, rank) counts: the share dropped when each
sub-epoch ended at its first rank out of data, the steps the data should have given, how often
each file was read per full epoch, and the partition_epoch the files show."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Optional, Sequence

import numpy as np

from .batching import sync_stop


def dropped_share(consumed: np.ndarray, available: np.ndarray) -> np.ndarray:
    """Per sub-epoch, the share of the available data the ranks did not consume:
    ``1 - sum(consumed) / sum(available)`` over the ranks. RETURNN ends a sub-epoch on every
    rank when the first rank runs out, so this is what the other ranks still held.

    :param consumed: int, shape [num_epochs, num_ranks]; negative where unknown
    :param available: int, shape [num_epochs, num_ranks]; negative where unknown
    :return: float64, shape [num_epochs]; nan where a count is unknown or nothing was available

    >>> dropped_share(np.array([[10, 10], [5, -1]]), np.array([[10, 30], [5, 5]])).tolist()
    [0.5, nan]
    """
    consumed = np.asarray(consumed, dtype=np.int64)
    available = np.asarray(available, dtype=np.int64)
    if consumed.shape != available.shape or consumed.ndim != 2:
        raise ValueError(
            f"consumed {consumed.shape} and available {available.shape} must both be [num_epochs, num_ranks]"
        )
    known = (consumed >= 0).all(axis=1) & (available >= 0).all(axis=1)
    total = np.where(known, available.sum(axis=1), 0).astype(np.float64)
    used = np.where(known, consumed.sum(axis=1), 0).astype(np.float64)
    out = np.full(consumed.shape[0], np.nan)
    ok = known & (total > 0)
    out[ok] = 1.0 - used[ok] / total[ok]
    return out


def expected_steps(
    steps: np.ndarray, consumed: np.ndarray, available: np.ndarray, *, sync_every: int = 1
) -> np.ndarray:
    """Per sub-epoch, the steps it should have made, each rank going on at its own logged rate (rank r runs
    out after ``X_r = steps * available / consumed``). Under grad sync (``sync_every=1``) every rank stops
    when the first runs out: ``min over ranks of X_r``. Under param sync every ``sync_every`` steps the
    others run on to their next control sync (:func:`~i6_shard.core.pure.batching.sync_stop` of the first
    rank's whole steps), or until their own data ends: ``max over ranks of min(X_r, that sync)``.

    In a healthy sub-epoch this is the logged steps: the first rank out consumed all it had. When
    the sub-epoch dataset shards its files again (RETURNN #1738), every rank runs out after about
    ``1/num_ranks`` of its files, so the steps are that share of this.

    :param steps: int, shape [num_epochs, num_ranks]
    :param consumed: int, shape [num_epochs, num_ranks] (frames or sequences); negative where unknown
    :param available: int, same shape, what the rank's files hold; negative where unknown
    :param sync_every: steps between the ranks' control syncs: 1 under grad sync, ``param_sync_step`` under
        param sync
    :return: float64, shape [num_epochs]; nan where no rank has known, positive counts

    >>> expected_steps(np.array([[4, 4], [3, 3]]), np.array([[400, 390], [10, -1]]),
    ...                np.array([[400, 800], [20, 50]])).tolist()
    [4.0, 6.0]
    >>> expected_steps(np.array([[4, 5]]), np.array([[400, 500]]), np.array([[400, 1600]]), sync_every=3).tolist()
    [5.0]
    """
    steps, consumed, available = (np.asarray(a, dtype=np.int64) for a in (steps, consumed, available))
    if not steps.shape == consumed.shape == available.shape or steps.ndim != 2:
        raise ValueError(
            f"steps {steps.shape}, consumed {consumed.shape} and available {available.shape} must all "
            "be [num_epochs, num_ranks]"
        )
    ok = (steps > 0) & (consumed > 0) & (available >= 0)
    per_rank = np.full(steps.shape, np.inf)
    per_rank[ok] = steps[ok] * available[ok] / consumed[ok]
    out = per_rank.min(axis=1)
    if sync_every != 1:
        first = np.where(np.isfinite(out), np.ceil(out - 1e-9), 0.0)  # the first rank out's whole steps
        stop = sync_stop(first, sync_every=sync_every)
        out = np.where(ok, np.minimum(per_rank, stop[:, None]), -np.inf).max(axis=1)
    out[~ok.any(axis=1)] = np.nan
    return out


def read_counts(files: Sequence[Optional[Sequence[str]]]) -> Counter:
    """How often each file key was given to a rank, over the (sub-epoch, rank) file lists of one
    full epoch (None entries, lists the log does not show, are skipped).

    >>> sorted(read_counts([["a", "b"], None, ["b"]]).items())
    [('a', 1), ('b', 2)]
    """
    counts: Counter = Counter()
    for keys in files:
        if keys is not None:
            counts.update(keys)
    return counts


def infer_partition_epoch(files_per_epoch: Sequence[Optional[Sequence[str]]]) -> Optional[int]:
    """The partition_epoch the file lists show: the first number of sub-epochs whose files (over
    all ranks) cover every file seen, provided a later sub-epoch follows (so the data is known to
    start over). None if the lists do not show it (too few sub-epochs, or one unknown on the way).

    :param files_per_epoch: per sub-epoch 1, 2, ...: the keys of all ranks together, or None

    >>> infer_partition_epoch([["a"], ["b"], ["b"], ["a"]])
    2
    >>> infer_partition_epoch([["a"], ["b"]]) is None
    True
    """
    universe = set()
    for keys in files_per_epoch:
        if keys is not None:
            universe.update(keys)
    seen = set()
    for idx, keys in enumerate(itertools.islice(files_per_epoch, max(0, len(files_per_epoch) - 1))):
        if keys is None:
            return None
        seen.update(keys)
        if seen == universe:
            return idx + 1
    return None

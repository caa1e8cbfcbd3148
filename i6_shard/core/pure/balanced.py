"""The balanced distribution: size-balanced sub-epoch groups, then largest-first
assignment of each group's files to the ranks, so that no rank runs dry early."""

from __future__ import annotations

import heapq
from fractions import Fraction
from typing import Dict, List, Optional, Tuple

import numpy as np

from .args import check_int
from .distribute import check_costs, check_enough_files, distribute_evenly_by_size


def distribute_balanced(sizes: np.ndarray, *, num_shards: int, partition_epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    """Bins of one full epoch for the files in the given (shuffled) order, balanced per sub-epoch.

    A replacement for the bins of RETURNN's ``DistributeFilesDataset._distribute_evenly_by_size``
    (``num_bins = num_shards * partition_epoch``), in RETURNN's bin order: bin ``r*P + s``
    is what rank r reads in sub-epoch s. Two stages:

    1. cut the list into ``partition_epoch`` contiguous, size-balanced groups, exactly as
       RETURNN cuts bins (:func:`distribute_evenly_by_size`), moved only where a group
       would get fewer than ``num_shards`` files (:func:`group_bounds`);
    2. give each group's files to the ranks largest first, each onto the rank with the
       least load so far (:func:`assign_largest_first`).

    Files of (nearly) equal size cannot be balanced by stage 2 when a group's file count is
    not a multiple of W (500 files on 64 ranks: some get 7, some 8, and 10% is dropped).
    So where the first cut drops more than 0.1%, a second cut, with each boundary rounded to
    the nearest multiple of W files, is tried too, and the cut whose sub-epochs drop the
    smaller fraction of their bytes (mean over sub-epochs of ``1 - W*min/sum``, compared
    exactly) wins; ties keep the first cut. The result is therefore never worse than
    largest-first on RETURNN's cut.

    Last, RETURNN's own bins (``distribute_evenly_by_size`` into W*P bins, unchanged) are
    measured the same way and returned instead if they drop a strictly smaller fraction
    (compared exactly). That happens only on tiny inputs (a few files per rank and
    sub-epoch, e.g. 8 files, W=2, P=4), where largest-first per group can lose to RETURNN's
    luckier cut; so "balanced" never drops more than RETURNN's distribution on this measure.
    Then the sub-epochs are not contiguous groups of the given order, as RETURNN's are not.

    Within a bin the files keep the given order. All ranks compute the same bins from the
    same sizes: there are only integer sums, exact fractions and stable sorts.

    :param sizes: int64 sizes in the (shuffled) order, shape [num_files]
    :param num_shards: W, the number of ranks
    :param partition_epoch: P, sub-epochs per full epoch
    :return: ``(order, bounds)``: int64 positions into ``sizes``, shape [num_files], grouped
        bin by bin, and int64 boundaries, shape [W*P + 1]; bin b is ``order[bounds[b]:bounds[b+1]]``
    :raises ValueError: if there are fewer than W*P files (some bin would be empty)

    >>> order, bounds = distribute_balanced(np.array([9, 1, 1, 1, 4, 4]), num_shards=2, partition_epoch=1)
    >>> [order[bounds[b]:bounds[b + 1]].tolist() for b in range(2)]  # loads 9+1, 1+4+4+1
    [[0, 2], [1, 3, 4, 5]]
    >>> order, bounds = distribute_balanced(np.array([0, 0, 0, 0]), num_shards=2, partition_epoch=2)
    >>> [order[bounds[b]:bounds[b + 1]].tolist() for b in range(4)]  # rank 0: bins 0, 1; rank 1: bins 2, 3
    [[0], [2], [1], [3]]
    >>> order, bounds = distribute_balanced(np.ones(6, dtype=np.int64), num_shards=2, partition_epoch=2)
    >>> np.diff(bounds).tolist()  # groups of 4 + 2 files, not RETURNN's 3 + 3 (one rank a file short)
    [2, 1, 2, 1]
    """
    order, bounds, _, _ = _balanced_split(sizes, num_shards=num_shards, partition_epoch=partition_epoch)
    return order, bounds


def _balanced_split(
    sizes: np.ndarray, *, num_shards: int, partition_epoch: int
) -> Tuple[np.ndarray, np.ndarray, Fraction, Dict[Tuple[int, int], tuple]]:
    """:func:`distribute_balanced` with what it computed on the way: ``(order, bounds, dropped, groups)``,
    with ``dropped`` the exact sum over sub-epochs of ``1 - W*min/sum`` of the result, and ``groups`` the
    largest-first assignment (:func:`_assign_group`) of every contiguous group it tried, by ``(start, end)``."""
    sizes = check_costs(sizes)
    num_files = int(sizes.shape[0])
    check_enough_files(num_files, num_shards=num_shards, partition_epoch=partition_epoch)
    num_shards, partition_epoch = int(num_shards), int(partition_epoch)
    cut = group_bounds(sizes, num_groups=partition_epoch, min_group_size=num_shards)
    groups = _assign_groups(sizes, cut, num_shards=num_shards)
    tried = {(int(cut[s]), int(cut[s + 1])): groups[s] for s in range(partition_epoch)}
    loss = sum((_dropped(loads, num_shards) for _, _, loads in groups), Fraction(0))
    if num_shards > 1 and loss > _TRY_ALIGNED_CUT_ABOVE * partition_epoch:
        aligned = _min_group_size(
            ((cut + num_shards // 2) // num_shards) * num_shards, num_files=num_files, min_group_size=num_shards
        )
        if not np.array_equal(aligned, cut):
            aligned_groups = _assign_groups(sizes, aligned, num_shards=num_shards)
            tried.update({(int(aligned[s]), int(aligned[s + 1])): aligned_groups[s] for s in range(partition_epoch)})
            aligned_loss = sum((_dropped(loads, num_shards) for _, _, loads in aligned_groups), Fraction(0))
            if aligned_loss < loss:
                cut, groups, loss = aligned, aligned_groups, aligned_loss
    if num_shards > 1 and loss > 0:
        returnn_bounds = distribute_evenly_by_size(sizes, num_bins=num_shards * partition_epoch)
        returnn_loads = np.add.reduceat(sizes, returnn_bounds[:-1]).reshape(num_shards, partition_epoch)
        returnn_loss = sum((_dropped(returnn_loads[:, s], num_shards) for s in range(partition_epoch)), Fraction(0))
        if returnn_loss < loss:
            return np.arange(num_files, dtype=np.int64), returnn_bounds, returnn_loss, tried
    order, bounds = _bins_from_groups(cut, groups, num_shards=num_shards, partition_epoch=partition_epoch)
    return order, bounds, loss, tried


def _bins_from_groups(
    cut: Optional[np.ndarray],
    groups: list,
    *,
    num_shards: int,
    partition_epoch: int,
    members: Optional[List[np.ndarray]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)`` in RETURNN's bin order from contiguous groups (``cut``) and their per-rank assignment,
    or from groups given as sorted positions (``members``, one int64 array per group; ``cut`` then None)."""
    # Bin r*P + s holds group s's files of rank r; concatenate the slices rank-major.
    pieces, counts = [], np.empty((num_shards, partition_epoch), dtype=np.int64)
    for s, (by_rank, rank_starts, _) in enumerate(groups):
        counts[:, s] = np.diff(rank_starts)
        pieces.append(members[s][by_rank] if members is not None else by_rank + cut[s])
    order = np.concatenate(
        [
            pieces[s][int(groups[s][1][r]) : int(groups[s][1][r + 1])]
            for r in range(num_shards)
            for s in range(partition_epoch)
        ]
    )
    bounds = np.zeros(num_shards * partition_epoch + 1, dtype=np.int64)
    np.cumsum(counts.reshape(-1), out=bounds[1:])
    return order, bounds


#: The cut aligned to multiples of W files is only tried when largest-first on RETURNN's cut drops
#: more than this (mean over sub-epochs); below, files per rank are so many that granularity costs next to nothing.
_TRY_ALIGNED_CUT_ABOVE = Fraction(1, 1000)


def _assign_groups(sizes: np.ndarray, cut: np.ndarray, *, num_shards: int) -> list:
    return [_assign_group(sizes[int(cut[s]) : int(cut[s + 1])], num_shards=num_shards) for s in range(len(cut) - 1)]


def _assign_group(sizes: np.ndarray, *, num_shards: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Largest-first on one group: (positions sorted by rank, stable; rank starts [W+1]; loads [W])."""
    rank = assign_largest_first(sizes, num_bins=num_shards)
    # A stable sort of small ints is a radix sort in numpy: keep the rank narrow.
    by_rank = np.argsort(
        rank.astype(np.int16 if num_shards <= np.iinfo(np.int16).max else np.int32), kind="stable"
    ).astype(np.int64, copy=False)
    rank_starts = np.zeros(num_shards + 1, dtype=np.int64)
    np.cumsum(np.bincount(rank, minlength=num_shards), out=rank_starts[1:])
    assert int(np.diff(rank_starts).min()) >= 1, "every rank has a file"
    loads = np.add.reduceat(sizes[by_rank], rank_starts[:-1])
    return by_rank, rank_starts, loads


def _dropped(loads: np.ndarray, num_shards: int) -> Fraction:
    """Exact ``1 - W*min/sum`` of one sub-epoch (0 for a sub-epoch without bytes)."""
    total = int(loads.sum())
    return Fraction(total - num_shards * int(loads.min()), total) if total else Fraction(0)


def group_bounds(sizes: np.ndarray, *, num_groups: int, min_group_size: int = 1) -> np.ndarray:
    """Contiguous size-balanced groups with at least ``min_group_size`` files each.

    The cut is RETURNN's (``distribute_evenly_by_size(sizes, num_bins=num_groups)``); a
    boundary moves only where a group would be smaller than ``min_group_size``, by as few
    files as needed to make every group large enough (a forward, then a backward pass).

    :param sizes: int64 sizes in order, shape [num_files]
    :param num_groups: number of groups (sub-epochs)
    :param min_group_size: smallest number of files in a group (the number of ranks)
    :return: int64 boundaries, shape [num_groups + 1]; group g is ``sizes[b[g]:b[g+1]]``

    >>> distribute_evenly_by_size(np.array([100, 1, 1, 1, 1, 1]), num_bins=2).tolist()
    [0, 1, 6]
    >>> group_bounds(np.array([100, 1, 1, 1, 1, 1]), num_groups=2, min_group_size=2).tolist()
    [0, 2, 6]
    """
    sizes = check_costs(sizes)
    num_files = int(sizes.shape[0])
    min_group_size = check_int(min_group_size, name="min_group_size", minimum=1)
    if num_files < num_groups * min_group_size:
        raise ValueError(
            f"{num_files} files cannot fill {num_groups} groups of at least {min_group_size} files; "
            "lower partition_epoch or num_shards, or split the data into more files"
        )
    bounds = distribute_evenly_by_size(sizes, num_bins=num_groups)
    return _min_group_size(bounds, num_files=num_files, min_group_size=min_group_size)


def _min_group_size(bounds: np.ndarray, *, num_files: int, min_group_size: int) -> np.ndarray:
    """Move sorted boundaries (first 0, last num_files) just enough for groups of >= min_group_size."""
    bounds = bounds.astype(np.int64, copy=True)
    bounds[0], bounds[-1] = 0, num_files
    if int(np.diff(bounds).min()) < min_group_size:
        steps = np.arange(len(bounds), dtype=np.int64) * min_group_size
        # forwards: b[g] >= b[g'] + (g - g') * m for all g' < g; backwards likewise from the end
        bounds = np.maximum.accumulate(bounds - steps) + steps
        bounds[-1] = num_files
        bounds = np.minimum.accumulate((bounds + steps[::-1])[::-1])[::-1] - steps[::-1]
    assert bounds[0] == 0 and bounds[-1] == num_files and int(np.diff(bounds).min()) >= min_group_size
    return bounds


def assign_largest_first(sizes: np.ndarray, *, num_bins: int) -> np.ndarray:
    """Longest-processing-time-first assignment: the files, largest first (ties: earlier
    first), each go to the bin with the least load (ties: fewer files, then lower index).

    The result is exactly that of the one-file-at-a-time heap loop, which is what runs for
    fewer than 32 bins. With more bins, the files are placed in runs: while the k next files
    provably go to the k least-loaded bins in turn, they are placed in one step. A run ends at
    the first file whose target another file of the same run would overtake, so runs are close
    to ``num_bins`` files once loads are even.

    With at least ``num_bins`` files no bin stays empty: an empty bin always comes first.

    :param sizes: int64 sizes, shape [num_files]
    :param num_bins: number of bins (ranks)
    :return: int64 bin index per file, shape [num_files]

    >>> assign_largest_first(np.array([3, 5, 3, 0, 2]), num_bins=2).tolist()  # 5 | 3 3 | 2 | 0
    [1, 0, 1, 1, 0]
    >>> assign_largest_first(np.array([0, 0, 0]), num_bins=2).tolist()  # equal loads: fewer files first
    [0, 1, 0]
    """
    sizes = check_costs(sizes)
    num_bins = check_int(num_bins, name="num_bins", minimum=1)
    out = np.zeros(int(sizes.shape[0]), dtype=np.int64)
    if num_bins == 1 or not sizes.size:
        return out
    by_size = np.argsort(-sizes, kind="stable")  # largest first, ties by position
    lpt = _lpt_heap if num_bins < _MIN_BINS_FOR_RUNS else _lpt_runs
    out[by_size] = lpt(sizes[by_size], num_bins)
    return out


#: From this many bins on, placing runs of files with numpy beats the heap loop.
_MIN_BINS_FOR_RUNS = 32


def _lpt_heap(sorted_sizes: np.ndarray, num_bins: int) -> np.ndarray:
    """LPT over sizes sorted largest first, one file at a time: bin per file."""
    # Heap entries (load, count*num_bins + bin): least load, then fewer files, then lower index.
    heap = [(0, b) for b in range(num_bins)]
    ties = []
    append, replace = ties.append, heapq.heapreplace
    for size in sorted_sizes.tolist():
        load, tie = heap[0]
        append(tie)
        replace(heap, (load + size, tie + num_bins))
    return np.array(ties, dtype=np.int64) % num_bins


def _lpt_runs(sorted_sizes: np.ndarray, num_bins: int) -> np.ndarray:
    """LPT over sizes sorted largest first, in runs of up to ``num_bins`` files: bin per file."""
    num_files = int(sorted_sizes.shape[0])
    out = np.empty(num_files, dtype=np.int64)
    load = np.zeros(num_bins, dtype=np.int64)
    # Secondary key: file count, then bin index, as one int64 (count*num_bins + index).
    tie = np.arange(num_bins, dtype=np.int64)
    pos = 0
    while pos < num_files:
        cand = np.lexsort((tie, load))  # bins by (load, count, index)
        run = min(num_bins, num_files - pos)
        cand = cand[:run]
        old_load, old_tie = load[cand], tie[cand]
        new_load, new_tie = old_load + sorted_sizes[pos : pos + run], old_tie + num_bins
        # File j goes to cand[j] if that bin's key is below every key the files 0..j-1 created.
        # Loads decide unless they are equal; then compare whole keys (rare, so done only then).
        lowest_new_load = np.minimum.accumulate(new_load)
        below = old_load[1:] < lowest_new_load[:-1]
        take = run if below.all() else 1 + int(np.argmin(below))
        if take < run and old_load[take] == lowest_new_load[take - 1]:
            take = _run_length_exact(old_load, old_tie, new_load, new_tie)
        chosen = cand[:take]
        out[pos : pos + take] = chosen
        load[chosen] = new_load[:take]
        tie[chosen] = new_tie[:take]
        pos += take
    return out


def _run_length_exact(old_load: np.ndarray, old_tie: np.ndarray, new_load: np.ndarray, new_tie: np.ndarray) -> int:
    """How many files of a run go to the candidate bins in turn, comparing whole (load, tie) keys:
    rank all 2*run keys (distinct, as each contains its bin index) and compare ranks."""
    run = len(old_load)
    key_rank = np.empty(2 * run, dtype=np.int64)
    key_rank[np.lexsort((np.concatenate([old_tie, new_tie]), np.concatenate([old_load, new_load])))] = np.arange(
        2 * run, dtype=np.int64
    )
    beaten = key_rank[1:run] > np.minimum.accumulate(key_rank[run:])[:-1]
    return run if not beaten.any() else 1 + int(np.argmax(beaten))

"""The balanced distribution: size-balanced sub-epoch groups, then largest-first
assignment of each group's files to the ranks, so that no rank runs dry early."""

from __future__ import annotations

from typing import Tuple

import numpy as np

from .distribute import check_enough_files, distribute_evenly_by_size

__all__ = ["assign_largest_first", "distribute_balanced", "group_bounds"]


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

    Within a bin the files keep the given order. All ranks compute the same bins from the
    same sizes: there are only integer sums and stable sorts.

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
    """
    sizes = _check_sizes(sizes)
    check_enough_files(int(sizes.shape[0]), num_shards=num_shards, partition_epoch=partition_epoch)
    num_shards, partition_epoch = int(num_shards), int(partition_epoch)
    groups = group_bounds(sizes, num_groups=partition_epoch, min_group_size=num_shards)
    bin_of = np.empty(sizes.shape[0], dtype=np.int64)
    for sub_epoch_idx in range(partition_epoch):
        start, end = int(groups[sub_epoch_idx]), int(groups[sub_epoch_idx + 1])
        rank = assign_largest_first(sizes[start:end], num_bins=num_shards)
        bin_of[start:end] = rank * partition_epoch + sub_epoch_idx
    order = np.argsort(bin_of, kind="stable").astype(np.int64, copy=False)
    bounds = np.zeros(num_shards * partition_epoch + 1, dtype=np.int64)
    np.cumsum(np.bincount(bin_of, minlength=num_shards * partition_epoch), out=bounds[1:])
    return order, bounds


def group_bounds(sizes: np.ndarray, *, num_groups: int, min_group_size: int = 1) -> np.ndarray:
    """Contiguous size-balanced groups with at least ``min_group_size`` files each.

    The cut is RETURNN's (``distribute_evenly_by_size(sizes, num_bins=num_groups)``); a
    boundary moves only where a group would be smaller than ``min_group_size``, by as few
    files needed to make every group large enough (a forward, then a backward pass).

    :param sizes: int64 sizes in order, shape [num_files]
    :param num_groups: number of groups (sub-epochs)
    :param min_group_size: smallest number of files in a group (the number of ranks)
    :return: int64 boundaries, shape [num_groups + 1]; group g is ``sizes[b[g]:b[g+1]]``

    >>> distribute_evenly_by_size(np.array([100, 1, 1, 1, 1, 1]), num_bins=2).tolist()
    [0, 1, 6]
    >>> group_bounds(np.array([100, 1, 1, 1, 1, 1]), num_groups=2, min_group_size=2).tolist()
    [0, 2, 6]
    """
    sizes = _check_sizes(sizes)
    num_files = int(sizes.shape[0])
    if not isinstance(min_group_size, (int, np.integer)) or min_group_size < 1:
        raise ValueError(f"min_group_size={min_group_size!r} must be a positive int")
    if num_files < num_groups * min_group_size:
        raise ValueError(f"{num_files} files cannot fill {num_groups} groups of at least {min_group_size} files; "
                         "lower partition_epoch or num_shards, or split the data into more files")
    bounds = distribute_evenly_by_size(sizes, num_bins=num_groups)
    if min_group_size > 1 and int(np.diff(bounds).min()) < min_group_size:
        steps = np.arange(num_groups + 1, dtype=np.int64) * min_group_size
        # forwards: b[g] >= b[g'] + (g - g') * m for all g' < g; backwards likewise from the end
        bounds = np.maximum.accumulate(bounds - steps) + steps
        bounds[-1] = num_files
        bounds = np.minimum.accumulate((bounds + steps[::-1])[::-1])[::-1] - steps[::-1]
    assert bounds[0] == 0 and bounds[-1] == num_files and int(np.diff(bounds).min()) >= min_group_size
    return bounds


def assign_largest_first(sizes: np.ndarray, *, num_bins: int) -> np.ndarray:
    """Longest-processing-time-first assignment: the files, largest first (ties: earlier
    first), each go to the bin with the least load (ties: fewer files, then lower index).

    The result is exactly that of the one-file-at-a-time heap loop, but the files are placed
    in runs: while the k next files provably go to the k least-loaded bins in turn, they
    are placed in one step. A run ends at the first file whose target another file of the
    same run would overtake, so runs are close to ``num_bins`` files once loads are even.

    With at least ``num_bins`` files no bin stays empty: an empty bin always comes first.

    :param sizes: int64 sizes, shape [num_files]
    :param num_bins: number of bins (ranks)
    :return: int64 bin index per file, shape [num_files]

    >>> assign_largest_first(np.array([3, 5, 3, 0, 2]), num_bins=2).tolist()  # 5 | 3 3 | 2 | 0
    [1, 0, 1, 1, 0]
    >>> assign_largest_first(np.array([0, 0, 0]), num_bins=2).tolist()  # equal loads: fewer files first
    [0, 1, 0]
    """
    sizes = _check_sizes(sizes)
    if not isinstance(num_bins, (int, np.integer)) or num_bins < 1:
        raise ValueError(f"num_bins={num_bins!r} must be a positive int")
    num_bins = int(num_bins)
    num_files = int(sizes.shape[0])
    out = np.empty(num_files, dtype=np.int64)
    if num_bins == 1 or num_files == 0:
        out[:] = 0
        return out
    by_size = np.argsort(-sizes, kind="stable")  # largest first, ties by position
    sorted_sizes = sizes[by_size]
    load = np.zeros(num_bins, dtype=np.int64)
    # Secondary key: file count, then bin index, as one int64 (count*num_bins + index).
    tie = np.arange(num_bins, dtype=np.int64)
    pos = 0
    while pos < num_files:
        cand = np.lexsort((tie, load))  # bins by (load, count, index)
        run = min(num_bins, num_files - pos)
        cand = cand[:run]
        old_load, old_tie = load[cand], tie[cand]
        new_load, new_tie = old_load + sorted_sizes[pos:pos + run], old_tie + num_bins
        # File j goes to cand[j] if that bin's key is below every key the files 0..j-1 created.
        # Rank all 2*run keys (distinct: each contains its bin index) and compare ranks.
        key_rank = np.empty(2 * run, dtype=np.int64)
        key_rank[np.lexsort((np.concatenate([old_tie, new_tie]), np.concatenate([old_load, new_load])))] = \
            np.arange(2 * run, dtype=np.int64)
        lowest_new = np.minimum.accumulate(key_rank[run:])
        beaten = key_rank[1:run] > lowest_new[:-1]
        take = run if not beaten.any() else 1 + int(np.argmax(beaten))
        chosen = cand[:take]
        out[by_size[pos:pos + take]] = chosen
        load[chosen] = new_load[:take]
        tie[chosen] = new_tie[:take]
        pos += take
    return out


def _check_sizes(sizes: np.ndarray) -> np.ndarray:
    sizes = np.asarray(sizes)
    if sizes.ndim != 1:
        raise ValueError(f"sizes must be 1-D, got shape {sizes.shape}")
    if sizes.size and not np.issubdtype(sizes.dtype, np.integer):
        raise TypeError(f"sizes must be integers (bytes), got dtype {sizes.dtype}")
    sizes = sizes.astype(np.int64, copy=False)
    if sizes.size and int(sizes.min()) < 0:
        raise ValueError(f"sizes must be >= 0, got {int(sizes.min())}")
    return sizes

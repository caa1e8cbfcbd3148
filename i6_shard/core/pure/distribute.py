"""RETURNN-exact shuffle and size-balanced bin cutting of DistributeFilesDataset,
as pure functions over int64 arrays (prefix sums and binary search, no file loop)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .args import check_int

__all__ = ["UNSHARDED_RANK_SEED_STRIDE", "check_enough_files", "dfd_num_shards"]

#: RETURNN's per-rank ``random_seed_offset`` stride without file sharding: under ``torch_distributed``
#: (dataset_distribution "random_seed_offset", the default), ``Dataset._get_default_random_seed_offset``
#: gives rank r the offset ``r * 16127 + dataset_random_seed_offset`` (the config's), unless the dataset
#: sets ``random_seed_offset`` itself.
UNSHARDED_RANK_SEED_STRIDE = 16127


def check_costs(costs: np.ndarray) -> np.ndarray:
    """The costs array a cut takes (sizes, frames, sequences or steps per file, in the shuffled order), as int64:
    the one check of its shape, type and sign.

    :raises ValueError: unless 1-D, >= 0 and within int64
    :raises TypeError: unless integer

    >>> check_costs(np.array([[1, 2]]))
    Traceback (most recent call last):
    ...
    ValueError: sizes must be 1-D, got shape (1, 2)
    """
    costs = np.asarray(costs)
    if costs.ndim != 1:
        raise ValueError(f"sizes must be 1-D, got shape {costs.shape}")
    if costs.size and not np.issubdtype(costs.dtype, np.integer):
        raise TypeError(f"sizes must be integers (bytes), got dtype {costs.dtype}")
    if costs.size and int(costs.min()) < 0:
        raise ValueError(f"sizes must be >= 0, got {int(costs.min())}")
    if costs.size and costs.dtype.kind == "u" and int(costs.max()) >= 2**63:
        raise ValueError(f"sizes up to {int(costs.max())} do not fit int64; pass them in a coarser unit")
    return costs.astype(np.int64, copy=False)


def check_enough_files(num_files: int, *, num_shards: int, partition_epoch: int) -> None:
    """Raise a clear error where RETURNN would fail with a bare assert at training time.
    The hint names only changes that help: fewer shards only if there are several, and
    for an empty list, that it is empty.

    >>> check_enough_files(10, num_shards=4, partition_epoch=3)
    Traceback (most recent call last):
    ...
    ValueError: 10 files cannot fill num_shards*partition_epoch=4*3=12 bins: every rank needs at least one file per sub-epoch. Lower partition_epoch to at most 2, use fewer shards, or split the data into more files.
    >>> check_enough_files(3, num_shards=1, partition_epoch=4)
    Traceback (most recent call last):
    ...
    ValueError: 3 files cannot fill num_shards*partition_epoch=1*4=4 bins: every rank needs at least one file per sub-epoch. Lower partition_epoch to at most 3, or split the data into more files.
    """
    num_shards = check_int(num_shards, name="num_shards", minimum=1)
    partition_epoch = check_int(partition_epoch, name="partition_epoch", minimum=1)
    num_bins = num_shards * partition_epoch
    if num_files < num_bins:
        max_p = num_files // num_shards
        if num_files < 1:
            hint = "The file list is empty: give it the files to train on."
        elif max_p >= 1:
            fewer = ", use fewer shards" if num_shards > 1 else ""
            hint = f"Lower partition_epoch to at most {max_p}{fewer}, or split the data into more files."
        else:  # fewer files than shards (so num_shards > 1)
            hint = f"Use at most {num_files} shards (with partition_epoch=1), or split the data into more files."
        raise ValueError(
            f"{num_files} files cannot fill num_shards*partition_epoch={num_shards}*{partition_epoch}={num_bins} "
            f"bins: every rank needs at least one file per sub-epoch. {hint}"
        )


def dfd_num_shards(
    *, distrib_shard_files: bool, num_ranks: Optional[int] = None, explicit_num_shards: Optional[int] = None
) -> int:
    """The number of shards a DistributeFilesDataset cuts each full epoch for (its ``_num_shards``;
    it cuts ``_num_shards * partition_epoch`` bins), as ``DistributeFilesDataset.__init__`` sets it:
    the distributed world size with ``distrib_shard_files``, else the ``_num_shards`` the dataset was
    given (by ``torch_distributed`` ``dataset_distribution="shard"`` or in the dict), else 1.

    :param num_ranks: the world size, if known (unknown: the smallest count, 1, is assumed)
    :param explicit_num_shards: ``_num_shards`` given to the dataset, if any

    >>> dfd_num_shards(distrib_shard_files=True, num_ranks=8), dfd_num_shards(distrib_shard_files=False, num_ranks=8)
    (8, 1)
    """
    if distrib_shard_files and num_ranks:
        return int(num_ranks)
    return int(explicit_num_shards or 1)


def distribute_evenly_by_size(sizes: np.ndarray, *, num_bins: int) -> np.ndarray:
    """Bin boundaries for files in the given order, exactly as RETURNN's
    ``DistributeFilesDataset._distribute_evenly_by_size`` would cut them.

    RETURNN walks the files one by one; the cut points only depend on running sums,
    so here each bin's end is found by binary search over the int64 prefix sums.
    Comparisons against RETURNN's float running average are done with exact
    Python integers, as RETURNN does them.

    :param sizes: int64 sizes in the (shuffled) order, shape [num_files]
    :param num_bins: num_shards * partition_epoch
    :return: int64 boundaries, shape [num_bins + 1]; bin i is files[b[i]:b[i+1]]

    >>> distribute_evenly_by_size(np.array([1, 1, 78, 120]), num_bins=4).tolist()
    [0, 1, 2, 3, 4]
    >>> distribute_evenly_by_size(np.array([5, 5] + [10] * 7), num_bins=5).tolist()
    [0, 3, 5, 6, 7, 9]
    >>> distribute_evenly_by_size(np.array([0, 0, 0]), num_bins=1).tolist()
    [0, 3]
    """
    sizes = check_costs(sizes)
    num_bins = check_int(num_bins, name="num_bins", minimum=1)
    n = int(sizes.shape[0])
    if n < num_bins:
        raise ValueError(
            f"{n} files cannot fill num_bins={num_bins} bins; lower partition_epoch or num_shards, "
            "or split the data into more files"
        )
    if sizes.size and int(sizes.max()) * n >= 2**63:
        raise ValueError(
            f"sizes up to {int(sizes.max())} over {n} files could overflow int64 prefix sums; "
            "pass sizes in a coarser unit"
        )
    prefix = np.empty(n + 1, dtype=np.int64)
    prefix[0] = 0
    np.cumsum(sizes, dtype=np.int64, out=prefix[1:])
    total = int(prefix[-1])
    bounds = np.empty(num_bins + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[num_bins] = n

    avg = total / num_bins
    bin_start = 0  # first file of the current bin
    i = 0  # next file to look at
    bin_idx = 0
    while bin_idx < num_bins - 1:
        # RETURNN forces one file per bin once num_remaining <= num_bins - bin_idx - 1.
        forced_from = n - (num_bins - bin_idx - 1)
        base = int(prefix[bin_start])
        # First j in [i, forced_from) with prefix[j+1] - base > avg, i.e. the file that overflows the bin.
        j = _first_exceeding(prefix, lo=i, hi=forced_from, base=base, avg=avg)
        if j >= forced_from:
            # Forced: files [bin_start, forced_from) stay, then one file per remaining bin.
            assert forced_from > bin_start, "RETURNN invariant: current bin is not empty"
            bounds[bin_idx + 1 : num_bins] = np.arange(forced_from, n, dtype=np.int64)
            return bounds
        size_taken = int(prefix[j]) - base
        size = int(prefix[j + 1]) - int(prefix[j])
        total_taken = int(prefix[j + 1])
        if j == bin_start or abs((size_taken + size) - avg) <= abs(size_taken - avg):
            # File j goes into the current bin; the next bin starts empty after it.
            bin_start = j + 1
        else:
            # File j opens the next bin.
            bin_start = j
        bounds[bin_idx + 1] = bin_start
        i = j + 1
        bin_idx += 1
        avg = (total - total_taken) / (num_bins - bin_idx)
    return bounds


def _first_exceeding(prefix: np.ndarray, *, lo: int, hi: int, base: int, avg: float) -> int:
    """Smallest j in [lo, hi) with ``prefix[j+1] - base > avg`` (exact), else ``hi``."""
    if lo >= hi:
        return hi
    # For integers p: p - base > avg  <=>  p > floor(base + avg). Locate with a rounded integer key
    # (no float copy of the prefix sums), then correct with exact int-vs-float comparisons.
    key = base + math.floor(avg)
    j = int(np.searchsorted(prefix[lo + 1 : hi + 1], key, side="right")) + lo
    while j > lo and int(prefix[j]) - base > avg:
        j -= 1
    while j < hi and not (int(prefix[j + 1]) - base > avg):
        j += 1
    return j


def full_epoch_seed(
    full_epoch_0idx: int, *, random_seed_offset: int = 0, fixed_random_seed: Optional[int] = None
) -> int:
    """The shuffle seed RETURNN uses for a full epoch (``Dataset._get_random_seed_for_epoch``
    at the full epoch's first sub-epoch): ``fixed_random_seed`` if set, else
    ``full_epoch_0idx + 1 + random_seed_offset``.

    >>> full_epoch_seed(0), full_epoch_seed(2, random_seed_offset=16127), full_epoch_seed(5, fixed_random_seed=7)
    (1, 16130, 7)
    """
    if fixed_random_seed is not None:
        return int(fixed_random_seed)
    return int(full_epoch_0idx) + 1 + int(random_seed_offset)


def shuffle_order(num_files: int, *, seed: int) -> np.ndarray:
    """The order ``numpy.random.RandomState(seed).shuffle(files)`` puts a list in:
    entry k of the result is the index of the file at position k.

    RETURNN shuffles a Python list; ``RandomState.permutation`` draws the same swaps.

    >>> files = ["a", "b", "c", "d", "e"]
    >>> ref = list(files); np.random.RandomState(3).shuffle(ref)
    >>> [files[k] for k in shuffle_order(5, seed=3)] == ref
    True
    """
    return np.random.RandomState(seed).permutation(num_files).astype(np.int64, copy=False)

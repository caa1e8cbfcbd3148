"""RETURNN's ``DistributeFilesDataset._distribute_evenly_by_size`` as releases before 1.20240705.144031 cut: every
bin aims at the mean of all files (not re-averaged over the bins left), and a bin opened by a file above it fails."""

from __future__ import annotations

import numpy as np

from .args import check_int
from .distribute import check_costs

__all__ = ["distribute_evenly_by_size_fixed_mean"]


def distribute_evenly_by_size_fixed_mean(sizes: np.ndarray, *, num_bins: int) -> np.ndarray:
    """Bin boundaries for files in the given order, exactly as ``DistributeFilesDataset._distribute_evenly_by_size``
    of RETURNN 1.20240620.64807 .. 1.20240628.104058 cuts them (before PR #1572): the target is ``total / num_bins``
    throughout, and where a file above it opens a bin that is not the last, RETURNN fails its
    ``assert size_taken <= avg_size_per_sub_epoch``; here that is a ``ValueError``.

    :param sizes: int64 sizes in the (shuffled) order, shape [num_files]
    :param num_bins: num_shards * partition_epoch
    :return: int64 boundaries, shape [num_bins + 1]; bin i is files[b[i]:b[i+1]]

    >>> distribute_evenly_by_size_fixed_mean(np.array([5, 5] + [10] * 7), num_bins=5).tolist()
    [0, 3, 5, 7, 8, 9]
    >>> distribute_evenly_by_size_fixed_mean(np.array([1, 1, 78, 120]), num_bins=4).tolist()
    [0, 1, 2, 3, 4]
    """
    sizes = check_costs(sizes)
    num_bins = check_int(num_bins, name="num_bins", minimum=1)
    n = int(sizes.shape[0])
    if n < num_bins:
        raise ValueError(
            f"{n} files cannot fill num_bins={num_bins} bins; lower partition_epoch or num_shards, "
            "or split the data into more files"
        )
    values = sizes.tolist()
    avg = sum(values) / num_bins
    bounds = [0]
    bin_idx, size_taken, bin_len = 0, 0, 0  # bin_len: files in the current bin
    for i, size in enumerate(values):
        if n - i <= num_bins - bin_idx - 1:  # every bin left needs a file: one each
            bounds.append(i)
            bin_idx, size_taken, bin_len = bin_idx + 1, size, 1
            continue
        if bin_idx == num_bins - 1:  # the last bin takes the rest
            size_taken, bin_len = size_taken + size, bin_len + 1
            continue
        if size_taken > avg:
            raise ValueError(
                f"RETURNN before 1.20240705.144031 fails on this file order (AssertionError in "
                f"DistributeFilesDataset._distribute_evenly_by_size): bin {bin_idx} opens with {size_taken} > the mean "
                f"{avg:g} of {num_bins} bins; use RETURNN 1.20240705.144031 or later, or another file order (seed)"
            )
        if size_taken + size <= avg:
            size_taken, bin_len = size_taken + size, bin_len + 1
            continue
        if bin_len == 0 or abs((size_taken + size) - avg) <= abs(size_taken - avg):
            bounds.append(i + 1)  # the file closes this bin
            size_taken, bin_len = 0, 0
        else:
            bounds.append(i)  # the file opens the next bin
            size_taken, bin_len = size, 1
        bin_idx += 1
    bounds.append(n)
    assert len(bounds) == num_bins + 1 and all(a < b for a, b in zip(bounds, bounds[1:])), bounds
    return np.asarray(bounds, dtype=np.int64)

"""Generated demo data: a directory of files with lognormal sizes (sparse, so
they cost no disk space), for the demo, tests and benchmarks."""

from __future__ import annotations

import os
from typing import List

import numpy as np

__all__ = ["lognormal_sizes", "make_demo_files"]


def lognormal_sizes(num_files: int, *, seed: int = 0, median_bytes: int = 1_000_000, sigma: float = 1.0) -> np.ndarray:
    """int64 file sizes, lognormal around ``median_bytes``, each at least 1 byte.

    >>> lognormal_sizes(3, seed=1, median_bytes=100).tolist()
    [507, 54, 58]
    """
    rng = np.random.RandomState(seed)
    sizes = np.exp(rng.normal(np.log(median_bytes), sigma, size=num_files))
    return np.maximum(1, sizes.astype(np.int64))


def make_demo_files(
    directory: str,
    *,
    num_files: int = 200,
    seed: int = 0,
    median_bytes: int = 1_000_000,
    sigma: float = 1.0,
    suffix: str = ".hdf",
) -> List[str]:
    """Create ``num_files`` sparse files of lognormal sizes under ``directory``.

    :return: their paths, in name order
    """
    os.makedirs(directory, exist_ok=True)
    sizes = lognormal_sizes(num_files, seed=seed, median_bytes=median_bytes, sigma=sigma)
    width = len(str(max(num_files - 1, 0)))
    paths = []
    for idx, size in enumerate(sizes.tolist()):
        path = os.path.join(directory, f"part-{idx:0{width}d}{suffix}")
        with open(path, "wb") as f:
            f.truncate(size)
        paths.append(path)
    return paths

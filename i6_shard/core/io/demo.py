"""Generated demo data: file sizes of a lognormal distribution, for the demo, tests and benchmarks."""

from __future__ import annotations

import numpy as np


def lognormal_sizes(num_files: int, *, seed: int = 0, median_bytes: int = 1_000_000, sigma: float = 1.0) -> np.ndarray:
    """int64 file sizes, lognormal around ``median_bytes``, each at least 1 byte.

    >>> lognormal_sizes(3, seed=1, median_bytes=100).tolist()
    [507, 54, 58]
    """
    rng = np.random.RandomState(seed)
    sizes = np.exp(rng.normal(np.log(median_bytes), sigma, size=num_files))
    return np.maximum(1, sizes.astype(np.int64))

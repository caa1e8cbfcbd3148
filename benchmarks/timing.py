"""Timing helper shared by the benchmark scripts."""

import time
from typing import Any, Callable, Tuple


def best_of(fn: Callable[[], Any], repeats: int) -> Tuple[float, Any]:
    """Best wall time of ``repeats`` calls of ``fn``, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result

"""Timing and memory helpers shared by the benchmark scripts."""

import resource
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


def rss_mib(field: str = "VmHWM") -> float:
    """Peak (VmHWM) or current (VmRSS) resident memory of this process in MiB. Not ru_maxrss:
    on Linux that keeps the parent's peak across fork+exec, so a child started by a large
    process would report the parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

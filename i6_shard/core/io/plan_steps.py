"""The planned steps a training report compares with the logged ones: read from the plan's ``summary.json`` (written
beside ``plan.npz`` by ``python -m i6_shard plan`` and ShardPlanJob): ``steps_taken`` and ``steps_exact`` per
sub-epoch and rank, the planned drop per sub-epoch, and whether (and why not) the simulation is exact."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

import numpy as np

PLAN_SUMMARY_FILE = "summary.json"
#: Bytes of a plan's summary.json read at most (a plan of 2**20 (sub-epoch, rank) writes some 60 MB); a larger file
#: is not a plan's summary and is refused before it is read.
MAX_PLAN_SUMMARY_BYTES = 1 << 28


def plan_file_of(path: str) -> str:
    """The plan file a ``--plan`` names: the file itself, or ``plan.npz`` in a plan directory.

    >>> plan_file_of("plan/plan.npz")
    'plan/plan.npz'
    """
    return os.path.join(path, "plan.npz") if os.path.isdir(path) else path


def read_planned_steps(plan_path: str, *, num_shards: int, max_epoch: Optional[int] = None) -> Dict[str, Any]:
    """The planned steps of the plan at ``plan_path`` (its file, or its directory), from the ``summary.json``
    beside it; only its sub-epochs up to ``max_epoch`` (the last the logs have) are taken.

    :return: ``{"source", "found", "simulated", "exact", "reason", "steps_taken", "steps_exact", "dropped"}``:
        ``found`` False (and nothing else known) without a summary.json beside the plan; ``simulated`` False for a
        plan made without batching (its summary has no ``steps_taken``); ``steps_taken``/``steps_exact`` int64
        [num_epochs, num_shards], -1 where the simulation is not exact; ``dropped`` float64 [num_epochs] (nan where
        not exact; of the frames the length filter keeps); ``filtered`` float64 [num_epochs], the share the plan's
        length filter removes (None: the plan simulated no filter); ``exact`` per sub-epoch (bool list); ``reason``: why the simulation is not exact, or None
    :raises ValueError: naming the file if it is larger than :data:`MAX_PLAN_SUMMARY_BYTES`, not JSON, or its
        steps are not per sub-epoch a list of ``num_shards`` counts (or null)
    """
    path = os.path.join(os.path.dirname(plan_file_of(plan_path)) or ".", PLAN_SUMMARY_FILE)
    out: Dict[str, Any] = {"source": path, "found": False, "simulated": False, "exact": [], "reason": None}
    if not os.path.isfile(path):
        return out
    fix = "give the plan's own summary.json (written with plan.npz by ShardPlanJob or `python -m i6_shard plan`)"
    size = os.path.getsize(path)
    if size > MAX_PLAN_SUMMARY_BYTES:
        raise ValueError(f"{path!r} has {size:,} bytes, more than the {MAX_PLAN_SUMMARY_BYTES:,} of a plan's; {fix}")
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path!r} is not JSON ({str(exc)[:200]}); {fix}") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{path!r} holds a {type(summary).__name__}, not a plan's summary; {fix}")
    out["found"] = True
    if summary.get("steps_taken") is None:
        return out  # planned without batching: nothing simulated
    taken, exact = (
        _grid(summary.get(name), name, path=path, num_shards=num_shards, fix=fix, max_epoch=max_epoch)
        for name in ("steps_taken", "steps_exact")
    )
    if exact.shape != taken.shape or ((exact < 0) != (taken < 0)).any():
        raise ValueError(f"{path!r}: steps_exact and steps_taken do not cover the same sub-epochs; {fix}")
    sim = (summary.get("batching") or {}).get("simulation") or {}
    per_sub_epoch = (summary.get("batching") or {}).get("per_sub_epoch") or {}
    known = (taken >= 0).all(axis=1)
    dropped, filtered = (_shares(per_sub_epoch.get(name), known) for name in ("dropped_fraction", "filtered_fraction"))
    out.update(
        filtered=filtered if "filtered_fraction" in per_sub_epoch else None,
        simulated=True,
        exact=known.tolist(),
        reason=None if sim.get("exact", bool(known.all())) else str(sim.get("reason"))[:500],
        steps_taken=taken,
        steps_exact=exact,
        dropped=dropped,
    )
    return out


def _shares(values: Any, known: np.ndarray) -> np.ndarray:
    """A summary's per-sub-epoch shares as float64 [num_epochs], nan where unknown, not a share or not exact."""
    out = np.full(known.shape[0], np.nan)
    for i, x in enumerate((values if isinstance(values, list) else [])[: known.shape[0]]):
        if known[i] and isinstance(x, (int, float)) and not isinstance(x, bool) and 0.0 <= x <= 1.0:
            out[i] = float(x)
    return out


def _grid(value: Any, name: str, *, path: str, num_shards: int, fix: str, max_epoch: Optional[int]) -> np.ndarray:
    """Per sub-epoch a list of ``num_shards`` step counts or None, as an int64 grid (-1 for None), of the first
    ``max_epoch`` sub-epochs."""
    if not isinstance(value, list):
        raise ValueError(f"{path!r}: {name} is a {type(value).__name__}, not a list per sub-epoch; {fix}")
    value = value if max_epoch is None else value[:max_epoch]
    grid = np.full((len(value), num_shards), -1, dtype=np.int64)
    for i, row in enumerate(value):
        if row is None:
            continue
        ok = isinstance(row, list) and len(row) == num_shards
        ok = ok and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 40 for x in row)
        if not ok:
            raise ValueError(
                f"{path!r}: {name} of sub-epoch {i + 1} is {str(row)[:80]}, not a list of {num_shards} step counts "
                f"(one per rank); {fix}"
            )
        grid[i] = row
    return grid

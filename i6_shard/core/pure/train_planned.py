"""Planned beside logged steps in a training report: the steps the plan's exact simulation of the torch engine says
each rank takes (``steps_taken``) and the batches it has (``steps_exact``), per (sub-epoch, rank), next to the steps
RETURNN logged; the planned drop per sub-epoch next to the measured one; an alarm for every difference. Where the
plan's simulation is not exact nothing is compared, and the summary says so."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy as np

from .fmt import json_float

#: A planned and a measured drop differ when they are further apart than this: both are summary floats (rounded to
#: 6 digits), so this is two rounding steps, far below one sequence of any real sub-epoch.
DROP_TOLERANCE = 2e-6
#: Alarm lines naming one (sub-epoch, rank) each whose steps differ; the rest are counted in one more line (every one
#: is in the records: ``planned_steps`` beside ``steps``).
MAX_DIFFERENCE_ALARMS = 20


def compare_planned_steps(summary: Dict[str, Any], records: Any, planned: Mapping[str, Any]) -> Dict[str, Any]:
    """Put ``planned`` (:func:`~i6_shard.core.io.plan_steps.read_planned_steps`) beside the logged steps: records get
    ``planned_steps`` (steps_taken) and ``planned_batches`` (steps_exact), -1/None where not planned exactly;
    each sub-epoch ``planned_exact`` (None: the plan has no such sub-epoch) and ``dropped_fraction_planned``;
    the summary ``planned_steps`` (what was compared, how many differ) and one alarm per difference of a finished
    (sub-epoch, rank) (the first :data:`MAX_DIFFERENCE_ALARMS`, then a count) and per sub-epoch whose drop differs
    by more than :data:`DROP_TOLERANCE`. In place; returns ``summary``.

    :param records: the report's :class:`~i6_shard.core.pure.training.TrainRecords` (its ``steps`` grid is the
        logged steps: "Trained N steps", or the steps logged so far)
    """
    sub_epochs = summary["sub_epochs"]
    info: Dict[str, Any] = {
        "source": "summary.json beside the plan",
        "found": bool(planned.get("found")),
        "simulated": bool(planned.get("simulated")),
        "exact": None,
        "reason": planned.get("reason"),
        "compared_records": 0,
        "differences": 0,
        "drop_differences": 0,
    }
    summary["planned_steps"] = info
    for se in sub_epochs:
        se["planned_exact"], se["dropped_fraction_planned"] = None, None
    if not info["simulated"]:
        summary["notes"].append(
            "the planned steps are not compared: "
            + (
                "the plan was made without batching (give plan --batch-size/--max-seqs to simulate its steps)"
                if info["found"]
                else "there is no summary.json beside the plan (give the plan's directory, as written)"
            )
        )
        return summary
    taken, batches, dropped = planned["steps_taken"], planned["steps_exact"], planned["dropped"]
    shape = records.shape
    planned_steps, planned_batches = (np.full(shape, -1, dtype=np.int64) for _ in range(2))
    rows = [se["epoch"] - 1 for se in sub_epochs]
    inside = [i for i, k in enumerate(rows) if k < taken.shape[0]]
    if inside:
        planned_steps[inside] = taken[[rows[i] for i in inside]]
        planned_batches[inside] = batches[[rows[i] for i in inside]]
    records.add("planned_steps", planned_steps)
    records.add("planned_batches", planned_batches)
    exact = [bool(x) for x in planned["exact"]]
    info["exact"] = all(exact[k] for k in rows if k < len(exact)) if inside else None
    filtered = planned.get("filtered")
    for i in inside:
        se = sub_epochs[i]
        se["planned_exact"] = exact[rows[i]]
        se["dropped_fraction_planned"] = (
            json_float(_like_measured(dropped[rows[i]], filtered, rows[i], se)) if exact[rows[i]] else None
        )
    if filtered is not None and any(se.get("filtered_fraction") is None for se in sub_epochs):
        summary["notes"].append(
            "the plan simulated a length filter, which this report was not given (--max-seq-length/--min-seq-length): "
            "its planned drop is compared with the filter's removal added, as the frames measured here include it"
        )
    summary["alarms"].extend(_difference_alarms(sub_epochs, records, info, planned_steps, planned_batches))
    _as_planned(summary, info)
    summary["notes"].extend(_not_compared_notes(sub_epochs, info, num_planned=taken.shape[0]))
    return summary


#: How the alarms begin that the report's own estimate raises (steps against those the files should give, the mean
#: drop above ``max_dropped``): where every finished step and drop is the plan's exact simulation, the training did
#: what was planned, and these become notes (the plan's report said the loss before the training ran).
_ESTIMATE_ALARMS = ("steps far below what the", "high data loss:")


def _as_planned(summary: Dict[str, Any], info: Mapping[str, Any]) -> None:
    """Where the plan's exact steps and drops were all compared and equal, the estimate's alarms become notes."""
    if not info["exact"] or not info["compared_records"] or info["differences"] or info["drop_differences"]:
        return
    moved = [a for a in summary["alarms"] if a.startswith(_ESTIMATE_ALARMS)]
    summary["alarms"] = [a for a in summary["alarms"] if not a.startswith(_ESTIMATE_ALARMS)]
    summary["notes"].extend(
        f"as the plan simulated it exactly (every finished step and drop equals the plan's), not an alarm: {a}"
        for a in moved
    )


def _like_measured(dropped: float, filtered: Any, row: int, se: Mapping[str, Any]) -> float:
    """The plan's drop of a sub-epoch counted as the report measures it: of the frames the length filter keeps
    where the report knows the filter (``filtered_fraction``) or the plan had none, else of all its frames
    (``1 - (1 - dropped) * (1 - filtered)``).

    >>> round(_like_measured(0.5, np.array([0.2]), 0, {"filtered_fraction": None}), 6)
    0.6
    """
    if filtered is None or se.get("filtered_fraction") is not None or np.isnan(filtered[row]):
        return float(dropped)
    return 1.0 - (1.0 - float(dropped)) * (1.0 - float(filtered[row]))


def _difference_alarms(
    sub_epochs: List[Dict[str, Any]], records: Any, info: Dict[str, Any], planned_steps: np.ndarray, planned_batches
) -> List[str]:
    """One alarm per finished (sub-epoch, rank) whose logged steps differ from the planned (the first
    :data:`MAX_DIFFERENCE_ALARMS`, then a count) and per sub-epoch whose drop differs by more than
    :data:`DROP_TOLERANCE`; counts them in ``info``."""
    alarms: List[str] = []
    info["compared_records"] = info["differences"] = 0
    for b in records.blocks():  # (a block of sub-epochs at a time: the records may be many)
        planned = planned_steps[b.start : b.start + b.num_rows]
        compare = b.present & b.finished & (planned >= 0)
        logged = b.grids["steps"]
        differ = np.argwhere(compare & (logged != planned))
        info["compared_records"] += int(compare.sum())
        info["differences"] += int(len(differ))
        for k, r in differ[: MAX_DIFFERENCE_ALARMS - len(alarms)].tolist():
            i = b.start + k
            alarms.append(
                f"steps differ from the plan: sub-epoch {sub_epochs[i]['epoch']} rank {records.rank_ids[r]}: "
                f"planned {planned_steps[i, r]} steps (of {planned_batches[i, r]} batches), logged {logged[k, r]}"
            )
    if info["differences"] > MAX_DIFFERENCE_ALARMS:
        alarms.append(
            f"steps differ from the plan in {info['differences'] - MAX_DIFFERENCE_ALARMS:,} more (sub-epoch, rank): "
            "each record lists planned_steps beside steps"
        )
    for se in sub_epochs:
        p, m = se["dropped_fraction_planned"], se["dropped_fraction"]
        if se["finished"] and p is not None and m is not None and abs(p - m) > DROP_TOLERANCE:
            info["drop_differences"] += 1
            if info["drop_differences"] <= MAX_DIFFERENCE_ALARMS:
                alarms.append(
                    f"dropped share differs from the plan: sub-epoch {se['epoch']}: planned {_pct(p)}, "
                    f"logged {_pct(m)} of the frames"
                )
    if info["differences"] or info["drop_differences"]:
        alarms[-1] += (
            "; the training does not do what the plan simulated: check that it ran the plan's settings (batch_size, "
            "max_seqs, max_seq_length, torch_distributed, accum_grad_multiple_step) and one DataLoader worker"
        )
    return alarms


def _pct(x: float) -> str:
    return f"{100 * x:.4f}%"


def _not_compared_notes(sub_epochs: List[Dict[str, Any]], info: Mapping[str, Any], *, num_planned: int) -> List[str]:
    """What of the planned steps is not compared, and why: not simulated exactly, beyond the plan, not finished."""
    notes = []
    inexact = [se["epoch"] for se in sub_epochs if se["planned_exact"] is False]
    if inexact:
        notes.append(
            f"the plan's simulation of the engine is not exact for sub-epochs {_few(inexact)} "
            f"({info['reason'] or 'its summary gives no steps there'}): their planned steps are not compared"
        )
    beyond = [se["epoch"] for se in sub_epochs if se["epoch"] > num_planned]
    if beyond:
        notes.append(f"sub-epochs {_few(beyond)} are beyond the plan's {num_planned}: their steps are not compared")
    running = [se["epoch"] for se in sub_epochs if not se["finished"] and se["planned_exact"]]
    if running:
        notes.append(f"sub-epochs {_few(running)} have not finished: their steps are not compared with the plan")
    return notes


def _few(items: List[int], n: int = 10) -> str:
    """
    >>> _few(list(range(1, 13)), 3)
    '[1, 2, 3, ...] (12 in all)'
    """
    return str(items) if len(items) <= n else f"{str(items[:n])[:-1]}, ...] ({len(items):,} in all)"

"""The predicted loss of a plan under RETURNN's batching (core/pure/batching.py) as summary entries
and report lines: steps per rank, the dropped share beside the cost formula's, and the step floor."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..planning import RankOutputs
from ..pure.batching import SyncMode
from ..pure.fmt import json_float


def prediction_summary(ranks: RankOutputs) -> Dict[str, Any]:
    """Summary entries (JSON types) of the predicted loss the planning floor computed (:class:`RankOutputs` with
    a prediction): ``dropped_fraction_predicted`` (mean over the sub-epochs of the predicted share of the frames
    dropped), ``dropped_fraction_predicted_max``, ``batching`` with the limits, the step floor (``floor_mean``:
    the drop of an even split, from whole steps and the spread of batching) and per sub-epoch the predicted steps
    per rank and drop, and ``sync``: the sync mode the drop assumes (grad sync: every rank stops in the step the
    first runs out; param sync: the others run on to their next sync). ``lengths`` says whether every rank batched
    its files' own lengths ("per file") or the pooled quantiles scaled to its mean length ("pooled")."""
    p, batching, sync, per_file = ranks.prediction, ranks.batching, ranks.sync, ranks.per_file_lengths
    steps = p["steps_mean"]
    sim = ranks.simulation
    dropped = p["dropped"] if sim is None or sim["dropped"] is None else sim["dropped"]
    filtered = _filtered_entries(sim)
    return {
        "dropped_fraction_predicted": json_float(dropped.mean()),
        "dropped_fraction_predicted_max": json_float(dropped.max()),
        **{k: v for k, v in filtered.items() if k != "per_sub_epoch"},
        **_simulation_entries(sim, num_epochs=len(steps)),
        "sync": sync.as_dict(),
        "batching": {
            **batching.as_dict(),
            "lengths": "per file" if per_file else "pooled",
            "floor_mean": json_float(p["floor"].mean()),
            "steps_per_rank": {
                "min": json_float(steps.min()),
                "mean": json_float(steps.mean()),
                "max": json_float(steps.max()),
            },
            **({} if sim is None else {"simulation": _simulation_info(sim)}),
            "model_dropped_fraction": json_float(p["dropped"].mean()),
            "per_sub_epoch": {
                "steps": [[json_float(x) for x in row] for row in steps.tolist()],
                "dropped_fraction": [json_float(x) for x in dropped.tolist()],
                "floor": [json_float(x) for x in p["floor"].tolist()],
                **({} if not filtered else {"filtered_fraction": filtered["per_sub_epoch"]}),
            },
        },
    }


def _filtered_entries(sim: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Where the exact simulation has a length filter (``max_seq_length``/``min_seq_length``): the share of the frames
    it removes, apart from the dropped share (``filtered_fraction_predicted``, its ``_max``, and ``per_sub_epoch``),
    as the training report counts them; nothing without a filter."""
    if sim is None or sim.get("filtered") is None:
        return {}
    engine = sim["engine"]
    if engine.max_seq_length is None and engine.min_seq_length is None:
        return {}
    filtered = sim["filtered"]
    return {
        "filtered_fraction_predicted": json_float(filtered.mean()),
        "filtered_fraction_predicted_max": json_float(filtered.max()),
        "per_sub_epoch": [json_float(x) for x in filtered.tolist()],
    }


def _simulation_entries(sim: Optional[Mapping[str, Any]], *, num_epochs: int) -> Dict[str, Any]:
    """``steps_exact`` and ``steps_taken``: per sub-epoch a list with each rank's (None where not exact)."""
    if sim is None:
        return {"steps_exact": [None] * num_epochs, "steps_taken": [None] * num_epochs}
    return {"steps_exact": sim["steps_exact"], "steps_taken": sim["steps_taken"]}


def _simulation_info(sim: Mapping[str, Any]) -> Dict[str, Any]:
    """The summary's ``batching.simulation``: whether the figures are exact, why not, the engine simulated, what it
    assumes and (``lengths_assume``, where there is any) what the costs archive's lengths do not know."""
    engine = {k: v for k, v in sim["engine"].as_dict().items() if k != "inexact"}
    info = {"exact": sim["exact"], "reason": sim["reason"], "engine": engine, "assumes": sim["assumes"]}
    if sim.get("lengths_assume") is not None:  # what the costs archive's lengths do not know
        info["lengths_assume"] = sim["lengths_assume"]
    return info


def render_prediction(summary: Mapping[str, Any]) -> List[str]:
    """Report lines of the prediction (none if the summary has none)."""
    b = summary.get("batching")
    if b is None or "dropped_fraction_predicted" not in summary:
        return []
    limits = ", ".join(f"{k}={b[k]}" for k in ("batch_size", "max_seqs") if b[k] is not None)
    st = b["steps_per_rank"]
    sync = summary.get("sync") or SyncMode().as_dict()
    source = "each file's own lengths" if b.get("lengths") == "per file" else "pooled lengths"
    if summary.get("lengths_from") is not None:
        source += f" from {summary['lengths_from']}"
    when = (
        "when the first rank runs out"
        if sync["reduce_type"] == "grad"
        else f"under param sync every {sync['param_sync_step']} steps (the others run on to their next sync)"
    )
    sync_text = f"{sync['reduce_type']} sync"
    levels = ((b.get("simulation") or {}).get("engine") or {}).get("torch_distributed") or {}
    if levels.get("sync") is not None:  # the config's sync levels: what the exact simulation takes
        sync_text, when = f"sync levels {levels['sync']}", "under the sync levels"
    order = ((b.get("simulation") or {}).get("engine") or {}).get("seq_ordering") or "random"
    order_text = "sequences in random order" if order == "random" else f"sequences in seq_ordering {order!r}"
    return [
        "",
        f"Predicted loss under RETURNN's batching ({limits}; {sync_text}; {order_text}; {source}, see docs/units.md)",
        f"  steps per rank and sub-epoch   min {st['min']:.1f}, mean {st['mean']:.1f}, max {st['max']:.1f}",
        *_simulation_lines(summary),
        *_filtered_lines(summary),
        f"  dropped {when}: mean {100 * summary['dropped_fraction_predicted']:.2f}%, worst "
        f"{100 * summary['dropped_fraction_predicted_max']:.2f}% (the {summary.get('unit', 'bytes')} formula above: "
        f"{100 * summary['dropped_fraction']:.2f}%)",
        f"  step floor (an even split loses this from whole steps and the spread of batching): "
        f"{100 * b['floor_mean']:.2f}%",
    ] + _worst_steps_lines(b["per_sub_epoch"], summary.get("steps_exact"))


def _filtered_lines(summary: Mapping[str, Any]) -> List[str]:
    """What the length filter removes, apart from the drop (none without a simulated filter)."""
    if summary.get("filtered_fraction_predicted") is None:
        return []
    engine = summary["batching"]["simulation"]["engine"]
    limits = ", ".join(f"{k}={engine[k]}" for k in ("min_seq_length", "max_seq_length") if engine.get(k) is not None)
    return [
        f"  removed by the length filter ({limits}), not counted as dropped: mean "
        f"{100 * summary['filtered_fraction_predicted']:.2f}%, worst {100 * summary['filtered_fraction_predicted_max']:.2f}% "
        "of the frames; the drop below is of the frames it keeps"
    ]


def _simulation_lines(summary: Mapping[str, Any]) -> List[str]:
    """Whether the drop below is simulated exactly, and the exact batches and steps taken where it is."""
    sim = summary["batching"].get("simulation")
    if sim is None:
        return []
    if not sim["exact"]:
        return [f"  not simulated exactly ({sim['reason']}): the drop below is the statistical model's"]
    exact = [x for row in summary["steps_exact"] for x in row]
    equal = sum(len(set(row)) == 1 for row in summary["steps_exact"])
    model = summary["batching"].get("model_dropped_fraction")
    assume = sim.get("lengths_assume")
    return [
        f"  simulated exactly (each rank's sequence order, batches and syncs as RETURNN's torch engine): batches per "
        f"rank and sub-epoch min {min(exact)}, max {max(exact)}; all ranks equal in {equal} of "
        f"{len(summary['steps_exact'])} sub-epochs"
        + ("" if model is None else f"; the statistical model said {100 * model:.2f}%"),
    ] + ([] if assume is None else [f"  exact only if {assume}"])


#: Sub-epochs the report shows steps per rank of, worst predicted drop first; ranks shown one by one up to
#: this many, else as min..max.
_WORST_ROWS, _MAX_RANK_COLUMNS = 5, 8


def _worst_steps_lines(per_sub_epoch: Mapping[str, Any], steps_exact: Optional[Sequence[Any]] = None) -> List[str]:
    """The sub-epochs of the largest predicted drop, each with every rank's expected steps beside it: where
    the ranks' steps differ, the drop follows (a sub-epoch ends with its shortest rank's whole steps)."""
    steps, dropped = per_sub_epoch["steps"], per_sub_epoch["dropped_fraction"]
    if not steps:
        return []
    worst = sorted(range(len(dropped)), key=lambda e: (-dropped[e], e))[:_WORST_ROWS]
    num_ranks = len(steps[0])
    head = (
        " ".join(f"{f'r{r}':>6}" for r in range(num_ranks))
        if num_ranks <= _MAX_RANK_COLUMNS
        else f"{'min':>7} {'max':>7}"
    )
    exact_known = steps_exact is not None and num_ranks <= _MAX_RANK_COLUMNS and all(x is not None for x in steps_exact)
    lines = [
        "  expected steps per rank, worst sub-epochs first:",
        f"    epoch  {head}  dropped" + ("  exact batches" if exact_known else ""),
    ]
    for e in worst:
        row = steps[e]
        cells = (
            " ".join(f"{x:6.1f}" for x in row) if num_ranks <= _MAX_RANK_COLUMNS else f"{min(row):7.1f} {max(row):7.1f}"
        )
        exact = ("  " + " ".join(str(x) for x in steps_exact[e])) if exact_known else ""
        lines.append(f"    {e + 1:>5}  {cells}  {100 * dropped[e]:6.2f}%{exact}")
    return lines

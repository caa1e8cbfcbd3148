"""The predicted loss of a plan under RETURNN's batching (core/pure/batching.py) as summary entries
and report lines: steps per rank, the dropped share beside the cost formula's, and the step floor."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ..planning import RankOutputs
from ..pure.batching import SyncMode
from ..pure.fmt import json_float

__all__ = ["prediction_summary", "render_prediction"]


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
    return {
        "dropped_fraction_predicted": json_float(p["dropped"].mean()),
        "dropped_fraction_predicted_max": json_float(p["dropped"].max()),
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
            "per_sub_epoch": {
                "steps": [[json_float(x) for x in row] for row in steps.tolist()],
                "dropped_fraction": [json_float(x) for x in p["dropped"].tolist()],
                "floor": [json_float(x) for x in p["floor"].tolist()],
            },
        },
    }


def render_prediction(summary: Mapping[str, Any]) -> List[str]:
    """Report lines of the prediction (none if the summary has none)."""
    b = summary.get("batching")
    if b is None or "dropped_fraction_predicted" not in summary:
        return []
    limits = ", ".join(f"{k}={b[k]}" for k in ("batch_size", "max_seqs") if b[k] is not None)
    st = b["steps_per_rank"]
    sync = summary.get("sync") or SyncMode().as_dict()
    source = "each file's own lengths" if b.get("lengths") == "per file" else "pooled lengths"
    when = (
        "when the first rank runs out"
        if sync["reduce_type"] == "grad"
        else f"under param sync every {sync['param_sync_step']} steps (the others run on to their next sync)"
    )
    return [
        "",
        f"Predicted loss under RETURNN's batching ({limits}; {sync['reduce_type']} sync; sequences in random order; "
        f"{source}, see docs/units.md)",
        f"  steps per rank and sub-epoch   min {st['min']:.1f}, mean {st['mean']:.1f}, max {st['max']:.1f}",
        f"  dropped {when}: mean {100 * summary['dropped_fraction_predicted']:.2f}%, worst "
        f"{100 * summary['dropped_fraction_predicted_max']:.2f}% (the {summary.get('unit', 'bytes')} formula above: "
        f"{100 * summary['dropped_fraction']:.2f}%)",
        f"  step floor (an even split loses this from whole steps and the spread of batching): "
        f"{100 * b['floor_mean']:.2f}%",
    ] + _worst_steps_lines(b["per_sub_epoch"])


#: Sub-epochs the report shows steps per rank of, worst predicted drop first; ranks shown one by one up to
#: this many, else as min..max.
_WORST_ROWS, _MAX_RANK_COLUMNS = 5, 8


def _worst_steps_lines(per_sub_epoch: Mapping[str, Any]) -> List[str]:
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
    lines = ["  expected steps per rank, worst sub-epochs first:", f"    epoch  {head}  dropped"]
    for e in worst:
        row = steps[e]
        cells = (
            " ".join(f"{x:6.1f}" for x in row) if num_ranks <= _MAX_RANK_COLUMNS else f"{min(row):7.1f} {max(row):7.1f}"
        )
        lines.append(f"    {e + 1:>5}  {cells}  {100 * dropped[e]:6.2f}%")
    return lines

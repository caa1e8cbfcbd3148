"""The predicted loss of a plan under RETURNN's batching (core/pure/batching.py) as summary entries
and report lines: steps per rank, the dropped share beside the cost formula's, and the step floor."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..pure.batching import Batching, SyncMode, predict_plan_drop
from ..pure.plan import ShardPlan
from ..pure.fmt import json_float

__all__ = ["prediction_summary", "render_prediction"]


def prediction_summary(plan: ShardPlan, *, num_epochs: int, batching: Batching, num_seqs: np.ndarray,
                       num_frames: np.ndarray, seq_length_quantiles: np.ndarray,
                       layout: Optional[Callable[[int, int], Tuple[np.ndarray, np.ndarray]]] = None,
                       sync: SyncMode = SyncMode()) -> Dict[str, Any]:
    """Summary entries (JSON types): ``dropped_fraction_predicted`` (mean over the sub-epochs of the
    predicted share of the frames dropped), ``dropped_fraction_predicted_max``, ``batching`` with the
    limits, the step floor (``floor_mean``: the drop of an even split, from whole steps and the spread of
    batching) and per sub-epoch the predicted steps per rank and drop, and ``sync``: the sync mode the drop
    assumes (grad sync: every rank stops in the step the first runs out; param sync: the others run on to
    their next sync)."""
    p = predict_plan_drop(plan, num_epochs=num_epochs, num_seqs=num_seqs, num_frames=num_frames, batching=batching,
                          seq_length_quantiles=seq_length_quantiles, layout=layout, sync_every=sync.sync_every)
    steps = p["steps_mean"]
    return {
        "dropped_fraction_predicted": json_float(p["dropped"].mean()),
        "dropped_fraction_predicted_max": json_float(p["dropped"].max()),
        "sync": sync.as_dict(),
        "batching": {
            **batching.as_dict(),
            "floor_mean": json_float(p["floor"].mean()),
            "steps_per_rank": {"min": json_float(steps.min()), "mean": json_float(steps.mean()), "max": json_float(steps.max())},
            "per_sub_epoch": {"steps": [[json_float(x) for x in row] for row in steps.tolist()],
                              "dropped_fraction": [json_float(x) for x in p["dropped"].tolist()],
                              "floor": [json_float(x) for x in p["floor"].tolist()]},
        },
    }


def render_prediction(summary: Mapping[str, Any]) -> List[str]:
    """Report lines of the prediction (none if the summary has none)."""
    b = summary.get("batching")
    if b is None or "dropped_fraction_predicted" not in summary:
        return []
    limits = ", ".join(f"{k}={b[k]}" for k in ("batch_size", "max_seqs") if b[k] is not None)
    st = b["steps_per_rank"]
    sync = summary.get("sync") or {"reduce_type": "grad"}
    when = ("when the first rank runs out" if sync["reduce_type"] == "grad" else
            f"under param sync every {sync['param_sync_step']} steps (the others run on to their next sync)")
    return [
        "",
        f"Predicted loss under RETURNN's batching ({limits}; {sync['reduce_type']} sync; sequences in random order, "
        "see docs/units.md)",
        f"  steps per rank and sub-epoch   min {st['min']:.1f}, mean {st['mean']:.1f}, max {st['max']:.1f}",
        f"  dropped {when}: mean {100 * summary['dropped_fraction_predicted']:.2f}%, worst "
        f"{100 * summary['dropped_fraction_predicted_max']:.2f}% (the {summary.get('unit', 'bytes')} formula above: "
        f"{100 * summary['dropped_fraction']:.2f}%)",
        f"  step floor (an even split loses this from whole steps and the spread of batching): "
        f"{100 * b['floor_mean']:.2f}%",
    ]

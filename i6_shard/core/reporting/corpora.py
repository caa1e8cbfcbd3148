"""Per corpus, for a plan of corpora mixed by weight: the summary's ``corpora`` entry and the report's section (files,
weight, reads per full epoch, cost and share of each sub-epoch, the share dropped)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..pure.corpora import corpus_costs, weight_text
from ..pure.fmt import json_float
from ..pure.plan import ShardPlan


def corpora_summary(
    plan: ShardPlan, *, num_epochs: int, layout: Any = None, predicted: Optional[List[float]] = None
) -> List[Dict[str, Any]]:
    """The summary's ``corpora``: one entry per corpus, in the plan's order (JSON types).

    - ``files``, ``weight`` (exact, as text), ``reads_per_full_epoch`` (per full epoch the sub-epochs ``1..num_epochs``
      reach);
    - ``cost_per_sub_epoch``: its cost over all ranks in each sub-epoch (in the summary's ``unit``), and
      ``share_per_sub_epoch``: its share of each sub-epoch's cost;
    - ``dropped_fraction``: the share of its cost beyond each sub-epoch's shortest rank (the cost formula, each rank's
      excess split over the corpora by their share of the rank), and with batching ``dropped_fraction_predicted``:
      each sub-epoch's predicted share dropped, weighted by the corpus's cost in it.
    """
    costs, files, reads = corpus_costs(plan, num_epochs=num_epochs, layout=layout)
    per_rank = costs.sum(axis=2)  # [sub-epoch, rank]
    excess = per_rank - per_rank.min(axis=1, keepdims=True)
    share_of_rank = np.divide(costs, per_rank[:, :, None], out=np.zeros(costs.shape), where=per_rank[:, :, None] > 0)
    dropped = (share_of_rank * excess[:, :, None]).sum(axis=(0, 1))
    per_sub = costs.sum(axis=1)  # [sub-epoch, corpus]
    totals = per_sub.sum(axis=1, keepdims=True)
    share = np.divide(per_sub, totals, out=np.zeros(per_sub.shape), where=totals > 0)
    corpora, out = plan.corpora, []
    for c, name in enumerate(corpora.names):
        read = max(int(per_sub[:, c].sum()), 1)
        entry = {
            "name": name,
            "files": corpora.size(c),
            "weight": weight_text(corpora.weights[c]),
            "reads_per_full_epoch": reads[:, c].tolist(),
            "cost_per_sub_epoch": per_sub[:, c].tolist(),
            "share_per_sub_epoch": [json_float(x) for x in share[:, c].tolist()],
            "dropped_fraction": json_float(dropped[c] / read),
        }
        if predicted is not None:
            entry["dropped_fraction_predicted"] = json_float(float(np.dot(predicted, per_sub[:, c])) / read)
        out.append(entry)
    return out


def render_corpora(summary: Mapping[str, Any]) -> List[str]:
    """The report's section of the corpora (none for a plan of one list)."""
    corpora = summary.get("corpora")
    if not corpora:
        return []
    lines = [
        "",
        "Corpora mixed by weight (reads per full epoch: weight x files, the fraction rotating; no file twice in a "
        "sub-epoch)",
    ]
    predicted = "dropped_fraction_predicted" in corpora[0]
    header = ["corpus", "files", "weight", "reads/full epoch", "share min", "mean", "max", "dropped"]
    header += ["predicted"] if predicted else []
    rows = []
    for entry in corpora:
        share = entry["share_per_sub_epoch"] or [0.0]
        reads = entry["reads_per_full_epoch"]
        row = [
            entry["name"],
            str(entry["files"]),
            entry["weight"],
            f"{min(reads)}" if min(reads) == max(reads) else f"{min(reads)}..{max(reads)}",
            f"{min(share):.1%}",
            f"{float(np.mean(share)):.1%}",
            f"{max(share):.1%}",
            f"{entry['dropped_fraction']:.2%}",
        ]
        rows.append(row + ([f"{entry['dropped_fraction_predicted']:.2%}"] if predicted else []))
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for cells in [header] + rows:
        lines.append(
            "  " + " ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(cells, widths)))
        )
    return lines

"""The dropped share a plan predicts per sub-epoch, to compare with what a training measured from
RETURNN's logs (``python -m i6_shard train-report`` / ``core.pure.training.analyze_training``).

A sub-epoch ends on every rank when its first rank runs out of data, so the share it drops is
``1 - W * min / sum`` over the ranks' data. This prints it per sub-epoch by the plan's own costs
(what the distribution balanced, usually bytes) and, given the files' lengths, by frames (what the
training report measures: ranks stop at about the same number of frames, as they step in lockstep)
and by sequences (each rank consuming the share of its sequences that the shortest rank's frames
allow, files taken as uniform); also the size of each sub-epoch over the mean.

Run: ``python benchmarks/planned_drop.py PLAN.npz [--lengths LENGTHS.json] [--num-epochs N] [--json]``
(``LENGTHS.json``: ``{file key: [num_seqs, num_frames]}``, see ``core.io.file_lengths.save_file_lengths``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from i6_shard import core
from i6_shard.core.io.plan_file import PlanFile
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.io.file_lengths import load_file_lengths
from i6_shard.core.pure.stats import dropped_fraction


def sub_epoch_loads(plan_file: PlanFile, costs: np.ndarray, *, num_epochs: int) -> np.ndarray:
    """``costs`` (one per key of the plan) summed per (sub-epoch, rank) over the plan's stored bins;
    int64, shape [num_epochs, num_shards]."""
    plan = plan_file.plan
    other = core.ShardPlan(plan.keys, costs, plan.settings)  # the same settings; only its costs are used
    stats = compute_plan_stats(other, num_epochs=num_epochs, layout=plan_file.layout)
    return stats.bytes


def planned_drop(
    plan_file: PlanFile,
    *,
    num_epochs: Optional[int] = None,
    lengths: Optional[Mapping[str, Tuple[int, int]]] = None,
) -> Dict[str, Any]:
    """Per sub-epoch (lists, sub-epoch 1 first): ``size_over_mean`` (by the plan's costs, over the mean
    sub-epoch of its full epoch), ``dropped_by_cost``, and with ``lengths`` ``dropped_by_frames`` and
    ``dropped_by_seqs``; plus their means over the sub-epochs (``mean_*``)."""
    plan = plan_file.plan
    num_epochs = plan_file.num_epochs if num_epochs is None else int(num_epochs)
    cost = sub_epoch_loads(plan_file, plan.costs, num_epochs=num_epochs)
    totals = cost.sum(axis=1).astype(np.float64)
    part = plan.partition_epoch
    means = np.array([totals[(e // part) * part : (e // part + 1) * part].mean() for e in range(num_epochs)])
    out: Dict[str, Any] = {
        "size_over_mean": (totals / means).tolist(),
        "dropped_by_cost": dropped_fraction(cost).tolist(),
    }
    if lengths is not None:
        missing = [k for k in plan.keys if k not in lengths]
        if missing:
            raise ValueError(
                f"lengths lack {len(missing)} of the plan's {plan.num_files} keys "
                f"(first: {missing[:3]}); give lengths for every file of the plan"
            )
        seqs = np.array([lengths[k][0] for k in plan.keys], dtype=np.int64)
        frames = np.array([lengths[k][1] for k in plan.keys], dtype=np.int64)
        f = sub_epoch_loads(plan_file, frames, num_epochs=num_epochs).astype(np.float64)
        s = sub_epoch_loads(plan_file, seqs, num_epochs=num_epochs).astype(np.float64)
        out["dropped_by_frames"] = dropped_fraction(f.astype(np.int64)).tolist()
        share = np.divide(f.min(axis=1, keepdims=True), f, out=np.ones_like(f), where=f > 0)
        out["dropped_by_seqs"] = (1.0 - (s * share).sum(axis=1) / np.maximum(s.sum(axis=1), 1)).tolist()
    for key in [k for k in out if k.startswith("dropped_")]:
        out["mean_" + key] = float(np.mean(out[key]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan", help="a plan file (plan.npz of ShardPlanJob or `python -m i6_shard plan`)")
    parser.add_argument("--lengths", help="JSON {file key: [num_seqs, num_frames]} for the frames and sequences")
    parser.add_argument("--num-epochs", type=int, help="sub-epochs to show (default: all the plan holds)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    plan_file = core.read_plan_file(args.plan)
    result = planned_drop(
        plan_file, num_epochs=args.num_epochs, lengths=load_file_lengths(args.lengths) if args.lengths else None
    )
    if args.json:
        print(json.dumps(result, sort_keys=True, indent=1))
        return
    s = plan_file.plan.settings
    print(
        f"{args.plan}: {plan_file.plan.num_files} files, W={s.num_shards}, P={s.partition_epoch}, "
        f"distribution={s.distribution}"
    )
    columns = [k for k in ("size_over_mean", "dropped_by_cost", "dropped_by_frames", "dropped_by_seqs") if k in result]
    print(f"{'epoch':>5} " + " ".join(f"{c:>17}" for c in columns))
    for e in range(len(result["size_over_mean"])):
        print(
            f"{e + 1:>5} "
            + " ".join(f"{result[c][e]:>17.4f}" if c == "size_over_mean" else f"{result[c][e]:>17.2%}" for c in columns)
        )
    print(
        "mean  " + " ".join(f"{'':>17}" if c == "size_over_mean" else f"{result['mean_' + c]:>17.2%}" for c in columns)
    )


if __name__ == "__main__":
    main()

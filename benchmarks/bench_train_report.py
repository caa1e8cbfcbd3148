"""Benchmark: the training report against real multi-rank RETURNN trainings on the CPU (torchrun, gloo):
per sub-epoch the dropped share of the frames it measures versus a count made here from the per-batch
log lines and the HDF files (h5py), the files per rank versus a plan made with core, and the alarms
(double sharding with sharding_fix=False). One training at a time.

Run from the repository root: ``python benchmarks/bench_train_report.py [--quick] [--keep DIR]``
(needs torch, returnn, dm-tree, h5py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from typing import Any, Dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402
from tests.training.harness import hdf_seq_lengths, run_sharded_training, write_skewed_hdf_files  # noqa: E402

DATA = {"median_seqs": 12.0, "median_frames": 20.0}
#: name: (run_sharded_training settings)
RUNS = {
    "2 ranks": dict(num_ranks=2, num_files=32, seed=21),
    "4 ranks": dict(num_ranks=4, num_files=32, seed=22),
    "4 ranks balanced": dict(num_ranks=4, num_files=32, seed=22, distribution="balanced"),
    "2 ranks sharding_fix=False": dict(num_ranks=2, num_files=32, seed=21, sharding_fix=False),
    "4 ranks sharding_fix=False": dict(num_ranks=4, num_files=32, seed=22, sharding_fix=False),
}
QUICK = ["2 ranks", "4 ranks", "4 ranks sharding_fix=False"]
COMMON = dict(partition_epoch=2, num_epochs=4, behavior_version=24, batch_size=300, max_seqs=10)


def independent_counts(training, keys) -> Dict[int, float]:
    """Per sub-epoch: 1 - summed frames of the batch lines / frames of the logged files (h5py)."""
    frames = {k: int(hdf_seq_lengths(os.path.join(training.work_dir, k)).sum()) for k in keys}
    consumed: Dict[int, int] = {}
    available: Dict[int, int] = {}
    for rank in range(training.num_ranks):
        text = training.log_text(rank)
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?sum_size:\S+ (\d+)", text, flags=re.M):
            consumed[int(m[1])] = consumed.get(int(m[1]), 0) + int(m[2])
        for m in re.finditer(r"using files for epoch (\d+): \[(.*)\]$", text, flags=re.M):
            available[int(m[1])] = available.get(int(m[1]), 0) + sum(frames[k] for k in re.findall(r"'([^']+)'", m[2]))
    return {e: 1 - consumed.get(e, 0) / available[e] for e in sorted(consumed)}


def run_one(name: str, settings: Dict[str, Any], base: str) -> Dict[str, Any]:
    settings = {**COMMON, **settings}
    work = os.path.join(base, re.sub(r"\W+", "_", name), "run")
    keys = [f"data/part{i:03d}.hdf" for i in range(settings["num_files"])]
    sizes_path = None
    if settings.get("distribution", "returnn") != "returnn":
        paths = write_skewed_hdf_files(
            os.path.join(work, "data"), num_files=settings["num_files"], seed=settings["seed"], **DATA
        )
        sizes_path = os.path.join(base, re.sub(r"\W+", "_", name), "sizes.npz")
        core.save_file_sizes(core.FileSizes(keys=keys, sizes=core.collect_file_sizes(paths).sizes), sizes_path)
    training = run_sharded_training(work, data_kwargs=DATA, file_sizes=sizes_path, **settings)
    sizes = core.collect_file_sizes([os.path.join(work, k) for k in keys])
    plan = core.ShardPlan(
        keys,
        sizes.sizes,
        core.PlanSettings(
            num_shards=settings["num_ranks"],
            partition_epoch=settings["partition_epoch"],
            num_epochs=settings["num_epochs"],
            distribution=settings.get("distribution", "returnn"),
        ),
    )
    plan_path = os.path.join(os.path.dirname(work), "plan.npz")
    core.save_plan(plan, plan_path)
    summary = write_train_report(training.log_files, os.path.join(os.path.dirname(work), "report"), plan_path=plan_path)
    return {
        "name": name,
        "seconds": training.seconds,
        "summary": summary,
        "independent": independent_counts(training, keys),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    parser.add_argument("--keep", default=None, help="keep the trainings in this directory")
    args = parser.parse_args()
    names = QUICK if args.quick else list(RUNS)
    base = args.keep or tempfile.mkdtemp(prefix="i6_shard_bench_train_report_")
    worst_diff = 0.0
    for name in names:
        r = run_one(name, RUNS[name], base)
        s = r["summary"]
        print(f"\n== {name}: training {r['seconds']:.1f} s, {s['num_files']} files, {s['total_frames']:,} frames")
        print(
            f"  {'epoch':>5} {'steps':>5} {'expected':>8} {'dropped (report)':>16} {'dropped (count)':>15} "
            f"{'|diff| pts':>10} {'files as planned':>16}"
        )
        for se in s["sub_epochs"]:
            count = r["independent"][se["epoch"]]
            diff = abs(se["dropped_fraction"] - count) * 100
            worst_diff = max(worst_diff, diff)
            match = sum(bool(x["files_match_plan"]) for x in se["ranks"])
            print(
                f"  {se['epoch']:>5} {se['steps']:>5} {se['expected_steps']:>8} "
                f"{100 * se['dropped_fraction']:>15.2f}% {100 * count:>14.2f}% {diff:>10.4f} "
                f"{match:>9}/{len(se['ranks'])} ranks"
            )
        print(
            f"  mean dropped {100 * s['dropped_fraction']:.2f}%, passes made {s['passes']['made']}, "
            f"promised {s['passes']['promised']}"
        )
        for alarm in s["alarms"]:
            print(f"  alarm: {alarm[:160]}{'...' if len(alarm) > 160 else ''}")
    print(f"\nlargest |report - count| over all sub-epochs: {worst_diff:.4f} points; trainings in {base}")


if __name__ == "__main__":
    main()

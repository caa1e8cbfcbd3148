"""Benchmark: planning one full epoch of 1M files (8 shards, partition_epoch 20) with
RETURNN's own code versus i6_shard's core, measured side by side in one run.

Run: ``python benchmarks/bench_plan.py [--num-files N] [--repeats R] [--full-epochs K]``
(needs returnn for the reference; the last part runs in a subprocess to measure its peak RSS,
read from VmHWM in /proc/self/status of that process alone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from i6_shard import core
from timing import best_of, rss_mib


def returnn_bounds(keys, sizes, *, seed: int, num_bins: int):
    """RETURNN's DistributeFilesDataset code path: shuffle the list, then cut it."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    files = list(keys)
    np.random.RandomState(seed).shuffle(files)
    bins = DistributeFilesDataset._distribute_evenly_by_size(
        num_bins=num_bins, file_sizes=dict(zip(keys, sizes.tolist())), files_order=files
    )
    return files, bins


def _memory_child(num_files: int, num_shards: int, partition_epoch: int, full_epochs: int, write: bool) -> None:
    """Plan ``full_epochs`` full epochs: stats over every sub-epoch, or (``write``) all plan outputs
    as ShardPlanJob writes them; print time and peak RSS as JSON."""
    sizes = core.io.lognormal_sizes(num_files, seed=0)
    keys = [f"/data/corpus/part-{i:07d}.hdf" for i in range(num_files)]
    base_rss = rss_mib("VmRSS")  # this process only: ru_maxrss would carry the parent's peak over fork+exec
    plan = core.ShardPlan(keys, sizes, core.PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch))
    num_epochs = full_epochs * partition_epoch
    t0 = time.perf_counter()
    if write:
        with tempfile.TemporaryDirectory() as tmp:
            summary = core.write_plan_outputs(
                plan.with_settings(num_epochs=num_epochs),
                plan_path=os.path.join(tmp, "plan.npz"),
                summary_path=os.path.join(tmp, "summary.json"),
                report_path=os.path.join(tmp, "report.txt"),
                plot_path=os.path.join(tmp, "plot.png"),
            )
            plan_mib = os.path.getsize(os.path.join(tmp, "plan.npz")) / 2**20
            seconds = time.perf_counter() - t0
        dropped = summary["dropped_fraction"]
    else:
        stats = core.compute_plan_stats(plan, num_epochs=num_epochs)
        seconds = time.perf_counter() - t0
        assert int(stats.passes.min()) == int(stats.passes.max()) == full_epochs
        dropped, plan_mib = float(stats.dropped_fraction.mean()), 0.0
    print(
        json.dumps(
            {
                "seconds": seconds,
                "base_rss_mib": base_rss,
                "plan_mib": plan_mib,
                "peak_rss_mib": rss_mib(),
                "dropped_fraction": dropped,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-files", type=int, default=1_000_000)
    parser.add_argument("--num-shards", type=int, default=8)
    parser.add_argument("--partition-epoch", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--full-epochs", type=int, default=100, help="full epochs for the time/RSS part")
    parser.add_argument("--no-write", action="store_true", help="skip timing write_plan_outputs for --full-epochs")
    parser.add_argument("--memory-child", choices=["stats", "write"], default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n, shards, part = args.num_files, args.num_shards, args.partition_epoch
    if args.memory_child:
        _memory_child(n, shards, part, args.full_epochs, write=args.memory_child == "write")
        return
    num_bins = shards * part
    seed = 1  # full epoch 0 with random_seed_offset 0
    sizes = core.io.lognormal_sizes(n, seed=0)
    keys = [f"/data/corpus/part-{i:07d}.hdf" for i in range(n)]
    print(
        f"{n:,} files (lognormal sizes), num_shards={shards}, partition_epoch={part} -> {num_bins} bins, "
        f"best of {args.repeats}"
    )

    t_returnn, (ret_files, ret_bins) = best_of(
        lambda: returnn_bounds(keys, sizes, seed=seed, num_bins=num_bins), max(1, min(args.repeats, 3))
    )
    t_perm, _ = best_of(lambda: np.random.RandomState(seed).permutation(n), args.repeats)

    def core_plan():
        order = core.pure.shuffle_order(n, seed=seed)
        return order, core.distribute_evenly_by_size(sizes[order], num_bins=num_bins)

    t_core, (order, bounds) = best_of(core_plan, args.repeats)

    def files_for_all():
        plan = core.ShardPlan(
            keys, sizes, core.PlanSettings(num_shards=shards, partition_epoch=part)
        )  # fresh: no cached layout
        return [plan.files_for(epoch=e, shard_index=r) for r in range(shards) for e in range(1, part + 1)]

    t_files_for, bins_files_for = best_of(files_for_all, args.repeats)

    # Same bins everywhere.
    ret_bounds = np.concatenate([[0], np.cumsum([len(b) for b in ret_bins])])
    assert ret_bounds.tolist() == bounds.tolist(), "bin boundaries differ from RETURNN"
    assert [keys[i] for i in order.tolist()] == ret_files, "shuffle differs from RETURNN"
    assert bins_files_for == [list(b) for b in ret_bins], "files_for differs from RETURNN"
    print("bins identical: RETURNN == core == files_for")

    rows = [
        ("RETURNN shuffle(list) + _distribute_evenly_by_size", t_returnn),
        ("bare RandomState(seed).permutation(n) (floor)", t_perm),
        ("i6_shard core: permutation + distribute_evenly_by_size", t_core),
        (f"i6_shard ShardPlan.files_for over all {num_bins} bins", t_files_for),
    ]
    for name, t in rows:
        print(f"  {name:<58} {1000 * t:9.1f} ms")
    ratios = [
        ("core speed-up over RETURNN (target >= 25x)", t_returnn / t_core, t_returnn / t_core >= 25),
        ("core / bare permutation (target <= 2x)", t_core / t_perm, t_core / t_perm <= 2),
        ("files_for speed-up over RETURNN (target >= 10x)", t_returnn / t_files_for, t_returnn / t_files_for >= 10),
    ]
    for name, value, ok in ratios:
        print(f"  {name:<58} {value:9.2f}x  {'ok' if ok else 'MISSED'}")

    for mode in ("stats", "write")[: 1 if args.no_write else 2]:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-child",
                mode,
                "--num-files",
                str(n),
                "--num-shards",
                str(shards),
                "--partition-epoch",
                str(part),
                "--full-epochs",
                str(args.full_epochs),
            ],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        mem = json.loads(out)
        what = (
            "plan + stats"
            if mode == "stats"
            else f"write_plan_outputs (plan file {mem['plan_mib']:.0f} MiB, summary, report, plot)"
        )
        print(
            f"  {what} for {args.full_epochs} full epochs ({args.full_epochs * part} sub-epochs): "
            f"{mem['seconds']:.2f} s, peak RSS {mem['peak_rss_mib']:.0f} MiB "
            f"({mem['base_rss_mib']:.0f} MiB after building the keys and sizes), "
            f"mean dropped {100 * mem['dropped_fraction']:.3f}%"
        )


if __name__ == "__main__":
    main()

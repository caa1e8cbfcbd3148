"""Benchmark: planning one full epoch of 1M files (8 shards, partition_epoch 20) with
RETURNN's own code versus i6_shard's core, measured side by side in one run.

Run: ``python benchmarks/bench_plan.py [--num-files N] [--repeats R] [--full-epochs K]``
(needs returnn for the reference; the last part runs in a subprocess to measure its peak RSS,
read from VmHWM in /proc/self/status of that process alone).

``python benchmarks/bench_plan.py --report [--num-shards 256 --num-epochs 100]`` instead times the whole
``python -m i6_shard plan`` (all outputs with the plot) on 1M files, 256 ranks, partition_epoch 20, each in its
own process: as it is now, and as it was before its unsharded comparison was sampled (every rank's layout held
and counted, ``compute_plan_stats``); wall and CPU seconds, peak RSS, and the ratios.
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
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.io.file_sizes import FileSizes
from i6_shard.core.io.file_sizes import save_file_sizes
from i6_shard.core.pure.distribute import distribute_evenly_by_size
from i6_shard.core.pure.distribute import shuffle_order
from i6_shard.core.pure.stats import compute_plan_stats
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
    sizes = lognormal_sizes(num_files, seed=0)
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
        stats = compute_plan_stats(plan, num_epochs=num_epochs)
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


def _old_other_mode_stats(plan, *, num_epochs):
    """The unsharded comparison as it was computed before it was sampled: every rank's layout, exactly."""
    try:
        other = plan.with_settings(
            distrib_shard_files=not plan.settings.distrib_shard_files,
            same_seed_on_all_ranks=False,
            distribution="returnn",
        )
    except ValueError as exc:
        return str(exc)
    return compute_plan_stats(other, num_epochs=num_epochs)


def _report_child(way: str, argv: list) -> None:
    """Run ``python -m i6_shard plan`` with ``argv`` in this process (``way``: "now" or "before"); print its wall
    and CPU seconds and this process's peak RSS as JSON."""
    import resource

    from i6_shard import cli
    from i6_shard.core import planning

    if way == "before":
        planning._other_mode_stats = _old_other_mode_stats
    t0, usage0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    code = cli.main(argv)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    print(json.dumps({"code": code, "seconds": time.perf_counter() - t0, "cpu": cpu, "peak_rss_mib": rss_mib()}))


def report_main(args) -> None:
    """The whole ``plan`` command, now and before, side by side (see the module docstring)."""
    n, shards, part = args.num_files, args.num_shards, args.partition_epoch
    print(
        f"python -m i6_shard plan: {n:,} files (lognormal sizes), num_shards={shards}, partition_epoch={part}, "
        f"num_epochs={args.num_epochs}, with the plot; each run in its own process"
    )
    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, "sizes.npz")
        keys = [f"/data/corpus/part-{i:07d}.hdf" for i in range(n)]
        save_file_sizes(FileSizes(keys, lognormal_sizes(n, seed=0)), archive)
        del keys
        results = {}
        for way in ("now", "before")[: 1 if args.no_reference else 2]:
            out_dir = os.path.join(tmp, way)
            argv = ["plan", "--sizes", archive, "--num-shards", str(shards), "--partition-epoch", str(part)]
            argv += ["--num-epochs", str(args.num_epochs), "-o", out_dir]
            child = [sys.executable, __file__, "--report-child", way, "--"] + argv
            res = json.loads(
                subprocess.run(child, check=True, stdout=subprocess.PIPE, text=True).stdout.splitlines()[-1]
            )
            assert res["code"] == 0, res
            with open(os.path.join(out_dir, "summary.json")) as f:
                res["other_mode"] = json.load(f)["other_mode"]
            results[way] = res
            sample = res["other_mode"].get("sample")
            how = (
                f"sampled: {sample['num_ranks']} of {sample['of_num_ranks']} ranks, sub-epochs 1..{sample['num_epochs']}"
                if sample
                else "every rank"
            )
            print(
                f"  {way:<7} {res['seconds']:7.2f} s wall, {res['cpu']:7.2f} s CPU, peak RSS {res['peak_rss_mib']:6.0f} MiB "
                f"(unsharded comparison: {how}, dropped mean {100 * res['other_mode']['dropped_fraction']:.3f}%)"
            )
        if len(results) == 2:
            now, before = results["now"], results["before"]
            print(
                f"  before / now: {before['seconds'] / now['seconds']:.1f}x wall, {before['cpu'] / now['cpu']:.1f}x CPU, "
                f"{before['peak_rss_mib'] / now['peak_rss_mib']:.1f}x peak RSS"
            )
        now = results["now"]
        for what, value in (("wall", now["seconds"]), ("CPU", now["cpu"])):
            ok = value < 10 and now["peak_rss_mib"] < 1024
            print(f"  target under 10 s ({what}) and 1 GiB: {'ok' if ok else 'MISSED'}")
        print("  (wall time grows with the machine's load; CPU time much less)")


def main() -> None:
    if "--report-child" in sys.argv:
        idx = sys.argv.index("--")
        _report_child(sys.argv[sys.argv.index("--report-child") + 1], sys.argv[idx + 1 :])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-files", type=int, default=1_000_000)
    parser.add_argument("--num-shards", type=int, default=8)
    parser.add_argument("--partition-epoch", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--full-epochs", type=int, default=100, help="full epochs for the time/RSS part")
    parser.add_argument("--no-write", action="store_true", help="skip timing write_plan_outputs for --full-epochs")
    parser.add_argument("--memory-child", choices=["stats", "write"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="time the whole plan command, now and before")
    parser.add_argument("--num-epochs", type=int, default=100, help="--report: the plan's num_epochs")
    parser.add_argument("--no-reference", action="store_true", help="--report: skip the run as before")
    args = parser.parse_args()
    if args.report:
        if "--num-shards" not in sys.argv:
            args.num_shards = 256
        report_main(args)
        return
    n, shards, part = args.num_files, args.num_shards, args.partition_epoch
    if args.memory_child:
        _memory_child(n, shards, part, args.full_epochs, write=args.memory_child == "write")
        return
    num_bins = shards * part
    seed = 1  # full epoch 0 with random_seed_offset 0
    sizes = lognormal_sizes(n, seed=0)
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
        order = shuffle_order(n, seed=seed)
        return order, distribute_evenly_by_size(sizes[order], num_bins=num_bins)

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

"""Benchmark: what the start-up check of precomputed sizes costs a rank (``file_sizes_check_samples``
random entries stat-ed again), against loading the sizes without it and against RETURNN's own size
loop, on local disk and with 1 ms stat latency (LD_PRELOAD shim, a slow network file system).

Each rank runs ``load_sizes_for_files`` (what ShardedDistributeFilesDataset calls) once at start-up;
the check adds k stat calls to it, whatever the length of the list. Run from the repository root:
``python benchmarks/bench_stale_check.py`` (needs returnn, dm-tree and, for the latency part, gcc).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import numpy as np

from bench_sizes import build_slowstat, make_trees, returnn_size_loop, _DEFAULT_SLOWSTAT_C


def _timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), float(np.median(times)), result


def child(args: argparse.Namespace) -> None:
    from i6_shard.core.io import check_sample_unchanged
    from i6_shard.core.io.cost_archive import load_file_sizes
    from i6_shard.returnn_ext.distrib_files import load_sizes_for_files

    label = f"{os.environ.get('SLOWSTAT_US')} us stat latency" if os.environ.get("LD_PRELOAD") else "local disk"
    small = [tuple(line.split("\0")) for line in open(os.path.join(args.workdir, "trees.list")).read().split("\n")]
    big = [small[i % len(small)] for i in range(args.big)]
    real_stat, calls = os.stat, []

    def counting_stat(path, *a, **k):
        calls.append(path)
        return real_stat(path, *a, **k)

    print(f"--- {label}", flush=True)
    t_ref, m_ref, _ = _timed(lambda: returnn_size_loop(small), args.repeats)
    print(
        f"RETURNN's size loop, {len(small):,} two-leaf trees (what a rank does without file_sizes): "
        f"{t_ref * 1e3:.1f} ms (median {m_ref * 1e3:.1f})",
        flush=True,
    )
    for name, files in (("small", small), ("big", big)):
        path = os.path.join(args.workdir, f"{name}.npz")
        t_load, m_load, loaded = _timed(lambda: load_sizes_for_files(path, files, num_samples=0), args.repeats)
        sizes = load_file_sizes(path)
        os.stat = counting_stat
        try:
            t_check, m_check, _ = _timed(
                lambda: check_sample_unchanged(sizes, trees=files, num_samples=args.k, seed=3), args.repeats
            )
        finally:
            os.stat = real_stat
        num_stats = len(calls) // args.repeats
        calls.clear()
        print(
            f"{len(files):>9,} entries: load_sizes_for_files without the check {t_load * 1e3:8.1f} ms; the check "
            f"(k={args.k}, {num_stats} stat calls) {t_check * 1e3:6.2f} ms = {100 * t_check / t_load:5.1f} % of the "
            f"load (medians {m_load * 1e3:.1f} / {m_check * 1e3:.2f} ms)"
            + (
                f"; RETURNN's loop over these trees takes {t_ref / (t_load + t_check):.0f}x load + check"
                if name == "small"
                else ""
            ),
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-trees", type=int, default=2_000, help="two-leaf trees of real (sparse) files")
    parser.add_argument("--big", type=int, default=1_000_000, help="entries of the long list (the trees repeated)")
    parser.add_argument("--k", type=int, default=16, help="file_sizes_check_samples")
    parser.add_argument("--latency-us", type=int, default=1000)
    parser.add_argument("--slowstat", default=_DEFAULT_SLOWSTAT_C, help="path to slowstat.c (the LD_PRELOAD shim)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        return child(args)

    from i6_shard import core

    workdir = tempfile.mkdtemp(prefix="bench_stale.")
    try:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, k={args.k}, temp dir {workdir}", flush=True)
        trees = make_trees(os.path.join(workdir, "files"), args.num_trees)
        with open(os.path.join(workdir, "trees.list"), "w") as f:
            f.write("\n".join("\0".join(t) for t in trees))
        sizes = core.collect_file_sizes(trees)
        core.save_file_sizes(sizes, os.path.join(workdir, "small.npz"))
        reps = -(-args.big // len(trees))
        big = core.FileSizes(
            keys=(sizes.keys * reps)[: args.big],
            sizes=np.tile(sizes.sizes, reps)[: args.big],
            mtimes=np.tile(sizes.mtimes, reps)[: args.big],
        )
        core.save_file_sizes(big, os.path.join(workdir, "big.npz"))
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--_child",
            "--workdir",
            workdir,
            "--big",
            str(args.big),
            "--k",
            str(args.k),
            "--repeats",
            str(args.repeats),
        ]
        subprocess.run(cmd, check=True)
        lib = build_slowstat(os.path.abspath(args.slowstat), workdir)
        if lib:
            subprocess.run(cmd, check=True, env=dict(os.environ, SLOWSTAT_US=str(args.latency_us), LD_PRELOAD=lib))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark: collect_file_sizes against RETURNN's own size loop, side by side on the
same trees (local disk, and 1 ms stat latency via an LD_PRELOAD shim); plus memory
and load time of 1M entries' sizes.

Run from the repository root: ``python benchmarks/bench_sizes.py`` (needs returnn, dm-tree
and, for the latency part, gcc). Targets: >= 1.5x on local disk, >= 10x at 1 ms latency,
loading 1M entries in < 2 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np
import tree  # imported before any timing: under the latency shim an import costs seconds
from returnn.datasets.distrib_files import _get_key_for_file_tree

from i6_shard.core import collect_file_sizes, load_file_sizes, save_file_sizes
from i6_shard.core.io.file_sizes import FileSizes
from timing import rss_mib

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEFAULT_SLOWSTAT_C = os.path.join(_REPO, "..", "shared", "tools", "slowstat.c")


def returnn_size_loop(files: List) -> Dict[str, int]:
    """Exactly the expression of DistributeFilesDataset._lazy_init_file_sizes."""
    return {_get_key_for_file_tree(t): sum((os.path.getsize(fn) for fn in tree.flatten(t)), 0) for t in files}


def make_trees(directory: str, num_trees: int) -> List[Tuple[str, str]]:
    """``num_trees`` (features, alignment) pairs of sparse files, 2 * num_trees files in all."""
    sizes = np.random.RandomState(0).randint(1, 10**7, size=(num_trees, 2)).tolist()
    trees = []
    for idx in range(num_trees):
        sub = os.path.join(directory, f"shard-{idx // 1000:04d}")
        if idx % 1000 == 0:
            os.makedirs(sub, exist_ok=True)
        pair = (os.path.join(sub, f"feat.{idx}.hdf"), os.path.join(sub, f"align.{idx}.hdf"))
        for path, size in zip(pair, sizes[idx]):
            with open(path, "wb") as f:
                f.truncate(size)
        trees.append(pair)
    return trees


def side_by_side(files: List, *, repeats: int, label: str) -> None:
    """Time both, interleaved (the machine may be shared), report the best of ``repeats``."""
    t_returnn: List[float] = []
    t_ours: List[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ref = returnn_size_loop(files)
        t_returnn.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ours = collect_file_sizes(files)
        t_ours.append(time.perf_counter() - t0)
        assert ours.as_dict() == ref, "collect_file_sizes differs from RETURNN"
    best_r, best_o = min(t_returnn), min(t_ours)
    print(
        f"{label}: RETURNN loop {best_r:.3f} s, collect_file_sizes {best_o:.3f} s, "
        f"ratio {best_r / best_o:.2f}x (best of {repeats}; medians {np.median(t_returnn):.3f} s vs "
        f"{np.median(t_ours):.3f} s, ratio {np.median(t_returnn) / np.median(t_ours):.2f}x)",
        flush=True,
    )


def build_slowstat(source: str, out_dir: str) -> str:
    """Compile the stat-latency shim; returns the .so path or '' (with the reason printed)."""
    if not os.path.exists(source):
        print(f"latency part skipped: {source} not found (pass --slowstat PATH/TO/slowstat.c)")
        return ""
    gcc = shutil.which("gcc")
    if not gcc:
        print("latency part skipped: gcc not found, cannot build the LD_PRELOAD stat shim")
        return ""
    lib = os.path.join(out_dir, "slowstat.so")
    subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-o", lib, source, "-ldl"], check=True)
    return lib


def synthetic_sizes(num: int) -> FileSizes:
    keys = [
        f"/data/corpus/shard-{i // 1000:04d}/feat.{i}.hdf:/data/corpus/shard-{i // 1000:04d}/align.{i}.hdf"
        for i in range(num)
    ]
    return FileSizes(keys=keys, sizes=np.random.RandomState(0).randint(1, 10**9, size=num).astype(np.int64))


def run_child(mode: str, args: argparse.Namespace, extra_env: Dict[str, str] | None = None) -> None:
    env = dict(os.environ, **(extra_env or {}))
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--_child",
        mode,
        "--workdir",
        args.workdir,
        "--slow-trees",
        str(args.slow_trees),
        "--repeats",
        str(args.repeats),
        "--rss-entries",
        str(args.rss_entries),
    ]
    subprocess.run(cmd, env=env, check=True)


def child(mode: str, args: argparse.Namespace) -> None:
    if mode == "latency":
        files = [tuple(line.split("\0")) for line in open(os.path.join(args.workdir, "slow.list")).read().split("\n")]
        side_by_side(
            files,
            repeats=args.repeats,
            label=f"{len(files):,} two-leaf trees, {os.environ.get('SLOWSTAT_US')} us stat latency",
        )
    elif mode == "rss":
        before = rss_mib("VmRSS")
        fs = synthetic_sizes(args.rss_entries)
        print(
            f"{args.rss_entries:,} entries' sizes in memory (keys of {len(fs.keys[0])} chars): "
            f"{rss_mib('VmRSS') - before:.0f} MiB more RSS; peak RSS of the process {rss_mib():.0f} MiB "
            f"(of which interpreter + numpy {before:.0f} MiB)"
        )
        path = os.path.join(args.workdir, "sizes_1m.npz")
        t0 = time.perf_counter()
        save_file_sizes(fs, path)
        print(f"save: {time.perf_counter() - t0:.2f} s, file {os.path.getsize(path) / 2**20:.1f} MiB")
    elif mode == "load":
        path = os.path.join(args.workdir, "sizes_1m.npz")
        t0 = time.perf_counter()
        fs = load_file_sizes(path)
        print(
            f"load of {len(fs):,} entries: {time.perf_counter() - t0:.2f} s (target < 2 s), "
            f"peak RSS {rss_mib():.0f} MiB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-trees", type=int, default=100_000, help="two-leaf trees on local disk")
    parser.add_argument("--slow-trees", type=int, default=2_000, help="two-leaf trees with stat latency")
    parser.add_argument("--latency-us", type=int, default=1000)
    parser.add_argument("--slowstat", default=_DEFAULT_SLOWSTAT_C, help="path to slowstat.c (the LD_PRELOAD shim)")
    parser.add_argument("--rss-entries", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="temp dir (default: a new one, removed afterwards)")
    parser.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        return child(args._child, args)

    own_dir = args.workdir is None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="bench_sizes.")
    try:
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs "
            f"(usable: {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}), "
            f"temp dir {args.workdir}",
            flush=True,
        )
        t0 = time.perf_counter()
        files = make_trees(os.path.join(args.workdir, "local"), args.num_trees)
        print(f"generated {2 * len(files):,} files in {time.perf_counter() - t0:.1f} s", flush=True)
        side_by_side(files, repeats=args.repeats, label=f"{len(files):,} two-leaf trees, local disk")

        slow = make_trees(os.path.join(args.workdir, "slow"), args.slow_trees)
        with open(os.path.join(args.workdir, "slow.list"), "w") as f:
            f.write("\n".join("\0".join(t) for t in slow))
        lib = build_slowstat(os.path.abspath(args.slowstat), args.workdir)
        if lib:
            print(f"built the stat-latency shim from {os.path.abspath(args.slowstat)}", flush=True)
            run_child("latency", args, {"SLOWSTAT_US": str(args.latency_us), "LD_PRELOAD": lib})

        run_child("rss", args)
        run_child("load", args)
    finally:
        if own_dir:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

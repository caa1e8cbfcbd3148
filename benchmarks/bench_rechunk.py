"""Benchmark: ``python -m i6_shard rechunk`` on a corpus of 100k sequences (1000 RETURNN HDF files with lognormal
numbers of sequences of 20..220 frames, mean 120), for W=8, P=20 (3,521 output files by the rule): wall time and the
peak memory of the rechunk process, against the largest output file and the interpreter's own footprint.

Run from the repository root: ``python benchmarks/bench_rechunk.py [--seqs 100000] [--feature-dim 4] [--num-files N]
[--keep DIR]`` (needs h5py; writes the input corpus first, which is not timed; ``--num-files 10`` shows the memory
following the size of one output file).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.core.io.hdf_corpus import _write_hdf  # noqa: E402

W, P, NUM_INPUT_FILES = 8, 20, 1000


def write_corpus(directory: str, *, num_seqs: int, feature_dim: int) -> str:
    rng = np.random.RandomState(0)
    counts = np.maximum(1, np.exp(rng.normal(0, 1.0, size=NUM_INPUT_FILES)))
    counts = np.maximum(1, np.round(counts / counts.sum() * num_seqs)).astype(int)
    counts[-1] += num_seqs - counts.sum()
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, n in enumerate(counts.tolist()):
        frames = rng.randint(20, 221, size=n)
        feats = [np.full((int(t), feature_dim), i % 7, dtype=np.float32) for t in frames]
        path = os.path.join(directory, f"in-{i:04d}.hdf")
        _write_hdf(path, feats, [f"corpus/{i}/{j}" for j in range(n)])
        paths.append(path)
    list_path = os.path.join(directory, "files.txt")
    core.write_file_list(paths, list_path)
    return list_path


def peak_rss_mb(argv) -> tuple:
    """Wall seconds and peak RSS (MB) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seqs", type=int, default=100_000)
    parser.add_argument("--feature-dim", type=int, default=4)
    parser.add_argument("--keep", default=None)
    parser.add_argument("--num-files", type=int, default=None, help="output files (default: the rule's)")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="i6_shard_bench_rechunk_")
    list_path = os.path.join(work, "in", "files.txt")
    if not os.path.exists(list_path):
        write_corpus(os.path.join(work, "in"), num_seqs=args.seqs, feature_dim=args.feature_dim)
    in_bytes = sum(os.path.getsize(p) for p in core.read_file_list(list_path))
    # the interpreter with numpy and h5py loaded: what any run costs before it holds data
    _, base = peak_rss_mb([sys.executable, "-c", "import h5py, numpy, i6_shard.cli"])
    out = os.path.join(work, "out")
    argv = [sys.executable, "-m", "i6_shard", "rechunk", list_path, "--num-shards", str(W), "--partition-epoch", str(P)]
    argv += [] if args.num_files is None else ["--num-files", str(args.num_files)]
    if os.path.exists(out):
        shutil.rmtree(out)
    seconds, peak = peak_rss_mb(argv + ["-o", out])
    outputs = core.read_file_list(os.path.join(out, "files.txt"))
    largest = max(os.path.getsize(p) for p in outputs) / 2**20
    print(f"input: {args.seqs:,} sequences in {NUM_INPUT_FILES} files, {in_bytes / 2**20:.0f} MB "
          f"(feature_dim={args.feature_dim})")  # fmt: skip
    print(f"rechunk W={W} P={P}: {len(outputs)} files in {seconds:.1f} s ({args.seqs / seconds:,.0f} seqs/s)")
    print(f"peak RSS {peak:.0f} MB; interpreter with numpy+h5py {base:.0f} MB; largest output file {largest:.2f} MB; "
          f"above the interpreter: {peak - base:.0f} MB")  # fmt: skip
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())

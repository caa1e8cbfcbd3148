"""Benchmark: the costs pass (frames per file from RETURNN HDF ``seqLengths``) against the stat pass
over the same files, in this process and in helper processes. Files are warm in the page cache, so
this measures the CPU side; on a network file system each open adds a round trip to both passes.

Run from the repository root: ``python benchmarks/bench_costs_pass.py [--num-files N] [--dir DIR]``
(needs h5py and returnn, whose SimpleHDFWriter writes the files).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs  # noqa: E402
from tests.hdf_data import write_tiny_hdf_files  # noqa: E402


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-files", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="write (or reuse) the files here")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="i6_shard_bench_costs_pass_")
    names = [f"f{i:06d}.hdf" for i in range(args.num_files)]
    if all(os.path.exists(os.path.join(directory, n)) for n in names):
        paths = [os.path.join(directory, n) for n in names]
    else:
        paths = write_tiny_hdf_files(directory, num_files=args.num_files, seed=0, max_seqs=50, frames=(5, 200),
                                     names=names)
    stat = best_of(lambda: core.collect_file_sizes(paths, num_procs=1))
    serial = best_of(lambda: collect_file_costs(paths, unit="frames", num_procs=1))
    procs = min(8, len(os.sched_getaffinity(0)))
    parallel = best_of(lambda: collect_file_costs(paths, unit="frames", num_procs=procs))
    n = len(paths)
    print(f"{n} HDF files, {procs} CPUs usable")
    print(f"  stat pass                {stat * 1e3:9.1f} ms  ({stat / n * 1e6:7.1f} us/file)  1.0x")
    print(f"  costs pass, 1 process    {serial * 1e3:9.1f} ms  ({serial / n * 1e6:7.1f} us/file)  {serial / stat:.1f}x")
    print(f"  costs pass, {procs} processes {parallel * 1e3:8.1f} ms  ({parallel / n * 1e6:7.1f} us/file)  "
          f"{parallel / stat:.1f}x (stat pass included in both costs passes)")
    print(f"files in {directory}")


if __name__ == "__main__":
    main()

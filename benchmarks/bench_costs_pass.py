"""Benchmark: the costs pass (frames per file from RETURNN HDF ``seqLengths``) against the stat pass
over the same files, in this process and in helper processes. Files are warm in the page cache, so
this measures the CPU side; on a network file system each open adds a round trip to both passes.

Run from the repository root: ``python benchmarks/bench_costs_pass.py [--num-files N] [--dir DIR]``
(needs h5py and returnn, whose SimpleHDFWriter writes the files); ``--arrow``: Arrow IPC stream shards
(as HuggingFace datasets writes them; needs pyarrow), rows only and with a list length column.
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


def write_arrow_shards(directory: str, num_files: int):
    """Arrow IPC streams of 1..50 rows each: a list<float32> feature column (5..200 frames of 8 values,
    flattened: the lengths are 8 times the frames) and an int column of the frames."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc

    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(0)
    schema = pa.schema([("feat", pa.list_(pa.float32())), ("num_frames", pa.int32())])
    paths = []
    for i in range(num_files):
        frames = rng.randint(5, 200, size=int(rng.randint(1, 50)))
        path = os.path.join(directory, f"f{i:06d}.arrow")
        if not os.path.exists(path):
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
                writer.write_batch(
                    pa.record_batch(
                        [
                            pa.array([np.zeros(8 * int(n), "float32") for n in frames], type=pa.list_(pa.float32())),
                            pa.array(frames.astype("int32")),
                        ],
                        schema=schema,
                    )
                )
        paths.append(path)
    return paths


def bench_arrow(directory: str, num_files: int) -> None:
    paths = write_arrow_shards(directory, num_files)
    stat = best_of(lambda: core.collect_file_sizes(paths, num_procs=1))
    rows = best_of(lambda: collect_file_costs(paths, unit="seqs", num_procs=1))
    ints = best_of(lambda: collect_file_costs(paths, unit="frames", length_column="num_frames", num_procs=1))
    lists = best_of(lambda: collect_file_costs(paths, unit="frames", length_column="feat", num_procs=1))
    n = len(paths)
    print(f"{n} arrow shards ({sum(os.path.getsize(p) for p in paths) / 2**20:.1f} MiB), one process")
    for label, t in (
        ("stat pass", stat),
        ("rows (seqs)", rows),
        ("int length column", ints),
        ("list length column", lists),
    ):
        print(f"  {label:<22} {t * 1e3:9.1f} ms  ({t / n * 1e6:7.1f} us/file)  {t / stat:.1f}x")
    print(f"files in {directory}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-files", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="write (or reuse) the files here")
    parser.add_argument("--arrow", action="store_true", help="arrow shards instead of HDF files")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="i6_shard_bench_costs_pass_")
    if args.arrow:
        bench_arrow(directory, args.num_files)
        return
    names = [f"f{i:06d}.hdf" for i in range(args.num_files)]
    if all(os.path.exists(os.path.join(directory, n)) for n in names):
        paths = [os.path.join(directory, n) for n in names]
    else:
        paths = write_tiny_hdf_files(
            directory, num_files=args.num_files, seed=0, max_seqs=50, frames=(5, 200), names=names
        )
    stat = best_of(lambda: core.collect_file_sizes(paths, num_procs=1))
    serial = best_of(lambda: collect_file_costs(paths, unit="frames", num_procs=1))
    procs = min(8, len(os.sched_getaffinity(0)))
    parallel = best_of(lambda: collect_file_costs(paths, unit="frames", num_procs=procs))
    n = len(paths)
    print(f"{n} HDF files, {procs} CPUs usable")
    print(f"  stat pass                {stat * 1e3:9.1f} ms  ({stat / n * 1e6:7.1f} us/file)  1.0x")
    print(f"  costs pass, 1 process    {serial * 1e3:9.1f} ms  ({serial / n * 1e6:7.1f} us/file)  {serial / stat:.1f}x")
    print(
        f"  costs pass, {procs} processes {parallel * 1e3:8.1f} ms  ({parallel / n * 1e6:7.1f} us/file)  "
        f"{parallel / stat:.1f}x (stat pass included in both costs passes)"
    )
    print(f"files in {directory}")


if __name__ == "__main__":
    main()

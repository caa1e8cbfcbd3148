"""Benchmark: ``VerifyShardingJob`` under DataLoader worker sharding, its wall time and verdict.

16 HDF files, 2 ranks, 8 sub-epochs (partition_epoch 2), ``behavior_version = 37`` and
``torch_dataloader_opts = {"num_workers": 2}`` (each rank's 2 workers read a shard each: 4 shards), the sub-epoch
datasets as RETURNN's default has them (``use_worker_proc=True``), run as the job runs (its ``run`` task, the ranks'
RETURNN processes side by side). Prints the job's stdout lines, the report's head and the wall time; docs/jobs.md has
the measured numbers.

Run from the repository root: ``python benchmarks/bench_verify_workers.py [--no-worker-proc] [--keep DIR]``
(needs RETURNN, torch, h5py and Sisyphus). Not a test: the time depends on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.hdf_data import sharded_dfd, write_tiny_hdf_files  # noqa: E402

NUM_FILES, NUM_RANKS, PARTITION_EPOCH, NUM_EPOCHS, NUM_WORKERS = 16, 2, 2, 8, 2
CONFIG_OPTS = {
    "backend": "torch",
    "torch_distributed": {},
    "behavior_version": 37,
    "torch_dataloader_opts": {"num_workers": NUM_WORKERS},
}


def run_verify(work: str, *, use_worker_proc: bool) -> float:
    """Run the job's task in ``work``; its wall time in seconds (raises if the verification fails)."""
    import sisyphus.job
    from sisyphus import gs

    from i6_shard.jobs import VerifyShardingJob

    gs.WORK_DIR = os.path.join(work, "work")
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])
    files = write_tiny_hdf_files(os.path.join(work, "data"), num_files=NUM_FILES, seed=3)
    dataset = sharded_dfd(files, partition_epoch=PARTITION_EPOCH, use_worker_proc=use_worker_proc)
    job = VerifyShardingJob(dataset, num_shards=NUM_RANKS, epochs=NUM_EPOCHS, config_opts=CONFIG_OPTS)
    job._sis_setup_directory()
    start = time.monotonic()
    cwd = os.getcwd()
    os.chdir(job._sis_path(gs.JOB_WORK_DIR, abspath=True))
    try:
        job.run()
    finally:
        os.chdir(cwd)
    seconds = time.monotonic() - start
    with open(job.out_report.get_path()) as f:
        print("".join(f.readlines()[:6]), end="")
    sisyphus.job.created_jobs.clear()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--no-worker-proc", action="store_true", help="use_worker_proc=False in the dict (as tests/hdf_data.py has it)"
    )
    parser.add_argument("--keep", help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="bench_verify_")
    os.makedirs(work, exist_ok=True)
    try:
        seconds = run_verify(work, use_worker_proc=not args.no_worker_proc)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"{NUM_FILES} files, {NUM_RANKS} ranks x {NUM_WORKERS} DataLoader workers, {NUM_EPOCHS} sub-epochs "
        f"(use_worker_proc={not args.no_worker_proc}): {seconds:.1f} s wall"
    )


if __name__ == "__main__":
    main()

"""A real multi-rank RETURNN training on a re-chunked corpus: make-data's 120-file corpus whose largest file holds
6.8 rank shares of a sub-epoch (W=4, P=10), re-chunked by ``python -m i6_shard rechunk``, planned by steps with
``equal_steps`` and ``max_sub_epoch_deviation=0.1``, trained one full epoch (torchrun, gloo, CPU, the harness's
one-layer model) from the plan file, and measured with the training report: the dropped share per sub-epoch, each
sub-epoch's frames over the mean, and whether every rank's steps equal the plan's.

Run from the repository root: ``python benchmarks/rechunk_training.py [--keep DIR]`` (needs torch, returnn, dm-tree,
h5py; a few minutes on two shared cores).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.cli import main as cli_main  # noqa: E402
from i6_shard.core.io.plan_steps import read_planned_steps  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402
from tests.training.harness import hdf_files_dataset, run_training  # noqa: E402

W, P, BATCH_SIZE, MAX_SEQS, BEHAVIOR_VERSION = 4, 10, 1000, 8, 31


def cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = cli_main(list(argv))
    if rc != 0:
        raise RuntimeError(f"python -m i6_shard {' '.join(argv)} exited with {rc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", default=None, help="work in this directory and keep it")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="i6_shard_rechunk_training_")
    made, rechunked = f"{work}/make120", f"{work}/make120_rechunked"
    if not os.path.exists(made):
        # two features per frame, as the harness's model reads them
        cli("make-data", "-o", made, "--num-files", "120", "--seed", "102", "--feature-dim", "2")
    if not os.path.exists(rechunked):
        cli("rechunk", f"{made}/files.txt", "--num-shards", str(W), "--partition-epoch", str(P), "-o", rechunked)
    frames, steps = f"{work}/frames.npz", f"{work}/steps.npz"
    cli("costs", f"{rechunked}/files.txt", "--unit", "frames", "-o", frames)
    limits = ["--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS)]
    cli("costs", f"{rechunked}/files.txt", "--unit", "steps", *limits, "-o", steps)
    plan_dir = f"{work}/plan"
    cli("plan", "--sizes", steps, "--num-shards", str(W), "--partition-epoch", str(P), "--num-epochs", str(P), *limits,
        "--distribution", "equal_steps", "--max-sub-epoch-deviation", "0.1", "--torch-distributed",
        json.dumps({"backend": "gloo"}), "--no-plot", "-o", plan_dir)  # fmt: skip
    plan_path = os.path.join(plan_dir, "plan.npz")
    keys = core.load_file_sizes(frames).keys
    source = core.load_file_sizes(f"{work}/source_frames.npz") if os.path.exists(f"{work}/source_frames.npz") else None
    if source is None:
        cli("costs", f"{made}/files.txt", "--unit", "frames", "-o", f"{work}/source_frames.npz")
        source = core.load_file_sizes(f"{work}/source_frames.npz")
    print(f"corpus: largest file {source.sizes.max() / (source.sizes.sum() / (W * P)):.2f} rank shares; re-chunked "
          f"into {len(keys)} files")  # fmt: skip
    train = hdf_files_dataset(keys, num_shards=W, partition_epoch=P, distribution="equal_steps", plan=plan_path)
    training = run_training(
        f"{work}/run", train=train, num_ranks=W, num_epochs=P, batch_size=BATCH_SIZE, max_seqs=MAX_SEQS,
        behavior_version=BEHAVIOR_VERSION, torch_distributed={"backend": "gloo"},
    )  # fmt: skip
    summary = write_train_report(
        training.log_files, f"{work}/train_report", plan_path=plan_path, partition_epoch=P, plot=False
    )
    planned = read_planned_steps(plan_path, num_shards=W, max_epoch=P)
    sub = summary["sub_epochs"]
    dropped = np.array([s["dropped_fraction"] for s in sub])
    available = np.array([sum(r["available_frames"] for r in s["ranks"]) for s in sub], dtype=float)
    ratios = available / available.mean()
    records = [r for s in sub for r in s["ranks"]]
    as_planned = sum(1 for r in records if r.get("planned_steps") is not None and r["steps"] == r["planned_steps"])
    print(f"training: {W} ranks, {len(sub)} sub-epochs, {training.seconds:.0f} s")
    print(f"dropped per sub-epoch: mean {100 * dropped.mean():.3f}%, worst {100 * dropped.max():.3f}%, "
          f"{int((dropped == 0).sum())} of {len(sub)} lossless; the plan predicted "
          f"{100 * np.mean(planned['dropped']):.3f}%")  # fmt: skip
    print(f"sub-epoch frames over the mean: {ratios.min():.3f} to {ratios.max():.3f} "
          f"({int((np.abs(ratios - 1) > 0.1).sum())} more than 10% off)")  # fmt: skip
    print(
        f"steps as planned in {as_planned} of {len(records)} (sub-epoch, rank); alarms: {summary['alarms'] or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

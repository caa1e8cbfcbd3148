"""Benchmark: a real 2-rank RETURNN training (torchrun, gloo, CPU; ``tests/training/harness.py``) with
``distribution="equal_steps"`` on an older RETURNN release: per rank and sub-epoch, whether its files are the plan's,
its steps against the plan's ``steps_taken``, and the sequences it trained against those its files hold.

RETURNN before 1.20261022.211313 runs torch distributed only on GPUs. ``Engine.__init__`` asserts
``self._device == "cuda"``, and ``DistributedContext.maybe_make_distributed_module`` passes
``device_ids=[local_rank]`` to DistributedDataParallel. So the release is installed into a cache
(``tests/returnn_versions/releases.py``) and copied, and the copy is patched in these two places: the CPU device is
kept and ``device_ids=None``. The dataset side is the release's own code, unchanged. docs/returnn_versions.md has
the measured numbers.

Run from the repository root: ``python benchmarks/bench_release_training.py [--release 1.20240620.64807]
[--keep DIR]`` (needs torch, h5py and pip access for the release; 40-70 s per training on 2 shared cores).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.cli import main as cli  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from tests.returnn_versions.releases import install  # noqa: E402
from tests.training.harness import hdf_seq_lengths, run_training, write_skewed_hdf_files  # noqa: E402

NUM_RANKS, NUM_FILES, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE, MAX_SEQS = 2, 14, 2, 4, 150, 4
#: (file, the release's code, the patched code): the two places that refuse a CPU under torch_distributed
PATCHES = (
    (
        "returnn/torch/engine.py",
        '            assert self._device == "cuda", f"torch distributed: unexpected device {self._device!r}"\n'
        '            self._device = f"cuda:{local_rank}"\n',
        '            if self._device == "cuda":\n                self._device = f"cuda:{local_rank}"\n',
    ),
    ("returnn/torch/distributed.py", "device_ids=[self.local_rank()],", "device_ids=None,"),
)


def patched_copy(release_dir: str, into: str) -> str:
    """A copy of the installed release with :data:`PATCHES` applied (each must match exactly once)."""
    target = os.path.join(into, os.path.basename(release_dir))
    shutil.copytree(release_dir, target)
    for rel, old, new in PATCHES:
        path = os.path.join(target, rel)
        with open(path) as f:
            text = f.read()
        if text.count(old) != 1:
            raise RuntimeError(f"{path}: the code to patch is not there once; this release needs no or another patch")
        with open(path, "w") as f:
            f.write(text.replace(old, new))
    return target


def plan_and_train(work: str, *, release: str) -> None:
    paths = write_skewed_hdf_files(os.path.join(work, "run", "data"), num_files=NUM_FILES, seed=5)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    archive = os.path.join(work, "frames.npz")
    save_file_costs(dataclasses.replace(collect_file_costs(paths, unit="frames", num_procs=1), keys=keys), archive)
    plan_dir, td = os.path.join(work, "plan"), {"backend": "gloo"}
    args = ["plan", "--sizes", archive, "--num-shards", str(NUM_RANKS), "--partition-epoch", str(PARTITION_EPOCH)]
    args += ["--num-epochs", str(NUM_EPOCHS + PARTITION_EPOCH), "--distribution", "equal_steps"]
    args += ["--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS), "--torch-distributed", json.dumps(td)]
    assert cli(args + ["--no-plot", "-o", plan_dir]) == 0
    train = sharded_files_dataset(
        keys,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=PARTITION_EPOCH,
        num_shards=NUM_RANKS,
        plan=os.path.join(plan_dir, "plan.npz"),
        returnn_version=release,
    )
    training = run_training(
        os.path.join(work, "run"),
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=21,  # the newest these releases know
        torch_distributed=td,
    )
    print(f"RETURNN {release}: trained in {training.seconds:.0f} s")
    report(work, keys)


def report(work: str, keys) -> None:
    """Per rank and sub-epoch from the logs: the files (from torchrun's output, where DataLoader workers print them),
    the steps and the sequences trained (num_seqs of each logged step)."""
    run = os.path.join(work, "run")
    plan = core.read_plan_file(os.path.join(work, "plan", "plan.npz"))
    with open(os.path.join(work, "plan", "summary.json")) as f:
        steps_planned = json.load(f)["steps_taken"]
    files = {}
    with open(os.path.join(run, "stdout.txt"), errors="replace") as f:
        for line in f:
            m = re.match(r"\[default(\d+)\]:.*using files for epoch (\d+): (\[.*\])", line)
            if m:
                files.setdefault((int(m.group(1)), int(m.group(2))), ast.literal_eval(m.group(3)))
    for rank in range(NUM_RANKS):
        trained, steps = {}, {}
        with open(os.path.join(run, f"returnn.torch-distrib-{rank}-{NUM_RANKS}.log")) as f:
            for line in f:
                m = re.match(r"ep (\d+) train, step (\d+), .*num_seqs (\d+)", line)
                if m:
                    epoch = int(m.group(1))
                    trained[epoch] = trained.get(epoch, 0) + int(m.group(3))
                    steps[epoch] = int(m.group(2)) + 1
        for epoch in sorted(trained):
            order, bounds = plan.layout(full_epoch_0idx=(epoch - 1) // PARTITION_EPOCH)
            b = rank * PARTITION_EPOCH + (epoch - 1) % PARTITION_EPOCH
            planned = [keys[i] for i in order[bounds[b] : bounds[b + 1]]]
            held = sum(len(hdf_seq_lengths(os.path.join(run, f))) for f in files[(rank, epoch)])
            print(
                f"  rank {rank} sub-epoch {epoch}: files as planned {files[(rank, epoch)] == planned}, steps "
                f"{steps[epoch]} (plan {steps_planned[epoch - 1][rank]}), trained {trained[epoch]} of {held} seqs"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="1.20240620.64807")
    parser.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="i6_shard_release_training_") as tmp:
        work = args.keep or tmp
        release_dir = patched_copy(install(args.release), os.path.join(work, "releases"))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (release_dir, os.environ.get("PYTHONPATH")) if p)
        plan_and_train(work, release=args.release)


if __name__ == "__main__":
    main()

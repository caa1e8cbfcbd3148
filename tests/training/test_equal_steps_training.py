"""A real multi-rank RETURNN training (torchrun, gloo on CPU; tests/training/harness.py) of distribution "equal_steps"
without a plan file: the RETURNN-side dataset cuts the bins itself from the costs archive and RETURNN's own engine
settings, and every rank trains exactly the files and steps the plan of ``python -m i6_shard plan`` shows."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tests.deps import needs_torch

NUM_RANKS, NUM_FILES, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE, MAX_SEQS = 2, 14, 2, 4, 150, 4


@pytest.mark.slow
@pytest.mark.parametrize("torch_distributed", [{}, {"reduce_type": "param", "param_sync_step": 2}])
def test_equal_steps_without_a_plan_file_trains_the_plans_files_and_steps(tmp_path, torch_distributed):
    needs_torch("the training needs torch")
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
    from i6_shard import core
    from i6_shard.cli import main
    from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
    from i6_shard.core.io.returnn_log import read_training_logs

    from .harness import hdf_files_dataset, run_training, write_skewed_hdf_files

    work = str(tmp_path)
    paths = write_skewed_hdf_files(os.path.join(work, "run", "data"), num_files=NUM_FILES, seed=5)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    archive = os.path.join(work, "frames.npz")
    save_file_costs(dataclasses.replace(collect_file_costs(paths, unit="frames", num_procs=1), keys=keys), archive)
    config_td = {"backend": "gloo", **torch_distributed}
    plan_dir = os.path.join(work, "plan")
    args = ["plan", "--sizes", archive, "--num-shards", str(NUM_RANKS), "--partition-epoch", str(PARTITION_EPOCH)]
    args += ["--num-epochs", str(NUM_EPOCHS), "--distribution", "equal_steps", "--batch-size", str(BATCH_SIZE)]
    args += ["--max-seqs", str(MAX_SEQS), "--torch-distributed", json.dumps(config_td), "--no-plot", "-o", plan_dir]
    assert main(args) == 0
    with open(os.path.join(plan_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["batching"]["simulation"]["exact"]
    plan = core.read_plan_file(os.path.join(plan_dir, "plan.npz"))
    train = hdf_files_dataset(
        keys, num_shards=NUM_RANKS, partition_epoch=PARTITION_EPOCH, distribution="equal_steps", file_sizes=archive
    )
    training = run_training(
        os.path.join(work, "run"),
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=31,
        torch_distributed=config_td,
    )
    logs = read_training_logs(training.log_files)
    for full in range(NUM_EPOCHS // PARTITION_EPOCH):
        read = []
        for sub in range(PARTITION_EPOCH):
            epoch = full * PARTITION_EPOCH + sub + 1
            order, bounds = plan.layout(full)
            for r in range(NUM_RANKS):
                rec = logs.ranks[r].sub_epochs[epoch]
                b = r * PARTITION_EPOCH + sub
                assert rec.file_keys == [keys[i] for i in order[bounds[b] : bounds[b + 1]]], (epoch, r)
                assert rec.trained_steps == summary["steps_taken"][epoch - 1][r], (epoch, r)
                read += rec.file_keys
        assert sorted(read) == sorted(keys)  # every file once per full epoch
    assert np.isfinite(training.seconds)

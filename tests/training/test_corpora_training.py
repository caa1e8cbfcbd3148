"""A real multi-rank RETURNN training (torchrun, gloo on CPU; tests/training/harness.py) of two corpora mixed by weight
(A weight 1, B weight 2.5) through a plan file: every rank trains exactly the plan's files and steps, repeats
included, nothing is dropped, and train-report shows each corpus's share as planned. The DataLoader reads in each
rank's process (``num_workers=0``: a worker per rank would add a third of the training's CPU; test_engine_live.py reads
through the worker)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from tests.deps import needs_torch

NUM_RANKS, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE, MAX_SEQS = 2, 4, 8, 150, 4
NUM_A, NUM_B = 12, 6


@pytest.mark.slow
def test_two_corpora_by_weight_train_as_planned(tmp_path):
    needs_torch("the training needs torch")
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
    from i6_shard import core
    from i6_shard.cli import main
    from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
    from i6_shard.core.io.returnn_log import read_training_logs
    from i6_shard.core.reporting.train_report import write_train_report

    from .harness import hdf_files_dataset, run_training, write_skewed_hdf_files

    work = str(tmp_path)
    paths = write_skewed_hdf_files(os.path.join(work, "run", "data"), num_files=NUM_A + NUM_B, seed=7)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_A + NUM_B)]
    archives = [os.path.join(work, "A.npz"), os.path.join(work, "B.npz")]
    for archive, part in zip(archives, (slice(0, NUM_A), slice(NUM_A, None))):
        costs = collect_file_costs(paths[part], unit="frames", num_procs=1)
        save_file_costs(dataclasses.replace(costs, keys=keys[part]), archive)
    plan_dir = os.path.join(work, "plan")
    args = ["plan", "--sizes", archives[0], "--sizes", archives[1], "--weights", "1,2.5"]
    args += ["--num-shards", str(NUM_RANKS), "--partition-epoch", str(PARTITION_EPOCH), "--num-epochs", str(NUM_EPOCHS)]
    args += ["--distribution", "equal_steps", "--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS)]
    assert main(args + ["--preload-next-n-sub-epochs", "0", "--no-plot", "-o", plan_dir]) == 0
    with open(os.path.join(plan_dir, "summary.json")) as f:
        planned = json.load(f)
    plan_file = core.read_plan_file(os.path.join(plan_dir, "plan.npz"))
    train = hdf_files_dataset(
        [keys[:NUM_A], keys[NUM_A:]],
        num_shards=NUM_RANKS,
        partition_epoch=PARTITION_EPOCH,
        weights=[1, 2.5],
        plan=os.path.join(plan_dir, "plan.npz"),
        preload_next_n_sub_epochs=0,
    )
    training = run_training(
        os.path.join(work, "run"),
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=31,
        torch_distributed={"backend": "gloo"},
        extra_config={"torch_dataloader_opts": {"num_workers": 0}},
    )
    logs = read_training_logs(training.log_files)
    reads = np.zeros(NUM_A + NUM_B, dtype=np.int64)
    for epoch in range(1, NUM_EPOCHS + 1):
        for r in range(NUM_RANKS):
            rec = logs.ranks[r].sub_epochs[epoch]
            planned_files = plan_file.served_plan.files_for(epoch=epoch, shard_index=r)
            assert rec.file_keys == planned_files, (epoch, r)
            assert rec.trained_steps == planned["steps_taken"][epoch - 1][r], (epoch, r)
            reads[[keys.index(k) for k in rec.file_keys]] += 1
    assert reads[:NUM_A].tolist() == [2] * NUM_A and int(reads[NUM_A:].sum()) == 2 * 15  # 2 full epochs x 2.5 x 6
    summary = write_train_report(training.log_files, os.path.join(work, "report"), plan_path=plan_dir, plot=False)
    assert summary["dropped_fraction"] == 0.0 and summary["dropped_fraction_max"] == 0.0
    a_entry, b_entry = summary["corpora"]
    for entry in (a_entry, b_entry):
        assert entry["share"] == entry["planned_share"]  # the shares as planned, every sub-epoch
    assert sum(b_entry["reads"]) == 30 and sum(a_entry["reads"]) == 2 * NUM_A
    assert not [a for a in summary["alarms"] if "share" in a or "twice" in a], summary["alarms"]
    report = open(os.path.join(work, "report", "report.txt")).read()
    print(report[report.index("Corpora") :])

"""``distribution="flexible_auto"`` fed a ``steps`` costs archive, in a real 2-rank RETURNN training (torchrun,
gloo, CPU): RETURNN's own logs show every rank reading the plan's files in every sub-epoch, including sub-epochs
that files were moved into (not contiguous parts of the shuffled order), and the training report finds them
as planned. The DataLoader reads in each rank's process (``num_workers=0``: the files a rank reads are its dataset's
wherever it runs, and a worker per rank would add a third of the training's time; test_engine_live.py reads through
the worker)."""

import dataclasses
import os

import pytest

from tests.deps import needs_torch

needs_torch("the training needs torch")
pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")

from i6_shard import core  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs  # noqa: E402
from i6_shard.core.io.returnn_log import read_training_logs  # noqa: E402
from i6_shard.core.pure.batching import Batching  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402

from .harness import hdf_files_dataset, run_training, write_skewed_hdf_files  # noqa: E402

#: 16 skewed files (the largest 1.4 times a rank's share of a sub-epoch in steps); with this seed the files
#: move between sub-epochs in both full epochs, which the test checks first.
NUM_RANKS, NUM_FILES, SEED, PARTITION_EPOCH, NUM_EPOCHS = 2, 16, 7, 3, 6
BATCHING = Batching(batch_size=300, max_seqs=10)


def test_flexible_auto_by_steps_trains_its_plan(tmp_path):
    work = str(tmp_path / "run")
    paths = write_skewed_hdf_files(os.path.join(work, "data"), num_files=NUM_FILES, seed=SEED)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]  # as the training names them (its cwd: work)
    costs = collect_file_costs(paths, unit="steps", num_procs=1, batching=BATCHING)
    archive = str(tmp_path / "steps.npz")
    save_file_costs(dataclasses.replace(costs, keys=keys), archive)
    plan = core.ShardPlan(
        keys,
        costs.costs,
        core.PlanSettings(
            num_shards=NUM_RANKS,
            partition_epoch=PARTITION_EPOCH,
            num_epochs=NUM_EPOCHS,
            distribution="flexible_auto",
            unit="steps",
        ),
    )
    # not vacuous: files moved between sub-epochs in both full epochs (counted independently in
    # tests/core/pure/test_flexible_auto.py)
    assert plan.non_contiguous_sub_epochs(full_epoch_0idx=0) and plan.non_contiguous_sub_epochs(full_epoch_0idx=1)
    train = hdf_files_dataset(
        keys, num_shards=NUM_RANKS, partition_epoch=PARTITION_EPOCH, distribution="flexible_auto", file_sizes=archive
    )
    training = run_training(
        work,
        train=train,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        batch_size=BATCHING.batch_size,
        max_seqs=BATCHING.max_seqs,
        extra_config={"torch_dataloader_opts": {"num_workers": 0}},
    )
    logs = read_training_logs(training.log_files)
    assert logs.epochs == list(range(1, NUM_EPOCHS + 1))
    for rank_log in logs.ranks:
        for epoch in logs.epochs:
            assert rank_log.sub_epochs[epoch].file_keys == plan.files_for(epoch=epoch, shard_index=rank_log.rank), (
                rank_log.rank,
                epoch,
            )
            assert rank_log.sub_epochs[epoch].finished
    plan_path = str(tmp_path / "plan.npz")
    core.save_plan(plan, plan_path)
    here = os.getcwd()
    os.chdir(work)  # the report reads the HDF files by the keys the training logged
    try:
        summary = write_train_report(training.log_files, str(tmp_path / "report"), plan_path=plan_path, plot=False)
    finally:
        os.chdir(here)
    assert all(x["files_match_plan"] for s in summary["sub_epochs"] for x in s["ranks"])

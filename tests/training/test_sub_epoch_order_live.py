"""A sub-epoch dataset with a length-dependent order in a real 2-rank RETURNN training (torchrun, gloo, CPU): the plan
reads the HDFDataset's ``seq_ordering="laplace:.20"`` from the training's config (as ``ShardPlanJob.for_training``
does), simulates it exactly, and its ``steps_taken`` are RETURNN's "Trained N steps" in every (sub-epoch, rank);
``train-report --plan ... --fail-on-alarm`` finds nothing to alarm of. A plan of the random order has other steps
here, so the order is what decides them. The DataLoader reads in each rank's process (``num_workers=0``: the steps
are the rank's, and a worker per rank would add a third of the training's time; test_engine_live.py reads through the
worker)."""

import dataclasses
import json

import pytest

from tests.deps import needs_torch

ORDER = "laplace:.20"
NUM_FILES, NUM_EPOCHS = 16, 4
NAMES = ("num_shards", "partition_epoch", "num_epochs")


@pytest.mark.slow
def test_a_laplace_order_is_planned_exactly_and_the_training_takes_the_planned_steps(tmp_path):
    needs_torch("the training needs torch")
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
    from i6_shard import core
    from i6_shard.cli import main
    from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs
    from i6_shard.core.io.returnn_log import read_training_logs
    from i6_shard.returnn_config import sharded_files_dataset
    from i6_shard.returnn_config.plan import training_plan_options

    from .harness import run_training, training_config, write_skewed_hdf_files

    run_dir = tmp_path / "run"
    paths = write_skewed_hdf_files(str(run_dir / "data"), num_files=NUM_FILES, seed=3)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    archive = str(tmp_path / "frames.npz")
    save_file_costs(dataclasses.replace(collect_file_costs(paths, unit="frames", num_procs=1), keys=keys), archive)
    train = sharded_files_dataset(
        keys,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": ORDER},
        partition_epoch=2,
        use_worker_proc=False,
        num_shards=2,
        distribution="balanced",
        file_sizes=archive,
    )
    settings = dict(num_epochs=NUM_EPOCHS, batch_size=300, max_seqs=10, torch_distributed={"backend": "gloo"})
    options = training_plan_options(training_config(train=train, **settings), num_ranks=2)
    assert options["sub_epoch_seq_ordering"] == ORDER
    names = set(core.PLAN_OPTION_DEFAULTS) | set(NAMES)

    def plan(name, **changed):
        request = core.PlanRequest.from_options(**{k: v for k, v in {**options, **changed}.items() if k in names})
        d = tmp_path / name
        d.mkdir()
        paths = {f"{x}_path": str(d / f"{x}.{ext}") for x, ext in (("plan", "npz"), ("summary", "json"))}
        core.write_outputs(core.plan_archive(archive, request), **paths, report_path=str(d / "report.txt"))
        return d, json.loads((d / "summary.json").read_text())

    plan_dir, summary = plan("plan")
    _, random_summary = plan("random", sub_epoch_seq_ordering="random")
    assert summary["batching"]["simulation"]["exact"] is True
    in_process = {"torch_dataloader_opts": {"num_workers": 0}}
    training = run_training(str(run_dir), train=train, num_ranks=2, extra_config=in_process, **settings)
    logs = read_training_logs(training.log_files)
    logged = [[int(logs.ranks[r].sub_epochs[e].trained_steps) for r in range(2)] for e in range(1, NUM_EPOCHS + 1)]
    assert summary["steps_taken"] == logged
    assert random_summary["steps_taken"] != logged  # the order decides the steps here: the test can fail
    argv = ["train-report", *training.log_files, "--plan", str(plan_dir), "--no-plot", "--fail-on-alarm"]
    assert main(argv + ["-o", str(tmp_path / "report")]) == 0

"""``sharded_files_dataset(..., plan=ShardPlanJob.out_plan)`` in the real Sisyphus and i6_core: the plan is
an input of the ReturnnTrainingJob, so Sisyphus runs the training only after the plan job finished, and a
plan job that fails (too few files for the bins) leaves the training waiting; without ``plan`` nothing moves."""

import os
import re
import sys

import pytest

from tests.deps import needs_matplotlib

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip(
    "i6_core.returnn", reason="needs i6_core on PYTHONPATH (clone github.com/rwth-i6/i6_core into recipe/)"
)

from sisyphus import tk  # noqa: E402

from i6_shard.core import FileSizes, save_file_sizes, write_file_list  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.i6core import sharded_returnn_config, training_job  # noqa: E402

CONFIG = {"backend": "torch", "behavior_version": 24, "batch_size": 1000}
_LEVELS = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 3}]}


def _graph(tmp_path, *, partition_epoch: int, plan: bool = True, v2: bool = True):
    keys = [str(tmp_path / f"f{i}.hdf") for i in range(8)]
    sizes_path, list_path = str(tmp_path / "sizes.npz"), str(tmp_path / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 9))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=partition_epoch, num_epochs=5)
    dataset = sharded_files_dataset(
        tk.Path(list_path),
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=partition_epoch,
        num_shards=2,
        plan=plan_job.out_plan if plan else None,
    )
    train = training_job(
        sharded_returnn_config(CONFIG, dataset, v2=v2),
        num_gpus=2,
        num_epochs=4,
        returnn_version="1.20261022.211313",
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(str(tmp_path)),
    )
    return plan_job, dataset, train


@needs_matplotlib
@pytest.mark.parametrize("v2", [True, False])
def test_the_training_depends_on_the_plan_job(work_dir, monkeypatch, v2):
    from sisyphus import gs

    monkeypatch.setattr(gs, "WAIT_PERIOD_BETWEEN_CHECKS", 0)  # look at the job directory on every check
    plan_job, dataset, train = _graph(work_dir, partition_epoch=2, v2=v2)
    assert dataset["plan"] is plan_job.out_plan
    assert plan_job.out_plan in train._sis_inputs
    assert plan_job in {p.creator for p in train._sis_inputs}
    assert not train._sis_all_path_available()  # the plan job has not run
    run_job(plan_job)
    open(os.path.join(plan_job._sis_path(), "finished"), "w").close()  # what the Sisyphus worker marks
    assert plan_job.out_plan.available() and train._sis_all_path_available()
    _, _, unplanned = _graph(work_dir, partition_epoch=2, plan=False, v2=v2)
    assert unplanned._sis_id() != train._sis_id() and plan_job.out_plan not in unplanned._sis_inputs


@needs_matplotlib
def test_a_failing_plan_blocks_the_training(work_dir, monkeypatch):
    from sisyphus import gs

    monkeypatch.setattr(gs, "WAIT_PERIOD_BETWEEN_CHECKS", 0)
    plan_job, _, train = _graph(work_dir, partition_epoch=5)  # 8 files cannot fill 2*5 bins
    with pytest.raises(ValueError, match="8 files cannot fill num_shards\\*partition_epoch=2\\*5=10 bins"):
        run_job(plan_job)
    assert not os.path.exists(plan_job.out_plan.get_path()) and not plan_job.out_plan.available()
    assert not train._sis_runnable()


def test_plan_goes_into_the_written_config_as_its_path(work_dir, monkeypatch):
    plan_job, _, train = _graph(work_dir, partition_epoch=2, v2=False)
    train._sis_setup_directory()
    monkeypatch.chdir(train._sis_path("work"))  # as the worker runs it: create_files writes rnn.sh into cwd
    train.create_files()
    with open(os.path.join(train._sis_path(), "output", "returnn.config")) as f:
        text = f.read()
    assert f'"plan": "{plan_job.out_plan.get_path()}"' in text


def test_builder_checks_plan(tmp_path):
    hdf = {"class": "HDFDataset", "seq_ordering": "random"}
    d = sharded_files_dataset(["/a.hdf", "/b.hdf"], sub_epoch_dataset=hdf, partition_epoch=1, plan="/p/plan.npz")
    assert d["plan"] == "/p/plan.npz" and d["class"].qualname == "ShardedDistributeFilesDataset"
    assert "plan" not in sharded_files_dataset(["/a.hdf"], sub_epoch_dataset=hdf, partition_epoch=1)
    with pytest.raises(ValueError, match="give plan or file_sizes, not both"):
        sharded_files_dataset(
            ["/a.hdf"], sub_epoch_dataset=hdf, partition_epoch=1, plan="/p/plan.npz", file_sizes="/p/sizes.npz"
        )
    with pytest.raises(ValueError, match="is not a plan file"):
        sharded_files_dataset(["/a.hdf"], sub_epoch_dataset=hdf, partition_epoch=1, plan="/p/report.txt")
    with pytest.raises(ValueError, match="sharded_files_dataset"):
        sharded_files_dataset(["/a.hdf"], sub_epoch_dataset=hdf, partition_epoch=1, extra_opts={"plan": "/x.npz"})


@pytest.mark.parametrize(
    "plan_opts, match",
    [
        (
            {"num_epochs": 3},
            "the plan job has num_epochs=3 and 1 preloaded, the training num_epochs=4: the plan covers "
            "sub-epochs 1..4 .*, but sub-epoch 5 is read .* ShardPlanJob\\(..., num_epochs=4\\)",
        ),
        (
            {"num_epochs": 4, "preload_next_n_sub_epochs": 0},
            "the plan job has num_epochs=4 and 0 preloaded, the training num_epochs=4: the plan covers sub-epochs 1..4",
        ),
        ({"num_shards": 4}, "2 ranks train, but the plan job has num_shards=4"),
        ({"partition_epoch": 4}, "partition_epoch=2, but the plan job has 4"),
    ],
)
def test_a_plan_job_that_does_not_fit_the_training_fails_when_the_graph_is_built(work_dir, plan_opts, match):
    """Where the dataset would fail at start-up on every rank, the training job is refused at graph time."""
    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(
        tk.Path(sizes_path), **{"num_shards": 2, "partition_epoch": 2, "num_epochs": 4, **plan_opts}
    )
    dataset = sharded_files_dataset(
        tk.Path(list_path),
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
        num_shards=2,
        plan=plan_job.out_plan,
    )
    with pytest.raises(ValueError, match=match):
        training_job(
            sharded_returnn_config(CONFIG, dataset),
            num_gpus=2,
            num_epochs=4,
            returnn_version="1.20261022.211313",
            returnn_python_exe=tk.Path(sys.executable),
            returnn_root=tk.Path(str(work_dir)),
        )


def test_the_dataset_takes_its_settings_from_the_plan_job(work_dir):
    """plan= a ShardPlanJob: the recipe states num_shards, partition_epoch and the distribution once; values
    that disagree with the job are refused when the graph is built."""
    hdf = {"class": "HDFDataset", "seq_ordering": "random"}
    job = ShardPlanJob(
        tk.Path("/data/costs.npz"),
        num_shards=4,
        partition_epoch=3,
        num_epochs=6,
        distribution="flexible",
        max_sub_epoch_deviation=0.1,
    )
    d = sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf, plan=job)
    assert d["plan"] == job.out_plan and d["partition_epoch"] == 3 and d["distribution"] == "flexible"
    assert d["max_sub_epoch_deviation"] == 0.1 and d["class"].qualname == "ShardedDistributeFilesDataset"
    same = sharded_files_dataset(
        tk.Path("/data/files.txt"),
        sub_epoch_dataset=hdf,
        plan=job,
        num_shards=4,
        partition_epoch=3,
        distribution="flexible",
    )
    assert {k: v for k, v in same.items() if k != "get_sub_epoch_dataset"} == {
        k: v for k, v in d.items() if k != "get_sub_epoch_dataset"
    }
    with pytest.raises(
        ValueError,
        match="partition_epoch=2, but the plan job has partition_epoch=3: the dataset "
        "reads that plan, so leave partition_epoch out",
    ):
        sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf, plan=job, partition_epoch=2)
    with pytest.raises(ValueError, match="num_shards=8, but the plan job has num_shards=4"):
        sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf, plan=job, num_shards=8)
    with pytest.raises(ValueError, match="distribution='balanced', but the plan job has distribution='flexible'"):
        sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf, plan=job, distribution="balanced")
    with pytest.raises(TypeError, match="needs partition_epoch .* or plan= a ShardPlanJob"):
        sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf)
    unsharded = ShardPlanJob(
        tk.Path("/data/costs.npz"), num_shards=4, partition_epoch=3, num_epochs=6, sharding="unsharded"
    )
    with pytest.raises(ValueError, match="plans sharding='unsharded'"):
        sharded_files_dataset(tk.Path("/data/files.txt"), sub_epoch_dataset=hdf, plan=unsharded)


def _plan_and_train(work_dir, *, plan_opts, config, torch_distributed=None):
    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, **plan_opts)
    dataset = sharded_files_dataset(
        tk.Path(list_path), plan=plan_job, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    return training_job(
        sharded_returnn_config(config, dataset),
        num_gpus=2,
        num_epochs=4,
        torch_distributed=torch_distributed,
        returnn_version="1.20261022.211313",
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(str(work_dir)),
    )


@pytest.mark.parametrize(
    "plan_opts, config, torch_distributed, expected",
    [
        ({"batch_size": 1000, "max_seqs": 20}, {"max_seqs": 20}, None, []),
        (
            {"batch_size": 1000, "max_seqs": 20, "reduce_type": "param", "param_sync_step": 100},
            {"max_seqs": 20},
            {"reduce_type": "param", "param_sync_step": 100},
            [],
        ),
        ({}, {"max_seq_length": 500}, {"reduce_type": "param", "param_sync_step": 100}, []),  # no prediction
        (  # the plan states the training's accumulation: modelled, nothing to name
            {
                "batch_size": 1000,
                "max_seqs": 20,
                "reduce_type": "param",
                "param_sync_step": 10,
                "accum_grad_multiple_step": 2,
            },
            {"max_seqs": 20, "accum_grad_multiple_step": 2},
            {"reduce_type": "param", "param_sync_step": 10},
            [],
        ),
        (  # a node sync level simulated with i6_core's ranks per node (num_gpus): nothing to name
            {"batch_size": 1000, "max_seqs": 20, "torch_distributed": _LEVELS, "ranks_per_node": 2},
            {"max_seqs": 20},
            _LEVELS,
            [],
        ),
        (  # batching the model does not know: the plan's figures leave it out, and say so
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20, "min_seq_length": 5, "chunking": "100:50"},
            None,
            ["does not model min_seq_length=5 drops sequences, chunking='100:50' (chunks instead of sequences)"],
        ),
    ],
)
def test_a_plan_whose_prediction_assumes_another_engine_is_named_when_the_graph_is_built(
    work_dir, plan_opts, config, torch_distributed, expected
):
    """The plan's predicted loss is made under its job's batch_size, max_seqs and sync mode: a training with
    batching the model does not know gets a warning naming it, not an error (no data is lost by it, and the
    dataset starts); a plan without a prediction, or one that matches, gets none."""
    import warnings

    from i6_shard.returnn_config import ConfigCheckWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _plan_and_train(work_dir, plan_opts=plan_opts, config={**CONFIG, **config}, torch_distributed=torch_distributed)
    messages = [
        str(w.message)
        for w in caught
        if issubclass(w.category, ConfigCheckWarning) and "predicted loss" in str(w.message)
    ]
    if not expected:
        assert messages == []
    else:
        (message,) = messages
        assert all(part in message for part in expected), message
        assert "Give ShardPlanJob the training's batch_size" in message


@pytest.mark.parametrize(
    "plan_opts, config, torch_distributed, match",
    [
        (
            {"batch_size": 2000, "max_seqs": 20},
            {"max_seqs": 20},
            None,
            "the plan was simulated with batch_size=2000, the config has batch_size=1000",
        ),
        (
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20},
            {"reduce_type": "param", "param_sync_step": 100},
            "the plan was simulated with torch_distributed={}, the config has torch_distributed="
            "{'reduce_type': 'param', 'param_sync_step': 100}",
        ),
        (
            {"batch_size": 1000, "max_seqs": 20, "reduce_type": "param", "param_sync_step": 10},
            {"max_seqs": 20, "accum_grad_multiple_step": 2},
            {"reduce_type": "param", "param_sync_step": 10},
            "the plan was simulated with accum_grad_multiple_step=1, the config has accum_grad_multiple_step=2",
        ),
        (
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20, "max_seq_length": 500},
            None,
            "the plan was simulated with max_seq_length=None, the config has max_seq_length=500",
        ),
        (  # a node sync level's groups are torchrun's ranks per node: i6_core starts num_gpus (2) per node
            {"batch_size": 1000, "max_seqs": 20, "torch_distributed": _LEVELS, "ranks_per_node": 1},
            {"max_seqs": 20},
            _LEVELS,
            "the plan was simulated with ranks_per_node=1 (the groups of its 'node' sync level), the training runs 2",
        ),
        (  # batch_size_train comes first, as the torch engine reads it
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20, "batch_size_train": 3000},
            None,
            "the plan was simulated with batch_size=1000, the config has batch_size=3000",
        ),
    ],
)
def test_a_training_that_batches_or_syncs_otherwise_than_its_plan_is_refused_when_the_graph_is_built(
    work_dir, plan_opts, config, torch_distributed, match
):
    """A plan simulated under batching and sync records them, and the RETURNN-side dataset refuses a training that
    states others at start-up, on every rank (``engine_differences``): the graph refuses it first, with the same
    words."""
    with pytest.raises(ValueError, match=re.escape(match)):
        _plan_and_train(work_dir, plan_opts=plan_opts, config={**CONFIG, **config}, torch_distributed=torch_distributed)


@pytest.mark.parametrize(
    "plan_opts, warned",
    [
        ({"ranks_per_node": 2}, True),
        ({"ranks_per_node": 2, "sub_epoch_constant_bytes": 10**9}, False),
        ({}, False),  # no node cache footprint in the report
    ],
)
def test_constant_files_the_cache_footprint_does_not_count_are_named(work_dir, plan_opts, warned):
    """A sub-epoch dataset that reads a file in every sub-epoch (an alignment HDF beside the bin's files) holds it
    in the node cache too: a plan job with a footprint that does not count it gets a warning naming the file."""
    import warnings

    from i6_shard.returnn_config import ConfigCheckWarning

    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, **plan_opts)
    template = {
        "class": "MetaDataset",
        "seq_ordering": "random",
        "datasets": {
            "feat": {"class": "HDFDataset", "files": "__files__"},
            "align": {"class": "HDFDataset", "files": ["/data/alignment.hdf"]},
        },
        "data_map": {"data": ("feat", "data"), "classes": ("align", "classes")},
        "seq_order_control_dataset": "feat",
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = sharded_files_dataset(tk.Path(list_path), plan=plan_job, sub_epoch_dataset=template)
        training_job(
            sharded_returnn_config(CONFIG, dataset),
            num_gpus=2,
            num_epochs=4,
            returnn_version="1.20261022.211313",
            returnn_python_exe=tk.Path(sys.executable),
            returnn_root=tk.Path(str(work_dir)),
        )
    messages = [
        str(w.message)
        for w in caught
        if issubclass(w.category, ConfigCheckWarning) and "node cache footprint" in str(w.message)
    ]
    assert len(messages) == (1 if warned else 0), messages
    if warned:
        assert "/data/alignment.hdf" in messages[0] and "sub_epoch_constant_bytes" in messages[0]


def test_the_training_takes_its_ranks_and_epochs_from_the_plan_job(work_dir):
    """Stated once: training_job without num_gpus and num_epochs takes the ranks and the training's sub-epochs of
    the ShardPlanJob its dataset reads from, and is the job given them explicitly (the same id); a value given that
    does not fit the plan job is refused as before; without a plan job they are needed."""
    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4)
    hdf = {"class": "HDFDataset", "seq_ordering": "random"}
    rc = sharded_returnn_config(CONFIG, sharded_files_dataset(tk.Path(list_path), plan=plan_job, sub_epoch_dataset=hdf))
    exe = dict(
        returnn_version="1.20261022.211313",
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(str(work_dir)),
    )
    from i6_shard.returnn_config import training_job_kwargs

    taken = training_job_kwargs(rc, **exe)
    assert (taken["horovod_num_processes"], taken["num_epochs"]) == (2, 4)
    assert training_job_kwargs(rc, num_gpus=2, **exe)["num_epochs"] == 4
    assert training_job_kwargs(rc, num_epochs=3, **exe)["horovod_num_processes"] == 2
    assert training_job_kwargs(rc, passes=1, **exe)["num_epochs"] == 2  # passes: given, taken
    job = training_job(rc, **exe)
    assert job._sis_id() == training_job(rc, num_gpus=2, num_epochs=4, **exe)._sis_id()
    assert job.returnn_config.post_config["num_epochs"] == 4
    with pytest.raises(ValueError, match="4 ranks train, but the plan job has num_shards=2"):
        training_job(rc, num_gpus=4, **exe)
    with pytest.raises(ValueError, match="the plan job has num_epochs=4 and 1 preloaded, the training num_epochs=6"):
        training_job(rc, num_epochs=6, **exe)
    unplanned = sharded_returnn_config(
        CONFIG, sharded_files_dataset(tk.Path(list_path), partition_epoch=2, sub_epoch_dataset=hdf)
    )
    with pytest.raises(
        ValueError,
        match=r"give num_gpus \(training processes, one per GPU\) and exactly one of num_epochs .* and passes: "
        r"the 'train' dataset reads its bins from no ShardPlanJob",
    ):
        training_job(unplanned, **exe)
    with pytest.raises(ValueError, match="give exactly one of num_epochs .RETURNN sub-epochs. and passes: "):
        training_job(unplanned, num_gpus=2, **exe)
    assert training_job(unplanned, num_gpus=2, num_epochs=4, **exe).horovod_num_processes == 2


@pytest.mark.parametrize(
    "plan_opts, config, torch_distributed",
    [
        (  # sync_complete_frac sums the same "has data" the MIN takes: no rank's steps change
            {"batch_size": 1000, "max_seqs": 20, "reduce_type": "param", "param_sync_step": 25},
            {"max_seqs": 20},
            {"backend": "gloo", "reduce_type": "param", "param_sync_step": 25, "sync_complete_frac": True},
        ),
        (  # under grad sync every rank stops with the first, whatever the accumulation
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20, "accum_grad_multiple_step": 2},
            {"backend": "gloo"},
        ),
        (  # an explicit world grad sync stops every rank with the first, as DistributedDataParallel does
            {"batch_size": 1000, "max_seqs": 20},
            {"max_seqs": 20},
            {"sync": [{"group": "world", "type": "grad"}]},
        ),
    ],
)
def test_a_plan_whose_steps_are_the_trainings_is_accepted_without_a_word(
    work_dir, plan_opts, config, torch_distributed
):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _plan_and_train(work_dir, plan_opts=plan_opts, config={**CONFIG, **config}, torch_distributed=torch_distributed)
    assert [str(w.message) for w in caught if "predicted loss" in str(w.message)] == []


def test_the_advice_to_state_the_plans_sync_keeps_the_configs_other_keys(work_dir):
    with pytest.raises(ValueError, match=re.escape("set torch_distributed={'backend': 'gloo', 'reduce_type': 'param'")):
        _plan_and_train(
            work_dir,
            plan_opts={"batch_size": 1000, "max_seqs": 20, "reduce_type": "param", "param_sync_step": 25},
            config={**CONFIG, "max_seqs": 20},
            torch_distributed={"backend": "gloo", "reduce_type": "param", "param_sync_step": 50},
        )

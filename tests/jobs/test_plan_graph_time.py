"""What a plan task would fail on, or become inexact by, is said when the graph is built: a ``"node"`` sync level
without ``ranks_per_node`` is refused for ``equal_steps`` (by hand and by ``for_training``) and warned of otherwise,
naming ``ranks_per_node=``; ``training_job`` warns of a plan job that cannot simulate the training exactly."""

import re
import sys
import warnings

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard.core import FileSizes, save_file_sizes, write_file_list  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset, sharded_returnn_config, training_job  # noqa: E402
from i6_shard.returnn_config.reader import InexactPlanWarning  # noqa: E402

LEVELS = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 3}]}
CONFIG = {"backend": "torch", "batch_size": 1000, "max_seqs": 20, "torch_distributed": LEVELS}
FIX = "give ranks_per_node="


def inexact_messages(caught):
    return [str(w.message) for w in caught if issubclass(w.category, InexactPlanWarning)]


def test_equal_steps_on_a_node_level_without_ranks_per_node_is_refused_when_the_job_is_made(work_dir):
    with pytest.raises(ValueError, match=re.escape(FIX)):
        ShardPlanJob(
            tk.Path("/data/costs.npz"),
            num_shards=4,
            partition_epoch=2,
            num_epochs=4,
            distribution="equal_steps",
            max_seqs=20,
            torch_distributed=LEVELS,
        )
    with pytest.raises(ValueError, match=re.escape(FIX)):
        ShardPlanJob.for_training(
            CONFIG,
            file_sizes=tk.Path("/data/costs.npz"),
            num_ranks=4,
            num_epochs=4,
            partition_epoch=2,
            distribution="equal_steps",
        )
    # with the ranks per host it is made
    ShardPlanJob.for_training(
        CONFIG,
        file_sizes=tk.Path("/data/costs.npz"),
        num_ranks=4,
        num_epochs=4,
        partition_epoch=2,
        distribution="equal_steps",
        ranks_per_node=2,
    )


@pytest.mark.parametrize("ranks_per_node, warned", [(None, True), (2, False)])
def test_for_training_warns_of_a_node_level_without_ranks_per_node(work_dir, ranks_per_node, warned):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ShardPlanJob.for_training(
            CONFIG,
            file_sizes=tk.Path("/data/costs.npz"),
            num_ranks=4,
            num_epochs=4,
            partition_epoch=2,
            distribution="flexible_auto",
            ranks_per_node=ranks_per_node,
        )
    messages = [m for m in inexact_messages(caught) if FIX in m]
    assert len(messages) == (1 if warned else 0), inexact_messages(caught)


def test_training_job_warns_of_a_plan_job_that_cannot_simulate_the_training(work_dir):
    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(
        tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, max_seqs=20, torch_distributed=LEVELS
    )
    dataset = sharded_files_dataset(
        tk.Path(list_path), plan=plan_job, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    config = {"backend": "torch", "behavior_version": 24, "max_seqs": 20}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        training_job(
            sharded_returnn_config(config, dataset),
            num_gpus=2,
            num_epochs=4,
            torch_distributed=LEVELS,
            returnn_version="1.20261022.211313",
            returnn_python_exe=tk.Path(sys.executable),
            returnn_root=tk.Path(str(work_dir)),
        )
    assert [m for m in inexact_messages(caught) if FIX in m and "is not exact for this training" in m]


def test_the_builders_plan_of_a_config_warns_of_its_verdict(work_dir):
    """plan_for_returnn_config, the builders' plan of a config, says the same verdict when it plans."""
    from i6_shard.returnn_config import plan_for_returnn_config

    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path = str(work_dir / "sizes.npz")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    dataset = sharded_files_dataset(
        keys, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}, partition_epoch=2, num_shards=4
    )
    config = {**CONFIG, "train": dataset}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan_for_returnn_config(config, file_sizes=sizes_path, num_ranks=4, num_epochs=4)
    assert [m for m in inexact_messages(caught) if FIX in m]


@pytest.mark.parametrize("batching", [{"max_seqs": 20}, {}])
@pytest.mark.parametrize("ranks_per_node, warned", [(None, True), (2, False)])
def test_a_hand_built_plan_job_warns_of_a_node_level_without_ranks_per_node(work_dir, batching, ranks_per_node, warned):
    """Not only equal_steps: any plan of a node level is told the ranks per host when it is made, also where the
    batching comes with the costs (steps) rather than as options."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ShardPlanJob(
            tk.Path("/data/costs.npz"),
            num_shards=4,
            partition_epoch=2,
            num_epochs=4,
            distribution="flexible_auto",
            torch_distributed=LEVELS,
            ranks_per_node=ranks_per_node,
            **batching,
        )
    messages = [m for m in inexact_messages(caught) if FIX in m]
    assert len(messages) == (1 if warned else 0), inexact_messages(caught)


def test_check_returnn_config_names_ranks_per_node_for_a_node_level(work_dir):
    """The config check sees no plan: it says what a plan of the config must be told, and where."""
    from i6_shard.returnn_config import check_returnn_config
    from i6_shard.returnn_config.checks import ConfigCheckWarning

    keys = [f"/data/f{i}.hdf" for i in range(16)]
    dataset = sharded_files_dataset(
        keys, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}, partition_epoch=2, num_shards=4
    )
    for levels, warned in ((LEVELS, True), ({"reduce_type": "param", "param_sync_step": 3}, False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = check_returnn_config(
                {**CONFIG, "torch_distributed": levels, "train": dataset},
                num_ranks=4,
                returnn_version="1.20261022.211313",
            )
        loud = [str(w.message) for w in caught if issubclass(w.category, ConfigCheckWarning)]
        said = [m for m in loud if "ranks_per_node=" in m and "ShardPlanJob.for_training" in m]
        assert len(said) == (1 if warned else 0), loud
        assert [m for m in result.warnings if "ranks_per_node=" in m] == said


def test_training_job_and_for_training_refuse_dataloader_workers_that_each_read_the_whole_data(work_dir):
    """Behavior_version 24 with 2 DataLoader workers (no worker sharding): each worker reads all of the rank's data,
    so every sequence would train twice per epoch; training_job and ShardPlanJob.for_training refuse it when the graph
    is built, in the words of the checks (the reader's one rule); with one worker both go on."""
    from i6_shard.returnn_config.reader.rules import duplicate_workers_problem

    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    plan_job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, max_seqs=20)
    dataset = sharded_files_dataset(
        tk.Path(list_path), plan=plan_job, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    template = {"class": "HDFDataset", "seq_ordering": "random"}
    for workers in (2, 1):
        config = {"backend": "torch", "behavior_version": 24, "max_seqs": 20, "torch_distributed": {}}
        config["torch_dataloader_opts"] = {"num_workers": workers}
        rule = duplicate_workers_problem(config)
        assert (rule is not None) == (workers == 2)
        planning = sharded_returnn_config(
            config, sharded_files_dataset(tk.Path(list_path), sub_epoch_dataset=template, partition_epoch=2)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ShardPlanJob.for_training(planning, file_sizes=tk.Path(sizes_path), num_ranks=2, num_epochs=4)
                plan_refuses = None
            except ValueError as exc:
                plan_refuses = str(exc)
            try:
                training_job(
                    sharded_returnn_config(config, dataset),
                    num_gpus=2,
                    num_epochs=4,
                    returnn_version="1.20261022.211313",
                    returnn_python_exe=tk.Path(sys.executable),
                    returnn_root=tk.Path(str(work_dir)),
                )
                job_refuses = None
            except ValueError as exc:
                job_refuses = str(exc)
        if rule is None:
            assert plan_refuses is None and job_refuses is None, (plan_refuses, job_refuses)
            continue
        assert f"train: {rule}; fix the config before planning" in plan_refuses, plan_refuses
        assert f"train: {rule}" in job_refuses, job_refuses
        assert (
            "num_workers=2" in rule and "behavior_version=24" in rule and "torch_dataloader_shard_workers=True" in rule
        )


def test_dataloader_workers_that_shard_are_planned_as_ranks_times_workers_and_a_plan_of_the_ranks_is_refused(work_dir):
    """From behavior_version 37 each of a rank's DataLoader workers reads a shard of its own (RETURNN's
    ReturnnDatasetIterDataPipe.reset: one of ranks * workers): for_training plans those shards, inexact, naming the
    workers; training_job takes that plan (and the ranks from it), and refuses a plan of the ranks only, with the
    reason the RETURNN-side dataset gives at start-up."""
    keys = [str(work_dir / f"f{i}.hdf") for i in range(16)]
    sizes_path, list_path = str(work_dir / "sizes.npz"), str(work_dir / "files.txt")
    save_file_sizes(FileSizes(keys, list(range(1, 17))), sizes_path)
    write_file_list(keys, list_path)
    config = {"backend": "torch", "behavior_version": 37, "max_seqs": 20, "torch_distributed": {}}
    config["torch_dataloader_opts"] = {"num_workers": 2}
    template = {"class": "HDFDataset", "seq_ordering": "random"}
    planning = sharded_returnn_config(
        config, sharded_files_dataset(tk.Path(list_path), sub_epoch_dataset=template, partition_epoch=2)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan_job = ShardPlanJob.for_training(planning, file_sizes=tk.Path(sizes_path), num_ranks=2, num_epochs=4)
    assert plan_job.plan_request.settings.num_shards == 4
    assert any("each reads its own shard" in m for m in inexact_messages(caught)), inexact_messages(caught)
    kwargs = dict(
        returnn_version="1.20261022.211313",
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(str(work_dir)),
    )
    dataset = sharded_files_dataset(tk.Path(list_path), plan=plan_job, sub_epoch_dataset=template)
    job = training_job(sharded_returnn_config(config, dataset), **kwargs)  # num_gpus and num_epochs from the plan
    assert job.horovod_num_processes == 2
    by_hand = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, max_seqs=20)
    dataset = sharded_files_dataset(tk.Path(list_path), plan=by_hand, sub_epoch_dataset=template)
    with pytest.raises(ValueError) as info:
        training_job(sharded_returnn_config(config, dataset), num_gpus=2, num_epochs=4, **kwargs)
    assert "the plan is for num_shards=2, but the files are cut into 4 shards: 2 ranks, each with 2" in str(info.value)

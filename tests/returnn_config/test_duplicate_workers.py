"""Several DataLoader workers that do not shard (a release before torch_dataloader_shard_workers, or the option off:
behavior_version < 37 or False) each read all of the rank's data: the graph checks refuse it for the train dataset
(i6_shard's class and RETURNN's own DistributeFilesDataset alike) and warn of it for an eval dataset, in the words of
the reader's one rule; the plan of such a training is refused in the same words."""

import warnings

import pytest

from i6_shard.returnn_config import ConfigCheckError, ConfigCheckWarning, check_returnn_config, sharded_files_dataset
from i6_shard.returnn_config.plan import training_plan_options
from i6_shard.returnn_config.reader.rules import duplicate_workers_problem

OLD = "1.20250115.110555"
NEWEST = "1.20261022.211313"
FIXES = "set torch_dataloader_opts={'num_workers': 1} (or 0), or on RETURNN >= 1.20261022.211313 behavior_version >= 37"


def _config(*, returnn_version, behavior_version=24, plain=False, **extra):
    files = [f"/d/f{i}.hdf" for i in range(40)]
    template = {"class": "HDFDataset", "seq_ordering": "random"}
    if plain:  # RETURNN's own class
        ds = {"class": "DistributeFilesDataset", "files": files, "partition_epoch": 2, "seq_ordering": "random"}
        ds["get_sub_epoch_dataset"] = lambda fs: {**template, "files": list(fs)}
    else:
        ds = sharded_files_dataset(
            files, sub_epoch_dataset=template, partition_epoch=2, num_shards=2, returnn_version=returnn_version
        )
    config = {"backend": "torch", "behavior_version": behavior_version, "batch_size": 300, "max_seqs": 10}
    config.update(torch_distributed={"backend": "gloo"}, train=ds, torch_dataloader_opts={"num_workers": 2})
    return {**config, **extra}


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize(
    "returnn_version, extra, cause",
    [
        (OLD, {}, f"RETURNN {OLD} has no DataLoader worker sharding"),
        (OLD, {"behavior_version": 37}, f"RETURNN {OLD} has no DataLoader worker sharding"),
        (None, {}, "behavior_version=24 < 37 leaves torch_dataloader_shard_workers off"),
        (NEWEST, {}, "behavior_version=24 < 37 leaves torch_dataloader_shard_workers off"),
        (
            NEWEST,
            {"behavior_version": 38, "torch_dataloader_shard_workers": False},
            "torch_dataloader_shard_workers=False",
        ),
    ],
)
def test_the_checks_refuse_dataloader_workers_that_each_read_the_whole_train_data(returnn_version, extra, cause, plain):
    config = _config(returnn_version=returnn_version, plain=plain, **extra)
    with pytest.raises(ConfigCheckError) as info:
        check_returnn_config(config, num_ranks=2, returnn_version=returnn_version)
    (problem,) = [p for p in info.value.problems if "DataLoader workers" in p]
    assert problem.startswith("train: torch_dataloader_opts num_workers=2: each of the 2 DataLoader workers"), problem
    assert cause in problem and "trained 2 times per epoch" in problem and FIXES in problem, problem
    assert problem == "train: " + duplicate_workers_problem(config, returnn_version=returnn_version)  # the one rule


@pytest.mark.parametrize(
    "returnn_version, extra",
    [
        (NEWEST, {"behavior_version": 37}),
        (None, {"torch_dataloader_shard_workers": True}),
        (OLD, {"torch_dataloader_opts": {"num_workers": 1}}),
        (OLD, {"torch_dataloader_opts": {"num_workers": 0}}),
    ],
)
def test_one_worker_or_workers_that_shard_are_not_refused_for_it(returnn_version, extra):
    config = _config(returnn_version=returnn_version, **extra)
    try:
        check_returnn_config(config, num_ranks=2, returnn_version=returnn_version)
    except ConfigCheckError as exc:
        assert not [p for p in exc.problems if "DataLoader workers of a rank reads all" in p], exc.problems


def test_an_eval_dataset_read_by_such_workers_is_warned_of():
    """RETURNN's torch engine reads dev/eval datasets through the same DataLoader (Engine._create_data_loader with
    the config's torch_dataloader_opts and torch_dataloader_shard_workers): every sequence is evaluated twice."""
    config = _config(returnn_version=OLD)
    dev_only = {
        **{k: v for k, v in config.items() if k != "train"},
        "dev": _config(returnn_version=OLD, plain=True)["train"],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = check_returnn_config(dev_only, num_ranks=2, returnn_version=OLD)
    said = [m for m in result.warnings if "DataLoader workers" in m]
    assert len(said) == 1 and said[0].startswith("dev: torch_dataloader_opts num_workers=2"), result.warnings
    assert "evaluated 2 times" in said[0]
    assert any(str(w.message) == said[0] for w in caught if issubclass(w.category, ConfigCheckWarning))


@pytest.mark.parametrize("returnn_version", [OLD, None])
@pytest.mark.parametrize("with_dataset", [True, False])
def test_the_plan_of_such_a_training_is_refused_in_the_checks_words(returnn_version, with_dataset):
    config = _config(returnn_version=returnn_version)
    rule = duplicate_workers_problem(config, returnn_version=returnn_version)
    given = {} if with_dataset else {"partition_epoch": 2}
    if not with_dataset:
        del config["train"]
    with pytest.raises(ValueError) as info:
        training_plan_options(config, num_ranks=2, num_epochs=4, returnn_version=returnn_version, **given)
    assert rule in str(info.value) and str(info.value).endswith("; fix the config before planning"), info.value

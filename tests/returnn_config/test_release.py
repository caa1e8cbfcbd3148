"""The builders and checks told the RETURNN release a training runs (``returnn_version=`` or read from
``returnn_root``): they write only what that release takes, keep its sub-epoch dataset from sharding again by its
means, and name what it lacks. What each release really accepts: tests/returnn_versions."""

import numpy as np
import pytest

from tests.deps import SISYPHUS_REASON

from i6_shard.core.pure import cut_full_epoch, release_has
from i6_shard.core.pure.distribute_fixed_mean import distribute_evenly_by_size_fixed_mean
from i6_shard.returnn_config import ConfigCheckError, check_returnn_config, sharded_files_dataset

HDF = {"class": "HDFDataset", "seq_ordering": "random"}
FILES = [f"f{i}.hdf" for i in range(8)]
OLDEST, Y2025, NEWEST = "1.20240620.64807", "1.20250115.110555", "1.20261022.211313"


def _template(d):
    return d["get_sub_epoch_dataset"].keywords["template"]


@pytest.mark.parametrize(
    "version, sharding_fix, sub_epoch_shards",
    [(None, True, False), (OLDEST, False, False), (Y2025, False, True), ("1.20260611.14531", True, False)],
)
def test_the_sub_epoch_dataset_is_kept_from_sharding_again_by_the_releases_means(
    version, sharding_fix, sub_epoch_shards
):
    d = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=version)
    assert ("sharding_fix" in d) == sharding_fix
    assert (_template(d).get("_num_shards"), _template(d).get("_shard_index")) == (
        (1, 0) if sub_epoch_shards else (None, None)
    )
    unsharded = sharded_files_dataset(
        FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=version, distrib_shard_files=False
    )
    assert "_num_shards" not in _template(unsharded)


def test_the_version_is_read_from_returnn_root(tmp_path):
    (tmp_path / "returnn").mkdir()
    (tmp_path / "returnn" / "_setup_info_generated.py").write_text(f"version = '{Y2025}'\nlong_version = 'x'\n")
    by_root = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_root=str(tmp_path))
    by_version = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=Y2025)
    assert _template(by_root) == _template(by_version) == {**HDF, "_num_shards": 1, "_shard_index": 0}
    assert by_root.keys() == by_version.keys() and "sharding_fix" not in by_root


@pytest.mark.parametrize(
    "options, version, feature",
    [
        ({"use_worker_proc": False}, Y2025, "use_worker_proc option: it came with RETURNN 1.20261022.211313"),
        ({"files": "list.txt"}, Y2025, "a list file path: it came with RETURNN 1.20250423.155627"),
        ({"sub_epoch_dataset": {**HDF, "_num_shards": 1, "_shard_index": 0}}, OLDEST, "1.20241015.225231"),
    ],
)
def test_what_the_release_lacks_is_refused_naming_it_and_the_first_release(options, version, feature):
    options = {"files": FILES, "sub_epoch_dataset": HDF, **options}
    with pytest.raises(ConfigCheckError, match=f"RETURNN {version} lacks .*{feature}"):
        sharded_files_dataset(partition_epoch=2, returnn_version=version, **options)
    sharded_files_dataset(partition_epoch=2, returnn_version=NEWEST, **options)


def test_i6_shards_class_takes_sharding_fix_and_use_worker_proc_on_every_release():
    for version in (OLDEST, Y2025):
        config = {
            "backend": "torch",
            "torch_distributed": {},
            "train": sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, distribution="balanced"),
        }
        assert config["train"]["sharding_fix"] is True
        check_returnn_config(config, num_ranks=2, returnn_version=version)
        config["train"]["class"] = "DistributeFilesDataset"  # RETURNN's own class rejects the option
        with pytest.raises(ConfigCheckError, match=f"sharding_fix=True is set, but RETURNN {version} lacks"):
            check_returnn_config(config, num_ranks=2, returnn_version=version)


def test_double_sharding_is_judged_by_the_releases_rules():
    """behavior_version 26 fixes it only where sharding_fix exists; the oldest releases never shard again."""
    plain = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=OLDEST)
    config = {"backend": "torch", "torch_distributed": {}, "behavior_version": 26, "train": plain}
    check_returnn_config(config, num_ranks=2, returnn_version=OLDEST)
    newest = {**config, "behavior_version": 31}  # 26 is the fix there (31: also in the DataLoader worker)
    check_returnn_config(newest, num_ranks=2, returnn_version=NEWEST)
    with pytest.raises(ConfigCheckError, match=f"RETURNN {Y2025} shards the sub-epoch dataset again"):
        check_returnn_config(config, num_ranks=2, returnn_version=Y2025)
    fixed = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=Y2025)
    check_returnn_config({**config, "train": fixed}, num_ranks=2, returnn_version=Y2025)


def test_release_has_is_unknown_only_between_the_last_known_without_and_the_first_known_with():
    assert release_has("1.20241015.225230", "dataset_shards") is False
    assert release_has("1.20241015.225231", "dataset_shards") is True
    assert release_has("1.20260822.041010", "use_worker_proc") is False
    assert release_has("1.20261001.0", "use_worker_proc") is None
    assert release_has(None, "sharding_fix") is None


def test_the_returnn_cut_before_reaveraging():
    """1.20240620.64807 aims every bin at the mean of all files; 1.20240705.144031 re-averages the rest."""
    sizes = np.array([5, 5] + [10] * 7)
    old = cut_full_epoch(sizes, num_shards=1, partition_epoch=5, distribution="returnn", returnn_version=OLDEST)[1]
    new = cut_full_epoch(sizes, num_shards=1, partition_epoch=5, distribution="returnn", returnn_version=NEWEST)[1]
    # the mean is 16: the old cut takes [5, 5, 10] (20 is nearer 16 than 10), then one 10 and its neighbour
    assert old.tolist() == [0, 3, 5, 7, 8, 9] and new.tolist() == [0, 3, 5, 6, 7, 9]
    with pytest.raises(ValueError, match="RETURNN before 1.20240705.144031 fails"):  # RETURNN's assert
        distribute_evenly_by_size_fixed_mean(np.array([1, 1, 120, 1, 1, 1]), num_bins=3)


def test_sharded_returnn_config_checks_the_dataset_by_the_release():
    pytest.importorskip("sisyphus", reason=SISYPHUS_REASON)
    pytest.importorskip(
        "i6_core.returnn", reason="the i6_core placement: clone github.com/rwth-i6/i6_core into recipe/"
    )
    from i6_shard.returnn_config.i6core import sharded_returnn_config

    config = {"backend": "torch", "torch_distributed": {}, "behavior_version": 21}
    newest_dict = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2)
    with pytest.raises(ConfigCheckError, match=f"sharding_fix=True is set, but RETURNN {OLDEST} lacks"):
        sharded_returnn_config(config, newest_dict, returnn_version=OLDEST)
    oldest_dict = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=OLDEST)
    assert sharded_returnn_config(config, oldest_dict, returnn_version=OLDEST).config["train"] is not None


def test_where_returnns_own_class_fails_in_a_dataloader_worker_the_builder_takes_i6_shards():
    """1.20241015.225231 .. 1.20250717.120243: RETURNN's DistributeFilesDataset(distrib_shard_files=True) asserts,
    when a DataLoader worker unpickles it, that the _num_shards Dataset.__reduce__ passes is 1."""
    assert (
        sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=Y2025)["class"]
        != "DistributeFilesDataset"
    )
    for version in (OLDEST, "1.20250717.120243"):
        d = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=version)
        assert d["class"] == "DistributeFilesDataset"
    plain = {**sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=Y2025)}
    plain["class"] = "DistributeFilesDataset"
    config = {"backend": "torch", "torch_distributed": {}, "train": plain}
    with pytest.raises(ConfigCheckError, match="fails in the torch DataLoader worker"):
        check_returnn_config(config, num_ranks=2, returnn_version=Y2025)
    check_returnn_config({**config, "torch_dataloader_opts": {"num_workers": 0}}, num_ranks=2, returnn_version=Y2025)


def test_a_returnn_plan_of_a_config_cuts_as_the_release():
    """What a plain DistributeFilesDataset reads on 1.20240620.64807 differs from the newest's cut."""
    from i6_shard.core import FileSizes
    from i6_shard.returnn_config.plan import plan_for_returnn_config

    sizes = np.array([5, 5] + [10] * 7)
    keys = [f"f{i}.hdf" for i in range(len(sizes))]
    d = sharded_files_dataset(keys, sub_epoch_dataset=HDF, partition_epoch=5, seq_ordering="default")
    config = {"backend": "torch", "torch_distributed": {}, "behavior_version": 31, "train": d}
    file_sizes = FileSizes(keys=keys, sizes=sizes)
    old = plan_for_returnn_config(config, file_sizes=file_sizes, num_ranks=1, num_epochs=5, returnn_version=OLDEST)
    new = plan_for_returnn_config(config, file_sizes=file_sizes, num_ranks=1, num_epochs=5)
    assert old.layout(full_epoch_0idx=0)[1].tolist() == distribute_evenly_by_size_fixed_mean(sizes, num_bins=5).tolist()
    assert old.layout(full_epoch_0idx=0)[1].tolist() != new.layout(full_epoch_0idx=0)[1].tolist()


def test_distributed_settings_a_release_rejects_or_ignores():
    train = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=OLDEST)
    shard = {"backend": "torch", "torch_distributed": {"dataset_distribution": "shard"}, "train": train}
    with pytest.raises(ConfigCheckError, match=f"sets dataset_distribution='shard', but RETURNN {OLDEST} lacks"):
        check_returnn_config(shard, num_ranks=2, returnn_version=OLDEST)
    offset = {"backend": "torch", "torch_distributed": {}, "dataset_random_seed_offset": 5, "train": train}
    with pytest.raises(ConfigCheckError, match=f"dataset_random_seed_offset=5 is ignored by RETURNN {OLDEST}"):
        check_returnn_config(offset, num_ranks=2, returnn_version=OLDEST)
    check_returnn_config({**offset, "dataset_random_seed_offset": 0}, num_ranks=2, returnn_version=OLDEST)


def test_the_plan_options_of_a_training_take_the_seed_its_release_gives():
    """Before 1.20261022.211313 RETURNN ignores the config's dataset_random_seed_offset: a plan for that release
    shuffles with offset 0, as the training does (the real offsets per release: tests/returnn_versions)."""
    import warnings

    from i6_shard.returnn_config.plan import training_plan_options

    train = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=Y2025)
    config = {"backend": "torch", "torch_distributed": {}, "dataset_random_seed_offset": 5, "train": train}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        newest = training_plan_options(config, num_ranks=2, num_epochs=4)
        old = training_plan_options(config, num_ranks=2, num_epochs=4, returnn_version=Y2025)
    assert newest["random_seed_offset"] == 5
    assert old.get("random_seed_offset", 0) == 0 and old["returnn_version"] == Y2025


@pytest.mark.parametrize(
    "version, process, shards_per_rank",
    [(NEWEST, "torch DataLoader worker", 2), (Y2025, "torch DataLoader worker", 1), (OLDEST, "main process", 1)],
)
def test_the_dataloader_is_read_as_the_release_sets_it_up(version, process, shards_per_rank):
    """Its workers shard again only from 1.20261022.211313 (torch_dataloader_shard_workers), and it reads in a worker
    by default only from 1.20240702.142741."""
    from i6_shard.returnn_config.reader import find_distribute_files_datasets

    train = sharded_files_dataset(FILES, sub_epoch_dataset=HDF, partition_epoch=2, returnn_version=version)
    config = {"backend": "torch", "torch_distributed": {}, "torch_dataloader_shard_workers": True, "train": train}
    (default,) = find_distribute_files_datasets(config, num_ranks=2, returnn_version=version)
    assert default.reading_process.startswith(process), default.reading_process
    two = {**config, "torch_dataloader_opts": {"num_workers": 2}}
    (info,) = find_distribute_files_datasets(two, num_ranks=2, returnn_version=version)
    assert info.shards.shards_per_rank == shards_per_rank

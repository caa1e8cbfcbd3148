"""The reader of configs and dataset dicts: what it finds where, and, on fuzzed setups, that it
predicts exactly the _num_shards, _shard_index, random_seed_offset, partition_epoch, seq_ordering and
sub-epoch sharding the real RETURNN gives a DistributeFilesDataset on every rank."""

import functools

import pytest

from tests.deps import RETURNN_REASON, needs_torch
from hypothesis import HealthCheck, given, settings


from i6_shard.core import write_file_list
from i6_shard.returnn_config import sharded_files_dataset
from i6_shard.returnn_config.reader import find_distribute_files_datasets
from i6_shard.core.io.dataset_files import read_files
from i6_shard.returnn_config.reader import files_kind, is_distribute_files_dataset

from .. import strategies
from ..strategies import examples, returnn_dfd_setups
from .config_ranks import HDF, file_pairs, hdf_sub_epoch

DFD = {
    "class": "DistributeFilesDataset",
    "files": ["a", "b", "c", "d"],
    "partition_epoch": 2,
    "seq_ordering": "random",
    "get_sub_epoch_dataset": hdf_sub_epoch,
}


def _find(config, **kwargs):
    return {r.key_path: r for r in find_distribute_files_datasets(config, **kwargs)}


def test_finds_every_dfd_at_any_depth_with_its_key_path():
    config = {
        "torch_distributed": {},
        "train": {
            "class": "CombinedDataset",
            "seq_ordering": "interleave",
            "data_map": {("asr", "data"): "data", ("lm", "data"): "text"},
            "datasets": {
                "asr": {"class": "MultiEpochDataset", "multi_epoch": 1, "dataset": dict(DFD)},
                "lm": dict(DFD, distrib_shard_files=True),
                "unused": dict(DFD),
            },
        },  # not in data_map: CombinedDataset does not build it
        "dev": dict(DFD),
        "eval_datasets": {"devother": dict(DFD)},
        "my_dataset": {"class": "ConcatDataset", "datasets": [{"class": "HDFDataset"}, dict(DFD)]},
        "num_epochs": 10,
    }
    found = _find(config, num_ranks=2)
    assert list(found) == [
        ("train", "datasets", "asr", "dataset"),
        ("train", "datasets", "lm"),
        ("dev",),
        ("eval_datasets", "devother"),
        ("my_dataset", "datasets", 1),
    ]
    assert found[("train", "datasets", "lm")].wrappers == ("CombinedDataset",)
    assert found[("train", "datasets", "asr", "dataset")].wrappers == ("CombinedDataset", "MultiEpochDataset")
    assert [r.role for r in found.values()] == ["train", "train", "eval", "eval", "other"]
    assert found[("train", "datasets", "lm")].sharded and not found[("dev",)].sharded


def test_a_dict_without_dfd_and_wrappers_without_one():
    assert find_distribute_files_datasets({"class": "HDFDataset", "files": ["a.hdf"]}) == []
    assert (
        find_distribute_files_datasets(
            {
                "train": {
                    "class": "MetaDataset",
                    "datasets": {"x": {"class": "HDFDataset"}},
                    "data_map": {"data": ("x", "data")},
                }
            }
        )
        == []
    )
    assert not is_distribute_files_dataset({"class": "HDFDataset"})


def test_the_three_modes_and_their_seeds():
    shard = _find(
        {"torch_distributed": {"dataset_distribution": "shard"}, "dataset_random_seed_offset": 4, "train": dict(DFD)},
        num_ranks=3,
    )[("train",)]
    assert (shard.sharded, shard.mechanism, shard.sharding_mode) == (True, "dataset_distribution shard", "sharded")
    assert [shard.seed_offset_for(r) for r in range(3)] == [4, 4, 4] and shard.num_shards() == 3
    unsharded = _find({"torch_distributed": {}, "dataset_random_seed_offset": 4, "train": dict(DFD)}, num_ranks=3)[
        ("train",)
    ]
    assert (unsharded.sharded, unsharded.mechanism, unsharded.sharding_mode) == (False, None, "unsharded")
    assert [unsharded.seed_offset_for(r) for r in range(3)] == [4, 4 + 16127, 4 + 2 * 16127]
    same = _find({"torch_distributed": {}, "train": dict(DFD, random_seed_offset=7)}, num_ranks=3)[("train",)]
    assert same.sharding_mode == "unsharded_same_seed" and same.seed.source == "dataset"
    sharded = _find({"torch_distributed": {}, "train": dict(DFD, distrib_shard_files=True)}, num_ranks=3)[("train",)]
    assert (sharded.mechanism, sharded.seed.rank_stride) == ("distrib_shard_files", 0)
    horovod = _find({"use_horovod": True, "train": dict(DFD, distrib_shard_files=True)}, num_ranks=2)[("train",)]
    assert horovod.sharded and horovod.batch_slicing  # horovod_dataset_distribution defaults to "shard"


def test_sub_epoch_sharding_again():
    def again(**kwargs):
        config = {"torch_distributed": {}, "train": dict(DFD, distrib_shard_files=True, **kwargs)}
        return _find(config, num_ranks=2)[("train",)].sub_epoch_shards_again

    assert again() is True and again(sharding_fix=False) is True
    assert again(sharding_fix=True) is False
    assert again(get_sub_epoch_dataset=functools.partial(hdf_sub_epoch, _num_shards=1, _shard_index=0)) is False
    template = sharded_files_dataset(
        ["a"], sub_epoch_dataset={**HDF, "_num_shards": 1, "_shard_index": 0}, partition_epoch=1
    )["get_sub_epoch_dataset"]
    assert again(get_sub_epoch_dataset=template) is False  # read from i6_shard's template, not called
    assert again(files="files.txt") is None  # a user function and no inline file: cannot be told
    assert (
        _find({"train": dict(DFD, distrib_shard_files=True)}, num_ranks=2)[("train",)].sub_epoch_shards_again is False
    )  # no distributed config: RETURNN sees one process


def test_wrappers_returnn_cannot_run():
    def fails(config):
        return [r.returnn_fails for r in find_distribute_files_datasets(config, num_ranks=2)][0]

    meta = {
        "class": "MetaDataset",
        "seq_order_control_dataset": "a",
        "data_map": {"data": ("a", "data")},
        "datasets": {"a": dict(DFD)},
    }
    assert "MetaDataset" in fails({"train": meta})
    combined = {"class": "CombinedDataset", "datasets": {"a": dict(DFD)}, "data_map": {("a", "data"): "data"}}
    assert "every seq_ordering but 'interleave'" in fails({"train": combined})
    assert fails({"train": dict(combined, seq_ordering="interleave")}) is None
    assert "does not support sharding" in fails(
        {"torch_distributed": {"dataset_distribution": "shard"}, "train": dict(combined, seq_ordering="interleave")}
    )
    assert "sharding_method 'seq_order'" in fails({"train": {"class": "MultiProcDataset", "dataset": dict(DFD)}})
    assert "clashes" in fails({"train": dict(DFD, distrib_shard_files=True, _num_shards=2, _shard_index=1)})
    assert "tuple" in fails(
        {"train": {"class": "VariableDataset", "get_dataset": functools.partial(_variable, dataset=dict(DFD))}}
    )
    assert fails({"train": dict(DFD, files=("a", "b"))}).startswith("files=('a', 'b') is neither")


def _variable(*, dataset, epoch, **_kwargs):
    return dataset


def test_multi_proc_passes_its_options_and_dedicated_workers():
    config = {
        "torch_distributed": {"dataset_distribution": "shard"},
        "train": {
            "class": "MultiProcDataset",
            "num_workers": 3,
            "buffer_size": 1,
            "sharding_method": "dedicated",
            "partition_epoch": 5,
            "dataset": {k: v for k, v in DFD.items() if k != "partition_epoch"},
        },
    }
    (record,) = find_distribute_files_datasets(config, num_ranks=2)
    assert record.partition_epoch == 5  # MultiProcDataset.__init__: dataset.setdefault(k, v) for its other options
    assert record.shards.shards_per_rank == 3 and record.num_shards() == 6
    assert [record.shard_index_for(1, w) for w in range(3)] == [3, 4, 5]
    assert "round-robin" in record.returnn_fails and "RETURNN would fail" in record.plan_problem()
    one = {**config, "train": {**config["train"], "num_workers": 1}}
    (record,) = find_distribute_files_datasets(one, num_ranks=2)
    assert record.returnn_fails is None and record.num_shards() == 2


def test_dataloader_workers_shard_since_behavior_version_37():
    config = {
        "torch_distributed": {},
        "torch_dataloader_opts": {"num_workers": 2},
        "train": dict(DFD, distrib_shard_files=True),
    }
    assert _find(config, num_ranks=2)[("train",)].shards.shards_per_rank == 1
    assert _find({**config, "behavior_version": 37}, num_ranks=2)[("train",)].shards.shards_per_rank == 2
    assert _find({**config, "torch_dataloader_shard_workers": True}, num_ranks=2)[("train",)].num_shards() == 4


def test_files_kinds(tmp_path):
    path = tmp_path / "files.json"
    write_file_list([["a", "b"], ["c", "d"]], path)
    pairs = functools.partial(file_pairs, feat_dir=str(tmp_path), align_dir=str(tmp_path))
    assert [files_kind(f) for f in (["a"], str(path), pairs, ("a",), 3)] == [
        "inline",
        "list_file",
        "callable",
        "invalid",
        "invalid",
    ]
    assert read_files(str(path)) == [["a", "b"], ["c", "d"]]
    (tmp_path / "x.hdf").write_bytes(b"")
    assert read_files(pairs) == [(str(tmp_path / "x.hdf"), str(tmp_path / "x.hdf"))]
    with pytest.raises(TypeError, match="returned a tuple"):
        read_files(functools.partial(tuple, ["a"]))


def test_class_given_as_object_name_or_subclass():
    returnn = pytest.importorskip("returnn.datasets.distrib_files", reason=RETURNN_REASON)
    ext = pytest.importorskip("i6_shard.returnn_ext.distrib_files", reason=RETURNN_REASON)

    class MyDFD(returnn.DistributeFilesDataset):
        pass

    for cls, name, ours in (
        (returnn.DistributeFilesDataset, "DistributeFilesDataset", False),
        (ext.ShardedDistributeFilesDataset, "ShardedDistributeFilesDataset", True),
        (MyDFD, "MyDFD", False),
        ("returnn.datasets.distrib_files.DistributeFilesDataset", "DistributeFilesDataset", False),
    ):
        (record,) = find_distribute_files_datasets(dict(DFD, **{"class": cls}))
        assert (record.class_name, record.is_i6_shard) == (name, ours)
    (record,) = find_distribute_files_datasets(
        dict(DFD, **{"class": ext.ShardedDistributeFilesDataset}, distribution="balanced"), num_ranks=2
    )
    assert record.plan_settings(num_epochs=2).distribution == "balanced"


# --- parity with RETURNN on fuzzed setups ------------------------------------------------------


@pytest.fixture(scope="module")
def hdf(tmp_path_factory):
    from .config_ranks import write_corpus

    directory = tmp_path_factory.mktemp("reader_hdf")
    files = list(write_corpus(str(directory), num_files=6, prefix="r"))
    list_file = str(directory / "files.txt")
    write_file_list(files, list_file)
    return files, list_file


def _check_parity(config, num_ranks, monkeypatch, seen):
    """Build the dataset with RETURNN on every rank and compare its DistributeFilesDataset with the reader."""
    from returnn.config import global_config_ctx
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from i6_shard.returnn_ext.locate import locate_dataset

    from returnn.util.basic import BehaviorVersion

    from .config_ranks import build_train, engine_behavior_version, returnn_process

    engine_state = engine_behavior_version(config)
    (record,) = find_distribute_files_datasets(config, num_ranks=num_ranks)
    key = record.key_path[0]
    with monkeypatch.context() as m, returnn_process(m, behavior_version=config.get("behavior_version")):
        for rank in range(num_ranks):
            try:
                top, returnn_config = build_train(config, rank=rank, num_ranks=num_ranks, key=key)
            except Exception:  # noqa: BLE001
                assert record.returnn_fails, (repr(config), rank)
                seen.add("fails")
                return
            assert not record.returnn_fails, (repr(config), record.returnn_fails)
            dfd = locate_dataset(top, record.key_path[1:])
            assert isinstance(dfd, DistributeFilesDataset)
            got = (
                dfd._num_shards,
                dfd._shard_index,
                dfd.random_seed_offset,
                dfd.partition_epoch,
                dfd.seq_ordering,
                dfd.fixed_random_seed,
            )
            predicted = (
                record.num_shards(),
                record.shard_index_for(rank),
                record.seed_offset_for(rank),
                record.partition_epoch,
                record.seq_ordering,
                record.fixed_random_seed,
            )
            assert got == predicted, (repr(config), rank)
            with global_config_ctx(returnn_config):
                dfd._lazy_init_file_list()
                saved = BehaviorVersion._get_state()
                BehaviorVersion._reset(engine_state)  # where the engine reads it: e.g. the DataLoader worker
                try:
                    sub = dfd._get_sub_dataset_dict([dfd._files[0]])
                finally:
                    BehaviorVersion._reset(saved)
            if record.sub_epoch_shards_again is not None:  # None: a list file and a user function, not called
                assert (sub.get("_num_shards", 1) > 1) is record.sub_epoch_shards_again, (repr(config), rank, sub)
                seen.add(("again", record.sub_epoch_shards_again))
            assert record.sharded == (num_ranks > 1 and dfd._num_shards == num_ranks and dfd._shard_index == rank)
            seen.add(("sharded" if record.sharded else "unsharded", record.seed.rank_stride > 0))


def test_reader_predicts_what_returnn_gives_every_rank(hdf, monkeypatch):
    needs_torch("RETURNN's torch DistributedContext gives each rank its seed")
    files, list_file = hdf
    seen = set()

    # A tenth in the quick tier, where test_reader_predicts_returnn_on_the_cases_that_matter reaches every sharding
    # mode; the full tier's 300 examples reach them all here too, which the assertion below checks.
    @settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(setup=returnn_dfd_setups(files=files, list_file=list_file))
    def check(setup):
        config, num_ranks = setup
        _check_parity(config, num_ranks, monkeypatch, seen)

    check()
    if not strategies.QUICK:
        assert {("sharded", False), ("unsharded", True), ("unsharded", False)} <= seen, seen  # not vacuous


def _cases(files):
    dfd = {
        "class": "DistributeFilesDataset",
        "files": list(files),
        "get_sub_epoch_dataset": hdf_sub_epoch,
        "use_worker_proc": False,
        "seq_ordering": "random",
        "partition_epoch": 2,
    }
    shard = {"torch_distributed": {"dataset_distribution": "shard"}}
    combined = {"class": "CombinedDataset", "seq_ordering": "interleave", "data_map": {("asr", "data"): "data"}}
    return {
        "sharded, sub-epoch shards again": (
            {"torch_distributed": {}, "train": dict(dfd, distrib_shard_files=True)},
            {("sharded", False), ("again", True)},
        ),
        "shard mode, fixed": ({**shard, "train": dict(dfd, sharding_fix=True)}, {("sharded", False), ("again", False)}),
        "unsharded per-rank seeds": ({"torch_distributed": {}, "train": dict(dfd)}, {("unsharded", True)}),
        "unsharded same seed": (
            {"torch_distributed": {}, "train": dict(dfd, random_seed_offset=3)},
            {("unsharded", False)},
        ),
        "sharded inside a wrapper, per-rank seeds": (
            {"torch_distributed": {}, "train": dict(combined, datasets={"asr": dict(dfd, distrib_shard_files=True)})},
            {("sharded", True)},
        ),
        "explicit None offset blocks the wrapper's": (
            {
                "torch_distributed": {},
                "train": dict(
                    combined,
                    random_seed_offset=5,
                    datasets={"asr": dict(dfd, distrib_shard_files=True, random_seed_offset=None)},
                ),
            },
            {("sharded", False)},
        ),
        "ConcatDataset under shard mode": (
            {**shard, "train": {"class": "ConcatDataset", "datasets": [dict(dfd)]}},
            {"fails"},
        ),
    }


@pytest.mark.parametrize("name", list(_cases(["x"])))
def test_reader_predicts_returnn_on_the_cases_that_matter(name, hdf, monkeypatch):
    needs_torch("RETURNN's torch DistributedContext gives each rank its seed")
    config, expected = _cases(hdf[0])[name]
    seen = set()
    _check_parity(config, 2, monkeypatch, seen)
    assert expected <= seen, seen


def _sub_epoch_with_constants(files):
    return {
        "class": "MetaDataset",
        "seq_order_control_dataset": "feat",
        "data_map": {"data": ("feat", "data"), "lm": ("lm", "data")},
        "datasets": {
            "feat": {"class": "HDFDataset", "files": list(files), "use_cache_manager": True, "seq_ordering": "random"},
            "lm": {
                "class": "HDFDataset",
                "files": ["/data/lm.hdf"],
                "epoch_wise_filter": {(1, 5): {"max_mean_len": 100}},
            },
        },
    }


def test_what_the_sub_epoch_dataset_adds_and_filters():
    (record,) = find_distribute_files_datasets(dict(DFD, get_sub_epoch_dataset=_sub_epoch_with_constants))
    assert record.sub_epoch_constant_files == ("/data/lm.hdf",)  # not the bin's file "a"
    assert record.sub_epoch_cache_manager and record.sub_epoch_epoch_wise_filter
    template = sharded_files_dataset(
        ["a"],
        sub_epoch_dataset={
            "class": "MetaDataset",
            "seq_order_control_dataset": "x",
            "data_map": {"data": ("x", "data")},
            "datasets": {
                "x": {"class": "HDFDataset", "seq_ordering": "random"},
                "y": {"class": "HDFDataset", "files": ["/c/1.hdf", "/c/2.hdf"]},
            },
        },
        files_key=("datasets", "x", "files"),
        partition_epoch=1,
    )
    (record,) = find_distribute_files_datasets(template)
    assert record.sub_epoch_constant_files == ("/c/1.hdf", "/c/2.hdf")
    assert not record.sub_epoch_cache_manager and not record.sub_epoch_epoch_wise_filter
    (plain,) = find_distribute_files_datasets(dict(DFD))
    assert plain.sub_epoch_constant_files == () and not plain.sub_epoch_cache_manager


def test_multi_epoch_remaps_the_epochs():
    def record(multi_epoch):
        config = {
            "torch_distributed": {},
            "train": {
                "class": "MultiEpochDataset",
                "multi_epoch": multi_epoch,
                "random_seed_offset": 0,
                "dataset": dict(DFD),
            },
        }
        return find_distribute_files_datasets(config, num_ranks=2)[0]

    assert record(1).epoch_multiplier == 1 and record(1).plan_problem() is None
    assert record(3).epoch_multiplier == 3 and "multi_epoch=3" in record(3).plan_problem()


def test_where_the_engine_reads_the_dataset():
    def read(**config):
        return find_distribute_files_datasets(
            {"backend": "torch", "torch_distributed": {}, "train": dict(DFD), **config}, num_ranks=2
        )[0]

    assert (
        read(behavior_version=30).effective_behavior_version,
        read(behavior_version=31).effective_behavior_version,
    ) == (0, 31)
    assert "DataLoader worker" in read().reading_process
    assert read(behavior_version=26, torch_dataloader_opts={"num_workers": 0}).effective_behavior_version == 26
    assert read(behavior_version=26, propagate_behavior_version_to_subprocs=True).effective_behavior_version == 26
    assert read(behavior_version=31, propagate_behavior_version_to_subprocs=False).effective_behavior_version == 0
    (other,) = find_distribute_files_datasets({"behavior_version": 26, "my_data": dict(DFD)})
    assert other.effective_behavior_version == 26 and other.reading_process == "main process"


def test_sync_modes():
    from i6_shard.returnn_config.reader.sync import _sync_rule

    def sync(**opts):
        find_distribute_files_datasets(
            {"torch_distributed": opts, "behavior_version": 33, "train": dict(DFD)}, num_ranks=2
        )  # the reader refuses what RETURNN's DistributedContext refuses
        return _sync_rule(opts, behavior_version=33)

    assert sync().ranks_stop_together and sync().param_sync_every is None and sync().sync_complete_frac
    param = sync(reduce_type="param", param_sync_step=100)
    assert (param.levels, param.ranks_stop_together, param.param_sync_every) == ((("world", "param", 100),), False, 100)
    assert (
        not param.sync_at_epoch_end
        and sync(reduce_type="param", param_sync_step=1, sync_at_epoch_end=True).sync_at_epoch_end
    )
    levels = sync(sync=[{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 50}])
    assert (levels.reduce_type, levels.ranks_stop_together, levels.param_sync_every) == ("sync", False, 50)
    assert sync(reduce_type="grad_explicit").ranks_stop_together
    with pytest.raises(ValueError, match="param_sync_step as a positive int"):
        sync(reduce_type="param")
    (plain,) = find_distribute_files_datasets({"train": dict(DFD)})
    assert plain.config_engine.torch_distributed is None and plain.ranks_stop_together
    # the one description holds the sync's defaults as RETURNN takes them from the behavior version
    (info,) = find_distribute_files_datasets(
        {"torch_distributed": {}, "behavior_version": 38, "train": dict(DFD)}, num_ranks=2
    )
    assert (info.config_engine.sync_complete_frac, info.config_engine.sync_at_epoch_end) == (True, True)


def test_the_sync_mode_of_a_config_is_what_the_drop_model_takes():
    from i6_shard.core import SyncMode
    from i6_shard.returnn_config.reader import read_sync_mode

    assert read_sync_mode({}) == SyncMode() == read_sync_mode({"torch_distributed": {}})
    assert read_sync_mode({"torch_distributed": {"reduce_type": "grad_explicit"}}) == SyncMode()
    assert read_sync_mode({"torch_distributed": {"reduce_type": "param", "param_sync_step": 100}}) == SyncMode(
        "param", 100
    )
    levels = [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 50}]
    assert read_sync_mode({"torch_distributed": {"sync": levels}}) == SyncMode("param", 50)
    (info,) = find_distribute_files_datasets(
        {"torch_distributed": {"reduce_type": "param", "param_sync_step": 7}, "train": dict(DFD)}, num_ranks=2
    )
    assert info.sync_mode == SyncMode("param", 7)


def test_sync_rule_follows_returnn(monkeypatch):
    """The levels the reader records are the ones RETURNN's DistributedContext parses (rank 0 of 1)."""
    needs_torch("RETURNN's DistributedContext needs torch")
    import returnn.torch.distributed as distributed

    from i6_shard.returnn_config.reader.sync import _sync_rule
    from i6_shard.returnn_ext import verify

    for opts in (
        {},
        {"reduce_type": "param", "param_sync_step": 7},
        {"reduce_type": "grad_explicit"},
        {"sync": [{"group": "world", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]},
    ):
        monkeypatch.setenv(verify._TORCH_INIT_INFO_ENV, repr({"rank": 0, "size": 1, "hostnames": None}))
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
        ctx = distributed.DistributedContext(dict(opts))
        find_distribute_files_datasets({"torch_distributed": opts, "train": dict(DFD)}, num_ranks=1)
        rule = _sync_rule(opts, behavior_version=0)
        assert [(lv.sync_type, lv.every) for lv in ctx._sync_levels] == [(t, e) for _, t, e in rule.levels], opts
        assert ctx._reduce_type == rule.reduce_type


def test_what_the_prediction_does_not_model():
    config = {"torch_distributed": {}, "batch_size": 2000, "max_seqs": 20, "train": dict(DFD)}
    (record,) = find_distribute_files_datasets(config, num_ranks=2)
    assert record.config_engine.batch_size == 2000 and record.prediction_gaps() == []
    laplace = dict(DFD, get_sub_epoch_dataset=functools.partial(hdf_sub_epoch, seq_ordering="laplace:.100"))
    (record,) = find_distribute_files_datasets(
        {
            **config,
            "max_seq_length": {"data": 800},
            "accum_grad_multiple_step": 2,
            "batch_size_train": 5000,
            "train": laplace,
        },
        num_ranks=2,
    )
    assert record.config_engine.batch_size == 5000
    gaps = record.prediction_gaps()
    assert len(gaps) == 2 and "max_seq_length" in gaps[0] and "every 2 steps" in gaps[1]
    # an HDFDataset's laplace order is mirrored exactly: the plan states it (and is compared with it), not a gap
    assert record.sub_epoch_seq_ordering == "laplace:.100"


def test_a_plan_that_states_the_trainings_sync_levels_and_length_filter_predicts_this_training():
    """The plan request read from a config with sync levels and max_seq_length carries both, so the plan simulates
    them: no prediction gap is warned of; a plan with another sync or filter is named as not this training's."""
    from i6_shard.returnn_config.checks import plan_prediction_gaps

    levels = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]}
    config = {"torch_distributed": levels, "batch_size": 2000, "max_seqs": 20, "max_seq_length": 800, "train": DFD}
    (info,) = find_distribute_files_datasets(config, num_ranks=2)
    request = info.plan_request(num_epochs=4)
    assert (request.torch_distributed, request.max_seq_length) == (levels, 800)
    limits = dict(batch_size=2000, max_seqs=20, sync=request.sync)
    assert plan_prediction_gaps(info, **limits, torch_distributed=levels, max_seq_length=800) == []
    other = plan_prediction_gaps(
        info, **limits, torch_distributed={"reduce_type": "param", "param_sync_step": 4}, max_seq_length=400
    )
    assert len(other) == 2 and "torch_distributed=" in other[0] and "max_seq_length=800" in other[1]


def test_the_plan_request_of_a_config_carries_its_settings_and_sync_mode():
    """plan_for_returnn_config goes through the one plan path: the reader's PlanRequest holds the dataset's
    settings and the training's sync mode, and too few files for its bins are said as the plan command says it."""
    from i6_shard.core import FileSizes, PlanRequest, SyncMode
    from i6_shard.returnn_config import plan_for_returnn_config

    config = {"torch_distributed": {"reduce_type": "param", "param_sync_step": 7}, "train": dict(DFD)}
    (info,) = find_distribute_files_datasets(config, num_ranks=2)
    request = info.plan_request(num_epochs=4)
    assert isinstance(request, PlanRequest) and request.sync == SyncMode("param", 7)
    assert request.settings == info.plan_settings(num_epochs=4)
    (plain,) = find_distribute_files_datasets({"train": dict(DFD)}, num_ranks=2)
    assert plain.plan_request(num_epochs=4).sync == SyncMode()
    few = FileSizes(keys=["a", "b", "c"], sizes=[1, 2, 3])  # 3 files for 2 ranks x 2 sub-epochs
    with pytest.raises(ValueError, match=r"3 files cannot fill num_shards\*partition_epoch=2\*2=4 bins"):
        plan_for_returnn_config(
            dict(config, train=dict(DFD, files=["a", "b", "c"], distrib_shard_files=True)),
            file_sizes=few,
            num_ranks=2,
            num_epochs=4,
        )

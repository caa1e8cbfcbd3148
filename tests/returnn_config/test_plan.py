"""plan_for_returnn_config: the plan a RETURNN config's DistributeFilesDataset follows equals, on every
rank and sub-epoch across full epochs, the files the real RETURNN gives that rank, in every sharding mode."""

import functools

import pytest

from tests.deps import needs_torch

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
needs_torch("RETURNN's torch DistributedContext gives each rank its seed")

from i6_shard import core  # noqa: E402
from i6_shard.returnn_config import plan_for_returnn_config  # noqa: E402

from .config_ranks import build_train, dfd_files, hdf_sub_epoch, read_tags, returnn_process, write_corpus  # noqa: E402

NUM_RANKS, PARTITION_EPOCH = 3, 2
NUM_EPOCHS = 2 * PARTITION_EPOCH + 1  # two full epochs and the first sub-epoch of the third


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("plan_hdf")
    files = list(write_corpus(str(directory), num_files=12, prefix="p", seed=4))
    sizes_path = str(directory / "sizes.npz")
    core.save_file_sizes(core.collect_file_sizes(files, num_threads=1), sizes_path)
    return files, sizes_path


def _dfd(files, **extra):
    return {
        "class": "DistributeFilesDataset",
        "files": files,
        "partition_epoch": PARTITION_EPOCH,
        "get_sub_epoch_dataset": hdf_sub_epoch,
        "use_worker_proc": False,
        "seq_ordering": "random",
        "sharding_fix": True,
        **extra,
    }


def _balanced(files, sizes_path, **extra):
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    return _dfd(
        files, **{"class": ShardedDistributeFilesDataset, "distribution": "balanced", "file_sizes": sizes_path}, **extra
    )


MODES = {
    "sharded (distrib_shard_files)": (
        "sharded",
        lambda f, s: {
            "torch_distributed": {},
            "dataset_random_seed_offset": 2,
            "train": _dfd(f, distrib_shard_files=True),
        },
    ),
    "sharded (dataset_distribution shard), balanced": (
        "sharded",
        lambda f, s: {
            "torch_distributed": {"dataset_distribution": "shard"},
            "train": _balanced(f, s, random_seed_offset=7),
        },
    ),
    "unsharded (per-rank seeds)": (
        "unsharded",
        lambda f, s: {"torch_distributed": {}, "dataset_random_seed_offset": 3, "train": _dfd(f)},
    ),
    "unsharded, a dataset random_seed_offset": (
        "unsharded_same_seed",
        lambda f, s: {"torch_distributed": {}, "train": _dfd(f, random_seed_offset=11)},
    ),
    "unsharded inside a wrapper that sets the offset": (
        "unsharded_same_seed",
        lambda f, s: {
            "torch_distributed": {},
            "train": {"class": "MultiEpochDataset", "multi_epoch": 1, "random_seed_offset": 4, "dataset": _dfd(f)},
        },
    ),
}


@pytest.mark.parametrize("name", list(MODES))
def test_plan_equals_what_each_rank_reads(name, corpus, monkeypatch):
    from returnn.config import global_config_ctx

    mode, make = MODES[name]
    files, sizes_path = corpus
    config = make(files, sizes_path)
    plan = plan_for_returnn_config(config, file_sizes=sizes_path, num_ranks=NUM_RANKS, num_epochs=NUM_EPOCHS)
    assert plan.settings.sharding == mode
    key_path = ("dataset",) if config["train"]["class"] == "MultiEpochDataset" else ()
    per_rank = []
    with returnn_process(monkeypatch):
        for rank in range(NUM_RANKS):
            dataset, returnn_config = build_train(config, rank=rank, num_ranks=NUM_RANKS)
            with global_config_ctx(returnn_config):
                got = []
                for epoch in range(1, NUM_EPOCHS + 1):
                    if key_path:
                        read_tags(dataset, epoch)  # through the wrapper, as the training reads
                    else:
                        dataset.init_seq_order(epoch=epoch)
                    got.append(dfd_files(dataset, key_path, epoch))
                dataset.finish_epoch(free_resources=True)
            assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)], (name, rank)
            per_rank.append(got)
    assert (per_rank[0] == per_rank[1]) == (mode == "unsharded_same_seed")  # not vacuous: the modes differ


def test_plan_errors_name_the_fix(corpus):
    files, sizes_path = corpus
    sizes = core.load_file_sizes(sizes_path)
    kwargs = dict(file_sizes=sizes, num_ranks=2, num_epochs=2)
    with pytest.raises(ValueError, match=r"no DistributeFilesDataset at 'train' in the config \(found: \['dev'\]\)"):
        plan_for_returnn_config({"dev": _dfd(files)}, **kwargs)
    combined = {
        "class": "CombinedDataset",
        "seq_ordering": "interleave",
        "data_map": {("a", "data"): "data", ("b", "data"): "b"},
        "datasets": {"a": _dfd(files, distrib_shard_files=True), "b": _dfd(files)},
    }
    with pytest.raises(ValueError, match=r"2 DistributeFilesDatasets at 'train'.*key=\('train', 'datasets', 'a'\)"):
        plan_for_returnn_config({"torch_distributed": {}, "train": combined}, **kwargs)
    with pytest.raises(ValueError, match="the files are sharded but the ranks shuffle them with different seeds"):
        plan_for_returnn_config({"torch_distributed": {}, "train": combined}, key=("train", "datasets", "a"), **kwargs)
    plan = plan_for_returnn_config(
        {"torch_distributed": {}, "train": combined}, key=("train", "datasets", "b"), **kwargs
    )
    assert plan.settings.sharding == "unsharded"
    with pytest.raises(ValueError, match="the sizes archive lists 12 entries, the dataset 11 files"):
        plan_for_returnn_config({"train": _dfd(files[:-1])}, **kwargs)
    with pytest.raises(TypeError, match="file_sizes=3 must be the path of a sizes archive"):
        plan_for_returnn_config({"train": _dfd(files)}, file_sizes=3, num_ranks=2, num_epochs=2)
    # A callable file list is not called while planning (it is resolved only when the training runs).
    calls = []
    plan_for_returnn_config({"train": _dfd(functools.partial(_listed, files, calls))}, **kwargs)
    assert calls == []


def _listed(files, calls):
    calls.append(1)
    return list(files)

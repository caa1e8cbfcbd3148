"""What the torch engine around a DistributeFilesDataset does that the dataset alone does not: the
process that reads it (DataLoader worker, MultiProcDataset worker) and the behavior version RETURNN hands
that process, checked against the real RETURNN."""

import pytest

from tests.deps import needs_torch

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
needs_torch("RETURNN's torch DistributedContext gives each rank its seed")

from i6_shard.returnn_config import ConfigCheckError, check_returnn_config, sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.reader import find_distribute_files_datasets  # noqa: E402

from .config_ranks import HDF, build_train, read_tags, returnn_process, write_corpus  # noqa: E402

TORCH_SHARD = {"backend": "torch", "torch_distributed": {"dataset_distribution": "shard"}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("engine")), num_files=8, prefix="e", seed=2)


def _dfd(files, **kwargs):
    return sharded_files_dataset(
        list(files),
        sub_epoch_dataset=HDF,
        partition_epoch=2,
        use_worker_proc=False,
        distrib_shard_files=False,
        **kwargs,
    )


@pytest.mark.slow  # a RETURNN subprocess through torch's DataLoader: several seconds
def test_multi_proc_dedicated_around_a_dfd_crashes_in_returnn_and_is_rejected(corpus, monkeypatch):
    """Each dedicated worker gets its own files, MultiProcDataset takes seqs round-robin: a None mid-epoch."""
    from returnn.config import global_config_ctx

    config = {
        **TORCH_SHARD,
        "train": {
            "class": "MultiProcDataset",
            "num_workers": 2,
            "buffer_size": 2,
            "sharding_method": "dedicated",
            "dataset": _dfd(corpus),
        },
    }
    errors = []
    with returnn_process(monkeypatch):
        for rank in range(2):
            dataset, returnn_config = build_train(config, rank=rank, num_ranks=2)
            try:
                with global_config_ctx(returnn_config):
                    for epoch in (1, 2):
                        read_tags(dataset, epoch)
            except Exception as exc:  # noqa: BLE001 -- whatever RETURNN raises
                errors.append(exc)
            finally:
                dataset.finish_epoch(free_resources=True)
    assert errors and all("NoneType" in str(e) for e in errors), errors  # the None sequence mid-epoch
    with pytest.raises(ConfigCheckError, match="sharding_method 'dedicated' with num_workers=2.*round-robin"):
        check_returnn_config(config, num_ranks=2)
    message = "inside the sub-epoch dataset"
    seq_order = {**config, "train": {**config["train"], "sharding_method": "seq_order"}}
    with pytest.raises(ConfigCheckError, match=message) as info:
        check_returnn_config(seq_order, num_ranks=2)
    assert "use sharding_method='dedicated'" not in str(info.value)


@pytest.mark.parametrize("multi_epoch", [1, 2])
def test_multi_epoch_dataset_remaps_the_dfd_epochs(corpus, monkeypatch, multi_epoch):
    """Training epoch 1 reads the DFD's epochs 1..multi_epoch: the plan's epochs are not the training's."""
    from returnn.config import global_config_ctx

    from i6_shard.returnn_ext.locate import locate_dataset

    config = {
        "backend": "torch",
        "torch_distributed": {},
        "train": {
            "class": "MultiEpochDataset",
            "multi_epoch": multi_epoch,
            "random_seed_offset": 0,
            "dataset": sharded_files_dataset(
                list(corpus), sub_epoch_dataset=HDF, partition_epoch=2, use_worker_proc=False
            ),
        },
    }
    (record,) = find_distribute_files_datasets(config, num_ranks=2)
    with returnn_process(monkeypatch):
        dataset, returnn_config = build_train(config, rank=0, num_ranks=2)
        with global_config_ctx(returnn_config):
            read_tags(dataset, 1)
            dfd_epoch = locate_dataset(dataset, record.key_path[1:]).epoch
            dataset.finish_epoch(free_resources=True)
    assert dfd_epoch == multi_epoch == record.epoch_multiplier
    assert (record.plan_problem() is None) is (multi_epoch == 1)


def test_the_sub_epoch_dataset_sees_full_epochs(corpus, monkeypatch):
    """DistributeFilesDataset inits its sub-epoch dataset with epoch = full epoch + 1, which is what an
    epoch_wise_filter there counts in."""
    from returnn.config import global_config_ctx

    config = {
        "backend": "torch",
        "torch_distributed": {},
        "train": sharded_files_dataset(list(corpus), sub_epoch_dataset=HDF, partition_epoch=2, use_worker_proc=False),
    }
    seen = []
    with returnn_process(monkeypatch):
        dataset, returnn_config = build_train(config, rank=0, num_ranks=2)
        with global_config_ctx(returnn_config):
            for epoch in (1, 2, 3):
                dataset.init_seq_order(epoch=epoch)
                seen.append(dataset._workers[epoch].dataset.epoch)
            dataset.finish_epoch(free_resources=True)
    assert seen == [1, 1, 2]  # training epochs 1, 2 are the sub-epoch dataset's epoch 1
    ogg = {"class": "OggZipDataset", "seq_ordering": "random", "epoch_wise_filter": {(1, 1): {"max_mean_len": 9}}}
    config["train"] = sharded_files_dataset(list(corpus), sub_epoch_dataset=ogg, files_key="path", partition_epoch=2)
    (record,) = find_distribute_files_datasets(config, num_ranks=2)
    assert record.sub_epoch_epoch_wise_filter
    from i6_shard.returnn_config.checks import dataset_warnings

    assert any("epoch_wise_filter, which sees full epochs" in w for w in dataset_warnings(record))


def test_the_batching_the_reader_records_is_what_the_torch_engine_reads():
    """Fuzzed configs: read_engine reads batch_size(_train), max_seqs, packed_batch_size(_train) as RETURNN's
    get_batching_iterable_dataset_from_config does, and min/max_seq_length as Engine.__init__ does."""
    import random

    from returnn.config import Config
    from returnn.torch.data.pipeline import get_batching_iterable_dataset_from_config

    from i6_shard.returnn_config.reader.engine import read_engine

    rng = random.Random(0)
    for _ in range(200):
        config = {"batch_size": rng.choice([1000, 5000, 20000])}
        for key, values in (
            ("batch_size_train", [300, 7000]),
            ("max_seqs", [1, 16, 200]),
            ("packed_batch_size", [4000]),
            ("packed_batch_size_train", [6000]),
            ("max_seq_length", [800, {"data": 1200}]),
            ("min_seq_length", [5]),
        ):
            if rng.random() < 0.4:
                config[key] = rng.choice(values)
        ours = read_engine(config)
        pipe = get_batching_iterable_dataset_from_config(dataset=None, config=Config(dict(config)), train=True)
        assert ours.batch_size == pipe._max_batch_size, config
        assert (ours.max_seqs if ours.max_seqs is not None else -1) == config.get("max_seqs", -1) and (
            pipe._max_seqs == ours.max_seqs or ours.max_seqs is None
        ), config
        assert ("packed_batch_size" not in dict(ours.other_batching)) == (pipe._max_packed_batch_size is None), config
        cfg = Config(dict(config))
        stated = {"min_seq_length": ours.min_seq_length, "max_seq_length": ours.max_seq_length_by_key}
        stated["max_seq_length"] = stated["max_seq_length"] or ours.max_seq_length
        for key in ("min_seq_length", "max_seq_length"):  # Engine.__init__
            expected = cfg.typed_value(key, None) or cfg.int(key, None)
            assert stated[key] == expected, (key, config)

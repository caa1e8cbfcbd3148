"""What the torch engine around a DistributeFilesDataset does that the dataset alone does not: the
process that reads it (DataLoader worker, MultiProcDataset worker) and the behavior version RETURNN hands
that process, checked against the real RETURNN."""

import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
pytest.importorskip("torch", reason="RETURNN's torch DistributedContext gives each rank its seed: pip install torch")

from i6_shard.returnn_config import (  # noqa: E402
    ConfigCheckError,
    check_returnn_config,
    find_distribute_files_datasets,
    sharded_files_dataset,
)

from .returnn_ranks import HDF, build_train, read_tags, returnn_process, write_corpus  # noqa: E402

TORCH_SHARD = {"backend": "torch", "torch_distributed": {"dataset_distribution": "shard"}}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("engine")), num_files=8, prefix="e", seed=2)


def _dfd(files, **kwargs):
    return sharded_files_dataset(list(files), sub_epoch_dataset=HDF, partition_epoch=2, use_worker_proc=False,
                                 distrib_shard_files=False, **kwargs)


def test_multi_proc_dedicated_around_a_dfd_crashes_in_returnn_and_is_rejected(corpus, monkeypatch):
    """Each dedicated worker gets its own files, MultiProcDataset takes seqs round-robin: a None mid-epoch."""
    from returnn.config import global_config_ctx

    config = {**TORCH_SHARD, "train": {"class": "MultiProcDataset", "num_workers": 2, "buffer_size": 2,
                                       "sharding_method": "dedicated", "dataset": _dfd(corpus)}}
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

"""The reader's rule of DataLoader workers that do not shard, proved against RETURNN's own pipeline: with
behavior_version 24 and 2 workers, ``create_data_loader_from_batches`` over ``ReturnnDatasetIterDataPipe`` yields every
sequence of a tiny dataset twice (each worker iterates all of it), and the rule says so; with the workers sharding
(behavior_version 37) every sequence comes once, and the rule is silent."""

import collections

import pytest

from tests.deps import needs_torch  # noqa: E402

needs_torch("RETURNN's DataLoader pipeline is torch code")
pytest.importorskip("returnn.torch.data.returnn_dataset_wrapper", reason="needs RETURNN: pip install returnn")

from i6_shard.returnn_config.reader.rules import duplicate_workers_problem  # noqa: E402


def _tags(loader) -> collections.Counter:
    """The tags of every batch ``loader`` yields; its worker processes ended however the iteration ends (a worker
    that raised is otherwise left to the garbage collector, whose shutdown then waits 5 s per worker in whatever test
    runs at that moment)."""
    it = iter(loader)
    try:
        return collections.Counter(str(t) for batch in it for t in batch["seq_tag"].reshape(-1))
    finally:
        for worker in getattr(it, "_workers", []):  # torch's multi-process iterator keeps them there
            if worker.is_alive():
                worker.kill()
                worker.join()


def _tags_read(monkeypatch, behavior_version: int) -> collections.Counter:
    """The tags RETURNN's DataLoader (2 forked workers) yields over one epoch of a 5-sequence dataset, the pipe made
    as the torch engine makes it (its shard_workers from the behavior version, ``BehaviorVersion.get() >= 37``)."""
    from returnn.datasets.generating import DummyDataset
    from returnn.torch.data.pipeline import BatchingIterDataPipe, create_data_loader_from_batches
    from returnn.torch.data.returnn_dataset_wrapper import ReturnnDatasetIterDataPipe
    from returnn.util.basic import BehaviorVersion

    monkeypatch.setattr(BehaviorVersion, "_behavior_version", behavior_version)
    dataset = DummyDataset(input_dim=2, output_dim=3, num_seqs=5, seq_len=4)
    dataset.initialize()
    pipe = ReturnnDatasetIterDataPipe(dataset)  # default reset: init_seq_order of the epoch counter, in each worker
    batches = BatchingIterDataPipe(pipe, batch_size=10**9, max_seqs=1)
    loader = create_data_loader_from_batches(
        batches, {"num_workers": 2, "multiprocessing_context": "fork", "persistent_workers": False}
    )
    return _tags(loader)


@pytest.mark.parametrize("behavior_version, times", [(24, 2), (37, 1)])
def test_returnns_dataloader_workers_that_do_not_shard_each_read_every_sequence(
    monkeypatch, tmp_path, behavior_version, times
):
    monkeypatch.chdir(tmp_path)  # (where the workers' faulthandler dumps go)
    counts = _tags_read(monkeypatch, behavior_version)
    assert len(counts) == 5 and set(counts.values()) == {times}, counts
    config = {"backend": "torch", "behavior_version": behavior_version, "torch_dataloader_opts": {"num_workers": 2}}
    rule = duplicate_workers_problem(config)  # the installed (newest) release
    assert (rule is not None) == (times > 1), rule
    if rule is not None:
        assert f"trained {times} times per epoch" in rule


@pytest.mark.parametrize("behavior_version", [24, 37])
def test_i6_shards_dataset_refuses_to_start_in_such_a_worker(monkeypatch, tmp_path, behavior_version):
    """ShardedDistributeFilesDataset as the train dataset, read through RETURNN's DataLoader with 2 forked workers:
    under behavior_version 24 each worker stops at start-up with the rule's words (else each would train all of the
    data); under 37 each worker gets its shard and every sequence comes once."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset
    from returnn.torch.data.pipeline import BatchingIterDataPipe, create_data_loader_from_batches
    from returnn.torch.data.returnn_dataset_wrapper import ReturnnDatasetIterDataPipe
    from returnn.util.basic import BehaviorVersion

    from tests.hdf_data import sharded_dfd, write_tiny_hdf_files

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(BehaviorVersion, "_behavior_version", behavior_version)
    files = write_tiny_hdf_files(str(tmp_path / "hdf"), num_files=4, seqs_per_file=[2, 2, 2, 2])
    opts = {"backend": "torch", "behavior_version": behavior_version, "torch_dataloader_opts": {"num_workers": 2}}
    config = Config(opts)
    dataset_dict = sharded_dfd(files, partition_epoch=1, distrib_shard_files=False, name="train")
    with global_config_ctx(config):
        from i6_shard.returnn_ext.distrib_files import ShardedDistributeFilesDataset

        dataset_dict["class"] = ShardedDistributeFilesDataset
        dataset = init_dataset(dataset_dict)
        batches = BatchingIterDataPipe(ReturnnDatasetIterDataPipe(dataset), batch_size=10**9, max_seqs=1)
        loader = create_data_loader_from_batches(
            batches, {"num_workers": 2, "multiprocessing_context": "fork", "persistent_workers": False}
        )
        rule = duplicate_workers_problem(opts)
        if rule is None:
            counts = _tags(loader)
            assert len(counts) == 8 and set(counts.values()) == {1}, counts
            return
        with pytest.raises(ValueError) as info:
            _tags(loader)
    assert rule in str(info.value), info.value

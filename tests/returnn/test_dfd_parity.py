"""The real DistributeFilesDataset, built once per rank, hands each rank exactly the files
ShardPlan.files_for predicts, sub-epoch by sub-epoch across full-epoch boundaries."""

import functools
import os
from typing import Any, Dict, List

import numpy as np
import pytest

from i6_shard import core

pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")
pytest.importorskip("h5py", reason="the HDF sub-datasets need h5py (test extra)")

NUM_SHARDS = 3
PARTITION_EPOCH = 3
NUM_EPOCHS = 3 * PARTITION_EPOCH + 1  # three full epochs and the first sub-epoch of the fourth


def sub_epoch_dataset(files: List[str], *, seq_ordering: str) -> Dict[str, Any]:
    """Module level (bound with functools.partial) so RETURNN could pickle it."""
    return {"class": "HDFDataset", "files": list(files), "seq_ordering": seq_ordering}


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory) -> List[str]:
    """20 real HDF files from RETURNN's own writer, of clearly different sizes."""
    from returnn.datasets.hdf import SimpleHDFWriter

    directory = tmp_path_factory.mktemp("hdf")
    rng = np.random.RandomState(0)
    paths = []
    for i in range(20):
        path = str(directory / f"part-{i:02d}.hdf")
        writer = SimpleHDFWriter(path, dim=3, ndim=2)
        num_frames = int(rng.randint(1, 400))  # sizes from a few KiB upwards
        writer.insert_batch(rng.rand(1, num_frames, 3).astype("float32"), seq_len=[num_frames],
                            seq_tag=[f"part-{i}/seq-0"])
        writer.close()
        paths.append(path)
    sizes = [os.path.getsize(p) for p in paths]
    assert len(set(sizes)) > 10, sizes
    return paths


def rank_dataset(files: List[str], *, rank: int, **opts):
    """A DistributeFilesDataset as rank ``rank`` of NUM_SHARDS constructs it (sharded)."""
    from returnn.config import Config, global_config_ctx

    with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})):
        dataset = new_dataset(files, **opts)
    if opts.get("distrib_shard_files"):
        assert (dataset._shard_index, dataset._num_shards) == (rank, NUM_SHARDS)
    return dataset


def new_dataset(files: List[str], **opts):
    from returnn.datasets.basic import init_dataset

    return init_dataset({
        "class": "DistributeFilesDataset",
        "files": files,
        "get_sub_epoch_dataset": functools.partial(sub_epoch_dataset, seq_ordering="default"),
        "partition_epoch": PARTITION_EPOCH,
        "use_worker_proc": False,  # in-process sub-epoch datasets: same files, no subprocesses
        **opts,
    })


class StubDistributedContext:
    """Stands in for returnn.torch.distributed.DistributedContext: only the rank and size."""

    def __init__(self, rank: int, size: int):
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size


@pytest.fixture
def torch_distributed_rank(monkeypatch):
    """Lets RETURNN derive the per-rank seed offset itself, as in a ``torch_distributed`` training.

    ``Dataset._get_default_random_seed_offset`` imports ``returnn.torch.distributed`` and asks its
    ``get_ctx(config=...)`` for the rank. That module imports torch, which is not needed here, so it
    is imported with torch mocked, and ``get_ctx`` returns a stub context; everything else, including
    ``get_dataset_distribution``, is RETURNN's code. Returns ``use(rank)``, a context manager running
    the body as rank ``rank`` of NUM_SHARDS under a global config with ``torch_distributed`` set
    (and ``dataset_random_seed_offset=CONFIG_SEED_OFFSET``); ``calls`` lists the ranks get_ctx gave.
    """
    import contextlib
    import importlib
    import sys
    from unittest import mock

    import returnn.torch
    from returnn.config import Config, global_config_ctx

    for name in ("torch", "torch.nn", "torch.nn.parallel", "torch.distributed"):
        monkeypatch.setitem(sys.modules, name, mock.MagicMock(name=name))
    monkeypatch.delitem(sys.modules, "returnn.torch.distributed", raising=False)
    monkeypatch.setattr(returnn.torch, "distributed", None, raising=False)  # removed again afterwards
    distributed = importlib.import_module("returnn.torch.distributed")
    current = {}
    calls = []

    def get_ctx(config=None):
        calls.append(current["rank"])
        return StubDistributedContext(current["rank"], NUM_SHARDS)

    monkeypatch.setattr(distributed, "get_ctx", get_ctx)

    @contextlib.contextmanager
    def use(rank: int):
        current["rank"] = rank
        config = Config({"torch_distributed": {}, "dataset_random_seed_offset": CONFIG_SEED_OFFSET})
        with global_config_ctx(config):
            yield

    use.calls = calls
    return use


#: The config's dataset_random_seed_offset in the unsharded tests: RETURNN's per-rank base.
CONFIG_SEED_OFFSET = 5


def dfd_files_per_epoch(dataset) -> List[List[str]]:
    """Files the dataset hands its sub-epoch dataset in epochs 1..NUM_EPOCHS, also checked
    against the dataset's per-full-epoch cache of its bins."""
    got = []
    for epoch in range(1, NUM_EPOCHS + 1):
        dataset.init_seq_order(epoch=epoch)
        files = dataset._workers[epoch].dataset_dict["files"]
        full = (epoch - 1) // PARTITION_EPOCH
        assert dataset._files_order_cache[full][(epoch - 1) % PARTITION_EPOCH] == files
        got.append(list(files))
    dataset.finish_epoch(free_resources=True)
    return got


@pytest.mark.parametrize("opts, plan_opts", [
    ({"seq_ordering": "random"}, {}),
    ({"seq_ordering": "random", "random_seed_offset": 11}, {"random_seed_offset": 11}),
    ({"seq_ordering": "default"}, {"seq_ordering": "default"}),
], ids=["random", "random-offset", "default"])
def test_sharded_ranks_get_the_planned_files(hdf_files, opts, plan_opts):
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(sizes.keys, sizes.sizes, core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, **plan_opts))
    seen = []
    for rank in range(NUM_SHARDS):
        dataset = rank_dataset(hdf_files, rank=rank, distrib_shard_files=True, sharding_fix=True, **opts)
        got = dfd_files_per_epoch(dataset)
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        seen.append(got)
    # The ranks together read every file once per full epoch.
    for full in range(NUM_EPOCHS // PARTITION_EPOCH):
        epochs = range(full * PARTITION_EPOCH, (full + 1) * PARTITION_EPOCH)
        assert sorted(f for rank in seen for e in epochs for f in rank[e]) == sorted(hdf_files)


def test_unsharded_ranks_get_the_planned_files(hdf_files, torch_distributed_rank):
    """Without sharding and without a dataset random_seed_offset, RETURNN gives each rank its own
    seed offset, derived from the torch distributed rank and the config's dataset_random_seed_offset;
    ShardPlan models that as random_seed_offset (the config's) plus its own per-rank stride."""
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(sizes.keys, sizes.sizes, core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distrib_shard_files=False, random_seed_offset=CONFIG_SEED_OFFSET))
    per_rank = []
    for rank in range(NUM_SHARDS):
        with torch_distributed_rank(rank):
            dataset = new_dataset(hdf_files, distrib_shard_files=False, seq_ordering="random")
            got = dfd_files_per_epoch(dataset)
        assert dataset._num_shards == 1
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        per_rank.append(got)
    assert torch_distributed_rank.calls == list(range(NUM_SHARDS))  # RETURNN asked for the rank on every rank
    assert per_rank[0] != per_rank[1]  # the offsets really differ per rank


def test_unsharded_with_a_dataset_random_seed_offset_every_rank_reads_the_same(hdf_files, torch_distributed_rank):
    """An explicit dataset random_seed_offset is used unchanged on every rank (RETURNN adds no rank
    term to it): ShardPlan's same_seed_on_all_ranks, and the report shows the ranks' overlap."""
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(sizes.keys, sizes.sizes, core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distrib_shard_files=False, random_seed_offset=11, same_seed_on_all_ranks=True))
    per_rank = []
    for rank in range(NUM_SHARDS):
        with torch_distributed_rank(rank):
            dataset = new_dataset(hdf_files, distrib_shard_files=False, seq_ordering="random", random_seed_offset=11)
            got = dfd_files_per_epoch(dataset)
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        per_rank.append(got)
    assert per_rank[0] == per_rank[1] == per_rank[2]  # the pitfall: every rank reads the same files
    default_plan = core.ShardPlan(sizes.keys, sizes.sizes, core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distrib_shard_files=False, random_seed_offset=11))
    assert per_rank[1] != [default_plan.files_for(epoch=e, shard_index=1) for e in range(1, NUM_EPOCHS + 1)]
    summary, stats = core.plan_summary(plan, num_epochs=NUM_EPOCHS, compare=False)
    bin_sizes = [len(files) for files in per_rank[0]]
    assert stats.overlap.tolist() == bin_sizes  # every file of a sub-epoch is read by all ranks
    assert any("same files in the same order" in w for w in summary["warnings"])

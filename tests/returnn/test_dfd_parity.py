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
    """A DistributeFilesDataset as rank ``rank`` of NUM_SHARDS constructs it."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})):
        dataset = init_dataset({
            "class": "DistributeFilesDataset",
            "files": files,
            "get_sub_epoch_dataset": functools.partial(sub_epoch_dataset, seq_ordering="default"),
            "partition_epoch": PARTITION_EPOCH,
            "use_worker_proc": False,  # in-process sub-epoch datasets: same files, no subprocesses
            **opts,
        })
    if opts.get("distrib_shard_files"):
        assert (dataset._shard_index, dataset._num_shards) == (rank, NUM_SHARDS)
    return dataset


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
    plan = core.ShardPlan(sizes.keys, sizes.sizes, num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH,
                          **plan_opts)
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


def test_unsharded_ranks_get_the_planned_files(hdf_files):
    """Without sharding, RETURNN gives each rank ``random_seed_offset = rank * 16127``, but derives
    the rank from torch.distributed, which would need torch and a process group here. The dataset's
    ``random_seed_offset`` argument is exactly where that value goes, so each rank's dataset gets it
    explicitly; everything else (shuffle, cutting into partition_epoch bins) is RETURNN's own code."""
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(sizes.keys, sizes.sizes, num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH,
                          distrib_shard_files=False)
    per_rank = []
    for rank in range(NUM_SHARDS):
        dataset = rank_dataset(hdf_files, rank=rank, distrib_shard_files=False, seq_ordering="random",
                               random_seed_offset=rank * core.UNSHARDED_RANK_SEED_STRIDE)
        assert dataset._num_shards == 1
        got = dfd_files_per_epoch(dataset)
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        per_rank.append(got)
    assert per_rank[0] != per_rank[1]  # the offsets really differ per rank

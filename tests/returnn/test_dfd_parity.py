"""The real DistributeFilesDataset, built once per rank, hands each rank exactly the files
ShardPlan.files_for predicts, sub-epoch by sub-epoch across full-epoch boundaries."""

import functools
import os
from typing import List

import pytest

from i6_shard import core
from i6_shard.core.reporting.outputs import plan_summary

pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")
pytest.importorskip("h5py", reason="the HDF sub-datasets need h5py (test extra)")

from ..hdf_data import hdf_sub_epoch_dataset, write_tiny_hdf_files  # noqa: E402
from ..returnn_ranks import as_rank, dfd_files_per_epoch  # noqa: E402
from ..returnn_ranks import new_dataset as new_dfd  # noqa: E402

NUM_SHARDS = 3
PARTITION_EPOCH = 3
NUM_EPOCHS = 3 * PARTITION_EPOCH + 1  # three full epochs and the first sub-epoch of the fourth
#: The config's dataset_random_seed_offset in the unsharded tests: RETURNN's per-rank base.
CONFIG_SEED_OFFSET = 5


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory) -> List[str]:
    """20 real HDF files of one sequence each, of clearly different sizes."""
    paths = write_tiny_hdf_files(
        str(tmp_path_factory.mktemp("hdf")),
        num_files=20,
        seqs_per_file=[1] * 20,
        frames=(1, 399),
        dim=3,
        names=[f"part-{i:02d}.hdf" for i in range(20)],
    )
    sizes = [os.path.getsize(p) for p in paths]
    assert len(set(sizes)) > 10, sizes
    return paths


def new_dataset(files: List[str], **opts):
    return new_dfd(
        files,
        get_sub_epoch_dataset=functools.partial(hdf_sub_epoch_dataset, seq_ordering="default"),
        partition_epoch=PARTITION_EPOCH,
        **opts,
    )


def rank_dataset(files: List[str], *, rank: int, **opts):
    """A DistributeFilesDataset as rank ``rank`` of NUM_SHARDS constructs it (sharded)."""
    with as_rank(rank, NUM_SHARDS):
        dataset = new_dataset(files, **opts)
    if opts.get("distrib_shard_files"):
        assert (dataset._shard_index, dataset._num_shards) == (rank, NUM_SHARDS)
    return dataset


@pytest.mark.parametrize(
    "opts, plan_opts",
    [
        ({"seq_ordering": "random"}, {}),
        ({"seq_ordering": "random", "random_seed_offset": 11}, {"random_seed_offset": 11}),
        ({"seq_ordering": "default"}, {"seq_ordering": "default"}),
    ],
    ids=["random", "random-offset", "default"],
)
def test_sharded_ranks_get_the_planned_files(hdf_files, opts, plan_opts):
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(
        sizes.keys, sizes.sizes, core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, **plan_opts)
    )
    seen = []
    for rank in range(NUM_SHARDS):
        dataset = rank_dataset(hdf_files, rank=rank, distrib_shard_files=True, sharding_fix=True, **opts)
        got = dfd_files_per_epoch(dataset, num_epochs=NUM_EPOCHS)
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        seen.append(got)
    # The ranks together read every file once per full epoch.
    for full in range(NUM_EPOCHS // PARTITION_EPOCH):
        epochs = range(full * PARTITION_EPOCH, (full + 1) * PARTITION_EPOCH)
        assert sorted(f for rank in seen for e in epochs for f in rank[e]) == sorted(hdf_files)


def test_unsharded_ranks_get_the_planned_files(hdf_files):
    """Without sharding and without a dataset random_seed_offset, RETURNN gives each rank its own
    seed offset, derived from the torch distributed rank and the config's dataset_random_seed_offset;
    ShardPlan models that as random_seed_offset (the config's) plus its own per-rank stride."""
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(
        sizes.keys,
        sizes.sizes,
        core.PlanSettings(
            num_shards=NUM_SHARDS,
            partition_epoch=PARTITION_EPOCH,
            distrib_shard_files=False,
            random_seed_offset=CONFIG_SEED_OFFSET,
        ),
    )
    per_rank, calls = [], []
    for rank in range(NUM_SHARDS):
        with as_rank(rank, NUM_SHARDS, dataset_random_seed_offset=CONFIG_SEED_OFFSET, calls=calls):
            dataset = new_dataset(hdf_files, distrib_shard_files=False, seq_ordering="random")
            got = dfd_files_per_epoch(dataset, num_epochs=NUM_EPOCHS)
        assert dataset._num_shards == 1
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        per_rank.append(got)
    assert calls == list(range(NUM_SHARDS))  # RETURNN asked for the rank on every rank
    assert per_rank[0] != per_rank[1]  # the offsets really differ per rank


def test_unsharded_with_a_dataset_random_seed_offset_every_rank_reads_the_same(hdf_files):
    """An explicit dataset random_seed_offset is used unchanged on every rank (RETURNN adds no rank
    term to it): ShardPlan's same_seed_on_all_ranks, and the report shows the ranks' overlap."""
    sizes = core.collect_file_sizes(hdf_files, num_threads=1)
    plan = core.ShardPlan(
        sizes.keys,
        sizes.sizes,
        core.PlanSettings(
            num_shards=NUM_SHARDS,
            partition_epoch=PARTITION_EPOCH,
            distrib_shard_files=False,
            random_seed_offset=11,
            same_seed_on_all_ranks=True,
        ),
    )
    per_rank = []
    for rank in range(NUM_SHARDS):
        with as_rank(rank, NUM_SHARDS, dataset_random_seed_offset=CONFIG_SEED_OFFSET):
            dataset = new_dataset(hdf_files, distrib_shard_files=False, seq_ordering="random", random_seed_offset=11)
            got = dfd_files_per_epoch(dataset, num_epochs=NUM_EPOCHS)
        assert got == [plan.files_for(epoch=e, shard_index=rank) for e in range(1, NUM_EPOCHS + 1)]
        per_rank.append(got)
    assert per_rank[0] == per_rank[1] == per_rank[2]  # the pitfall: every rank reads the same files
    default_plan = core.ShardPlan(
        sizes.keys,
        sizes.sizes,
        core.PlanSettings(
            num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distrib_shard_files=False, random_seed_offset=11
        ),
    )
    assert per_rank[1] != [default_plan.files_for(epoch=e, shard_index=1) for e in range(1, NUM_EPOCHS + 1)]
    summary, stats = plan_summary(plan, num_epochs=NUM_EPOCHS, compare=False)
    bin_sizes = [len(files) for files in per_rank[0]]
    assert stats.overlap.tolist() == bin_sizes  # every file of a sub-epoch is read by all ranks
    assert any("same files in the same order" in w for w in summary["warnings"])

"""ShardedDistributeFilesDataset with the plan of corpora mixed by weight, each rank as the real RETURNN builds it: in
every (sub-epoch, rank) its sub-epoch dataset (a real HDFDataset through ``get_sub_epoch_dataset``) reads exactly the
sequences of the plan's files, a file read several times per full epoch included."""

import functools
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
pytest.importorskip("h5py", reason="needs h5py")

from returnn.datasets.basic import init_dataset  # noqa: E402

from i6_shard.core import PlanSettings, ShardPlan, save_plan  # noqa: E402
from i6_shard.core.pure.corpora import Corpora  # noqa: E402
from i6_shard.returnn_ext import ShardedDistributeFilesDataset  # noqa: E402

from ..hdf_data import file_index, hdf_sub_epoch_dataset, iterate_tags, write_tiny_hdf_files  # noqa: E402
from ..returnn_ranks import as_rank  # noqa: E402


@pytest.mark.parametrize("distribution, seq_ordering", [("balanced", "random"), ("returnn", "default")])
def test_every_rank_reads_the_plans_files_repeats_included(tmp_path, distribution, seq_ordering):
    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=22, seed=4, max_seqs=4)
    settings = PlanSettings(
        num_shards=2,
        partition_epoch=3,
        num_epochs=9,
        seq_ordering=seq_ordering,
        random_seed_offset=3,
        distribution=distribution,
    )
    corpora = Corpora.of(names=["A", "B"], sizes=[14, 8], weights=[1, 2.5])  # B: 20 reads per full epoch
    plan = ShardPlan(files, np.arange(1, 23) * 100, settings, corpora=corpora)
    plan_path = str(tmp_path / "plan.npz")
    save_plan(plan, plan_path)
    tags_of = {i: Counter() for i in range(len(files))}
    read_per_file = Counter()
    for rank in range(2):
        with as_rank(rank, 2, dataset_random_seed_offset=3):
            dataset = init_dataset(
                {
                    "class": ShardedDistributeFilesDataset,
                    "files": list(files),
                    "get_sub_epoch_dataset": functools.partial(hdf_sub_epoch_dataset, seq_ordering="random"),
                    "use_worker_proc": False,
                    "plan": plan_path,
                    "partition_epoch": 3,
                    "seq_ordering": seq_ordering,
                    "distrib_shard_files": True,
                    "sharding_fix": True,
                }
            )
            for epoch in range(1, 10):
                tags = iterate_tags(dataset, epoch)
                planned = plan.file_indices_for(epoch=epoch, shard_index=rank).tolist()
                assert sorted({file_index(t) for t in tags}) == sorted(planned)  # exactly the plan's files
                assert len(tags) == len(set(tags))  # no file twice in the sub-epoch
                for t in tags:
                    tags_of[file_index(t)][t] += 1
                read_per_file.update(planned)
            dataset.finish_epoch(free_resources=True)
    # over the 3 full epochs: every A file 3 times, B's 60 reads over its 8 files (7 or 8 each), and each read of a
    # file read all of its sequences once
    assert [read_per_file[i] for i in range(14)] == [3] * 14
    assert sum(read_per_file[i] for i in range(14, 22)) == 60
    assert {read_per_file[i] for i in range(14, 22)} <= {7, 8}
    for i, counts in tags_of.items():
        assert set(counts.values()) == {read_per_file[i]}, i

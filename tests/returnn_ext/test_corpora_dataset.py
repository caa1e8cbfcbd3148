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


def test_the_builders_dict_of_several_file_lists_reads_the_plan(tmp_path):
    from i6_shard.core import write_file_list
    from i6_shard.returnn_config import sharded_files_dataset
    from i6_shard.returnn_config.pycode import resolve_refs

    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=16, seed=6, max_seqs=3)
    lists = [str(tmp_path / "A.txt"), files[10:]]  # a list file and an inline list
    write_file_list(files[:10], lists[0])
    settings = PlanSettings(num_shards=2, partition_epoch=3, num_epochs=6, distribution="balanced")
    plan = ShardPlan(files, np.full(16, 100), settings, corpora=Corpora.of(names="AB", sizes=[10, 6], weights=[1, 2]))
    save_plan(plan, str(tmp_path / "plan.npz"))
    d = sharded_files_dataset(
        lists,
        weights=[1, 2],
        plan=str(tmp_path / "plan.npz"),
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=3,
        use_worker_proc=False,
    )
    assert isinstance(d["files"], functools.partial) and d["files"]() == files  # the corpora one after the other
    for rank in range(2):
        with as_rank(rank, 2):
            dataset = init_dataset(resolve_refs(d))  # as the written config imports the class
            for epoch in range(1, 7):
                tags = iterate_tags(dataset, epoch)
                assert sorted({file_index(t) for t in tags}) == sorted(
                    plan.file_indices_for(epoch=epoch, shard_index=rank)
                )
            dataset.finish_epoch(free_resources=True)
    inline = sharded_files_dataset(
        [files[:10], files[10:]],
        weights=[1, 2],
        plan=str(tmp_path / "plan.npz"),
        partition_epoch=3,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
    )
    assert inline["files"] == files
    with pytest.raises(ValueError, match="weights mix corpora by a plan, which the dataset reads: give plan="):
        sharded_files_dataset(
            lists,
            weights=[1, 2],
            partition_epoch=3,
            sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        )
    with pytest.raises(ValueError, match=r"so files must be a list of 2 file lists"):
        sharded_files_dataset(
            files,
            weights=[1, 2],
            plan=str(tmp_path / "plan.npz"),
            partition_epoch=3,
            sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        )

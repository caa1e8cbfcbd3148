"""The verifier reads the data the way each engine mode does, in real RETURNN subprocesses: DataLoader workers
that shard (torch_dataloader_shard_workers=True, or behavior_version 37 with one worker), a MultiProcDataset as the
sub-epoch dataset (each sharding_method); its verdict is right on each. Behavior_version 37 with 2 workers and a
MultiEpochDataset around the DistributeFilesDataset are verified on real trainings of those configs, where the
training's own logs show what was read (tests/training/test_engine_modes_live.py: no false alarm on the correct
one, the MultiEpochDataset's loss caught, the same checks of what the runner read as here)."""

import pytest

from tests.deps import needs_torch

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from i6_shard.core.reporting import verify_records  # noqa: E402

from .test_verify import _config_file, _record, hdf_files  # noqa: E402,F401

TORCH = "backend = 'torch'\ntorch_distributed = {}\n"
WORKERS = "torch_dataloader_opts = {'num_workers': 2}\n"


def _verify(tmp_path, name: str, config: str, *, epochs):
    """A 2-rank torch training with ``config``, recorded over ``epochs`` and verified: (ranks, violations, report)."""
    needs_torch("the torch engine's DataLoader needs torch")
    ranks, ref = _record(tmp_path, _config_file(tmp_path, name, TORCH + config), num_shards=2, epochs=epochs)
    return (ranks, *verify_records(ranks, ref, num_shards=2))


@pytest.mark.slow  # RETURNN subprocesses through torch's DataLoader with 2 workers: several seconds each
@pytest.mark.parametrize(
    "extra, num_shards",
    [
        ("behavior_version = 31\ntorch_dataloader_shard_workers = True\n" + WORKERS, 4),
        ("behavior_version = 37\ntorch_dataloader_opts = {'num_workers': 1}\n", 2),
    ],
)
def test_dataloader_workers_that_shard_are_read_as_the_engine_reads_them(tmp_path, hdf_files, extra, num_shards):  # noqa: F811
    config = extra + f"train = dfd({hdf_files!r}, distrib_shard_files=True)\n"
    ranks, violations, report = _verify(tmp_path, "w.config", config, epochs=[1, 2, 3])
    assert violations == [], report
    instances = [inst for r in ranks for se in r["sub_epochs"] for inst in se["instances"]]
    assert {inst["num_shards"] for inst in instances} == {num_shards}
    assert sorted({inst["shard_index"] for inst in instances}) == list(range(num_shards))


@pytest.mark.slow
def test_each_dataloader_worker_reads_its_own_share_with_sub_epoch_datasets_in_its_process(tmp_path, hdf_files):  # noqa: F811
    """Behavior_version 37, 2 DataLoader workers, RETURNN's default ``use_worker_proc=True``: each worker reads the
    sub-epoch datasets in its own process (not a process per sub-epoch), and reads its share only: worker w of rank r
    is shard ``2 * r + w`` of 4, the two workers' files are disjoint and each file of a full epoch is read once, by one
    worker, which delivers the sequences of its files only. Each worker reading all of its rank's files fails here."""
    from tests.hdf_data import file_index

    config = "behavior_version = 37\n" + WORKERS
    config += f"train = dfd({hdf_files!r}, distrib_shard_files=True, use_worker_proc=True)\n"
    ranks, violations, report = _verify(tmp_path, "w.config", config, epochs=[1, 2])
    assert violations == [], report
    read = []
    for rec in ranks:
        for se in rec["sub_epochs"]:
            instances = se["instances"]
            assert [(i["worker"], i["num_shards"], i["shard_index"]) for i in instances] == [
                (w, 4, 2 * rec["rank"] + w) for w in range(2)
            ]
            assert all(i["sub_epochs_in_process"] for i in instances)
            for inst in instances:
                assert inst["files"] and {file_index(t) for t in inst["seq_tags"]} <= {
                    hdf_files.index(f) for f in inst["files"]
                }
            read += [f for i in instances for f in i["files"]]
    assert sorted(read) == sorted(hdf_files)  # one full epoch: every file once, by one worker of one rank


@pytest.mark.slow
def test_dataloader_workers_that_do_not_shard_read_everything_twice(tmp_path, hdf_files):  # noqa: F811
    config = "behavior_version = 31\n" + WORKERS + f"train = dfd({hdf_files!r}, distrib_shard_files=True)\n"
    _, violations, report = _verify(tmp_path, "w.config", config, epochs=[1, 2])
    assert violations, report


@pytest.mark.slow
@pytest.mark.parametrize("sharding_method", ["seq_order", "dedicated"])
def test_a_multi_proc_sub_epoch_dataset_is_read_through_its_workers(tmp_path, hdf_files, sharding_method):  # noqa: F811
    """One full epoch in one sub-epoch (partition_epoch 1): each sub-epoch dataset starts its worker processes, so
    one sub-epoch per rank (and the one the DistributeFilesDataset loads ahead) is all the check needs. 4 of the
    files, 2 per rank: every rank's sub-epoch dataset starts its 2 worker processes, so each file more shows nothing
    more."""
    config = (
        "behavior_version = 37\nfrom tests.hdf_data import multi_proc_sub_epoch_dataset\n"
        + f"train = dfd({hdf_files[:4]!r}, distrib_shard_files=True, partition_epoch=1, get_sub_epoch_dataset="
        + f"functools.partial(multi_proc_sub_epoch_dataset, sharding_method={sharding_method!r}))\n"
    )
    ranks, violations, report = _verify(tmp_path, "mpd.config", config, epochs=[1])
    assert violations == [], report
    assert "full epoch 0: " in report and "partly read" not in report, report
    assert [len(r["sub_epochs"][0]["seq_tags"]) > 0 for r in ranks] == [True, True]


@pytest.mark.slow
def test_the_reference_reads_a_multi_proc_sub_epoch_dataset_without_its_workers(hdf_files, monkeypatch):  # noqa: F811
    """The reference (each file's sequences) reads the dataset inside a MultiProcDataset in this process: a worker
    start per file would cost a large setup two process starts per file (the DistributeFilesDataset starts the workers
    of one sub-epoch dataset itself, to learn its data keys). Its tags are those of the HDF files."""
    import functools

    from returnn.config import Config
    from returnn.datasets.multi_proc import MultiProcDataset

    from i6_shard.returnn_ext.verify import record_reference
    from tests.hdf_data import file_index, multi_proc_sub_epoch_dataset

    starts = []
    lazy_init = MultiProcDataset._lazy_init

    def counted(self):
        starts.append(not self._worker_procs)
        return lazy_init(self)

    monkeypatch.setattr(MultiProcDataset, "_lazy_init", counted)
    files = hdf_files[:3]
    dataset = {
        "class": "DistributeFilesDataset",
        "files": files,
        "partition_epoch": 1,
        "distrib_shard_files": True,
        "get_sub_epoch_dataset": functools.partial(multi_proc_sub_epoch_dataset, sharding_method="dedicated"),
    }
    ref = record_reference(dataset, Config())
    assert sum(starts) == 1  # the DistributeFilesDataset's own look at its data keys (_lazy_init_num_outputs)
    assert ref["files"] == files
    assert [sorted({file_index(t) for t in tags}) for tags in ref["file_tags"]] == [[0], [1], [2]]
    assert all(len(tags) == len(set(tags)) > 0 for tags in ref["file_tags"])

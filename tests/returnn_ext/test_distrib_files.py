"""ShardedDistributeFilesDataset with the real RETURNN, rank by rank via
``__debug_dummy_distributed_rank_and_size``: it reads what ShardPlan plans, every sequence
once per full epoch, and never stats a file when sizes are given."""

import os
import pickle
from typing import Any, Dict, List

import numpy as np
import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from returnn.config import Config, global_config_ctx  # noqa: E402
from returnn.datasets.basic import init_dataset  # noqa: E402
from returnn.datasets.distrib_files import DistributeFilesDataset  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.returnn_ext import ShardedDistributeFilesDataset  # noqa: E402
from i6_shard.returnn_ext.distrib_files import check_returnn_hooks  # noqa: E402

from ..hdf_data import seq_tag, write_tiny_hdf_files  # noqa: E402

NUM_SHARDS = 3
PARTITION_EPOCH = 2
NUM_FILES = 20


def get_sub_epoch_dataset(files_subepoch: List[str]) -> Dict[str, Any]:
    return {"class": "HDFDataset", "files": files_subepoch, "seq_ordering": "default"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """HDF files of skewed sizes (1 to 40 seqs of 30 frames), their tags and a sizes archive."""
    directory = tmp_path_factory.mktemp("hdf")
    rng = np.random.RandomState(0)
    num_seqs = [int(min(40, max(1, rng.lognormal(np.log(6), 1.0)))) for _ in range(NUM_FILES)]
    files = write_tiny_hdf_files(
        str(directory),
        num_files=NUM_FILES,
        seqs_per_file=num_seqs,
        frames=(30, 30),
        dim=8,
        names=[f"part-{i:02d}.hdf" for i in range(NUM_FILES)],
    )
    tags = {path: [seq_tag(i, j) for j in range(n)] for i, (path, n) in enumerate(zip(files, num_seqs))}
    sizes = core.collect_file_sizes(files, num_threads=1)
    sizes_path = str(directory / "file_sizes.npz")
    core.save_file_sizes(sizes, sizes_path)
    return {"files": files, "tags": tags, "sizes": sizes, "sizes_path": sizes_path}


@pytest.fixture
def no_stat(monkeypatch):
    """Every os.path.getsize call fails the test (RETURNN stats through it)."""
    calls = []

    def trap(path):
        calls.append(path)
        raise AssertionError(f"os.path.getsize({path!r}) was called although file sizes were given")

    monkeypatch.setattr(os.path, "getsize", trap)
    return calls


def make_dataset(corpus, rank, **opts):
    with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})):
        return init_dataset(
            {
                "class": ShardedDistributeFilesDataset,
                "files": corpus["files"],
                "get_sub_epoch_dataset": get_sub_epoch_dataset,
                "partition_epoch": PARTITION_EPOCH,
                "seq_ordering": "random",
                "distrib_shard_files": True,
                "sharding_fix": True,
                "use_worker_proc": False,
                **opts,
            }
        )


def read_sub_epoch(dataset, epoch):
    """(files of the sub-epoch, tags of every sequence read) for one sub-epoch."""
    dataset.init_seq_order(epoch=epoch)
    files = list(dataset._workers[epoch].dataset_dict["files"])
    tags, seq_idx = [], 0
    while dataset.is_less_than_num_seqs(seq_idx):
        dataset.load_seqs(seq_idx, seq_idx + 1)
        tags.append(dataset.get_tag(seq_idx))
        seq_idx += 1
    return files, tags


def plan_for(corpus, distribution):
    return core.ShardPlan(
        corpus["sizes"].keys,
        corpus["sizes"].sizes,
        core.PlanSettings(num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, distribution=distribution),
    )


def test_balanced_reads_the_plan_and_every_seq_once_per_full_epoch(corpus, no_stat):
    plan = plan_for(corpus, "balanced")
    num_epochs = 2 * PARTITION_EPOCH  # two full epochs
    tags_read = {full: [] for full in range(2)}
    for rank in range(NUM_SHARDS):
        dataset = make_dataset(corpus, rank, distribution="balanced", file_sizes=corpus["sizes_path"])
        assert (dataset._shard_index, dataset._num_shards) == (rank, NUM_SHARDS)
        for epoch in range(1, num_epochs + 1):
            files, tags = read_sub_epoch(dataset, epoch)
            assert files == plan.files_for(epoch=epoch, shard_index=rank), (rank, epoch)
            assert tags == [t for f in files for t in corpus["tags"][f]]  # sub-dataset does not shard again
            tags_read[(epoch - 1) // PARTITION_EPOCH].extend(tags)
        dataset.finish_epoch(free_resources=True)
    all_tags = sorted(t for file_tags in corpus["tags"].values() for t in file_tags)
    for full_epoch_0idx, tags in tags_read.items():
        assert sorted(tags) == all_tags, f"full epoch {full_epoch_0idx}: a sequence was read twice or never"
    assert no_stat == []


def test_balanced_differs_from_returnn_and_is_more_even(corpus):
    # Not vacuous: on these sizes the two distributions give other bins, and balanced drops less.
    balanced, returnn = plan_for(corpus, "balanced"), plan_for(corpus, "returnn")
    assert any(
        balanced.files_for(epoch=e, shard_index=r) != returnn.files_for(epoch=e, shard_index=r)
        for e in (1, 2)
        for r in range(NUM_SHARDS)
    )
    sizes = dict(zip(corpus["sizes"].keys, corpus["sizes"].sizes.tolist()))

    def worst_min_over_mean(plan):
        loads = np.array(
            [
                [sum(sizes[f] for f in plan.files_for(epoch=e, shard_index=r)) for r in range(NUM_SHARDS)]
                for e in range(1, 2 * PARTITION_EPOCH + 1)
            ]
        )
        return float((loads.min(axis=1) / loads.mean(axis=1)).min())

    assert worst_min_over_mean(balanced) > worst_min_over_mean(returnn)


def test_returnn_distribution_with_sizes_is_returnns_own_plan(corpus):
    plan = plan_for(corpus, "returnn")
    for rank in range(NUM_SHARDS):
        plain = make_dataset(corpus, rank, **{"class": DistributeFilesDataset})  # stats every file
        ours = make_dataset(corpus, rank, distribution="returnn", file_sizes=corpus["sizes_path"])
        assert type(plain) is DistributeFilesDataset
        for epoch in range(1, 2 * PARTITION_EPOCH + 1):
            plain.init_seq_order(epoch=epoch)
            ours.init_seq_order(epoch=epoch)
            expected = plain._workers[epoch].dataset_dict["files"]
            assert ours._workers[epoch].dataset_dict["files"] == expected
            assert expected == plan.files_for(epoch=epoch, shard_index=rank)
        assert ours._file_sizes == plain._file_sizes
        plain.finish_epoch(free_resources=True)
        ours.finish_epoch(free_resources=True)


def test_pickled_dataset_keeps_distribution_and_sizes_path(corpus, no_stat):
    plan = plan_for(corpus, "balanced")
    dataset = make_dataset(corpus, 1, distribution="balanced", file_sizes=corpus["sizes_path"])
    # Before the sizes are loaded (Dataset.__reduce__ takes kwargs from attributes; "file_sizes"
    # must come back as the path, not as DistributeFilesDataset._file_sizes) ...
    fresh = pickle.loads(pickle.dumps(dataset))
    assert (fresh.distribution, fresh.file_sizes_path, fresh._shard_index) == ("balanced", corpus["sizes_path"], 1)
    assert read_sub_epoch(fresh, 2)[0] == plan.files_for(epoch=2, shard_index=1)
    # ... and after: the loaded sizes travel along in RETURNN's _meta_info_cache.
    again = pickle.loads(pickle.dumps(fresh))
    assert again.file_sizes_path == corpus["sizes_path"] and again._file_sizes == fresh._file_sizes
    assert read_sub_epoch(again, 3)[0] == plan.files_for(epoch=3, shard_index=1)
    for ds in (dataset, fresh, again):
        ds.finish_epoch(free_resources=True)
    assert no_stat == []


def test_without_sizes_returnn_stats_every_file(corpus, no_stat):
    # The trap above does catch RETURNN's own stat calls.
    dataset = make_dataset(corpus, 0, distribution="balanced")
    with pytest.raises(AssertionError, match="getsize"):
        dataset.init_seq_order(epoch=1)
    assert no_stat == [corpus["files"][0]]


def _read_in_child(payload: bytes, epoch: int) -> List[str]:
    """In a spawned process (as MultiProcDataset or DataLoader workers do): unpickle, read one sub-epoch."""

    def trap(path):
        raise AssertionError(f"os.path.getsize({path!r}) in the child")

    os.path.getsize = trap
    dataset = pickle.loads(payload)
    try:
        return read_sub_epoch(dataset, epoch)[0]
    finally:
        dataset.finish_epoch(free_resources=True)


def test_unpickled_in_a_spawned_process(corpus):
    import multiprocessing

    plan = plan_for(corpus, "balanced")
    dataset = make_dataset(corpus, 1, distribution="balanced", file_sizes=corpus["sizes_path"])
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        files = pool.apply(_read_in_child, (pickle.dumps(dataset), 4))
    assert files == plan.files_for(epoch=4, shard_index=1)


@pytest.mark.slow
def test_worker_processes(corpus, no_stat):
    from returnn.datasets.distrib_files import _WorkerProcParent

    plan = plan_for(corpus, "balanced")
    dataset = make_dataset(
        corpus,
        2,
        distribution="balanced",
        file_sizes=corpus["sizes_path"],
        use_worker_proc=True,
        preload_next_n_sub_epochs=0,
    )
    try:
        for epoch in (1, 2):
            files, tags = read_sub_epoch(dataset, epoch)
            assert isinstance(dataset._workers[epoch], _WorkerProcParent)
            assert files == plan.files_for(epoch=epoch, shard_index=2)
            assert tags == [t for f in files for t in corpus["tags"][f]]
    finally:
        dataset.finish_epoch(free_resources=True)
    assert no_stat == []


def test_sizes_must_match_the_file_list(corpus, tmp_path):
    keys, sizes = corpus["sizes"].keys, corpus["sizes"].sizes
    cases = {
        "missing": (keys[:-2], sizes[:-2], r"no size for 2 of the 20 files \(first 2: \[.*part-18\.hdf.*part-19\.hdf"),
        "extra": (
            keys + ["/elsewhere/x.hdf"],
            np.append(sizes, 5),
            r"21 entries, 1 of them not in the 20 files .*'/elsewhere/x\.hdf'",
        ),
        "order": (keys[::-1], sizes[::-1], r"another order .* first difference at entry 0: '.*part-19\.hdf' there"),
    }
    for name, (case_keys, case_sizes, message) in cases.items():
        path = str(tmp_path / f"{name}.npz")
        core.save_file_sizes(core.FileSizes(keys=list(case_keys), sizes=np.asarray(case_sizes)), path)
        dataset = make_dataset(corpus, 0, distribution="balanced", file_sizes=path)
        with pytest.raises(ValueError, match=message):
            dataset.init_seq_order(epoch=1)
    with pytest.raises(FileNotFoundError, match="do not exist"):
        make_dataset(corpus, 0, file_sizes=str(tmp_path / "nope.npz")).init_seq_order(epoch=1)


def test_bad_options_are_clear_errors(corpus):
    with pytest.raises(
        ValueError,
        match=r"distribution='lpt' is unknown; use one of \('returnn', 'balanced', 'equal_steps'\)$",
    ):
        make_dataset(corpus, 0, distribution="lpt")
    with pytest.raises(TypeError, match="must be the path"):
        make_dataset(corpus, 0, file_sizes={"a": 1})


def test_import_fails_loudly_without_the_hooks(monkeypatch):
    check_returnn_hooks()  # the installed RETURNN has them

    def changed(*, num_bins, files_order):  # e.g. a RETURNN that renamed an argument
        raise NotImplementedError

    monkeypatch.setattr(DistributeFilesDataset, "_distribute_evenly_by_size", staticmethod(changed))
    monkeypatch.delattr(DistributeFilesDataset, "_lazy_init_file_sizes")
    with pytest.raises(
        ImportError,
        match=r"cannot extend RETURNN .*expected \(\*, num_bins, file_sizes, "
        r"files_order\).*_lazy_init_file_sizes\(self\) is missing",
    ):
        check_returnn_hooks()

"""ShardedDistributeFilesDataset with precomputed file sizes stats a small random sample of the
files again when it loads the sizes, in the real RETURNN, and fails naming the files that were
resized or replaced since; k stats per rank, whatever the length of the list."""

import os
import pickle

import numpy as np
import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from returnn.config import Config, global_config_ctx  # noqa: E402
from returnn.datasets.basic import init_dataset  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.core.io.stale_sizes import StaleFileSizesError  # noqa: E402
from i6_shard.returnn_ext import ShardedDistributeFilesDataset  # noqa: E402

from ..hdf_data import hdf_sub_epoch_dataset, write_tiny_hdf_files  # noqa: E402

NUM_SHARDS = 2
NUM_FILES = 12


@pytest.fixture
def corpus(tmp_path):
    files = write_tiny_hdf_files(str(tmp_path), num_files=NUM_FILES)
    sizes_path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.collect_file_sizes(files, num_threads=1, num_procs=1), sizes_path)
    return files, sizes_path


def make_dataset(files, rank, **opts):
    with global_config_ctx(Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})):
        return init_dataset(
            {
                "class": ShardedDistributeFilesDataset,
                "files": files,
                "get_sub_epoch_dataset": hdf_sub_epoch_dataset,
                "partition_epoch": 2,
                "distrib_shard_files": True,
                "sharding_fix": True,
                "use_worker_proc": False,
                **opts,
            }
        )


def test_a_file_resized_after_its_size_was_computed_stops_the_training_naming_it(corpus):
    files, sizes_path = corpus
    with open(files[5], "ab") as f:
        f.write(b"\0" * 100)
    dataset = make_dataset(files, 0, distribution="balanced", file_sizes=sizes_path, file_sizes_check_samples=NUM_FILES)
    with pytest.raises(StaleFileSizesError) as info:
        dataset.init_seq_order(epoch=1)
    msg = str(info.value)
    assert msg.startswith(f"file_sizes {sizes_path!r} is stale: 1 of {NUM_FILES} sampled entries changed")
    assert f"entry 5 {files[5]!r}: " in msg and "bytes then" in msg and "compute the sizes again" in msg
    assert info.value.changed[0][0] == 5


def test_a_file_replaced_by_one_of_equal_size_is_seen_by_its_modification_time(corpus):
    files, sizes_path = corpus
    st = os.stat(files[3])
    with open(files[3], "r+b") as f:
        f.write(b"X")  # same size, new contents
    os.utime(files[3], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    dataset = make_dataset(files, 1, file_sizes=sizes_path, file_sizes_check_samples=NUM_FILES)
    with pytest.raises(StaleFileSizesError, match=rf"entry 3 {files[3]!r}: modified .* then, .* now"):
        dataset.init_seq_order(epoch=1)


def test_each_rank_stats_k_files_once_and_unchanged_files_pass(corpus, monkeypatch):
    files, sizes_path = corpus
    stat_calls = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        if os.fspath(path) in files:
            stat_calls.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)

    sampled = {}
    for rank in range(NUM_SHARDS):
        dataset = make_dataset(files, rank, distribution="balanced", file_sizes=sizes_path, file_sizes_check_samples=3)
        monkeypatch.setattr(os, "stat", counting_stat)
        dataset._lazy_init_file_sizes()
        monkeypatch.setattr(os, "stat", real_stat)
        sampled[rank], stat_calls[:] = list(stat_calls), []
        assert len(sampled[rank]) == 3 and len(set(sampled[rank])) == 3
        dataset.init_seq_order(epoch=1)  # the sizes are loaded: no second check
        assert stat_calls == []
        dataset.finish_epoch(free_resources=True)
    assert sampled[0] != sampled[1], "the ranks check the same files"


def test_no_check_with_zero_samples_and_the_option_survives_pickling(corpus):
    files, sizes_path = corpus
    with open(files[0], "ab") as f:
        f.write(b"\0")
    dataset = make_dataset(files, 0, file_sizes=sizes_path, file_sizes_check_samples=0)
    fresh = pickle.loads(pickle.dumps(dataset))
    assert fresh.file_sizes_check_samples == 0
    fresh.init_seq_order(epoch=1)  # the stale size is used as asked
    assert fresh._file_sizes[files[0]] == os.path.getsize(files[0]) - 1
    checked = pickle.loads(
        pickle.dumps(make_dataset(files, 0, file_sizes=sizes_path, file_sizes_check_samples=NUM_FILES))
    )
    assert checked.file_sizes_check_samples == NUM_FILES
    with pytest.raises(StaleFileSizesError):
        checked.init_seq_order(epoch=1)


@pytest.mark.parametrize("value", [-1, 1.5, True, "16"])
def test_bad_sample_counts_are_refused_naming_the_option(corpus, value):
    files, sizes_path = corpus
    with pytest.raises(ValueError, match=r"file_sizes_check_samples=.* must be an int >= 0"):
        make_dataset(files, 0, file_sizes=sizes_path, file_sizes_check_samples=value)


def test_keys_missing_from_the_archive_are_shown_cut(corpus, tmp_path):
    files, _ = corpus
    huge = "/data/" + "n" * 10_000_000
    path = str(tmp_path / "other.npz")
    core.save_file_sizes(core.FileSizes(keys=[huge] * 3, sizes=np.array([1, 2, 3])), path)
    with pytest.raises(ValueError, match=r"has no size for 12 of the 12 files") as info:
        make_dataset(files, 0, file_sizes=path).init_seq_order(epoch=1)
    assert len(str(info.value)) < 3000
    path = str(tmp_path / "extra.npz")
    sizes = core.collect_file_sizes(files, num_threads=1, num_procs=1)
    core.save_file_sizes(core.FileSizes(keys=sizes.keys + [huge], sizes=np.append(sizes.sizes, 1)), path)
    with pytest.raises(ValueError, match=r"1 of them not in the 12 files .*chars\]") as info:
        make_dataset(files, 0, file_sizes=path).init_seq_order(epoch=1)
    assert len(str(info.value)) < 3000

"""sharded_files_dataset: the exact dict, accepted by RETURNN in-process, and every build-time check."""

import os
import pathlib

import pytest

from i6_shard.core import write_file_list
from i6_shard.returnn_config import ConfigCheckError, sharded_files_dataset
from i6_shard.returnn_config.sub_epoch import GET_SUB_EPOCH_DATASET
from i6_shard.returnn_config.dataset import SHARDED_DFD_CLASS
from i6_shard.returnn_config.pycode import resolve_refs

from ..hdf_data import iterate_tags, write_tiny_hdf_files
from tests.deps import RETURNN_REASON

HDF = {"class": "HDFDataset", "seq_ordering": "random"}


class FakeSisPath:
    """Duck-typed Sisyphus path (get_path + _sis_hash), so the plain path needs no sisyphus."""

    def __init__(self, path):
        self.path = path

    def get_path(self):
        return self.path

    def _sis_hash(self):
        return repr(("FakeSisPath", self.path)).encode()


def test_simplest_call_exact_dict():
    d = sharded_files_dataset(["a.hdf", "b.hdf", "c.hdf"], sub_epoch_dataset=HDF, partition_epoch=3)
    partial = d.pop("get_sub_epoch_dataset")
    assert d == {
        "class": "DistributeFilesDataset",
        "files": ["a.hdf", "b.hdf", "c.hdf"],
        "partition_epoch": 3,
        "seq_ordering": "random",
        "distrib_shard_files": True,
        "sharding_fix": True,
    }
    assert partial.func == GET_SUB_EPOCH_DATASET
    assert partial.keywords == {"template": HDF, "files_key": ("files",), "cached_file": False}


def test_simplest_call_runs_in_returnn_in_process(tmp_path):
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    files = write_tiny_hdf_files(str(tmp_path), num_files=4)
    d = sharded_files_dataset(
        files, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}, partition_epoch=2
    )
    # As it is: no extra keys, one rank (no distributed config at all).
    with global_config_ctx(Config()):
        dataset = init_dataset(d)
        tags = iterate_tags(dataset, 1) + iterate_tags(dataset, 2)
    all_tags = set()
    with global_config_ctx(Config()):
        for f in files:
            hdf = init_dataset({"class": "HDFDataset", "files": [f]})
            all_tags |= set(iterate_tags(hdf, 1))
    assert len(all_tags) > 4 and sorted(tags) == sorted(all_tags)  # one full epoch: every seq exactly once


def test_optional_keys_only_when_not_default():
    d = sharded_files_dataset(["a", "b"], sub_epoch_dataset=HDF, partition_epoch=1, buffer_size=1, use_worker_proc=True)
    assert "buffer_size" not in d and "use_worker_proc" not in d and "preload_next_n_sub_epochs" not in d
    d = sharded_files_dataset(
        ["a", "b"],
        sub_epoch_dataset=HDF,
        partition_epoch=1,
        buffer_size=20,
        use_worker_proc=False,
        preload_next_n_sub_epochs=2,
        seq_ordering="default",
        distrib_shard_files=False,
        extra_opts={"name": "train"},
    )
    assert d["buffer_size"] == 20 and d["use_worker_proc"] is False and d["preload_next_n_sub_epochs"] == 2
    assert "seq_ordering" not in d and "distrib_shard_files" not in d and d["name"] == "train"
    assert d["sharding_fix"] is True


@pytest.mark.parametrize("use_worker_proc", [None, True, False])
@pytest.mark.parametrize("preload", [None, 0, 1, 2])
def test_preload_only_when_it_differs_from_returnns_effective_default(use_worker_proc, preload):
    """RETURNN's default for preload_next_n_sub_epochs depends on use_worker_proc: 1 with, 0 without."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.distrib_files import DistributeFilesDataset

    d = sharded_files_dataset(
        ["a", "b"],
        sub_epoch_dataset=HDF,
        partition_epoch=1,
        use_worker_proc=use_worker_proc,
        preload_next_n_sub_epochs=preload,
    )
    opts = {k: v for k, v in d.items() if k != "class"}
    with global_config_ctx(Config()):  # the constructor only; no file is opened
        default = DistributeFilesDataset(**{k: v for k, v in opts.items() if k != "preload_next_n_sub_epochs"})
        built = DistributeFilesDataset(**opts)
    assert built.preload_next_n_sub_epochs == (default.preload_next_n_sub_epochs if preload is None else preload)
    assert ("preload_next_n_sub_epochs" in d) == (built.preload_next_n_sub_epochs != default.preload_next_n_sub_epochs)


def test_file_list_paths(tmp_path):
    path = tmp_path / "files.json"
    write_file_list(["a", "b"], path)
    assert sharded_files_dataset(str(path), sub_epoch_dataset=HDF, partition_epoch=2)["files"] == str(path)
    assert sharded_files_dataset(pathlib.Path(path), sub_epoch_dataset=HDF, partition_epoch=2)["files"] == str(path)
    sis_path = FakeSisPath("/work/job/output/files.txt")
    assert sharded_files_dataset(sis_path, sub_epoch_dataset=HDF, partition_epoch=2)["files"] is sis_path
    with pytest.raises(ValueError, match=r"extension '\.npz'; RETURNN reads only \.txt, \.json, \.py"):
        sharded_files_dataset("sizes.npz", sub_epoch_dataset=HDF, partition_epoch=2)
    with pytest.raises(TypeError, match=r"files has type int \(42\); give a list of file trees"):
        sharded_files_dataset(42, sub_epoch_dataset=HDF, partition_epoch=2)
    with pytest.raises(TypeError, match=r"files has type set .*; give a list of file trees \(inline\) or the path"):
        sharded_files_dataset({"a", "b"}, sub_epoch_dataset=HDF, partition_epoch=1)
    with pytest.raises(TypeError, match=r"file_sizes=3 must be a path"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, file_sizes=3)


def test_inline_sisyphus_paths_stay_for_hashing():
    p = FakeSisPath("/work/x/output/a.hdf")
    d = sharded_files_dataset([p, "b.hdf"], sub_epoch_dataset=HDF, partition_epoch=2)
    assert d["files"][0] is p


def test_too_few_files_when_count_known():
    with pytest.raises(
        ValueError,
        match=r"5 files cannot fill num_shards\*partition_epoch=2\*3=6 bins.*"
        r"Lower partition_epoch to at most 2",
    ):
        sharded_files_dataset([f"{i}.hdf" for i in range(5)], sub_epoch_dataset=HDF, partition_epoch=3, num_shards=2)
    with pytest.raises(ValueError, match="cannot fill"):
        sharded_files_dataset("big.txt", sub_epoch_dataset=HDF, partition_epoch=3, num_shards=8, num_files=20)
    with pytest.raises(ValueError, match="cannot fill"):  # even without num_shards: P bins on one rank
        sharded_files_dataset(["a", "b"], sub_epoch_dataset=HDF, partition_epoch=3)
    # Unsharded: each rank only needs P files.
    sharded_files_dataset(
        [f"{i}" for i in range(3)], sub_epoch_dataset=HDF, partition_epoch=3, num_shards=8, distrib_shard_files=False
    )


def test_sub_dataset_partition_epoch_and_seq_ordering():
    with pytest.raises(ConfigCheckError, match=r"partition_epoch=4 at datasets\.a\.partition_epoch.*remove it"):
        sharded_files_dataset(
            ["a", "b"],
            partition_epoch=1,
            sub_epoch_dataset={
                "class": "MetaDataset",
                "seq_order_control_dataset": "a",
                "datasets": {"a": {"class": "HDFDataset", "partition_epoch": 4}},
            },
        )
    with pytest.raises(ConfigCheckError, match=r"no explicit seq_ordering.*add e\.g\. \"seq_ordering\": \"random\""):
        sharded_files_dataset(["a"], sub_epoch_dataset={"class": "HDFDataset"}, partition_epoch=1)
    for ok in (
        {"class": "PostprocessingDataset", "dataset": {"class": "HDFDataset"}, "map_seq_stream": "f"},
        {"class": "HDFDataset", "seq_ordering": "default", "partition_epoch": 1},
    ):
        sharded_files_dataset(
            ["a"],
            sub_epoch_dataset=ok,
            partition_epoch=1,
            files_key=("dataset", "files") if "dataset" in ok else "files",
        )


def test_multi_modality_trees_checked():
    meta = {
        "class": "MetaDataset",
        "seq_order_control_dataset": "a",
        "datasets": {"a": {"class": "HDFDataset"}, "f": {"class": "HDFDataset"}},
    }
    key = {0: ("datasets", "a", "files"), 1: ("datasets", "f", "files")}
    d = sharded_files_dataset([("a1", "f1"), ("a2", "f2")], sub_epoch_dataset=meta, files_key=key, partition_epoch=2)
    assert d["get_sub_epoch_dataset"](d["files"][:1])["datasets"]["f"]["files"] == ["f1"]
    with pytest.raises(ValueError, match=r"entry 1 .* has parts \[0\], but files_key places \[0, 1\]"):
        sharded_files_dataset([("a1", "f1"), ("a2",)], sub_epoch_dataset=meta, files_key=key, partition_epoch=1)
    with pytest.raises(ValueError, match="give one placement per modality"):
        sharded_files_dataset([("a1", "f1")], sub_epoch_dataset=HDF, partition_epoch=1)


def test_argument_errors():
    with pytest.raises(ValueError, match="exceed max_inline_files=3.*write_file_list"):
        sharded_files_dataset(list("abcd"), sub_epoch_dataset=HDF, partition_epoch=1, max_inline_files=3)
    with pytest.raises(ValueError, match="partition_epoch=0 must be a positive int"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=0)
    with pytest.raises(ValueError, match="distribution='even' is unknown"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, distribution="even")
    with pytest.raises(ValueError, match="seq_ordering='sorted' is not supported"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, seq_ordering="sorted")
    with pytest.raises(ValueError, match=r"extra_opts\['sharding_fix'\] is set by sharded_files_dataset"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, extra_opts={"sharding_fix": False})
    with pytest.raises(ConfigCheckError, match="random_seed_offset=3 is fixed"):
        sharded_files_dataset(
            ["a", "b"],
            sub_epoch_dataset=HDF,
            partition_epoch=1,
            num_shards=2,
            distrib_shard_files=False,
            extra_opts={"random_seed_offset": 3},
        )
    with pytest.raises(TypeError, match="leaves must be str"):
        sharded_files_dataset(["a", None], sub_epoch_dataset=HDF, partition_epoch=1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_shards": 0}, ValueError, r"num_shards=0 must be a positive int \(number of training ranks"),
        ({"num_shards": -2}, ValueError, r"num_shards=-2 must be a positive int"),
        ({"num_shards": "2"}, TypeError, r"num_shards='2' has type str; .*; pass num_shards=2$"),
        ({"num_shards": 2.0}, TypeError, r"num_shards=2\.0 has type float"),
        ({"num_files": "x"}, TypeError, r"num_files='x' has type str; num_files must be a positive int"),
        ({"num_files": -1}, ValueError, r"num_files=-1 must be a positive int \(entries in the file list"),
        ({"num_files": 0}, ValueError, r"num_files=0 must be a positive int"),
        ({"buffer_size": "x"}, TypeError, r"buffer_size='x' has type str; buffer_size must be a positive int"),
        ({"buffer_size": -5}, ValueError, r"buffer_size=-5 must be a positive int \(sequences each DFD worker"),
        ({"buffer_size": 0}, ValueError, r"buffer_size=0 must be a positive int"),
        ({"preload_next_n_sub_epochs": -1}, ValueError, r"preload_next_n_sub_epochs=-1 must be a non-negative int"),
        ({"preload_next_n_sub_epochs": 1.5}, TypeError, r"preload_next_n_sub_epochs=1\.5 has type float"),
        ({"use_worker_proc": "no"}, TypeError, r"use_worker_proc='no' has type str; use_worker_proc must be True or"),
        ({"use_worker_proc": 0}, TypeError, r"use_worker_proc=0 has type int"),
        ({"cached_file": "yes"}, TypeError, r"cached_file='yes' has type str; cached_file must be True or False"),
        ({"distrib_shard_files": 1}, TypeError, r"distrib_shard_files=1 has type int"),
        ({"partition_epoch": "2"}, TypeError, r"partition_epoch='2' has type str; .*; pass partition_epoch=2$"),
        ({"partition_epoch": True}, TypeError, r"partition_epoch=True has type bool"),
        ({"max_inline_files": 0}, ValueError, r"max_inline_files=0 must be a positive int"),
        ({"max_inline_files": None}, TypeError, r"max_inline_files=None has type NoneType"),
        ({"extra_opts": [("name", "train")]}, TypeError, r"extra_opts=\[\('name', 'train'\)\] has type list; .*dict"),
        ({"extra_opts": {1: "x"}}, TypeError, r"extra_opts key 1 has type int; dataset options are named by str"),
        ({"distribution": ["balanced"]}, ValueError, r"distribution=\['balanced'\] is unknown"),
        ({"seq_ordering": 3}, ValueError, r"seq_ordering=3 is not supported"),  # None: the default, or the plan job's
    ],
)
@pytest.mark.parametrize("files", [["a", "b", "c", "d"], "files.txt"], ids=["inline", "file_list"])
def test_every_argument_is_checked_naming_the_value(files, kwargs, error, match):
    kwargs = {"sub_epoch_dataset": HDF, "partition_epoch": 1, **kwargs}  # inline: num_files checked before len()
    with pytest.raises(error, match=match):
        sharded_files_dataset(files, **kwargs)


def test_numpy_integers_become_python_ints():
    import numpy as np

    d = sharded_files_dataset(
        "files.txt",
        sub_epoch_dataset=HDF,
        partition_epoch=np.int64(2),
        num_shards=np.int32(2),
        num_files=np.int64(4),
        buffer_size=np.int64(3),
    )
    assert type(d["partition_epoch"]) is int and type(d["buffer_size"]) is int


def test_balanced_and_file_sizes_use_the_extension_class():
    ext = pytest.importorskip("i6_shard.returnn_ext.distrib_files", reason=RETURNN_REASON)
    d = sharded_files_dataset(["a", "b"], sub_epoch_dataset=HDF, partition_epoch=1, distribution="balanced")
    assert d["class"] == SHARDED_DFD_CLASS and d["distribution"] == "balanced"
    assert resolve_refs(d)["class"] is ext.ShardedDistributeFilesDataset
    assert "file_sizes" not in d
    d = sharded_files_dataset(
        ["a", "b"], sub_epoch_dataset=HDF, partition_epoch=1, file_sizes=pathlib.Path("/x/sizes.npz")
    )
    assert d["class"] == SHARDED_DFD_CLASS and d["file_sizes"] == os.fspath("/x/sizes.npz")
    assert "distribution" not in d


def _pairs_callable(directory):
    import functools

    from .config_ranks import file_pairs

    return functools.partial(file_pairs, feat_dir=str(directory / "feat"), align_dir=str(directory / "align"))


def test_callable_files_are_kept_not_called(tmp_path):
    from i6_shard.returnn_config.pycode import config_code

    from .config_ranks import META_FILES_KEY, meta_template

    pairs = _pairs_callable(tmp_path / "missing")  # the directories exist only when the training runs
    d = sharded_files_dataset(
        pairs, sub_epoch_dataset=meta_template(), files_key=META_FILES_KEY, partition_epoch=2, num_files=8, num_shards=2
    )
    assert d["files"] is pairs
    code = config_code({"train": d})
    assert "from tests.returnn_config.config_ranks import file_pairs as _i6_shard_file_pairs" in code
    with pytest.raises(ValueError, match=r"8 files cannot fill num_shards\*partition_epoch=2\*5=10 bins"):
        sharded_files_dataset(
            pairs,
            sub_epoch_dataset=meta_template(),
            files_key=META_FILES_KEY,
            partition_epoch=5,
            num_files=8,
            num_shards=2,
        )


def _closure():
    def files():
        return ["a"]

    return files


@pytest.mark.parametrize(
    "files, match",
    [
        (lambda: ["a"], r"cannot go into a RETURNN config.*no lambdas, closures"),
        (_closure(), r"cannot go into a RETURNN config"),
        (dict, r"is a class; give a function"),
    ],
)
def test_callable_files_must_be_importable(files, match):
    with pytest.raises(TypeError, match=match):
        sharded_files_dataset(files, sub_epoch_dataset=HDF, partition_epoch=1)


def test_cached_file_names_modalities():
    from returnn.util.file_cache import CachedFile

    from .config_ranks import META_FILES_KEY, meta_template

    d = sharded_files_dataset(
        [("f1", "a1"), ("f2", "a2")],
        sub_epoch_dataset=meta_template(),
        files_key=META_FILES_KEY,
        partition_epoch=1,
        cached_file=[1],
    )
    assert d["get_sub_epoch_dataset"].keywords["cached_file"] == (1,)
    sub = d["get_sub_epoch_dataset"]([("f1", "a1")])["datasets"]
    assert sub["feat"]["files"] == ["f1"]
    assert [type(f) for f in sub["align"]["files"]] == [CachedFile] and sub["align"]["files"][0].filename == "a1"
    everything = sharded_files_dataset(
        [("f1", "a1")], sub_epoch_dataset=meta_template(), files_key=META_FILES_KEY, partition_epoch=1, cached_file=True
    )
    assert all(
        type(f) is CachedFile
        for part in ("feat", "align")
        for f in everything["get_sub_epoch_dataset"]([("f1", "a1")])["datasets"][part]["files"]
    )
    with pytest.raises(ValueError, match="names modality 2, which files_key does not place"):
        sharded_files_dataset(
            [("f1", "a1")],
            sub_epoch_dataset=meta_template(),
            files_key=META_FILES_KEY,
            partition_epoch=1,
            cached_file=[2],
        )
    with pytest.raises(ValueError, match="places whole file trees; use cached_file=True"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, cached_file=[0])
    with pytest.raises(TypeError, match="cached_file=\\[\\] has type list"):
        sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1, cached_file=[])


def test_callable_files_and_one_cached_modality_in_returnn(tmp_path):
    """RETURNN calls the files function when it runs and copies only the cached modality to its file cache."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    from .config_ranks import META_FILES_KEY, meta_template, write_corpus

    feat = write_corpus(str(tmp_path / "feat"), num_files=4, prefix="m", seed=2)
    align = write_corpus(str(tmp_path / "align"), num_files=4, prefix="m", seed=2)
    d = sharded_files_dataset(
        _pairs_callable(tmp_path),
        sub_epoch_dataset=meta_template(),
        files_key=META_FILES_KEY,
        partition_epoch=1,
        cached_file=[1],
        use_worker_proc=False,
    )
    cache = tmp_path / "cache"
    with global_config_ctx(Config({"file_cache_opts": {"cache_directory": str(cache)}})):
        dataset = init_dataset(d)
        tags = iterate_tags(dataset, 1)
        dataset.finish_epoch(free_resources=True)
    assert sorted(tags) == sorted(t for ts in feat.values() for t in ts)
    cached = sorted(str(p)[len(str(cache)) :] for p in cache.rglob("*.hdf"))
    assert cached == sorted(align), cached  # the alignments, not the features

"""get_sub_epoch_dataset: files land at the right keys, per modality, picklable, and the
template is never mutated."""

import functools
import pickle

import pytest

from i6_shard.returnn_config.sub_epoch import (
    GET_SUB_EPOCH_DATASET,
    bind_sub_epoch_dataset,
    check_files_placement,
    normalize_files_key,
)
from i6_shard.returnn_ext import sub_epoch
from i6_shard.returnn_ext.sub_epoch import get_sub_epoch_dataset

META = {
    "class": "MetaDataset",
    "data_map": {"classes": ("alignments", "data"), "data": ("features", "data")},
    "datasets": {
        "alignments": {"class": "HDFDataset", "seq_ordering": "random"},
        "features": {"class": "HDFDataset"},
    },
    "seq_order_control_dataset": "alignments",
}
META_KEY = {0: ("datasets", "alignments", "files"), 1: ("datasets", "features", "files")}


def test_single_placement_keeps_order_and_template():
    template = {"class": "HDFDataset", "seq_ordering": "random"}
    bound = bind_sub_epoch_dataset(template)
    out = bound(["b.hdf", "a.hdf"])
    assert out == {"class": "HDFDataset", "seq_ordering": "random", "files": ["b.hdf", "a.hdf"]}
    assert template == {"class": "HDFDataset", "seq_ordering": "random"}
    assert "files" not in bound.keywords["template"]


def test_returnn_docstring_example_tuples():
    # RETURNN's DFD docstring: files are (alignment, features) pairs, transposed into a MetaDataset.
    files = [("/nfs/alignment_1.hdf", "/nfs/features_1.hdf"), ("/nfs/alignment_2.hdf", "/nfs/features_2.hdf")]
    out = bind_sub_epoch_dataset(META, files_key=META_KEY)(files)
    assert out["datasets"]["alignments"]["files"] == ["/nfs/alignment_1.hdf", "/nfs/alignment_2.hdf"]
    assert out["datasets"]["features"]["files"] == ["/nfs/features_1.hdf", "/nfs/features_2.hdf"]
    assert out["seq_order_control_dataset"] == "alignments"
    assert "files" not in META["datasets"]["alignments"]


def test_dict_trees_and_lists_from_file_lists():
    key = {"align": ("datasets", "alignments", "files"), "feat": ("datasets", "features", "files")}
    out = get_sub_epoch_dataset([{"feat": "f1", "align": "a1"}], template=META, files_key=key)
    assert out["datasets"]["alignments"]["files"] == ["a1"] and out["datasets"]["features"]["files"] == ["f1"]
    # A .json/.py file list gives lists instead of tuples; placement by index still works.
    out = get_sub_epoch_dataset([["a1", "f1"]], template=META, files_key=META_KEY)
    assert out["datasets"]["features"]["files"] == ["f1"]


def test_missing_modality_is_a_clear_error():
    with pytest.raises(ValueError, match=r"has no part 1, which files_key places"):
        get_sub_epoch_dataset([("a1",)], template=META, files_key=META_KEY)


def test_cached_file_wraps_every_leaf():
    from returnn.util.file_cache import CachedFile

    out = bind_sub_epoch_dataset(META, files_key=META_KEY, cached_file=True)([("a1", "f1")])
    (a,) = out["datasets"]["alignments"]["files"]
    assert isinstance(a, CachedFile) and a.filename == "a1"
    out = bind_sub_epoch_dataset({"class": "HDFDataset", "seq_ordering": "random"}, cached_file=True)(["x"])
    assert [f.filename for f in out["files"]] == ["x"]


def test_partial_pickles_by_reference():
    bound = bind_sub_epoch_dataset(META, files_key=META_KEY)
    assert bound.func == GET_SUB_EPOCH_DATASET  # bound by reference: binding imports nothing of RETURNN
    blob = pickle.dumps(bound)
    assert b"i6_shard.returnn_ext.sub_epoch" in blob and b"get_sub_epoch_dataset" in blob
    again = pickle.loads(blob)  # where it is unpickled (RETURNN's processes), it is the function itself
    assert isinstance(again, functools.partial) and again.func is sub_epoch.get_sub_epoch_dataset
    assert again([("a", "f")]) == bound([("a", "f")])


def test_the_reference_hashes_as_the_function_did_before_it_moved():
    hashing = pytest.importorskip(
        "sisyphus.hash",
        reason="needs the real Sisyphus: pip install it from its source repository (github.com/rwth-i6/sisyphus)",
    )

    def get_sub_epoch_dataset():  # the name the function had when job hashes were made
        pass

    get_sub_epoch_dataset.__module__ = "i6_shard.returnn_config.sub_epoch"
    get_sub_epoch_dataset.__qualname__ = "get_sub_epoch_dataset"
    assert hashing.sis_hash_helper(GET_SUB_EPOCH_DATASET) == hashing.sis_hash_helper(get_sub_epoch_dataset)


def test_normalize_files_key_errors():
    assert normalize_files_key(("datasets", "x", "files")) == ("datasets", "x", "files")
    with pytest.raises(TypeError, match="must be a key"):
        normalize_files_key(["files"])
    with pytest.raises(TypeError, match="mix int and str"):
        normalize_files_key({0: "a", "b": "c"})
    with pytest.raises(ValueError, match="same key path"):
        normalize_files_key({0: "files", 1: ("files",)})
    with pytest.raises(ValueError, match="places no files"):
        normalize_files_key({})


def test_placement_must_exist_and_be_empty():
    with pytest.raises(ValueError, match=r"key path \('datasets', 'nope', 'files'\) does not exist"):
        check_files_placement(META, {0: ("datasets", "nope", "files")})
    with pytest.raises(ValueError, match="already has files"):
        check_files_placement({"class": "HDFDataset", "files": ["x"]}, "files")
    check_files_placement({"class": "HDFDataset", "files": []}, "files")
    with pytest.raises(TypeError, match="with a 'class'"):
        bind_sub_epoch_dataset({"seq_ordering": "random"})

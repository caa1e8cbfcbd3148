"""Preflight checks: non-regular files refused by stat alone (a FIFO never blocks), the entry count
from a sizes archive's header, list digests, and key collisions exactly as RETURNN keys file trees."""

import os
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard import core
from i6_shard.core.pure.file_tree import tree_key
from i6_shard.core.io.preflight import (
    archive_entry_count,
    check_key_collisions,
    check_regular_file,
    file_list_digest,
    key_collisions,
)
from i6_shard.core.pure.text import short_repr
from tests.blocking import returns_within as _returns_within, unblock_fifo as _unblock_fifo
from tests.strategies import file_trees


def test_regular_file_passes(tmp_path):
    path = tmp_path / "files.txt"
    path.write_text("/data/a.hdf\n")
    assert check_regular_file(str(path)).st_size == len("/data/a.hdf\n")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = str(tmp_path / "files.txt")
    os.mkfifo(fifo)
    with pytest.raises(
        ValueError,
        match=f"file list '{fifo}' is a FIFO \\(named pipe\\), not a regular file "
        "\\(reading it could block, or never end\\)",
    ):
        _returns_within(lambda: check_regular_file(fifo), unblock=_unblock_fifo(fifo))
    assert _returns_within(lambda: archive_entry_count(fifo), unblock=_unblock_fifo(fifo)) is None


def test_device_symlink_and_directory_are_refused(tmp_path):
    link = str(tmp_path / "files.txt")
    os.symlink("/dev/zero", link)  # a symlink is followed: its target is what would be read
    with pytest.raises(ValueError, match="'.*files.txt' is a character device, not a regular file"):
        check_regular_file(link)
    with pytest.raises(ValueError, match=f"file list '{tmp_path}' is a directory, not a regular file; give"):
        check_regular_file(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="file list '.*gone.txt' does not exist"):
        check_regular_file(str(tmp_path / "gone.txt"))


def test_long_names_are_cut_in_messages(tmp_path):
    name = "/".join(["d" * 200] * 15)  # 3000 characters, within PATH_MAX
    with pytest.raises(FileNotFoundError) as exc:
        check_regular_file("/" + name + ".txt")
    assert len(str(exc.value)) < 300 and "...[2" in str(exc.value)
    assert short_repr("x" * 10, limit=40) == repr("x" * 10)


def test_archive_entry_count_reads_only_the_header(tmp_path):
    path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=[f"/d/{i}" for i in range(1234)], sizes=np.arange(1234)), path)
    assert archive_entry_count(path) == 1234
    # A crafted member that declares 10**12 entries over a few bytes: the count comes from the
    # header, nothing is allocated (loading it is what the archive reader refuses).
    crafted = str(tmp_path / "crafted.npz")
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=np.int64))
    header["shape"] = (10**12,)
    with zipfile.ZipFile(crafted, "w") as zf, zf.open("sizes.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 8)
    assert archive_entry_count(crafted) == 10**12
    not_zip = tmp_path / "not.npz"
    not_zip.write_bytes(b"hello")
    assert archive_entry_count(str(not_zip)) is None
    assert archive_entry_count(str(tmp_path / "missing.npz")) is None
    assert archive_entry_count(str(tmp_path)) is None


def test_digest_follows_entries_not_spelling():
    trees = ["/a.hdf", ("/b.hdf", {"y": "/c.hdf", "x": "/d.hdf"})]
    same = ["/a.hdf", ["/b.hdf", {"x": "/d.hdf", "y": "/c.hdf"}]]  # as a .json list gives it back
    assert file_list_digest(trees) == file_list_digest(same)
    assert len(file_list_digest(trees)) == 64
    for other in (
        ["/a.hdf"],
        ["/a.hdf", ("/b.hdf", {"y": "/d.hdf", "x": "/c.hdf"})],
        trees + ["/a.hdf"],
        [trees[1], trees[0]],
        ["/a.hdf\n/b.hdf"],
        ["/a.hdf", "/b.hdf"],
    ):
        assert file_list_digest(other) != file_list_digest(trees), other
    # Entries are framed: a name holding a newline is not two names.
    assert file_list_digest(["a\nb"]) != file_list_digest(["a", "b"])
    assert file_list_digest(["\udcff"]) != file_list_digest(["\udcfe"])  # undecodable names work too


def _brute_force_collisions(trees):
    """Groups by RETURNN's own key function and dm-tree's flatten, pair by pair."""
    import tree as dm_tree
    from returnn.datasets.distrib_files import _get_key_for_file_tree

    keys = [_get_key_for_file_tree(t) for t in trees]
    leaves = [tuple(dm_tree.flatten(t)) for t in trees]
    groups = []
    for key in dict.fromkeys(keys):
        idxs = [i for i, k in enumerate(keys) if k == key]
        if len({leaves[i] for i in idxs}) > 1:
            groups.append(idxs)
    return groups


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        file_trees(leaves=st.sampled_from(["a", "b", "a:b", "b:a", ":", "a:", ":b", "c"]), max_leaves=3),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(min_value=0, max_value=7), max_size=3),
)
def test_key_collisions_equal_returnns_keys(trees, spliced):
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
    # Entries whose one name is another entry's key: collisions whenever that entry has several files.
    trees = trees + [tree_key(trees[i % len(trees)]) for i in spliced]
    assert key_collisions(*core.pure.leaves_and_keys(trees)) == _brute_force_collisions(trees)


def test_collision_error_names_both_entries_and_duplicates_pass():
    check_key_collisions(["/d/a.hdf", "/d/a.hdf", ("/d/a.hdf", "/d/b.hdf"), ["/d/a.hdf", "/d/b.hdf"]])
    trees = ["/d/x.hdf", "/d/a:b", "/d/x.hdf", {"k": "/d/a", "l": "b"}, ("/d/a:b",)]
    with pytest.raises(ValueError) as exc:
        check_key_collisions(trees, where="file list '/lists/train.json'")
    msg = str(exc.value)
    assert msg.startswith(
        "file list '/lists/train.json' has 1 RETURNN file key shared by entries with different "
        "files: entries 1 ('/d/a:b') and 3 ({'k': '/d/a', 'l': 'b'}) share key '/d/a:b'."
    )
    assert "keeps one size per key" in msg and "Rename the files whose names hold ':'" in msg
    many = [f"/d/{i}:x" for i in range(5)] + [(f"/d/{i}", "x") for i in range(5)]
    with pytest.raises(
        ValueError,
        match="has 5 RETURNN file keys shared .* \\(first 3 listed\\): entries 0 .*; "
        "entries 1 .*; entries 2 \\('/d/2:x'\\) and 7",
    ):
        check_key_collisions(many)

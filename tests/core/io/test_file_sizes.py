"""collect_file_sizes equals RETURNN's DistributeFilesDataset._lazy_init_file_sizes on
real temp files in every stat mode (serial, threads, helper processes); missing files
are all reported at once; the sizes file round-trips exactly and deterministically."""

import contextlib
import functools
import os
import shutil
import sys
import tempfile
import time
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import FileSizes, MissingFilesError, collect_file_sizes, load_file_sizes, save_file_sizes
from i6_shard.core.io import stat_engine
from i6_shard.core.io.npz import save_npz
from tests.strategies import fs_names

tree = pytest.importorskip("tree", reason="needs dm-tree: pip install dm-tree")
distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

MODES = ["serial", "threads", "procs"]


@contextlib.contextmanager
def stat_mode(mode):
    """Force one of collect_file_sizes' strategies, whatever the probe measures."""
    names = ("_NUM_PROBE", "_WAITING_STAT_S", "_MIN_PROCS_WORK_S", "_SERIAL_CHUNK", "_MAX_THREAD_CHUNK", "_CHILD_CHUNK")
    saved = {n: getattr(stat_engine, n) for n in names}
    forced = {
        "serial": (1, float("inf"), float("inf")),
        "threads": (1, 0.0, float("inf")),
        "procs": (1, float("inf"), 0.0),
    }[mode] + (7, 3, 5)  # small chunks: many chunk boundaries
    try:
        for n, v in zip(names, forced):
            setattr(stat_engine, n, v)
        yield {
            "serial": dict(num_threads=1, num_procs=1),
            "threads": dict(num_threads=5, num_procs=1),
            "procs": dict(num_threads=1, num_procs=3),
        }[mode]
    finally:
        for n, v in saved.items():
            setattr(stat_engine, n, v)


def get_sub_epoch_dataset(files):
    return {"class": "HDFDataset", "files": files, "seq_ordering": "default"}


def returnn_file_sizes(trees):
    """RETURNN's own result: a real DistributeFilesDataset computing its _file_sizes."""
    ds = distrib_files.DistributeFilesDataset(
        files=list(trees), get_sub_epoch_dataset=get_sub_epoch_dataset, use_worker_proc=False
    )
    ds._lazy_init_file_sizes()
    return ds._file_sizes


def returnn_entry_size(t):
    return sum((os.path.getsize(fn) for fn in tree.flatten(t)), 0)


def assert_parity(trees, **kwargs):
    fs = collect_file_sizes(trees, **kwargs)
    assert fs.sizes.dtype == np.int64
    assert fs.keys == [distrib_files._get_key_for_file_tree(t) for t in trees]
    assert fs.sizes.tolist() == [returnn_entry_size(t) for t in trees]  # input order, duplicates kept
    assert fs.as_dict() == returnn_file_sizes(trees)
    return fs


@pytest.fixture(scope="module")
def pool():
    """Real files: odd names, zero bytes, symlinks (to files, chained, relative). Directories and a link
    to one are made too, but are not in ``paths``: they are no data files (tests below)."""
    d = tempfile.mkdtemp(prefix="i6_shard_sizes.")
    names = [
        "a.hdf",
        "zero.hdf",
        "with:colon.hdf",
        'sp ace\'s "q".hdf',
        "new\nline",
        "back\\slash",
        "é€😀.hdf",
        "#hash",
        " lead",
    ]
    paths = []
    for idx, name in enumerate(names):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.truncate(0 if name == "zero.hdf" else 1000 * idx + 7)
        paths.append(p)
    os.symlink(paths[0], os.path.join(d, "link"))
    os.symlink(os.path.join(d, "link"), os.path.join(d, "link2"))
    os.symlink("é€😀.hdf", os.path.join(d, "rel_link"))
    os.mkdir(os.path.join(d, "subdir"))
    os.symlink(os.path.join(d, "subdir"), os.path.join(d, "dir_link"))
    paths += [os.path.join(d, n) for n in ("link", "link2", "rel_link")]
    yield d, paths
    shutil.rmtree(d)


def trees_over(leaves):
    return st.lists(
        st.recursive(
            leaves,
            lambda c: (
                st.lists(c, min_size=1, max_size=3)
                | st.lists(c, min_size=1, max_size=3).map(tuple)
                | st.dictionaries(st.text(max_size=3), c, min_size=1, max_size=3)
            ),
            max_leaves=5,
        ),
        min_size=1,
        max_size=12,
    )


@pytest.mark.parametrize("mode", ["serial", "threads"])
@settings(max_examples=examples(40))
@given(data=st.data())
def test_parity_with_returnn_on_pool_trees(pool, mode, data):
    _, paths = pool
    trees = data.draw(trees_over(st.sampled_from(paths)))
    with stat_mode(mode) as kwargs:
        assert_parity(trees, **kwargs)


@settings(max_examples=examples(15))
@given(names=st.lists(fs_names, min_size=1, max_size=6, unique=True), data=st.data())
def test_parity_with_returnn_on_fuzzed_file_names(names, data):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name in names:
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.truncate(data.draw(st.integers(0, 10**9)))
            paths.append(p)
        trees = data.draw(trees_over(st.sampled_from(paths)))
        assert_parity(trees)


def spy_helpers(monkeypatch, *, steal):
    """Record how much of its share each helper process delivered (the parent does the rest)."""
    delivered = []
    real = stat_engine._Helper.finish

    def spy(self):
        real(self)
        delivered.append((self.pos - self.a, self.b - self.a))

    monkeypatch.setattr(stat_engine._Helper, "finish", spy)
    monkeypatch.setattr(stat_engine, "_stat_in_procs", functools.partial(stat_engine._stat_in_procs, steal=steal))
    return delivered


@pytest.mark.parametrize("steal", [False, True])
def test_parity_in_helper_processes_with_many_files_dups_and_links(pool, monkeypatch, steal):
    d, paths = pool
    delivered = spy_helpers(monkeypatch, steal=steal)
    many = os.path.join(d, "many")
    os.makedirs(many, exist_ok=True)
    sizes = np.random.RandomState(1).randint(0, 5000, size=900)
    files = []
    for idx, size in enumerate(sizes.tolist()):
        p = os.path.join(many, f"f{idx}")
        with open(p, "wb") as f:
            f.truncate(size)
        files.append(p)
    trees = [(files[i], files[(i * 7) % 900]) for i in range(900)] + paths + [files[3], {"b": paths[1], "a": files}]
    with stat_mode("procs") as kwargs:
        assert_parity(trees, **kwargs)
    assert len(delivered) == 2
    if not steal:  # the helpers' own results, complete
        assert all(done == share > 0 for done, share in delivered)


def test_relative_paths_resolve_against_the_working_directory(pool, monkeypatch):
    d, _ = pool
    monkeypatch.chdir(d)
    for mode in MODES:
        with stat_mode(mode) as kwargs:
            assert_parity(["a.hdf", ("link", "rel_link"), "./zero.hdf"] * 3, **kwargs)


@pytest.mark.parametrize("mode", MODES)
def test_missing_files_are_all_reported_at_once(pool, mode):
    d, paths = pool
    os.symlink(os.path.join(d, "gone"), os.path.join(d, f"dangling_{mode}"))
    os.symlink(os.path.join(d, f"loop_{mode}"), os.path.join(d, f"loop_{mode}"))
    bad = [os.path.join(d, f"missing{i}.hdf") for i in range(21)] + [
        os.path.join(d, f"dangling_{mode}"),
        os.path.join(d, f"loop_{mode}"),
        os.path.join(paths[0], "not_a_dir"),
        os.path.join(d, "x" * 300),
    ]
    for p in bad:  # RETURNN fails on each of them, too
        with pytest.raises(OSError):
            returnn_entry_size(p)
    trees = [(paths[0], b) for b in bad[:10]] + paths + [{"k": b} for b in bad[10:]] + [bad[0]]
    with stat_mode(mode) as kwargs:
        with pytest.raises(MissingFilesError) as info:
            collect_file_sizes(trees, **kwargs)
    err = info.value
    assert isinstance(err, FileNotFoundError)
    assert sorted(p for p, _ in err.missing) == sorted(bad)
    num_distinct = len(set(paths) | set(bad))
    msg = str(err)
    assert msg.startswith(f"25 of {num_distinct} files are missing or unreadable (first 20 listed)")
    assert sum(repr(p) in msg for p in bad) == 20
    assert "... and 5 more" in msg
    reasons = dict(err.missing)
    assert reasons[bad[21]] == reasons[bad[0]] == "No such file or directory"  # dangling link = missing
    assert reasons[bad[22]] == "Too many levels of symbolic links"
    assert reasons[bad[23]] == "Not a directory"
    assert reasons[bad[24]] == "File name too long"
    assert msg.index(repr(bad[0])) < msg.index(repr(bad[1]))  # listed in list order
    assert "nothing was written" in msg


def test_a_failing_helper_process_leaves_its_share_to_the_parent(pool, monkeypatch):
    _, paths = pool
    trees = paths * 50
    for steal in (False, True):
        delivered = spy_helpers(monkeypatch, steal=steal)
        for broken in ("/nonexistent/python", shutil.which("false") or "/bin/false", ""):
            monkeypatch.setattr(sys, "executable", broken)
            with stat_mode("procs") as kwargs:
                assert_parity(trees, **kwargs)
        assert [done for done, _ in delivered] == [0] * 6


def test_empty_list_and_bad_options():
    fs = collect_file_sizes([])
    assert fs.keys == [] and fs.sizes.dtype == np.int64 and len(fs.sizes) == 0
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_threads"):
            collect_file_sizes([], num_threads=bad)
        with pytest.raises(ValueError, match="num_procs"):
            collect_file_sizes([], num_procs=bad)


def test_bad_trees_fail_before_any_stat(pool, monkeypatch):
    _, paths = pool
    monkeypatch.setattr(stat_engine, "_stat_all", lambda *a, **k: pytest.fail("stat-ed despite a bad tree"))
    with pytest.raises(TypeError, match="entry 2 "):
        collect_file_sizes([paths[0], paths[1], (paths[2], None)])


# -- progress ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_progress_lines_for_slow_work_and_silence_for_fast_work(pool, mode, capfd):
    _, paths = pool
    d = os.path.dirname(paths[0])
    trees = [os.path.join(d, *(["."] * i), "a.hdf") for i in range(300)]  # 300 distinct names of one file
    with stat_mode(mode) as kwargs:
        collect_file_sizes(trees, progress_interval=3600, **kwargs)
        assert capfd.readouterr().err == ""
        collect_file_sizes(trees, progress_interval=1e-9, **kwargs)
    err = capfd.readouterr().err
    assert "file sizes: 300/300 files (100.0%)" in err
    assert "files/s" in err


# -- the sizes file ----------------------------------------------------------------------

keys_st = st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=10)


@settings(max_examples=examples(60))
@given(st.lists(st.tuples(keys_st, st.integers(0, 2**63 - 1)), max_size=20))
def test_save_load_round_trip_is_exact(pairs):
    fs = FileSizes(keys=[k for k, _ in pairs], sizes=np.array([s for _, s in pairs], dtype=np.int64))
    with tempfile.TemporaryDirectory() as d:
        save_file_sizes(fs, os.path.join(d, "s.npz"))
        back = load_file_sizes(os.path.join(d, "s.npz"))
        assert os.listdir(d) == ["s.npz"]
    assert back.keys == fs.keys
    assert back.sizes.dtype == np.int64 and back.sizes.tolist() == fs.sizes.tolist()


def test_saved_file_is_plain_npz_as_documented(tmp_path):
    fs = FileSizes(keys=["a:b", "é\udcff", ""], sizes=np.array([3, 0, 2**40], dtype=np.int64))
    save_file_sizes(fs, tmp_path / "s.npz")
    with np.load(tmp_path / "s.npz", allow_pickle=False) as d:
        assert sorted(d.files) == ["format_version", "keys_utf8", "sizes"]
        assert int(d["format_version"]) == 1
        assert d["keys_utf8"].tobytes().decode("utf-8", "surrogatepass").split("\0") == fs.keys
        assert d["sizes"].tolist() == [3, 0, 2**40]


def test_saved_bytes_are_deterministic(tmp_path, monkeypatch):
    fs = FileSizes(keys=[f"/d/{i}.hdf" for i in range(100)], sizes=np.arange(100, dtype=np.int64))
    save_file_sizes(fs, tmp_path / "a.npz")
    later = time.time() + 86400 * 400  # a clock a year later must not show in the bytes
    monkeypatch.setattr(time, "time", lambda: later)
    save_file_sizes(FileSizes(keys=list(fs.keys), sizes=fs.sizes.astype(np.int32)), tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_save_rejects_what_the_format_cannot_hold(tmp_path):
    with pytest.raises(ValueError, match="key 1 .*NUL"):
        save_file_sizes(FileSizes(keys=["a", "b\0c"], sizes=np.array([1, 2])), tmp_path / "s.npz")
    with pytest.raises(ValueError, match="integers"):
        save_file_sizes(FileSizes(keys=["a"], sizes=np.array([1.5])), tmp_path / "s.npz")
    with pytest.raises(ValueError, match=r"entry 1 \('b'\) has -3 \(2 negative in all\)"):
        save_file_sizes(FileSizes(keys=["a", "b", "c"], sizes=np.array([1, -3, -1])), tmp_path / "s.npz")
    with pytest.raises(ValueError, match=r"entry 0 \('a'\) has 9223372036854775808"):
        save_file_sizes(FileSizes(keys=["a"], sizes=np.array([2**63], dtype=np.uint64)), tmp_path / "s.npz")
    assert not os.listdir(tmp_path)


def _write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_load_errors_name_the_file(tmp_path):
    good = tmp_path / "good.npz"
    save_file_sizes(FileSizes(keys=["a", "b"], sizes=np.array([1, 2])), good)
    cases = {
        "text.npz": _write(tmp_path / "text.npz", b"hello"),
        "empty.npz": _write(tmp_path / "empty.npz", b""),
        "truncated.npz": _write(tmp_path / "truncated.npz", good.read_bytes()[:100]),
    }
    np.save(tmp_path / "plain.npy", np.arange(3))
    cases["plain.npy"] = tmp_path / "plain.npy"
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    cases["other.npz"] = tmp_path / "other.npz"
    for name, arrays in {
        "v2.npz": dict(format_version=np.array(2), keys_utf8=np.frombuffer(b"a", np.uint8), sizes=np.array([1])),
        "count.npz": dict(
            format_version=np.array(1), keys_utf8=np.frombuffer(b"a\0b", np.uint8), sizes=np.array([1, 2, 3])
        ),
        "float.npz": dict(format_version=np.array(1), keys_utf8=np.frombuffer(b"a", np.uint8), sizes=np.array([1.0])),
        "utf8.npz": dict(format_version=np.array(1), keys_utf8=np.frombuffer(b"\xff", np.uint8), sizes=np.array([1])),
    }.items():
        save_npz(tmp_path / name, arrays)
        cases[name] = tmp_path / name
    for name, path in cases.items():
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            load_file_sizes(path)
    with pytest.raises(FileNotFoundError, match="nope.npz.*do not exist"):
        load_file_sizes(tmp_path / "nope.npz")
    assert zipfile.is_zipfile(good)

"""Files that are not regular files, unreadable files, lists nested without end and huge names:
each is an error naming the entry, with no read that could block, no RecursionError, and
messages of bounded size."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from i6_shard.core import MissingFilesError, collect_file_sizes, read_file_list
from i6_shard.core.io import stat_engine

from tests.blocking import run_to_end
from .test_file_sizes import MODES, stat_mode


def run_child(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a child: a call that blocks on a FIFO fails as a hang (no output, no CPU for long), not the run."""
    return run_to_end([sys.executable, "-c", textwrap.dedent(code), *args])


@pytest.fixture
def specials(tmp_path):
    """A FIFO, a directory, a link to a character device and a regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    directory = tmp_path / "adir"
    directory.mkdir()
    device = tmp_path / "zero_link"
    os.symlink("/dev/zero", device)
    regular = tmp_path / "a.hdf"
    regular.write_bytes(b"x" * 10)
    return {"fifo": str(fifo), "dir": str(directory), "device": str(device), "regular": str(regular)}


@pytest.mark.parametrize("ext", [".txt", ".json", ".py"])
def test_a_fifo_or_device_as_list_file_is_refused_without_blocking(tmp_path, ext):
    fifo = tmp_path / f"files{ext}"
    os.mkfifo(fifo)  # no writer: an open() for reading would block forever
    zero = tmp_path / f"zero{ext}"
    os.symlink("/dev/zero", zero)  # read() would never end (MemoryError)
    code = """
        import sys
        from i6_shard.core import read_file_list
        for path in sys.argv[1:]:
            try:
                read_file_list(path)
            except ValueError as exc:
                print(exc)
    """
    res = run_child(code, str(fifo), str(zero))  # raises TimeoutExpired if a read blocks
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2, res.stdout
    assert lines[0].startswith(f"file list {str(fifo)!r} is a FIFO (named pipe), not a regular file")
    assert lines[1].startswith(f"file list {str(zero)!r} is a character device, not a regular file")


def test_a_list_file_swapped_for_a_fifo_after_the_stat_is_refused_not_read(tmp_path, monkeypatch):
    from i6_shard.core.io import file_list

    regular, fifo = tmp_path / "files.txt", tmp_path / "pipe.txt"
    regular.write_text("a\n")
    os.mkfifo(fifo)
    real_stat = os.stat
    # The stat sees a regular file, the open gets the FIFO: the open must not block and the fstat refuses it.
    monkeypatch.setattr(file_list.os, "stat", lambda p, *a, **k: real_stat(regular))
    monkeypatch.setattr(file_list, "open", lambda p, *a, **k: open(str(fifo), *a, **k), raising=False)
    with pytest.raises(ValueError, match="is a FIFO"):
        read_file_list(str(regular))


@pytest.mark.parametrize("mode", MODES)
def test_leaves_that_are_not_regular_files_are_errors_naming_them(specials, mode):
    trees = [
        specials["regular"],
        (specials["regular"], specials["dir"]),
        {"k": specials["fifo"]},
        specials["device"],
        "/dev/null",
    ]
    with stat_mode(mode) as kwargs:
        with pytest.raises(MissingFilesError) as info:
            collect_file_sizes(trees * 7, **kwargs)  # repeated: several chunks, duplicates
    reasons = dict(info.value.missing)
    assert sorted(reasons) == sorted([specials["dir"], specials["fifo"], specials["device"], "/dev/null"])
    assert reasons[specials["dir"]].startswith("is a directory, not a regular file")
    assert reasons[specials["fifo"]].startswith("is a FIFO (named pipe), not a regular file")
    assert reasons[specials["device"]].startswith("is a character device, not a regular file")
    assert str(info.value).startswith("4 of 5 files are missing or unreadable")


def test_a_fifo_leaf_is_not_opened(specials):
    """RETURNN's own size loop only stats; so must we: a FIFO leaf must not block."""
    code = """
        import sys
        from i6_shard.core import collect_file_sizes, MissingFilesError
        try:
            collect_file_sizes([sys.argv[1]], num_threads=1, num_procs=1)
        except MissingFilesError as exc:
            print(exc.missing[0][1])
    """
    res = run_child(code, specials["fifo"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("is a FIFO")


_AS_NOBODY = """
    import json, os, sys
    from i6_shard.core import collect_file_sizes, MissingFilesError
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)  # nobody, after the imports: its own process cannot reach this Python's files
    try:
        fs = collect_file_sizes(sys.argv[1:], num_threads=1, num_procs=1)
        print(json.dumps({"sizes": fs.sizes.tolist()}))
    except MissingFilesError as exc:
        print(json.dumps({"missing": exc.missing}))
"""


@pytest.fixture
def open_dir():
    """A directory every user can enter (pytest's tmp_path is closed to other users)."""
    d = tempfile.mkdtemp(prefix="i6_shard_perm.")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


def test_unreadable_leaves_are_reported_for_a_user_that_cannot_read_them(open_dir):
    readable, unreadable = os.path.join(open_dir, "ok.hdf"), os.path.join(open_dir, "secret.hdf")
    for path, data, mode in ((readable, b"12345", 0o644), (unreadable, b"123", 0o000)):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
    paths = [readable, unreadable]
    expected = {
        "missing": [[unreadable, "no read permission for this user (RETURNN, run as this user, would fail opening it)"]]
    }
    if os.geteuid() == 0:
        # Root reads everything: the check sees no problem (what the docs say a root user sees) ...
        assert collect_file_sizes(paths).sizes.tolist() == [5, 3]
        # ... and a user who cannot read the file gets it reported, as RETURNN would fail opening it.
        res = run_child(_AS_NOBODY, *paths)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout) == expected
    else:
        with pytest.raises(MissingFilesError) as info:
            collect_file_sizes(paths)
        assert [list(m) for m in info.value.missing] == expected["missing"]


def test_mode_bits_that_deny_reading_are_confirmed_with_access(tmp_path, monkeypatch):
    """An ACL may grant what the mode bits deny: the bits only select whom to ask again."""
    p = tmp_path / "f.hdf"
    p.write_bytes(b"abc")
    os.chmod(p, 0o000)

    def as_another_user(self):
        self.euid, self.groups = 12345, np.array([54321], dtype=np.int64)

    monkeypatch.setattr(stat_engine._Reader, "__init__", as_another_user)
    granted = collect_file_sizes([str(p)], num_threads=1, num_procs=1)  # os.access says yes (root, or an ACL)
    if os.access(str(p), os.R_OK):
        assert granted.sizes.tolist() == [3]
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(MissingFilesError, match="no read permission"):
        collect_file_sizes([str(p)], num_threads=1, num_procs=1)


@pytest.mark.parametrize("ext", [".json", ".py"])
def test_a_list_nested_100000_deep_is_a_clear_error_naming_the_file(tmp_path, ext):
    path = tmp_path / f"deep{ext}"
    path.write_text("[" * 100_000 + "'a'" * (ext == ".py") + '"a"' * (ext == ".json") + "]" * 100_000)
    with pytest.raises(ValueError, match=rf"file list '{path}' nests lists or dicts too deeply"):
        read_file_list(path)
    medium = tmp_path / f"medium{ext}"  # parses, but deeper than any file tree
    medium.write_text("[" * 150 + '"a"' + "]" * 150)
    with pytest.raises(ValueError, match=rf"file list '{medium}': entry 0 is nested more than 100 levels deep"):
        read_file_list(medium)
    ok = tmp_path / f"ok{ext}"
    ok.write_text("[" * 20 + '"a"' + "]" * 20)
    assert len(read_file_list(ok)) == 1


def test_an_inline_tree_nested_deeper_than_python_recurses_is_a_clear_error():
    tree = "a"
    for _ in range(5000):
        tree = [tree]
    with pytest.raises(ValueError, match="file tree entry 1 is nested more than 100 levels deep"):
        collect_file_sizes(["x", tree])


@pytest.mark.slow
def test_huge_names_are_cut_in_messages_with_their_length(tmp_path):
    names = [str(tmp_path / (f"{i}-" + "n" * 10_000_000)) for i in range(20)]  # 200 MB of names
    with pytest.raises(MissingFilesError) as info:
        collect_file_sizes(names, num_threads=1, num_procs=1)
    msg = str(info.value)
    assert len(msg) < 20_000, len(msg)
    assert msg.startswith("20 of 20 files are missing or unreadable")
    assert "chars]" in msg and "File name too long" in msg
    assert info.value.missing[0][0] == names[0]  # the full names stay available to code


HUGE = "/data/" + "n" * 10_000_000


@pytest.mark.parametrize(
    "case", ["nul_in_name", "non_str_leaf", "negative_cost", "non_str_key", "txt_entry", "json_dict_key"]
)
def test_every_message_that_shows_an_entry_cuts_it(tmp_path, case):
    from i6_shard.core import PlanSettings, ShardPlan, write_file_list

    settings = PlanSettings(num_shards=1, partition_epoch=1)
    calls = {
        "nul_in_name": lambda: collect_file_sizes(["/a", HUGE + "\0"]),
        "non_str_leaf": lambda: collect_file_sizes(["/a", [b"x" * 10_000_000]]),
        "negative_cost": lambda: ShardPlan(["/a", HUGE], [1, -1], settings),
        "non_str_key": lambda: ShardPlan(["/a", [HUGE]], [1, 1], settings),
        "txt_entry": lambda: write_file_list(["/a", HUGE + "\n"], tmp_path / "l.txt"),
        "json_dict_key": lambda: write_file_list([{(HUGE,): "/a"}], tmp_path / "l.json"),
    }
    with pytest.raises((ValueError, TypeError)) as info:
        calls[case]()
    msg = str(info.value)
    assert len(msg) < 1000, (case, len(msg))
    assert "chars]" in msg, msg
    assert not os.listdir(tmp_path)

"""Atomic outputs: an exception or a SIGKILL in the middle of writing leaves the target
absent (or as it was); the checks are shown to catch a writer that writes the target directly.
Clear errors naming the target for unwritable output paths."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from i6_shard.core.io import atomic_write
from i6_shard.core.io.atomic import atomic_path
from i6_shard.core import check_output_path


@contextlib.contextmanager
def direct_path(path):
    """What atomic_path must not be: the caller writes the target itself."""
    yield os.fspath(path)


@contextlib.contextmanager
def direct_write(path, mode="wt", **kwargs):
    """What atomic_write must not be."""
    with open(path, mode, **kwargs) as f:
        yield f


def check_raise_inside_path(writer, directory, *, old):
    target = directory / "out.bin"
    if old is not None:
        target.write_bytes(old)
    with pytest.raises(RuntimeError, match="boom"):
        with writer(target) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"partial output")
            raise RuntimeError("boom")
    assert (target.read_bytes() if target.exists() else None) == old
    assert sorted(os.listdir(directory)) == ([] if old is None else ["out.bin"])  # no temporary file left


def check_raise_inside_write(writer, directory, *, old):
    target = directory / "out.txt"
    if old is not None:
        target.write_bytes(old)
    with pytest.raises(KeyboardInterrupt):  # a BaseException, as from Ctrl-C
        with writer(target, "wt") as f:
            f.write("partial output\n")
            f.flush()
            raise KeyboardInterrupt
    assert (target.read_bytes() if target.exists() else None) == old
    assert sorted(os.listdir(directory)) == ([] if old is None else ["out.txt"])


@pytest.mark.parametrize("old", [None, b"old content\n"], ids=["new", "existing"])
def test_an_exception_inside_leaves_the_target_as_it_was(tmp_path, old):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    check_raise_inside_path(atomic_path, tmp_path / "a", old=old)
    check_raise_inside_write(atomic_write, tmp_path / "b", old=old)


@pytest.mark.parametrize("old", [None, b"old content\n"], ids=["new", "existing"])
def test_the_checks_catch_a_writer_that_writes_the_target_directly(tmp_path, old):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(AssertionError):
        check_raise_inside_path(direct_path, tmp_path / "a", old=old)
    with pytest.raises(AssertionError):
        check_raise_inside_write(direct_write, tmp_path / "b", old=old)


def test_success_replaces_the_target_with_the_default_permissions(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with atomic_write(target, "wt") as f:
        f.write("new\n")
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["out.txt"]
    assert os.stat(target).st_mode & 0o777 == 0o644


_KILLED_CHILD = r"""
import sys, time
{writer}
with writer(sys.argv[1], "wb") as f:
    f.write(b"x" * 100_000)
    f.flush()
    print("written", flush=True)
    time.sleep(60)
"""
_REAL_WRITER = "from i6_shard.core.io.atomic import atomic_write as writer"
_DIRECT_WRITER = """
import contextlib
@contextlib.contextmanager
def writer(path, mode):
    with open(path, mode) as f:
        yield f
"""


def kill_while_writing(writer_code: str, target) -> None:
    """Run a writer in a child process, SIGKILL it in the middle of writing ``target``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD.format(writer=writer_code), str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "written\n"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def check_killed(target, *, old):
    assert (target.read_bytes() if target.exists() else None) == old


@pytest.mark.parametrize("old", [None, b"old content\n"], ids=["new", "existing"])
def test_sigkill_while_writing_leaves_the_target_as_it_was(tmp_path, old):
    target = tmp_path / "out.bin"
    if old is not None:
        target.write_bytes(old)
    kill_while_writing(_REAL_WRITER, target)
    check_killed(target, old=old)
    # The killed writer's temporary file stays (documented in atomic_path), never under the target's name.
    leftovers = sorted(n for n in os.listdir(tmp_path) if n != "out.bin")
    assert len(leftovers) == 1 and leftovers[0].startswith(".out.bin.") and leftovers[0].endswith(".tmp")
    assert os.path.getsize(tmp_path / leftovers[0]) == 100_000
    # A later writer is not disturbed by the leftover.
    with atomic_write(target, "wb") as f:
        f.write(b"complete")
    assert target.read_bytes() == b"complete"


def test_the_sigkill_check_catches_a_direct_writer(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old content\n")
    kill_while_writing(_DIRECT_WRITER, target)
    with pytest.raises(AssertionError):
        check_killed(target, old=b"old content\n")


def test_unwritable_targets_name_the_target_not_the_temporary_file(tmp_path):
    missing = tmp_path / "nodir" / "x.npz"
    for check in (lambda: check_output_path(missing), lambda: atomic_path(missing).__enter__()):
        with pytest.raises(FileNotFoundError) as info:
            check()
        msg = str(info.value)
        assert repr(str(missing)) in msg and "does not exist" in msg and ".tmp" not in msg
    for check in (lambda: check_output_path(tmp_path), lambda: atomic_path(tmp_path).__enter__()):
        with pytest.raises(IsADirectoryError, match="it is a directory; give a file path"):
            check()
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        check_output_path(afile / "x.npz")
    with pytest.raises(NotADirectoryError, match="exists and is not a directory"):
        check_output_path(afile, directory=True)
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        check_output_path(afile / "sub" / "dir", directory=True)
    check_output_path(tmp_path / "new" / "deeper", directory=True)  # can be created: fine
    check_output_path(tmp_path, directory=True)
    check_output_path(tmp_path / "x.npz")
    assert os.listdir(tmp_path) == ["afile"]  # checking writes nothing


def test_unwritable_directory_is_reported_before_any_work(tmp_path, monkeypatch):
    # As root, permissions do not stop writing; simulate what os.access reports for a read-only directory.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(PermissionError, match="no permission to create files in"):
        check_output_path(tmp_path / "x.npz")
    with pytest.raises(PermissionError, match="no permission to create files in"):
        check_output_path(tmp_path / "new_dir", directory=True)


def test_a_long_target_name_still_gets_a_temporary_file(tmp_path):
    target = tmp_path / ("n" * 250)
    with atomic_write(target, "wt") as f:
        f.write("x")
    assert target.read_text() == "x"

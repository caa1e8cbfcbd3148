"""Atomic output files: write under a temporary name, then ``os.replace``, so a
killed process never leaves a file that could pass for a finished one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator

__all__ = ["atomic_write", "atomic_path", "check_output_path"]

#: Longest part of the target's name put into the temporary name (names are limited to 255 bytes).
_MAX_PREFIX_CHARS = 100


def check_output_path(path: str | os.PathLike, *, directory: bool = False) -> None:
    """Raise now, with a message naming ``path``, what writing it later would raise.

    A file (``directory=False``): ``path`` is not a directory, and its directory exists and
    is writable. An output directory (``directory=True``): ``path`` is a writable directory,
    or does not exist and its nearest existing ancestor is a writable directory (it can be
    created). Run it before expensive work, so that a typo costs nothing.

    :raises IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError: with the fix

    >>> check_output_path("/nonexistent-i6-shard-dir/x.npz")
    Traceback (most recent call last):
    ...
    FileNotFoundError: cannot write '/nonexistent-i6-shard-dir/x.npz': directory '/nonexistent-i6-shard-dir' does not exist; create it or choose another path
    """
    path = os.fspath(path)
    if directory:
        if os.path.exists(path):
            if not os.path.isdir(path):
                raise NotADirectoryError(f"cannot write into {path!r}: it exists and is not a directory; "
                                         "remove it or choose another output directory")
            _check_writable_dir(path, target=path)
            return
        ancestor = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor):
            raise NotADirectoryError(f"cannot create {path!r}: {ancestor!r} is not a directory; "
                                     "choose another output directory")
        _check_writable_dir(ancestor, target=path)
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path!r}: it is a directory; give a file path")
    parent = os.path.dirname(path) or "."
    if not os.path.exists(parent):
        raise FileNotFoundError(f"cannot write {path!r}: directory {parent!r} does not exist; "
                                "create it or choose another path")
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"cannot write {path!r}: {parent!r} is not a directory; choose another path")
    _check_writable_dir(parent, target=path)


def _check_writable_dir(directory: str, *, target: str) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {target!r}: no permission to create files in {directory!r}; "
                              "make it writable or choose another path")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success it is renamed to ``path``,
    on error it is removed and ``path`` is left as it was.

    The temporary file is ``.NAME.<random>.tmp`` in the target's directory (the same file
    system, so the rename is atomic). A writer that is killed (SIGKILL, power loss) cannot
    remove it: such leftovers are never taken for output and are safe to delete when no
    writer runs. They are left alone here, since another process may still be writing one.

    :raises IsADirectoryError: if ``path`` is a directory
    :raises OSError: if no temporary file can be created next to ``path`` (the message names
        ``path`` and what to do)

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(d, "x.txt")) as tmp:
    ...     _ = open(tmp, "w").write("hi")
    >>> open(os.path.join(d, "x.txt")).read()
    'hi'
    >>> with atomic_path(d) as tmp:  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    IsADirectoryError: cannot write '...': it is a directory; give a file path
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path!r}: it is a directory; give a file path")
    dirname, basename = os.path.split(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{basename[:_MAX_PREFIX_CHARS]}.", suffix=".tmp", dir=dirname)
    except OSError as exc:
        raise _temp_file_error(exc, path=path, dirname=dirname) from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _temp_file_error(exc: OSError, *, path: str, dirname: str) -> OSError:
    """``exc`` from mkstemp, reworded to name the target instead of the temporary file."""
    if isinstance(exc, FileNotFoundError):
        why = f"directory {dirname!r} does not exist; create it or choose another path"
    elif isinstance(exc, NotADirectoryError):
        why = f"{dirname!r} is not a directory; choose another path"
    elif isinstance(exc, PermissionError):
        why = f"no permission to create files in {dirname!r}; make it writable or choose another path"
    else:
        why = (f"cannot create a temporary file in {dirname!r} ({exc.strerror or exc}); "
               "check free space and permissions, or choose another path")
    new = type(exc)(f"cannot write {path!r}: {why}")
    new.errno = exc.errno
    return new


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wt", **open_kwargs) -> Iterator[IO]:
    """Open a file for writing that appears under ``path`` only once it is complete
    (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())

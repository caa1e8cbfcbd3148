"""Atomic output files: write under a temporary name, then ``os.replace``, so a
killed process never leaves a file that could pass for a finished one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator

__all__ = ["atomic_write", "atomic_path"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success it is renamed to ``path``,
    on error it is removed and ``path`` is left as it was.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(d, "x.txt")) as tmp:
    ...     _ = open(tmp, "w").write("hi")
    >>> open(os.path.join(d, "x.txt")).read()
    'hi'
    """
    path = os.fspath(path)
    dirname, basename = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{basename}.", suffix=".tmp", dir=dirname)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wt", **open_kwargs) -> Iterator[IO]:
    """Open a file for writing that appears under ``path`` only once it is complete."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())

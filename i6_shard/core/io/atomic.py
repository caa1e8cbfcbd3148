"""Atomic outputs: a file is written under a temporary name and renamed, a set of files is built in a
temporary directory and swapped in whole, so a killed process never leaves output that could pass
for a finished one, and a reader never sees a mix of two runs."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import tempfile
from typing import IO, Collection, Iterator, List, Optional

__all__ = ["atomic_write", "atomic_dir", "check_output_path", "check_output_dir"]

#: Longest part of the target's name put into the temporary name (names are limited to 255 bytes).
_MAX_PREFIX_CHARS = 100
#: Write errors that say the device is full: the message names the target instead of the temporary file.
_FULL = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for this file system",
}
#: The errnos that say a device (a quota, a file size limit) is full.
FULL_DEVICE_ERRNOS = frozenset(_FULL)
#: The attribute a reworded full-device error carries: the file it could not write (its final name).
WRITTEN_PATH_ATTR = "i6_shard_written_path"


def full_device_reason(code: int) -> str:
    """What a full-device errno means here: EFBIG under a finite ``ulimit -f`` (RLIMIT_FSIZE; Python ignores
    SIGXFSZ, so the write fails with EFBIG) is this process's file size limit, not the file system's.

    >>> full_device_reason(errno.ENOSPC)
    'no space left on device'
    """
    if code == errno.EFBIG:
        try:
            import resource

            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        except (ImportError, OSError, ValueError):
            limit = -1
        if limit not in (-1, getattr(resource, "RLIM_INFINITY", -1)):
            return f"larger than this process's file size limit (ulimit -f, {limit:,} bytes)"
    return _FULL[code]


def full_device_fix(code: int, reason: str) -> str:
    """The fix of a full-device error of ``reason`` (:func:`full_device_reason`)."""
    if code == errno.EFBIG and "ulimit -f" in reason:
        return "raise the limit (ulimit -f unlimited) or choose a smaller output"
    return "free some space or choose another path"


#: Entries of an output directory listed in an error before the rest is only counted.
_MAX_LISTED_ENTRIES = 5
#: The file :func:`atomic_dir` writes into every set it swaps in, naming what the set is: only a directory that
#: holds it (with the same ``what``) is an earlier set that may be replaced; a folder that merely holds files of
#: the same names is the user's, and is never deleted.
SET_MARKER = ".i6_shard-set"


def _not_a_directory(path: str) -> str:
    """Why ``path``, which exists (maybe as a link only), cannot be an output directory, and the fix."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as exc:  # ELOOP: a loop; ENOENT: a missing target
            why = "a loop" if exc.errno == errno.ELOOP else "its target is missing"
            return (
                f"it is a symbolic link that leads nowhere ({why}); remove the link or choose another output directory"
            )
        return "it is a symbolic link to a file, not a directory; remove the link or choose another output directory"
    return "it exists and is not a directory; remove it or choose another output directory"


def check_output_path(
    path: str | os.PathLike, *, directory: bool = False, suffix: Optional[str] = None, kind: str = "output"
) -> None:
    """Raise now, with a message naming ``path``, what writing it later would raise.

    A file (``directory=False``): ``path`` is not a directory, and its directory exists and
    is writable. An output directory (``directory=True``): ``path`` is a writable directory,
    or does not exist and its nearest existing ancestor is a writable directory (it can be
    created). Run it before expensive work, so that a typo costs nothing.

    :param suffix: the extension the file's format has (e.g. ``".npz"``): another one is refused
    :param kind: what the file is, for the message about the extension (e.g. "file sizes archive")
    :raises IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError: with the fix
    :raises ValueError: if ``path`` does not end in ``suffix``

    >>> check_output_path("/nonexistent-i6-shard-dir/x.npz")
    Traceback (most recent call last):
    ...
    FileNotFoundError: cannot write '/nonexistent-i6-shard-dir/x.npz': directory '/nonexistent-i6-shard-dir' does not exist; create it or choose another path
    """
    path = os.fspath(path)
    if directory:
        if os.path.exists(path):
            if not os.path.isdir(path):
                raise NotADirectoryError(f"cannot write into {path!r}: {_not_a_directory(path)}")
            _check_writable_dir(path, target=path)
            return
        ancestor = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(ancestor):  # a link that leads nowhere stops here too: it cannot be created
            ancestor = os.path.dirname(ancestor)
        if os.path.islink(ancestor) and not os.path.isdir(ancestor):
            raise NotADirectoryError(f"cannot create {path!r}: {ancestor!r}: {_not_a_directory(ancestor)}")
        if not os.path.isdir(ancestor):
            raise NotADirectoryError(
                f"cannot create {path!r}: {ancestor!r} is not a directory; choose another output directory"
            )
        _check_writable_dir(ancestor, target=path)
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path!r}: it is a directory; give a file path")
    parent = os.path.dirname(path) or "."
    if os.path.islink(parent) and not os.path.isdir(parent):
        raise NotADirectoryError(f"cannot write {path!r}: {parent!r}: {_not_a_directory(parent)}")
    if not os.path.exists(parent):
        raise FileNotFoundError(
            f"cannot write {path!r}: directory {parent!r} does not exist; create it or choose another path"
        )
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"cannot write {path!r}: {parent!r} is not a directory; choose another path")
    _check_writable_dir(parent, target=path)
    if suffix is not None:
        check_suffix(path, suffix=suffix, kind=kind)


def check_suffix(path: str | os.PathLike, *, suffix: str, kind: str) -> None:
    """Refuse a file name whose extension is not the one of its format (no zip bytes under ``.json``).

    >>> check_suffix("out.json", suffix=".npz", kind="file sizes archive")
    Traceback (most recent call last):
    ...
    ValueError: cannot write 'out.json': a file sizes archive is a .npz file, but the name ends in '.json'; give a name ending in .npz, e.g. 'out.npz'
    """
    path = os.fspath(path)
    if path.endswith(suffix) and len(os.path.basename(path)) > len(suffix):
        return
    stem, ext = os.path.splitext(path)
    has = f"the name ends in {ext!r}" if ext else "the name has no extension"
    raise ValueError(
        f"cannot write {path!r}: a {kind} is a {suffix} file, but {has}; give a name ending in "
        f"{suffix}, e.g. {(stem if ext else path) + suffix!r}"
    )


def _check_writable_dir(directory: str, *, target: str) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(
            f"cannot write {target!r}: no permission to create files in {directory!r}; "
            "make it writable or choose another path"
        )


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
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        full = _full_device_error(exc, path=path)
        if full is not None:
            raise full from None
        raise


def _full_device_error(exc: BaseException, *, path: str) -> Optional[OSError]:
    """``exc`` reworded to name ``path`` if it says the device is full (ENOSPC, EDQUOT, EFBIG), else None.

    >>> print(_full_device_error(OSError(errno.ENOSPC, "No space left on device"), path="/out/plan.npz"))
    cannot write '/out/plan.npz': no space left on device; free some space or choose another path (nothing was written there)
    """
    if not isinstance(exc, OSError) or exc.errno not in _FULL:
        return None
    reason = full_device_reason(exc.errno)
    new = type(exc)(
        f"cannot write {path!r}: {reason}; {full_device_fix(exc.errno, reason)} (nothing was written there)"
    )
    new.errno = exc.errno
    setattr(new, WRITTEN_PATH_ATTR, path)
    return new


def _temp_file_error(exc: OSError, *, path: str, dirname: str) -> OSError:
    """``exc`` from mkstemp, reworded to name the target instead of the temporary file."""
    if isinstance(exc, FileNotFoundError):
        why = f"directory {dirname!r} does not exist; create it or choose another path"
    elif isinstance(exc, NotADirectoryError):
        why = f"{dirname!r} is not a directory; choose another path"
    elif isinstance(exc, PermissionError):
        why = f"no permission to create files in {dirname!r}; make it writable or choose another path"
    else:
        why = (
            f"cannot create a temporary file in {dirname!r} ({exc.strerror or exc}); "
            "check free space and permissions, or choose another path"
        )
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


def _is_leftover(entry: str, names: Collection[str]) -> bool:
    """A temporary file that a killed :func:`atomic_path` writer left for one of ``names``."""
    return (
        entry.startswith(".")
        and entry.endswith(".tmp")
        and any(entry.startswith(f".{n.rstrip('/')[:_MAX_PREFIX_CHARS]}.") for n in names)
    )


def check_output_dir(path: str | os.PathLike, *, names: Collection[str], what: str = "output set") -> None:
    """Raise now what :func:`atomic_dir` would raise later: ``path`` must be a new directory, an
    empty one, or one that holds only ``names`` (an earlier run's set, which is replaced whole),
    must not be the working directory or hold it, and its parent must let a sibling be created.

    :param names: the files of the set, and its directories with a trailing ``/`` (e.g. ``"data/"``)
    :param what: what the set is, for the messages (e.g. "plan directory")
    :raises NotADirectoryError, IsADirectoryError, PermissionError, FileNotFoundError, ValueError: naming
        ``path`` and the fix

    >>> import tempfile
    >>> d = tempfile.mkdtemp(); _ = open(os.path.join(d, "notes.txt"), "w").close()
    >>> check_output_dir(d, names=["plan.npz"], what="plan directory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: cannot write the plan directory '...': it holds 1 entry that is not part of it ('notes.txt'); ...
    """
    path = os.fspath(path)
    target = os.path.realpath(path)
    cwd = os.path.realpath(os.getcwd())
    if target == os.path.dirname(target) or cwd == target or cwd.startswith(target.rstrip(os.sep) + os.sep):
        raise ValueError(
            f"cannot write the {what} {path!r}: it is the working directory, or holds it, and is "
            "replaced whole; give a new directory, e.g. a subdirectory"
        )
    if os.path.lexists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"cannot write the {what} {path!r}: {_not_a_directory(path)}")
    if not os.path.isdir(target):
        check_output_path(path, directory=True)
        return
    if os.path.ismount(target):
        raise ValueError(
            f"cannot write the {what} {path!r}: it is a mount point, which cannot be replaced; "
            "give a directory inside it"
        )
    entries = sorted(os.listdir(target))
    others = _entries_not_of_the_set(path, entries, names=names, what=what)
    if others:
        shown = ", ".join(repr(e[:100]) for e in others[:_MAX_LISTED_ENTRIES])
        more = f" and {len(others) - _MAX_LISTED_ENTRIES} more" if len(others) > _MAX_LISTED_ENTRIES else ""
        raise ValueError(
            f"cannot write the {what} {path!r}: it holds {len(others)} "
            f"entr{'y' if len(others) == 1 else 'ies'} that {'is' if len(others) == 1 else 'are'} not part of "
            f"it ({shown}{more}); the {what} is replaced whole, so give a new or empty directory, or one that an "
            f"earlier run wrote (it holds only {', '.join(sorted(names))})"
        )
    named = [e for e in entries if e != SET_MARKER and not _is_leftover(e, names)]
    if named and _marker_of(target) != what:
        shown = ", ".join(repr(e[:100]) for e in named[:_MAX_LISTED_ENTRIES])
        raise ValueError(
            f"cannot write the {what} {path!r}: it holds {shown}{' ...' if len(named) > _MAX_LISTED_ENTRIES else ''} "
            f"but was not written as a {what} by i6_shard (no {SET_MARKER} naming it); a {what} is replaced whole, "
            "which would delete these files: give a new or empty directory, or move them away"
        )
    parent = os.path.dirname(target)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(
            f"cannot write the {what} {path!r}: no permission to create files in {parent!r}, "
            "where the new set is built before it replaces the old one; make it writable or "
            "choose another output directory"
        )


def _entries_not_of_the_set(path: str, entries: List[str], *, names: Collection[str], what: str) -> List[str]:
    """The ``entries`` of the directory ``path`` that are not part of the set ``names`` (nor leftovers of writing
    it), as :func:`check_output_dir` takes them.

    :raises IsADirectoryError, NotADirectoryError: for an entry of the set that is of the other kind
    """
    files = {n for n in names if not n.endswith("/")} | {SET_MARKER}
    dirs = {n.rstrip("/") for n in names if n.endswith("/")}
    others = []
    for entry in entries:
        full = os.path.join(path, entry)
        if entry in files and os.path.isdir(full) and not os.path.islink(full):
            raise IsADirectoryError(
                f"cannot write {full!r}: it is a directory, not a file of an earlier {what}; "
                "remove it or choose another output directory"
            )
        if entry in dirs and not os.path.isdir(full):
            raise NotADirectoryError(
                f"cannot write {full!r}: it is not a directory, as in an earlier {what}; "
                "remove it or choose another output directory"
            )
        if entry not in files and entry not in dirs and not _is_leftover(entry, names):
            others.append(entry)
    return others


def _marker_of(directory: str) -> Optional[str]:
    """What the set in ``directory`` is, as its :data:`SET_MARKER` names it; None without a readable marker."""
    marker = os.path.join(directory, SET_MARKER)
    try:
        if os.path.islink(marker) or not os.path.isfile(marker) or os.path.getsize(marker) > 1024:
            return None
        with open(marker, encoding="utf-8") as f:
            return f.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _new_sibling(parent: str, base: str, suffix: str) -> str:
    """Create an empty directory ``.BASE.<random>SUFFIX`` in ``parent`` (mode from the umask, as ``mkdir``)."""
    for _ in range(100):
        name = os.path.join(parent, f".{base[:_MAX_PREFIX_CHARS]}.{secrets.token_hex(4)}{suffix}")
        try:
            os.mkdir(name)
            return name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", os.path.join(parent, f".{base}.*{suffix}"))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, names: Collection[str], what: str = "output set") -> Iterator[str]:
    """Yield a new, empty temporary directory next to ``path``; on success it takes the place of
    ``path`` as a whole, on error it is removed and ``path`` is left as it was.

    The set is built in ``.NAME.<random>.tmp`` beside ``path`` (same file system) and swapped in
    with one atomic ``renameat2(RENAME_EXCHANGE)`` (Linux 3.15+ on ext4, xfs, btrfs, tmpfs, ...), so a
    reader of ``path`` finds the earlier set or this one, never a mix or a part; the earlier set is
    then deleted. Where the exchange is not supported (e.g. NFS), the earlier set is first renamed
    away and this one renamed in: a reader may then find no ``path`` for that moment, and a writer
    killed right between the two renames leaves none, with the earlier set as ``.NAME.<random>.old``.
    Concurrent writers each swap in a whole set; the last one stays. A killed writer leaves its
    ``.tmp`` directory, never under ``path``'s name. The set holds :data:`SET_MARKER`, naming ``what``: only
    such a directory is replaced later, never a folder that merely holds files of the same names.

    :param names: the entries the set may hold (see :func:`check_output_dir`, run first)
    :raises OSError: naming ``path``, e.g. when the device is full

    >>> import tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "out")
    >>> for text in ("first", "second"):
    ...     with atomic_dir(out, names=["a.txt"]) as tmp:
    ...         _ = open(os.path.join(tmp, "a.txt"), "w").write(text)
    >>> sorted(os.listdir(out)), open(os.path.join(out, "a.txt")).read(), len(os.listdir(os.path.dirname(out)))
    (['.i6_shard-set', 'a.txt'], 'second', 1)
    """
    path = os.fspath(path)
    check_output_dir(path, names=names, what=what)
    target = os.path.realpath(path)
    parent, base = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    try:
        tmp = _new_sibling(parent, base, ".tmp")
    except OSError as exc:
        raise _temp_file_error(exc, path=path, dirname=parent) from None
    try:
        yield tmp
        with open(os.path.join(tmp, SET_MARKER), "w", encoding="utf-8") as f:
            f.write(what + "\n")
        check_output_dir(path, names=names, what=what)  # again: a user may have put a file there meanwhile
        _swap_in(tmp, target)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            new = _renamed(exc, tmp=tmp, path=path)
            if new is not exc:
                raise new from None
        raise


def _renamed(exc: OSError, *, tmp: str, path: str) -> OSError:
    """``exc`` with the set's temporary directory called by its final name ``path``, and a full device
    reworded as :func:`atomic_path` does, naming the file under ``path``."""
    text = str(exc)
    if tmp not in text and getattr(exc, WRITTEN_PATH_ATTR, None) is not None:
        return exc  # names the file it could not write already (one outside the set: a scratch file)
    if tmp in text:
        new = type(exc)(text.replace(tmp, path))
        new.errno = exc.errno
        new.__dict__.update(exc.__dict__)  # what the error carries (the file, the bytes needed)
        written = getattr(exc, WRITTEN_PATH_ATTR, None)
        if written is not None:
            setattr(new, WRITTEN_PATH_ATTR, written.replace(tmp, path))
        return new
    name = exc.filename if isinstance(exc.filename, str) else ""
    inside = os.path.abspath(name).startswith(tmp + os.sep) if name else False
    full = _full_device_error(
        exc, path=os.path.join(path, os.path.relpath(os.path.abspath(name), tmp)) if inside else path
    )
    return exc if full is None else full


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (``renameat2(..., RENAME_EXCHANGE)``); False where not supported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, or not Linux
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swap_in(tmp: str, target: str) -> None:
    """Put directory ``tmp`` at ``target``; an earlier directory there is replaced and deleted."""
    parent, base = os.path.split(target)
    while True:
        try:
            os.rename(tmp, target)  # no target, or an empty one
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        try:
            if _exchange(tmp, target):
                shutil.rmtree(tmp, ignore_errors=True)  # now the earlier set
                return
        except FileNotFoundError:
            continue  # another writer took the earlier set away meanwhile
        old = _new_sibling(parent, base, ".old")
        try:
            os.rename(target, old)  # replaces the empty ``old``
        except FileNotFoundError:
            os.rmdir(old)
            continue
        try:
            os.rename(tmp, target)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            shutil.rmtree(old, ignore_errors=True)
            continue  # another writer's set arrived in between: swap again
        shutil.rmtree(old, ignore_errors=True)
        return

"""Cheap facts about a job's inputs, learned before any heavy read: that a path is a regular file
(by stat, with no open that could block), the entry count in a sizes archive's header, a digest
of a file list's entries, and entries that share RETURNN's file key."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import zipfile
from typing import List, Optional, Sequence


from ..pure.file_tree import FileTree, leaves_and_keys
from ..pure.text import short_repr
from .npz import read_npy_header

__all__ = ["check_regular_file", "archive_entry_count", "file_list_digest", "check_key_collisions"]

#: Groups of colliding entries listed in an error.
_MAX_LISTED = 3
#: Entries JSON-encoded per digest update (bounds the memory of the digest of a huge list).
_DIGEST_CHUNK = 4096
_FILE_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, from its ``st_mode``, for messages.

    >>> import os; file_kind(os.stat("/").st_mode)
    'a directory'
    """
    return next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")


def check_regular_file(path: str | os.PathLike, *, what: str = "file list") -> os.stat_result:
    """The stat of ``path`` (following symlinks) if it is a regular file. Nothing is opened, so a
    FIFO, a device or a directory is refused without blocking or reading.

    :param what: what the path should be, for the messages (e.g. "file list")
    :raises FileNotFoundError: if ``path`` does not exist (or is a dangling symlink)
    :raises ValueError: if it is a directory, FIFO, device or socket, naming which

    >>> check_regular_file("/dev/null", what="file list")
    Traceback (most recent call last):
    ...
    ValueError: file list '/dev/null' is a character device, not a regular file (reading it could block, or never end); give the path of a regular file
    """
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {short_repr(path)} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{what} {short_repr(path)} cannot be stat-ed: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        why = "" if stat.S_ISDIR(st.st_mode) else " (reading it could block, or never end)"
        raise ValueError(
            f"{what} {short_repr(path)} is {file_kind(st.st_mode)}, not a regular file{why}; give the "
            "path of a regular file"
        )
    return st


def archive_entry_count(path: str | os.PathLike, *, member: str = "sizes") -> Optional[int]:
    """The length of the 1-D array ``member`` of an ``.npz`` archive, from the header of its
    ``.npy`` member alone (a few hundred bytes inflated, not the data); None if ``path`` is not a
    regular file or not such an archive (whoever loads it then says why).

    >>> archive_entry_count("/dev/null") is None
    True
    """
    try:
        check_regular_file(path, what="archive")
        with zipfile.ZipFile(os.fspath(path)) as zf, zf.open(member + ".npy") as f:
            shape, _, _ = read_npy_header(f)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if len(shape) != 1:
        return None
    return int(shape[0])


def file_list_digest(trees: Sequence[FileTree]) -> str:
    """A digest (SHA-256, hex) of a file list's entries in order: equal lists give equal digests,
    and any changed, added, removed or moved entry another. Each entry counts as its JSON (sorted
    dict keys, tuples as lists), as a list file would hold it.

    >>> file_list_digest(["/a", ("/b", "/c")]) == file_list_digest(["/a", ["/b", "/c"]])
    True
    >>> file_list_digest(["/a", "/b"]) == file_list_digest(["/b", "/a"])
    False
    """
    encode = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
    digest = hashlib.sha256(b"i6_shard file list digest 1\n")
    for start in range(0, len(trees), _DIGEST_CHUNK):
        chunk = trees[start : start + _DIGEST_CHUNK]
        digest.update(("".join(encode(t) + "\n" for t in chunk)).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def key_collisions(leaves_per_tree: Sequence[Sequence[str]], keys: Sequence[str]) -> List[List[int]]:
    """Groups of entries that share RETURNN's file key (the leaves joined with ``":"``) but not
    their leaves, e.g. ``"a:b"`` and ``("a", "b")``. RETURNN keeps one size per key, so such
    entries get one size between them. Equal entries (duplicates) are not collisions.

    :param leaves_per_tree: the leaves of each entry (``core.pure.leaves_and_keys``)
    :param keys: the key of each entry
    :return: per colliding key, the indices of its entries (in list order), keys by first entry

    >>> key_collisions(*leaves_and_keys(["a:b", "c", ("a", "b"), "a:b"]))
    [[0, 2, 3]]
    >>> key_collisions(*leaves_and_keys(["a:b", "a:b", ("c", "d")]))
    []
    """
    # Only a leaf holding ":" makes a key ambiguous: without one, the key splits back into the leaves.
    suspects = {key for leaves, key in zip(leaves_per_tree, keys) if key.count(":") != len(leaves) - 1}
    if not suspects:
        return []
    groups = {}
    for idx, key in enumerate(keys):
        if key in suspects:
            groups.setdefault(key, []).append(idx)
    return [idxs for idxs in groups.values() if len({tuple(leaves_per_tree[i]) for i in idxs}) > 1]


def check_key_collisions(
    trees: Sequence[FileTree], *, where: str = "file list", leaves_and_keys_: Optional[tuple] = None
) -> None:
    """Raise ``ValueError`` if entries of ``trees`` share RETURNN's file key but not their leaves
    (see :func:`key_collisions`): RETURNN would silently give them one size, that of the last.

    :param where: what the list is, for the message (e.g. the list file's path)
    :param leaves_and_keys_: ``core.pure.leaves_and_keys(trees)`` if already computed

    >>> check_key_collisions(["/d/a:b", ("/d/a", "b")])
    Traceback (most recent call last):
    ...
    ValueError: file list has 1 RETURNN file key shared by entries with different files: entries 0 ('/d/a:b') and 1 (('/d/a', 'b')) share key '/d/a:b'. DistributeFilesDataset keys a file tree by its file names joined with ':', and keeps one size per key, so it would give these entries one size between them. Rename the files whose names hold ':', then compute the sizes again.
    """
    leaves_per_tree, keys = leaves_and_keys_ if leaves_and_keys_ is not None else leaves_and_keys(trees)
    groups = key_collisions(leaves_per_tree, keys)
    if not groups:
        return
    listed = []
    for idxs in groups[:_MAX_LISTED]:
        first = idxs[0]
        other = next(i for i in idxs if tuple(leaves_per_tree[i]) != tuple(leaves_per_tree[first]))
        listed.append(
            f"entries {first} ({short_repr(trees[first])}) and {other} ({short_repr(trees[other])}) "
            f"share key {short_repr(keys[first])}"
        )
    more = f" (first {_MAX_LISTED} listed)" if len(groups) > _MAX_LISTED else ""
    raise ValueError(
        f"{where} has {len(groups)} RETURNN file key{'s' if len(groups) > 1 else ''} shared by entries with "
        f"different files{more}: {'; '.join(listed)}. DistributeFilesDataset keys a file tree by its file names "
        "joined with ':', and keeps one size per key, so it would give these entries one size between them. "
        "Rename the files whose names hold ':', then compute the sizes again."
    )

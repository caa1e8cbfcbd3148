"""Read and write file lists (.txt, .json, .py) exactly as RETURNN's
DistributeFilesDataset reads its ``files`` option from a path."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from typing import Any, List, Optional, Sequence

from .atomic import atomic_write
from .preflight import check_key_collisions, check_regular_file
from .returnn_py import RETURNN_OUT_SLACK, parse_returnn_py_literal, parse_with_output_size
from ..pure.file_tree import MAX_TREE_DEPTH, FileTree, check_file_trees, tree_depth
from ..pure.text import short_repr

__all__ = ["FILE_LIST_EXTENSIONS", "read_file_list", "write_file_list", "read_training_file_list"]

FILE_LIST_EXTENSIONS = (".txt", ".json", ".py")


def normalize_file_tree(tree: FileTree) -> FileTree:
    """The tree as it comes back from any list file: tuples become lists.

    JSON has no tuples, and RETURNN's native ``.py`` literal parser does not accept
    them either, so a list file always gives lists. The tree key is unchanged.

    >>> normalize_file_tree(("a", {"k": ("b",)}))
    ['a', {'k': ['b']}]
    """
    if isinstance(tree, (list, tuple)):
        return [normalize_file_tree(t) for t in tree]
    if isinstance(tree, dict):
        return {k: normalize_file_tree(v) for k, v in tree.items()}
    if isinstance(tree, str):
        return str.__str__(tree)  # a plain str: subclasses such as numpy.str_ have their own repr
    return tree


def _archive_kind(path: str) -> Optional[str]:
    """What an ``.npz`` archive of i6_shard at ``path`` is (a costs or sizes archive, a plan file), by its members;
    None for any other file (or none).

    >>> _archive_kind("/nonexistent.npz") is None
    True
    """
    try:
        if not (os.path.isfile(path) and zipfile.is_zipfile(path)):
            return None
        with zipfile.ZipFile(path) as zf:
            members = set(zf.namelist()[:1000])
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    if "orders.npy" in members:
        return "a plan file (.npz)"
    if "unit_utf8.npy" in members:
        return "a costs archive (.npz)"
    if "sizes.npy" in members:
        return "a sizes archive (.npz)"
    return "an .npz archive" if path.endswith(".npz") else None


def read_file_list(path: str | os.PathLike) -> List[FileTree]:
    """Read a file list as RETURNN's ``DistributeFilesDataset._lazy_init_file_list`` does.

    - ``.txt``: one file per line; lines are stripped, blank lines and lines
      starting with ``#`` are skipped (read in the locale's encoding, as RETURNN does).
    - ``.json``: a JSON list of file trees.
    - ``.py``: a Python literal list, parsed like RETURNN's native parser
      (``returnn.util.literal_py_to_pickle``): lists, dicts, sets, str, numbers and None,
      but no tuples, no ``True``/``False``, no comments before the list; what that
      parser rejects is rejected here too (see :func:`parse_returnn_py_literal`).

    Tuple trees never come back from a list file: JSON has no tuples and RETURNN's
    ``.py`` parser does not accept them; the tree key is the same either way.

    Only a regular file is read: it is stat-ed first, and opened without blocking, so a FIFO, a
    device (e.g. a link to ``/dev/zero``) or a directory is an error naming it, never a hang.
    A tree nested deeper than ``MAX_TREE_DEPTH`` levels is an error naming the file.

    :raises FileNotFoundError: if the list file does not exist
    :raises ValueError: on an unknown extension, a directory or other file that is not a regular file,
        unparsable content (a ``.txt`` list not in the locale's encoding included), content that is not a
        list, or one nested too deeply
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1]
    kind = _archive_kind(path) if ext not in FILE_LIST_EXTENSIONS else None
    if kind is not None:
        raise ValueError(
            f"file list {short_repr(path)} is {kind}, not a file list: give the list of files it was made from "
            f"(a {', '.join(FILE_LIST_EXTENSIONS)} file; `python -m i6_shard make-data` writes one as files.txt)"
        )
    if ext not in FILE_LIST_EXTENSIONS:
        raise ValueError(
            f"file list {short_repr(path)} has extension {ext[:20]!r}; RETURNN reads only "
            f"{', '.join(FILE_LIST_EXTENSIONS)}: rename it or convert it with write_file_list"
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"file list {short_repr(path)} does not exist") from None
    _check_regular(mode, path)
    if ext == ".txt":
        try:
            with _open_regular(path, "rt") as f:
                lines = f.readlines()
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"file list {path!r} is not valid {exc.encoding} text ({exc.reason} at byte {exc.start}); RETURNN "
                f"reads a .txt list in the locale's encoding (here {exc.encoding}): write the list as .json "
                "(write_file_list escapes any name)"
            ) from None
        stripped = (line.strip() for line in lines)
        return [line for line in stripped if line and not line.startswith("#")]
    try:
        if ext == ".json":
            with _open_regular(path, "rt") as f:
                files = json.load(f)
        else:
            with _open_regular(path, "rb") as f:
                files = parse_returnn_py_literal(f.read())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"file list {path!r} cannot be read as RETURNN reads a {ext} list: {exc}") from None
    except RecursionError:
        raise ValueError(
            f"file list {path!r} nests lists or dicts too deeply to parse; RETURNN's file trees are a "
            f"few levels deep (i6_shard takes at most {MAX_TREE_DEPTH}): fix the list"
        ) from None
    if not isinstance(files, list):
        raise ValueError(f"file list {path!r} holds a {type(files).__name__}, but RETURNN needs a list of file trees")
    for idx, tree in enumerate(files):
        depth = tree_depth(tree)
        if depth > MAX_TREE_DEPTH:
            raise ValueError(
                f"file list {path!r}: entry {idx} is nested more than {MAX_TREE_DEPTH} levels deep; "
                f"RETURNN's file trees are a few levels deep (i6_shard takes at most {MAX_TREE_DEPTH}): "
                "fix the list"
            )
    return files


def _check_regular(mode: int, path: str) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise ValueError(
            f"file list {short_repr(path)} is a directory; give the path of a "
            f"{'/'.join(FILE_LIST_EXTENSIONS)} file that lists the files"
        )
    kind = next(
        (
            name
            for test, name in (
                (stat.S_ISFIFO, "a FIFO (named pipe)"),
                (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"),
            )
            if test(mode)
        ),
        "not a regular file",
    )
    raise ValueError(
        f"file list {short_repr(path)} is {kind}, not a regular file; give the path of a "
        f"{'/'.join(FILE_LIST_EXTENSIONS)} file that lists the files (reading it could block or never end)"
    )


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _open_regular(path: str, mode: str):
    """``open(path, mode)`` that cannot block on a FIFO swapped in after the stat, and refuses it."""
    f = open(path, mode, opener=_nonblocking)
    try:
        _check_regular(os.fstat(f.fileno()).st_mode, path)
    except BaseException:
        f.close()
        raise
    return f


def read_training_file_list(path: str | os.PathLike) -> List[FileTree]:
    """The file trees of a list file that a DistributeFilesDataset can train on: a regular file (a FIFO would
    block), at least one entry, and no two entries RETURNN would give the same key; each problem named.

    :raises ValueError: naming the list and the problem
    """
    path = os.fspath(path)
    check_regular_file(path, what="file list")
    trees = read_file_list(path)
    if not trees:
        raise ValueError(
            f"file list {path!r} holds no entries (only blank or comment lines, or []); "
            "DistributeFilesDataset needs at least one file"
        )
    check_key_collisions(trees, where=f"file list {path!r}")
    return trees


def write_file_list(files: Sequence[FileTree], path: str | os.PathLike) -> None:
    """Write a file list that RETURNN reads back as the same list (tuples as lists).

    ``.txt`` only holds plain str entries that survive RETURNN's line handling
    (no line break, no surrounding blanks, no leading ``#``, valid UTF-8); use
    ``.json`` for anything else. ``.json`` and ``.py`` need str dict keys.
    A ``.py`` list is checked with :func:`parse_returnn_py_literal` and padded with
    trailing blanks where RETURNN's parser would otherwise run out of output buffer
    (many names over 255 bytes). The file is written atomically, in UTF-8.

    :raises ValueError: on an unknown extension, or an entry the format cannot hold
    """
    path = os.fspath(path)
    check_file_trees(files)
    ext = os.path.splitext(path)[1]
    if ext == ".txt":
        for idx, f in enumerate(files):
            problem = txt_entry_problem(f)
            if problem:
                shown = f" ({short_repr(f)})" if isinstance(f, str) else ""
                raise ValueError(f"file list entry {idx}{shown} {problem}; use a .json list")
        data = "".join(f + "\n" for f in files).encode("utf-8")
    elif ext in (".json", ".py"):
        normalized = [normalize_file_tree(t) for t in files]
        for idx, tree in enumerate(normalized):
            _check_str_keys(tree, idx=idx)
        if ext == ".json":
            # One entry per line; ASCII, so that the reader's locale does not matter.
            data = ("[\n" + ",\n".join(map(json.dumps, normalized)) + "\n]\n").encode("ascii")
        else:
            data = _py_list_bytes(normalized)
    else:
        raise ValueError(
            f"cannot write file list {path!r}: extension {ext!r} is not one of {', '.join(FILE_LIST_EXTENSIONS)}"
        )
    with atomic_write(path, "wb") as f:
        f.write(data)


def txt_entry_problem(entry: Any) -> str:
    """Why a ``.txt`` list cannot hold ``entry`` so that RETURNN reads it back unchanged
    (its reader strips lines and skips blank and ``#`` lines), or ``""`` if it can.

    >>> txt_entry_problem("/data/a.hdf"), txt_entry_problem(" a.hdf"), txt_entry_problem(("a", "b"))
    ('', "would not survive RETURNN's .txt parsing (line break, surrounding blanks or leading '#')", 'is a tuple, but a .txt list holds only str')
    """
    if not isinstance(entry, str):
        return f"is a {type(entry).__name__}, but a .txt list holds only str"
    if entry != entry.strip() or "\n" in entry or "\r" in entry or entry.startswith("#"):
        return "would not survive RETURNN's .txt parsing (line break, surrounding blanks or leading '#')"
    if not _is_utf8(entry):
        return "is not valid UTF-8 text"
    return ""


def _is_utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, e.g. from undecodable bytes in a file name
        return False
    return True


def _check_str_keys(tree: Any, *, idx: int) -> None:
    if isinstance(tree, dict):
        for k, v in tree.items():
            if not isinstance(k, str):
                raise ValueError(
                    f"file tree entry {idx} has dict key {short_repr(k)} of type {type(k).__name__}; "
                    "a .json or .py list needs str keys"
                )
            _check_str_keys(v, idx=idx)
    elif isinstance(tree, list):
        for v in tree:
            _check_str_keys(v, idx=idx)


def _py_list_bytes(normalized: List[Any]) -> bytes:
    """``repr`` of the list in UTF-8, checked with RETURNN's parser and padded as it needs."""
    data = repr(normalized).encode("utf-8", "surrogatepass")  # repr escapes lone surrogates anyway
    parsed, out_size = parse_with_output_size(data, check_buffer=False)
    assert parsed == normalized, "repr of the file list does not parse back identically"  # internal invariant
    # Trailing blanks are skipped by the parser but count as input, hence as room for output.
    return data + b"\n" * max(1, out_size - (len(data) + RETURNN_OUT_SLACK))

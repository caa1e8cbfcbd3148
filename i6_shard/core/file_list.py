"""Read and write file lists (.txt, .json, .py) exactly as RETURNN's
DistributeFilesDataset reads its ``files`` option from a path."""

from __future__ import annotations

import ast
import json
import os
from typing import Any, List, Sequence

from .atomic import atomic_write
from .file_tree import FileTree, check_file_trees

__all__ = ["FILE_LIST_EXTENSIONS", "read_file_list", "write_file_list", "normalize_file_tree"]

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
    return tree


def read_file_list(path: str | os.PathLike) -> List[FileTree]:
    """Read a file list as RETURNN's ``DistributeFilesDataset._lazy_init_file_list`` does.

    - ``.txt``: one file per line; lines are stripped, blank lines and lines
      starting with ``#`` are skipped.
    - ``.json``: a JSON list of file trees.
    - ``.py``: a Python literal list (RETURNN parses it with its native parser,
      which has no tuples; here ``ast.literal_eval`` reads the same files).

    :raises FileNotFoundError: if the list file does not exist
    :raises ValueError: on an unknown extension or content that is not a list
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1]
    if ext not in FILE_LIST_EXTENSIONS:
        raise ValueError(
            f"file list {path!r} has extension {ext!r}; RETURNN reads only {', '.join(FILE_LIST_EXTENSIONS)}: "
            "rename it or convert it with write_file_list"
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"file list {path!r} does not exist")
    if ext == ".txt":
        with open(path, "rt") as f:
            stripped = (line.strip() for line in f.readlines())
            return [line for line in stripped if line and not line.startswith("#")]
    with open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    try:
        files = json.loads(text) if ext == ".json" else ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"file list {path!r} is not a valid {ext} literal: {exc}") from None
    if not isinstance(files, list):
        raise ValueError(f"file list {path!r} holds a {type(files).__name__}, but RETURNN needs a list of file trees")
    if ext == ".py":
        files = [normalize_file_tree(t) for t in files]
    return files


def write_file_list(files: Sequence[FileTree], path: str | os.PathLike) -> None:
    """Write a file list that RETURNN reads back as the same list (tuples as lists).

    ``.txt`` only holds plain str entries that survive RETURNN's line handling
    (no newline, no surrounding blanks, no leading ``#``); use ``.json`` for
    anything else. The file is written atomically.

    :raises ValueError: on an unknown extension, or an entry ``.txt`` cannot hold
    """
    path = os.fspath(path)
    check_file_trees(files)
    ext = os.path.splitext(path)[1]
    if ext == ".txt":
        for idx, f in enumerate(files):
            if not isinstance(f, str):
                raise ValueError(f"file list entry {idx} is a {type(f).__name__}; a .txt list holds only str, use .json")
            if f != f.strip() or "\n" in f or "\r" in f or f.startswith("#"):
                raise ValueError(
                    f"file list entry {idx} ({f!r}) would not survive RETURNN's .txt parsing "
                    "(newline, surrounding blanks or leading '#'); use a .json list"
                )
        text = "".join(f + "\n" for f in files)
    elif ext == ".json":
        text = json.dumps([normalize_file_tree(t) for t in files], indent=0) + "\n"
    elif ext == ".py":
        text = repr([normalize_file_tree(t) for t in files]) + "\n"
    else:
        raise ValueError(
            f"cannot write file list {path!r}: extension {ext!r} is not one of {', '.join(FILE_LIST_EXTENSIONS)}"
        )
    with atomic_write(path, "wt", encoding="utf-8") as f:
        f.write(text)


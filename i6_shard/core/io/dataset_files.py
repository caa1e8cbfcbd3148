"""A DistributeFilesDataset's ``files`` option: how it is given and the list it loads, as RETURNN's
``DistributeFilesDataset._lazy_init_file_list`` reads it (an inline list, a list file, or a callable)."""

from __future__ import annotations

import os
from typing import Any, List

from .file_list import FILE_LIST_EXTENSIONS, read_file_list

__all__ = ["files_kind", "read_files"]


def files_kind(files: Any) -> str:
    """How a DistributeFilesDataset's ``files`` is given, as ``_lazy_init_file_list`` reads it:
    ``"inline"`` (a list), ``"callable"`` (called at run time, returns the list), ``"list_file"``
    (a .txt/.json/.py path, incl. Sisyphus paths) or ``"invalid"`` (RETURNN rejects it, e.g. a tuple).

    >>> files_kind(("a.hdf", "b.hdf")), files_kind("files.txt"), files_kind(["a.hdf"])
    ('invalid', 'list_file', 'inline')
    """
    if isinstance(files, list):
        return "inline"
    if callable(files) and not callable(getattr(files, "get_path", None)):
        return "callable"
    path = files.get_path() if callable(getattr(files, "get_path", None)) else files
    if isinstance(path, (str, os.PathLike)) and os.path.splitext(os.fspath(path))[1] in FILE_LIST_EXTENSIONS:
        return "list_file"
    return "invalid"


def read_files(files: Any) -> List[Any]:
    """The file list as ``DistributeFilesDataset._lazy_init_file_list`` loads it: an inline list as it
    is, a list file read (``core.read_file_list``), a callable called. Call it where the files
    exist (a job's task, RETURNN's process), not while a graph is built.

    :raises TypeError, ValueError: for what RETURNN would reject, naming it
    """
    kind = files_kind(files)
    if kind == "inline":
        return files
    if kind == "callable":
        out = files()
        if not isinstance(out, list):
            raise TypeError(
                f"files={files!r} returned a {type(out).__name__}; DistributeFilesDataset needs the "
                "callable to return a list of file trees"
            )
        return out
    if kind == "list_file":
        return read_file_list(files.get_path() if callable(getattr(files, "get_path", None)) else files)
    raise TypeError(
        f"files={files!r} ({type(files).__name__}) is neither a list, a callable returning one, nor "
        f"the path of a {'/'.join(FILE_LIST_EXTENSIONS)} list file; DistributeFilesDataset rejects it"
    )

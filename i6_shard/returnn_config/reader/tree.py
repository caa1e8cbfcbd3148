"""Walks over nested dataset options: the entries of nested dicts and lists (like dm-tree's
``tree.flatten_with_path``, which RETURNN uses on dataset dicts) and the file names in a file tree."""

from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Tuple


def _flatten_with_path(value: Any, path: Tuple[Any, ...] = ()) -> Iterator[Tuple[Tuple[Any, ...], Any]]:
    """(key path, value) of every dict entry in nested dicts/lists/tuples, like ``tree.flatten_with_path``."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield path + (k,), v
            yield from _flatten_with_path(v, path + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _flatten_with_path(v, path + (i,))


def _string_leaves(value: Any) -> Iterator[str]:
    """The file names in a file tree or file option (str, PathLike, Sisyphus path, nested lists/dicts)."""
    if isinstance(value, (str, os.PathLike)):
        yield os.fspath(value)
    elif callable(getattr(value, "get_path", None)):
        yield str(value.get_path())
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _string_leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _string_leaves(v)

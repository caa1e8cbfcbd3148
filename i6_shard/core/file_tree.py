"""File trees as RETURNN's DistributeFilesDataset takes them: a str, or nested
tuple/list/dict of str. Flattening and keys match dm-tree and RETURNN exactly."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple, Union

FileTree = Union[str, Tuple["FileTree", ...], List["FileTree"], Dict[Any, "FileTree"]]

__all__ = ["FileTree", "flatten", "tree_key", "check_file_trees"]


def flatten(tree: FileTree) -> List[str]:
    """Leaves of a file tree in dm-tree's order: lists and tuples in order,
    dicts by sorted key (as ``tree.flatten``, which RETURNN uses).

    :param tree: a str, or nested tuple/list/dict of them
    :return: the leaves

    >>> flatten(("feat.hdf", {"b": "b.hdf", "a": ["a1", "a2"]}))
    ['feat.hdf', 'a1', 'a2', 'b.hdf']
    >>> flatten("single.hdf")
    ['single.hdf']
    """
    if isinstance(tree, str):
        return [tree]
    out: List[str] = []
    _flatten_into(tree, out)
    return out


def _flatten_into(tree: Any, out: List[str]) -> None:
    if isinstance(tree, str):
        out.append(tree)
    elif isinstance(tree, dict):
        for k in sorted(tree):
            _flatten_into(tree[k], out)
    elif isinstance(tree, (list, tuple)):
        for sub in tree:
            _flatten_into(sub, out)
    else:
        # dm-tree would treat it as a leaf; RETURNN then fails joining or stat-ing it.
        out.append(tree)


def tree_key(tree: FileTree) -> str:
    """RETURNN's ``_get_key_for_file_tree``: the leaves joined with ``":"``.

    Keys are not unique for every pair of trees (``"a:b"`` and ``("a", "b")``
    share one); RETURNN has the same property and so does i6_shard.

    >>> tree_key(("/data/align.1.hdf", "/data/feat.1.hdf"))
    '/data/align.1.hdf:/data/feat.1.hdf'
    """
    return ":".join(flatten(tree))


def check_file_trees(trees: Sequence[Any]) -> None:
    """Reject what RETURNN would choke on later (or silently mis-handle) with an error
    naming the entry: non-str leaves, empty containers, empty strings, NUL bytes.

    :param trees: the ``files`` list of a DistributeFilesDataset
    :raises TypeError: on a non-list input or a non-str leaf
    :raises ValueError: on an empty container or an empty file name

    >>> check_file_trees(["a.hdf", ("b.hdf", "c.hdf")])
    >>> check_file_trees(["a.hdf", ("b.hdf", None)])
    Traceback (most recent call last):
    ...
    TypeError: file tree entry 1 has a leaf of type NoneType at [1]: None; leaves must be str (convert paths with str() or tk.Path.get_path())
    """
    if not isinstance(trees, (list, tuple)):
        raise TypeError(f"files must be a list of file trees, got {type(trees).__name__}")
    for idx, tree in enumerate(trees):
        _check_tree(tree, idx=idx, path=())


def _check_tree(tree: Any, *, idx: int, path: Tuple[Any, ...]) -> None:
    where = "".join(f"[{p!r}]" for p in path)
    if isinstance(tree, str):
        if not tree:
            raise ValueError(f"file tree entry {idx} has an empty file name{' at ' + where if where else ''}")
        if "\0" in tree:
            raise ValueError(f"file tree entry {idx} has a NUL byte in file name {tree!r}")
        return
    if isinstance(tree, dict):
        items = list(tree.items())
        if items and not all(isinstance(k, str) for k, _ in items):
            # dm-tree sorts keys; mixed key types would not even sort.
            try:
                sorted(tree)
            except TypeError:
                raise TypeError(f"file tree entry {idx} has dict keys that cannot be sorted: {list(tree)!r}") from None
    elif isinstance(tree, (list, tuple)):
        items = list(enumerate(tree))
    else:
        raise TypeError(
            f"file tree entry {idx} has a leaf of type {type(tree).__name__} at {where or 'top level'}: {tree!r}; "
            "leaves must be str (convert paths with str() or tk.Path.get_path())"
        )
    if not items:
        raise ValueError(
            f"file tree entry {idx} has an empty {type(tree).__name__} at {where or 'top level'}; "
            "every entry needs at least one file"
        )
    for k, sub in items:
        _check_tree(sub, idx=idx, path=path + (k,))

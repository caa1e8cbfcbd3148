"""File trees as RETURNN's DistributeFilesDataset takes them: a str, or nested
tuple/list/dict of str. Flattening and keys match dm-tree and RETURNN exactly."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from .text import short_repr

#: Deepest file tree accepted (lists in lists ...); RETURNN's file trees are a few levels deep.
MAX_TREE_DEPTH = 100

FileTree = Union[str, Tuple["FileTree", ...], List["FileTree"], Dict[Any, "FileTree"]]

__all__ = ["flatten", "tree_key", "check_file_trees", "leaves_and_keys"]


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
    flatten_file_trees(trees)


def flatten_file_trees(trees: Sequence[Any]) -> List[Sequence[str]]:
    """Check every entry like :func:`check_file_trees` and return its leaves like
    :func:`flatten`, in one pass that is fast for the common flat entries.

    :param trees: the ``files`` list of a DistributeFilesDataset
    :return: the leaves of each entry, in ``tree.flatten`` order (do not modify them)
    :raises TypeError: on a non-list input or a non-str leaf
    :raises ValueError: on an empty container or an empty file name

    >>> [list(leaves) for leaves in flatten_file_trees(["a", ("b", "c"), {"y": "d", "x": ["e"]}])]
    [['a'], ['b', 'c'], ['e', 'd']]
    >>> flatten_file_trees([["a", ""]])
    Traceback (most recent call last):
    ...
    ValueError: file tree entry 0 has an empty file name at [1]
    """
    return leaves_and_keys(trees)[0]


def leaves_and_keys(trees: Sequence[Any]) -> Tuple[List[Sequence[str]], List[str]]:
    """:func:`flatten_file_trees` and the :func:`tree_key` of every entry, checked in one pass.

    >>> leaves_and_keys([("a", "b"), "c"])
    ([('a', 'b'), ('c',)], ['a:b', 'c'])
    """
    if not isinstance(trees, (list, tuple)):
        raise TypeError(f"files must be a list of file trees, got {type(trees).__name__}")
    leaves_per_tree: List[Sequence[str]] = []
    keys: List[str] = []
    add_leaves = leaves_per_tree.append
    add_key = keys.append
    for idx, tree in enumerate(trees):
        cls = type(tree)
        if cls is str and tree:
            add_leaves((tree,))
            add_key(tree)
            continue
        if (cls is tuple or cls is list) and tree:
            try:
                key = ":".join(tree)  # succeeds only if every item is a str: a flat entry
            except TypeError:
                pass
            else:
                if "" not in tree:
                    add_leaves(tree)
                    add_key(key)
                    continue
        _check_tree(tree, idx=idx, path=())
        leaves = flatten(tree)
        add_leaves(leaves)
        add_key(":".join(leaves))
    # NUL bytes in flat entries, checked for all entries at once at C speed.
    if "\0" in "".join(keys):
        for idx, tree in enumerate(trees):
            _check_tree(tree, idx=idx, path=())
    return leaves_per_tree, keys


def _check_tree(tree: Any, *, idx: int, path: Tuple[Any, ...]) -> None:
    where = short_repr("".join(f"[{p!r}]" for p in path))[1:-1]
    if isinstance(tree, str):
        if not tree:
            raise ValueError(f"file tree entry {idx} has an empty file name{' at ' + where if where else ''}")
        if "\0" in tree:
            raise ValueError(f"file tree entry {idx} has a NUL byte in file name {short_repr(tree)}")
        return
    if isinstance(tree, dict):
        items = list(tree.items())
        if items and not all(isinstance(k, str) for k, _ in items):
            # dm-tree sorts keys; mixed key types would not even sort.
            try:
                sorted(tree)
            except TypeError:
                raise TypeError(
                    f"file tree entry {idx} has dict keys that cannot be sorted: {short_repr(list(tree))}"
                ) from None
    elif isinstance(tree, (list, tuple)):
        items = list(enumerate(tree))
    else:
        raise TypeError(
            f"file tree entry {idx} has a leaf of type {type(tree).__name__} at {where or 'top level'}: "
            f"{short_repr(tree)}; "
            "leaves must be str (convert paths with str() or tk.Path.get_path())"
        )
    if not items:
        raise ValueError(
            f"file tree entry {idx} has an empty {type(tree).__name__} at {where or 'top level'}; "
            "every entry needs at least one file"
        )
    for k, sub in items:
        _check_tree(sub, idx=idx, path=path + (k,))


def tree_depth(tree: object, *, limit: int = MAX_TREE_DEPTH) -> int:
    """How deeply lists, tuples and dicts nest in ``tree`` (a str: 0), walked without recursion;
    counting stops a level beyond ``limit``.

    >>> tree_depth("a"), tree_depth(["a", ("b", {"k": ["c"]})]), tree_depth([[[[]]]], limit=2)
    (0, 4, 3)
    """
    deepest = 0
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, tuple, dict)):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _frozen(tree: Any) -> Any:
    """A hashable value equal for equal trees (and only for them): a str is itself, a container a tagged tuple."""
    if type(tree) is str:
        return tree
    if isinstance(tree, dict):
        return ("d", frozenset((k, _frozen(v)) for k, v in tree.items()))
    return ("t" if isinstance(tree, tuple) else "l", tuple(_frozen(x) for x in tree))


class FileCatalog:
    """The distinct file trees of a training's logs, each held once under an int id, so that a list of files is an
    int32 array of ids (a record's list costs 4 bytes a file wherever it waits, and nothing while it waits on disk).
    Equal trees share an id; ``keys`` gives the ids of their keys (:func:`tree_key`; trees of one key share it).

    >>> c = FileCatalog()
    >>> c.ids_of(["a", ("b", "c"), "a"]).tolist(), c.ids_of(["b:c"]).tolist(), c.trees_of(np.array([1, 0]))
    ([0, 1, 0], [2], [('b', 'c'), 'a'])
    >>> key_of, keys = c.keys()
    >>> key_of.tolist(), keys
    ([0, 1, 1], ['a', 'b:c'])
    """

    def __init__(self):
        self.trees: List[FileTree] = []
        self._ids: Dict[Any, int] = {}
        #: one copy of each file name, for the reader of the log lines (``parse_files_literal``)
        self.names: Dict[str, str] = {}
        self._keys: Tuple[np.ndarray, List[str]] = (np.zeros(0, dtype=np.int32), [])
        self._key_ids: Dict[str, int] = {}

    def ids_of(self, files: Sequence[FileTree]) -> np.ndarray:
        """int32 [len(files)]: the id of each tree (new trees get the next ids)."""
        out = np.empty(len(files), dtype=np.int32)
        ids, trees = self._ids, self.trees
        for j, tree in enumerate(files):
            frozen = _frozen(tree)
            i = ids.get(frozen)
            if i is None:
                i = ids[frozen] = len(trees)
                trees.append(tree)
            out[j] = i
        return out

    def knows_all(self, files: Sequence[FileTree]) -> bool:
        """Whether every tree of ``files`` has an id already (:meth:`ids_of` would add none)."""
        ids = self._ids
        return all(_frozen(tree) in ids for tree in files)

    def __len__(self) -> int:
        return len(self.trees)

    def trees_of(self, ids: np.ndarray) -> List[FileTree]:
        trees = self.trees
        return [trees[i] for i in ids.tolist()]

    def keys(self) -> Tuple[np.ndarray, List[str]]:
        """``(key_of, keys)``: int32 [trees] the id of each tree's key, and the distinct keys by id."""
        key_of, keys = self._keys
        if len(key_of) < len(self.trees):
            more = np.empty(len(self.trees) - len(key_of), dtype=np.int32)
            for j, tree in enumerate(self.trees[len(key_of) :]):
                key = tree if type(tree) is str else tree_key(tree)
                more[j] = self._key_ids.setdefault(key, len(keys))
                if more[j] == len(keys):
                    keys.append(key)
            self._keys = (np.concatenate([key_of, more]), keys)
        return self._keys

    def key_id(self, key: str) -> int:
        """The id of ``key`` (-1: no tree of the logs has it); call :meth:`keys` first."""
        return self._key_ids.get(key, -1)

"""Binding the ``get_sub_epoch_dataset`` that i6_shard configs use to a sub-dataset template with
``functools.partial`` (picklable, hashable by Sisyphus), and checking where the files go; the function
itself, which puts each sub-epoch's files under the template's ``files`` keys, runs inside RETURNN
(:mod:`i6_shard.returnn_ext.sub_epoch`)."""

from __future__ import annotations

import functools
from typing import Any, Dict, Mapping, Tuple, Union

from .pycode import ImportRef

__all__ = ["FilesKey", "normalize_files_key"]

#: Where a list of files goes in the template: a key path, e.g. ``("files",)`` or
#: ``("datasets", "features", "files")`` for a MetaDataset.
Placement = Tuple[str, ...]
#: One placement for all files, or one per modality: ``{part of each file tree: placement}``,
#: with int parts for tuple/list trees and str parts for dict trees.
FilesKey = Union[str, Placement, Mapping[Union[int, str], Union[str, Placement]]]
#: Which files are wrapped in RETURNN's ``CachedFile``: all (True), none (False), or the named
#: modalities of ``files_key`` (e.g. ``(0,)``: the arrow shards of ``(arrow, hdf)`` trees).
CachedFiles = Union[bool, Tuple[Union[int, str], ...]]


def _normalize_placement(placement: Any, *, what: str) -> Placement:
    if isinstance(placement, str):
        placement = (placement,)
    if not isinstance(placement, tuple) or not placement or not all(isinstance(k, str) and k for k in placement):
        raise TypeError(
            f"{what}={placement!r} must be a key (str) or a key path (tuple of str), "
            "e.g. 'files' or ('datasets', 'features', 'files')"
        )
    return placement


def normalize_files_key(files_key: FilesKey) -> Union[Placement, Dict[Union[int, str], Placement]]:
    """``files_key`` in the one form ``get_sub_epoch_dataset`` is bound with (so that equal
    placements hash equally): a key path, or a dict ``{modality: key path}``.

    >>> normalize_files_key("files")
    ('files',)
    >>> normalize_files_key({0: ("datasets", "align", "files"), 1: ("datasets", "feat", "files")})
    {0: ('datasets', 'align', 'files'), 1: ('datasets', 'feat', 'files')}
    """
    if isinstance(files_key, Mapping):
        if not files_key:
            raise ValueError("files_key={} places no files; give a key such as 'files' or one placement per modality")
        out: Dict[Union[int, str], Placement] = {}
        for modality, placement in files_key.items():
            if isinstance(modality, bool) or not isinstance(modality, (int, str)):
                raise TypeError(
                    f"files_key modality {modality!r} must be an int (part of a tuple/list file tree) "
                    "or a str (key of a dict file tree)"
                )
            out[modality] = _normalize_placement(placement, what=f"files_key[{modality!r}]")
        if len({type(m) for m in out}) > 1:
            raise TypeError(
                f"files_key modalities {list(out)} mix int and str; file trees are either "
                "tuples/lists (int parts) or dicts (str parts)"
            )
        if len(set(out.values())) != len(out):
            raise ValueError(f"files_key {files_key!r} places two modalities at the same key path")
        return out
    return _normalize_placement(files_key, what="files_key")


def walk_to_parent(dataset: Any, placement: Placement, *, where: str) -> Dict[str, Any]:
    node = dataset
    for depth, key in enumerate(placement[:-1]):
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            raise ValueError(
                f"{where}: key path {placement!r} does not exist in the sub-epoch dataset template "
                f"(no dict at {placement[: depth + 1]!r}); add it to the template or fix files_key"
            )
        node = node[key]
    if not isinstance(node, dict):
        raise ValueError(f"{where}: the sub-epoch dataset template is not a dict")
    return node


def check_files_placement(template: Mapping[str, Any], files_key: FilesKey) -> None:
    """Check that every placement of ``files_key`` points into a dict of ``template`` and that
    no files are there yet (they would be silently replaced in every sub-epoch).

    >>> check_files_placement({"class": "HDFDataset", "files": ["x.hdf"]}, "files")
    Traceback (most recent call last):
    ...
    ValueError: the sub-epoch dataset template already has files at ('files',): ['x.hdf']; remove them, i6_shard puts each sub-epoch's files there
    """
    norm = normalize_files_key(files_key)
    placements = list(norm.values()) if isinstance(norm, dict) else [norm]
    for placement in placements:
        parent = walk_to_parent(template, placement, where="files_key")
        existing = parent.get(placement[-1])
        if existing not in (None, [], ()):
            raise ValueError(
                f"the sub-epoch dataset template already has files at {placement!r}: {existing!r}; "
                "remove them, i6_shard puts each sub-epoch's files there"
            )


def copy_structure(value: Any) -> Any:
    """Copy the dict/list/tuple structure; leaves (str, numbers, other objects) are shared."""
    if isinstance(value, dict):
        return {k: copy_structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_structure(v) for v in value]
    if type(value) is tuple:
        return tuple(copy_structure(v) for v in value)
    return value


def normalize_cached_file(cached_file: Any, files_key: FilesKey) -> CachedFiles:
    """``cached_file`` in the one form the function is bound with: a bool, or a sorted tuple of the
    modalities of ``files_key`` whose files are wrapped in ``CachedFile``.

    >>> normalize_cached_file([1, 0], {0: "a", 1: "b"}), normalize_cached_file(False, "files")
    ((0, 1), False)
    >>> normalize_cached_file((2,), {0: "a", 1: "b"})
    Traceback (most recent call last):
    ...
    ValueError: cached_file names modality 2, which files_key does not place (it places [0, 1])
    """
    if isinstance(cached_file, bool):
        return cached_file
    if not isinstance(cached_file, (list, tuple, set, frozenset)) or not cached_file:
        raise TypeError(
            f"cached_file={cached_file!r} has type {type(cached_file).__name__}; cached_file must be "
            "True or False, or a non-empty list of the modalities (files_key parts) to cache, e.g. [0]"
        )
    norm = normalize_files_key(files_key)
    if not isinstance(norm, dict):
        raise ValueError(
            f"cached_file={cached_file!r} names modalities, but files_key={files_key!r} places whole "
            "file trees; use cached_file=True, or give files_key one placement per modality"
        )
    for modality in cached_file:
        if modality not in norm:
            raise ValueError(
                f"cached_file names modality {modality!r}, which files_key does not place (it places "
                f"{sorted(norm, key=repr)})"
            )
    return tuple(sorted(set(cached_file)))  # all of one type, as files_key's modalities are


#: i6_shard's ``get_sub_epoch_dataset``, which runs inside RETURNN (:mod:`i6_shard.returnn_ext.sub_epoch`), by
#: reference: the builders bind it without importing it, and Sisyphus hashes it by the name it had before it moved
#: there, so no job id moved with it.
GET_SUB_EPOCH_DATASET = ImportRef(
    "i6_shard.returnn_ext.sub_epoch",
    "get_sub_epoch_dataset",
    kind="function",
    hash_as=("i6_shard.returnn_config.sub_epoch", "get_sub_epoch_dataset"),
)


def bind_sub_epoch_dataset(
    template: Mapping[str, Any], *, files_key: FilesKey = "files", cached_file: Any = False
) -> functools.partial:
    """``get_sub_epoch_dataset`` bound to a template: what goes into the DFD dict.

    The template is checked (it must be a dataset dict with a ``"class"``, the placements
    must exist and be empty) and its dict/list structure copied, so later changes to the
    caller's dict do not leak in. The function is bound by reference (:data:`GET_SUB_EPOCH_DATASET`), so
    binding it imports nothing of RETURNN; the result pickles as that function and Sisyphus hashes it by
    function name and arguments.

    >>> p = bind_sub_epoch_dataset({"class": "HDFDataset", "seq_ordering": "random"})
    >>> p.func.qualname, p.keywords["files_key"], p(["x.hdf"])["files"]
    ('get_sub_epoch_dataset', ('files',), ['x.hdf'])
    """
    if not isinstance(template, Mapping) or "class" not in template:
        raise TypeError(
            f"sub_epoch_dataset must be a dataset dict with a 'class', e.g. "
            f"{{'class': 'HDFDataset', 'seq_ordering': 'random'}}, got {template!r}"
        )
    cached_file = normalize_cached_file(cached_file, files_key)
    check_files_placement(template, files_key)
    return functools.partial(
        GET_SUB_EPOCH_DATASET,
        template=copy_structure(dict(template)),
        files_key=normalize_files_key(files_key),
        cached_file=cached_file,
    )


def is_sub_epoch_partial(value: Any) -> bool:
    """Whether ``value`` is a ``get_sub_epoch_dataset`` bound by :func:`bind_sub_epoch_dataset`."""
    return isinstance(value, functools.partial) and value.func == GET_SUB_EPOCH_DATASET

"""The ``get_sub_epoch_dataset`` of i6_shard configs, which RETURNN's DistributeFilesDataset calls with each
sub-epoch's files: a copy of the sub-dataset template with the files, split per modality, under its ``files``
keys (bound by :func:`i6_shard.returnn_config.sub_epoch.bind_sub_epoch_dataset`)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Union

from ..returnn_config.sub_epoch import CachedFiles, FilesKey, copy_structure, walk_to_parent, normalize_files_key

__all__ = ["get_sub_epoch_dataset"]


def _wrap_cached(tree: Any, cached_file_cls: Any) -> Any:
    if isinstance(tree, str):
        return cached_file_cls(tree)
    if isinstance(tree, dict):
        return {k: _wrap_cached(v, cached_file_cls) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_wrap_cached(v, cached_file_cls) for v in tree)
    return tree


def _select(tree: Any, modality: Union[int, str], *, idx: int) -> Any:
    try:
        if isinstance(modality, int) and isinstance(tree, (list, tuple)):
            return tree[modality]
        if isinstance(modality, str) and isinstance(tree, dict):
            return tree[modality]
    except (IndexError, KeyError):
        pass
    raise ValueError(
        f"file tree {idx} of this sub-epoch ({tree!r}) has no part {modality!r}, "
        "which files_key places; every entry of the file list needs every modality"
    )


def get_sub_epoch_dataset(
    files_subepoch: Sequence[Any],
    *,
    template: Mapping[str, Any],
    files_key: FilesKey = ("files",),
    cached_file: CachedFiles = False,
) -> Dict[str, Any]:
    """The sub-epoch dataset dict for RETURNN's ``DistributeFilesDataset``: a copy of
    ``template`` with this sub-epoch's files at ``files_key``.

    With one placement, the file trees go there as they are. With one placement per
    modality (like the alignments + features example in RETURNN's DistributeFilesDataset
    docstring), part ``m`` of every tree goes to ``files_key[m]``, in sub-epoch order.
    With ``cached_file=True``, every file name is wrapped in RETURNN's ``CachedFile``; with a tuple of
    modalities, only the files of those modalities (e.g. cache the arrow shards, not the HDFs).
    Bind it with :func:`bind_sub_epoch_dataset`; RETURNN then calls it with the files only.

    >>> get_sub_epoch_dataset(["a.hdf", "b.hdf"], template={"class": "HDFDataset", "seq_ordering": "random"})
    {'class': 'HDFDataset', 'seq_ordering': 'random', 'files': ['a.hdf', 'b.hdf']}
    >>> meta = {"class": "MetaDataset", "seq_order_control_dataset": "align",
    ...         "datasets": {"align": {"class": "HDFDataset"}, "feat": {"class": "HDFDataset"}}}
    >>> get_sub_epoch_dataset([("a1", "f1"), ("a2", "f2")], template=meta,
    ...     files_key={0: ("datasets", "align", "files"), 1: ("datasets", "feat", "files")})["datasets"]
    {'align': {'class': 'HDFDataset', 'files': ['a1', 'a2']}, 'feat': {'class': 'HDFDataset', 'files': ['f1', 'f2']}}
    """
    norm = normalize_files_key(files_key)
    dataset = copy_structure(dict(template))
    wrap = None
    if cached_file:
        from returnn.util.file_cache import CachedFile

        wrap = CachedFile
    files = list(files_subepoch)
    if isinstance(norm, dict):
        for modality, placement in norm.items():
            parts: List[Any] = [_select(t, modality, idx=i) for i, t in enumerate(files)]
            parent = walk_to_parent(dataset, placement, where="get_sub_epoch_dataset")
            cache_this = wrap is not None and (cached_file is True or modality in cached_file)
            parent[placement[-1]] = [_wrap_cached(p, wrap) for p in parts] if cache_this else parts
    else:
        parent = walk_to_parent(dataset, norm, where="get_sub_epoch_dataset")
        parent[norm[-1]] = [_wrap_cached(t, wrap) for t in files] if wrap else files
    return dataset

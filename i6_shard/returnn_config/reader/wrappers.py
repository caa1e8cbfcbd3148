"""RETURNN's wrapper datasets: which datasets each builds with ``init_dataset(..., parent_dataset=self)``
(``MetaDataset``, ``CombinedDataset``, ``ConcatDataset``, ``MultiProcDataset``, ``PostprocessingDataset``,
``VariableDataset``, ...), what it passes them, and why RETURNN fails with a DistributeFilesDataset inside some."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional, Sequence, Tuple

from .rules import ShardRule

if TYPE_CHECKING:
    from .context import _Context
    from .info import DistributeFilesDatasetInfo


#: Where each wrapper dataset of RETURNN keeps the datasets it builds with
#: ``init_dataset(..., parent_dataset=self)``: an option holding one dataset dict, a dict of them
#: (only those named in ``data_map`` are built) or a list; ``VariableDataset`` calls ``get_dataset``.
WRAPPER_CHILDREN: Mapping[str, str] = {
    "MetaDataset": "datasets",
    "CombinedDataset": "datasets",
    "ConcatDataset": "datasets",
    "MultiProcDataset": "dataset",
    "PostprocessingDataset": "dataset",
    "MultiEpochDataset": "dataset",
    "ClusteringDataset": "dataset",
    "ConcatSeqsDataset": "dataset",
    "ChunkShuffleDataset": "dataset",
    "VariableDataset": "get_dataset",
}


#: Wrappers whose ``supports_sharding()`` is Dataset's (False): ``Dataset.init_seq_order`` asserts
#: ``_num_shards == 1`` for them, e.g. under torch's ``dataset_distribution="shard"``.
_SHARDING_UNSUPPORTED = (
    "CombinedDataset",
    "ConcatDataset",
    "MultiEpochDataset",
    "ClusteringDataset",
    "ConcatSeqsDataset",
    "ChunkShuffleDataset",
    "VariableDataset",
)


#: MultiProcDataset's own named arguments; every other of its options is a default of its dataset.
_MULTI_PROC_OWN = ("dataset", "num_workers", "buffer_size", "sharding_method", "_meta_info_cache", "class")


#: What every parent passes down itself (``_dataset_extend_default_kwargs_from_parent_dataset``).
_INHERITED = ("random_seed_offset", "_num_shards", "_shard_index")


#: ``(key path, child dict, why RETURNN fails with a DistributeFilesDataset there, defaults, workers)``
_Child = Tuple[Tuple[Any, ...], Any, Optional[str], Mapping[str, Any], int]


def _children(
    dataset: Mapping[str, Any], name: str, path: Tuple[Any, ...], shards: ShardRule, ctx: _Context
) -> Iterator[_Child]:
    """``(key path, child dict, why RETURNN fails with a DistributeFilesDataset there, defaults, workers)``
    for the datasets a wrapper builds with ``init_dataset(..., parent_dataset=self)``."""
    key = WRAPPER_CHILDREN.get(name)
    special = _CHILDREN_OF.get(name)
    if special is not None:
        yield from special(dataset, path)
    elif key is not None:
        yield path + (key,), dataset.get(key), None, {}, 1
    else:  # another wrapper: any option holding a dataset dict is taken as built with parent_dataset=self
        for k, v in dataset.items():
            if isinstance(v, Mapping) and "class" in v:
                yield path + (k,), v, None, {}, 1
            elif isinstance(v, Mapping):
                for k2, v2 in v.items():
                    if isinstance(v2, Mapping) and "class" in v2:
                        yield path + (k, k2), v2, None, {}, 1


def _meta_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The datasets of a MetaDataset named in its ``data_map``."""
    # MetaDataset.init_seq_order: the seq_order_control_dataset's get_current_seq_order, the others by seq_list.
    fails = (
        "MetaDataset orders its datasets by get_current_seq_order or seq_list, which "
        "DistributeFilesDataset does not implement"
    )
    yield from _dict_children(dataset, path, "datasets", _used_keys(dataset, meta=True), fails)


def _combined_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The datasets of a CombinedDataset named in its ``data_map``."""
    fails = None
    if dataset.get("seq_ordering", "default") != "interleave":
        fails = (
            "CombinedDataset re-inits its datasets with a seq_order (every seq_ordering but "
            "'interleave'), which DistributeFilesDataset does not support"
        )
    yield from _dict_children(dataset, path, "datasets", _used_keys(dataset, meta=False), fails)


def _concat_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The datasets of a ConcatDataset, in order."""
    for idx, child in enumerate(dataset.get("datasets") or ()):
        yield path + ("datasets", idx), child, None, {}, 1


def _multi_proc_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The dataset of a MultiProcDataset, with its other options as defaults and its workers."""
    # MultiProcDataset.__init__: its other options become defaults of the dataset; "dedicated" gives
    # each worker its own shard, "seq_order" hands seq orders to the workers.
    defaults = {k: v for k, v in dataset.items() if k not in _MULTI_PROC_OWN + _INHERITED}
    method = dataset.get("sharding_method", "seq_order")
    num_workers = dataset.get("num_workers", 1)
    instead = (
        "put the MultiProcDataset inside the sub-epoch dataset (get_sub_epoch_dataset) instead, or "
        "load in parallel with torch_dataloader_opts num_workers"
    )
    fails = None
    if method != "dedicated":
        fails = (
            "MultiProcDataset's sharding_method 'seq_order' needs get_current_seq_order, which "
            f"DistributeFilesDataset does not implement; {instead}"
        )
    elif not isinstance(num_workers, int) or num_workers > 1:
        # MultiProcDataset._collect_single_seq takes seq i from worker i % num_workers, so every worker
        # must hold as many seqs as the others (+-1); with its own bins of files, each holds what they hold.
        fails = (
            f"MultiProcDataset's sharding_method 'dedicated' with num_workers={num_workers!r} gives each "
            "worker its own files (_num_shards x num_workers) but takes the sequences round-robin "
            "(_collect_single_seq: seq i from worker i % num_workers), so it gets a None sequence mid-epoch "
            f"once a worker's files hold fewer sequences than the others'; {instead}"
        )
    workers = num_workers if method == "dedicated" else 1
    yield path + ("dataset",), dataset.get("dataset"), fails, defaults, workers if isinstance(workers, int) else 1


def _postprocessing_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The dataset of a PostprocessingDataset."""
    yield (
        path + ("dataset",),
        dataset.get("dataset"),
        "PostprocessingDataset asks its dataset for data dtypes before any epoch, which "
        "DistributeFilesDataset cannot answer",
        {},
        1,
    )


def _variable_children(dataset: Mapping[str, Any], path: Tuple[Any, ...]) -> Iterator[_Child]:
    """The dataset a VariableDataset's ``get_dataset`` gives for epoch 1 (none if it raises)."""
    get_dataset = dataset.get("get_dataset")
    if callable(get_dataset):
        try:
            child = get_dataset(self=None, epoch=1)
        except Exception:  # noqa: BLE001 -- user code, may need the dataset object
            return
        fails = None
        if isinstance(child, Mapping) and isinstance(child.get("files"), list):
            fails = (
                "VariableDataset makes the dataset dict hashable, which turns the files list into a "
                "tuple that DistributeFilesDataset rejects; give files as a list file or a callable"
            )
        yield path + ("get_dataset(epoch=1)",), child, fails, {}, 1


#: What :func:`_children` gives for the wrappers with their own rule.
_CHILDREN_OF = {
    "MetaDataset": _meta_children,
    "CombinedDataset": _combined_children,
    "ConcatDataset": _concat_children,
    "MultiProcDataset": _multi_proc_children,
    "PostprocessingDataset": _postprocessing_children,
    "VariableDataset": _variable_children,
}


def _used_keys(dataset: Mapping[str, Any], *, meta: bool) -> Optional[set]:
    data_map = dataset.get("data_map")
    if not isinstance(data_map, Mapping):
        return None
    try:
        return {v[0] for v in data_map.values()} if meta else {k[0] for k in data_map}
    except (TypeError, IndexError, KeyError):
        return None


def _dict_children(
    dataset: Mapping[str, Any], path: Tuple[Any, ...], key: str, used: Optional[set], fails: Optional[str]
):
    children = dataset.get(key)
    if isinstance(children, Mapping):
        for k in sorted(children, key=str):
            if used is None or k in used:
                yield path + (key, k), children[k], fails, {}, 1


def unknown_wrappers(records: Sequence[DistributeFilesDatasetInfo]) -> List[str]:
    """Class names of enclosing datasets that the reader has no rule for (read as plain parents)."""
    return sorted({w for r in records for w in r.wrappers if w not in WRAPPER_CHILDREN})

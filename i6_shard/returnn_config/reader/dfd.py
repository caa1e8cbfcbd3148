"""A DistributeFilesDataset's settings, as its ``__init__``, ``init_seq_order`` and ``_get_sub_dataset_dict``
use them: the record the reader makes of one (:func:`_dfd_info`)."""

from __future__ import annotations


import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...core.io import files_kind
from ...core.pure import UNKNOWN_SEQ_ORDERING, check_sub_epoch_seq_ordering
from .classes import _is_i6_shard_class, dataset_class_name
from .context import _Context
from .info import DistributeFilesDatasetInfo
from .inherit import _Given, _name, _own_seed, _own_shards
from .rules import ShardRule
from .sub_dataset import _FILE_KEYS, _sub_epoch_dataset, _sub_from_user_function
from .tree import _flatten_with_path, _string_leaves


def _dfd_info(
    dataset: Mapping[str, Any], path: Tuple[Any, ...], given: _Given, ctx: _Context
) -> DistributeFilesDatasetInfo:
    """The DistributeFilesDataset's settings, as its ``__init__``, ``init_seq_order`` and
    ``_get_sub_dataset_dict`` use them."""
    notes: List[str] = []
    opts = {**given.defaults, **dataset}
    distrib = opts.get("distrib_shard_files", False)
    if not isinstance(distrib, bool):
        raise TypeError(f"{_name(path)}: distrib_shard_files={distrib!r} must be True or False")
    sharding_fix = opts.get("sharding_fix")
    if sharding_fix is not None and not isinstance(sharding_fix, bool):
        raise TypeError(f"{_name(path)}: sharding_fix={sharding_fix!r} must be True, False or None")
    shards, fails = _dfd_shards(dataset, given, ctx, path=path, distrib=distrib)
    custom = ctx.dfd_custom_sharding(distrib_shard_files=distrib, shards=shards)
    seed = _own_seed(dataset, given, ctx, custom_sharding=custom, path=path)
    seq_ordering = opts.get("seq_ordering")
    if seq_ordering is None:
        seq_ordering = ctx.batching if given.role == "train" and not given.wrappers and ctx.batching else "default"
    partition_epoch = opts.get("partition_epoch") or 1
    files = dataset.get("files")
    kind = files_kind(files)
    if kind == "invalid" and not fails:
        fails = f"files={files!r} is neither a list, a callable, nor a .txt/.json/.py list file"
    sub_epoch = _sub_epoch_facts(dataset, kind=kind, notes=notes)  # may add notes
    fails = _dedicated_clash(fails or _sub_epoch_order_failure(sub_epoch["sub_epoch_dataset"]), distrib, given, ctx)
    fixed_seed = opts.get("fixed_random_seed")
    return DistributeFilesDatasetInfo(
        key_path=path,
        dataset=dataset,
        class_name=dataset_class_name(dataset.get("class")) or "?",
        is_i6_shard=_is_i6_shard_class(dataset.get("class")),
        role=given.role,
        wrappers=given.wrappers,
        files_kind=kind,
        num_files=len(files) if kind == "inline" else None,
        partition_epoch=partition_epoch,
        seq_ordering=seq_ordering,
        distrib_shard_files=distrib,
        distributed=ctx.distributed,
        dataset_distribution=ctx.dataset_distribution,
        shards=shards,
        seed=seed,
        fixed_random_seed=fixed_seed,
        sharding_fix=sharding_fix,
        behavior_version=ctx.behavior_version,
        batch_slicing=ctx.distributed == "horovod" and ctx.dataset_distribution == "shard" and given.role == "train",
        returnn_fails=fails,
        num_ranks=ctx.num_ranks,
        notes=tuple(notes),
        process_behavior_version=given.behavior_version,
        reading_process=given.process,
        epoch_multiplier=given.epoch_multiplier,
        config_engine=ctx.engine,
        duplicate_workers=ctx.duplicate_workers.get(given.role),
        **sub_epoch,
    )


def _dfd_shards(
    dataset: Mapping[str, Any], given: _Given, ctx: _Context, *, path: Tuple[Any, ...], distrib: bool
) -> Tuple[ShardRule, Optional[str]]:
    """The DistributeFilesDataset's :class:`ShardRule` (``distrib_shard_files``, DataLoader workers), and why
    RETURNN fails with it (the given reason, else a clash of ``distrib_shard_files`` with the given sharding)."""
    shards = _own_shards(dataset, given, path)
    fails = given.fails
    if distrib:
        # DistributeFilesDataset.__init__: the given sharding must be none or the distributed one.
        if not (shards.shards_per_rank == 1 and (shards.per_rank or shards.fixed == (1, 0))):
            fails = fails or (
                f"distrib_shard_files=True clashes with _num_shards/_shard_index "
                f"{shards.fixed if not shards.per_rank else 'W, r'} x {shards.shards_per_rank} "
                f"from {shards.source}"
            )
        shards = ShardRule(
            per_rank=True, shards_per_rank=1, source=shards.source if shards.per_rank else "distrib_shard_files"
        )
    if ctx.loader_workers > 1 and given.role == "train" and not given.wrappers:
        shards = shards.with_workers(
            ctx.loader_workers, loader=True
        )  # ReturnnDatasetIterDataPipe.reset -> set_sharding
    return shards, fails


def _sub_epoch_facts(dataset: Mapping[str, Any], *, kind: str, notes: List[str]) -> Dict[str, Any]:
    """What the reader can tell of the sub-epoch dataset (``_get_sub_dataset_dict``) before RETURNN runs: the
    ``sub_epoch_*`` fields of :class:`DistributeFilesDatasetInfo` (``kind``: how ``files`` is given)."""
    files = dataset.get("files")
    sub = _sub_epoch_dataset(dataset, notes)
    explicit = None if sub is None else ("_num_shards" in sub or "_shard_index" in sub)
    sub_entries = list(_flatten_with_path(sub)) if sub is not None else []
    bin_files = (
        set(_string_leaves(files[0])) if kind == "inline" and files and _sub_from_user_function(dataset) else set()
    )
    return dict(
        sub_epoch_dataset=sub,
        sub_epoch_explicit_shards=explicit,
        sub_epoch_constant_files=tuple(
            sorted(
                {
                    f
                    for path, v in sub_entries
                    if path[-1] in _FILE_KEYS
                    for f in _string_leaves(v)
                    if f not in bin_files
                }
            )
        ),
        sub_epoch_cache_manager=any(path[-1] == "use_cache_manager" and v for path, v in sub_entries),
        sub_epoch_epoch_wise_filter=any(path[-1] == "epoch_wise_filter" and v for path, v in sub_entries),
    )


def _sub_epoch_order_failure(sub: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why RETURNN fails on a ``seq_ordering`` str of the sub-epoch dataset (``Dataset.get_seq_order_for_epoch``, when
    its first sub-epoch starts), or None.

    >>> _sub_epoch_order_failure({"class": "HDFDataset", "seq_ordering": "laplace:x"})[:57]
    "when a sub-epoch starts: the sub-epoch dataset's seq_orde"
    """
    for path, value in _flatten_with_path(sub or {}):
        if path[-1] != "seq_ordering" or not isinstance(value, str):
            continue
        try:
            if value == UNKNOWN_SEQ_ORDERING:  # i6_shard's word for an order not known, not RETURNN's
                raise ValueError(f"seq_ordering={value!r} is not one RETURNN's get_seq_order_for_epoch knows")
            check_sub_epoch_seq_ordering(value)
        except ValueError as exc:
            return f"when a sub-epoch starts: the sub-epoch dataset's {exc}"
    return None


def _dedicated_clash(fails: Optional[str], distrib_shard_files: Any, given: _Given, ctx: _Context) -> Optional[str]:
    """Why RETURNN fails on this setup, as it fails first (the one reason every judge gives). A MultiProcDataset
    ``"dedicated"`` with several workers around a DistributeFilesDataset with ``distrib_shard_files`` fails at
    start-up, before any sequence: each worker's copy gets ``_num_shards`` = the MultiProcDataset's own times
    ``num_workers`` (``_get_worker_sharding``), and ``DistributeFilesDataset.__init__`` refuses a
    ``(_num_shards, _shard_index)`` other than ``(1, 0)`` or the distributed ``(size, rank)``."""
    dedicated = re.search(r"sharding_method 'dedicated' with num_workers=(\d+) ", fails or "")
    wrappers = given.wrappers
    if not (dedicated and distrib_shard_files and ctx.distributed and wrappers and wrappers[-1] == "MultiProcDataset"):
        return fails
    n = int(dedicated[1])
    own = "num_ranks" if ctx.dataset_distribution == "shard" else "1"
    return (
        f"at start-up: MultiProcDataset's sharding_method 'dedicated' gives the DistributeFilesDataset in each "
        f"of its {n} workers _num_shards = {own} * {n} (the MultiProcDataset's own _num_shards times its workers) "
        f"and _shard_index = its own * {n} + worker, which clashes with distrib_shard_files, which shards by the "
        "distributed rank and size: DistributeFilesDataset.__init__ raises ValueError ('distrib_shard_files "
        f"shards the files by the distributed rank r / size W, which clashes with _num_shards ...') in a "
        "worker; put the MultiProcDataset inside the sub-epoch dataset (get_sub_epoch_dataset) instead, or load "
        "in parallel with torch_dataloader_opts num_workers"
    )

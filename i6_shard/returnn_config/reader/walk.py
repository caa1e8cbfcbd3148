"""The walk over a RETURNN config or dataset dict: every DistributeFilesDataset at any depth inside wrapper
datasets, read as RETURNN's ``__main__.load_data`` (``train``, ``dev``, ``eval``) and the torch engine
(``eval_datasets``) load them (:func:`find_distribute_files_datasets`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from ...core.pure import check_optional_int
from .classes import dataset_class_name, is_distribute_files_dataset
from .context import DATASET_DICT_CONTEXT, _Context
from .dfd import _dfd_info
from .engine import _worker_behavior_version
from .info import DistributeFilesDatasetInfo
from .inherit import _Given, _name, _own_seed, _own_shards
from .rules import ShardRule
from .wrappers import _SHARDING_UNSUPPORTED, _children

#: Config keys RETURNN's ``__main__.init_data`` loads, with the defaults it loads them with.
_TOP_LEVEL_KEYS = ("train", "dev", "eval")


#: ``Dataset.get_default_kwargs_eval``'s default seq order (dev/eval only).
_EVAL_SEQ_ORDERING = "sorted"


def _walk(
    dataset: Any, path: Tuple[Any, ...], given: _Given, ctx: _Context, out: List[DistributeFilesDatasetInfo]
) -> None:
    if not isinstance(dataset, Mapping):
        return
    cls = dataset.get("class")
    if is_distribute_files_dataset(dataset):
        out.append(_dfd_info(dataset, path, given, ctx))
        return
    name = dataset_class_name(cls) or "?"
    seed = _own_seed(dataset, given, ctx, custom_sharding=False, path=path)
    shards = _own_shards(dataset, given, path)
    # What the children get from this wrapper (init_dataset(..., parent_dataset=self)): its
    # random_seed_offset and _num_shards/_shard_index, named after it unless they came from further up.
    here = f"wrapper {_name(path)}"
    child_seed = dataclasses.replace(seed, source=here) if seed.source in ("default", "dataset") else seed
    child_shards = dataclasses.replace(shards, source=here) if shards.source in ("default", "dataset") else shards
    fails = given.fails
    if not fails and name in _SHARDING_UNSUPPORTED and shards.more_than_one(ctx.num_ranks if ctx.distributed else 1):
        fails = (
            f"{name} does not support sharding, but gets _num_shards > 1 (from {shards.source}); "
            "RETURNN asserts in init_seq_order"
        )
    bv, process, multiplier = given.behavior_version, given.process, given.epoch_multiplier
    if name == "MultiProcDataset":  # its workers: NonDaemonicSpawnContext(SubProcCopyGlobalConfigPreInitFunc())
        bv = _worker_behavior_version(
            ctx.behavior_version if bv is None else bv, propagate=ctx.propagate_behavior_version
        )
        process = "MultiProcDataset worker"
    elif name == "MultiEpochDataset":  # MultiEpochDataset.init_seq_order: inner epochs (e-1)*M+1 .. e*M
        multi_epoch = dataset.get("multi_epoch")
        multiplier *= multi_epoch if isinstance(multi_epoch, int) and multi_epoch > 0 else 1
    base = _Given(
        defaults={},
        seed=child_seed,
        shards=child_shards,
        wrappers=given.wrappers + (name,),
        role=given.role,
        fails=fails,
        behavior_version=bv,
        process=process,
        epoch_multiplier=multiplier,
    )
    for child_path, child, fails, child_defaults, workers in _children(dataset, name, path, shards, ctx):
        _walk(
            child,
            child_path,
            dataclasses.replace(
                base, defaults=child_defaults, shards=base.shards.with_workers(workers), fails=base.fails or fails
            ),
            ctx,
            out,
        )


def _top_level(key: str, dataset: Mapping[str, Any], ctx: _Context, *, role: str) -> _Given:
    """``__main__.load_data``: ``name``, then ``Dataset.get_default_kwargs_train`` (train:
    ``_num_shards``/``_shard_index`` = W, r under torch's ``dataset_distribution="shard"``) or
    ``get_default_kwargs_eval`` (dev/eval: ``seq_ordering="sorted"``), under the dict's own options."""
    defaults: Dict[str, Any] = {}
    shards = None
    if role == "train" and ctx.distributed == "torch" and ctx.dataset_distribution == "shard":
        shards = ShardRule(per_rank=True, source="dataset_distribution shard")
    if role == "eval" and key in ("dev", "eval"):
        defaults["seq_ordering"] = _EVAL_SEQ_ORDERING
    return _Given(
        defaults=defaults,
        seed=None,
        shards=shards,
        wrappers=(),
        role=role,
        behavior_version=ctx.loader_behavior_version,
        process=ctx.loader_process,
    )


def find_distribute_files_datasets(
    config_or_dataset_dict: Mapping[str, Any],
    *,
    num_ranks: Optional[int] = None,
    config: Optional[Mapping[str, Any]] = None,
    returnn_version: Union[None, str, Callable[[str], bool]] = None,
) -> List[DistributeFilesDatasetInfo]:
    """Every DistributeFilesDataset in a RETURNN config or a dataset dict, at any depth, with the
    settings RETURNN gives it (one record each, in config order).

    A mapping with a ``"class"`` is a dataset dict, read as the train dataset of ``config`` (default
    :data:`DATASET_DICT_CONTEXT`: torch distributed with RETURNN's default ``dataset_distribution``);
    any other mapping is a RETURNN config (config and post_config merged): ``train``, ``dev``, ``eval``
    and ``eval_datasets`` are read as RETURNN loads them, other keys holding a dataset dict as datasets
    without defaults.

    :param num_ranks: number of training processes, if known
    :param config: for a dataset dict: the rest of its RETURNN config (``torch_distributed``,
        ``behavior_version``, ``dataset_random_seed_offset``, ...)
    :param returnn_version: the RETURNN release the training runs (``1.YYYYMMDD.HHMMSS``), whose seeds, DataLoader
        workers and ``dataset_distribution`` the records follow (``core.pure.RETURNN_FEATURES``); None: the newest's;
        where RETURNN runs, its features as detected there (``returnn_ext.version.has_feature``)

    >>> [(r.key_path, r.sharded, r.mechanism) for r in find_distribute_files_datasets(
    ...     {"torch_distributed": {"dataset_distribution": "shard"},
    ...      "train": {"class": "CombinedDataset", "seq_ordering": "interleave", "data_map": {("asr", "data"): "data"},
    ...                "datasets": {"asr": {"class": "DistributeFilesDataset", "files": ["a", "b"]}}}}, num_ranks=2)]
    [(('train', 'datasets', 'asr'), True, 'dataset_distribution shard')]
    """
    if not isinstance(config_or_dataset_dict, Mapping):
        raise TypeError(
            f"expected a RETURNN config or a dataset dict (a mapping), got {type(config_or_dataset_dict).__name__}"
        )
    num_ranks = check_optional_int(
        num_ranks, name="num_ranks", minimum=1, hint="number of training processes, if known; else leave it out"
    )
    out: List[DistributeFilesDatasetInfo] = []
    if "class" in config_or_dataset_dict:
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config has type {type(config).__name__}; give the RETURNN config dict or None")
        ctx = _Context.of(
            DATASET_DICT_CONTEXT if config is None else config, num_ranks=num_ranks, returnn_version=returnn_version
        )
        _walk(config_or_dataset_dict, (), _top_level("train", config_or_dataset_dict, ctx, role="train"), ctx, out)
        return out
    ctx = _Context.of(config_or_dataset_dict, num_ranks=num_ranks, returnn_version=returnn_version)
    for key, value in config_or_dataset_dict.items():
        if key in _TOP_LEVEL_KEYS and isinstance(value, Mapping):
            role = "train" if key == "train" else "eval"
            _walk(value, (key,), _top_level(key, value, ctx, role=role), ctx, out)
        elif key == "eval_datasets" and isinstance(value, Mapping):
            for name, sub in value.items():  # torch Engine: init_dataset(opts, default_kwargs={"name": ...})
                _walk(
                    sub,
                    (key, name),
                    _Given(
                        defaults={},
                        seed=None,
                        shards=None,
                        wrappers=(),
                        role="eval",
                        behavior_version=ctx.loader_behavior_version,
                        process=ctx.loader_process,
                    ),
                    ctx,
                    out,
                )
        elif isinstance(key, str) and isinstance(value, Mapping) and "class" in value:
            _walk(value, (key,), _Given(defaults={}, seed=None, shards=None, wrappers=(), role="other"), ctx, out)
    return out

"""The training's engine, read once from a config into one description (:func:`read_engine`, core's
``EngineSettings``), and the facts of RETURNN's torch engine that decide how a dataset is read: its batching and
filters (``Engine.__init__``, ``Engine._create_data_loader``, ``get_batching_iterable_dataset_from_config``), the
``dataset_distribution`` (``returnn.torch.distributed.get_dataset_distribution``), and the DataLoader workers that
read the train data (``create_data_loader_from_batches``, ``ReturnnDatasetIterDataPipe.reset``,
``SubProcCopyGlobalConfigPreInitFunc``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ...core import SyncMode
from ...core.pure import PLAN_OPTION_DEFAULTS, UNKNOWN_SEQ_ORDERING, EngineSettings, release_has
from ..torch_distributed import DATASET_DISTRIBUTIONS, check_torch_distributed
from .sync import _sync_rule
from .tree import _flatten_with_path


@dataclass(frozen=True)
class _EngineBatching:
    """How the torch engine batches the train data, as ``Engine.__init__`` (``min_seq_length``,
    ``max_seq_length``: ``LenFilterDataPipe`` drops sequences), ``Engine._create_data_loader``
    (``chunking``, ``online_shuffle_batches``), ``get_batching_iterable_dataset_from_config`` (``batch_size``
    or ``batch_size_train``, ``max_seqs``, ``packed_batch_size``, a custom ``torch_batching``) and
    ``Engine.train_epoch`` (``accum_grad_multiple_step``: an optimizer update, and a param sync count, every
    N steps) read them, and ``create_data_loader_from_batches`` (``num_workers`` of ``torch_dataloader_opts``: the
    DataLoader workers, whose batches interleave where there are several). None: not set. A building step of
    :func:`read_engine` only: the training's engine is the one description that returns.
    """

    batch_size: Any = None
    max_seqs: Any = None
    min_seq_length: Any = None
    max_seq_length: Any = None
    packed_batch_size: Any = None
    torch_batching: Any = None
    chunking: Any = None
    online_shuffle_batches: Any = None
    accum_grad_multiple_step: Any = None
    num_workers: Any = None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "_EngineBatching":
        def train(key):
            return config.get(f"{key}_train", config.get(key))

        return cls(
            batch_size=train("batch_size"),
            max_seqs=config.get("max_seqs"),
            min_seq_length=config.get("min_seq_length"),
            max_seq_length=config.get("max_seq_length"),
            packed_batch_size=train("packed_batch_size"),
            torch_batching=config.get("torch_batching"),
            chunking=config.get("chunking"),
            online_shuffle_batches=config.get("online_shuffle_batches"),
            accum_grad_multiple_step=config.get("accum_grad_multiple_step"),
            num_workers=_loader_opts(config).get("num_workers"),
        )


def _loader_opts(config: Mapping[str, Any]) -> Mapping[str, Any]:
    opts = config.get("torch_dataloader_opts") or {}
    return opts if isinstance(opts, Mapping) else {}


def sub_epoch_seq_ordering_of(sub_epoch_dataset: Any) -> Any:
    """The ``seq_ordering`` in which a sub-epoch dataset (the dict ``get_sub_epoch_dataset`` returns) yields each
    rank's sequences, as the plan's simulation takes it: an HDFDataset's own (RETURNN's default ``"default"``), the
    first ``random`` order found in any other dataset, else ``"unknown"`` (not a dict, a callable order, or a
    length-dependent order of a dataset the simulation does not mirror it for). A str RETURNN would fail on is
    returned as it is, for the plan request to refuse, naming it.

    >>> sub_epoch_seq_ordering_of({"class": "HDFDataset", "seq_ordering": "laplace:.20"})
    'laplace:.20'
    >>> sub_epoch_seq_ordering_of({"class": "MetaDataset", "datasets": {"a": {"seq_ordering": "sorted"}}})
    'unknown'
    """
    if not isinstance(sub_epoch_dataset, Mapping):
        return UNKNOWN_SEQ_ORDERING
    if sub_epoch_dataset.get("class") == "HDFDataset":
        order = sub_epoch_dataset.get("seq_ordering", "default")
        return order if isinstance(order, str) else UNKNOWN_SEQ_ORDERING
    orders = [v for path, v in _flatten_with_path(sub_epoch_dataset) if path[-1] == "seq_ordering"]
    order = orders[0] if orders else None
    random = isinstance(order, str) and order.split(":")[0] == PLAN_OPTION_DEFAULTS["sub_epoch_seq_ordering"]
    return order if random else UNKNOWN_SEQ_ORDERING


def _torch_dataset_distribution(opts: Mapping[str, Any], *, returnn_version: Optional[str] = None) -> str:
    """``returnn.torch.distributed.get_dataset_distribution`` of a ``torch_distributed`` that
    :func:`~i6_shard.returnn_config.torch_distributed.check_torch_distributed` accepted, on RETURNN
    ``returnn_version`` (None: the newest): a release without the option (``get_default_kwargs_train``) seeds every
    rank as ``"random_seed_offset"`` does (``rank * 16127``) and shards none (its DistributedContext refuses the
    option itself, which ``release.config_release_problems`` says).

    >>> _torch_dataset_distribution({"dataset_distribution": "shard"})
    'shard'
    >>> _torch_dataset_distribution({"dataset_distribution": "shard"}, returnn_version="1.20250115.110555")
    'random_seed_offset'
    """
    if release_has(returnn_version, "get_default_kwargs_train") is False:
        return DATASET_DISTRIBUTIONS[0]
    return opts.get("dataset_distribution", DATASET_DISTRIBUTIONS[0])


def _torch_engine(config: Mapping[str, Any]) -> bool:
    """Whether RETURNN trains with its torch engine, whose DataLoader reads the datasets: ``backend="torch"``, or
    ``torch_distributed`` set."""
    return config.get("torch_distributed") is not None or config.get("backend") == "torch"


def _is_true(value: Any) -> bool:
    """``Config.is_true`` for a typed value."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"))


def _worker_behavior_version(behavior_version: int, *, propagate: Optional[bool]) -> int:
    """The behavior version in a subprocess that RETURNN starts with ``SubProcCopyGlobalConfigPreInitFunc``
    (torch DataLoader workers, MultiProcDataset workers): its ``__init__`` passes the parent's on only
    with the config's ``propagate_behavior_version_to_subprocs``, by default only from behavior_version 31;
    otherwise the worker has a fresh ``BehaviorVersion``, whose ``get()`` is 0.

    >>> [_worker_behavior_version(v, propagate=None) for v in (26, 30, 31)], _worker_behavior_version(26, propagate=True)
    ([0, 0, 31], 26)
    """
    if propagate is None:
        propagate = behavior_version >= 31
    return behavior_version if propagate else 0


def _loader_behavior_version(
    config: Mapping[str, Any],
    *,
    behavior_version: int,
    torch: bool,
    propagate: Optional[bool],
    returnn_version: Optional[str] = None,
) -> Tuple[int, str]:
    """``(behavior version, process)`` where the torch engine reads a dataset, as
    ``returnn.torch.data.pipeline.create_data_loader_from_batches`` of RETURNN ``returnn_version`` (None: the newest)
    sets up the DataLoader: in ``num_workers`` worker processes (default 1; 0, the main process, before
    1.20240702.142741), started by default with
    ``NonDaemonicSpawnContext(process_pre_init_func=SubProcCopyGlobalConfigPreInitFunc())`` (see
    :func:`_worker_behavior_version`; a release before ``propagate_behavior_version_to_subprocs`` never passes it on);
    a ``"fork"`` context inherits the main process's state, any other context starts a fresh process without it.

    >>> _loader_behavior_version({"torch_dataloader_opts": {"num_workers": 0}}, behavior_version=26, torch=True,
    ...                          propagate=None)
    (26, 'main process (torch_dataloader_opts num_workers=0)')
    >>> _loader_behavior_version({}, behavior_version=26, torch=True, propagate=None, returnn_version="1.20240620.64807")
    (26, 'main process (torch_dataloader_opts num_workers=0)')
    """
    if not torch:
        return behavior_version, "main process"
    opts = config.get("torch_dataloader_opts") or {}
    opts = opts if isinstance(opts, Mapping) else {}
    default_workers = 0 if release_has(returnn_version, "dataloader_worker_default") is False else 1
    if not opts.get("num_workers", default_workers):
        return behavior_version, "main process (torch_dataloader_opts num_workers=0)"
    context = opts.get("multiprocessing_context", "spawn_non_daemonic")
    if context == "fork":
        return behavior_version, "torch DataLoader worker (forked: it inherits the behavior version)"
    if context == "spawn_non_daemonic":
        never = release_has(returnn_version, "propagate_behavior_version") is False
        version = _worker_behavior_version(behavior_version, propagate=False if never else propagate)
        how = "which RETURNN does not give it " + (f"in release {returnn_version}" if never else "below 31")
        how = "which gets it" if version == behavior_version else how
        return version, f"torch DataLoader worker ({how})"
    return 0, f"torch DataLoader worker (multiprocessing_context={context!r}: a fresh process without it)"


def _loader_shard_workers(
    config: Mapping[str, Any], *, behavior_version: int, torch: bool, returnn_version: Optional[str] = None
) -> int:
    """DataLoader workers that each read their own shard of the train dataset:
    ``ReturnnDatasetIterDataPipe.reset`` shards over ``num_workers`` when it is > 1 and
    ``torch_dataloader_shard_workers`` (default: ``behavior_version >= 37``) is on; a RETURNN ``returnn_version``
    without that option (None: the newest) never does, and each worker reads all of the rank's data.

    >>> opts = {"torch_dataloader_opts": {"num_workers": 2}}
    >>> _loader_shard_workers(opts, behavior_version=37, torch=True), _loader_shard_workers(
    ...     opts, behavior_version=37, torch=True, returnn_version="1.20260608.172901")
    (2, 1)
    """
    if not torch or release_has(returnn_version, "dataloader_shard_workers") is False:
        return 1
    opts = config.get("torch_dataloader_opts") or {}
    num_workers = opts.get("num_workers", 0) if isinstance(opts, Mapping) else 0
    shard = config.get("torch_dataloader_shard_workers")
    shard = behavior_version >= 37 if shard is None else bool(shard)
    return num_workers if isinstance(num_workers, int) and num_workers > 1 and shard else 1


def worker_shards_problem(plan_num_shards: int, *, num_ranks: int, loader_workers: int) -> Optional[str]:
    """Why a plan of ``plan_num_shards`` does not fit a training whose ``num_ranks`` ranks each read through
    ``loader_workers`` DataLoader workers that shard (``ReturnnDatasetIterDataPipe.reset``: worker w of rank r is
    shard ``r * N + w`` of ``ranks * N``, whose bins the dataset cuts), or None; the graph checks and the RETURNN-side
    dataset say it in these words.

    >>> worker_shards_problem(2, num_ranks=2, loader_workers=2)[:60]
    'the plan is for num_shards=2, but the files are cut into 4 s'
    >>> worker_shards_problem(4, num_ranks=2, loader_workers=2) is None
    True
    """
    want = num_ranks * loader_workers
    if loader_workers <= 1 or plan_num_shards == want:
        return None
    return (
        f"the plan is for num_shards={plan_num_shards}, but the files are cut into {want} shards: {num_ranks} "
        f"ranks, each with {loader_workers} DataLoader workers that read a shard each (torch_dataloader_shard_workers,"
        f" the default from behavior_version 37); plan with num_shards={want} (ShardPlanJob.for_training does), or "
        "read with one DataLoader worker (torch_dataloader_opts num_workers=1)"
    )


def read_engine(
    config: Mapping[str, Any],
    *,
    seq_ordering: str = UNKNOWN_SEQ_ORDERING,
    ranks_per_node: Optional[int] = None,
    inexact: Tuple[str, ...] = (),
    sharding: Optional[str] = None,
    returnn_version: Any = None,
) -> EngineSettings:
    """The training's engine as RETURNN's torch engine reads it from ``config`` (config and post_config merged, or
    RETURNN's global config seen through ``get``): the one description (:class:`~i6_shard.core.pure.engine_sim.
    EngineSettings`) that the graph checks, the RETURNN-side dataset and the training report compare with a plan's
    (``engine_differences``). Its batching as ``get_batching_iterable_dataset_from_config`` (``batch_size_train``
    before ``batch_size``, -1 no limit, a dict by data key as stated), filters as ``Engine.__init__``, accumulation
    as ``Engine.train_epoch`` (a callable as it is), the sync as ``DistributedContext.__init__``, the DataLoader
    workers as ``create_data_loader_from_batches`` and ``ReturnnDatasetIterDataPipe``; the rest as given (the
    sub-epoch dataset's order, :func:`sub_epoch_seq_ordering_of`; torchrun's ranks per host; the reasons the
    simulation does not mirror; the sharding mode), on RETURNN ``returnn_version`` (None: the newest; or its
    detected features, ``core.pure.release_has``), whose DataLoader workers shard again only from 1.20261022.211313.

    >>> e = read_engine({"batch_size_train": 500, "batch_size": 9, "max_seqs": -1,
    ...                  "torch_dataloader_opts": {"num_workers": 2}, "behavior_version": 37, "backend": "torch"})
    >>> e.batch_size, e.max_seqs, e.num_workers, e.shard_workers
    (500, None, 2, True)
    """
    batching = _EngineBatching.of(config)
    bv = config.get("behavior_version")
    bv = bv if isinstance(bv, int) and not isinstance(bv, bool) else 0
    try:
        sync = _sync_rule(config.get("torch_distributed"), behavior_version=bv)
    except (TypeError, ValueError):  # what RETURNN refuses is the checks' to say; compared as stated
        sync = None
    torch = _torch_engine(config)
    accum = batching.accum_grad_multiple_step
    return EngineSettings(
        seq_ordering=seq_ordering,
        batch_size=None if isinstance(batching.batch_size, Mapping) else _no_limit(batching.batch_size),
        max_seqs=_no_limit(batching.max_seqs),
        min_seq_length=batching.min_seq_length,
        max_seq_length=None if isinstance(batching.max_seq_length, Mapping) else batching.max_seq_length,
        accum_grad_multiple_step=accum,  # as stated (None: unset, a callable as it is)
        torch_distributed=config.get("torch_distributed"),
        ranks_per_node=ranks_per_node,
        inexact=tuple(inexact),
        batch_size_by_key=dict(batching.batch_size) if isinstance(batching.batch_size, Mapping) else None,
        max_seq_length_by_key=dict(batching.max_seq_length) if isinstance(batching.max_seq_length, Mapping) else None,
        other_batching=tuple(
            (key, getattr(batching, key))
            for key in ("packed_batch_size", "torch_batching", "chunking", "online_shuffle_batches")
            if getattr(batching, key) is not None
        ),
        num_workers=batching.num_workers,
        shard_workers=_loader_shard_workers(config, behavior_version=bv, torch=torch, returnn_version=returnn_version)
        > 1,
        sync_complete_frac=None if sync is None else sync.sync_complete_frac,
        sync_at_epoch_end=None if sync is None else sync.sync_at_epoch_end,
        sharding=sharding,
    )


def _no_limit(value: Any) -> Any:
    """A limit as the engine takes it: -1 (and None) is no limit."""
    return None if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == -1) else value


def interleaving(engine: EngineSettings, *, shard: bool = False) -> List[str]:
    """Why the order in which the engine batches a rank's sequences is not the sub-epoch dataset's: several
    DataLoader workers whose batches the loader interleaves, each reading its own shard (``shard``: one of
    ``ranks * num_workers``, as ``ReturnnDatasetIterDataPipe.reset`` sets it, which the plan cuts) or all of the
    rank's data.

    >>> interleaving(EngineSettings(num_workers=2))[0][:48]
    'torch_dataloader_opts num_workers=2: the batches'
    """
    workers = engine.num_workers
    if not isinstance(workers, int) or isinstance(workers, bool) or workers <= 1:
        return []
    what = (
        f"each reads its own shard (the plan cuts num_shards = ranks * {workers} shards, as RETURNN's worker "
        "sharding does), and a rank's steps are those of its workers' shards together"
        if shard
        else f"each yields every sequence of the rank (torch_dataloader_shard_workers is off), so each comes "
        f"{workers} times"
    )
    return [
        f"torch_dataloader_opts num_workers={workers}: the batches of {workers} DataLoader workers interleave, "
        f"which the simulation (one reader per rank) does not mirror; {what}"
    ]


def unmodelled(engine: EngineSettings) -> List[str]:
    """What i6_shard's step and drop model (frames ``batch_size`` and ``max_seqs``, every sequence
    kept, one update per step) does not cover here.

    >>> unmodelled(EngineSettings(batch_size=2000, max_seq_length=800, accum_grad_multiple_step=2))
    ['max_seq_length=800 drops sequences', 'accum_grad_multiple_step=2 (an update every 2 steps)']
    """
    out = []
    for key, value in (
        ("min_seq_length", engine.min_seq_length),
        ("max_seq_length", engine.stated_max_seq_length),
    ):
        if value is not None:
            out.append(f"{key}={value!r} drops sequences")
    what = {
        "packed_batch_size": "packed batches",
        "torch_batching": "custom batching",
        "chunking": "chunks instead of sequences",
    }
    out += [f"{key}={value!r} ({what[key]})" for key, value in engine.other_batching if key in what]
    accum = engine.accum_grad_multiple_step
    if SyncMode.steps_per_update(accum) != 1:  # unset and 0 update every step, as 1
        out.append(
            f"accum_grad_multiple_step={accum!r} (an update every {accum} steps)"
            if isinstance(accum, int)
            else f"accum_grad_multiple_step={accum!r} (a callable)"
        )
    return out


def sync_mode_of(engine: EngineSettings) -> SyncMode:
    """The sync mode of the training's engine as the step and drop model takes it (grad sync without
    ``torch_distributed``): ``DistributedContext.__init__``'s reading of it.

    >>> sync_mode_of(EngineSettings(torch_distributed={"reduce_type": "param", "param_sync_step": 8})).describe()
    'param sync every 8 steps'
    """
    rule = _sync_rule(engine.torch_distributed, behavior_version=0)
    return SyncMode() if rule is None else rule.sync_mode


def read_sync_mode(config: Mapping[str, Any]) -> SyncMode:
    """The sync mode of a RETURNN config's ``torch_distributed`` (grad sync without it), as the predicted loss and
    the training report's expected steps take it: :func:`sync_mode_of` the config's engine (:func:`read_engine`).

    >>> read_sync_mode({"torch_distributed": {"reduce_type": "param", "param_sync_step": 8}}).describe()
    'param sync every 8 steps'
    """
    check_torch_distributed(config.get("torch_distributed"))  # junk is refused, never read as grad sync
    _sync_rule(config.get("torch_distributed"), behavior_version=0)  # as is what DistributedContext refuses
    return sync_mode_of(read_engine(config))


#: What each batching option the simulation has none of does to the batches (``engine_reasons``).
_OTHER_BATCHING = {
    "packed_batch_size": "packs the batches",
    "torch_batching": "batches by a custom function",
    "chunking": "batches chunks instead of sequences",
    "online_shuffle_batches": "shuffles the batches",
}


def engine_reasons(engine: EngineSettings) -> List[str]:
    """Why the simulation of the training's engine is not exact by the engine's own options (part of the plan's one
    verdict, with the dataset's, ``DistributeFilesDatasetInfo.engine_inexact``): a ``min_seq_length`` filter (the
    simulation's filter has no lower bound) and the batching options it has none of.

    >>> engine_reasons(EngineSettings(min_seq_length=5, other_batching=(("chunking", "100:50"),)))[1]
    "chunking='100:50' batches chunks instead of sequences, which the simulation does not mirror"
    """
    out = []
    if engine.min_seq_length:  # Engine.__init__: 0 is no filter
        out.append(
            f"min_seq_length={engine.min_seq_length!r} drops sequences, which the simulation (a max_seq_length filter "
            "only) does not mirror"
        )
    out += [
        f"{key}={value!r} {_OTHER_BATCHING[key]}, which the simulation does not mirror"
        for key, value in engine.other_batching
    ]
    return out

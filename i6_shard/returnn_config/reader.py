"""The one reader of RETURNN configs and dataset dicts: every DistributeFilesDataset in them, at any
depth inside wrapper datasets, with the settings RETURNN would give it on each rank. Each rule mirrors
one RETURNN function, named in its docstring; nothing else in i6_shard derives these rules."""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..core import FILE_LIST_EXTENSIONS
from ..core.pure import PlanSettings
from ..core.pure.args import check_optional_int
from ..core.pure.batching import SyncMode
from ..core.pure.distribute import UNSHARDED_RANK_SEED_STRIDE
from ..core.pure.flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION
from ..core.pure.request import PlanRequest
from .pycode import ImportRef
from .sub_epoch import is_sub_epoch_partial
from .torch_distributed import check_torch_distributed

__all__ = [
    "DistributeFilesDatasetInfo",
    "ShardRule",
    "SyncRule",
    "read_sync_mode",
    "find_distribute_files_datasets",
    "is_distribute_files_dataset",
    "dataset_class_name",
    "files_kind",
    "read_files",
    "sub_epoch_partial",
    "DATASET_DICT_CONTEXT",
    "unknown_wrappers",
]

_DFD_CLASS_NAMES = ("DistributeFilesDataset", "ShardedDistributeFilesDataset")
#: The RETURNN config around a dataset dict that is read on its own (``check_dataset_dict``): the
#: train dataset of a torch distributed training with RETURNN's default ``dataset_distribution``.
DATASET_DICT_CONTEXT: Mapping[str, Any] = {"torch_distributed": {}}
#: Config keys RETURNN's ``__main__.init_data`` loads, with the defaults it loads them with.
_TOP_LEVEL_KEYS = ("train", "dev", "eval")
#: ``Dataset.get_default_kwargs_eval``'s default seq order (dev/eval only).
_EVAL_SEQ_ORDERING = "sorted"

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


# --- what RETURNN computes -------------------------------------------------------------------


@dataclass(frozen=True)
class SeedRule:
    """The ``random_seed_offset`` a dataset has on rank r: ``base + rank * rank_stride``.

    :ivar base: the offset on rank 0
    :ivar rank_stride: 0 (the same on every rank) or RETURNN's 16127
    :ivar source: where it comes from: ``"dataset"`` (set in this dict), ``"wrapper <key path>"`` (set
        in, or computed by, an enclosing dataset that passes it down), or ``"default"`` (this dataset's
        own ``Dataset._get_default_random_seed_offset``)
    """

    base: int
    rank_stride: int
    source: str

    def offset_for(self, rank: int) -> int:
        return self.base + rank * self.rank_stride


@dataclass(frozen=True)
class ShardRule:
    """The ``(_num_shards, _shard_index)`` a dataset has on rank r of W, and with which of a rank's
    ``shards_per_rank`` instances (MultiProcDataset ``"dedicated"`` workers, torch DataLoader workers).

    :ivar per_rank: ``(W * shards_per_rank, r * shards_per_rank + worker)``; else the fixed values below
    :ivar fixed: ``(num_shards, shard_index)`` when not per rank, e.g. ``(1, 0)``, RETURNN's default
    :ivar shards_per_rank: instances per rank that split the rank's part
    :ivar source: ``"dataset_distribution shard"``, ``"distrib_shard_files"``, ``"dataset"`` (set in
        this dict), ``"wrapper <key path>"`` or ``"default"``
    """

    per_rank: bool
    fixed: Tuple[int, int] = (1, 0)
    shards_per_rank: int = 1
    source: str = "default"

    def num_shards(self, num_ranks: int) -> int:
        return (num_ranks if self.per_rank else self.fixed[0]) * self.shards_per_rank

    def shard_index(self, rank: int, worker: int = 0) -> int:
        return (rank if self.per_rank else self.fixed[1]) * self.shards_per_rank + worker

    def more_than_one(self, num_ranks: Optional[int]) -> bool:
        """Whether ``_num_shards > 1`` (unknown num_ranks counts as several)."""
        if self.per_rank and (num_ranks is None or num_ranks > 1):
            return True
        return self.num_shards(1) > 1

    def with_workers(self, num_workers: int) -> "ShardRule":
        return dataclasses.replace(self, shards_per_rank=self.shards_per_rank * num_workers)


@dataclass(frozen=True)
class SyncRule:
    """How the torch ranks synchronize, as ``returnn.torch.distributed.DistributedContext.__init__`` reads
    ``torch_distributed``: ``reduce_type`` ``"grad"`` (DistributedDataParallel, the default),
    ``"grad_explicit"``, ``"param"`` (params averaged every ``param_sync_step`` steps) or ``sync`` levels.
    The engine's control sync (``Engine.train_epoch``, ``control_sync_levels``) ends the epoch of a group
    when one of its ranks runs out, at that group's syncs only: under grad sync in every step; under a
    param level a rank that runs out stops, and the others go on to their next sync
    (``DistributedContext.step_after_epoch`` then evens out the checkpoint state).

    :ivar reduce_type: ``"grad"``, ``"grad_explicit"``, ``"param"`` or ``"sync"`` (``sync`` levels given)
    :ivar levels: ``((group, type, every), ...)``, inner to outer, as ``_parse_sync_levels`` gets them
        (empty for ``"grad"``: DistributedDataParallel syncs every step)
    :ivar sync_complete_frac: the option, or its default ``behavior_version >= 33``
    :ivar sync_at_epoch_end: the option, or its default ``behavior_version >= 38``
    """

    reduce_type: str = "grad"
    levels: Tuple[Tuple[Any, str, int], ...] = ()
    sync_complete_frac: bool = False
    sync_at_epoch_end: bool = False

    @property
    def ranks_stop_together(self) -> bool:
        """Whether every rank ends the epoch in the step in which the first runs out (a world grad sync
        in every step), rather than at its group's next param sync."""
        if self.reduce_type in ("grad", "grad_explicit"):
            return True
        return bool(self.levels) and self.levels[0][1] == "grad" and self.levels[0][0] == "world"

    @property
    def param_sync_every(self) -> Optional[int]:
        """Steps between the outermost param syncs (None: no param level)."""
        every = [e for _, kind, e in self.levels if kind == "param"]
        return every[-1] if every else None

    @property
    def sync_mode(self) -> SyncMode:
        """The sync mode the step and drop model assumes: grad sync where the ranks stop together (or no param
        level says where they stop), else param sync every :attr:`param_sync_every` steps (``sync`` levels
        below it, e.g. a node grad level, are not modelled: they stop a node's ranks together).

        >>> SyncRule("param", (("world", "param", 100),)).sync_mode
        SyncMode(reduce_type='param', param_sync_step=100)
        """
        every = self.param_sync_every
        return SyncMode() if self.ranks_stop_together or every is None else SyncMode("param", every)


@dataclass(frozen=True)
class EngineBatching:
    """How the torch engine batches the train data, as ``Engine.__init__`` (``min_seq_length``,
    ``max_seq_length``: ``LenFilterDataPipe`` drops sequences), ``Engine._create_data_loader``
    (``chunking``, ``online_shuffle_batches``), ``get_batching_iterable_dataset_from_config`` (``batch_size``
    or ``batch_size_train``, ``max_seqs``, ``packed_batch_size``, a custom ``torch_batching``) and
    ``Engine.train_epoch`` (``accum_grad_multiple_step``: an optimizer update, and a param sync count, every
    N steps) read them. None: not set.
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

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "EngineBatching":
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
        )

    def unmodelled(self) -> List[str]:
        """What i6_shard's step and drop model (frames ``batch_size`` and ``max_seqs``, every sequence
        kept, one update per step) does not cover here.

        >>> EngineBatching(batch_size=2000, max_seq_length=800, accum_grad_multiple_step=2).unmodelled()
        ['max_seq_length=800 drops sequences', 'accum_grad_multiple_step=2 (an update every 2 steps)']
        """
        out = []
        for key in ("min_seq_length", "max_seq_length"):
            if getattr(self, key) is not None:
                out.append(f"{key}={getattr(self, key)!r} drops sequences")
        for key, what in (
            ("packed_batch_size", "packed batches"),
            ("torch_batching", "custom batching"),
            ("chunking", "chunks instead of sequences"),
        ):
            if getattr(self, key) is not None:
                out.append(f"{key}={getattr(self, key)!r} ({what})")
        accum = self.accum_grad_multiple_step
        if accum not in (None, 1):
            out.append(
                f"accum_grad_multiple_step={accum!r} (an update every {accum} steps)"
                if isinstance(accum, int)
                else f"accum_grad_multiple_step={accum!r} (a callable)"
            )
        return out


def read_sync_mode(config: Mapping[str, Any]) -> SyncMode:
    """The sync mode of a RETURNN config's ``torch_distributed`` (grad sync without it), as the predicted loss and
    the training report's expected steps take it.

    >>> read_sync_mode({"torch_distributed": {"reduce_type": "param", "param_sync_step": 8}}).describe()
    'param sync every 8 steps'
    """
    bv = config.get("behavior_version")
    check_torch_distributed(config.get("torch_distributed"))  # junk is refused, never read as grad sync
    rule = _sync_rule(config.get("torch_distributed"), behavior_version=bv if isinstance(bv, int) else 0)
    return SyncMode() if rule is None else rule.sync_mode


def _sync_rule(opts: Any, *, behavior_version: int) -> Optional[SyncRule]:
    """``DistributedContext.__init__``'s reading of the sync options (None: no torch_distributed).

    >>> _sync_rule({"reduce_type": "param", "param_sync_step": 100}, behavior_version=24).levels
    (('world', 'param', 100),)
    """
    if not isinstance(opts, Mapping):
        return None
    reduce_type, spec = opts.get("reduce_type"), opts.get("sync")
    if spec is not None:
        if reduce_type is not None:
            raise ValueError(f"torch_distributed: sync and reduce_type={reduce_type!r} are exclusive; give one")
        if not isinstance(spec, (list, tuple)) or not spec or not all(isinstance(x, Mapping) for x in spec):
            raise TypeError(
                f"torch_distributed sync={spec!r} must be a non-empty list of level dicts, e.g. "
                "[{'group': 'node', 'type': 'grad'}, {'group': 'world', 'type': 'param', 'every': 100}]"
            )
        reduce_type = "sync"
        levels = tuple((x.get("group"), x.get("type"), x.get("every", 1)) for x in spec)
    else:
        reduce_type = reduce_type or "grad"
        if reduce_type == "param":
            step = opts.get("param_sync_step")
            if not isinstance(step, int) or isinstance(step, bool) or step < 1:
                raise ValueError(
                    f"torch_distributed reduce_type 'param' needs param_sync_step as a positive int, got {step!r}"
                )
            levels = (("world", "param", step),)
        elif reduce_type == "grad_explicit":
            levels = (("world", "grad", 1),)
        elif reduce_type == "grad":
            levels = ()
        else:
            raise ValueError(
                f"torch_distributed reduce_type={reduce_type!r}; RETURNN takes 'grad', 'grad_explicit' or 'param'"
            )
    complete, at_end = opts.get("sync_complete_frac"), opts.get("sync_at_epoch_end")
    return SyncRule(
        reduce_type=reduce_type,
        levels=levels,
        sync_complete_frac=behavior_version >= 33 if complete is None else bool(complete),
        sync_at_epoch_end=behavior_version >= 38 if at_end is None else bool(at_end),
    )


@dataclass(frozen=True)
class DistributeFilesDatasetInfo:
    """One DistributeFilesDataset of a config or dataset dict, as RETURNN would build it.

    :ivar key_path: where it is, e.g. ``("train",)`` or ``("train", "datasets", "asr")``
    :ivar dataset: its dict as written
    :ivar class_name: ``"DistributeFilesDataset"``, ``"ShardedDistributeFilesDataset"`` or a subclass name
    :ivar is_i6_shard: i6_shard's ``ShardedDistributeFilesDataset`` (it has ``distribution``/``file_sizes``)
    :ivar role: ``"train"``, ``"eval"`` (dev/eval/eval_datasets: evaluated on rank 0 only) or ``"other"``
    :ivar wrappers: class names of the enclosing datasets, outermost first
    :ivar files_kind: ``"inline"``, ``"list_file"``, ``"callable"`` or ``"invalid"``
    :ivar num_files: entries of an inline list (else None: known only at run time)
    :ivar partition_epoch: effective ``partition_epoch`` (RETURNN: ``partition_epoch or 1``)
    :ivar seq_ordering: effective ``seq_ordering`` (the dict's, or what RETURNN defaults it to)
    :ivar distrib_shard_files: the dict's ``distrib_shard_files``
    :ivar distributed: where RETURNN's ``_get_distributed_rank_and_size`` takes rank and size from:
        ``"torch"`` (``torch_distributed`` set), ``"horovod"`` (``use_horovod``), ``"debug"``
        (``__debug_dummy_distributed_rank_and_size``) or None (every process is rank 0 of 1)
    :ivar dataset_distribution: torch's ``dataset_distribution`` or horovod's ``horovod_dataset_distribution``
    :ivar shards: the :class:`ShardRule` of this dataset (after ``distrib_shard_files``)
    :ivar seed: the :class:`SeedRule` of its ``random_seed_offset``
    :ivar fixed_random_seed: the effective ``fixed_random_seed`` (overrides every offset)
    :ivar sharding_fix: the dict's ``sharding_fix``
    :ivar behavior_version: the config's ``behavior_version`` (RETURNN's default 0 when unset)
    :ivar sub_epoch_dataset: the dict ``get_sub_epoch_dataset`` returns (template of i6_shard's bound
        function, or the user function's result for the first file), or None if it could not be told
    :ivar sub_epoch_explicit_shards: the sub-epoch dict sets ``_num_shards``/``_shard_index`` itself
        (None: unknown)
    :ivar batch_slicing: horovod's ``"shard"`` distribution, which gives each rank every W-th batch
    :ivar returnn_fails: why RETURNN would fail on this setup (None if it would not)
    :ivar num_ranks: the number of ranks it was read for (None: not given)
    :ivar notes: what the reader could not look into
    :ivar process_behavior_version: the behavior version RETURNN's code sees in the process that reads this
        dataset (None: the config's): 0 in a torch DataLoader worker or MultiProcDataset worker that RETURNN
        does not hand it to (see :func:`_worker_behavior_version`)
    :ivar reading_process: where the dataset is read, e.g. ``"main process"`` or ``"DataLoader worker"``
    :ivar epoch_multiplier: the dataset's epochs per training epoch (``MultiEpochDataset``'s ``multi_epoch``)
    :ivar sub_epoch_constant_files: files the sub-epoch dataset reads in every sub-epoch besides the bin's
        (from i6_shard's template, or the user function's dict for the first file)
    :ivar sub_epoch_cache_manager: the sub-epoch dataset copies its files with ``use_cache_manager``
    :ivar sub_epoch_epoch_wise_filter: the sub-epoch dataset has an ``epoch_wise_filter``
    :ivar sync: how the torch ranks synchronize (:class:`SyncRule`; None: not torch distributed)
    :ivar engine_batching: how the torch engine batches and filters the train data (:class:`EngineBatching`)
    """

    key_path: Tuple[Any, ...]
    dataset: Mapping[str, Any]
    class_name: str
    is_i6_shard: bool
    role: str
    wrappers: Tuple[str, ...]
    files_kind: str
    num_files: Optional[int]
    partition_epoch: Any
    seq_ordering: Any
    distrib_shard_files: bool
    distributed: Optional[str]
    dataset_distribution: Optional[str]
    shards: ShardRule
    seed: SeedRule
    fixed_random_seed: Any
    sharding_fix: Optional[bool]
    behavior_version: int
    sub_epoch_dataset: Optional[Mapping[str, Any]]
    sub_epoch_explicit_shards: Optional[bool]
    batch_slicing: bool
    returnn_fails: Optional[str]
    num_ranks: Optional[int]
    notes: Tuple[str, ...] = ()
    process_behavior_version: Optional[int] = None
    reading_process: str = "main process"
    epoch_multiplier: int = 1
    sub_epoch_constant_files: Tuple[str, ...] = ()
    sub_epoch_cache_manager: bool = False
    sub_epoch_epoch_wise_filter: bool = False
    sync: Optional[SyncRule] = None
    engine_batching: EngineBatching = EngineBatching()

    # --- derived ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The key path as text, e.g. ``train.datasets.asr`` (``dataset`` for a bare dict's root)."""
        return ".".join(map(str, self.key_path)) or "dataset"

    @property
    def sharded(self) -> bool:
        """Whether the files are split over the ranks (rank r reads the bins ``r*P ..``): by
        ``distrib_shard_files`` or by torch's ``dataset_distribution="shard"``. With an unknown number
        of ranks, whether they would be on several."""
        return self.shards.per_rank and self.distributed is not None and (self.num_ranks or 2) > 1

    @property
    def mechanism(self) -> Optional[str]:
        """What shards the files over the ranks: ``"distrib_shard_files"``,
        ``"dataset_distribution shard"`` (torch), or None (every rank reads all files)."""
        return self.shards.source if self.sharded else None

    @property
    def distribution(self) -> str:
        """How the bins are cut: ``"returnn"``, or i6_shard's class's ``distribution`` option."""
        return self.dataset.get("distribution", "returnn") if self.is_i6_shard else "returnn"

    @property
    def max_sub_epoch_deviation(self) -> Any:
        """The ``"flexible"`` distribution's bound on the sub-epoch sizes: the class's option, or its default."""
        default = DEFAULT_MAX_SUB_EPOCH_DEVIATION
        return self.dataset.get("max_sub_epoch_deviation", default) if self.is_i6_shard else default

    @property
    def shuffles(self) -> bool:
        """Whether the file order depends on a seed at all (``seq_ordering="random"``)."""
        return self.seq_ordering == "random"

    @property
    def same_seed_on_all_ranks(self) -> bool:
        """Whether every rank shuffles the files with the same seed."""
        return self.fixed_random_seed is not None or self.seed.rank_stride == 0 or not self.shuffles

    def prediction_gaps(self) -> List[str]:
        """What the step and drop prediction does not model for this dataset: the engine's batching
        beyond ``batch_size``/``max_seqs`` (:meth:`EngineBatching.unmodelled`) and a sub-epoch dataset whose
        ``seq_ordering`` is not random (laplace or sorted orders batch differently)."""
        out = self.engine_batching.unmodelled() if self.role == "train" else []
        orders = [v for path, v in _flatten_with_path(self.sub_epoch_dataset or {}) if path[-1] == "seq_ordering"]
        if orders and not str(orders[0]).startswith("random"):
            out.append(f"the sub-epoch dataset's seq_ordering={orders[0]!r} (not random)")
        return out

    @property
    def effective_behavior_version(self) -> int:
        """The behavior version where RETURNN reads this dataset (see ``process_behavior_version``)."""
        return self.behavior_version if self.process_behavior_version is None else self.process_behavior_version

    @property
    def sub_epoch_shards_again(self) -> Optional[bool]:
        """Whether the sub-epoch dataset shards its sequences again (RETURNN's legacy double sharding),
        as ``DistributeFilesDataset._get_sub_dataset_dict`` decides in the process that reads the dataset:
        only if this dataset has ``_num_shards > 1``, the sub-epoch dict sets no ``_num_shards``/
        ``_shard_index`` itself, and the fix is off (``sharding_fix=False``, or None while
        ``BehaviorVersion.get() < 26`` there, e.g. in a DataLoader worker below behavior_version 31).
        None: unknown (the sub-epoch dict could not be told and the fix is off)."""
        if not self.shards.more_than_one(self.num_ranks if self.distributed else 1):
            return False
        if self.sharding_fix is True or (self.sharding_fix is None and self.effective_behavior_version >= 26):
            return False
        if self.sub_epoch_explicit_shards is None:
            return None
        return not self.sub_epoch_explicit_shards

    @property
    def sharding_mode(self) -> Optional[str]:
        """The key of ``core.SHARDING_MODES`` that the plan of this dataset follows, or None if
        no ShardPlan describes it (see :meth:`plan_problem`)."""
        return None if self.plan_problem() else self._mode()

    def _mode(self) -> str:
        if self.sharded:
            return "sharded"
        return "unsharded" if not self.same_seed_on_all_ranks else "unsharded_same_seed"

    def num_shards(self) -> int:
        """The dataset's ``_num_shards`` on the ranks it was read for (RETURNN's rank and size come
        from torch_distributed or horovod; without either, every process is rank 0 of 1)."""
        if self.num_ranks is None:
            raise ValueError(f"{self.name}: the number of ranks is not known; read it with num_ranks")
        return self.shards.num_shards(self.num_ranks if self.distributed else 1)

    def shard_index_for(self, rank: int, worker: int = 0) -> int:
        """The dataset's ``_shard_index`` on ``rank`` (and its ``worker``-th instance there)."""
        return self.shards.shard_index(rank if self.distributed else 0, worker)

    def seed_offset_for(self, rank: int) -> int:
        """The dataset's ``random_seed_offset`` on ``rank``."""
        return self.seed.offset_for(rank if self.distributed else 0)

    def for_ranks(self, num_ranks: int) -> "DistributeFilesDatasetInfo":
        """The same dataset read for ``num_ranks`` ranks."""
        num_ranks = check_optional_int(num_ranks, name="num_ranks", minimum=1, hint="number of training processes")
        if self.num_ranks is not None and num_ranks != self.num_ranks:
            raise ValueError(
                f"{self.name} was read for num_ranks={self.num_ranks}, not {num_ranks}; read the config "
                "again with that number (rules such as the CombinedDataset one depend on it)"
            )
        return dataclasses.replace(self, num_ranks=num_ranks)

    def plan_problem(self) -> Optional[str]:
        """Why no ``ShardPlan`` describes what the ranks read (None if one does)."""
        if self.returnn_fails:
            return f"RETURNN would fail: {self.returnn_fails}"
        if self.epoch_multiplier != 1:
            return (
                f"a MultiEpochDataset with multi_epoch={self.epoch_multiplier} reads this dataset's epochs "
                f"(e-1)*{self.epoch_multiplier}+1 .. e*{self.epoch_multiplier} in training epoch e, so the "
                "plan's epochs are not the training's; use multi_epoch=1 or no MultiEpochDataset"
            )
        if self.shards.shards_per_rank != 1:
            return (
                f"each rank splits its part over {self.shards.shards_per_rank} instances (MultiProcDataset "
                "'dedicated' workers or DataLoader workers); a ShardPlan has one instance per rank"
            )
        if not self.shards.per_rank and self.shards.fixed != (1, 0):
            return (
                f"the dataset has the fixed _num_shards, _shard_index = {self.shards.fixed} on every rank, "
                "so every rank reads the same part"
            )
        if self.sharded and not self.same_seed_on_all_ranks:
            return (
                "the files are sharded but the ranks shuffle them with different seeds "
                f"(random_seed_offset {self.seed.base} + rank*{self.seed.rank_stride}, from {self.seed.source}), "
                "so they cut different orders: files are read twice or never"
            )
        return None

    def plan_settings(
        self, *, num_epochs: Optional[int] = None, distribution: Optional[str] = None, num_ranks: Optional[int] = None
    ) -> PlanSettings:
        """The :class:`~i6_shard.core.PlanSettings` of the plan this dataset follows (on the ranks it
        was read for, or ``num_ranks``), the sharding mode from ``core.SHARDING_MODES``.

        :raises ValueError: if no ShardPlan describes it, saying why
        """
        info = self if num_ranks is None else self.for_ranks(num_ranks)
        if info.num_ranks is None:
            raise ValueError(f"{self.name}: the number of ranks is not known; pass num_ranks")
        problem = info.plan_problem()
        if problem:
            raise ValueError(f"{self.name}: {problem}; fix the config before planning")
        return PlanSettings.from_mode(
            sharding=info._mode(),
            num_shards=info.num_ranks,
            partition_epoch=info.partition_epoch,
            num_epochs=num_epochs,
            seq_ordering=info.seq_ordering,
            random_seed_offset=info.seed.base,
            fixed_random_seed=info.fixed_random_seed,
            distribution=distribution or info.distribution,
            max_sub_epoch_deviation=info.max_sub_epoch_deviation,
        )

    def plan_request(
        self, *, num_epochs: Optional[int] = None, distribution: Optional[str] = None, num_ranks: Optional[int] = None
    ) -> PlanRequest:
        """The :class:`~i6_shard.core.PlanRequest` of this dataset: :meth:`plan_settings`, and the training's sync
        mode (:attr:`SyncRule.sync_mode`; grad sync where it is not torch distributed).

        :raises ValueError: as :meth:`plan_settings`
        """
        settings = self.plan_settings(num_epochs=num_epochs, distribution=distribution, num_ranks=num_ranks)
        return PlanRequest(settings, sync=self.sync.sync_mode if self.sync is not None else SyncMode())


# --- class and option reading ----------------------------------------------------------------


def dataset_class_name(cls: Any) -> Optional[str]:
    """The class name of a dataset dict's ``"class"``: a str, a class object, or i6_core's
    ``CodeWrapper`` (its code's last dotted part); None if it cannot be told.

    >>> dataset_class_name("returnn.datasets.distrib_files.DistributeFilesDataset")
    'DistributeFilesDataset'
    """
    if isinstance(cls, str):
        return cls.rsplit(".", 1)[-1]
    if isinstance(cls, type):
        return cls.__name__
    if isinstance(cls, ImportRef):
        return cls.qualname.rsplit(".", 1)[-1]
    code = getattr(cls, "code", None)  # i6_core CodeWrapper
    if isinstance(code, str):
        return code.rsplit(".", 1)[-1]
    return None


def _is_dfd_class(cls: Any) -> bool:
    if isinstance(cls, type):
        return any(c.__name__ in _DFD_CLASS_NAMES for c in cls.__mro__)
    name = dataset_class_name(cls)
    return bool(name) and name.endswith(_DFD_CLASS_NAMES)


def is_distribute_files_dataset(dataset: Any) -> bool:
    """Whether a dataset dict is a DistributeFilesDataset (its class, a subclass, i6_shard's, or a
    dict with ``get_sub_epoch_dataset``, which only that class takes).

    >>> is_distribute_files_dataset({"class": "HDFDataset", "files": ["a.hdf"]})
    False
    """
    if not isinstance(dataset, Mapping):
        return False
    return _is_dfd_class(dataset.get("class")) or "get_sub_epoch_dataset" in dataset


def _is_i6_shard_class(cls: Any) -> bool:
    if isinstance(cls, type):
        return any(
            c.__name__ == "ShardedDistributeFilesDataset" and c.__module__.startswith("i6_shard.") for c in cls.__mro__
        )
    if isinstance(cls, ImportRef):
        return cls.module.startswith("i6_shard.") and cls.qualname == "ShardedDistributeFilesDataset"
    return dataset_class_name(cls) == "ShardedDistributeFilesDataset"


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
    from ..core.io.file_list import read_file_list

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


def sub_epoch_partial(value: Any) -> Optional[functools.partial]:
    """i6_shard's bound ``get_sub_epoch_dataset`` behind ``value`` (also inside i6_core wrappers that
    keep it as ``sub_epoch_partial``), else None."""
    if is_sub_epoch_partial(value):
        return value
    inner = getattr(value, "sub_epoch_partial", None)
    return inner if is_sub_epoch_partial(inner) else None


def _sub_epoch_dataset(dataset: Mapping[str, Any], notes: List[str]) -> Optional[Mapping[str, Any]]:
    """What ``get_sub_epoch_dataset`` returns, as far as it can be told before RETURNN runs: the
    template of i6_shard's bound function, or a user function called with the first inline file."""
    func = dataset.get("get_sub_epoch_dataset")
    partial = sub_epoch_partial(func)
    if partial is not None:
        return partial.keywords["template"]
    files = dataset.get("files")
    if callable(func) and isinstance(files, list) and files:
        try:
            out = func([files[0]])
        except Exception as exc:  # noqa: BLE001 -- user code; RETURNN would call it the same way
            notes.append(f"get_sub_epoch_dataset([first file]) raised {type(exc).__name__}: {exc}")
            return None
        if isinstance(out, Mapping):
            return out
        notes.append(f"get_sub_epoch_dataset returned a {type(out).__name__}, not a dataset dict")
        return None
    notes.append(
        "the sub-epoch dataset dict cannot be told before RETURNN runs (get_sub_epoch_dataset is not "
        "i6_shard's bound function and files are not inline)"
    )
    return None


# --- the context RETURNN builds a dataset in ---------------------------------------------------


@dataclass(frozen=True)
class _Context:
    """The config settings that decide ranks and seeds (read once per config)."""

    distributed: Optional[str]
    dataset_distribution: Optional[str]
    base_offset: int
    behavior_version: int
    batching: Optional[str]
    loader_workers: int
    num_ranks: Optional[int]
    #: ``propagate_behavior_version_to_subprocs`` as the config sets it (None: RETURNN's default)
    propagate_behavior_version: Optional[bool] = None
    #: the behavior version, and the process, where the torch engine reads its datasets
    loader_behavior_version: int = 0
    loader_process: str = "main process"
    sync: Optional[SyncRule] = None
    engine_batching: EngineBatching = EngineBatching()

    @classmethod
    def of(cls, config: Mapping[str, Any], *, num_ranks: Optional[int]) -> "_Context":
        torch_opts = config.get("torch_distributed")
        check_torch_distributed(torch_opts, num_ranks=num_ranks)  # what RETURNN refuses at start-up
        if torch_opts is not None:
            distributed, dist = "torch", _torch_dataset_distribution(torch_opts)
        elif _is_true(config.get("use_horovod")):
            distributed = "horovod"
            dist = config.get("horovod_dataset_distribution", "shard")
            if dist not in ("shard", "random_seed_offset"):
                raise ValueError(
                    f"horovod_dataset_distribution={dist!r}; RETURNN takes 'shard' or 'random_seed_offset'"
                )
        elif config.get("__debug_dummy_distributed_rank_and_size") is not None:
            distributed, dist = "debug", None  # RETURNN's test hook: rank and size, no seed rule
        else:
            distributed, dist = None, None
        base = config.get("dataset_random_seed_offset", 0)
        if not isinstance(base, int) or isinstance(base, bool):
            raise TypeError(f"dataset_random_seed_offset={base!r} in the config must be an int")
        behavior_version = config.get("behavior_version")
        behavior_version = behavior_version if isinstance(behavior_version, int) else 0
        torch = distributed == "torch" or config.get("backend") == "torch"
        propagate = config.get("propagate_behavior_version_to_subprocs")
        propagate = None if propagate is None else _is_true(propagate)
        loader_bv, loader_process = _loader_behavior_version(
            config, behavior_version=behavior_version, torch=torch, propagate=propagate
        )
        return cls(
            distributed=distributed,
            dataset_distribution=dist,
            base_offset=base,
            behavior_version=behavior_version,
            batching=config.get("batching"),
            loader_workers=_loader_shard_workers(config, behavior_version=behavior_version, torch=torch),
            num_ranks=num_ranks,
            propagate_behavior_version=propagate,
            loader_behavior_version=loader_bv,
            loader_process=loader_process,
            sync=_sync_rule(torch_opts, behavior_version=behavior_version),
            engine_batching=EngineBatching.of(config),
        )

    def default_seed(self, *, custom_sharding: bool, where: str) -> SeedRule:
        """``Dataset._get_default_random_seed_offset``: the config's ``dataset_random_seed_offset``,
        plus ``rank * 16127`` under torch_distributed with ``dataset_distribution="random_seed_offset"``
        (or horovod with that distribution), unless the dataset shards by itself
        (``_uses_custom_distributed_sharding``: DistributeFilesDataset with ``distrib_shard_files``)."""
        per_rank = not custom_sharding and self.dataset_distribution == "random_seed_offset"
        return SeedRule(self.base_offset, UNSHARDED_RANK_SEED_STRIDE if per_rank else 0, where)


def _torch_dataset_distribution(opts: Any) -> str:
    """``returnn.torch.distributed.get_dataset_distribution``.

    >>> _torch_dataset_distribution({"dataset_distribution": "shard"})
    'shard'
    """
    if not isinstance(opts, Mapping):
        raise TypeError(
            f"torch_distributed={opts!r} must be a dict (or None), e.g. {{}} or {{'dataset_distribution': 'shard'}}"
        )
    value = opts.get("dataset_distribution", "random_seed_offset")
    if value not in ("random_seed_offset", "shard"):
        raise ValueError(
            f"torch_distributed dataset_distribution={value!r}; RETURNN takes 'random_seed_offset' "
            "(every rank reads all data with its own seed) or 'shard'"
        )
    return value


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
    config: Mapping[str, Any], *, behavior_version: int, torch: bool, propagate: Optional[bool]
) -> Tuple[int, str]:
    """``(behavior version, process)`` where the torch engine reads a dataset, as
    ``returnn.torch.data.pipeline.create_data_loader_from_batches`` sets up the DataLoader: in
    ``num_workers`` worker processes (default 1; 0: the main process), started by default with
    ``NonDaemonicSpawnContext(process_pre_init_func=SubProcCopyGlobalConfigPreInitFunc())`` (see
    :func:`_worker_behavior_version`); a ``"fork"`` context inherits the main process's state, any
    other context starts a fresh process without it.

    >>> _loader_behavior_version({"torch_dataloader_opts": {"num_workers": 0}}, behavior_version=26, torch=True,
    ...                          propagate=None)
    (26, 'main process (torch_dataloader_opts num_workers=0)')
    """
    if not torch:
        return behavior_version, "main process"
    opts = config.get("torch_dataloader_opts") or {}
    opts = opts if isinstance(opts, Mapping) else {}
    if not opts.get("num_workers", 1):
        return behavior_version, "main process (torch_dataloader_opts num_workers=0)"
    context = opts.get("multiprocessing_context", "spawn_non_daemonic")
    if context == "fork":
        return behavior_version, "torch DataLoader worker (forked: it inherits the behavior version)"
    if context == "spawn_non_daemonic":
        version = _worker_behavior_version(behavior_version, propagate=propagate)
        how = "which gets it" if version == behavior_version else "which RETURNN does not give it below 31"
        return version, f"torch DataLoader worker ({how})"
    return 0, f"torch DataLoader worker (multiprocessing_context={context!r}: a fresh process without it)"


def _loader_shard_workers(config: Mapping[str, Any], *, behavior_version: int, torch: bool) -> int:
    """DataLoader workers that each read their own shard of the train dataset:
    ``ReturnnDatasetIterDataPipe.reset`` shards over ``num_workers`` when it is > 1 and
    ``torch_dataloader_shard_workers`` (default: ``behavior_version >= 37``) is on."""
    if not torch:
        return 1
    opts = config.get("torch_dataloader_opts") or {}
    num_workers = opts.get("num_workers", 0) if isinstance(opts, Mapping) else 0
    shard = config.get("torch_dataloader_shard_workers")
    shard = behavior_version >= 37 if shard is None else bool(shard)
    return num_workers if isinstance(num_workers, int) and num_workers > 1 and shard else 1


# --- walking the datasets --------------------------------------------------------------------


@dataclass(frozen=True)
class _Given:
    """What a dataset is constructed with besides its own options (its options win):
    ``init_dataset``'s ``default_kwargs`` and ``_dataset_extend_default_kwargs_from_parent_dataset``."""

    defaults: Mapping[str, Any]
    seed: Optional[SeedRule]
    shards: Optional[ShardRule]
    wrappers: Tuple[str, ...]
    role: str
    fails: Optional[str] = None
    behavior_version: Optional[int] = None  # where it is built (None: the config's)
    process: str = "main process"
    epoch_multiplier: int = 1


def _own_seed(
    dataset: Mapping[str, Any], given: _Given, ctx: _Context, *, custom_sharding: bool, path: Tuple[Any, ...]
) -> SeedRule:
    """``Dataset.random_seed_offset``: the value it was constructed with (its own option, else the
    parent's ``random_seed_offset``), else ``_get_default_random_seed_offset``."""
    if "random_seed_offset" in dataset:  # also None: then the parent's does not apply (setdefault)
        value = dataset["random_seed_offset"]
        if value is None:
            return ctx.default_seed(custom_sharding=custom_sharding, where="default")
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{_name(path)}: random_seed_offset={value!r} must be an int")
        return SeedRule(value, 0, "dataset")
    if given.seed is not None:
        return given.seed
    return ctx.default_seed(custom_sharding=custom_sharding, where="default")


def _own_shards(dataset: Mapping[str, Any], given: _Given, path: Tuple[Any, ...]) -> ShardRule:
    """``_num_shards``/``_shard_index``: its own options, else the parent's, else ``(1, 0)``."""
    if "_num_shards" in dataset or "_shard_index" in dataset:
        num, idx = dataset.get("_num_shards", 1), dataset.get("_shard_index", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (num, idx)) or not 0 <= idx < num:
            raise ValueError(
                f"{_name(path)}: _num_shards={num!r}, _shard_index={idx!r}; RETURNN needs ints with "
                "0 <= _shard_index < _num_shards"
            )
        return ShardRule(per_rank=False, fixed=(num, idx), source="dataset")
    return given.shards or ShardRule(per_rank=False)


def _name(path: Tuple[Any, ...]) -> str:
    return ".".join(map(str, path)) or "dataset"


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


def _children(
    dataset: Mapping[str, Any], name: str, path: Tuple[Any, ...], shards: ShardRule, ctx: _Context
) -> Iterator[Tuple[Tuple[Any, ...], Any, Optional[str], Mapping[str, Any], int]]:
    """``(key path, child dict, why RETURNN fails with a DistributeFilesDataset there, defaults, workers)``
    for the datasets a wrapper builds with ``init_dataset(..., parent_dataset=self)``."""
    key = WRAPPER_CHILDREN.get(name)
    if name == "MetaDataset":
        # MetaDataset.init_seq_order: the seq_order_control_dataset's get_current_seq_order, the others by seq_list.
        fails = (
            "MetaDataset orders its datasets by get_current_seq_order or seq_list, which "
            "DistributeFilesDataset does not implement"
        )
        yield from _dict_children(dataset, path, "datasets", _used_keys(dataset, meta=True), fails)
    elif name == "CombinedDataset":
        fails = None
        if dataset.get("seq_ordering", "default") != "interleave":
            fails = (
                "CombinedDataset re-inits its datasets with a seq_order (every seq_ordering but "
                "'interleave'), which DistributeFilesDataset does not support"
            )
        yield from _dict_children(dataset, path, "datasets", _used_keys(dataset, meta=False), fails)
    elif name == "ConcatDataset":
        for idx, child in enumerate(dataset.get("datasets") or ()):
            yield path + ("datasets", idx), child, None, {}, 1
    elif name == "MultiProcDataset":
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
    elif name == "PostprocessingDataset":
        yield (
            path + ("dataset",),
            dataset.get("dataset"),
            "PostprocessingDataset asks its dataset for data dtypes before any epoch, which "
            "DistributeFilesDataset cannot answer",
            {},
            1,
        )
    elif name == "VariableDataset":
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
    seed = _own_seed(dataset, given, ctx, custom_sharding=distrib, path=path)
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
        shards = shards.with_workers(ctx.loader_workers)  # ReturnnDatasetIterDataPipe.reset -> set_sharding
    seq_ordering = opts.get("seq_ordering")
    if seq_ordering is None:
        seq_ordering = ctx.batching if given.role == "train" and not given.wrappers and ctx.batching else "default"
    partition_epoch = opts.get("partition_epoch") or 1
    files = dataset.get("files")
    kind = files_kind(files)
    if kind == "invalid" and not fails:
        fails = f"files={files!r} is neither a list, a callable, nor a .txt/.json/.py list file"
    sub = _sub_epoch_dataset(dataset, notes)
    explicit = None if sub is None else ("_num_shards" in sub or "_shard_index" in sub)
    sub_entries = list(_flatten_with_path(sub)) if sub is not None else []
    bin_files = (
        set(_string_leaves(files[0])) if kind == "inline" and files and _sub_from_user_function(dataset) else set()
    )
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
        sub_epoch_dataset=sub,
        sub_epoch_explicit_shards=explicit,
        batch_slicing=ctx.distributed == "horovod" and ctx.dataset_distribution == "shard" and given.role == "train",
        returnn_fails=fails,
        num_ranks=ctx.num_ranks,
        notes=tuple(notes),
        process_behavior_version=given.behavior_version,
        reading_process=given.process,
        epoch_multiplier=given.epoch_multiplier,
        sync=ctx.sync,
        engine_batching=ctx.engine_batching,
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


#: Options of RETURNN datasets that name the files they read.
_FILE_KEYS = ("files", "file", "path", "filename")


def _sub_from_user_function(dataset: Mapping[str, Any]) -> bool:
    """Whether the sub-epoch dict came from a user function called with the first file (not a template)."""
    return sub_epoch_partial(dataset.get("get_sub_epoch_dataset")) is None


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
        ctx = _Context.of(DATASET_DICT_CONTEXT if config is None else config, num_ranks=num_ranks)
        _walk(config_or_dataset_dict, (), _top_level("train", config_or_dataset_dict, ctx, role="train"), ctx, out)
        return out
    ctx = _Context.of(config_or_dataset_dict, num_ranks=num_ranks)
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


def unknown_wrappers(records: Sequence[DistributeFilesDatasetInfo]) -> List[str]:
    """Class names of enclosing datasets that the reader has no rule for (read as plain parents)."""
    return sorted({w for r in records for w in r.wrappers if w not in WRAPPER_CHILDREN})

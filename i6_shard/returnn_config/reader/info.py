"""The record of one DistributeFilesDataset as RETURNN would build it (:class:`DistributeFilesDatasetInfo`):
what the reader found, and what follows from it without the ranks (shuffling, seeds, RETURNN's legacy double
sharding in ``DistributeFilesDataset._get_sub_dataset_dict``, the gaps of the step prediction)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ...core.pure import (
    EngineSettings,
    SyncMode,
    ranks_stop_together,
    DEFAULT_DISTRIBUTION,
    DEFAULT_MAX_SUB_EPOCH_DEVIATION,
    UNKNOWN_SEQ_ORDERING,
)
from .engine import (
    engine_reasons,
    interleaving,
    sub_epoch_seq_ordering_of,
    sync_mode_of,
    unmodelled,
)
from .ranks import _PerRank
from .rules import SeedRule, ShardRule
from .tree import _flatten_with_path


@dataclass(frozen=True)
class DistributeFilesDatasetInfo(_PerRank):
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
    :ivar config_engine: the training's engine as the config states it (its batching, filters, accumulation, sync
        and DataLoader workers; read once per config by :func:`~.engine.read_engine`; see :meth:`engine`)
    :ivar duplicate_workers: why each of a rank's DataLoader workers reads all of this dataset, so that every
        sequence comes several times per epoch (:func:`~.rules.duplicate_workers_problem`), or None
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
    config_engine: EngineSettings = EngineSettings()
    duplicate_workers: Optional[str] = None

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
        return self.dataset.get("distribution", DEFAULT_DISTRIBUTION) if self.is_i6_shard else DEFAULT_DISTRIBUTION

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

    @property
    def sub_epoch_seq_ordering(self) -> Any:
        """The ``seq_ordering`` in which the sub-epoch dataset yields each rank's sequences, as the plan's simulation
        takes it (``PlanRequest.sub_epoch_seq_ordering``, :func:`~.engine.sub_epoch_seq_ordering_of`)."""
        return sub_epoch_seq_ordering_of(self.sub_epoch_dataset)

    @property
    def sync_mode(self) -> SyncMode:
        """The sync mode the step and drop model takes for the training (:func:`~.engine.sync_mode_of`)."""
        return sync_mode_of(self.config_engine)

    @property
    def ranks_stop_together(self) -> bool:
        """Whether every rank ends the epoch in the step the first runs out (core's ``ranks_stop_together``)."""
        return ranks_stop_together(self.config_engine.torch_distributed)

    def engine(self, *, ranks_per_node: Optional[int] = None) -> EngineSettings:
        """The training's engine as it reads this dataset: the config's (read once, :func:`~.engine.read_engine`)
        with this dataset's sub-epoch order, sharding mode and the reasons the simulation does not mirror
        (:meth:`engine_inexact`), and torchrun's ranks per host where given (None: not known)."""
        return dataclasses.replace(
            self.config_engine,
            seq_ordering=self.sub_epoch_seq_ordering,
            ranks_per_node=ranks_per_node,
            inexact=tuple(self.engine_inexact()),
            sharding=self.sharding_mode,
        )

    def engine_inexact(self) -> List[str]:
        """What the training does to this dataset's sequences that the plan's simulation does not mirror (the plan's
        ``engine_inexact``, part of its one verdict): several DataLoader workers interleaving their batches
        (:func:`~.engine.interleaving`), a PostprocessingDataset around the sub-epoch dataset or in it that
        maps the sequences (``map_seq``/``map_seq_stream``: it may change their lengths or number). An unseen
        sub-epoch dataset is said by its order (:attr:`sub_epoch_seq_ordering` ``"unknown"``)."""
        if self.role != "train":
            return []
        out = interleaving(self.config_engine, shard=self.shards.loader_workers > 1) + engine_reasons(
            self.config_engine
        )
        if "PostprocessingDataset" in self.wrappers:
            out.append(
                "a PostprocessingDataset around the DistributeFilesDataset may change the sequences' lengths or "
                "number, which the simulation (the costs archive's lengths) does not mirror"
            )
        mapped = [
            ".".join(map(str, path))
            for path, v in _flatten_with_path(self.sub_epoch_dataset or {})
            if path[-1] in ("map_seq", "map_seq_stream") and v is not None
        ]
        if mapped:
            out.append(
                f"the sub-epoch dataset maps its sequences ({', '.join(mapped)}: a PostprocessingDataset), which may "
                "change their lengths or number, and the simulation (the costs archive's lengths) does not mirror it"
            )
        return out

    def prediction_gaps(self) -> List[str]:
        """What the step and drop prediction does not model for this dataset: the engine's batching
        beyond ``batch_size``/``max_seqs`` (:func:`~.engine.unmodelled`) and a sub-epoch dataset whose order
        is not known (:attr:`sub_epoch_seq_ordering` ``"unknown"``); a known order is the plan's to state, and is
        compared with it (``engine_differences``)."""
        out = unmodelled(self.config_engine) if self.role == "train" else []
        if self.sub_epoch_seq_ordering == UNKNOWN_SEQ_ORDERING:
            orders = [v for path, v in _flatten_with_path(self.sub_epoch_dataset or {}) if path[-1] == "seq_ordering"]
            seen = f"={orders[0]!r}" if orders else ""
            out.append(f"the sub-epoch dataset's seq_ordering{seen} (its order is not known to the simulation)")
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

"""A DistributeFilesDataset on each rank: its ``_num_shards``/``_shard_index`` and seed per rank, why no
ShardPlan describes it (RETURNN would fail, or the ranks read overlapping parts), and the settings of the plan
it follows (``DistributeFilesDataset.__init__`` and ``init_seq_order`` on rank r of W)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ...core.pure import (
    EngineSettings,
    PlanRequest,
    PlanSettings,
    check_enough_files,
    check_optional_int,
    check_sub_epoch_seq_ordering,
    cut_spec,
)
from .plan_options import engine_plan_options, warn_inexact

if TYPE_CHECKING:
    from .info import DistributeFilesDatasetInfo


class _PerRank:
    """What a :class:`~i6_shard.returnn_config.reader.DistributeFilesDatasetInfo` is on each rank, and the
    plan it follows: its sharding mode, ``_num_shards``/``_shard_index`` and seed per rank, and the
    settings of its ShardPlan (or why none describes it)."""

    @property
    def sharding_mode(self) -> Optional[str]:
        """The key of ``core.pure.settings.SHARDING_MODES`` that the plan of this dataset follows, or None if
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
        if self.role == "train" and self.duplicate_workers:
            return self.duplicate_workers
        if self.epoch_multiplier != 1:
            return (
                f"a MultiEpochDataset with multi_epoch={self.epoch_multiplier} reads this dataset's epochs "
                f"(e-1)*{self.epoch_multiplier}+1 .. e*{self.epoch_multiplier} in training epoch e, so the "
                "plan's epochs are not the training's; use multi_epoch=1 or no MultiEpochDataset"
            )
        dedicated = self.shards.shards_per_rank // self.shards.loader_workers
        if dedicated != 1:
            return (
                f"each rank splits its part over {dedicated} MultiProcDataset 'dedicated' workers; a ShardPlan has "
                "one instance per rank; use sharding_method='seq_order' or num_workers=1 in the MultiProcDataset"
            )
        if self.shards.loader_workers != 1 and not self.sharded:
            return (
                f"each rank's {self.shards.loader_workers} DataLoader workers read a shard each of the files every "
                "rank reads (the dataset is not sharded over the ranks); a ShardPlan shards over the ranks or not "
                "at all; shard the files (distrib_shard_files=True), or read with one DataLoader worker "
                "(torch_dataloader_opts num_workers=1)"
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

    def _too_few_files(self) -> Optional[str]:
        """Why the files cannot fill the bins of the shards they are cut into (``_distribute_evenly_by_size``), as the
        graph checks say it; None where they can, or where their number is not known here."""
        pe = self.partition_epoch
        if self.num_files is None or self.num_ranks is None or not isinstance(pe, int) or pe < 1:
            return None
        try:
            check_enough_files(
                self.num_files,
                num_shards=self.shards.num_shards(self.num_ranks if self.distributed else 1),
                partition_epoch=self.partition_epoch,
            )
        except ValueError as exc:
            return str(exc)
        return None

    def plan_settings(
        self, *, num_epochs: Optional[int] = None, distribution: Optional[str] = None, num_ranks: Optional[int] = None
    ) -> PlanSettings:
        """The :class:`~i6_shard.core.PlanSettings` of the plan this dataset follows: those of :meth:`plan_request`.

        :raises ValueError: as :meth:`plan_request`
        """
        return self.plan_request(num_epochs=num_epochs, distribution=distribution, num_ranks=num_ranks).settings

    def plan_request(
        self, *, num_epochs: Optional[int] = None, distribution: Optional[str] = None, num_ranks: Optional[int] = None
    ) -> PlanRequest:
        """The :class:`~i6_shard.core.PlanRequest` of the plan this dataset follows (on the ranks it was read for, or
        ``num_ranks``), made by the one constructor ``PlanRequest.from_options`` from :meth:`plan_options`; warns
        (:class:`InexactPlanWarning`) naming each setting of the training that the plan cannot take exactly.

        :raises ValueError: if no ShardPlan describes it, saying why
        """
        options, notes = self.plan_options(num_epochs=num_epochs, distribution=distribution, num_ranks=num_ranks)
        request = PlanRequest.from_options(**options)
        reason = request.inexact_reason()  # the plan's one verdict, said where the plan is asked for
        warn_inexact(
            notes + ([] if reason is None else [f"its simulation of the engine is not exact ({reason})"]),
            where=self.name,
        )
        return request

    def plan_options(
        self, *, num_epochs: Optional[int] = None, distribution: Optional[str] = None, num_ranks: Optional[int] = None
    ) -> Tuple[Dict[str, Any], List[str]]:
        """The plan options (``PlanRequest.from_options``' keyword arguments) of the plan this dataset follows: the
        sharding mode, seeds, ``partition_epoch`` and distribution as this dataset has them, the sub-epochs it
        preloads, and the training's batching and sync as RETURNN's torch engine reads them
        (:func:`~i6_shard.returnn_config.reader.plan_options.engine_plan_options`); and a note for each setting the
        plan cannot take exactly.

        :param num_epochs: the training's ``num_epochs``; the plan also holds the sub-epochs the dataset preloads
            after them (None: a plan of no fixed length)
        :param distribution: plan with this distribution instead of the dataset's own
        :raises ValueError: if no ShardPlan describes it, saying why
        """
        info = self if num_ranks is None else self.for_ranks(num_ranks)
        if info.num_ranks is None:
            raise ValueError(f"{self.name}: the number of ranks is not known; pass num_ranks")
        files = info._too_few_files()  # (the mode is known, but RETURNN's cut of the files fails)
        problem = info.plan_problem() or (files and f"RETURNN would fail: {files}")
        if problem:
            raise ValueError(f"{self.name}: {problem}; fix the config before planning")
        distribution = distribution or info.distribution
        takes_bound = cut_spec(distribution).sub_epoch_bound is not None
        preload = info.dataset.get("preload_next_n_sub_epochs")
        options: Dict[str, Any] = dict(
            sharding=info._mode(),
            # each DataLoader worker that shards reads one of ranks * num_workers shards (set_sharding)
            num_shards=info.num_ranks * info.shards.loader_workers,
            partition_epoch=info.partition_epoch,
            num_epochs=num_epochs,
            seq_ordering=info.seq_ordering,
            random_seed_offset=info.seed.base,
            fixed_random_seed=info.fixed_random_seed,
            distribution=distribution,
            # the bound of a distribution that takes it only: planned with another one, the dataset's is not used
            max_sub_epoch_deviation=info.max_sub_epoch_deviation if takes_bound else None,
            preload_next_n_sub_epochs=preload if isinstance(preload, int) else None,
        )
        train = info.role == "train"  # (another dataset's batching is not the training's; the sync is)
        own = EngineSettings(accum_grad_multiple_step=None, torch_distributed=info.config_engine.torch_distributed)
        engine, notes = engine_plan_options(info.config_engine if train else own)
        options.update(engine)
        if info.role == "train":  # the order the sub-epoch dataset yields the sequences in, which they batch in
            order = info._checked_sub_epoch_seq_ordering()
            if "batch_size" in engine or "max_seqs" in engine:  # (simulated only under batching)
                options["sub_epoch_seq_ordering"] = order
                options["engine_inexact"] = tuple(info.engine_inexact()) or None
        return options, notes

    def _checked_sub_epoch_seq_ordering(self) -> str:
        """:attr:`sub_epoch_seq_ordering`, or a ValueError naming the dataset, the value RETURNN fails on and the fix."""
        try:
            return check_sub_epoch_seq_ordering(self.sub_epoch_seq_ordering)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self.name}: the sub-epoch dataset's {exc}") from None

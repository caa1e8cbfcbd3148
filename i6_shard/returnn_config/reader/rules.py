"""The seed and the shard a dataset has on each rank: :class:`SeedRule` (``Dataset.random_seed_offset``,
``Dataset._get_default_random_seed_offset``) and :class:`ShardRule` (``_num_shards``/``_shard_index`` as
``Dataset.__init__`` takes them and ``_dataset_extend_default_kwargs_from_parent_dataset`` passes them on)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple


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
    :ivar loader_workers: the factor of ``shards_per_rank`` that torch DataLoader workers make (each reads its own
        shard, ``ReturnnDatasetIterDataPipe.reset``); the rest are MultiProcDataset ``"dedicated"`` workers
    """

    per_rank: bool
    fixed: Tuple[int, int] = (1, 0)
    shards_per_rank: int = 1
    source: str = "default"
    loader_workers: int = 1

    def num_shards(self, num_ranks: int) -> int:
        return (num_ranks if self.per_rank else self.fixed[0]) * self.shards_per_rank

    def shard_index(self, rank: int, worker: int = 0) -> int:
        return (rank if self.per_rank else self.fixed[1]) * self.shards_per_rank + worker

    def more_than_one(self, num_ranks: Optional[int]) -> bool:
        """Whether ``_num_shards > 1`` (unknown num_ranks counts as several)."""
        if self.per_rank and (num_ranks is None or num_ranks > 1):
            return True
        return self.num_shards(1) > 1

    def with_workers(self, num_workers: int, *, loader: bool = False) -> "ShardRule":
        """The rule of each of ``num_workers`` instances that split a rank's part (``loader``: DataLoader workers)."""
        return dataclasses.replace(
            self,
            shards_per_rank=self.shards_per_rank * num_workers,
            loader_workers=self.loader_workers * (num_workers if loader else 1),
        )

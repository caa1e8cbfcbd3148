"""The seed and the shard a dataset has on each rank: :class:`SeedRule` (``Dataset.random_seed_offset``,
``Dataset._get_default_random_seed_offset``), :class:`ShardRule` (``_num_shards``/``_shard_index`` as
``Dataset.__init__`` takes them and ``_dataset_extend_default_kwargs_from_parent_dataset`` passes them on), and
DataLoader workers that each read all of a rank's data (:func:`duplicate_workers_problem`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Tuple, Union

from ...core.pure import release_has, returnn_feature
from .engine import _torch_engine, read_engine


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


def duplicate_workers_problem(
    config: Mapping[str, Any],
    *,
    role: str = "train",
    returnn_version: Union[None, str, Callable[[str], bool]] = None,
    release_name: Optional[str] = None,
) -> Optional[str]:
    """Why every sequence of a ``role`` (``"train"`` or ``"eval"``) dataset comes several times per epoch, or None:
    the torch engine reads every dataset through ``torch_dataloader_opts``' DataLoader (``Engine._create_data_loader``,
    train and eval alike), whose ``num_workers`` > 1 workers each hold a copy of it, and
    ``ReturnnDatasetIterDataPipe.__iter__`` (``returnn/torch/data/returnn_dataset_wrapper.py``) yields all of that
    copy in each, unless ``ReturnnDatasetIterDataPipe.reset`` gives each worker a shard (``torch_dataloader_shard_workers``,
    default ``behavior_version >= 37``), which RETURNN ``returnn_version`` (None: the newest) has only from
    1.20261022.211313 (``release_name`` names the release where ``returnn_version`` is a running RETURNN's features). The one rule, said by the graph checks (a problem for
    the train dataset, a warning for eval), the plan and the RETURNN-side dataset in these words.

    >>> duplicate_workers_problem({"backend": "torch", "behavior_version": 24,
    ...                            "torch_dataloader_opts": {"num_workers": 2}})[:96]
    'torch_dataloader_opts num_workers=2: each of the 2 DataLoader workers of a rank reads all of the'
    >>> duplicate_workers_problem({"backend": "torch", "behavior_version": 37, "torch_dataloader_opts": {"num_workers": 2}})
    """
    engine = read_engine(config, returnn_version=returnn_version)
    workers = engine.num_workers
    if not _torch_engine(config) or not isinstance(workers, int) or isinstance(workers, bool) or workers <= 1:
        return None
    if engine.shard_workers:
        return None
    since = returnn_feature("dataloader_shard_workers").first_version
    if release_has(returnn_version, "dataloader_shard_workers") is False:
        name = returnn_version if isinstance(returnn_version, str) else release_name or "this release"
        cause = f"RETURNN {name} has no DataLoader worker sharding (torch_dataloader_shard_workers, from {since})"
    elif config.get("torch_dataloader_shard_workers") is not None:
        cause = f"torch_dataloader_shard_workers={config.get('torch_dataloader_shard_workers')!r}"
    else:
        bv = config.get("behavior_version")
        cause = f"behavior_version={bv if isinstance(bv, int) else 0} < 37 leaves torch_dataloader_shard_workers off"
    what = (
        f"trained {workers} times per epoch"
        if role == "train"
        else f"evaluated {workers} times (the scores are those of one reading; the evaluation takes {workers} times as long)"
    )
    return (
        f"torch_dataloader_opts num_workers={workers}: each of the {workers} DataLoader workers of a rank reads all of "
        f"the rank's data (ReturnnDatasetIterDataPipe: {cause}), so every sequence is {what}; set torch_dataloader_opts={{'num_workers': 1}} (or 0), or on RETURNN >= {since} behavior_version >= "
        "37 or torch_dataloader_shard_workers=True"
    )

"""The config settings that decide ranks and seeds, read once per config: where RETURNN's
``_get_distributed_rank_and_size`` takes rank and size from, the ``dataset_distribution``, the base
seed of ``Dataset._get_default_random_seed_offset``, the DataLoader, and the training's engine (one description)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from ...core.pure import UNSHARDED_RANK_SEED_STRIDE, EngineSettings, release_has
from .engine import (
    read_engine,
    _is_true,
    _loader_behavior_version,
    _loader_shard_workers,
    _torch_dataset_distribution,
)
from ..torch_distributed import check_torch_distributed
from .rules import SeedRule, ShardRule, duplicate_workers_problem
from .sync import _sync_rule

#: The RETURNN config around a dataset dict that is read on its own (``check_dataset_dict``): the
#: train dataset of a torch distributed training with RETURNN's default ``dataset_distribution``.
DATASET_DICT_CONTEXT: Mapping[str, Any] = {"torch_distributed": {}}


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
    #: the training's engine (:func:`~.engine.read_engine`), read once
    engine: EngineSettings = EngineSettings()
    #: the RETURNN release the training runs (None: the newest; or its detected features, ``core.pure.release_has``),
    #: whose rules the seeds and workers follow
    returnn_version: Union[None, str, Callable[[str], bool]] = None
    #: by role (``"train"``, ``"eval"``): why each of a rank's DataLoader workers reads all of its data, or None
    #: (:func:`~.rules.duplicate_workers_problem`)
    duplicate_workers: Mapping[str, Optional[str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(
        cls,
        config: Mapping[str, Any],
        *,
        num_ranks: Optional[int],
        returnn_version: Union[None, str, Callable[[str], bool]] = None,
    ) -> "_Context":
        torch_opts = config.get("torch_distributed")
        check_torch_distributed(torch_opts, num_ranks=num_ranks)  # what RETURNN refuses at start-up
        release = {"returnn_version": returnn_version}
        if torch_opts is not None:
            distributed, dist = "torch", _torch_dataset_distribution(torch_opts, **release)
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
        if release_has(returnn_version, "dataset_random_seed_offset") is False:
            base = 0  # not read by that release (release.config_release_problems says so)
        behavior_version = config.get("behavior_version")
        behavior_version = behavior_version if isinstance(behavior_version, int) else 0
        torch = distributed == "torch" or config.get("backend") == "torch"
        propagate = config.get("propagate_behavior_version_to_subprocs")
        propagate = None if propagate is None else _is_true(propagate)
        _sync_rule(torch_opts, behavior_version=behavior_version)  # what RETURNN's DistributedContext refuses
        loader_bv, loader_process = _loader_behavior_version(
            config, behavior_version=behavior_version, torch=torch, propagate=propagate, **release
        )
        return cls(
            distributed=distributed,
            dataset_distribution=dist,
            base_offset=base,
            behavior_version=behavior_version,
            batching=config.get("batching"),
            loader_workers=_loader_shard_workers(config, behavior_version=behavior_version, torch=torch, **release),
            num_ranks=num_ranks,
            propagate_behavior_version=propagate,
            loader_behavior_version=loader_bv,
            loader_process=loader_process,
            engine=read_engine(config, returnn_version=returnn_version),
            returnn_version=returnn_version,
            duplicate_workers={
                role: duplicate_workers_problem(config, role=role, **release) for role in ("train", "eval")
            },
        )

    def default_seed(self, *, custom_sharding: bool, where: str) -> SeedRule:
        """``Dataset._get_default_random_seed_offset``: the config's ``dataset_random_seed_offset`` (0 on a release
        that does not read it), plus ``rank * 16127`` under torch_distributed with
        ``dataset_distribution="random_seed_offset"`` (or horovod with that distribution), unless the dataset shards
        by itself (``_uses_custom_distributed_sharding``, see :meth:`dfd_custom_sharding`)."""
        per_rank = not custom_sharding and self.dataset_distribution == "random_seed_offset"
        return SeedRule(self.base_offset, UNSHARDED_RANK_SEED_STRIDE if per_rank else 0, where)

    def dfd_custom_sharding(self, *, distrib_shard_files: bool, shards: ShardRule) -> bool:
        """A DistributeFilesDataset's ``_uses_custom_distributed_sharding`` (its seed the same on every rank):
        ``distrib_shard_files``, or on a release before that rule (``returnn_version``), ``_num_shards > 1``.

        >>> old = _Context.of({"torch_distributed": {}}, num_ranks=2, returnn_version="1.20250115.110555")
        >>> old.dfd_custom_sharding(distrib_shard_files=False, shards=ShardRule(per_rank=False, fixed=(2, 1)))
        True
        """
        if release_has(self.returnn_version, "seed_fixed_by_distrib_shard_files") is False:
            return shards.more_than_one(self.num_ranks)
        return distrib_shard_files

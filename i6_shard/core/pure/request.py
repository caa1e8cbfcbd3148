"""PlanRequest: everything a plan and its outputs are made from besides the files (the settings, the batching
limits and sync mode of the prediction, the per-node cache), in one frozen object with one ``validate()``, built from the same
keyword options by the command line, ``ShardPlanJob`` and the builders; each option's default is written here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from .args import check_bool, check_int, check_optional_int
from .batching import DEFAULT_REDUCE_TYPE, Batching, SyncMode
from .cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, NodeCache, check_preload_next_n_sub_epochs
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_bound_is_used
from .settings import DEFAULT_DISTRIBUTION, DEFAULT_SEQ_ORDERING, PlanSettings

__all__ = ["PlanRequest", "PLAN_OPTION_DEFAULTS", "PLAN_OPTION_HELP"]

#: The optional plan options and their defaults, the one place they are written: ``PlanRequest.from_options``
#: applies them, the command line shows them, ``ShardPlanJob`` hashes an option at its default as if absent.
PLAN_OPTION_DEFAULTS: Dict[str, Any] = {
    "seq_ordering": DEFAULT_SEQ_ORDERING,
    "random_seed_offset": None,  # RETURNN's default 0
    "fixed_random_seed": None,
    "distribution": DEFAULT_DISTRIBUTION,
    "max_sub_epoch_deviation": DEFAULT_MAX_SUB_EPOCH_DEVIATION,
    "sharding": "sharded",
    "batch_size": None,
    "max_seqs": None,
    "ranks_per_node": None,
    "preload_next_n_sub_epochs": None,  # RETURNN's default, DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS
    "cached_file": True,
    "cache_size": None,
    "reduce_type": DEFAULT_REDUCE_TYPE,  # torch_distributed's: every rank stops in the step the first runs out
    "param_sync_step": None,
    "accum_grad_multiple_step": None,  # the config's default 1
    "sub_epoch_constant_bytes": None,  # 0: the sub-epoch dataset reads only its bin's files
    "lengths": None,  # the sequence lengths come from the archive the plan is cut by
}

#: What each option of :data:`PLAN_OPTION_DEFAULTS` means, in one line: the command line's help and the docs
#: take it from here (the command line adds the default).
PLAN_OPTION_HELP: Dict[str, str] = {
    "seq_ordering": "the sub-epoch dataset's seq_ordering as the plan's shuffle of the files sees it: random "
    "(RETURNN shuffles the files anew every full epoch) or default (the list's order, the same bins every full "
    "epoch)",
    "random_seed_offset": "sharded: the dataset's random_seed_offset, or else the config's "
    "dataset_random_seed_offset (RETURNN's default 0); unsharded: the config's dataset_random_seed_offset, to "
    "which RETURNN adds rank*16127 on each rank (with the same seed on all ranks: the dataset's "
    "random_seed_offset)",
    "fixed_random_seed": "the dataset's fixed_random_seed (the same shuffle every full epoch)",
    "distribution": "how bins are cut: returnn (what DistributeFilesDataset does), balanced, flexible "
    "(sub-epochs within max_sub_epoch_deviation) or flexible_auto (that bound chosen per full epoch, "
    "docs/flexible_split.md)",
    "max_sub_epoch_deviation": "with distribution flexible: how far a sub-epoch's size may be from the mean "
    "sub-epoch's, as a share of it, in [0, 1)",
    "sharding": "sharded (distrib_shard_files=True), unsharded (every rank shuffles all files itself) or "
    "unsharded_same_seed (unsharded, the same seed on every rank)",
    "batch_size": "RETURNN's batch_size in frames: predict the loss under its batching (needs a costs archive)",
    "max_seqs": "RETURNN's max_seqs, for the prediction",
    "ranks_per_node": "ranks (GPUs) per node: report the bytes each node's file cache must hold at once per "
    "sub-epoch and the reads from the shared file system",
    "preload_next_n_sub_epochs": "the dataset's preload_next_n_sub_epochs (RETURNN's default "
    f"{DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS} with use_worker_proc=True; 0 with use_worker_proc=False): the plan "
    "holds these sub-epochs after the training's last, and with ranks_per_node the node cache holds them",
    "cached_file": "get_sub_epoch_dataset wraps the files in CachedFile (else every rank reads from the shared "
    "file system and the node caches nothing)",
    "cache_size": "bytes of each node's local cache (with ranks_per_node): say whether the plan fits and which "
    "partition_epoch values do",
    "reduce_type": "torch_distributed's reduce_type, which the predicted loss and steps assume: grad (every rank stops in the step "
    "the first runs out) or param (the others run on to their next sync)",
    "param_sync_step": "with reduce_type param: torch_distributed's param_sync_step (steps between param syncs)",
    "accum_grad_multiple_step": "the config's accum_grad_multiple_step (steps per optimizer update; default 1): "
    "param syncs come every param_sync_step updates",
    "sub_epoch_constant_bytes": "with ranks_per_node: bytes of the files the sub-epoch dataset reads in every "
    "sub-epoch besides its bin's: the node cache holds them in every sub-epoch",
    "lengths": "a costs archive (`costs`, ComputeFileCostsJob) of the same files in the same order: the "
    "prediction takes its sequence lengths, the bins are still cut by the sizes archive (e.g. one in bytes, "
    "as RETURNN cuts a plain DistributeFilesDataset)",
}


@dataclass(frozen=True)
class PlanRequest:
    """A plan to make: its settings, and what its outputs add.

    :ivar settings: the plan's settings; ``num_epochs`` holds the training's sub-epochs and the
        ``preloaded_sub_epochs`` RETURNN loads after them
    :ivar batching: RETURNN's ``batch_size``/``max_seqs``: the outputs predict the loss under them (needs a costs
        archive); None: no prediction, unless the costs count steps (then under their own limits)
    :ivar node_cache: the ranks per node and how they cache files: the outputs add the per-node cache footprint
    :ivar cache_size: bytes of each node's cache: the outputs say whether the plan fits (needs ``node_cache``)
    :ivar sync: how the ranks sync (``torch_distributed``'s ``reduce_type``, ``param_sync_step``): the predicted
        steps and loss assume it
    :ivar lengths: path of a costs archive of the same files whose sequence lengths the prediction takes (the
        bins are cut by the archive the plan is made of); None: that archive's own lengths

    >>> PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=4, cache_size=10**9)
    Traceback (most recent call last):
    ...
    ValueError: cache_size describes the per-node cache: give ranks_per_node too (GPUs per node), or leave them out
    """

    settings: PlanSettings
    batching: Optional[Batching] = None
    node_cache: Optional[NodeCache] = None
    cache_size: Optional[int] = None
    sync: SyncMode = SyncMode()
    lengths: Optional[str] = None

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ``TypeError``/``ValueError`` naming the option and the fix for a request that cannot be made;
        the settings and their parts validate themselves when they are built."""
        if not isinstance(self.settings, PlanSettings):
            raise TypeError(f"settings has type {type(self.settings).__name__}; give a PlanSettings")
        check_bound_is_used(self.settings.max_sub_epoch_deviation, distribution=self.settings.distribution)
        if self.cache_size is not None:
            check_int(self.cache_size, name="cache_size", minimum=1, hint="bytes of file cache per node, or None")
            if self.node_cache is None:
                raise ValueError(
                    f"cache_size={self.cache_size} needs node_cache (the ranks per node) to compute the "
                    "footprint it is compared with"
                )
        if not isinstance(self.sync, SyncMode):
            raise TypeError(f"sync has type {type(self.sync).__name__}; give a SyncMode, e.g. SyncMode('param', 100)")
        if self.lengths is not None and (not isinstance(self.lengths, str) or not self.lengths):
            error = TypeError if not isinstance(self.lengths, str) else ValueError
            raise error(
                f"lengths={self.lengths!r}: give the path of a costs archive (a str, e.g. 'costs.npz'), or None"
            )

    @classmethod
    def from_options(
        cls, *, num_shards: int, partition_epoch: int, num_epochs: Optional[int], **options: Any
    ) -> "PlanRequest":
        """The one constructor of a request, from the plan options as the command line, ``ShardPlanJob``, the
        builders, the config reader and the verify job take them: ``num_epochs`` is the training's, the plan also
        holds the ``preload_next_n_sub_epochs`` after them (None: a plan of no fixed length, whose sub-epochs are
        cut as they are asked for; nothing is preloaded then); the other options are those of
        :data:`PLAN_OPTION_DEFAULTS` (None where an option is not given means its default).

        >>> PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=4).settings.num_epochs
        5
        >>> PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=None).settings.num_epochs is None
        True
        """
        unknown = sorted(set(options) - set(PLAN_OPTION_DEFAULTS))
        if unknown:
            raise TypeError(f"unknown plan options {unknown}; the options are {sorted(PLAN_OPTION_DEFAULTS)}")
        o = {
            name: default if options.get(name) is None else options[name]
            for name, default in PLAN_OPTION_DEFAULTS.items()
        }
        preload = (
            DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS
            if o["preload_next_n_sub_epochs"] is None
            else check_preload_next_n_sub_epochs(o["preload_next_n_sub_epochs"])
        )
        if num_epochs is not None:
            num_epochs = check_int(
                num_epochs, name="num_epochs", minimum=1, hint="the training's num_epochs, counted in sub-epochs"
            )
        settings = PlanSettings.from_mode(
            sharding=o["sharding"],
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            num_epochs=None if num_epochs is None else num_epochs + preload,
            preloaded_sub_epochs=0 if num_epochs is None else preload,
            seq_ordering=o["seq_ordering"],
            random_seed_offset=o["random_seed_offset"] or 0,
            fixed_random_seed=o["fixed_random_seed"],
            distribution=o["distribution"],
            max_sub_epoch_deviation=o["max_sub_epoch_deviation"],
        )
        batching = (
            None
            if o["batch_size"] is None and o["max_seqs"] is None
            else Batching(batch_size=o["batch_size"], max_seqs=o["max_seqs"])
        )
        return cls(
            settings,
            batching,
            *_node_cache(o, preload=preload),
            sync=SyncMode(o["reduce_type"], o["param_sync_step"], o["accum_grad_multiple_step"] or 1),
            lengths=None if o["lengths"] is None else _path_text(o["lengths"]),
        )


def _path_text(path: Any) -> Any:
    """A path given as ``os.PathLike`` (e.g. ``pathlib.Path``) as its str; anything else unchanged, for
    ``validate`` to name."""
    fspath = getattr(type(path), "__fspath__", None)
    return fspath(path) if fspath is not None else path


def _node_cache(o: Dict[str, Any], *, preload: int) -> tuple:
    """The per-node cache and the cache size of the options; the cache options need ``ranks_per_node``."""
    cached_file = check_bool(o["cached_file"], name="cached_file")
    cache_size = check_optional_int(
        o["cache_size"], name="cache_size", minimum=1, hint="bytes of file cache per node, or None"
    )
    constant = check_optional_int(
        o["sub_epoch_constant_bytes"],
        name="sub_epoch_constant_bytes",
        minimum=0,
        hint="bytes of the files the sub-epoch dataset reads in every sub-epoch",
    )
    if o["ranks_per_node"] is None:
        given = [
            name
            for name, used in (
                ("cached_file", not cached_file),
                ("cache_size", cache_size is not None),
                ("sub_epoch_constant_bytes", constant is not None),
            )
            if used
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} {'describes' if len(given) == 1 else 'describe'} the per-node cache: give "
                "ranks_per_node too (GPUs per "
                "node), or leave them out"
            )
        return None, None
    return NodeCache(
        ranks_per_node=o["ranks_per_node"],
        preload_next_n_sub_epochs=preload,
        cached_file=cached_file,
        constant_bytes=constant or 0,
    ), cache_size

"""PlanRequest: everything a plan and its outputs are made from besides the files (the settings, the batching
limits and sync mode of the prediction, the per-node cache), in one frozen object with one ``validate()``, built from
the options of the one table of them (:data:`~.options.PLAN_OPTIONS`) by the command line, the jobs and the builders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from .args import check_int
from .batching import DEFAULT_REDUCE_TYPE, Batching, SyncMode
from .cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, NodeCache
from .cut import check_bound_is_used, cut_spec
from .engine_sim import EngineSettings, check_sub_epoch_seq_ordering, inexact_reason, sync_inexact_reason
from .options import PLAN_OPTIONS, check_by_key, check_returnn_version, option_defaults
from .plan_sim import engine_record, plan_engine
from .settings import DEFAULT_SEQ_ORDERING, PlanSettings
from .text import short_repr
from .torch_distributed import check_torch_distributed

__all__ = ["PlanRequest", "PLAN_OPTION_DEFAULTS", "report_engine_options"]

#: The optional plan options and their defaults (:data:`~.options.PLAN_OPTIONS`' ``default``):
#: ``PlanRequest.from_options`` applies them where an option is not given (None).
PLAN_OPTION_DEFAULTS: Dict[str, Any] = option_defaults(PLAN_OPTIONS)


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
    :ivar torch_distributed: the config's ``torch_distributed`` (checked as RETURNN checks it at start-up): the sync
        the simulation takes, levels included; None: the one ``sync`` says
    :ivar max_seq_length: the config's ``max_seq_length`` (an int, or a dict by data key): the simulation's filter
    :ivar batch_size_by_key: the config's ``batch_size`` where it is a dict by data key (``batching`` then holds the
        smallest of its limits, for the statistical model; the simulation says it is not exact for several keys)
    :ivar sub_epoch_seq_ordering: the sub-epoch dataset's ``seq_ordering``, which the simulation mirrors
        (``"unknown"``: not known, the simulation says it is not exact)
    :ivar weights: one weight per corpus (the archives planned, in their order), as exact texts: a full epoch reads a
        corpus weight x its files times (:class:`~.corpora.Corpora`); None: each file once
    :ivar corpus_names: one name per corpus; None: the archives' stems
    :ivar engine_inexact: what the training does to the sequences that the simulation does not mirror (the config
        reader's reasons); the simulation then says it is not exact, naming each
    :ivar returnn_version: the RETURNN release the training runs, whose own cut ``distribution="returnn"`` mirrors
        (:func:`~.cut.cut_for_release`); None: the newest release's

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
    torch_distributed: Optional[Dict[str, Any]] = field(default=None, hash=False)
    max_seq_length: Union[None, int, Dict[str, int]] = field(default=None, hash=False)
    batch_size_by_key: Optional[Dict[str, int]] = field(default=None, hash=False)
    sub_epoch_seq_ordering: str = DEFAULT_SEQ_ORDERING
    weights: Optional[Tuple[str, ...]] = None
    corpus_names: Optional[Tuple[str, ...]] = None
    engine_inexact: Tuple[str, ...] = ()
    returnn_version: Optional[str] = None

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
        check_torch_distributed(
            self.torch_distributed,
            num_ranks=self.settings.num_shards,
            ranks_per_node=None if self.node_cache is None else self.node_cache.ranks_per_node,
        )
        if self.torch_distributed is not None:
            _check_sync_agrees(self.torch_distributed, self.sync)
        if self.returnn_version is not None:
            check_returnn_version(self.returnn_version)
        check_by_key(self.max_seq_length, name="max_seq_length", hint="the longest sequence kept, in frames")
        if self.batch_size_by_key is not None:
            check_by_key(self.batch_size_by_key, name="batch_size", hint="frames per batch, padding included")
        try:
            check_sub_epoch_seq_ordering(self.sub_epoch_seq_ordering)
        except (TypeError, ValueError) as exc:  # (named as the option it came from)
            raise type(exc)(f"sub_epoch_seq_ordering: the sub-epoch dataset's {exc}") from None
        reason = self.inexact_reason()
        if reason is not None and cut_spec(self.settings.distribution).needs_engine:  # said here, not in the job
            raise ValueError(
                f"distribution={self.settings.distribution!r} equalizes the simulated steps, but this training is not "
                f"simulated exactly: {reason}; choose another distribution (e.g. balanced)"
            )

    def inexact_reason(self) -> Optional[str]:
        """Why the plan's simulation of the training under the request's batching will not be exact (the one verdict,
        :func:`~.engine_sim.inexact_reason` of :meth:`engine`), or None: exact, or no batching given here (costs in
        steps bring their own limits, known where the plan is made): then only the sync is judged (a ``"node"`` level
        needs ``ranks_per_node`` wherever steps are simulated).

        >>> levels = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]}
        >>> PlanRequest.from_options(num_shards=4, partition_epoch=1, num_epochs=1, max_seqs=8,
        ...                          torch_distributed=levels).inexact_reason().split(": ")[-1]
        "give ranks_per_node= (torchrun's --nproc-per-node, the ranks per host)"
        """
        if self.batching is None:  # the sync alone: a "node" level's groups are needed wherever steps are simulated
            ranks_per_node = self._engine_options()["ranks_per_node"]
            return sync_inexact_reason(
                self.torch_distributed, num_ranks=self.settings.num_shards, ranks_per_node=ranks_per_node
            )
        return inexact_reason(self.engine(), num_ranks=self.settings.num_shards)

    def engine(self, batching: Optional[Batching] = None) -> EngineSettings:
        """The torch engine the plan's simulation takes (:func:`~.plan_sim.plan_engine`) under ``batching`` (None: the
        request's own)."""
        return plan_engine(batching or self.batching, self.sync, **self._engine_options())

    def engine_record(self, batching: Optional[Batching] = None) -> Dict[str, Any]:
        """The engine settings as the plan file records them (:func:`~.plan_sim.engine_record`)."""
        return engine_record(batching or self.batching, self.sync, **self._engine_options())

    def _engine_options(self) -> Dict[str, Any]:
        return {
            "torch_distributed": self.torch_distributed,
            "max_seq_length": self.max_seq_length,
            "batch_size_by_key": self.batch_size_by_key,
            "ranks_per_node": None if self.node_cache is None else self.node_cache.ranks_per_node,
            "seq_ordering": self.sub_epoch_seq_ordering,
            "inexact": self.engine_inexact,
        }

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
        o = _applied(options)
        preload = (
            DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS
            if o["preload_next_n_sub_epochs"] is None
            else o["preload_next_n_sub_epochs"]
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
        batch_size, by_key = o["batch_size"], None
        if isinstance(batch_size, dict):
            by_key = check_by_key(batch_size, name="batch_size", hint="frames per batch, padding included")
            batch_size = min(by_key.values())
        batching = (
            None
            if batch_size is None and o["max_seqs"] is None
            else Batching(batch_size=batch_size, max_seqs=o["max_seqs"])
        )
        torch_distributed = o["torch_distributed"]
        reduce_type, param_sync_step = _sync_options(
            o, given_reduce_type=options.get("reduce_type"), num_shards=num_shards
        )
        return cls(
            settings,
            batching,
            *_node_cache(o, preload=preload),
            sync=SyncMode(reduce_type, param_sync_step, o["accum_grad_multiple_step"] or 1),
            lengths=None if o["lengths"] is None else _path_text(o["lengths"]),
            torch_distributed=None if torch_distributed is None else dict(torch_distributed),
            max_seq_length=o["max_seq_length"],
            weights=o["weights"],
            corpus_names=o["corpus_names"],
            batch_size_by_key=by_key,
            sub_epoch_seq_ordering=o["sub_epoch_seq_ordering"],
            engine_inexact=tuple(o["engine_inexact"] or ()),
            returnn_version=o["returnn_version"],
        )


def _sync_options(o: Dict[str, Any], *, given_reduce_type: Any, num_shards: int) -> tuple:
    """``(reduce_type, param_sync_step)`` of the options: as given, or as their ``torch_distributed`` states them
    (checked as RETURNN checks it; a given reduce_type or param_sync_step must say the same)."""
    torch_distributed = o["torch_distributed"]
    check_torch_distributed(torch_distributed, num_ranks=num_shards)
    if torch_distributed is None:
        return o["reduce_type"], o["param_sync_step"]
    stated = _stated_sync(torch_distributed)
    # reduce_type at its default is what the command line and ShardPlanJob pass when it is not given
    for name, value in (("reduce_type", given_reduce_type), ("param_sync_step", o["param_sync_step"])):
        if value is not None and value != stated[name] and value != PLAN_OPTION_DEFAULTS[name]:
            raise ValueError(
                f"{name}={value!r} contradicts torch_distributed={short_repr(torch_distributed, limit=120)}, "
                f"which says {name}={stated[name]!r}: leave {name} out (torch_distributed states the sync)"
            )
    return stated["reduce_type"], stated["param_sync_step"]


def _stated_sync(torch_distributed: Dict[str, Any]) -> Dict[str, Any]:
    """The ``SyncMode`` options a checked ``torch_distributed`` states: "param" with its ``param_sync_step``, else
    "grad" (also for sync levels: the statistical model's sync; the simulation takes the levels themselves)."""
    if torch_distributed.get("sync") is None and torch_distributed.get("reduce_type") == "param":
        return {"reduce_type": "param", "param_sync_step": torch_distributed["param_sync_step"]}
    return {"reduce_type": DEFAULT_REDUCE_TYPE, "param_sync_step": None}


def _check_sync_agrees(torch_distributed: Dict[str, Any], sync: SyncMode) -> None:
    stated = _stated_sync(torch_distributed)
    if (sync.reduce_type, sync.param_sync_step) != (stated["reduce_type"], stated["param_sync_step"]):
        raise ValueError(
            f"sync={sync!r} contradicts torch_distributed={short_repr(torch_distributed, limit=120)}: give the "
            f"sync it states (reduce_type={stated['reduce_type']!r}, param_sync_step={stated['param_sync_step']!r})"
        )


def _path_text(path: Any) -> Any:
    """A path given as ``os.PathLike`` (e.g. ``pathlib.Path``) as its str; anything else unchanged, for
    ``validate`` to name."""
    fspath = getattr(type(path), "__fspath__", None)
    return fspath(path) if fspath is not None else path


def _node_cache(o: Dict[str, Any], *, preload: int) -> tuple:
    """The per-node cache and the cache size of the (checked) options; the cache options need ``ranks_per_node``."""
    cached_file, cache_size, constant = o["cached_file"], o["cache_size"], o["sub_epoch_constant_bytes"]
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
                "ranks_per_node too (GPUs per node), or leave them out"
            )
        return None, None
    return NodeCache(
        ranks_per_node=o["ranks_per_node"],
        preload_next_n_sub_epochs=preload,
        cached_file=cached_file,
        constant_bytes=constant or 0,
    ), cache_size


def _applied(options: Mapping[str, Any]) -> Dict[str, Any]:
    """Every optional plan option: as given (checked by its row's ``check``), else (None) its default; a name that
    is no plan option is refused."""
    unknown = sorted(set(options) - set(PLAN_OPTION_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown plan options {unknown}; the options are {sorted(PLAN_OPTION_DEFAULTS)}")
    out = {}
    for name, default in PLAN_OPTION_DEFAULTS.items():
        value, check = options.get(name), PLAN_OPTIONS[name].check
        out[name] = default if value is None else value if check is None else check(value)
    return out


def report_engine_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The training's sync (a ``SyncMode``) and length filter among the plan options (those of a command that takes
    them), as the training report takes them (``sync=``, ``max_seq_length=``); an option not given: its default.

    >>> report_engine_options({"reduce_type": "param", "param_sync_step": 4})["sync"]
    SyncMode(reduce_type='param', param_sync_step=4)
    """
    o = _applied({name: value for name, value in options.items() if name in PLAN_OPTION_DEFAULTS})
    sync = SyncMode(o["reduce_type"], o["param_sync_step"], o["accum_grad_multiple_step"] or 1)
    return {"sync": sync, "max_seq_length": o["max_seq_length"]}

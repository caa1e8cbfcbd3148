"""Every sub-epoch of a plan through the simulated torch engine (:mod:`.engine_sim`): each rank's exact batches,
the steps it takes under the sync mode and the frames it consumes, from each file's own sequence lengths."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .batching import Batching, SyncMode
from .engine_sim import (
    UNKNOWN_SEQ_ORDERING,
    ranks_stop_together,
    EngineSettings,
    SubEpochSim,
    inexact_reason,
    simulate_sub_epoch,
    sub_epoch_random_seed_offset,
    sync_levels_of,
)
from .plan import ShardPlan
from .settings import DEFAULT_SEQ_ORDERING

__all__ = ["has_node_level", "engine_differences"]

#: What a plan's simulation takes as given beyond its engine settings (said in the summary).
SIMULATION_ASSUMES = (
    "the sub-epoch dataset yields its files' sequences in get_seq_order_for_epoch's order (an HDFDataset-like "
    "dataset; one DataLoader worker), which batch and are length-filtered by the costs archive's batching lengths "
    "(the longest data key)"
)


def simulation_assumes(batching_assumes: Optional[str]) -> str:
    """What a plan's simulation takes as given (the summary's ``assumes``): :data:`SIMULATION_ASSUMES`, and what it
    must assume of the data keys whose lengths the costs archive does not know (``FileCosts.batching_assumes``).

    >>> simulation_assumes("no key is longer than the cost stream")[-43:]
    '; and no key is longer than the cost stream'
    """
    return SIMULATION_ASSUMES if batching_assumes is None else f"{SIMULATION_ASSUMES}; and {batching_assumes}"


Layout = Callable[[int, int], Tuple[np.ndarray, np.ndarray]]


def rank_files(plan: ShardPlan, layout: Layout, *, epoch_0idx: int, shard_index: int) -> np.ndarray:
    """Indices (into the plan's keys) of the files rank ``shard_index`` reads in sub-epoch ``epoch_0idx + 1``, in the
    order the DistributeFilesDataset hands them to its sub-epoch dataset (the bin's order)."""
    k, s = divmod(epoch_0idx, plan.partition_epoch)
    order, bounds = layout(k, shard_index)
    b = shard_index * plan.partition_epoch + s if plan.settings.distrib_shard_files else s
    return order[bounds[b] : bounds[b + 1]]


def simulate_plan(
    plan: ShardPlan,
    *,
    num_epochs: int,
    file_lengths: Sequence[np.ndarray],
    engine: EngineSettings,
    layout: Optional[Layout] = None,
) -> Tuple[Optional[List[SubEpochSim]], Optional[str]]:
    """Sub-epochs ``1..num_epochs`` of ``plan``, each simulated with :func:`simulate_sub_epoch`: the ranks' files in
    bin order, the sub-epoch dataset's seed offset RETURNN derives (:func:`sub_epoch_random_seed_offset`) and its
    ``init_seq_order(epoch=full_epoch_0idx + 1)``.

    :param file_lengths: each file's sequence lengths in the plan's key order, shape [num_seqs] or [num_seqs, num_keys]
        (``FileCosts.engine_lengths``: column 0 counts the frames and orders, every column batches and filters)
    :return: ``(sims, None)``, or ``(None, reason)`` where the engine's settings cannot be simulated exactly
    """
    reason = inexact_reason(engine, num_ranks=plan.num_shards)
    if reason is not None:
        return None, reason
    if layout is None:

        def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
            return plan.layout(full_epoch_0idx=k, shard_index=r)

    offsets = [sub_epoch_random_seed_offset(plan.settings, shard_index=r) for r in range(plan.num_shards)]
    empty = np.zeros(0, dtype=np.int64)
    sims = []
    for e in range(num_epochs):
        per_rank = []
        for r in range(plan.num_shards):
            idx = rank_files(plan, layout, epoch_0idx=e, shard_index=r)
            per_rank.append(
                np.concatenate([np.asarray(file_lengths[i], dtype=np.int64) for i in idx]) if len(idx) else empty
            )
        sims.append(
            simulate_sub_epoch(
                per_rank, engine=engine, full_epoch_0idx=e // plan.partition_epoch, random_seed_offset=offsets
            )
        )
    return sims, None


def _keys_text(value: Dict[Any, Any]) -> str:
    return ", ".join(repr(k) for k in value)


def plan_engine(
    batching: Any,
    sync: Any,
    *,
    torch_distributed: Optional[Dict[str, Any]] = None,
    max_seq_length: Union[None, int, Dict[str, int]] = None,
    batch_size_by_key: Optional[Dict[str, int]] = None,
    ranks_per_node: Optional[int] = None,
    seq_ordering: str = DEFAULT_SEQ_ORDERING,
    inexact: Sequence[str] = (),
) -> EngineSettings:
    """The torch engine a plan's prediction simulates: its ``Batching`` limits and ``SyncMode`` (or the config's
    ``torch_distributed`` where given, sync levels included); the sub-epoch dataset's ``seq_ordering`` (the
    builders' default ``"random"``); the config's ``max_seq_length`` as the length filter; the sync's gradient accumulation;
    ``inexact``: what the training does that the simulation does not mirror (the config reader's reasons).
    The costs archive holds the lengths of one data key: a ``batch_size`` or ``max_seq_length`` dict naming several
    keys makes the engine inexact (``EngineSettings.inexact``), never simulated as if it had one.

    >>> from i6_shard.core.pure.batching import Batching, SyncMode
    >>> plan_engine(Batching(2000, 20), SyncMode("param", 50)).torch_distributed
    {'reduce_type': 'param', 'param_sync_step': 50}
    >>> plan_engine(Batching(2000, 20), SyncMode(), max_seq_length={"data": 900, "classes": 80}).inexact
    ("max_seq_length names the data keys 'data', 'classes': the simulation knows one key's lengths (the costs archive's), so RETURNN's length filter over several keys is not simulated",)
    """
    if torch_distributed is None:
        torch_distributed = (
            {} if sync.reduce_type == "grad" else {"reduce_type": "param", "param_sync_step": sync.param_sync_step}
        )
    reasons = []
    for name, value in (("batch_size", batch_size_by_key), ("max_seq_length", max_seq_length)):
        if isinstance(value, dict) and len(value) > 1:
            reasons.append(
                f"{name} names the data keys {_keys_text(value)}: the simulation knows one key's lengths (the costs "
                f"archive's), so "
                + (
                    "RETURNN's batching over several keys is not simulated"
                    if name == "batch_size"
                    else "RETURNN's length filter over several keys is not simulated"
                )
            )
    by_key = dict(max_seq_length) if isinstance(max_seq_length, dict) else None
    if by_key is not None:
        max_seq_length = next(iter(by_key.values())) if len(by_key) == 1 else None
    return EngineSettings(
        seq_ordering=seq_ordering,
        batch_size=batching.batch_size,
        max_seqs=batching.max_seqs,
        max_seq_length=max_seq_length,
        torch_distributed=dict(torch_distributed),
        accum_grad_multiple_step=sync.accum_grad_multiple_step,
        ranks_per_node=ranks_per_node,
        inexact=tuple(reasons) + tuple(inexact),
        batch_size_by_key=None if batch_size_by_key is None else dict(batch_size_by_key),
        max_seq_length_by_key=by_key,
    )


#: The config options a plan's engine settings are recorded by (:func:`engine_record`), in this order.
ENGINE_RECORD_OPTIONS = ("batch_size", "max_seqs", "max_seq_length", "accum_grad_multiple_step", "torch_distributed")


def engine_record(
    batching: Any,
    sync: Any,
    *,
    torch_distributed: Optional[Dict[str, Any]] = None,
    max_seq_length: Union[None, int, Dict[str, int]] = None,
    batch_size_by_key: Optional[Dict[str, int]] = None,
    ranks_per_node: Optional[int] = None,
    seq_ordering: str = DEFAULT_SEQ_ORDERING,
    inexact: Sequence[str] = (),
) -> Dict[str, Any]:
    """The engine settings a plan was simulated with, as the training's config states them (the values
    :data:`ENGINE_RECORD_OPTIONS` name; None where not set): what the plan file records, and what the
    RETURNN-side dataset compares with the config it runs under.

    >>> from i6_shard.core.pure.batching import Batching, SyncMode
    >>> engine_record(Batching(2000, None), SyncMode("param", 50))
    {'batch_size': 2000, 'max_seqs': None, 'max_seq_length': None, 'accum_grad_multiple_step': 1, 'torch_distributed': {'reduce_type': 'param', 'param_sync_step': 50}}
    """
    record = engine_settings_record(
        plan_engine(
            batching,
            sync,
            torch_distributed=torch_distributed,
            max_seq_length=max_seq_length,
            batch_size_by_key=batch_size_by_key,
            ranks_per_node=ranks_per_node,
            seq_ordering=seq_ordering,
        )
    )
    if inexact:  # the reader's reasons, read back with the record (plans without any keep their bytes)
        record["engine_inexact"] = list(inexact)
    return record


def engine_of_record(record: Dict[str, Any]) -> EngineSettings:
    """The engine a plan file's recorded settings (:func:`engine_record`) describe: what a ``"equal_steps"`` plan's
    bins were equalized for, to cut them again (``read_plan_file(verify=True)``); the inverse of the record.

    >>> engine_of_record({"batch_size": 2000, "max_seqs": None, "max_seq_length": None,
    ...                   "accum_grad_multiple_step": 2, "torch_distributed": {"reduce_type": "param",
    ...                   "param_sync_step": 4}}).accum_grad_multiple_step
    2
    """
    batch_size = record.get("batch_size")
    by_key = dict(batch_size) if isinstance(batch_size, dict) else None
    if by_key is not None:
        batch_size = next(iter(by_key.values())) if len(by_key) == 1 else None
    accum = record.get("accum_grad_multiple_step")
    return plan_engine(
        Batching(batch_size, record.get("max_seqs")),
        SyncMode(accum_grad_multiple_step=1 if accum is None else int(accum)),
        torch_distributed=dict(record.get("torch_distributed") or {}),
        max_seq_length=record.get("max_seq_length"),
        batch_size_by_key=by_key,
        ranks_per_node=record.get("ranks_per_node"),
        seq_ordering=record.get("sub_epoch_seq_ordering", DEFAULT_SEQ_ORDERING),
        inexact=tuple(record.get("engine_inexact") or ()),
    )


def engine_settings_record(engine: EngineSettings) -> Dict[str, Any]:
    """:func:`engine_record` of simulated engine settings (limits as single ints).

    A ``"node"`` sync level's groups are torchrun's ranks per host, so a plan simulated with one also records
    ``ranks_per_node`` (other plans keep their bytes). Without ``ranks_per_node`` such a level is not simulated (the
    report says so and predicts by the statistical model), and the record names none: any ranks per node may run it.

    >>> engine_settings_record(EngineSettings(max_seqs=8))["torch_distributed"]
    {}
    >>> levels = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]}
    >>> engine_settings_record(EngineSettings(max_seqs=8, torch_distributed=levels, ranks_per_node=2))["ranks_per_node"]
    2
    >>> "ranks_per_node" in engine_settings_record(EngineSettings(max_seqs=8, torch_distributed=levels))
    False
    """
    record = {
        "batch_size": engine.stated_batch_size,
        "max_seqs": engine.max_seqs,
        "max_seq_length": engine.stated_max_seq_length,
        "accum_grad_multiple_step": engine.accum_grad_multiple_step,
        "torch_distributed": dict(engine.torch_distributed or {}),
    }
    if has_node_level(engine.torch_distributed) and engine.ranks_per_node is not None:
        record["ranks_per_node"] = engine.ranks_per_node
    if engine.seq_ordering != DEFAULT_SEQ_ORDERING:  # (plans of the builders' random order keep their bytes)
        record["sub_epoch_seq_ordering"] = engine.seq_ordering
    return record


def has_node_level(torch_distributed: Any) -> bool:
    """Whether a ``torch_distributed`` dict has a ``"node"`` sync level (one group per host of torchrun's
    ``--nproc-per-node`` ranks), whose steps depend on the ranks per node.

    >>> has_node_level({"sync": [{"group": "node", "type": "grad"}]}), has_node_level({"reduce_type": "param"})
    (True, False)
    """
    sync = torch_distributed.get("sync") if isinstance(torch_distributed, dict) else None
    return isinstance(sync, (list, tuple)) and any(isinstance(lv, dict) and lv.get("group") == "node" for lv in sync)


def plan_simulation(
    plan: ShardPlan,
    *,
    num_epochs: int,
    file_lengths: Optional[Sequence[np.ndarray]],
    engine: EngineSettings,
    layout: Optional[Layout] = None,
    batching_assumes: Optional[str] = None,
) -> Dict[str, Any]:
    """:func:`simulate_plan` as the plan's outputs take it: ``steps_exact`` and ``steps_taken`` (per sub-epoch a
    list with each rank's, or None where not exact), ``dropped`` (float64 per sub-epoch, the share of the frames the
    length filter keeps that the ranks leave unread; None where not exact), ``filtered`` (float64 per sub-epoch, the
    share of the frames the length filter removes, apart from ``dropped``; None where not exact), ``frames`` (int64
    per sub-epoch, the frames of all its ranks' sequences; absent where not exact),
    ``exact``, ``reason`` (why not), ``engine`` (what was simulated), ``assumes`` (what was taken as given) and
    ``lengths_assume`` (``batching_assumes``: what the costs archive's lengths do not know, ``FileCosts.batching_assumes``;
    None where they know the batching length)."""
    if file_lengths is None:
        sims, reason = None, "the costs archive keeps no per-sequence lengths (written before they were kept)"
    else:
        sims, reason = simulate_plan(
            plan, num_epochs=num_epochs, file_lengths=file_lengths, engine=engine, layout=layout
        )
    out: Dict[str, Any] = {"exact": sims is not None, "reason": reason, "engine": engine}
    out["assumes"], out["lengths_assume"] = simulation_assumes(batching_assumes), batching_assumes
    if sims is None:
        none = [None] * num_epochs
        return {**out, "steps_exact": none, "steps_taken": none, "dropped": None, "filtered": None}
    return {
        **out,
        "steps_exact": [list(x.steps_exact) for x in sims],
        "steps_taken": [list(x.steps_taken) for x in sims],
        "dropped": np.array([x.dropped_fraction for x in sims], dtype=np.float64),
        "filtered": np.array([x.filtered_fraction for x in sims], dtype=np.float64),
        "frames": np.array([sum(x.frames_total) for x in sims], dtype=np.int64),
    }


def _normalized(name: str, value: Any) -> Any:
    """A recorded or configured engine value in the form that decides what the engine does: ``max_seqs`` -1 is no
    limit, ``accum_grad_multiple_step`` None and 0 are 1, ``torch_distributed`` by its sync levels (``sync_levels_of``) --
    its ``backend``, ``dataset_distribution``, ``sync_complete_frac`` (a SUM instead of a MIN of the same "has data")
    and ``sync_at_epoch_end`` (after the loop) do not change any rank's steps."""
    if name == "max_seqs" and value in (-1, None):
        return None
    if name == "accum_grad_multiple_step":  # unset and 0 update every step, as 1
        return SyncMode.steps_per_update(value)
    if name == "torch_distributed":
        opts = dict(value or {})
        try:
            levels = sync_levels_of(opts)
        except (ValueError, KeyError, TypeError):
            return opts
        # every rank syncs "has data" with the world in every step: each stops with the first, whatever the levels
        return _EVERY_STEP if ranks_stop_together(opts) else levels
    return value


#: How :func:`_normalized` names a sync that stops every rank in the step the first runs out.
_EVERY_STEP = "the world syncs in every step"


#: The ``torch_distributed`` keys that say how the ranks sync (the advice to set a plan's sync keeps the others).
_SYNC_KEYS = ("reduce_type", "param_sync_step", "sync")


def _stops_together(torch_distributed: Any) -> bool:
    """:func:`~.engine_sim.ranks_stop_together`: then no rank's stop depends on ``accum_grad_multiple_step`` or on
    the levels below (which only count the steps between param syncs)."""
    return ranks_stop_together(torch_distributed)


def _setting_text(name: str, want: Any, have: Any) -> str:
    """``name=value`` of the plan's setting as the config should state it: a ``torch_distributed`` keeps the config's
    other keys (``backend``, ``dataset_distribution``, ...) and takes the plan's sync.

    >>> _setting_text("torch_distributed", {"reduce_type": "param", "param_sync_step": 4}, {"backend": "gloo"})
    "torch_distributed={'backend': 'gloo', 'reduce_type': 'param', 'param_sync_step': 4}"
    """
    if name == "torch_distributed" and isinstance(have, dict):
        want = {**{k: v for k, v in have.items() if k not in _SYNC_KEYS}, **dict(want or {})}
    return f"{name}={want!r}"


def _compared(engine: EngineSettings) -> Dict[str, Any]:
    """The fields of ``engine`` that decide some rank's batches or stop, as the config states them (a limit by data
    key as its dict), by the names of the config options."""
    return {
        **engine_settings_record(engine),
        "sub_epoch_seq_ordering": engine.seq_ordering,
        "ranks_per_node": engine.ranks_per_node,
    }


def _order_difference(want: str, have: str) -> List[str]:
    """The sub-epoch dataset's ``seq_ordering`` where the training's is known (not ``"unknown"``) and is not the one
    the plan was simulated with.

    >>> _order_difference("random", "laplace:.20")[0][:73]
    "the plan was simulated with the sub-epoch dataset's seq_ordering='random'"
    """
    if have is None or have == UNKNOWN_SEQ_ORDERING or have == want:
        return []
    return [
        f"the plan was simulated with the sub-epoch dataset's seq_ordering={want!r}, the training's orders "
        f"{have!r}: re-plan with sub_epoch_seq_ordering={have!r} (ShardPlanJob.for_training reads it from the "
        "config), or order the sub-epoch dataset as the plan does"
    ]


def engine_differences(planned: EngineSettings, configured: EngineSettings) -> List[str]:
    """The one comparison of a training's engine (:class:`~.engine_sim.EngineSettings`, as the config reader reads it,
    or as the RETURNN-side dataset finds it in RETURNN's config) with the engine a plan was simulated with (its
    record read back, :func:`engine_of_record`, or its request's), field by field: where a difference changes some
    rank's batches or stop (so the plan's steps are not the training's), each named with both values and the fix, for
    the RETURNN-side dataset and the graph checks to refuse. ``accum_grad_multiple_step`` changes no rank's stop where
    the ranks sync "has data" in every step (grad sync), and ``sync_complete_frac``, ``sync_at_epoch_end``, the
    backend, the dataset distribution and the DataLoader workers (said by the verdict, :func:`~.engine_sim.
    inexact_reason`) change none anywhere: not refused. The sub-epoch order is compared where the training's is known,
    the ranks per node where the plan's ``"node"`` sync level was simulated with them.

    >>> engine_differences(EngineSettings(batch_size=2000), EngineSettings(batch_size=3000, max_seqs=-1))
    ["the plan was simulated with batch_size=2000, the config has batch_size=3000: re-plan with the config's batch_size (the plan's bins and steps assume it), or set batch_size=2000 in the config"]
    >>> engine_differences(EngineSettings(accum_grad_multiple_step=1, torch_distributed={}),
    ...                    EngineSettings(accum_grad_multiple_step=2, torch_distributed={"reduce_type": "grad_explicit"}))
    []
    """
    want_all, have_all = _compared(planned), _compared(configured)
    out = []
    together = _stops_together(want_all["torch_distributed"]) and _stops_together(have_all["torch_distributed"])
    for name in ENGINE_RECORD_OPTIONS:
        if name == "accum_grad_multiple_step" and together:
            continue
        want, have = want_all[name], have_all[name]
        if _normalized(name, want) != _normalized(name, have):
            out.append(
                f"the plan was simulated with {name}={want!r}, the config has {name}={have!r}: re-plan with the "
                f"config's {name} (the plan's bins and steps assume it), or set {_setting_text(name, want, have)} in "
                "the config"
            )
    out += _order_difference(planned.seq_ordering, configured.seq_ordering)
    want, have = planned.ranks_per_node, configured.ranks_per_node
    if not together and has_node_level(planned.torch_distributed) and want is not None and want != have:
        out.append(
            f"the plan was simulated with ranks_per_node={want!r} (the groups of its 'node' sync level), the training "
            f"runs {have!r} ranks per node (torchrun's --nproc-per-node, LOCAL_WORLD_SIZE): re-plan with "
            f"ranks_per_node={have!r}, or start {want!r} ranks per node"
        )
    return out

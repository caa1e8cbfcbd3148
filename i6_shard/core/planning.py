"""The planning floor: the one place where a :class:`~i6_shard.core.pure.request.PlanRequest` becomes a plan and
its outputs (the plan file's arrays, the statistics, the comparison with the other distributions and sharding
mode, the predicted loss, the per-node cache footprint). It sits above :mod:`i6_shard.core.pure` and
:mod:`i6_shard.core.io` and below :mod:`i6_shard.core.reporting`, which only renders what it returns.

Every entry point comes here: the command line (``plan``, ``demo``, ``report``), ``ShardPlanJob``, the builders'
``plan_for_returnn_config`` and the verify job's reference plan. The request is validated when it is built
(``PlanRequest.from_options``, the one public constructor); at the floor's entry its settings are checked against
the files once (by ``ShardPlan``) and the memory the plan's arrays take once (:func:`make_plan` for a request,
:func:`plan_outputs` for a plan made already); the bins are cut here (:func:`plan_bins`), never in an I/O
function.

What returns what: :func:`make_plan` returns the plan (a ``ShardPlan``); :func:`make_plan_outputs` (over loaded
sizes), :func:`plan_archive` (over an archive's path), :func:`plan_outputs` (of a plan made already) and
:func:`stored_plan_outputs` (of a plan file) return its outputs (``PlanOutputs``, whose ``plan`` is the plan).

What each rank does in each sub-epoch (its files and their costs, and under batching its predicted steps and
the share dropped) is computed in one function, :func:`rank_outputs`. That is where an exact simulation of the
training plugs in: it takes the same plan, layout and lengths, and returns its per-(sub-epoch, rank) steps in
place of the prediction (``RankOutputs.prediction``), which every output then shows.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .io.file_costs import FileCosts, load_file_costs, prediction_batching
from .io.cost_archive import load_file_sizes
from .io.file_sizes import FileSizes
from .io import plan_file as _plan_file
from .io.plan_file import PlanFile, check_plan_fits_memory, plan_file_arrays, save_plan_arrays
from .io.preflight import check_regular_file
from .io.progress import Progress, heartbeat
from .pure.batching import Batching, SyncMode, predict_plan_drop
from .pure.equal_steps_cut import EqualStepsInputs
from .pure.engine_sim import EngineSettings, inexact_reason
from .pure.plan_sim import engine_of_record, engine_settings_record, plan_engine, plan_simulation
from .pure.cache import CacheFootprint, NodeCache, compute_cache_footprint, partition_epoch_fits
from .pure.corpora import Corpora
from .pure.plan import ShardPlan
from .pure.request import PlanRequest
from .pure.cut import cut_spec, offered_distributions
from .pure.settings import DEFAULT_DISTRIBUTION, PlanSettings  # noqa: F401 (the doctests use PlanSettings)
from .pure.stats import PlanStats, compute_plan_stats, num_full_epochs_for
from .pure.unsharded import UnshardedStats, compute_unsharded_stats
from .pure.text import first_difference, short_repr

__all__ = [
    "make_plan",
    "plan_archive",
    "make_plan_outputs",
    "stored_plan_outputs",
    "save_plan",
    "read_plan_file",
    "load_plan",
    "check_request_fits",
]

#: Full epochs over which the outputs compare distributions (each costs one more planning pass).
COMPARE_FULL_EPOCHS = 3
#: Full epochs over which the cache footprint of other ``partition_epoch`` values is computed.
CACHE_FIT_FULL_EPOCHS = 3
#: How a distribution's row in the comparison starts where it was skipped rather than found impossible.
NOT_COMPUTED = "not computed"

Layout = Callable[[int, int], Tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class RankOutputs:
    """What each rank does in each sub-epoch ``1..stats.num_epochs``.

    :ivar stats: the files and their costs per (sub-epoch, rank), and what they give (balance, drop, passes)
    :ivar prediction: under batching, :func:`~i6_shard.core.pure.batching.predict_plan_drop`'s arrays
        (``steps_mean`` per (sub-epoch, rank), ``dropped`` and ``floor`` per sub-epoch); None without batching
    :ivar batching: the limits of the prediction
    :ivar sync: the ranks' sync mode the prediction assumes
    :ivar per_file_lengths: whether every rank batched its files' own sequence lengths (else pooled quantiles)
    :ivar simulation: under batching, the exact simulation of the engine
        (:func:`~i6_shard.core.pure.plan_sim.plan_simulation`: ``steps_exact``, ``steps_taken``, ``dropped``, or
        why it is not exact)
    """

    stats: PlanStats
    prediction: Optional[Dict[str, np.ndarray]] = None
    batching: Optional[Batching] = None
    sync: SyncMode = SyncMode()
    per_file_lengths: bool = False
    simulation: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class PlanOutputs:
    """A plan and everything its outputs show, computed; :mod:`i6_shard.core.reporting` renders it.

    :ivar plan: the plan; its settings hold the planned sub-epochs (the training's and the preloaded)
    :ivar num_epochs: the sub-epochs the outputs cover (the training's)
    :ivar ranks: per (sub-epoch, rank): :func:`rank_outputs`
    :ivar layout: ``(full_epoch_0idx, layout_idx) -> (order, bounds)`` of the plan's bins
    :ivar arrays: the plan file's arrays (None for a plan read from its file)
    :ivar compare_num_epochs: sub-epochs the other distributions and mode are compared over (None: no comparison)
    :ivar other_distributions: every other distribution's stats, or why it is not computed
    :ivar other_mode: RETURNN's distribution with the sharding mode flipped, or why it cannot plan
    :ivar footprint: the per-node cache footprint (with a request's ``node_cache``)
    :ivar cache_size: bytes of each node's cache
    :ivar partition_epoch_fits: with ``cache_size`` and ``CachedFile``: the footprint of other partition_epochs
    :ivar lengths_from: the name of the costs archive the prediction's sequence lengths came from, where it is
        not the archive the plan was cut by (``PlanRequest.lengths``)
    """

    plan: ShardPlan
    num_epochs: int
    ranks: RankOutputs
    layout: Optional[Layout] = None
    arrays: Optional[Dict[str, np.ndarray]] = None
    compare_num_epochs: Optional[int] = None
    other_distributions: Optional[Dict[str, Union[PlanStats, str]]] = None
    other_mode: Optional[Union[PlanStats, UnshardedStats, str]] = None
    footprint: Optional[CacheFootprint] = None
    cache_size: Optional[int] = None
    partition_epoch_fits: Optional[List[Dict[str, object]]] = None
    lengths_from: Optional[str] = None

    @property
    def stats(self) -> PlanStats:
        return self.ranks.stats

    def non_contiguous(self) -> Optional[Tuple[int, int]]:
        """A sharded plan's sub-epochs that took files moved from other sub-epochs (so not a contiguous part of the
        shuffled order), over its complete full epochs, and the sub-epochs counted, for a distribution whose
        outputs count them (``CutSpec.counts_moved_files``); counted on :attr:`layout` where given (else each full
        epoch is cut anew). None for other plans."""
        plan = self.plan
        if not cut_spec(plan.settings.distribution).counts_moved_files or not plan.settings.distrib_shard_files:
            return None
        full = self.stats.num_epochs // plan.partition_epoch
        progress = Progress("moved files", total=full, unit="full epochs")
        moved = 0
        for k in range(full):
            given = None if self.layout is None else self.layout(k, 0)
            moved += len(plan.non_contiguous_sub_epochs(full_epoch_0idx=k, layout=given))
            progress.add(1)
        progress.close()
        return moved, full * plan.partition_epoch


def check_request_fits(settings: PlanSettings, *, num_files: int) -> PlanSettings:
    """What the floor checks at its entry, before any file is made: the settings against the files (too few for
    the bins is said first), then the memory the plan's arrays need (:func:`_check_memory`); for an entry point
    that checks before it has the files (the command line's ``demo``).

    :raises ValueError: naming the value and the fix
    """
    settings.validate(num_files=num_files)
    _check_memory(settings, num_files=num_files)
    return settings


def _check_memory(settings: PlanSettings, *, num_files: int) -> None:
    """The one memory check of a path through the floor: the plan's arrays must fit this machine (none are made
    for a plan of no fixed length, ``num_epochs=None``)."""
    if settings.num_epochs is not None:
        check_plan_fits_memory(settings, num_files=num_files)


def make_plan(
    sizes: FileSizes,
    request: PlanRequest,
    *,
    lengths: Optional[FileCosts] = None,
    corpus_sizes: Optional[Sequence[int]] = None,
    corpus_names: Optional[Sequence[str]] = None,
) -> ShardPlan:
    """The plan of ``request`` over loaded sizes or costs, balanced by their unit, checked at the entry: the
    settings against the files (by ``ShardPlan``, which says too few files for the bins first), then the
    memory of the plan's arrays. Distribution ``"equal_steps"`` cuts with the sequence lengths of ``lengths`` (a
    costs archive of the same files) under the request's engine (:func:`equal_steps_inputs`).

    Corpora mixed by weight (:class:`~i6_shard.core.pure.corpora.Corpora`): ``sizes`` holds them one after the other,
    ``corpus_sizes`` their numbers of files and ``corpus_names`` their names where the request names none; the
    request's ``weights`` (default: 1 each) say how often each is read."""
    if not isinstance(request, PlanRequest):
        raise TypeError(f"request has type {type(request).__name__}; build it with PlanRequest.from_options(...)")
    settings = request.settings
    if settings.unit != sizes.unit:
        settings = settings.replace(unit=sizes.unit)
    inputs = equal_steps_inputs(request, lengths=lengths) if cut_spec(settings.distribution).cuts_with_inputs else None
    corpora = _corpora(request, num_files=len(sizes.keys), corpus_sizes=corpus_sizes, corpus_names=corpus_names)
    plan = ShardPlan(  # validates the settings; cut as the request's RETURNN release cuts
        sizes.keys, sizes.sizes, settings, equal_steps=inputs, corpora=corpora, returnn_version=request.returnn_version
    )
    _check_memory(settings, num_files=plan.num_files)
    return plan


def _corpora(
    request: PlanRequest,
    *,
    num_files: int,
    corpus_sizes: Optional[Sequence[int]],
    corpus_names: Optional[Sequence[str]],
) -> Optional[Corpora]:
    """The corpora of a plan (None: one corpus, each file read once, as RETURNN reads a list)."""
    if corpus_sizes is None and request.weights is None and request.corpus_names is None:
        return None
    sizes = [num_files] if corpus_sizes is None else list(corpus_sizes)
    names = request.corpus_names or corpus_names or [f"corpus{i}" for i in range(len(sizes))]
    return Corpora.of(names=names, sizes=sizes, weights=request.weights or ["1"] * len(sizes))


def _corpus_names(paths: Sequence[str]) -> List[str]:
    """The archives' stems (``A`` of ``data/A.npz``), or ``corpus0``, ... where they repeat.

    >>> _corpus_names(["x/A.npz", "B.npz"]), _corpus_names(["j1/out.npz", "j2/out.npz"])
    (['A', 'B'], ['corpus0', 'corpus1'])
    """
    stems = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return stems if len(set(stems)) == len(stems) else [f"corpus{i}" for i in range(len(paths))]


def _plan_archives(paths: Sequence[str], request: PlanRequest, *, compare: bool) -> PlanOutputs:
    """The plan of several sizes or costs archives, one corpus each, read by the request's weights: their files
    one after the other (the dataset's ``files`` = the corpora's lists in this order), balanced by their unit."""
    if request.lengths is not None:
        raise ValueError(
            f"lengths={request.lengths!r} gives one archive's sequence lengths, but {len(paths)} corpora are planned: "
            "give each corpus's costs archive as its sizes instead (--sizes costs_A.npz --sizes costs_B.npz)"
        )
    for path in paths:
        check_regular_file(path, what="file sizes archive")
    parts = [load_file_sizes(path) for path in paths]
    units = {p.unit for p in parts}
    if len(units) > 1:
        raise ValueError(
            f"the archives count {', '.join(f'{p!r}: {u}' for p, u in zip(paths, (q.unit for q in parts)))}: plan "
            "corpora counted alike (all sizes, or all costs archives of one unit)"
        )
    sizes = replace(FileSizes.concatenate(parts), unit=parts[0].unit)
    needs_lengths = (
        request.batching is not None or sizes.unit == "steps" or cut_spec(request.settings.distribution).needs_lengths
    )
    if needs_lengths and sizes.unit == "bytes":
        equal_steps_inputs(request, lengths=None)  # refuses, saying what to give
    lengths = FileCosts.concatenate([load_file_costs(p) for p in paths], names=paths) if needs_lengths else None
    return make_plan_outputs(
        sizes,
        request,
        lengths=lengths,
        compare=compare,
        corpus_sizes=[len(p) for p in parts],
        corpus_names=_corpus_names(paths),
    )


def equal_steps_inputs(request: PlanRequest, *, lengths: Optional[FileCosts]) -> EqualStepsInputs:
    """What distribution ``"equal_steps"`` cuts with: each file's sequence lengths from ``lengths`` and the engine of
    the request's batching (or the limits costs in steps were counted under); refused, naming the value and the fix,
    where it cannot work: no per-sequence lengths, no batching, an engine the simulation does not know exactly.

    >>> equal_steps_inputs(PlanRequest.from_options(num_shards=2, partition_epoch=1, num_epochs=1,
    ...                                            distribution="equal_steps"), lengths=None)
    Traceback (most recent call last):
    ...
    ValueError: distribution='equal_steps' equalizes the ranks' exact steps, which needs every file's sequence lengths: plan from a costs archive (`python -m i6_shard costs`, ComputeFileCostsJob) as the sizes or as lengths (--lengths), or choose another distribution
    """
    if lengths is None:
        raise ValueError(
            "distribution='equal_steps' equalizes the ranks' exact steps, which needs every file's sequence lengths: "
            "plan from a costs archive (`python -m i6_shard costs`, ComputeFileCostsJob) as the sizes or as lengths "
            "(--lengths), or choose another distribution"
        )
    file_lengths = lengths.engine_lengths()
    if file_lengths is None:
        raise ValueError(
            "distribution='equal_steps' needs every file's sequence lengths, but the costs archive keeps none (written "
            "before they were kept, or arrow shards without a length column): compute the costs again "
            "(`python -m i6_shard costs`, ComputeFileCostsJob), or choose another distribution"
        )
    with heartbeat(f"plan: batching limits checked against {len(lengths):,} files' lengths"):
        batching = prediction_batching(lengths, request.batching)
    if batching is None:
        raise ValueError(
            "distribution='equal_steps' equalizes the steps of the training's batches, but no batching was given "
            "(batch_size=None, max_seqs=None): give the config's batch_size and/or max_seqs (--batch-size / "
            "--max-seqs), or choose another distribution"
        )
    engine = request.engine(batching)
    reason = inexact_reason(engine, num_ranks=request.settings.num_shards)
    if reason is not None:
        raise ValueError(
            f"distribution='equal_steps' equalizes the simulated steps, but this training is not simulated exactly: "
            f"{reason}; choose another distribution (e.g. balanced)"
        )
    return EqualStepsInputs(file_lengths=file_lengths, engine=engine, batching=batching)


def plan_archive(
    archive_path: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
    request: PlanRequest,
    *,
    compare: bool = True,
) -> PlanOutputs:
    """The plan of a sizes or costs archive under ``request`` (balanced by the archive's unit) and its outputs
    (:func:`make_plan_outputs`); the files' sequence lengths are read where the loss is predicted: under the request's
    batching, and always for a plan by steps (under the limits its costs count). They come from the archive
    itself, or from the costs archive ``request.lengths`` of the same files (so that a plan cut by bytes, as a
    plain DistributeFilesDataset cuts, is predicted too; the outputs name it as ``lengths_from``).

    ``archive_path`` may be a list of archives, one corpus each, which the request's ``weights`` mix
    (:func:`make_plan`); one archive with no weights is a plan of one list, as RETURNN reads it.

    :raises ValueError: if the lengths archive lists other files or another order than ``archive_path``,
        naming both and the first differing key
    """
    if not isinstance(archive_path, (str, os.PathLike)):
        paths = [os.fspath(p) for p in archive_path]
        if len(paths) != 1 or request.weights is not None or request.corpus_names is not None:
            return _plan_archives(paths, request, compare=compare)
        archive_path = paths[0]
    archive_path = os.fspath(archive_path)
    if request.weights is not None or request.corpus_names is not None:
        return _plan_archives([archive_path], request, compare=compare)
    check_regular_file(archive_path, what="file sizes archive")  # a FIFO would block the load
    sizes = load_file_sizes(archive_path)
    lengths_path = request.lengths
    if lengths_path is not None and os.path.abspath(lengths_path) == os.path.abspath(archive_path):
        lengths_path = None  # the archive's own lengths
    if lengths_path is None:
        cuts_with_lengths = cut_spec(request.settings.distribution).needs_lengths
        needs_lengths = request.batching is not None or sizes.unit == "steps" or cuts_with_lengths
        if cuts_with_lengths and sizes.unit == "bytes":
            equal_steps_inputs(request, lengths=None)  # refuses, saying what to give
        lengths = load_file_costs(archive_path) if needs_lengths else None
        return make_plan_outputs(sizes, request, lengths=lengths, compare=compare)
    check_regular_file(lengths_path, what="lengths archive")
    lengths = load_file_costs(lengths_path)  # the one checked loader (refuses a sizes archive in bytes)
    _check_same_files(sizes.keys, lengths.keys, cut_path=archive_path, lengths_path=lengths_path)
    _check_same_versions(sizes.mtimes, lengths.mtimes, sizes.keys, cut_path=archive_path, lengths_path=lengths_path)
    if request.batching is None and lengths.batching is None:
        raise ValueError(
            f"lengths={lengths_path!r} gives the predicted loss its sequence lengths, but no batching limits were "
            "given: give batch_size and/or max_seqs (--batch-size / --max-seqs) too, or leave lengths out"
        )
    outputs = make_plan_outputs(sizes, request, lengths=lengths, compare=compare)
    return replace(outputs, lengths_from=os.path.basename(lengths_path))


def _check_same_files(keys: List[str], lengths_keys: List[str], *, cut_path: str, lengths_path: str) -> None:
    """ValueError unless the lengths archive lists the cut archive's files in its order, naming both and where
    they first differ.

    >>> _check_same_files(["a", "b"], ["a", "c"], cut_path="sizes.npz", lengths_path="costs.npz")
    Traceback (most recent call last):
    ...
    ValueError: the lengths archive 'costs.npz' does not list the files of 'sizes.npz' in their order: they first differ at entry 1 ('b' in 'sizes.npz', 'c' in 'costs.npz'); compute both archives for the same file list
    """
    idx = first_difference(keys, lengths_keys)
    if idx is None:
        return
    here = repr(keys[idx]) if idx < len(keys) else "no entry"
    there = repr(lengths_keys[idx]) if idx < len(lengths_keys) else "no entry"
    raise ValueError(
        f"the lengths archive {lengths_path!r} does not list the files of {cut_path!r} in their order: they first "
        f"differ at entry {idx} ({here} in {cut_path!r}, {there} in {lengths_path!r}); compute both archives for "
        "the same file list"
    )


def _check_same_versions(
    mtimes: Optional[np.ndarray],
    lengths_mtimes: Optional[np.ndarray],
    keys: List[str],
    *,
    cut_path: str,
    lengths_path: str,
) -> None:
    """ValueError where both archives know an entry's modification time and it differs: one of them was computed
    before that file was rewritten, so its lengths (or sizes) are not the file's. Names the first such entry, how
    many there are, and which archive to compute again (the older one).

    >>> _check_same_versions(np.array([5, 9]), np.array([5, 7]), ["a", "b"], cut_path="s.npz", lengths_path="c.npz")
    Traceback (most recent call last):
    ...
    ValueError: the lengths archive 'c.npz' and 's.npz' were computed over other versions of 1 of their 2 files (first at entry 1, 'b': modified at 7 ns in 'c.npz', at 9 ns in 's.npz'): 'c.npz' is older; compute it again over the same file list (`python -m i6_shard costs`, ComputeFileCostsJob)
    """
    if mtimes is None or lengths_mtimes is None:
        return
    a, b = np.asarray(mtimes, dtype=np.int64), np.asarray(lengths_mtimes, dtype=np.int64)
    differ = np.flatnonzero((a != 0) & (b != 0) & (a != b))  # 0: not known (an archive without mtimes)
    if differ.size == 0:
        return
    i = int(differ[0])
    stale = lengths_path if b[i] < a[i] else cut_path
    how = "`python -m i6_shard costs`, ComputeFileCostsJob" if stale == lengths_path else "`python -m i6_shard sizes`"
    raise ValueError(
        f"the lengths archive {lengths_path!r} and {cut_path!r} were computed over other versions of {differ.size} "
        f"of their {len(a)} files (first at entry {i}, {short_repr(keys[i], limit=120)}: modified at "
        f"{_ns_text(int(b[i]))} in {lengths_path!r}, at {_ns_text(int(a[i]))} in {cut_path!r}): {stale!r} is older; "
        f"compute it again over the same file list ({how})"
    )


def _ns_text(ns: int) -> str:
    """A modification time in ns as a UTC date, or as ns where it is too small to be one (a test's).

    >>> _ns_text(7), _ns_text(1_700_000_000_123_456_789)
    ('7 ns', '2023-11-14 22:13:20.123457 UTC')
    """
    if ns < 10**15:
        return f"{ns} ns"
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def make_plan_outputs(
    sizes: FileSizes,
    request: PlanRequest,
    *,
    lengths: Optional[FileCosts] = None,
    compare: bool = True,
    corpus_sizes: Optional[Sequence[int]] = None,
    corpus_names: Optional[Sequence[str]] = None,
) -> PlanOutputs:
    """The plan of ``request`` over loaded sizes or costs (:func:`make_plan`) and its outputs: the per-node
    cache of the request, and with ``lengths`` (a costs archive of the same files) the predicted loss under the
    request's batching (or, for costs in steps, the limits they count)."""
    if request.lengths is not None and lengths is None:
        raise ValueError(
            f"the request names a lengths archive ({request.lengths!r}), which make_plan_outputs does not read: "
            "plan with plan_archive(...), or pass its load_file_costs(...) as lengths="
        )
    plan = make_plan(sizes, request, lengths=lengths, corpus_sizes=corpus_sizes, corpus_names=corpus_names)
    batching = request.batching
    if plan.equal_steps is not None and plan.equal_steps.batching is not None:
        batching = plan.equal_steps.batching  # checked against the same lengths by equal_steps_inputs
    elif lengths is not None:
        with heartbeat(f"plan: batching limits checked against {len(lengths):,} files' lengths"):
            batching = prediction_batching(lengths, request.batching)
    return _outputs(
        plan,
        node_cache=request.node_cache,
        cache_size=request.cache_size,
        batching=batching,
        lengths=lengths,
        sync=request.sync,
        compare=compare,
        engine=None if batching is None else request.engine(batching),
        engine_settings=None if batching is None else request.engine_record(batching),
    )


def plan_outputs(
    plan: ShardPlan,
    *,
    node_cache: Optional[NodeCache] = None,
    cache_size: Optional[int] = None,
    batching: Optional[Batching] = None,
    lengths: Optional[FileCosts] = None,
    sync: SyncMode = SyncMode(),
    compare: bool = True,
    engine: Optional[EngineSettings] = None,
) -> PlanOutputs:
    """The outputs of a plan made already, over sub-epochs ``1..plan.settings.num_epochs`` (the report covers the
    training's); checked at entry as :func:`make_plan`.

    :param batching: with ``lengths`` (a costs archive's, in the plan's key order): predict the loss
    :param engine: the torch engine the simulation takes; None: the one of ``batching`` and ``sync``
    :raises ValueError: if the settings have no ``num_epochs``, the plan's arrays would not fit in memory, or
        batching and lengths do not come together
    """
    if plan.settings.num_epochs is None:
        raise ValueError("the plan's settings have num_epochs=None; set how many sub-epochs to plan")
    _check_memory(plan.settings, num_files=plan.num_files)  # the plan validated its settings when it was made
    return _outputs(
        plan,
        node_cache=node_cache,
        cache_size=cache_size,
        batching=batching,
        lengths=lengths,
        sync=sync,
        compare=compare,
        engine=engine,
    )


def _outputs(
    plan: ShardPlan,
    *,
    node_cache: Optional[NodeCache],
    cache_size: Optional[int],
    batching: Optional[Batching],
    lengths: Optional[FileCosts],
    sync: SyncMode,
    compare: bool,
    engine: Optional[EngineSettings] = None,
    engine_settings: Optional[Dict[str, Any]] = None,
) -> PlanOutputs:
    _check_prediction_inputs(plan, batching=batching, lengths=lengths)
    if cache_size is not None and node_cache is None:
        raise ValueError(f"cache_size={cache_size!r} needs node_cache (the ranks per node) to compute the footprint")
    num_epochs = plan.settings.training_num_epochs  # what the outputs cover; the arrays also hold the preloaded
    orders, bounds = plan_bins(plan)  # the memory they take was checked at the entry
    arrays = plan_file_arrays(plan, orders=orders, bounds=bounds, engine=engine_settings)
    sharded = plan.settings.distrib_shard_files

    def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
        b = bounds[k, 0 if sharded else r]
        return orders[k, 0 if sharded else r, : int(b[-1])], b

    footprint = (
        None
        if node_cache is None
        else compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs, layout=layout)
    )
    fits = None
    if footprint is not None and cache_size is not None and node_cache.cached_file:
        fits = partition_epoch_fits(
            plan, node_cache=node_cache, cache_size=cache_size, num_full_epochs=CACHE_FIT_FULL_EPOCHS
        )
    ranks = rank_outputs(
        plan, num_epochs=num_epochs, layout=layout, batching=batching, lengths=lengths, sync=sync, engine=engine
    )
    return PlanOutputs(
        plan=plan,
        num_epochs=num_epochs,
        ranks=ranks,
        layout=layout,
        arrays=arrays,
        footprint=footprint,
        cache_size=cache_size,
        partition_epoch_fits=fits,
        **(_comparison(plan, num_epochs=num_epochs) if compare else {}),
    )


def stored_plan_outputs(plan_file: PlanFile, *, compare: bool = True) -> PlanOutputs:
    """The outputs of a plan read from its file, over the sub-epochs it was written for, from its stored bins."""
    return plan_stats_outputs(plan_file.plan, num_epochs=plan_file.num_epochs, layout=plan_file.layout, compare=compare)


def plan_stats_outputs(
    plan: ShardPlan, *, num_epochs: int, layout: Optional[Layout] = None, compare: bool = True
) -> PlanOutputs:
    """The statistics and comparison of ``plan`` over ``num_epochs`` sub-epochs, from ``layout`` (the stored bins)
    where given, else cut as needed; no plan file's arrays, cache footprint or prediction."""
    ranks = rank_outputs(plan, num_epochs=num_epochs, layout=layout)
    return PlanOutputs(
        plan=plan,
        num_epochs=num_epochs,
        ranks=ranks,
        layout=layout,
        **(_comparison(plan, num_epochs=num_epochs) if compare else {}),
    )


def rank_outputs(
    plan: ShardPlan,
    *,
    num_epochs: int,
    layout: Optional[Layout] = None,
    batching: Optional[Batching] = None,
    lengths: Optional[FileCosts] = None,
    sync: SyncMode = SyncMode(),
    engine: Optional[EngineSettings] = None,
) -> RankOutputs:
    """What each rank does in each sub-epoch ``1..num_epochs``: its files and their costs (the stats), and under
    ``batching`` its predicted steps and the share dropped, from the files' sequence ``lengths``.

    The one function where the per-(sub-epoch, rank) outputs are computed: with each file's own lengths the
    training is simulated exactly (:func:`~i6_shard.core.pure.plan_sim.plan_simulation`), beside the statistical
    model (:func:`~i6_shard.core.pure.batching.predict_plan_drop`), the fallback where it is not exact.
    """
    stats = compute_plan_stats(plan, num_epochs=num_epochs, layout=layout)
    if batching is None:
        return RankOutputs(stats, sync=sync)
    file_lengths = lengths.engine_lengths()
    with heartbeat(f"plan: predicted loss of {num_epochs} sub-epochs (model)"):
        prediction = _predicted(plan, num_epochs, lengths, file_lengths, batching=batching, layout=layout, sync=sync)
    with heartbeat(f"plan: steps of {num_epochs} sub-epochs (simulated)"):
        simulation = plan_simulation(
            plan,
            num_epochs=num_epochs,
            file_lengths=file_lengths,
            engine=plan_engine(batching, sync) if engine is None else engine,
            layout=layout,
            batching_assumes=lengths.batching_assumes,
        )
    return RankOutputs(
        stats, prediction, batching, sync, per_file_lengths=file_lengths is not None, simulation=simulation
    )


def _predicted(
    plan: ShardPlan,
    num_epochs: int,
    lengths: FileCosts,
    file_lengths: Optional[List[np.ndarray]],
    *,
    batching: Batching,
    layout: Optional[Layout],
    sync: SyncMode,
) -> Dict[str, np.ndarray]:
    """:func:`predict_plan_drop` of :func:`rank_outputs`."""
    return predict_plan_drop(
        plan,
        num_epochs=num_epochs,
        num_seqs=lengths.num_seqs,
        num_frames=lengths.num_frames,
        batching=batching,
        seq_length_quantiles=lengths.seq_length_quantiles,
        layout=layout,
        sync_every=sync.sync_every,
        file_lengths=file_lengths,
    )


def _check_prediction_inputs(plan: ShardPlan, *, batching: Optional[Batching], lengths: Optional[FileCosts]) -> None:
    """ValueError unless batching and lengths come together and the lengths belong to the plan's files."""
    if (batching is None) != (lengths is None):
        raise ValueError(
            "the predicted loss needs both the batching limits (batch_size / max_seqs) and the files' "
            "sequence lengths (a costs archive: `python -m i6_shard costs` or ComputeFileCostsJob)"
        )
    idx = None if lengths is None else first_difference(plan.keys, lengths.keys)
    if idx is not None:
        first = repr(lengths.keys[idx]) if idx < len(lengths.keys) else "no entry"
        raise ValueError(
            f"the costs archive lists {len(lengths.keys)} files, not the plan's {plan.num_files} in its "
            f"order (entry {idx} is {first}, not the plan's "
            f"{repr(plan.keys[idx]) if idx < plan.num_files else 'no entry'}); compute the costs for the same "
            "file list"
        )


# --- the comparison with the other distributions and the other sharding mode ---------------------------------


def compare_num_epochs_for(plan: ShardPlan, *, num_epochs: int) -> int:
    """Sub-epochs over which distributions are compared: the first ``COMPARE_FULL_EPOCHS``
    full epochs at most (their expected balance is the same every full epoch).

    >>> compare_num_epochs_for(ShardPlan(list("ab"), [1, 1], PlanSettings(num_shards=1, partition_epoch=2)),
    ...                        num_epochs=99)
    6
    """
    return min(int(num_epochs), COMPARE_FULL_EPOCHS * plan.partition_epoch)


def _comparison(plan: ShardPlan, *, num_epochs: int) -> Dict[str, Any]:
    cmp_epochs = compare_num_epochs_for(plan, num_epochs=num_epochs)
    return {
        "compare_num_epochs": cmp_epochs,
        "other_distributions": _other_distribution_stats(plan, num_epochs=cmp_epochs),
        "other_mode": _other_mode_stats(plan, num_epochs=cmp_epochs),
    }


def _other_distribution_stats(plan: ShardPlan, *, num_epochs: int) -> Dict[str, Union[PlanStats, str]]:
    """Stats of every other distribution offered (``CutSpec.offered``) on the same files and settings (a str with
    the reason where one cannot plan them, or where its row is not computed: ``CutSpec.not_compared``)."""
    out: Dict[str, Union[PlanStats, str]] = {}
    for name in offered_distributions():
        if name == plan.settings.distribution:
            continue
        reason = cut_spec(name).not_compared
        if reason is not None:
            out[name] = f"{NOT_COMPUTED}: {reason}"
            continue
        progress = Progress(f"compare {name}", total=-(-num_epochs // plan.partition_epoch), unit="full epochs")
        try:
            out[name] = compute_plan_stats(
                plan.with_settings(distribution=name), num_epochs=num_epochs, on_full_epoch=progress.add
            )
        except ValueError as exc:
            out[name] = str(exc)
        progress.close()
    return out


def _other_mode_stats(plan: ShardPlan, *, num_epochs: int) -> Union[PlanStats, UnshardedStats, str]:
    """Stats of plain RETURNN (distribution ``returnn``) with ``distrib_shard_files`` flipped,
    on the same files and settings: sharded versus each rank shuffling everything itself
    (a str with the reason where that mode cannot plan them, e.g. too few files to shard).
    The unsharded mode is RETURNN's default one, with a per-rank seed offset; many ranks of many files are
    planned on a sample that the stats name (:func:`~i6_shard.core.pure.unsharded.compute_unsharded_stats`)."""
    try:
        other = plan.with_settings(
            distrib_shard_files=not plan.settings.distrib_shard_files,
            same_seed_on_all_ranks=False,
            distribution=DEFAULT_DISTRIBUTION,
        )
    except ValueError as exc:
        return str(exc)
    if not other.settings.distrib_shard_files:
        return compute_unsharded_stats(other.costs, other.settings, num_epochs=num_epochs)
    return compute_plan_stats(other, num_epochs=num_epochs)


# --- the bins and the plan file -------------------------------------------------------------------------------


def plan_bins(plan: ShardPlan) -> Tuple[np.ndarray, np.ndarray]:
    """The bins of sub-epochs ``1..plan.settings.num_epochs``, every full epoch and layout, as the plan file holds
    them (see :func:`~i6_shard.core.io.plan_file.plan_file_arrays`): ``orders`` [num_full_epochs, num_layouts,
    num_files] (uint32; int64 beyond 2**32 files) and ``bounds`` [num_full_epochs, num_layouts, num_bins + 1].
    The caller has checked the memory they take (:func:`check_request_fits`)."""
    settings = plan.settings
    num_full = num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch)
    num_layouts = settings.num_layouts
    dtype = np.uint32 if plan.num_files < 2**32 else np.int64
    width = plan.num_files
    if plan.corpora is not None:  # one entry per read; a full epoch of fewer reads is padded with zeros
        width = max(int(plan.reads(full_epoch_0idx=k).sum()) for k in range(num_full))
    orders = np.zeros((num_full, num_layouts, width), dtype=dtype)
    bounds = np.empty((num_full, num_layouts, settings.num_bins + 1), dtype=np.int64)
    if plan.equal_steps is not None:  # minutes per full epoch: count its sub-epochs
        progress = Progress("plan (equal steps)", total=num_full * settings.partition_epoch, unit="sub-epochs")
        inputs = replace(plan.equal_steps, progress=lambda line: progress.add(1))
        cutting, step = ShardPlan(plan.keys, plan.costs, settings, equal_steps=inputs, corpora=plan.corpora), 0
    else:
        progress = Progress(
            "plan", total=num_full * num_layouts, unit="full epochs" if num_layouts == 1 else "full epochs x ranks"
        )
        cutting, step = plan, 1
    for k in range(num_full):
        for r in range(num_layouts):
            order, bounds[k, r] = cutting.layout(full_epoch_0idx=k, shard_index=r)
            orders[k, r, : len(order)] = order
            progress.add(step)
    progress.close()
    return orders, bounds


def plan_arrays(plan: ShardPlan) -> Dict[str, np.ndarray]:
    """The arrays of the plan file for sub-epochs ``1..plan.settings.num_epochs``: the bins
    (:func:`plan_bins`) and the plan, as :func:`~i6_shard.core.io.plan_file.plan_file_arrays` lays them out.

    >>> plan = ShardPlan(["a", "b", "c"], [1, 2, 3],
    ...                  PlanSettings(num_shards=1, partition_epoch=3, num_epochs=4, seq_ordering="default"))
    >>> arrs = plan_arrays(plan)
    >>> arrs["orders"].shape, arrs["bounds"][1, 0].tolist()
    ((2, 1, 3), [0, 1, 2, 3])
    """
    if plan.settings.num_epochs is None:
        raise ValueError(
            "the plan's settings have num_epochs=None; a plan file covers a fixed number of "
            "sub-epochs: set num_epochs in PlanSettings"
        )
    check_plan_fits_memory(plan.settings, num_files=plan.num_files)
    orders, bounds = plan_bins(plan)
    engine = None if plan.equal_steps is None else engine_settings_record(plan.equal_steps.engine)
    return plan_file_arrays(plan, orders=orders, bounds=bounds, engine=engine)


def save_plan(plan: ShardPlan, path: Union[str, os.PathLike]) -> None:
    """Write the plan file (atomically, deterministic bytes); see :func:`plan_arrays` for its arrays."""
    save_plan_arrays(plan_arrays(plan), path)


def read_plan_file(
    path: Union[str, os.PathLike], *, verify: bool = False, lengths: Union[None, str, os.PathLike] = None
) -> PlanFile:
    """A plan file with its stored bins (:func:`~i6_shard.core.io.plan_file.read_plan_file`); with ``verify``,
    every stored full epoch is cut again and compared. A ``distribution="equal_steps"`` plan is cut with each file's
    sequence lengths, which the plan file does not hold: ``lengths`` is then the costs archive it was planned from
    (with the engine settings the plan file records).

    :raises ValueError: with ``verify``, naming the first full epoch and layout that differs from what this
        i6_shard cuts for the stored settings (e.g. a plan written by another version); an ``"equal_steps"`` plan
        without ``lengths``, or ``lengths`` of other files
    """
    path = os.fspath(path)
    plan_file = _plan_file.read_plan_file(path)
    cuts_with_inputs = cut_spec(plan_file.plan.settings.distribution).cuts_with_inputs
    if lengths is not None and not (verify and cuts_with_inputs):
        raise ValueError(
            f"lengths={os.fspath(lengths)!r}: only verifying a distribution='equal_steps' plan cuts with the files' "
            f"sequence lengths ({path!r} is distribution={plan_file.plan.settings.distribution!r}"
            f"{'' if verify else ', and verify is off'}); leave lengths out"
        )
    if verify:
        plan = plan_file.plan
        if cuts_with_inputs:
            plan = _equal_steps_plan_of_file(plan_file, path=path, lengths=lengths)
        num_full, num_layouts = plan_file.orders.shape[:2]
        progress = Progress("verify", total=num_full * num_layouts, unit="full epochs")
        for k in range(num_full):
            for r in range(num_layouts):
                order, bounds = plan.layout(full_epoch_0idx=k, shard_index=r)
                stored_order, stored_bounds = plan_file.layout(k, r)
                if not (np.array_equal(order, stored_order) and np.array_equal(bounds, stored_bounds)):
                    raise ValueError(
                        f"{path!r}: full epoch {k} (layout {r}) differs from what this i6_shard "
                        "computes for the stored settings; re-plan with this version"
                    )
                progress.add(1)
        progress.close()
    return plan_file


def _equal_steps_plan_of_file(plan_file: PlanFile, *, path: str, lengths: Union[None, str, os.PathLike]) -> ShardPlan:
    """The stored ``"equal_steps"`` plan, able to cut its full epochs again: the files' sequence lengths from the
    costs archive ``lengths`` (the same files, in the plan's order) and the engine the plan file records."""
    if lengths is None:
        raise ValueError(
            f"{path!r} is a distribution='equal_steps' plan, cut with each file's sequence lengths, which a plan file "
            "does not hold: to verify it, give the costs archive it was planned from (`report --verify --lengths "
            "costs.npz`, read_plan_file(..., lengths=))"
        )
    if plan_file.engine_settings is None:
        raise ValueError(
            f"{path!r} is corrupt: a distribution='equal_steps' plan records the engine settings its bins were "
            "equalized for, and this one records none; re-plan it"
        )
    lengths = os.fspath(lengths)
    check_regular_file(lengths, what="lengths archive")
    costs = load_file_costs(lengths)  # the one checked loader
    plan = plan_file.plan
    _check_same_files(plan.keys, costs.keys, cut_path=path, lengths_path=lengths)
    file_lengths = costs.engine_lengths()
    if file_lengths is None:
        raise ValueError(
            f"lengths={lengths!r} keeps no per-sequence lengths, which the equal_steps plan {path!r} was cut with: give "
            "the costs archive it was planned from"
        )
    inputs = EqualStepsInputs(file_lengths=file_lengths, engine=engine_of_record(plan_file.engine_settings))
    return ShardPlan(plan.keys, plan.costs, plan.settings, equal_steps=inputs, corpora=plan.corpora)


def load_plan(
    path: Union[str, os.PathLike], *, verify: bool = False, lengths: Union[None, str, os.PathLike] = None
) -> ShardPlan:
    """The :class:`ShardPlan` stored in a plan file, serving its stored bins (``PlanFile.served_plan``); ``verify``
    and ``lengths`` as in :func:`read_plan_file`."""
    return read_plan_file(path, verify=verify, lengths=lengths).served_plan

"""The distributions: how one full epoch of shuffled files is cut into ``num_shards * partition_epoch`` bins.
The one table of them (:data:`CUTS`, a :class:`CutSpec` each, saying what each needs and is); ShardPlan and the
RETURNN-side dataset both cut here."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .balanced import distribute_balanced
from .distribute import distribute_evenly_by_size
from .distribute_fixed_mean import distribute_evenly_by_size_fixed_mean
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, distribute_flexible, distribute_flexible_auto, file_frames
from .returnn_features import release_has
from .text import short_repr

__all__ = [
    "CUTS",
    "cut_for_release",
    "cut_spec",
    "check_bound_is_used",
    "cut_full_epoch",
    "cut_options",
    "training_distribution",
]


def _ranks_drawn(cut: Callable[..., Tuple[np.ndarray, np.ndarray]]) -> Callable[..., Tuple[np.ndarray, np.ndarray]]:
    """``cut`` with the ranks of each sub-epoch in a drawn order (:func:`_draw_ranks`)."""

    def drawn(costs: np.ndarray, *, num_shards: int, partition_epoch: int, **options):
        positions, bounds = cut(costs, num_shards=num_shards, partition_epoch=partition_epoch, **options)
        return _draw_ranks(costs, positions, bounds, num_shards=num_shards, partition_epoch=partition_epoch)

    drawn.__doc__ = f"{cut.__name__}, the ranks of each sub-epoch then in a drawn order (:func:`_draw_ranks`)."
    return drawn


def _draw_ranks(
    costs: np.ndarray, positions: np.ndarray, bounds: np.ndarray, *, num_shards: int, partition_epoch: int
) -> Tuple[np.ndarray, np.ndarray]:
    """The bins with the ranks of each sub-epoch permuted by ``RandomState`` seeded with the CRC-32 of the costs in
    their (shuffled) order: a cut that gives the largest file of a sub-epoch to its first rank would otherwise put
    a corpus's largest files on rank 0 in every full epoch, where RETURNN's contiguous cut places each file on a
    rank as randomly as in a sub-epoch. Every rank computes the same permutation (the costs and their shuffled order
    are the same on all); the sub-epochs' sizes and what they drop do not change.

    >>> positions, bounds = np.arange(4), np.array([0, 1, 2, 3, 4])  # bin r*P + s: rank r, sub-epoch s
    >>> _draw_ranks(np.array([7, 1, 1, 1]), positions, bounds, num_shards=2, partition_epoch=2)[0].tolist()
    [0, 3, 2, 1]
    """
    p = partition_epoch
    rng = np.random.RandomState(zlib.crc32(np.ascontiguousarray(costs, dtype="<i8").tobytes()))
    bins = [positions[bounds[b] : bounds[b + 1]] for b in range(num_shards * p)]
    out = list(bins)
    for s in range(p):
        perm = rng.permutation(num_shards)
        for r in range(num_shards):
            out[r * p + s] = bins[int(perm[r]) * p + s]
    new_bounds = np.concatenate([[0], np.cumsum([len(b) for b in out])]).astype(np.int64)
    return np.concatenate(out).astype(np.int64), new_bounds


def _returnn(costs: np.ndarray, *, num_shards: int, partition_epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    bounds = distribute_evenly_by_size(costs, num_bins=num_shards * partition_epoch)
    return np.arange(len(costs), dtype=np.int64), bounds


def _returnn_fixed_mean(costs: np.ndarray, *, num_shards: int, partition_epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    bounds = distribute_evenly_by_size_fixed_mean(costs, num_bins=num_shards * partition_epoch)
    return np.arange(len(costs), dtype=np.int64), bounds


def _equal_steps(
    costs: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    file_lengths: Optional[Sequence[np.ndarray]] = None,
    engine: Any = None,
    full_epoch_0idx: Optional[int] = None,
    random_seed_offset: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    equalize: Optional[Callable[..., Any]] = None,
    separate: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None,
    keep_apart: Optional[np.ndarray] = None,
    max_sub_epoch_deviation: Optional[float] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """flexible_auto's cut, then ``equalize`` (:func:`~.equal_steps.equalize_steps`) on the full epoch with the
    simulated engine (options: :func:`~.equal_steps_cut.equal_steps_options`, which also gives ``equalize``: the
    table does not import the simulation, which imports the settings made from it). With ``separate`` (corpora by
    weight) the repeats of a file go to different sub-epochs first, and equalizing keeps them apart (``keep_apart``:
    the file of each position, which no move between sub-epochs puts twice into one). Where
    ``max_sub_epoch_deviation`` bounds the sub-epochs' frames and the cut by the costs leaves one outside it, the same
    from a cut by each file's frames too, and the better of the two: the sub-epochs farther inside the bound, then
    fewer frames dropped."""
    if file_lengths is None or engine is None or full_epoch_0idx is None or random_seed_offset is None:
        raise ValueError(
            "distribution='equal_steps' cuts with every file's sequence lengths and the training's engine settings "
            "(batch_size / max_seqs, sync): plan from a costs archive with per-sequence lengths and give the "
            "batching, or choose another distribution"
        )
    frames = file_frames(file_lengths)

    def from_cut(start_costs: np.ndarray):
        positions, bounds = _flexible_auto(
            start_costs,
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            max_sub_epoch_deviation=max_sub_epoch_deviation,
        )
        apart = {}
        if separate is not None:  # a file's repeats apart, and kept apart while the steps are equalized
            positions, apart = separate(positions, bounds), {"keep_apart": keep_apart}
        positions, bounds, info = equalize(
            positions,
            bounds,
            **apart,
            file_lengths=file_lengths,
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            engine=engine,
            full_epoch_0idx=full_epoch_0idx,
            random_seed_offset=random_seed_offset,
            progress=progress,
            max_sub_epoch_deviation=max_sub_epoch_deviation,
            frames=frames,
        )
        excess = _excess(
            frames,
            positions,
            bounds,
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            bound=max_sub_epoch_deviation,
        )
        return (excess, sum(info["dropped_frames"])), positions, bounds

    got = from_cut(costs)
    if max_sub_epoch_deviation is not None and got[0][0] > 0:
        other = from_cut(frames)
        got = other if other[0] < got[0] else got
    return got[1], got[2]


def _excess(frames, positions, bounds, *, num_shards: int, partition_epoch: int, bound: Optional[float]) -> float:
    """How far the farthest sub-epoch's frames lie outside ``bound`` of the mean sub-epoch (0: all within; None: 0).

    >>> _excess(np.array([3, 1]), np.arange(2), np.array([0, 1, 2]), num_shards=1, partition_epoch=2, bound=0.25)
    0.25
    """
    if bound is None:
        return 0.0
    per_bin = np.add.reduceat(frames[positions], bounds[:-1]) if len(positions) else np.zeros(len(bounds) - 1)
    per_bin = np.where(np.diff(bounds) > 0, per_bin, 0)  # reduceat repeats a value at an empty bin
    sub = per_bin.reshape(num_shards, partition_epoch).sum(axis=0).astype(np.float64)
    return float(max(0.0, (np.abs(sub / sub.mean() - 1) - bound).max())) if sub.sum() > 0 else 0.0


_balanced = _ranks_drawn(distribute_balanced)
_flexible = _ranks_drawn(distribute_flexible)
_flexible_auto = _ranks_drawn(distribute_flexible_auto)

#: How a distribution's sub-epoch sizes may differ from the mean (:attr:`CutSpec.sub_epoch_bound`).
_SUB_EPOCH_BOUNDS = (None, "given", "chosen")


@dataclass(frozen=True)
class CutSpec:
    """One distribution, a row of :data:`CUTS`: how it cuts a full epoch, what it needs and what it is. Every caller
    reads these attributes; none compares a distribution's name.

    :ivar name: its name, the value of ``distribution`` everywhere (settings, plan files, dataset dicts)
    :ivar cut: ``f(costs, *, num_shards, partition_epoch, **options) -> (positions, bounds)``, see
        :func:`cut_full_epoch`
    :ivar version: the version of its output, which plan files record: raise it with any change that moves a bin for
        some input (tests/core/io/test_stored_plans.py pins the bins of each version)
    :ivar offered: offered to users (README, docs, the plan's comparison, the choices an error names); the others stay
        accepted, so that plan files and job ids that name them still load
    :ivar built_from: the distribution whose cut this one starts from (it is a later stage of that one), or None
    :ivar returnns_own: RETURNN's own cut: the bins keep the shuffled order, and a plain DistributeFilesDataset cuts
        them (the builder needs i6_shard's class for no other reason)
    :ivar needs_lengths: it cuts with every file's sequence lengths (a costs archive that keeps them)
    :ivar needs_engine: it cuts with the training's engine settings (batching, sync; the simulation's engine)
    :ivar sharded_only: only sharded plans can use it (ranks that read their own files)
    :ivar sub_epoch_bound: how far its sub-epochs may differ in size from the mean sub-epoch: None (about the mean,
        as RETURNN's cut), "given" (by ``max_sub_epoch_deviation``, the one option it takes) or "chosen" (per full
        epoch, up to ``AUTO_DEVIATIONS[-1]``, or up to ``max_sub_epoch_deviation`` where one other than the default is
        given: :func:`cut_options`)
    :ivar counts_moved_files: the plan's outputs count its sub-epochs that took files moved from other sub-epochs
        (a cut of every full epoch again where the plan's bins are not at hand)
    :ivar not_compared: why the plan's comparison does not compute its row (it would cost too much), or None: the
        comparison shows its stats on the same files and settings
    :ivar separates_repeats: its cut takes ``separate`` (corpora by weight: the repeats of a file put into different
        sub-epochs) as an option and applies it before its last stage, which keeps each sub-epoch's files; False:
        :func:`cut_full_epoch` applies it to the finished cut
    :ivar release_cuts: ``(feature key of core.pure.RETURNN_FEATURES, cut)``: the cut of a RETURNN release that lacks
        that feature, newest change first (:func:`cut_for_release`); RETURNN's own cut changed with releases
    """

    name: str
    cut: Callable[..., Tuple[np.ndarray, np.ndarray]]
    version: int
    offered: bool
    built_from: Optional[str] = None
    returnns_own: bool = False
    needs_lengths: bool = False
    needs_engine: bool = False
    sharded_only: bool = False
    sub_epoch_bound: Optional[str] = None
    counts_moved_files: bool = False
    not_compared: Optional[str] = None
    separates_repeats: bool = False
    release_cuts: Tuple[Tuple[str, Callable[..., Tuple[np.ndarray, np.ndarray]]], ...] = ()

    def __post_init__(self):
        if self.sub_epoch_bound not in _SUB_EPOCH_BOUNDS or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(
                f"CutSpec {self.name!r}: sub_epoch_bound={self.sub_epoch_bound!r} must be one of {_SUB_EPOCH_BOUNDS} "
                f"and version={self.version!r} an int >= 1"
            )

    @property
    def cuts_with_inputs(self) -> bool:
        """Whether it cuts with more than the costs (:class:`~.equal_steps_cut.EqualStepsInputs`: each file's
        sequence lengths and the engine), so that a plan of the costs alone cannot cut its full epochs."""
        return self.needs_lengths or self.needs_engine


#: The one table of the distributions, name -> :class:`CutSpec`; the first is the default, RETURNN's own cut.
#: Adding a distribution is one row here plus the code of its cut.
CUTS: Dict[str, CutSpec] = {
    spec.name: spec
    for spec in (
        CutSpec(
            "returnn",
            _returnn,
            version=1,
            offered=True,
            returnns_own=True,
            release_cuts=(("reaveraged_cut", _returnn_fixed_mean),),
        ),
        CutSpec("balanced", _balanced, version=2, offered=True),
        CutSpec("flexible", _flexible, version=2, offered=False, built_from="balanced", sub_epoch_bound="given"),
        CutSpec(
            "flexible_auto",
            _flexible_auto,
            version=2,
            offered=False,
            built_from="flexible",
            sub_epoch_bound="chosen",
            counts_moved_files=True,
        ),
        CutSpec(
            "equal_steps",
            _equal_steps,
            version=3,
            offered=True,
            built_from="flexible_auto",
            needs_lengths=True,
            needs_engine=True,
            sharded_only=True,
            sub_epoch_bound="chosen",
            separates_repeats=True,
            not_compared="it simulates the training for every move it tries; plan with distribution='equal_steps' "
            "(a costs archive with per-sequence lengths, and the batching) to see it",
        ),
    )
}


def cut_spec(distribution: Any) -> CutSpec:
    """The row of ``distribution`` in :data:`CUTS`, else ``ValueError`` naming the distributions offered.

    >>> cut_spec("flexible").built_from, cut_spec("returnn").returnns_own
    ('balanced', True)
    >>> cut_spec("even")
    Traceback (most recent call last):
    ...
    ValueError: distribution='even' is unknown; use one of ('returnn', 'balanced', 'equal_steps')
    """
    spec = CUTS.get(distribution) if isinstance(distribution, str) else None
    if spec is None:
        raise ValueError(f"distribution={short_repr(distribution)} is unknown; use one of {offered_distributions()}")
    return spec


def offered_distributions() -> Tuple[str, ...]:
    """The names of the distributions offered to users (:attr:`CutSpec.offered`), in the table's order.

    >>> offered_distributions()
    ('returnn', 'balanced', 'equal_steps')
    """
    return tuple(name for name, spec in CUTS.items() if spec.offered)


def training_distribution(*, seq_lengths: bool, exact_engine: bool, sharded: bool) -> str:
    """The distribution a training's plan cuts with where none is given and the training's batching is known
    (``ShardPlanJob.for_training``): of the offered cuts other than RETURNN's own, the one that needs the most of
    what the plan has (every file's sequence lengths, an engine it simulates exactly, sharded ranks), the table's first
    among equals.

    >>> training_distribution(seq_lengths=True, exact_engine=True, sharded=True)
    'equal_steps'
    >>> training_distribution(seq_lengths=False, exact_engine=True, sharded=True)
    'balanced'
    """
    has = (seq_lengths, exact_engine, sharded)

    def needs(spec: CutSpec) -> Tuple[bool, bool, bool]:
        return spec.needs_lengths, spec.needs_engine, spec.sharded_only

    fitting = [
        spec
        for spec in CUTS.values()
        if spec.offered and not spec.returnns_own and all(h or not n for n, h in zip(needs(spec), has))
    ]
    return max(fitting, key=lambda spec: sum(needs(spec))).name


def cut_options(distribution: str, *, max_sub_epoch_deviation: float) -> Dict[str, Any]:
    """Keyword options of the distribution's cut (see :data:`CUTS`), empty if it has none: the one rule that
    ``PlanSettings`` and the RETURNN-side dataset both take them from. A row whose bound is "given" takes
    ``max_sub_epoch_deviation``; a row that chooses its bound takes it only where it is not the default, as the most it
    may choose (its bins at the default stay what they were).

    >>> cut_options("flexible", max_sub_epoch_deviation=0.25), cut_options("returnn", max_sub_epoch_deviation=0.25)
    ({'max_sub_epoch_deviation': 0.25}, {})
    >>> cut_options("equal_steps", max_sub_epoch_deviation=0.25), cut_options("equal_steps", max_sub_epoch_deviation=0.1)
    ({}, {'max_sub_epoch_deviation': 0.1})
    """
    bound = cut_spec(distribution).sub_epoch_bound
    if bound == "given" or (bound == "chosen" and max_sub_epoch_deviation != DEFAULT_MAX_SUB_EPOCH_DEVIATION):
        return {"max_sub_epoch_deviation": max_sub_epoch_deviation}
    return {}


def cut_for_release(
    distribution: str, returnn_version: Union[None, str, Callable[[str], bool]]
) -> Callable[..., Tuple[np.ndarray, np.ndarray]]:
    """The cut of ``distribution`` as RETURNN ``returnn_version`` makes it (None: the newest's; where RETURNN runs, its
    features as detected there, see :func:`release_has`): the first of its :attr:`CutSpec.release_cuts` whose feature
    that release lacks, else its ``cut``.

    >>> cut_for_release("returnn", "1.20240620.64807").__name__, cut_for_release("returnn", None).__name__
    ('_returnn_fixed_mean', '_returnn')
    """
    spec = cut_spec(distribution)
    for feature, cut in spec.release_cuts:
        if release_has(returnn_version, feature) is False:
            return cut
    return spec.cut


def release_cut_difference(
    distribution: str, planned_version: Optional[str], *, has_feature: Callable[[str], bool]
) -> Optional[str]:
    """The feature (a key of ``RETURNN_FEATURES``) for which a RETURNN with the features ``has_feature`` says cuts
    ``distribution`` otherwise than release ``planned_version`` (None: the newest) does; None where both cut alike
    (:attr:`CutSpec.release_cuts`): whether a plan made for one release holds the bins another cuts.

    >>> newest = lambda key: True
    >>> release_cut_difference("returnn", "1.20240620.64807", has_feature=newest)
    'reaveraged_cut'
    >>> release_cut_difference("balanced", "1.20240620.64807", has_feature=newest) is None
    True
    """
    for feature, _ in cut_spec(distribution).release_cuts:
        if (release_has(planned_version, feature) is not False) != bool(has_feature(feature)):
            return feature
    return None


def cut_full_epoch(
    costs: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    distribution: str,
    options: Optional[Mapping[str, Any]] = None,
    separate: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None,
    returnn_version: Union[None, str, Callable[[str], bool]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Bins of one full epoch for files whose costs are given in the shuffled order.

    :param costs: int64 costs in the (shuffled) order, shape [num_files]
    :param num_shards: the number of shards the cut is for (1 for each rank's own layout unsharded)
    :param distribution: a key of :data:`CUTS`
    :param options: keyword options of that distribution (:func:`cut_options`, e.g.
        ``max_sub_epoch_deviation`` of "flexible"); None: its defaults
    :param separate: ``(positions, bounds) -> positions``, the cut's positions rearranged so that no sub-epoch reads
        a file twice (the reads of corpora by weight); applied where the distribution's row says
        (:attr:`CutSpec.separates_repeats`)
    :param returnn_version: the RETURNN release whose cut to make (:func:`cut_for_release`); None: the newest's
    :return: ``(positions, bounds)``: int64 positions into ``costs``, shape [num_files], grouped bin by
        bin, and int64 boundaries, shape [num_shards * partition_epoch + 1]; bin ``r*P + s`` is what
        rank r reads in sub-epoch s

    >>> positions, bounds = cut_full_epoch(np.array([1, 1, 78, 120]), num_shards=2, partition_epoch=2,
    ...                                    distribution="returnn")
    >>> positions.tolist(), bounds.tolist()
    ([0, 1, 2, 3], [0, 1, 2, 3, 4])
    """
    spec = cut_spec(distribution)
    options = dict(options or {})
    if separate is not None and spec.separates_repeats:
        options["separate"] = separate
    positions, bounds = cut_for_release(distribution, returnn_version)(
        np.asarray(costs), num_shards=num_shards, partition_epoch=partition_epoch, **options
    )
    if separate is not None and not spec.separates_repeats:
        positions = separate(positions, bounds)
    return positions, bounds


def check_bound_is_used(max_sub_epoch_deviation: float, *, distribution: str) -> None:
    """A bound other than the default is given only with a distribution that takes it (its row's
    ``sub_epoch_bound`` is "given", or "chosen": then the most it may choose), where a user sets it: in the builder, the job and the CLI (a plan's comparison
    rows keep the bound while they switch the distribution, so :class:`PlanSettings` itself does not refuse it).

    >>> check_bound_is_used(0.1, distribution="balanced")
    Traceback (most recent call last):
    ...
    ValueError: max_sub_epoch_deviation=0.1 bounds the sub-epoch sizes of distribution='flexible' only, but distribution='balanced': use distribution='flexible', or drop max_sub_epoch_deviation
    """
    spec = cut_spec(distribution)
    if max_sub_epoch_deviation == DEFAULT_MAX_SUB_EPOCH_DEVIATION or spec.sub_epoch_bound is not None:
        return
    takers = [s.name for s in CUTS.values() if s.sub_epoch_bound == "given"]
    raise ValueError(
        f"max_sub_epoch_deviation={max_sub_epoch_deviation!r} bounds the sub-epoch sizes of "
        f"distribution={' or '.join(map(repr, takers))} only, but distribution={distribution!r}: use "
        f"distribution={takers[0]!r}, or drop max_sub_epoch_deviation"
    )

"""Consistency of a costs archive's arrays with each other: per-sequence lengths against per-file counts and totals,
costs against the unit, milli-steps against the lengths and batching they claim, no 0-cost file that holds frames."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .batching import Batching, file_millisteps

__all__ = ["check_frame_rate"]

#: Sequences a batch may hold in the steps model (``seqs_per_batch_moments`` sums at most this many terms): a limit
#: letting more of the shortest sequences into one batch is beyond what the model counts.
MAX_SEQS_PER_BATCH_MODELLED = 10**7
#: Frames per second an OggZip manifest's durations may be counted in: above raw audio's sample rates (192 kHz), far
#: below what overflows (a duration times the rate must stay a length RETURNN holds in int32).
MAX_FRAME_RATE = 10**6


def check_frame_rate(frame_rate: object) -> float:
    """``frame_rate`` (``--frame-rate``, ``ComputeFileCostsJob(frame_rate=)``) as a float, if a number of frames per
    second in (0, :data:`MAX_FRAME_RATE`].

    >>> check_frame_rate(1e300)
    Traceback (most recent call last):
    ...
    ValueError: frame_rate=1e+300 (--frame-rate) is not a rate of frames per second in (0, 1,000,000]: give the features' frame rate, e.g. 100 for 10 ms frames
    """
    if isinstance(frame_rate, bool) or not isinstance(frame_rate, (int, float)) or not 0 < frame_rate <= MAX_FRAME_RATE:
        raise ValueError(
            f"frame_rate={frame_rate!r} (--frame-rate) is not a rate of frames per second in (0, {MAX_FRAME_RATE:,}]: "
            "give the features' frame rate, e.g. 100 for 10 ms frames"
        )
    return float(frame_rate)


def _first(mask: np.ndarray) -> Optional[int]:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def costs_consistency_problem(
    *,
    unit: str,
    costs: np.ndarray,
    num_seqs: np.ndarray,
    num_frames: np.ndarray,
    seq_lengths: Optional[np.ndarray],
    seq_length_quantiles: np.ndarray,
    batching: Optional[Batching],
    keys: Sequence[str],
    seq_batch_lengths: Optional[np.ndarray] = None,
) -> Optional[str]:
    """The first way in which the arrays of a costs archive contradict each other, or None. Checks that a file
    without sequences has no frames and no cost; that every file's per-sequence lengths (``seq_lengths``, in entry
    order, ``num_seqs[i]`` each) sum to its ``num_frames``; that the pooled quantiles start at the shortest and end
    at the longest length; that the batching lengths (``seq_batch_lengths``, where kept) pair up with the lengths and
    are none shorter; that the costs are the unit's (``num_frames``, ``num_seqs``, or
    :func:`~i6_shard.core.pure.batching.file_millisteps` of the batching lengths under ``batching``, recomputed); and,
    without the lengths, that no file with sequences costs 0 milli-steps; with them, that the batching is one the
    steps unit can count (:func:`useful_batching_problem`: no 0-cost file with sequences).

    :param keys: the entries' keys, to name the first offending one
    :return: a message naming the entry and the arrays that disagree

    >>> ones = np.ones(2, dtype=np.int64)
    >>> costs_consistency_problem(unit="frames", costs=np.array([3, 5]), num_seqs=ones, num_frames=np.array([3, 5]),
    ...     seq_lengths=np.array([5, 3], dtype=np.int32), seq_length_quantiles=np.array([3, 5]), batching=None,
    ...     keys=["a", "b"])
    "entry 0 ('a'): its 1 sequence lengths sum to 5 frames, but num_frames says 3"
    """
    costs, num_seqs, num_frames = (np.asarray(x, dtype=np.int64) for x in (costs, num_seqs, num_frames))

    def name(i: int) -> str:
        key = keys[i]
        return f"entry {i} ({key[:100]!r}{'...' if len(key) > 100 else ''})"

    empty = num_seqs == 0
    bad = _first(empty & ((num_frames != 0) | (costs != 0)))
    if bad is not None:
        return f"{name(bad)} has no sequences but {int(num_frames[bad])} frames and cost {int(costs[bad])}"
    if seq_lengths is not None:
        lengths = np.asarray(seq_lengths, dtype=np.int64)
        problem = _lengths_problem(lengths, num_seqs, num_frames, seq_length_quantiles, name)
        if problem is not None:
            return problem
    if seq_batch_lengths is not None:
        problem = _batch_lengths_problem(seq_batch_lengths, seq_lengths, num_seqs, name)
        if problem is not None:
            return problem
        lengths = np.asarray(seq_batch_lengths, dtype=np.int64)  # what the steps are counted from
    if unit in ("frames", "seqs"):
        expected = num_frames if unit == "frames" else num_seqs
        bad = _first(costs != expected)
        if bad is not None:
            return f"{name(bad)} costs {int(costs[bad])} {unit}, but holds {int(expected[bad])}"
        return None
    if unit != "steps":
        return None
    if seq_lengths is None:
        bad = _first(~empty & (costs == 0))
        if bad is not None:
            return f"{name(bad)} holds {int(num_seqs[bad])} sequences but costs 0 milli-steps"
        return None
    return _steps_problem(costs, num_seqs, lengths, batching, name)


def _lengths_problem(lengths, num_seqs, num_frames, seq_length_quantiles, name) -> Optional[str]:
    """Per-sequence lengths against each file's ``num_frames`` and the pooled quantiles' ends, or None."""
    ends = np.cumsum(num_seqs)
    summed = np.concatenate([[0], np.cumsum(lengths)])
    per_file = summed[ends] - summed[ends - num_seqs]
    bad = _first(per_file != num_frames)
    if bad is not None:
        return (
            f"{name(bad)}: its {int(num_seqs[bad])} sequence lengths sum to {int(per_file[bad])} frames, "
            f"but num_frames says {int(num_frames[bad])}"
        )
    q = np.asarray(seq_length_quantiles, dtype=np.int64)
    if lengths.size and (q[0] != lengths.min() or q[-1] != lengths.max()):
        return (
            f"the pooled length quantiles run from {int(q[0])} to {int(q[-1])}, but the sequences from "
            f"{int(lengths.min())} to {int(lengths.max())}"
        )
    return None


def _batch_lengths_problem(batch_lengths, seq_lengths, num_seqs, name) -> Optional[str]:
    """The batching lengths against the per-sequence lengths (same shape, none shorter), or None."""
    if seq_lengths is None:
        return "it holds batching lengths (seq_batch_lengths) but no sequence lengths (seq_lengths)"
    batch = np.asarray(batch_lengths, dtype=np.int64)
    if batch.shape != np.shape(seq_lengths):
        return f"seq_batch_lengths has shape {list(batch.shape)}, seq_lengths {list(np.shape(seq_lengths))}"
    short = _first(batch < np.asarray(seq_lengths, dtype=np.int64))
    if short is not None:
        entry = int(np.searchsorted(np.cumsum(num_seqs), short, side="right"))
        return (
            f"{name(entry)}: sequence {short} of the archive batches by {int(batch[short])} frames, fewer than its "
            f"{int(seq_lengths[short])} (the batching length is the longest data key, the cost stream's included)"
        )
    return None


def _steps_problem(costs, num_seqs, lengths, batching: Batching, name) -> Optional[str]:
    """Milli-step costs against their recount from the lengths under ``batching`` (a batching the steps unit
    cannot count named as such), or None."""
    starts = np.cumsum(num_seqs) - num_seqs
    per_file_lengths = [lengths[s : s + n] for s, n in zip(starts.tolist(), num_seqs.tolist())]
    shortest = int(lengths.min()) if lengths.size else 1
    if (costs[num_seqs != 0] == 0).any() or _beyond_model(batching, shortest=shortest):  # else the recount shows it
        useless = useful_batching_problem(per_file_lengths, batching)
        if useless is not None:  # e.g. written with batch_size=2**40: every cost 0, consistently
            return f"the batching it was computed under cannot count these files: {useless}"
    expected = file_millisteps(per_file_lengths, batching)
    bad = _first(costs != expected)
    if bad is not None:
        return (
            f"{name(bad)} costs {int(costs[bad])} milli-steps, but its sequence lengths give {int(expected[bad])} "
            f"under batch_size={batching.batch_size}, max_seqs={batching.max_seqs}"
        )
    return None


def useful_batching_problem(per_file_lengths: Sequence[np.ndarray], batching: Batching) -> Optional[str]:
    """Why ``batching`` is beyond what the steps unit can count for these files, or None: a batch that would hold
    more than :data:`MAX_SEQS_PER_BATCH_MODELLED` of the shortest sequences, or one so large that a file with
    sequences costs 0 milli-steps (its sequences are less than a 2000th of a batch). Names the option and its largest
    useful value (for ``batch_size``: the largest for which no such file costs 0, found by bisection).

    :param per_file_lengths: each file's sequence lengths (frames)

    >>> useful_batching_problem([np.array([10] * 4)], Batching(batch_size=None, max_seqs=10**6))
    'max_seqs=1000000 makes files with sequences cost 0 milli-steps (e.g. file 0: 4 sequences); the largest useful max_seqs is 7999'
    """
    nonempty = [i for i, x in enumerate(per_file_lengths) if len(x)]
    if not nonempty:
        return None
    shortest = max(1, min(int(np.min(per_file_lengths[i])) for i in nonempty))

    def beyond_model(b: Batching) -> bool:
        return _beyond_model(b, shortest=shortest)

    zero = [] if beyond_model(batching) else _zero_cost_files(per_file_lengths, nonempty, batching)
    if not beyond_model(batching) and not zero:
        return None
    option = "max_seqs" if batching.batch_size is None else "batch_size"
    hi = batching.max_seqs if batching.batch_size is None else batching.batch_size
    lo = 1  # a batch of one sequence: every sequence costs a step
    while hi - lo > 1:  # the largest useful value: costs only fall as the limit grows
        mid = (lo + hi) // 2
        if option == "batch_size":
            trial = Batching(batch_size=mid, max_seqs=batching.max_seqs)
        else:
            trial = Batching(batch_size=None, max_seqs=mid)
        if beyond_model(trial) or _zero_cost_files(per_file_lengths, nonempty, trial):
            hi = mid
        else:
            lo = mid
    if not zero:
        return (
            f"batch_size={batching.batch_size} lets {batching.batch_size // shortest:,} of the shortest sequences "
            f"({shortest} frames) into one batch, more than the {MAX_SEQS_PER_BATCH_MODELLED:,} the steps unit "
            f"counts; the largest useful batch_size is {lo}"
        )
    first = zero[0]
    return (
        f"{option}={getattr(batching, option)} makes files with sequences cost 0 milli-steps (e.g. file "
        f"{first}: {len(per_file_lengths[first])} sequences); the largest useful {option} is {lo}"
    )


def _beyond_model(batching: Batching, *, shortest: int) -> bool:
    """Whether a batch could hold more of the shortest sequences than the steps model sums."""
    fit = batching.batch_size // max(1, shortest) if batching.batch_size is not None else batching.seqs_limit
    return batching.batch_size is not None and min(fit, batching.seqs_limit) > MAX_SEQS_PER_BATCH_MODELLED


def _zero_cost_files(per_file_lengths: Sequence[np.ndarray], candidates: Sequence[int], batching: Batching) -> list:
    """Those of ``candidates`` (files with sequences) that cost 0 milli-steps under ``batching``. A file whose every
    sequence fits a batch ``2000 * num_seqs`` times over certainly does (``E[K]`` is at least the sequences that
    always fit): those are returned without counting the rest, which a huge limit would make slow."""
    certain = []
    for i in candidates:
        lengths = per_file_lengths[i]
        always_fit = min(batching.seqs_limit, batching.frames_limit // max(1, int(np.max(lengths))))
        if min(always_fit, MAX_SEQS_PER_BATCH_MODELLED) > 2000 * len(lengths):
            certain.append(i)
    if certain:
        return certain
    costs = file_millisteps([per_file_lengths[i] for i in candidates], batching)
    return [candidates[j] for j in np.flatnonzero(costs == 0).tolist()]

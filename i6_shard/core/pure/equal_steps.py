"""A split whose exact steps are equal: starting from a full epoch's bins, files are moved and swapped between the
ranks of each sub-epoch until the simulated engine (:mod:`.engine_sim`) drops nothing there, or no move helps."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .engine_sim import EngineSettings, rank_batches, steps_taken

__all__ = ["equalize_steps", "equalize_plan_layouts", "DEFAULT_MAX_ROUNDS"]

#: Accepted moves per sub-epoch at most (each round tries every move and swap between the ranks that lose
#: data and the others, and keeps the best).
DEFAULT_MAX_ROUNDS = 64


def _batch_frames(lengths: np.ndarray, *, engine: EngineSettings, full_epoch_0idx: int, offset: int) -> np.ndarray:
    """Frames (first data key) of each batch the rank makes: the order, filter and batching of
    :func:`~.engine_sim.rank_batches`, as :func:`~.engine_sim.simulate_sub_epoch` makes them."""
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    x, bounds = rank_batches(lengths, engine=engine, full_epoch_0idx=full_epoch_0idx, random_seed_offset=offset)
    cum = np.concatenate([[0], np.cumsum(x[:, 0])])
    return np.diff(cum[bounds])


class _SubEpoch:
    """The ranks' files of one sub-epoch, with each rank's batches cached."""

    def __init__(self, bins: List[List[int]], file_lengths, engine, full_epoch_0idx: int, offsets: Sequence[int]):
        self.bins, self.file_lengths, self.engine = bins, file_lengths, engine
        self.full_epoch_0idx, self.offsets = full_epoch_0idx, offsets
        self.frames_total = [self._total(b) for b in bins]
        self.batches = [self._batches(r, b) for r, b in enumerate(bins)]

    def _total(self, files: List[int]) -> int:
        return int(sum(int(np.sum(self.file_lengths[i])) for i in files))

    def _batches(self, rank: int, files: List[int]) -> np.ndarray:
        lengths = (
            np.concatenate([np.asarray(self.file_lengths[i], dtype=np.int64) for i in files])
            if files
            else np.zeros(0, dtype=np.int64)
        )
        return _batch_frames(
            lengths, engine=self.engine, full_epoch_0idx=self.full_epoch_0idx, offset=self.offsets[rank]
        )

    def dropped(self, batches: Sequence[np.ndarray], totals: Sequence[int]) -> Tuple[int, int]:
        """(frames dropped, spread of the batch counts): what the search minimizes, in this order."""
        counts = [len(b) for b in batches]
        taken = steps_taken(
            counts,
            torch_distributed=self.engine.torch_distributed,
            accum_grad_multiple_step=self.engine.accum_grad_multiple_step,
            ranks_per_node=self.engine.ranks_per_node,
        )
        kept = sum(int(b[:t].sum()) for b, t in zip(batches, taken))
        return sum(totals) - kept, max(counts) - min(counts)

    def current(self) -> Tuple[int, int]:
        return self.dropped(self.batches, self.frames_total)

    def try_change(self, a: int, b: int, bin_a: List[int], bin_b: List[int]):
        batches, totals = list(self.batches), list(self.frames_total)
        batches[a], batches[b] = self._batches(a, bin_a), self._batches(b, bin_b)
        totals[a], totals[b] = self._total(bin_a), self._total(bin_b)
        return self.dropped(batches, totals), (batches, totals)

    def apply(self, a: int, b: int, bin_a: List[int], bin_b: List[int], state) -> None:
        self.bins[a], self.bins[b] = bin_a, bin_b
        self.batches, self.frames_total = state


def _candidates(bins: List[List[int]], a: int, b: int):
    """Every move of one file from rank a to rank b (a keeps at least one file), and every swap, in a fixed order."""
    for i in range(len(bins[a])):
        if len(bins[a]) > 1:
            yield bins[a][:i] + bins[a][i + 1 :], bins[b] + [bins[a][i]]
        for j in range(len(bins[b])):
            yield (
                bins[a][:i] + [bins[b][j]] + bins[a][i + 1 :],
                bins[b][:j] + [bins[a][i]] + bins[b][j + 1 :],
            )


def _equalize_sub_epoch(sub: _SubEpoch, *, max_rounds: int) -> Tuple[int, int]:
    """Best-improvement search on one sub-epoch: each round tries the moves and swaps between the rank with the most
    batches and every other rank, and between every other pair where that finds nothing; keeps the best if it drops
    less (or as much with closer batch counts). Returns the rounds made and the frames still dropped."""
    best = sub.current()
    rounds = 0
    while best[0] > 0 and rounds < max_rounds:
        counts = [len(x) for x in sub.batches]
        ranks = sorted(range(len(counts)), key=lambda r: (-counts[r], r))
        pairs = [(ranks[0], r) for r in ranks[1:]] + [(a, b) for a in ranks[1:] for b in ranks[1:] if a != b]
        found = None
        for a, b in pairs:
            for bin_a, bin_b in _candidates(sub.bins, a, b):
                score, state = sub.try_change(a, b, bin_a, bin_b)
                if score < best and (found is None or score < found[0]):
                    found = (score, a, b, bin_a, bin_b, state)
            if found is not None and (a, b) == pairs[min(len(pairs) - 1, len(ranks) - 2)]:
                break  # the longest rank's pairs found a move: take the best of them before trying other pairs
        if found is None:
            break
        best, a, b, bin_a, bin_b, state = found
        sub.apply(a, b, bin_a, bin_b, state)
        rounds += 1
    return rounds, best[0]


def equalize_steps(
    positions: np.ndarray,
    bounds: np.ndarray,
    *,
    file_lengths: Sequence[np.ndarray],
    num_shards: int,
    partition_epoch: int,
    engine: EngineSettings,
    full_epoch_0idx: int,
    random_seed_offset: int,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    progress: Optional[Callable[[str], None]] = None,
) -> Tuple[np.ndarray, np.ndarray, Dict[str, List[int]]]:
    """Bins of one sharded full epoch whose ranks make equal exact steps: starting from ``(positions, bounds)`` (e.g.
    ``flexible_auto``'s), files are moved and swapped between the ranks of each sub-epoch (bins ``r*P + s``) while
    that lowers the frames the simulated training drops there (:func:`~.engine_sim.simulate_sub_epoch`: the
    sub-epoch dataset's order with RETURNN's seed, the filter, the batches, the sync). Deterministic: the same input
    gives the same bins. A sub-epoch whose files allow no lossless split keeps the least loss found.

    :param positions: int64 positions into the full epoch's (shuffled) file order, grouped bin by bin
    :param bounds: int64 boundaries, shape [num_shards * partition_epoch + 1]
    :param file_lengths: sequence lengths per position of that order (``file_lengths[p]`` for position p)
    :param random_seed_offset: the sub-epoch datasets' seed offset (sharded: the same on every rank)
    :return: ``(positions, bounds, info)`` with ``info["rounds"]`` and ``info["dropped_frames"]`` per sub-epoch

    >>> lengths = [np.array([10] * 4), np.array([10] * 2), np.array([10] * 2)]
    >>> pos, b, info = equalize_steps(np.arange(3), np.array([0, 2, 3]), file_lengths=lengths, num_shards=2,
    ...     partition_epoch=1, engine=EngineSettings(max_seqs=2), full_epoch_0idx=0, random_seed_offset=0)
    >>> pos.tolist(), b.tolist(), info["dropped_frames"]
    ([2, 1, 0], [0, 2, 3], [0])
    """
    p = partition_epoch
    bins = [positions[bounds[i] : bounds[i + 1]].tolist() for i in range(num_shards * p)]
    info: Dict[str, List[int]] = {"rounds": [], "dropped_frames": []}
    for s in range(p):
        sub = _SubEpoch(
            [bins[r * p + s] for r in range(num_shards)],
            file_lengths,
            engine,
            full_epoch_0idx,
            [random_seed_offset] * num_shards,
        )
        rounds, dropped = _equalize_sub_epoch(sub, max_rounds=max_rounds)
        for r in range(num_shards):
            bins[r * p + s] = sub.bins[r]
        info["rounds"].append(rounds)
        info["dropped_frames"].append(dropped)
        if progress is not None:
            progress(f"full epoch {full_epoch_0idx} sub-epoch {s + 1}/{p}: {rounds} moves, {dropped} frames dropped")
    new_positions = np.asarray([i for b in bins for i in b], dtype=np.int64)
    new_bounds = np.concatenate([[0], np.cumsum([len(b) for b in bins])]).astype(np.int64)
    return new_positions, new_bounds, info


def equalize_plan_layouts(
    orders: np.ndarray,
    bounds: np.ndarray,
    *,
    file_lengths: Sequence[np.ndarray],
    settings,
    engine: EngineSettings,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    progress: Optional[Callable[[str], None]] = None,
) -> Tuple[np.ndarray, np.ndarray, Dict[str, List[int]]]:
    """:func:`equalize_steps` on every full epoch of a sharded plan's arrays (a plan file's ``orders`` and ``bounds``,
    shapes [num_full_epochs, 1, num_files] and [num_full_epochs, 1, num_bins + 1]), with the sub-epoch datasets' seed
    offset of ``settings`` (a :class:`PlanSettings`); a RETURNN-side dataset given the plan file reads these bins.

    :param file_lengths: each file's sequence lengths, in the plan's key order
    :return: new ``(orders, bounds)`` of the same shapes and dtypes, and per sub-epoch the moves and frames dropped
    """
    if not settings.distrib_shard_files:
        raise ValueError("equal steps need a sharded plan (distrib_shard_files=True): unsharded ranks read every file")
    out_orders, out_bounds = orders.copy(), bounds.copy()
    info: Dict[str, List[int]] = {"rounds": [], "dropped_frames": []}
    for k in range(orders.shape[0]):
        order = np.asarray(orders[k, 0], dtype=np.int64)
        positions, new_bounds, sub = equalize_steps(
            np.arange(order.size),
            np.asarray(bounds[k, 0], dtype=np.int64),
            file_lengths=[file_lengths[i] for i in order.tolist()],
            num_shards=settings.num_shards,
            partition_epoch=settings.partition_epoch,
            engine=engine,
            full_epoch_0idx=k,
            random_seed_offset=int(settings.random_seed_offset),
            max_rounds=max_rounds,
            progress=progress,
        )
        out_orders[k, 0] = order[positions]
        out_bounds[k, 0] = new_bounds
        info["rounds"] += sub["rounds"]
        info["dropped_frames"] += sub["dropped_frames"]
    return out_orders, out_bounds, info

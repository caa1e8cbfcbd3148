"""A split whose exact steps are equal: starting from a full epoch's bins, files are reordered within a rank's bin,
moved and swapped between the ranks of each sub-epoch until the simulated engine (:mod:`.engine_sim`) drops nothing
there, or no change helps."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .engine_sim import EngineSettings, batch_bounds, length_filter, steps_taken, sub_epoch_seq_order, sync_levels_of
from .flexible import file_frames, sub_epoch_size_range

#: Rounds per sub-epoch at most: each round reorders the files of every rank off the target, then moves or swaps
#: files between ranks for those still off.
DEFAULT_MAX_ROUNDS = 64
#: Reorderings tried per rank and round (each re-batches only the sequences that change place).
DEFAULT_REORDER_TRIALS = 96
#: Moves and swaps tried per rank and round (each simulates the two ranks anew).
DEFAULT_MOVE_TRIALS = 12
#: Following sub-epochs whose bins a sub-epoch may move files to and from.
DEFAULT_BETWEEN_SUB_EPOCHS = 2

_NO_LIMIT = 2**62
#: Reorderings tried without coming nearer the window before the search moves files instead.
_REORDER_PATIENCE = 12
#: ``seq_ordering`` values whose order depends only on the number of sequences, not on their lengths.
_ORDER_BY_COUNT = ("random", "default", "reverse")
#: Searches of a lossy full epoch from its best bins so far, the worst sub-epoch first, while they help.
_REPAIRS = 3


def _period(engine: EngineSettings) -> int:
    """Steps after which the train loop's control syncs repeat (accumulation times the levels' ``every``)."""
    _, levels = sync_levels_of(engine.torch_distributed)
    every = 1
    for level in levels:
        every = every * level.every // math.gcd(every, level.every)
    return int(engine.accum_grad_multiple_step or 1) * every


def _taken(counts: Sequence[int], engine: EngineSettings, period: int) -> List[int]:
    """:func:`~.engine_sim.steps_taken`, run on counts shortened by whole periods of the syncs (the same result:
    after the first step the loop's syncs repeat every ``period`` steps)."""
    shift = (min(counts) - 2 * period) // period * period if counts and min(counts) > 3 * period else 0
    taken = steps_taken(
        [int(c) - shift for c in counts],
        torch_distributed=engine.torch_distributed,
        accum_grad_multiple_step=engine.accum_grad_multiple_step,
        ranks_per_node=engine.ranks_per_node,
    )
    return [t + shift for t in taken]


def _long_above(*, frames_limit: int, seqs_limit: int) -> int:
    """The length above which a sequence can end a batch before it holds ``max_seqs`` (a long sequence):
    ``length * max_seqs > batch_size``, for ints ``length > batch_size // max_seqs`` (no overflow at the "no limit"
    values); the others never end a batch early.

    >>> _long_above(frames_limit=8, seqs_limit=2), _long_above(frames_limit=8, seqs_limit=3)
    (4, 2)
    """
    return frames_limit // seqs_limit


def _batch_bounds_few_seqs(lengths: np.ndarray, *, frames_limit: int, seqs_limit: int) -> np.ndarray:
    """:func:`~.engine_sim.batch_bounds` of one data key where ``max_seqs`` is small, vectorized. A batch from s stops
    before its k-th next sequence at the first k (``1 <= k < max_seqs``) where ``(k + 1) * max(lengths[s : s + k + 1])
    > batch_size``: where some t in ``s..s+k`` has ``lengths[t] * (k + 1) > batch_size``, i.e. ``k >= max(t - s,
    batch_size // lengths[t])``. So a batch holds ``min(max_seqs, n - s, min over t of max(t - s, batch_size //
    lengths[t]))`` sequences (at least 1), where only the long sequences (:func:`_long_above`) can lower the
    ``max_seqs``; the batches then follow from 0.

    >>> _batch_bounds_few_seqs(np.array([3, 3, 3, 9, 1]), frames_limit=8, seqs_limit=2).tolist()
    [0, 2, 3, 4, 5]
    """
    n = lengths.shape[0]
    size = np.minimum(seqs_limit, n - np.arange(n, dtype=np.int64))
    longs = np.flatnonzero(lengths > _long_above(frames_limit=frames_limit, seqs_limit=seqs_limit))
    if 4 * longs.shape[0] > n:  # many long sequences: every start's window of max_seqs at once
        width = min(seqs_limit, n)
        _dense_sizes(size, _stops(lengths, frames_limit=frames_limit, seqs_limit=seqs_limit, pad=width))
    else:
        stop = frames_limit // lengths[longs]
        for d in range(min(seqs_limit, n)):
            first = int(np.searchsorted(longs, d))  # the starts longs - d that lie in the rank
            at = longs[first:] - d
            size[at] = np.minimum(size[at], np.maximum(stop[first:], d))
    ends = memoryview(np.arange(n, dtype=np.int64) + np.maximum(size, 1))
    bounds = [0]
    s = 0
    while s < n:
        s = ends[s]
        bounds.append(s)
    return np.asarray(bounds, dtype=np.int64)


def _stops(lengths: np.ndarray, *, frames_limit: int, seqs_limit: int, pad: int = 0) -> np.ndarray:
    """The most sequences a batch may hold up to each one: ``batch_size // length`` for a long sequence
    (:func:`_long_above`), ``max_seqs`` for the others and for ``pad`` slots after the end (small ints).

    >>> _stops(np.array([3, 9, 5]), frames_limit=8, seqs_limit=2, pad=1).tolist()
    [2, 0, 1, 2]
    """
    n = lengths.shape[0]
    stop = np.full(n + pad, seqs_limit, dtype=np.int8 if seqs_limit < 128 else np.int64)
    longs = np.flatnonzero(lengths > _long_above(frames_limit=frames_limit, seqs_limit=seqs_limit))
    stop[longs] = np.minimum(frames_limit // lengths[longs], seqs_limit)
    return stop


def _dense_sizes(size: np.ndarray, stop: np.ndarray) -> None:
    """:func:`_batch_bounds_few_seqs`' batch sizes (into ``size``, which holds ``min(max_seqs, n - s)``) where long
    sequences are many: the minimum over ``d < max_seqs`` of ``max(d, stop[s + d])`` (:func:`_stops`, padded by
    ``min(max_seqs, n)``), for every start s at once, one pass per d on small ints."""
    n = size.shape[0]
    low = stop[:n].copy()
    for d in range(1, stop.shape[0] - n):
        np.minimum(low, np.maximum(stop[d : d + n], d), out=low)
    np.minimum(size, low, out=size)


def _window_sizes(stop: np.ndarray, at: np.ndarray, *, n: int, seqs_limit: int) -> np.ndarray:
    """The batch sizes from the starts ``at`` alone (int64 shape [len(at)]) of n sequences, as :func:`_dense_sizes`
    gives them (at least 1), from ``stop`` (:func:`_stops`, padded by ``min(max_seqs, n)``).

    >>> _window_sizes(_stops(np.array([3, 3, 3, 9, 1]), frames_limit=8, seqs_limit=2, pad=2), np.array([0, 2, 3, 4]),
    ...               n=5, seqs_limit=2).tolist()
    [2, 1, 1, 1]
    """
    width = stop.shape[0] - n
    low = np.maximum(stop[at[:, None] + np.arange(width)], np.arange(width, dtype=stop.dtype)).min(axis=1)
    return np.maximum(np.minimum(low.astype(np.int64), np.minimum(seqs_limit, n - at)), 1)


class _Context:
    """What every rank of a full epoch shares: the files' lengths, the engine, the seed, the order per count."""

    def __init__(self, file_lengths, engine: EngineSettings, full_epoch_0idx: int, offset: int, frames=None):
        self.file_lengths = [np.asarray(x, dtype=np.int64) for x in file_lengths]
        self.num_seqs = np.fromiter(map(len, self.file_lengths), dtype=np.int64, count=len(file_lengths))
        self.engine, self.full_epoch_0idx, self.offset = engine, full_epoch_0idx, offset
        self.period = _period(engine)
        name = engine.seq_ordering.split(":")[0]
        one_key = all(x.ndim == 1 for x in self.file_lengths)
        no_filter = engine.min_seq_length is None and engine.max_seq_length is None
        self.fast = name in _ORDER_BY_COUNT and one_key and no_filter
        self.frames_limit = _NO_LIMIT if engine.batch_size is None else int(engine.batch_size)
        self.seqs_limit = _NO_LIMIT if engine.max_seqs in (None, -1) else int(engine.max_seqs)
        self.long_above = _long_above(frames_limit=self.frames_limit, seqs_limit=self.seqs_limit)
        self._orders: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        #: the file of each position where repeats of a file must stay in different sub-epochs (corpora by weight)
        self.apart: Optional[np.ndarray] = None
        #: [low, high] frames of a sub-epoch where ``max_sub_epoch_deviation`` bounds them (:meth:`bound`), else None
        self.size_range: Optional[Tuple[int, int]] = None
        self.frames = file_frames(self.file_lengths) if frames is None else np.asarray(frames, dtype=np.int64)

    def apart_after(self, sub_bins: Sequence[List[int]], old: List[int], new: List[int], other: Sequence[int]) -> bool:
        """Whether, after bin ``old`` of another sub-epoch becomes ``new`` (the rest of that sub-epoch: ``other``)
        and the sub-epoch of ``sub_bins`` trades the difference, both still read no file twice (always without
        :attr:`apart`)."""
        if self.apart is None:
            return True
        came, left = Counter(old) - Counter(new), Counter(new) - Counter(old)
        here = Counter(i for b in sub_bins for i in b) - left + came
        there = list(other) + list(new)
        return all(
            len(ids) == len(set(ids))
            for ids in ([self.apart[i] for i in here.elements()], [self.apart[i] for i in there])
        )

    def bound(self, max_sub_epoch_deviation: Optional[float], *, partition_epoch: int) -> None:
        """Keep every sub-epoch's frames within ``max_sub_epoch_deviation`` of the mean (or no farther outside)."""
        if max_sub_epoch_deviation is not None:
            self.size_range = sub_epoch_size_range(
                int(self.frames.sum()), partition_epoch=partition_epoch, max_sub_epoch_deviation=max_sub_epoch_deviation
            )

    def size_ok(self, new: int, old: int) -> bool:
        """Whether a sub-epoch of ``old`` frames may become ``new``: within the range, or no farther outside."""
        if self.size_range is None:
            return True
        low, high = self.size_range
        return max(low - new, new - high, 0) <= max(low - old, old - high, 0)

    def order(self, lengths: np.ndarray) -> np.ndarray:
        return sub_epoch_seq_order(
            lengths if lengths.ndim == 1 else lengths[:, 0],
            seq_ordering=self.engine.seq_ordering,
            full_epoch_0idx=self.full_epoch_0idx,
            random_seed_offset=self.offset,
            fixed_random_seed=self.engine.fixed_random_seed,
        )

    def order_by_count(self, n: int) -> Tuple[np.ndarray, np.ndarray]:
        """(order, inverse) of n sequences where the order depends only on n (cached: the last few counts)."""
        got = self._orders.get(n)
        if got is None:
            order = self.order(np.zeros(n, dtype=np.int64))
            inverse = np.empty(n, dtype=np.int64)
            inverse[order] = np.arange(n, dtype=np.int64)
            if len(self._orders) > 64:
                self._orders.clear()
            got = self._orders[n] = (order, inverse)
        return got


class _Rank:
    """One rank's files in a sub-epoch and its simulated batches: the number of batches, and (fast path) the lengths
    in training order and the batch starts, to re-batch a reordering of the files incrementally."""

    def __init__(self, ctx: _Context, files: List[int]):
        self.ctx, self.files = ctx, list(files)
        arrays = [ctx.file_lengths[f] for f in self.files]
        x = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        self.num_seqs = int(x.shape[0])
        self.frames = int(x.sum()) if x.ndim == 1 else int(x[:, 0].sum())
        self._dense: Optional[Tuple[np.ndarray, List[int]]] = None
        self._pending: Optional[tuple] = None
        self._many_longs: Optional[bool] = None
        if self.num_seqs == 0:
            self.count, self.starts, self._tail, self._longs = 0, [], None, None
            return
        if ctx.fast:
            order, self.inverse = ctx.order_by_count(self.num_seqs)
        else:
            order = ctx.order(x)
        xo = x[order]
        if not ctx.fast:
            xo = xo[
                length_filter(xo, min_seq_length=ctx.engine.min_seq_length, max_seq_length=ctx.engine.max_seq_length)
            ]
        if ctx.fast and ctx.seqs_limit <= 64:
            bounds = _batch_bounds_few_seqs(xo, frames_limit=ctx.frames_limit, seqs_limit=ctx.seqs_limit)
        else:
            bounds = batch_bounds(xo, batch_size=ctx.engine.batch_size, max_seqs=ctx.engine.max_seqs)
        self.count = int(bounds.shape[0] - 1)
        self.xo, self._bounds, self._tail, self._longs = xo, bounds, None, None
        if ctx.fast:
            self.starts = bounds[:-1].tolist()

    @property
    def longs(self) -> Tuple[List[int], Dict[int, int]]:
        """The slots (in training order, sorted) of the sequences that can end a batch early (:func:`_long_above`),
        and their lengths (made when first reordered)."""
        if self._longs is None:
            at = np.flatnonzero(self.xo > self.ctx.long_above)
            self._longs = (at.tolist(), dict(zip(at.tolist(), self.xo[at].tolist())))
        return self._longs

    @property
    def tail(self) -> np.ndarray:
        """Frames before each batch boundary, int64 shape [count + 1] (made when first asked)."""
        if self._tail is None:
            if self._bounds is None:
                self._bounds = np.asarray(self.starts + [self.num_seqs], dtype=np.int64)
            xo = self.xo if self.xo.ndim == 1 else self.xo[:, 0]
            self._tail = np.concatenate([[0], np.cumsum(xo)])[self._bounds]
        return self._tail

    def frames_after(self, steps: int) -> int:
        """Frames of the batches after the first ``steps`` (what the rank drops when it stops there)."""
        if self.num_seqs == 0:
            return 0
        return self.frames - int(self.tail[min(steps, self.count)])

    # -- reordering the files within the bin (fast path) --
    def _swap_changes(self, i: int, j: int) -> Dict[int, int]:
        """The new lengths at the training-order slots that change when files i < j swap places (the files between
        them shift by the difference of their sizes)."""
        lengths = self.ctx.file_lengths
        start = int(self.ctx.num_seqs[self.files[:i]].sum()) if i else 0
        block = [self.files[j]] + self.files[i + 1 : j] + [self.files[i]]
        new = np.concatenate([lengths[f] for f in block])
        slots = self.inverse[start : start + new.shape[0]]
        changed = new != self.xo[slots]
        return dict(zip(slots[changed].tolist(), new[changed].tolist()))

    def rebatch(self, changes: Dict[int, int]) -> List[int]:
        """The batch starts after ``changes`` (slot -> new length): the old batches up to the first that may read a
        changed long sequence (:func:`_long_above`; a change among the others moves no batch boundary), then new ones
        until a new batch starts where an old one did, from where the old batches hold again up to the next."""
        if self.dense is not None:
            return self._dense_rebatch(changes)
        long_above, seqs_limit = self.ctx.long_above, self.ctx.seqs_limit
        _, lengths = self.longs
        moved = sorted(c for c, v in changes.items() if v > long_above or c in lengths)
        if not moved:
            return self.starts
        added = [c for c in moved if changes[c] > long_above]  # long after the change
        starts, n = self.starts, self.num_seqs
        out: List[int] = []
        j0 = 0  # the old batches from starts[j0] hold up to the first that may read moved[r]
        while True:
            r = bisect.bisect_left(moved, starts[j0])
            if r == len(moved):
                out.extend(starts[j0:])
                return out
            j = bisect.bisect_left(starts, moved[r] - seqs_limit + 1, j0)
            out.extend(starts[j0:j])
            s = self._walk(starts[j], changes, added, out)
            if s >= n:
                return out
            j0 = bisect.bisect_left(starts, s, j)

    @property
    def dense(self) -> Optional[Tuple[np.ndarray, List[int]]]:
        """Where long sequences are many and ``max_seqs`` small (:func:`_batch_bounds_few_seqs`' rule; a reordering
        keeps them): the stops of every slot (:func:`_stops`) and the batch size from every start, which a reordering
        updates where it changes them; None elsewhere (made when first reordered)."""
        ctx, n = self.ctx, self.num_seqs
        if self._dense is None and self._many_longs is None:  # (max_seqs windows: only for a small max_seqs)
            self._many_longs = ctx.seqs_limit <= 64 and 4 * int(np.count_nonzero(self.xo > ctx.long_above)) > n
        if self._dense is None and self._many_longs:
            stop = _stops(self.xo, frames_limit=ctx.frames_limit, seqs_limit=ctx.seqs_limit, pad=min(ctx.seqs_limit, n))
            size = np.minimum(ctx.seqs_limit, n - np.arange(n, dtype=np.int64))
            _dense_sizes(size, stop)
            self._dense = (stop, np.maximum(size, 1).tolist())
        return self._dense

    def _dense_rebatch(self, changes: Dict[int, int]) -> List[int]:
        """:meth:`rebatch` where long sequences are many: the batch sizes anew from the starts whose window of
        ``max_seqs`` holds a changed stop (:func:`_window_sizes`), then the batches walked from the first of them
        until, past the last, a new batch starts where an old one did (kept for :meth:`apply_swap`)."""
        ctx, n = self.ctx, self.num_seqs
        stop, _ = self.dense
        slots = np.fromiter(changes.keys(), dtype=np.int64, count=len(changes))
        values = np.fromiter(changes.values(), dtype=np.int64, count=len(changes))
        new_stop = _stops(values, frames_limit=ctx.frames_limit, seqs_limit=ctx.seqs_limit)
        moved = new_stop != stop[slots]
        if not moved.any():
            self._pending = (changes, None)
            return self.starts
        stop = stop.copy()
        stop[slots[moved]] = new_stop[moved]
        at = np.unique((slots[moved][:, None] - np.arange(stop.shape[0] - n)).ravel())
        at = at[at >= 0]
        new = _window_sizes(stop, at, n=n, seqs_limit=ctx.seqs_limit)
        self._pending = (changes, stop, at, new)
        return self._dense_walk(dict(zip(at.tolist(), new.tolist())), int(at[0]), int(at[-1]))

    def _dense_walk(self, new: Dict[int, int], first: int, last: int) -> List[int]:
        """The batch starts with the sizes ``new`` (start -> size, between ``first`` and ``last``) for the old ones."""
        starts, n, size = self.starts, self.num_seqs, self._dense[1]
        j = bisect.bisect_left(starts, first)  # the old batches before it keep their sizes
        out = starts[:j]
        s = starts[j] if j < len(starts) else n
        while s < n:
            if s > last:
                k = bisect.bisect_left(starts, s, j)
                if k < len(starts) and starts[k] == s:  # the old batches hold from here
                    out.extend(starts[k:])
                    return out
                j = k
            out.append(s)
            s += new.get(s, size[s])
        return out

    def _walk(self, s: int, changes: Dict[int, int], added: List[int], out: List[int]) -> int:
        """Appends to ``out`` the new batch starts from s until a batch ends where an old batch starts (returned;
        ``num_seqs`` at the end). Between long sequences batches hold ``max_seqs``: such a run is taken at once (the
        old batches there, equally long, meet the new ones only where the first does)."""
        starts, n, seqs_limit = self.starts, self.num_seqs, self.ctx.seqs_limit
        slots, _ = self.longs
        while True:
            i, a = bisect.bisect_left(slots, s), bisect.bisect_left(added, s)
            t = min(slots[i] if i < len(slots) else n, added[a] if a < len(added) else n)
            if t - s >= seqs_limit:
                k = (t - s) // seqs_limit
                o = bisect.bisect_right(starts, s)
                o = starts[o] if o < len(starts) else n
                if o < s + k * seqs_limit and (o - s) % seqs_limit == 0:
                    k = (o - s) // seqs_limit
                out.extend(range(s, s + k * seqs_limit, seqs_limit))
                s += k * seqs_limit
            else:
                out.append(s)
                s = self._end(s, i, a, changes, added)
            if s >= n:
                return n
            j = bisect.bisect_left(starts, s)
            if j < len(starts) and starts[j] == s:
                return s

    def _end(self, s: int, i: int, a: int, changes: Dict[int, int], added: List[int]) -> int:
        """Where the batch from s ends after ``changes`` (:func:`_batch_bounds_few_seqs`' rule on the long sequences:
        ``slots[i:]`` and ``added[a:]``, the first at or after s)."""
        frames_limit, n = self.ctx.frames_limit, self.num_seqs
        slots, lengths = self.longs
        k = min(self.ctx.seqs_limit, n - s)
        while i < len(slots) and slots[i] - s < k:
            v = changes.get(slots[i], lengths[slots[i]])
            if v:
                k = min(k, max(slots[i] - s, frames_limit // v))
            i += 1
        while a < len(added) and added[a] - s < k:
            k = min(k, max(added[a] - s, frames_limit // changes[added[a]]))
            a += 1
        return s + max(k, 1)

    def apply_swap(self, i: int, j: int, changes: Dict[int, int], starts: List[int]) -> None:
        self.files[i], self.files[j] = self.files[j], self.files[i]
        if self._longs is not None:
            self._update_longs(changes)
        if self._dense is not None:
            self._update_dense(changes)
        at = np.fromiter(changes.keys(), dtype=np.int64, count=len(changes))
        self.xo[at] = np.fromiter(changes.values(), dtype=np.int64, count=len(changes))
        self.starts = starts
        self.count = len(starts)
        self._bounds, self._tail = None, None

    def _update_longs(self, changes: Dict[int, int]) -> None:
        slots, lengths = self._longs
        for slot, v in changes.items():
            if v > self.ctx.long_above:
                if slot not in lengths:
                    bisect.insort(slots, slot)
                lengths[slot] = v
            elif slot in lengths:
                del lengths[slot]
                slots.pop(bisect.bisect_left(slots, slot))

    def _update_dense(self, changes: Dict[int, int]) -> None:
        """The stops and sizes of :attr:`dense` after ``changes``: those :meth:`_dense_rebatch` made for them, else
        made anew from the lengths when next asked."""
        pending, self._pending = self._pending, None
        if pending is None or pending[0] is not changes:
            self._dense = None
        elif pending[1] is not None:
            _, stop, at, new = pending
            size = self._dense[1]
            for a, v in zip(at.tolist(), new.tolist()):
                size[a] = v
            self._dense = (stop, size)


class _SubEpoch:
    """The ranks of one sub-epoch, searched toward a common window of batch counts that drops nothing."""

    def __init__(self, ctx: _Context, bins: List[List[int]], seed: int, *, wide: bool = False):
        """``wide``: :meth:`move` also tries the free bins' files closest to a rank's need, which the files of the
        sub-epoch's own ranks can crowd out of the closest changes (the searches again of a lossy full epoch)."""
        self.ctx, self.wide = ctx, wide
        #: called with (k, files) before free bin k takes those files; False refuses the change (see _repair)
        self.guard: Optional[Callable[[int, List[int]], bool]] = None
        self.ranks = [_Rank(ctx, b) for b in bins]
        self.rng = np.random.RandomState(seed)

    def dropped(self, ranks: Optional[List[_Rank]] = None) -> Tuple[int, int]:
        """(frames dropped, spread of the batch counts): what the search minimizes, in this order."""
        ranks = self.ranks if ranks is None else ranks
        counts = [r.count for r in ranks]
        taken = _taken(counts, self.ctx.engine, self.ctx.period)
        return sum(r.frames_after(t) for r, t in zip(ranks, taken)), max(counts) - min(counts)

    def window(self, target: int) -> Tuple[int, int]:
        """The counts around ``target`` that, all together, drop nothing (grad sync: ``target`` alone)."""
        period, num = self.ctx.period, len(self.ranks)
        base = target if target < 3 * period else 2 * period + target % period
        shift = target - base

        def lossless(counts: List[int]) -> bool:
            return _taken(counts, self.ctx.engine, period) == counts

        lo = hi = base
        while lo - 1 >= 1 and base - lo < 2 * period and lossless([base] * (num - 1) + [lo - 1]):
            lo -= 1
        while hi - base < 2 * period and lossless([base] * (num - 1) + [hi + 1]):
            hi += 1
        while lo < hi and not lossless([lo, hi] + [base] * (num - 2)):
            hi -= 1
        return lo + shift, hi + shift

    def windows(self, *, mean_first: bool = False) -> List[Tuple[int, int]]:
        """Candidate windows, best first: those that hold the most ranks' counts (then the most ranks with one file,
        which cannot be reordered; then nearest to the median count)."""
        counts = [r.count for r in self.ranks]
        median = float(np.median(counts))
        ranked = {}
        for target in sorted(set(counts) | {int(round(median))}):
            lo, hi = self.window(target)
            inside = sum(lo <= c <= hi for c in counts)
            rigid = sum(lo <= r.count <= hi for r in self.ranks if len(r.files) <= 1)
            ranked[(lo, hi)] = (-inside, -rigid, abs((lo + hi) / 2 - median), lo)
        out = sorted(ranked, key=ranked.get)
        if mean_first:  # the sub-epoch keeps its sequences: the window its mean count lies in first
            mean_window = self.window(int(round(float(np.mean(counts)))))
            out = [mean_window] + [w for w in out if w != mean_window]
        return out

    @staticmethod
    def distance(count: int, window: Tuple[int, int]) -> int:
        return max(window[0] - count, count - window[1], 0)

    def reorder(self, r: int, window: Tuple[int, int], trials: int) -> None:
        """Walk on the order of rank r's files: swap two files where that brings its batch count nearer the window,
        or keeps its distance (small files first near the window: they move the count by a batch or two;
        neighbours in a long bin, which re-batch few sequences)."""
        rank = self.ranks[r]
        m = len(rank.files)
        if not self.ctx.fast or m < 2 or rank.num_seqs == 0:
            return
        sizes = self.ctx.num_seqs[rank.files].astype(np.float64)
        best, since = self.distance(rank.count, window), 0
        for _ in range(trials):
            dist = self.distance(rank.count, window)
            if dist == 0 or since >= _REORDER_PATIENCE:
                return
            best, since = (dist, 0) if dist < best else (best, since + 1)
            if m <= 16 and self.rng.rand() < 0.5:
                i, j = sorted(self.rng.choice(m, size=2, replace=False).tolist())
            else:
                pair = sizes[:-1] + sizes[1:]  # 0 for two files of no sequences: their swap changes nothing
                weights = np.divide(1.0, pair, out=np.zeros_like(pair), where=pair > 0)
                i = int(self.rng.choice(m - 1, p=weights / weights.sum()))
                j = i + 1
            changes = rank._swap_changes(i, j)
            if not changes:
                continue
            starts = rank.rebatch(changes)
            if self.distance(len(starts), window) <= dist:
                rank.apply_swap(i, j, changes, starts)
                sizes[i], sizes[j] = sizes[j], sizes[i]

    def _move_candidates(self, r: int, window: Tuple[int, int], trials: int, free: Sequence[List[int]]):
        """``(partners, candidates)`` of :meth:`move`: the partners ``(preference, rank index or -1 - k for free[k],
        files)`` and the changes ``(batches off, preference, partner, file of r or -1, file of the partner or -1)``,
        closest first."""
        rank = self.ranks[r]
        center = (window[0] + window[1]) / 2
        per_batch = rank.num_seqs / max(rank.count, 1)
        need = (center - rank.count) * per_batch  # sequences r should gain
        partners = []  # (preference, partner: rank index or ("free", k), files)
        for q, other in enumerate(self.ranks):
            if q != r:
                d = self.distance(other.count, window)
                pref = 3 if d == 0 else (0 if (other.count > center) == (need > 0) else 2)
                partners.append((pref, q, other.files))
        partners += [(1, -1 - k, files) for k, files in enumerate(free)]
        if not partners:
            return partners, []
        a = self.ctx.num_seqs[rank.files].astype(np.float64)
        pool_files = np.concatenate([np.asarray(files, dtype=np.int64) for _, _, files in partners])
        pool_size = self.ctx.num_seqs[pool_files].astype(np.float64)
        pool_who = np.repeat(np.arange(len(partners)), [len(files) for _, _, files in partners])
        pool_idx = np.concatenate([np.arange(len(files)) for _, _, files in partners])
        pref = np.array([p for p, _, _ in partners])
        order = np.argsort(pool_size, kind="stable")
        parts = []  # (error in sequences, partner, file of r or -1, file of the partner or -1)
        if len(a) > 1:  # r gives file i to a partner (the nearest partner of each kind)
            give = np.argsort(np.abs(-a - need), kind="stable")[:trials]
            i = np.repeat(give, len(partners))
            parts.append((-a[i] - need, np.tile(np.arange(len(partners)), len(give)), i, np.full(i.size, -1)))
        many = np.asarray([len(files) > 1 for _, _, files in partners])
        # wide: also the free bins' files nearest the need, which the ranks' own files may crowd out
        for pool in [order] + ([order[pref[pool_who[order]] == 1]] if self.wide else []):
            near = int(np.searchsorted(pool_size[pool], need))  # a partner gives one file to r
            x = pool[max(0, near - trials) : min(len(pool), near + trials)]
            x = x[many[pool_who[x]]]
            parts.append((pool_size[x] - need, pool_who[x], np.full(x.size, -1), pool_idx[x]))
            near = np.searchsorted(pool_size[pool], a + need)[:, None] + np.arange(-2, 2)  # r gives i and takes j
            i, t = np.nonzero((near >= 0) & (near < len(pool)))
            x = pool[near[i, t]]
            parts.append((pool_size[x] - a[i] - need, pool_who[x], i, pool_idx[x]))
        err, k, i, j = (np.concatenate(column) for column in zip(*parts))
        if self.wide:
            _, first = np.unique(np.stack([k, i, j]), axis=1, return_index=True)
            keep = np.sort(first)
            err, k, i, j = err[keep], k[keep], i[keep], j[keep]
        off = np.round(np.abs(err) / per_batch).astype(np.int64)
        best = np.lexsort((j, i, k, pref[k], off))
        if self.wide:  # the closest changes with the free bins and with the ranks, each
            free_kind = pref[k[best]] == 1
            best = best[np.where(free_kind, np.cumsum(free_kind), np.cumsum(~free_kind)) <= trials]
        else:
            best = best[:trials]
        cands = list(
            zip(off[best].tolist(), pref[k[best]].tolist(), k[best].tolist(), i[best].tolist(), j[best].tolist())
        )
        return partners, cands

    def move(self, r: int, window: Tuple[int, int], trials: int, free: Sequence[List[int]]) -> bool:
        """Move or swap files between rank r and another bin so that r's batch count comes nearer the window: another
        rank of this sub-epoch (then the two ranks' summed distance to the window must shrink) or a bin ``free`` of a
        later sub-epoch (searched later). The candidates are the changes of r's sequence count closest to the one its
        distance asks for (at r's mean sequences per batch), partners off the other way first. True if one was taken."""
        rank = self.ranks[r]
        partners, cands = self._move_candidates(r, window, trials, free)
        before = self.distance(rank.count, window)
        for _, _, k, i, j in cands:
            _, q, files = partners[k]
            files_r, files_q = list(rank.files), list(files)
            if i >= 0 and j >= 0:
                files_r[i], files_q[j] = files_q[j], files_r[i]
            elif i >= 0:
                files_q.append(files_r.pop(i))
            else:
                files_r.append(files_q.pop(j))
            new_r = _Rank(self.ctx, files_r)
            dist_r = self.distance(new_r.count, window)
            if dist_r > before or (dist_r == before and q >= 0):
                continue
            if q < 0:  # a bin of a later sub-epoch: r may also go sideways, to be reordered anew
                if self.guard is not None and not self.guard(-1 - q, files_q):
                    continue
                self.ranks[r] = new_r
                free[-1 - q][:] = files_q
                return True
            new_q = _Rank(self.ctx, files_q)
            dist_q, old_q = self.distance(new_q.count, window), self.distance(self.ranks[q].count, window)
            # the pair comes nearer, or spreads r's distance (the larger of the two shrinks, the sum does not grow)
            if dist_r + dist_q < before + old_q or (dist_r + dist_q == before + old_q and dist_q < before):
                self.ranks[r], self.ranks[q] = new_r, new_q
                return True
        return False

    def search(
        self,
        *,
        max_rounds: int,
        reorder_trials: int,
        move_trials: int,
        free: Sequence[List[int]] = (),
        max_windows: int = 6,
    ) -> int:
        """Rounds of reordering and moving toward the window that holds the most ranks; where that gets stuck, toward
        the next one (at most ``max_windows``). Keeps the ranks that drop least; returns the rounds made."""
        rounds = 0
        best = (self.dropped(), [list(r.files) for r in self.ranks], [list(f) for f in free])
        failed = set()
        for _ in range(max_windows):
            candidates = [w for w in self.windows(mean_first=not free) if w not in failed]
            if not candidates or rounds >= max_rounds:
                break
            window = candidates[0]
            closest, stale = None, 0
            while rounds < max_rounds and stale < 3:
                off = [r for r in range(len(self.ranks)) if self.distance(self.ranks[r].count, window)]
                if not off:
                    break
                total = sum(self.distance(self.ranks[r].count, window) for r in off)
                closest, stale = (total, 0) if closest is None or total < closest else (closest, stale + 1)
                rounds += 1
                for r in off:
                    self.reorder(r, window, reorder_trials)
                off = [r for r in off if self.distance(self.ranks[r].count, window)]
                for r in sorted(off, key=lambda r: (-self.distance(self.ranks[r].count, window), r)):
                    if self.distance(self.ranks[r].count, window):
                        self.move(r, window, move_trials, free)
            failed.add(window)
            now = self.dropped()
            if now < best[0]:
                best = (now, [list(r.files) for r in self.ranks], [list(f) for f in free])
            if now[0] == 0:
                break
        if best[1] != [r.files for r in self.ranks]:
            self.ranks = [_Rank(self.ctx, files) for files in best[1]]
        for f, saved in zip(free, best[2]):
            f[:] = saved
        return rounds


def _size_guard(ctx: _Context, bins, s: int, subs: Sequence[int], *, num_shards: int, partition_epoch: int, inner=None):
    """The guard of sub-epoch s trading with the bins of sub-epochs ``subs`` (free bin k: rank ``k % W`` of
    ``subs[k // W]``): a change passes where both sub-epochs' frames stay in the bound (:meth:`_Context.size_ok`) and
    ``inner`` (if given) passes it; None where nothing bounds the sizes and there is no ``inner``."""
    if ctx.size_range is None:
        return inner
    p = partition_epoch
    size = {t: int(sum(ctx.frames[f] for r in range(num_shards) for f in bins[r * p + t])) for t in [s, *subs]}
    free = [bins[r * p + t] for t in subs for r in range(num_shards)]

    def guard(k: int, files: List[int]) -> bool:
        t = subs[k // num_shards]
        delta = int(ctx.frames[files].sum() if files else 0) - int(ctx.frames[free[k]].sum() if free[k] else 0)
        if not (ctx.size_ok(size[t] + delta, size[t]) and ctx.size_ok(size[s] - delta, size[s])):
            return False
        if inner is not None and not inner(k, files):
            return False
        size[t], size[s] = size[t] + delta, size[s] - delta
        return True

    return guard


def _forward(
    ctx: _Context,
    start: List[List[int]],
    order: Sequence[int],
    *,
    num_shards: int,
    partition_epoch: int,
    between_sub_epochs: int,
    wide: bool = False,
    report: Optional[Callable[[int, int, int], None]] = None,
    **search,
) -> Tuple[List[List[int]], List[int], List[int]]:
    """:meth:`_SubEpoch.search` on each lossy sub-epoch of the bins ``start`` in ``order``, each free to trade with
    the bins of the ``between_sub_epochs`` sub-epochs after it in that order; the new bins, and per sub-epoch (by
    index) the rounds made and the frames dropped (``report``: called with these three as each is searched)."""
    p = partition_epoch
    bins = [list(b) for b in start]
    rounds, dropped = [0] * p, [0] * p
    for i, s in enumerate(order):
        sub = _SubEpoch(ctx, [bins[r * p + s] for r in range(num_shards)], ctx.full_epoch_0idx * 7919 + s, wide=wide)
        if sub.dropped()[0] > 0:
            subs = list(order[i + 1 : i + 1 + between_sub_epochs])
            free = [bins[r * p + t] for t in subs for r in range(num_shards)]
            apart = _apart_guard(sub, free, num_shards=num_shards)
            sub.guard = _size_guard(ctx, bins, s, subs, num_shards=num_shards, partition_epoch=p, inner=apart)
            rounds[s] = sub.search(free=free, **search)
        dropped[s] = sub.dropped()[0]
        for r in range(num_shards):
            bins[r * p + s] = sub.ranks[r].files
        if report is not None:
            report(s, rounds[s], dropped[s])
    return bins, rounds, dropped


def _apart_guard(sub: "_SubEpoch", free: Sequence[List[int]], *, num_shards: int, then=None):
    """The guard of ``sub``'s moves with the ``free`` bins (``num_shards`` per later sub-epoch) that keeps a file's
    repeats in different sub-epochs (:attr:`_Context.apart`), and then asks ``then``; None where nothing is guarded."""
    if sub.ctx.apart is None:
        return then

    def guard(k: int, files: List[int]) -> bool:
        first = k - k % num_shards
        other = [i for j in range(first, first + num_shards) if j != k for i in free[j]]
        if not sub.ctx.apart_after([r.files for r in sub.ranks], free[k], files, other):
            return False
        return then is None or then(k, files)

    return guard


def _gather_big(ctx: _Context, bins: List[List[int]], *, num_shards: int, partition_epoch: int):
    """``(bins, t)``: the bins with every file above a rank's share of a sub-epoch (in frames) in sub-epoch t, the
    largest file's: each bin that holds such a file elsewhere trades places with the bin of t with the fewest frames
    that holds none (every bin stays whole). None if they already share a sub-epoch."""
    p = partition_epoch
    frames = [int(x.sum()) if x.ndim == 1 else int(x[:, 0].sum()) for x in ctx.file_lengths]
    share = sum(frames) / (num_shards * p)
    bin_frames = [sum(frames[f] for f in b) for b in bins]
    big_bins = sorted(
        {k for k, b in enumerate(bins) for f in b if frames[f] > share},
        key=lambda k: (-max(frames[f] for f in bins[k]), k),
    )
    if len({k % p for k in big_bins}) <= 1 or ctx.apart is not None:  # (whole bins would move repeats together)
        return None
    t, out, holds = big_bins[0] % p, [list(b) for b in bins], set(big_bins)
    for k in big_bins[1:]:
        spare = [r * p + t for r in range(num_shards) if r * p + t not in holds]
        if k % p == t or not spare:
            continue
        j = min(spare, key=lambda j: (bin_frames[j], j))
        out[k], out[j], bin_frames[k], bin_frames[j] = out[j], out[k], bin_frames[j], bin_frames[k]
        holds = (holds - {k}) | {j}
    return out, t


def _retry(ctx: _Context, original: List[List[int]], first, **kwargs):
    """The best (by frames dropped, then lossy sub-epochs) of ``first`` (:func:`_forward` in sub-epoch order) and
    searches in other orders, since the sub-epoch searched last trades with no later one: from the cut, the worst
    sub-epoch of ``first`` first; from the cut with the files above a rank's share gathered in one sub-epoch
    (:func:`_gather_big`), that one first; then, while it helps (at most ``_REPAIRS`` times), from the best bins so far
    with their worst sub-epoch first (a sub-epoch that starts lossless is searched only if a trade made it lossy)."""
    p = kwargs["partition_epoch"]

    def first_of(s: int) -> List[int]:
        return [s] + [t for t in range(p) if t != s]

    def worst(got) -> int:
        return max(range(p), key=lambda s: (got[2][s], -s))

    def key(got) -> Tuple[int, int]:
        return sum(got[2]), sum(x > 0 for x in got[2])

    tries = [(original, first_of(worst(first)))] if worst(first) > 0 else []
    gathered = _gather_big(ctx, original, num_shards=kwargs["num_shards"], partition_epoch=p)
    if gathered is not None and ctx.size_range is not None:  # whole bins trade places: keep the bound
        gathered = gathered if _sizes_ok(ctx, original, gathered[0], num_shards=kwargs["num_shards"], p=p) else None
    if gathered is not None:
        tries.append((gathered[0], first_of(gathered[1])))
    best = first
    for start, order in tries:
        got = _forward(ctx, start, order, wide=True, **kwargs) if key(best)[0] > 0 else best
        best = got if key(got) < key(best) else best
    for _ in range(_REPAIRS if key(best)[0] > 0 else 0):
        got = _forward(ctx, best[0], first_of(worst(best)), wide=True, **kwargs)
        if key(got) >= key(best):
            break
        best = got
    for s in sorted(range(p), key=lambda s: (-best[2][s], s)) if key(best)[0] > 0 else ():
        got = _repair(ctx, best, s, **kwargs) if best[2][s] > 0 else best
        best = got if key(got) < key(best) else best
    return best


def _sizes_ok(ctx: _Context, before: List[List[int]], after: List[List[int]], *, num_shards: int, p: int) -> bool:
    """Whether every sub-epoch's frames in ``after`` pass :meth:`_Context.size_ok` against ``before``."""

    def size(bins, t: int) -> int:
        return int(sum(ctx.frames[f] for r in range(num_shards) for f in bins[r * p + t]))

    return all(ctx.size_ok(size(after, t), size(before, t)) for t in range(p))


def _repair(ctx: _Context, got, s: int, *, num_shards: int, partition_epoch: int, between_sub_epochs: int, **search):
    """Sub-epoch s of the bins ``got[0]`` searched again, free to trade with the bins of every other sub-epoch where
    that sub-epoch's drop does not grow (each change to a free bin is simulated in its sub-epoch); ``got`` anew."""
    p, (bins, rounds, dropped) = partition_epoch, got
    bins, rounds, dropped = [list(b) for b in bins], list(rounds), list(dropped)
    others = [t for t in range(p) if t != s]
    subs = {t: _SubEpoch(ctx, [bins[r * p + t] for r in range(num_shards)], 0) for t in others}

    def guard(k: int, files: List[int]) -> bool:
        sub, r = subs[others[k // num_shards]], k % num_shards
        ranks = list(sub.ranks)
        ranks[r] = _Rank(ctx, files)
        if sub.dropped(ranks)[0] > sub.dropped()[0]:
            return False
        sub.ranks = ranks
        return True

    sub = _SubEpoch(ctx, [bins[r * p + s] for r in range(num_shards)], ctx.full_epoch_0idx * 7919 + s, wide=True)
    free = [bins[r * p + t] for t in others for r in range(num_shards)]
    apart = _apart_guard(sub, free, num_shards=num_shards, then=guard)
    sub.guard = _size_guard(ctx, bins, s, others, num_shards=num_shards, partition_epoch=p, inner=apart)
    rounds[s] = sub.search(free=free, **search)
    for r in range(num_shards):
        bins[r * p + s] = sub.ranks[r].files
    for t in range(p):
        dropped[t] = _SubEpoch(ctx, [bins[r * p + t] for r in range(num_shards)], 0).dropped()[0]
    return bins, rounds, dropped


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
    reorder_trials: int = DEFAULT_REORDER_TRIALS,
    move_trials: int = DEFAULT_MOVE_TRIALS,
    between_sub_epochs: int = DEFAULT_BETWEEN_SUB_EPOCHS,
    keep_apart: Optional[np.ndarray] = None,
    max_sub_epoch_deviation: Optional[float] = None,
    frames: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, Dict[str, List[int]]]:
    """Bins of one sharded full epoch whose ranks make equal exact steps: starting from ``(positions, bounds)`` (e.g.
    ``flexible_auto``'s), the files of each sub-epoch (bins ``r*P + s``) are reordered within a rank's bin (the rank's
    sequences then take other places of its shuffled order, and its batches change), and moved and swapped between its
    ranks, until every rank's simulated batch count (:func:`~.engine_sim.simulate_sub_epoch`: the sub-epoch dataset's
    order with RETURNN's seed, the filter, the batches) lies in one window that the sync drops nothing of (grad sync:
    one count; param sync: counts up to the same sync). The sub-epochs are searched in order, each free to trade files
    with the bins of the next ``between_sub_epochs``; a full epoch left lossy is searched again in other orders (the
    worst sub-epoch first, the files above a rank's share gathered in one sub-epoch, then repairs from the best bins:
    :func:`_retry`) and keeps the best, so a full epoch that the first pass leaves lossless keeps those bins.
    Deterministic: the same input gives the same bins. The full epoch never drops more than as cut.

    :param positions: int64 positions into the full epoch's (shuffled) file order, grouped bin by bin
    :param bounds: int64 boundaries, shape [num_shards * partition_epoch + 1]
    :param file_lengths: sequence lengths per position of that order (``file_lengths[p]`` for position p)
    :param random_seed_offset: the sub-epoch datasets' seed offset (sharded: the same on every rank)
    :param max_rounds: rounds of reordering and moving per sub-epoch at most
    :param progress: called with a line per sub-epoch as searched in order (the last one's also says what the
        searches again of a lossy full epoch left)
    :param reorder_trials: reorderings tried per rank and round
    :param move_trials: moves and swaps tried per rank and round
    :param between_sub_epochs: files may also move between a sub-epoch and the bins of this many sub-epochs
        searched after it, as ``flexible_auto`` moves them; 0: every file stays in its sub-epoch (and no sub-epoch
        drops more than as cut)
    :param keep_apart: the file of each position of the order, where positions of one file (its repeats, corpora by
        weight) are in different sub-epochs and must stay so: no move between sub-epochs puts two together
    :param max_sub_epoch_deviation: None: files move between sub-epochs whatever their sizes become; else a move
        keeps both sub-epochs' frames within this share of the mean sub-epoch (or no farther outside than they
        were): the bound is kept, and a sub-epoch that cannot drop nothing within it drops
    :param frames: each position's frames (:func:`~.flexible.file_frames` of ``file_lengths``) where the caller has
        them already; None: summed here
    :return: ``(positions, bounds, info)`` with ``info["rounds"]`` and ``info["dropped_frames"]`` per sub-epoch

    >>> lengths = [np.array([10] * 4), np.array([10] * 2), np.array([10] * 2)]
    >>> pos, b, info = equalize_steps(np.arange(3), np.array([0, 2, 3]), file_lengths=lengths, num_shards=2,
    ...     partition_epoch=1, engine=EngineSettings(max_seqs=2), full_epoch_0idx=0, random_seed_offset=0)
    >>> pos.tolist(), b.tolist(), info["dropped_frames"]
    ([2, 1, 0], [0, 2, 3], [0])
    """
    p = partition_epoch
    original = [positions[bounds[i] : bounds[i + 1]].tolist() for i in range(num_shards * p)]
    ctx = _Context(file_lengths, engine, full_epoch_0idx, random_seed_offset, frames)
    ctx.apart = None if keep_apart is None else np.asarray(keep_apart, dtype=np.int64)
    ctx.bound(max_sub_epoch_deviation, partition_epoch=p)
    kwargs = dict(num_shards=num_shards, partition_epoch=p, max_rounds=max_rounds)
    kwargs.update(reorder_trials=reorder_trials, move_trials=move_trials, between_sub_epochs=between_sub_epochs)
    line = "full epoch {} sub-epoch {}/{}: {} rounds, {} frames dropped".format

    def report(s: int, rounds_s: int, dropped_s: int) -> None:  # the last sub-epoch's line after the searches again
        if progress is not None and s < p - 1:
            progress(line(full_epoch_0idx, s + 1, p, rounds_s, dropped_s))

    bins, rounds, dropped = _forward(ctx, original, range(p), report=report, **kwargs)
    last = line(full_epoch_0idx, p, p, rounds[-1], dropped[-1])
    if sum(dropped) > 0 and between_sub_epochs > 0 and p > 1:
        bins, rounds, dropped = _retry(ctx, original, (bins, rounds, dropped), **kwargs)
        as_cut = sum(_SubEpoch(ctx, [original[r * p + s] for r in range(num_shards)], 0).dropped()[0] for s in range(p))
        if sum(dropped) > as_cut:  # the moves between sub-epochs cost more than they saved
            bins, rounds, dropped = _forward(ctx, original, range(p), **{**kwargs, "between_sub_epochs": 0})
        last += f"; searched again: {dropped} frames dropped per sub-epoch"
    if progress is not None:
        progress(last)
    new_positions = np.asarray([i for b in bins for i in b], dtype=np.int64)
    new_bounds = np.concatenate([[0], np.cumsum([len(b) for b in bins])]).astype(np.int64)
    return new_positions, new_bounds, {"rounds": rounds, "dropped_frames": dropped}


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
    :return: new ``(orders, bounds)`` of the same shapes and dtypes, and per sub-epoch the rounds and frames dropped
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

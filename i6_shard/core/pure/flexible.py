"""The flexible distribution: sub-epochs whose sizes may differ from the mean by a bounded share,
chosen together with the per-rank bins, so that a sub-epoch holding a large file can take more data;
``flexible_auto`` chooses the bound per full epoch."""

from __future__ import annotations

from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .balanced import _assign_group, _balanced_split, _bins_from_groups, _dropped, group_bounds
from .distribute import check_costs, check_enough_files

__all__ = ["check_max_sub_epoch_deviation", "DEFAULT_MAX_SUB_EPOCH_DEVIATION"]

#: By default a sub-epoch may be up to 25% larger or smaller than the mean sub-epoch.
DEFAULT_MAX_SUB_EPOCH_DEVIATION = 0.25
#: The bounds on the sub-epoch sizes that ``"flexible_auto"`` tries (:func:`distribute_flexible_auto`), the
#: most regular first, and how much more a sub-epoch may drop on average than with the best of them for a
#: more regular one to be kept instead: 0.1 point.
AUTO_DEVIATIONS = (0.1, 0.25, 0.5, 0.75, 0.9)
AUTO_TOLERANCE = Fraction(1, 1000)
#: Then it moves single files between the sub-epochs of the full epoch (:func:`_move_files`): at most this
#: many moves per sub-epoch, each chosen among this many candidates per pair of sub-epochs, and only where no
#: sub-epoch has more than 32 files per rank. The work is bounded per full epoch: each assignment of a
#: candidate group counts its files plus a fixed overhead, about a microsecond each on one core (0.1 ms per
#: assignment), so the moves take at most about half a second per full epoch.
_MOVE_ROUNDS_PER_SUB_EPOCH = 4
_MOVE_CANDIDATES = 8
_MOVE_WORK, _MOVE_WORK_PER_ASSIGNMENT = 500_000, 100
#: Largest files per group that the search's bound on the smallest rank looks at (one numpy pass each).
_TOP_K = 4
#: Passes over all boundaries at most (alternating forwards and backwards); the search stops earlier
#: once a pass moves no boundary.
_MAX_SWEEPS = 4
#: A boundary's candidate places are scored exactly (the assignment itself on both groups) while their
#: number times the files of both groups stays within this; beyond, by the bound on the smallest rank.
_EXACT_BUDGET = 4000
#: Groups with more files than this per rank keep largest-first as it is: the small files have already
#: evened out the ranks, and raising the smallest rank would cost more time than it gains.
_RAISE_MAX_FILES_PER_RANK = 32
#: Rounds of raising the smallest rank per full epoch at most (at most 2*W per group), and at most
#: this divided by W: a round costs about W operations plus numpy's overhead.
_RAISE_ROUNDS = 2048
_RAISE_WORK = 2048 * 256
#: Files of the most loaded ranks that one round considers moving, and the largest number of
#: (file, file) pairs it considers swapping.
_RAISE_CANDIDATES = 128
_RAISE_SWAP_PAIRS = 65536


def check_max_sub_epoch_deviation(value) -> float:
    """``value`` as a float if it is a valid bound on the sub-epoch sizes, else ``TypeError``/``ValueError``.

    >>> check_max_sub_epoch_deviation(1.0)
    Traceback (most recent call last):
    ...
    ValueError: max_sub_epoch_deviation=1.0 must be in [0, 1): the share by which a sub-epoch may be larger or smaller than the mean sub-epoch, e.g. 0.25 for +-25%
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"max_sub_epoch_deviation={value!r} must be a float, e.g. 0.25 for +-25% around the mean sub-epoch size"
        )
    value = float(value)
    if not 0.0 <= value < 1.0:  # also rejects nan
        raise ValueError(
            f"max_sub_epoch_deviation={value!r} must be in [0, 1): the share by which a sub-epoch "
            "may be larger or smaller than the mean sub-epoch, e.g. 0.25 for +-25%"
        )
    return value


def file_frames(file_lengths: Sequence[np.ndarray]) -> np.ndarray:
    """Frames of each file (the first data key of its sequence lengths, shape [num_seqs] or [num_seqs, num_keys]),
    int64 shape [num_files]: one sum over all files' lengths, not one per file.

    >>> file_frames([np.array([2, 3]), np.zeros(0, dtype=np.int64), np.array([[4, 1]])]).tolist()
    [5, 0, 4]
    """
    first = [x if x.ndim == 1 else x[:, 0] for x in map(np.asarray, file_lengths)]
    if not first:
        return np.zeros(0, dtype=np.int64)
    num_seqs = np.fromiter(map(len, first), dtype=np.int64, count=len(first))
    cum = np.concatenate([[0], np.cumsum(np.concatenate(first), dtype=np.int64)])
    ends = np.cumsum(num_seqs)
    return cum[ends] - cum[ends - num_seqs]


def sub_epoch_size_range(total: int, *, partition_epoch: int, max_sub_epoch_deviation: float) -> Tuple[int, int]:
    """The sizes a sub-epoch may have: ``[ceil((1-d)*mean), floor((1+d)*mean)]`` with ``mean =
    total / partition_epoch``, computed exactly (``d`` as the exact binary value of the float, the
    same on every machine).

    >>> sub_epoch_size_range(1000, partition_epoch=3, max_sub_epoch_deviation=0.25)
    (250, 416)
    """
    dev = Fraction(check_max_sub_epoch_deviation(max_sub_epoch_deviation))
    mean = Fraction(int(total), int(partition_epoch))
    low, high = (1 - dev) * mean, (1 + dev) * mean
    return -((-low.numerator) // low.denominator), high.numerator // high.denominator


def distribute_flexible(
    sizes: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    max_sub_epoch_deviation: float = DEFAULT_MAX_SUB_EPOCH_DEVIATION,
) -> Tuple[np.ndarray, np.ndarray]:
    """Bins of one full epoch for the files in the given (shuffled) order, with sub-epochs of
    flexible size, chosen with the per-rank bins to drop as little as possible when each sub-epoch
    ends at its first rank out of data.

    As in :func:`~i6_shard.core.pure.balanced.distribute_balanced`, each sub-epoch is a contiguous
    group of the given order (so its files are a random sample of the corpus), and bin ``r*P + s``
    is what rank r reads in sub-epoch s. Unlike there, the groups need not be equal:

    1. the group boundaries move, starting from the balanced split's cut
       (:func:`~i6_shard.core.pure.balanced.group_bounds`), so that a group holding a file larger
       than a rank's equal share grows until the other ranks can be filled up to that file, and
       other groups shrink; every group stays within ``max_sub_epoch_deviation`` of the mean
       (:func:`sub_epoch_size_range`), see :func:`search_cut`;
    2. each group's files go to the ranks largest first; then, while it helps and for groups of at
       most 32 files per rank, a file of one of the most loaded ranks is moved to the least loaded
       rank, or swapped with one of its files, whichever raises the smaller of the two the most.

    The result is compared exactly (integer sums, fractions) with the balanced split of the same
    input, by the dropped share of the full epoch, the sum over sub-epochs of ``1 - W*min/sum``,
    and the balanced split is returned unless the new one drops strictly less. So it never drops
    more than ``distribute_balanced`` (nor than RETURNN's own cut); when the balanced split is
    returned, its sub-epoch sizes are the balanced split's.

    Bounds: each sub-epoch of the new split has a size within the range, or, where a group of the
    starting cut is outside it (a file beyond the range on its own), no farther outside; its
    smallest rank holds at least ``(3W-1)/(4W-2)`` of what the best assignment of that group's files
    could give it (the largest-first bound for the largest minimum, Csirik, Kellerer and Woeginger 1992;
    step 2 only raises the smallest rank).

    All ranks compute the same bins: integer sums, exact fractions, stable sorts, and the search
    scores candidates with float64 element-wise operations only (no reductions, no transcendental
    functions), which IEEE 754 rounds the same on every machine.

    :param sizes: int64 costs in the (shuffled) order, shape [num_files]
    :param num_shards: W, the number of ranks
    :param partition_epoch: P, sub-epochs per full epoch
    :param max_sub_epoch_deviation: d in [0, 1): sub-epoch sizes stay within ``(1 +- d) * total / P``
    :return: ``(order, bounds)``: int64 positions into ``sizes``, shape [num_files], grouped bin by bin,
        and int64 boundaries, shape [W*P + 1]; bin b is ``order[bounds[b]:bounds[b+1]]``
    :raises ValueError: if there are fewer than W*P files (some bin would be empty), or for a bad ``d``

    >>> sizes = np.array([1, 6] + [1] * 13)  # 20 bytes; the 6 is beyond a rank's share of a sub-epoch (5)
    >>> from i6_shard.core.pure.balanced import distribute_balanced
    >>> order, bounds = distribute_balanced(sizes, num_shards=2, partition_epoch=2)
    >>> np.add.reduceat(sizes[order], bounds[:-1]).reshape(2, 2).T.tolist()  # [sub-epoch][rank]: 1 - 8/10 dropped
    [[6, 4], [5, 5]]
    >>> order, bounds = distribute_flexible(sizes, num_shards=2, partition_epoch=2)
    >>> np.add.reduceat(sizes[order], bounds[:-1]).reshape(2, 2).T.tolist()  # sub-epochs of 12 and 8: none dropped
    [[6, 6], [4, 4]]
    """
    sizes = check_costs(sizes)
    num_files = int(sizes.shape[0])
    check_enough_files(num_files, num_shards=num_shards, partition_epoch=partition_epoch)
    num_shards, partition_epoch = int(num_shards), int(partition_epoch)
    check_max_sub_epoch_deviation(max_sub_epoch_deviation)
    today_order, today_bounds, today_loss, tried = _balanced_split(
        sizes, num_shards=num_shards, partition_epoch=partition_epoch
    )
    if today_loss == 0:  # nothing to gain (also: one rank)
        return today_order, today_bounds
    cut, groups, loss = _flexible_groups(
        sizes,
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        max_sub_epoch_deviation=max_sub_epoch_deviation,
        tried=tried,
    )
    if loss < today_loss:
        return _bins_from_groups(cut, groups, num_shards=num_shards, partition_epoch=partition_epoch)
    return today_order, today_bounds


def _flexible_groups(
    sizes: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    max_sub_epoch_deviation: float,
    tried: Dict[Tuple[int, int], tuple],
) -> Tuple[np.ndarray, list, Fraction]:
    """Steps 1 and 2 of :func:`distribute_flexible` with bound ``max_sub_epoch_deviation``: ``(cut, groups,
    loss)``, the group boundaries, each group's assignment and the exact sum over sub-epochs of ``1 - W*min/sum``.
    ``tried``: largest-first assignments already made, by ``(start, end)`` (read only)."""
    low, high = sub_epoch_size_range(
        int(sizes.sum()), partition_epoch=partition_epoch, max_sub_epoch_deviation=max_sub_epoch_deviation
    )
    start = group_bounds(sizes, num_groups=partition_epoch, min_group_size=num_shards)
    cut = search_cut(sizes, start, num_shards=num_shards, low=low, high=high)
    rounds = _raise_rounds(num_shards, partition_epoch)
    groups = [
        _assign(sizes, int(cut[s]), int(cut[s + 1]), num_shards=num_shards, rounds=rounds, known=tried)
        for s in range(partition_epoch)
    ]
    return cut, groups, sum((_dropped(loads, num_shards) for _, _, loads in groups), Fraction(0))


def _raise_rounds(num_shards: int, partition_epoch: int) -> int:
    """Rounds of raising the smallest rank per group: :data:`_RAISE_ROUNDS` per full epoch, and at most
    :data:`_RAISE_WORK` divided by W, shared by the P groups."""
    return max(1, min(_RAISE_ROUNDS, _RAISE_WORK // num_shards) // partition_epoch)


def distribute_flexible_auto(
    sizes: np.ndarray, *, num_shards: int, partition_epoch: int, max_sub_epoch_deviation: Optional[float] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """Bins of one full epoch like :func:`distribute_flexible`, with the bound on the sub-epoch sizes chosen
    for the full epoch: the balanced split and the flexible split at each bound of :data:`AUTO_DEVIATIONS`
    are made, and the first of them, in that order (the most regular sizes first), that drops at most
    :data:`AUTO_TOLERANCE` per sub-epoch (0.1 point of the mean) more than the best of them is returned.

    The flexible search is local, so a larger bound can drop more than a smaller one; choosing among
    the bounds makes the result at most the tolerance above every one of them, and above the balanced
    split (all compared exactly, by the sum over sub-epochs of ``1 - W*min/sum`` of the costs). With costs
    in expected steps (a ``steps`` costs archive) that sum is the ranks' imbalance in steps.

    Where every sub-epoch has at most 32 files per rank, single files then move between the sub-epochs of
    the full epoch while that lowers the sum (:func:`_move_files`), within the chosen bound (0.1 for the
    balanced split): two large files that contiguous sub-epochs cannot both hold can then share one. Such a
    sub-epoch is no longer a contiguous part of the shuffled order; every file is still read once per full
    epoch, and the files of a bin keep the shuffled order. A sub-epoch's size stays within 0.9 of the mean,
    or no farther outside than in the balanced split.

    :param sizes: int64 costs in the (shuffled) order, shape [num_files]
    :param max_sub_epoch_deviation: None: choose among all of :data:`AUTO_DEVIATIONS`; else only among those up to
        it (or it alone, below the first), and files move between sub-epochs within it
    :return: ``(order, bounds)`` as :func:`distribute_flexible` returns them

    >>> sizes = np.array([1, 1, 14] + [1] * 24)  # 40; the 14 needs a sub-epoch of 28, 1.4 times the mean
    >>> order, bounds = distribute_flexible(sizes, num_shards=2, partition_epoch=2)  # +-25%: at most 25
    >>> np.add.reduceat(sizes[order], bounds[:-1]).reshape(2, 2).T.tolist()  # [sub-epoch][rank]
    [[14, 10], [8, 8]]
    >>> order, bounds = distribute_flexible_auto(sizes, num_shards=2, partition_epoch=2)  # +-50% drops nothing
    >>> np.add.reduceat(sizes[order], bounds[:-1]).reshape(2, 2).T.tolist()
    [[14, 14], [6, 6]]
    """
    sizes = check_costs(sizes)
    check_enough_files(int(sizes.shape[0]), num_shards=num_shards, partition_epoch=partition_epoch)
    num_shards, partition_epoch = int(num_shards), int(partition_epoch)
    today_order, today_bounds, today_loss, tried = _balanced_split(
        sizes, num_shards=num_shards, partition_epoch=partition_epoch
    )
    if today_loss == 0:
        return today_order, today_bounds
    deviations = _auto_deviations(max_sub_epoch_deviation)
    candidates = [(today_loss, None, deviations[0])]
    for deviation in deviations:
        cut, groups, loss = _flexible_groups(
            sizes,
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            max_sub_epoch_deviation=deviation,
            tried=tried,
        )
        candidates.append((loss, (cut, groups), deviation))
        if loss == 0:
            break
    limit = min(c[0] for c in candidates) + AUTO_TOLERANCE * partition_epoch
    loss, chosen, deviation = next(c for c in candidates if c[0] <= limit)
    if chosen is None:
        bins = today_order, today_bounds
        members = [
            np.sort(
                np.concatenate(
                    [
                        today_order[today_bounds[r * partition_epoch + s] : today_bounds[r * partition_epoch + s + 1]]
                        for r in range(num_shards)
                    ]
                )
            )
            for s in range(partition_epoch)
        ]
    else:
        bins = None  # made from the chosen groups only where they are returned
        members = [np.arange(chosen[0][s], chosen[0][s + 1], dtype=np.int64) for s in range(partition_epoch)]
    if loss > 0 and max(len(m) for m in members) <= _RAISE_MAX_FILES_PER_RANK * num_shards:
        # few files per rank (with more, the small ones even the ranks out already): move files
        low, high = sub_epoch_size_range(
            int(sizes.sum()), partition_epoch=partition_epoch, max_sub_epoch_deviation=deviation
        )  # the chosen bound (balanced: 0.1)
        members, groups, moved_loss = _move_files(
            sizes, members, num_shards=num_shards, rounds=_raise_rounds(num_shards, partition_epoch), low=low, high=high
        )
        if moved_loss < loss:
            return _bins_from_groups(
                None, groups, num_shards=num_shards, partition_epoch=partition_epoch, members=members
            )
    return bins or _bins_from_groups(chosen[0], chosen[1], num_shards=num_shards, partition_epoch=partition_epoch)


def _auto_deviations(bound: Optional[float]) -> Tuple[float, ...]:
    """The bounds ``distribute_flexible_auto`` chooses among: :data:`AUTO_DEVIATIONS` up to ``bound`` (None: all), or
    ``bound`` alone where it is below them all.

    >>> _auto_deviations(0.3), _auto_deviations(0.05)
    ((0.1, 0.25), (0.05,))
    """
    if bound is None:
        return AUTO_DEVIATIONS
    bound = check_max_sub_epoch_deviation(bound)
    return tuple(d for d in AUTO_DEVIATIONS if d <= bound) or (bound,)


def _move_files(
    sizes: np.ndarray, members: List[np.ndarray], *, num_shards: int, rounds: int, low: int, high: int
) -> Tuple[List[np.ndarray], list, Fraction]:
    """Move single files between the sub-epochs of a full epoch while that lowers the exact sum over
    sub-epochs of ``1 - W*min/sum``: ``(members, groups, loss)``, the sorted positions of each sub-epoch, their
    assignments (:func:`_assign_array`, positions into the sub-epoch) and that sum.

    A round looks at the sub-epochs that drop something, most first, and stops at the first with a move that
    lowers the sum; it applies the move that lowers it most. The moves it tries for sub-epoch g: each other
    sub-epoch's :data:`_MOVE_CANDIDATES` largest files no larger than g's spread (its fullest rank minus its
    emptiest), into g; and g's largest file into each other sub-epoch. A sub-epoch keeps at least W files and
    a size within ``[low, high]``, or no farther outside than it was. At most :data:`_MOVE_ROUNDS_PER_SUB_EPOCH`
    times P rounds, within :data:`_MOVE_WORK` (files assigned, plus a fixed cost per assignment); ties go to
    the first move found, so every rank moves the same files."""
    members = [np.asarray(m, dtype=np.int64) for m in members]
    num_groups = len(members)
    groups = [_assign_array(sizes[m], num_shards=num_shards, rounds=rounds) for m in members]
    losses = [_dropped(g[2], num_shards) for g in groups]
    sums = [int(sizes[m].sum()) for m in members]
    budget = _MOVE_WORK

    def allowed(new: int, old: int) -> bool:
        return min(low, old) <= new <= max(high, old)

    for _ in range(_MOVE_ROUNDS_PER_SUB_EPOCH * num_groups):
        best = None
        for g in sorted(range(num_groups), key=lambda s: (-losses[s], s)):
            if losses[g] == 0 or budget <= 0:
                break
            loads = groups[g][2]
            spread = int(loads.max()) - int(loads.min())
            moves = []
            for h in range(num_groups):
                if h != g:
                    costs = sizes[members[h]]
                    fits = np.flatnonzero(costs <= spread)
                    picked = fits[np.argsort(-costs[fits], kind="stable")[:_MOVE_CANDIDATES]]
                    moves.extend((h, g, int(members[h][i])) for i in picked.tolist())
            largest = int(members[g][int(np.argmax(sizes[members[g]]))])
            moves.extend((g, h, largest) for h in range(num_groups) if h != g)
            for src, dst, x in moves:
                cost = int(sizes[x])
                if (
                    len(members[src]) <= num_shards
                    or budget <= 0
                    or not (allowed(sums[src] - cost, sums[src]) and allowed(sums[dst] + cost, sums[dst]))
                ):
                    continue
                new_src = members[src][members[src] != x]
                new_dst = np.insert(members[dst], int(np.searchsorted(members[dst], x)), x)
                src_group = _assign_array(sizes[new_src], num_shards=num_shards, rounds=rounds)
                dst_group = _assign_array(sizes[new_dst], num_shards=num_shards, rounds=rounds)
                budget -= len(new_src) + len(new_dst) + 2 * _MOVE_WORK_PER_ASSIGNMENT
                src_loss, dst_loss = _dropped(src_group[2], num_shards), _dropped(dst_group[2], num_shards)
                gain = losses[src] + losses[dst] - src_loss - dst_loss
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, src, dst, cost, new_src, new_dst, src_group, dst_group, src_loss, dst_loss)
            if best is not None:
                break
        if best is None:
            break
        _, src, dst, cost, new_src, new_dst, src_group, dst_group, src_loss, dst_loss = best
        members[src], members[dst], groups[src], groups[dst] = new_src, new_dst, src_group, dst_group
        losses[src], losses[dst] = src_loss, dst_loss
        sums[src], sums[dst] = sums[src] - cost, sums[dst] + cost
    return members, groups, sum(losses, Fraction(0))


def search_cut(sizes: np.ndarray, start: np.ndarray, *, num_shards: int, low: int, high: int) -> np.ndarray:
    """Group boundaries after the local search of :func:`distribute_flexible`, from ``start``.

    In passes over the boundaries (forwards, then backwards, up to 4, until one moves none), each
    boundary moves to the place between its neighbours where its two groups keep the most, if
    that is strictly more than where it is. For small groups (few places times few files) "keep"
    is exact: the largest-first assignment is made for every place. Otherwise it is the bound ``W*U/S``,
    with ``S`` the group's size and ``U = min over k of (S - its k largest files) / (W - k)``
    (k < W, k <= 4): no assignment's smallest rank can hold more than ``U``.

    Every group keeps at least ``num_shards`` files, and its size stays within ``[low, high]``, or,
    for a group of ``start`` outside that range, no farther outside than in ``start``.

    :param sizes: int64 costs in order, shape [num_files]
    :param start: int64 boundaries, shape [P + 1], first 0 and last num_files
    :return: int64 boundaries, shape [P + 1]

    >>> sizes = np.array([1, 6] + [1] * 13)  # the first group, with the 6, grows from 10 to 12 (6 | 6)
    >>> search_cut(sizes, np.array([0, 5, 15]), num_shards=2, low=8, high=12).tolist()
    [0, 7, 15]
    """
    cut = np.array(start, dtype=np.int64)
    num_groups = len(cut) - 1
    prefix = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=prefix[1:])
    group_sizes = np.diff(prefix[cut])
    lows, highs = np.minimum(group_sizes, low), np.maximum(group_sizes, high)
    top_k = min(num_shards - 1, _TOP_K)
    exact: Dict[Tuple[int, int], Fraction] = {}  # (start, end) -> dropped share of largest-first, once computed
    for sweep in range(_MAX_SWEEPS):
        moved = False
        for j in range(1, num_groups) if sweep % 2 == 0 else range(num_groups - 1, 0, -1):
            best = _best_boundary(
                sizes,
                prefix,
                int(cut[j - 1]),
                int(cut[j]),
                int(cut[j + 1]),
                left_range=(int(lows[j - 1]), int(highs[j - 1])),
                right_range=(int(lows[j]), int(highs[j])),
                num_shards=num_shards,
                top_k=top_k,
                exact=exact,
            )
            if best != cut[j]:
                cut[j] = best
                moved = True
        if not moved:
            break
    return cut


def _best_boundary(
    sizes: np.ndarray,
    prefix: np.ndarray,
    a: int,
    x0: int,
    e: int,
    *,
    left_range: Tuple[int, int],
    right_range: Tuple[int, int],
    num_shards: int,
    top_k: int,
    exact: Dict[Tuple[int, int], Fraction],
) -> int:
    """Where the boundary between groups [a, x) and [x, e) goes: the allowed x whose groups keep the
    most; ``x0`` unless another x keeps strictly more (ties: the first such x)."""
    qa, qe = int(prefix[a]), int(prefix[e])
    q_min = max(qa + left_range[0], qe - right_range[1])
    q_max = min(qa + left_range[1], qe - right_range[0])
    window = prefix[a : e + 1]
    x_min = max(a + num_shards, a + int(np.searchsorted(window, q_min, side="left")))
    x_max = min(e - num_shards, a + int(np.searchsorted(window, q_max, side="right")) - 1)
    assert x_min <= x0 <= x_max, "the current boundary is always allowed"
    if x_min == x_max:
        return x0
    if (x_max - x_min + 1) * (e - a) <= _EXACT_BUDGET:
        return _best_boundary_exact(sizes, a, x0, e, x_min, x_max, num_shards=num_shards, exact=exact)
    xs = prefix[x_min : x_max + 1]
    seg = sizes[x_min:x_max]
    left_tops = _running_top_k(_top_k_of(sizes[a:x_min], top_k), seg, top_k)
    right_tops = _running_top_k(_top_k_of(sizes[x_max:e], top_k), seg[::-1], top_k)[:, ::-1]
    kept = _kept_bound(xs - qa, left_tops, num_shards) + _kept_bound(qe - xs, right_tops, num_shards)
    best = int(np.argmax(kept))
    return x_min + best if kept[best] > kept[x0 - x_min] else x0


def _best_boundary_exact(
    sizes: np.ndarray,
    a: int,
    x0: int,
    e: int,
    x_min: int,
    x_max: int,
    *,
    num_shards: int,
    exact: Dict[Tuple[int, int], Fraction],
) -> int:
    """Like :func:`_best_boundary`, scoring each x by the exact dropped share of largest-first on both
    groups (kept in ``exact`` by (start, end) across calls)."""

    def group_loss(lo: int, hi: int) -> Fraction:
        if (lo, hi) not in exact:
            exact[lo, hi] = _dropped(_assign_group(sizes[lo:hi], num_shards=num_shards)[2], num_shards)
        return exact[lo, hi]

    def loss(x: int) -> Fraction:
        return group_loss(a, x) + group_loss(x, e)

    best_x, best_loss = x0, loss(x0)
    for x in range(x_min, x_max + 1):
        if x != x0:
            cand = loss(x)
            if cand < best_loss:
                best_x, best_loss = x, cand
    return best_x


def _top_k_of(values: np.ndarray, k: int) -> np.ndarray:
    """The k largest of ``values``, largest first, padded with zeros; shape [k]."""
    out = np.zeros(k, dtype=np.int64)
    if values.size > k:
        values = np.partition(values, values.size - k)[values.size - k :]
    out[: values.size] = np.sort(values)[::-1]
    return out


def _running_top_k(initial: np.ndarray, seg: np.ndarray, k: int) -> np.ndarray:
    """The k largest of ``initial`` and ``seg[:i]``, for i = 0..len(seg); shape [k, len(seg) + 1].

    The j-th largest after i values is the max over i' < i of min(seg[i'], (j-1)-th largest before
    i'), and of the j-th largest of ``initial``: one cumulative maximum per j."""
    out = np.empty((k, seg.size + 1), dtype=np.int64)
    prev = None  # the (j-1)-th largest before each position; +infinity for j = 1
    for j in range(k):
        cand = seg if prev is None else np.minimum(seg, prev[:-1])
        out[j, 0] = initial[j]
        np.maximum.accumulate(np.maximum(cand, initial[j]), out=out[j, 1:])
        prev = out[j]
    return out


def _kept_bound(group_sizes: np.ndarray, tops: np.ndarray, num_shards: int) -> np.ndarray:
    """Per candidate: ``W * U / S`` (1 for S = 0) with ``U = min over k of (S - top k sum) / (W - k)``."""
    s = group_sizes.astype(np.float64)
    bound = s / num_shards
    taken = np.zeros_like(s)
    for k in range(tops.shape[0]):
        taken = taken + tops[k]
        bound = np.minimum(bound, (s - taken) / (num_shards - k - 1))
    return np.divide(bound * num_shards, s, out=np.ones_like(s), where=s > 0)


def _assign(
    sizes: np.ndarray, a: int, b: int, *, num_shards: int, rounds: int, known: Dict[Tuple[int, int], tuple] = None
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 2 on group [a, b): largest first (taken from ``known`` if computed already), then
    :func:`_raise_smallest`; returns what ``_assign_group`` returns (positions by rank, rank starts, loads)."""
    return _assign_array(sizes[a:b], num_shards=num_shards, rounds=rounds, lpt=(known or {}).get((a, b)))


def _assign_array(
    group: np.ndarray, *, num_shards: int, rounds: int, lpt: Optional[tuple] = None
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 2 on the files ``group`` (their costs): largest first (``lpt`` if computed already), then
    :func:`_raise_smallest`; returns what ``_assign_group`` returns, positions into ``group``."""
    lpt = lpt or _assign_group(group, num_shards=num_shards)
    by_rank, rank_starts, loads = lpt
    if _dropped(loads, num_shards) == 0 or len(group) > _RAISE_MAX_FILES_PER_RANK * num_shards:
        return lpt
    rank = np.empty(len(group), dtype=np.int64)
    rank[by_rank] = np.repeat(np.arange(num_shards, dtype=np.int64), np.diff(rank_starts))
    members = [by_rank[int(rank_starts[q]) : int(rank_starts[q + 1])].tolist() for q in range(num_shards)]
    if not _raise_smallest(group, rank, loads.copy(), members, rounds=min(rounds, 2 * num_shards)):
        return lpt
    # A stable sort of small ints is a radix sort in numpy: keep the rank narrow.
    by_rank = np.argsort(
        rank.astype(np.int16 if num_shards <= np.iinfo(np.int16).max else np.int32), kind="stable"
    ).astype(np.int64, copy=False)
    rank_starts = np.zeros(num_shards + 1, dtype=np.int64)
    np.cumsum(np.bincount(rank, minlength=num_shards), out=rank_starts[1:])
    assert int(np.diff(rank_starts).min()) >= 1, "every rank has a file"
    return by_rank, rank_starts, np.add.reduceat(group[by_rank], rank_starts[:-1])


def _raise_smallest(sizes: np.ndarray, rank: np.ndarray, loads: np.ndarray, members: list, *, rounds: int) -> bool:
    """Raise the least loaded rank, in place, for up to ``rounds`` rounds: each round moves one file of
    the most loaded ranks (up to 128 files, most loaded rank first) to the least loaded rank r, or swaps
    it with one of r's files, whichever leaves the larger of the two ranks' smaller loads; it stops when
    no move or swap raises r. A rank never empties (its load stays above r's). ``rank`` (per file),
    ``loads`` (per rank) and ``members`` (per rank, a list of its files) change together. Returns whether
    any file moved.

    >>> sizes, rank, loads = np.array([4, 3, 3, 2]), np.array([0, 1, 1, 0]), np.array([6, 6])
    >>> _raise_smallest(sizes, rank, loads, [[0, 3], [1, 2]], rounds=4), rank.tolist()  # nothing raises rank 0
    (False, [0, 1, 1, 0])
    >>> sizes, rank, loads = np.array([4, 3, 2, 1]), np.array([0, 1, 1, 1]), np.array([4, 6])
    >>> _raise_smallest(sizes, rank, loads, [[0], [1, 2, 3]], rounds=4), rank.tolist(), loads.tolist()
    (True, [0, 1, 1, 0], [5, 5])
    """
    num_shards = len(loads)
    changed = False
    for _ in range(rounds):
        r = int(np.argmin(loads))
        low = int(loads[r])
        cand = []
        for q in _most_loaded(loads, min(num_shards, _RAISE_CANDIDATES + 1)).tolist():
            if q != r:
                cand.extend(members[q])
                if len(cand) >= _RAISE_CANDIDATES:
                    break
        cand = np.array(cand, dtype=np.int64)
        f, above = sizes[cand], loads[rank[cand]]
        moved = np.minimum(low + f, above - f)  # the smaller of the two loads after moving file f to r
        k = int(np.argmax(moved))
        best, give, take = int(moved[k]), int(cand[k]), -1
        mine = members[r]
        if len(mine) * cand.size <= _RAISE_SWAP_PAIRS:
            diff = f[None, :] - sizes[np.array(mine, dtype=np.int64)][:, None]  # [r's file, candidate]
            swapped = np.minimum(low + diff, above[None, :] - diff)
            flat = int(np.argmax(swapped))
            if int(swapped.flat[flat]) > best:
                best, give, take = int(swapped.flat[flat]), int(cand[flat % cand.size]), mine[flat // cand.size]
        if best <= low:
            break
        q = int(rank[give])
        members[q].remove(give)
        members[r].append(give)
        rank[give] = r
        loads[q] -= sizes[give]
        loads[r] += sizes[give]
        if take >= 0:
            members[r].remove(take)
            members[q].append(take)
            rank[take] = q
            loads[r] -= sizes[take]
            loads[q] += sizes[take]
        changed = True
    return changed


def _most_loaded(loads: np.ndarray, k: int) -> np.ndarray:
    """The k most loaded ranks, most loaded first (ties: lower index first), as a stable sort by
    descending load would give them, in O(W): only the k-th largest load is selected, a value.

    >>> _most_loaded(np.array([3, 5, 3, 1, 5]), 3).tolist()
    [1, 4, 0]
    """
    if k >= len(loads):
        return np.argsort(-loads, kind="stable")
    threshold = np.partition(loads, len(loads) - k)[len(loads) - k]  # the k-th largest load
    above = np.flatnonzero(loads > threshold)
    at = np.flatnonzero(loads == threshold)[: k - len(above)]
    top = np.concatenate([above, at])
    return top[np.lexsort((top, -loads[top]))]

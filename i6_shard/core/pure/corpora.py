"""Corpora mixed by weight in one plan: how often each file is read in each full epoch (the integer part of its
corpus's weight every time, the fraction rotating through the corpus), and bins that read no file twice in a
sub-epoch."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .text import short_repr

__all__ = ["Corpora"]


def exact_weight(weight: Any, *, name: str) -> Fraction:
    """``weight`` as an exact fraction (a float as written: 0.1 is 1/10), refused unless a finite number >= 0.

    >>> exact_weight(2.5, name="weights[1]"), exact_weight("1/3", name="w")
    (Fraction(5, 2), Fraction(1, 3))
    >>> exact_weight(-1, name="weights[0]")
    Traceback (most recent call last):
    ...
    ValueError: weights[0]=-1 is negative: a corpus is read weight x its files per full epoch, so give a weight >= 0
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float, str, Fraction)):
        raise TypeError(f"{name}={short_repr(weight)} is not a number: give e.g. 1, 2.5 or '1/3'")
    try:
        value = Fraction(str(weight)) if isinstance(weight, (float, str)) else Fraction(weight)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{name}={short_repr(weight)} is not a finite number: give e.g. 1, 2.5 or '1/3'") from None
    if value < 0:
        raise ValueError(
            f"{name}={short_repr(weight)} is negative: a corpus is read weight x its files per full epoch, so give "
            "a weight >= 0"
        )
    return value


def weight_text(weight: Fraction) -> str:
    """A weight as written back: an int, a finite decimal, or ``p/q``.

    >>> [weight_text(Fraction(w)) for w in (2, "2.5", "1/3")]
    ['2', '2.5', '1/3']
    """
    if weight.denominator == 1:
        return str(weight.numerator)
    den = weight.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return str(float(weight)) if den == 1 else f"{weight.numerator}/{weight.denominator}"


@dataclass(frozen=True)
class Corpora:
    """Several corpora in one plan, one after the other in its key order, each read by its weight.

    :ivar names: one name per corpus
    :ivar starts: int, shape [num_corpora + 1]: corpus c is the plan's files ``starts[c]:starts[c+1]``
    :ivar weights: exact weights >= 0 (:func:`exact_weight`), one per corpus

    >>> c = Corpora.of(names=["A", "B"], sizes=[2, 2], weights=[1, 2.5])
    >>> [c.reads(full_epoch_0idx=k, rotation=[np.arange(2)] * 2).tolist() for k in range(2)]
    [[1, 1, 3, 2], [1, 1, 2, 3]]
    """

    names: Tuple[str, ...]
    starts: Tuple[int, ...]
    weights: Tuple[Fraction, ...]

    @classmethod
    def of(cls, *, names: Sequence[str], sizes: Sequence[int], weights: Sequence[Any]) -> "Corpora":
        """Corpora of ``sizes`` files each (checked: one name and one weight each, names distinct)."""
        names, sizes = [str(n) for n in names], [int(s) for s in sizes]
        if not (len(names) == len(sizes) == len(weights)) or not names:
            raise ValueError(
                f"{len(sizes)} corpora, {len(names)} corpus names and {len(weights)} weights: give one name and one "
                "weight per corpus (--sizes, --corpus-names, --weights in the same order)"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"corpus names {names} repeat a name: give each corpus its own (--corpus-names)")
        exact = tuple(exact_weight(w, name=f"weights[{i}] ({names[i]})") for i, w in enumerate(weights))
        return cls(tuple(names), tuple(np.cumsum([0] + sizes).tolist()), exact)

    @property
    def num_corpora(self) -> int:
        return len(self.names)

    def size(self, c: int) -> int:
        return self.starts[c + 1] - self.starts[c]

    def corpus_of(self) -> np.ndarray:
        """int64 [num_files]: each file's corpus."""
        return np.repeat(np.arange(self.num_corpora, dtype=np.int64), np.diff(self.starts))

    def reads_per_full_epoch(self, c: int, *, full_epoch_0idx: int) -> int:
        """Reads of corpus ``c`` in a full epoch: after K full epochs ``floor(K * weight * files)`` in all."""
        n, w = self.size(c), self.weights[c]
        return math.floor((full_epoch_0idx + 1) * w * n) - math.floor(full_epoch_0idx * w * n)

    def check(self, *, keys: Sequence[str], num_bins: int, partition_epoch: int, distrib_shard_files: bool) -> None:
        """Refuse, naming the value and the fix, what a weighted plan cannot do."""
        if self.starts[-1] != len(keys):
            raise ValueError(f"the corpora hold {self.starts[-1]} files, the plan {len(keys)}: give each its files")
        if not distrib_shard_files:
            raise ValueError(
                "weights need a sharded plan (distrib_shard_files=True), whose ranks read the plan's bins: drop "
                "--unsharded, or plan one corpus without weights"
            )
        for c, (name, w) in enumerate(zip(self.names, self.weights)):
            n = self.size(c)
            if 0 < w * n < 1:
                raise ValueError(
                    f"corpus {name!r} has {n} files at weight {weight_text(w)}: {weight_text(w * n)} reads per full "
                    f"epoch leave it no file in some full epoch; give it a weight >= {weight_text(Fraction(1, n))} "
                    "(or 0 to leave it out)"
                )
            if w >= partition_epoch and w > 1:
                raise ValueError(
                    f"corpus {name!r} at weight {weight_text(w)} reads a file {math.ceil(w)} times in some full epoch, "
                    f"in {'more than' if w > partition_epoch else 'every one of'} its partition_epoch="
                    f"{partition_epoch} sub-epochs, which the bins' sizes cannot keep apart: give partition_epoch > "
                    f"{weight_text(w)}, or a weight below {partition_epoch}"
                )
        least = sum(math.floor(w * self.size(c)) for c, w in enumerate(self.weights))
        if least < num_bins:
            raise ValueError(
                f"the weighted corpora give {least} reads in some full epoch, fewer than the num_shards*"
                f"partition_epoch={num_bins} bins: raise the weights, or lower partition_epoch"
            )
        self._check_shared_files(keys)

    def _check_shared_files(self, keys: Sequence[str]) -> None:
        corpus = self.corpus_of()
        first: Dict[str, int] = {}
        for i, key in enumerate(keys):
            c = int(corpus[i])
            if key not in first:
                first[key] = c
                continue
            other = first[key]
            if self.weights[other] != self.weights[c] or other == c:
                raise ValueError(
                    f"file {short_repr(key)} is in corpus {self.names[other]!r} (weight "
                    f"{weight_text(self.weights[other])}) and again in {self.names[c]!r} (weight "
                    f"{weight_text(self.weights[c])}): list each file once, in the corpus whose weight it should have"
                )
            raise ValueError(
                f"file {short_repr(key)} is in corpora {self.names[other]!r} and {self.names[c]!r}: list it in one "
                "of them (it would be read by both weights)"
            )

    def reads(self, *, full_epoch_0idx: int, rotation: Sequence[np.ndarray]) -> np.ndarray:
        """int64 [num_files]: how often each file is read in a full epoch. A corpus of n files at weight q + f (q its
        integer part) reads every file q times, and the ``floor((K+1) f n) - floor(K f n)`` files next in its
        ``rotation`` (a permutation of range(n)) once more, going round: after K full epochs every file was read
        ``floor(K f n / n)`` or one more extra times (±1 read at any point)."""
        out = np.empty(self.starts[-1], dtype=np.int64)
        k = int(full_epoch_0idx)
        for c, w in enumerate(self.weights):
            n, q = self.size(c), math.floor(w)
            f = w - q
            counts = np.full(n, q, dtype=np.int64)
            extra = np.arange(math.floor(k * f * n), math.floor((k + 1) * f * n), dtype=np.int64) % max(n, 1)
            counts[np.asarray(rotation[c], dtype=np.int64)[extra]] += 1
            out[self.starts[c] : self.starts[c + 1]] = counts
        return out

    def planned_reads(self, settings: Any, *, full_epoch_0idx: int) -> np.ndarray:
        """:meth:`reads` of a plan with ``settings`` (a :class:`~.settings.PlanSettings`): the fractions rotate in
        an order drawn from the seed of its full epoch 0, or in the list's order under ``seq_ordering="default"``."""
        seed = settings.seed_for(full_epoch_0idx=0) if settings.seq_ordering == "random" else None
        return self.reads(full_epoch_0idx=full_epoch_0idx, rotation=self.rotation(seed=seed))

    def rotation(self, *, seed: Optional[int]) -> List[np.ndarray]:
        """The order in which each corpus's files take the extra reads: shuffled by ``RandomState(seed)`` (None:
        the list's order)."""
        if seed is None:
            return [np.arange(self.size(c), dtype=np.int64) for c in range(self.num_corpora)]
        rng = np.random.RandomState(seed)
        return [rng.permutation(self.size(c)).astype(np.int64) for c in range(self.num_corpora)]

    def record(self) -> Dict[str, Any]:
        """The corpora as a plan file stores them (JSON-able)."""
        return {
            "names": list(self.names),
            "starts": [int(s) for s in self.starts],
            "weights": [weight_text(w) for w in self.weights],
        }

    @classmethod
    def from_record(cls, record: Any) -> "Corpora":
        if not isinstance(record, dict) or set(record) != {"names", "starts", "weights"}:
            raise ValueError(f"corpora record {short_repr(record)} lacks names, starts and weights")
        sizes = np.diff(np.asarray(record["starts"], dtype=np.int64)).tolist()
        if record["starts"][:1] != [0] or any(s < 0 for s in sizes):
            raise ValueError(f"corpora record {short_repr(record)} has starts that are not ascending from 0")
        return cls.of(names=record["names"], sizes=sizes, weights=record["weights"])


def read_order(reads: np.ndarray, *, seed: Optional[int]) -> np.ndarray:
    """int64 file indices of a full epoch's reads, ``reads[i]`` times file i: shuffled by ``RandomState(seed)``,
    or (seed None: the list's order) round by round, every file once before any twice.

    >>> read_order(np.array([2, 1, 2]), seed=None).tolist()
    [0, 1, 2, 0, 2]
    """
    files = np.repeat(np.arange(len(reads), dtype=np.int64), reads)
    if seed is not None:
        return files[np.random.RandomState(seed).permutation(len(files))]
    first = np.repeat(np.cumsum(reads) - reads, reads)
    return files[np.argsort(np.arange(len(files)) - first, kind="stable")]


def separate_repeats(
    files: np.ndarray, costs: np.ndarray, bounds: np.ndarray, *, num_shards: int, partition_epoch: int
) -> np.ndarray:
    """A permutation of the positions of a cut full epoch (``files``: each position's file, grouped bin by bin;
    bin ``r*P + s`` is rank r's sub-epoch s) after which no sub-epoch reads a file twice on any of its ranks: each
    repeat is swapped with the position of the nearest cost in another sub-epoch, of the same rank where one fits
    (the ranks' totals then stay), else of any rank. Bins keep their sizes. ``costs``: each position's cost as cut
    (the search's distances; a swap moves the two files' costs with them).

    :raises ValueError: where no swap fits (too few files per sub-epoch for the repeats)

    >>> separate_repeats(np.array([0, 0, 1, 2]), np.array([5, 5, 4, 6]), np.array([0, 2, 4]), num_shards=1,
    ...                  partition_epoch=2).tolist()
    [3, 1, 2, 0]
    """
    num_bins = num_shards * partition_epoch
    sub = np.repeat(np.arange(num_bins, dtype=np.int64), np.diff(bounds)) % partition_epoch
    rank = np.repeat(np.arange(num_bins, dtype=np.int64), np.diff(bounds)) // partition_epoch
    files = np.asarray(files, dtype=np.int64).copy()
    perm = np.arange(len(files), dtype=np.int64)
    held = [Counter(files[sub == s].tolist()) for s in range(partition_epoch)]
    if all(max(h.values(), default=0) <= 1 for h in held):
        return perm
    costs = np.asarray(costs, dtype=np.int64)
    by_cost = np.argsort(costs, kind="stable")
    sorted_costs = costs[by_cost]
    for p in range(len(files)):
        s, f = int(sub[p]), int(files[p])
        if held[s][f] <= 1:
            continue
        q = _partner(
            p, files=files, sub=sub, rank=rank, held=held, by_cost=by_cost, sorted_costs=sorted_costs, costs=costs
        )
        if q is None:
            raise ValueError(
                f"a full epoch reads some file {held[s][f]} times, and no swap puts its reads in different "
                "sub-epochs: lower the weights or partition_epoch, or give more files"
            )
        t, g = int(sub[q]), int(files[q])
        held[s][f] -= 1
        held[s][g] += 1
        held[t][g] -= 1
        held[t][f] += 1
        files[p], files[q] = g, f
        perm[p], perm[q] = perm[q], perm[p]
    return perm


def _partner(p, *, files, sub, rank, held, by_cost, sorted_costs, costs) -> Optional[int]:
    """The position to swap repeat ``p`` with: nearest in cost, in another sub-epoch that does not hold its file and
    holding a file that ``p``'s sub-epoch does not; the same rank first."""
    s, f, r = int(sub[p]), int(files[p]), int(rank[p])
    centre = int(np.searchsorted(sorted_costs, costs[p]))
    for same_rank in (True, False):
        lo, hi = centre - 1, centre
        while lo >= 0 or hi < len(by_cost):
            pick_hi = hi < len(by_cost) and (
                lo < 0 or abs(int(sorted_costs[hi]) - int(costs[p])) <= abs(int(sorted_costs[lo]) - int(costs[p]))
            )
            q = int(by_cost[hi] if pick_hi else by_cost[lo])
            if pick_hi:
                hi += 1
            else:
                lo -= 1
            t, g = int(sub[q]), int(files[q])
            if t == s or (same_rank and int(rank[q]) != r):
                continue
            if held[t][f] == 0 and held[s][g] == 0:
                return q
    return None


def corpus_costs(
    plan: Any, *, num_epochs: int, layout: Optional[Any] = None
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What each corpus of a plan of corpora by weight gives each (sub-epoch, rank), and its reads per full epoch.

    :param plan: a :class:`~.plan.ShardPlan` with ``corpora`` (sharded)
    :param layout: ``(full_epoch_0idx, shard_index) -> (order, bounds)``, e.g. the stored bins; default
        ``plan.layout``
    :return: ``(costs, files, reads)``: int64 [num_epochs, num_shards, num_corpora] costs (in the plan's unit) and
        file reads of each corpus, and int64 [num_full_epochs, num_corpora] reads per full epoch

    >>> from .plan import ShardPlan; from .settings import PlanSettings
    >>> corpora = Corpora.of(names=["A", "B"], sizes=[2, 2], weights=[1, 1])
    >>> plan = ShardPlan(list("abcd"), [3, 3, 3, 3], PlanSettings(num_shards=1, partition_epoch=2,
    ...                  seq_ordering="default"), corpora=corpora)
    >>> c, f, r = corpus_costs(plan, num_epochs=2); c[:, 0].tolist(), r.tolist()  # A's two files, then B's
    ([[6, 0], [0, 6]], [[2, 2]])
    """
    corpora, p, num_shards = plan.corpora, plan.partition_epoch, plan.num_shards
    corpus_of = corpora.corpus_of()
    num_full = -(-int(num_epochs) // p)
    costs = np.zeros((num_full * p, num_shards, corpora.num_corpora), dtype=np.int64)
    files = np.zeros_like(costs)
    reads = np.zeros((num_full, corpora.num_corpora), dtype=np.int64)
    for k in range(num_full):
        order, bounds = plan.layout(full_epoch_0idx=k) if layout is None else layout(k, 0)
        reads[k] = np.bincount(corpus_of[order], minlength=corpora.num_corpora)
        for b in range(num_shards * p):
            r, s = divmod(b, p)
            part = order[bounds[b] : bounds[b + 1]]
            costs[k * p + s, r] = np.bincount(corpus_of[part], weights=plan.costs[part], minlength=corpora.num_corpora)
            files[k * p + s, r] = np.bincount(corpus_of[part], minlength=corpora.num_corpora)
    return costs[:num_epochs], files[:num_epochs], reads

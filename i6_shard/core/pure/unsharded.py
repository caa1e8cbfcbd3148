"""RETURNN's unsharded mode (every rank shuffles and cuts all files itself) as the report compares it: each rank's
costs per sub-epoch, and the entries that several ranks read, on every rank or, where that would shuffle too
many entries, exactly on a sample of ranks and sub-epochs that the result names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from .args import check_int
from .cut import cut_full_epoch, cut_spec
from .distribute import shuffle_order
from .settings import PlanSettings
from .stats import num_full_epochs_for

#: Entries shuffled (distinct layouts x full epochs x files) up to which every rank and sub-epoch is planned.
#: Above it the first full epoch is planned, on all ranks if that fits, else on evenly spaced ranks that fit
#: (at least 2). At 1M files this plans 33 ranks, about 1 s; every rank at 256 ranks would shuffle 768M entries.
UNSHARDED_EXACT_MAX_ENTRIES = 2**25
#: Bytes of read counts (files x sub-epochs) held at a time; more sub-epochs are counted in blocks.
_COUNTS_MAX_BYTES = 2**28


@dataclass(frozen=True)
class UnshardedStats:
    """What the ranks of an unsharded plan read in sub-epochs ``1..num_epochs`` (all of the asked ones, or the
    first full epoch where sampled), on the ranks in ``ranks`` (all ``num_shards``, or a sample).

    :ivar num_shards: the ranks of the training
    :ivar ranks: int64 [num_sampled]: the ranks planned, ascending
    :ivar num_epochs: the sub-epochs planned, ``1..num_epochs``
    :ivar asked_num_epochs: the sub-epochs asked for (``num_epochs`` unless sampled)
    :ivar bytes: int64 [num_epochs, num_sampled]: the costs rank ``ranks[j]`` reads in sub-epoch e (row e-1)
    :ivar overlap: int64 [num_epochs]: entries read by more than one of the planned ranks in that sub-epoch
    :ivar coverage: float64 [num_epochs]: fraction of entries read by some planned rank in that sub-epoch
    """

    num_shards: int
    ranks: np.ndarray
    num_epochs: int
    asked_num_epochs: int
    bytes: np.ndarray
    overlap: np.ndarray
    coverage: np.ndarray

    @property
    def exact(self) -> bool:
        """Every rank and every asked sub-epoch was planned (nothing sampled)."""
        return len(self.ranks) == self.num_shards and self.num_epochs == self.asked_num_epochs


def sampled_ranks(num_shards: int, *, num_sampled: int) -> np.ndarray:
    """``num_sampled`` ranks of ``num_shards``, evenly spaced from rank 0 (all of them if ``num_sampled`` is as many).

    >>> sampled_ranks(256, num_sampled=4).tolist(), sampled_ranks(3, num_sampled=5).tolist()
    ([0, 64, 128, 192], [0, 1, 2])
    """
    num_shards = check_int(num_shards, name="num_shards", minimum=1)
    num_sampled = min(num_shards, check_int(num_sampled, name="num_sampled", minimum=1))
    return (np.arange(num_sampled, dtype=np.int64) * num_shards) // num_sampled


def compute_unsharded_stats(
    costs: np.ndarray, settings: PlanSettings, *, num_epochs: int, max_entries: Optional[int] = None
) -> UnshardedStats:
    """The costs each rank reads per sub-epoch, and the overlap and coverage of the ranks' reads, of the unsharded
    plan of ``costs`` under ``settings`` (``distrib_shard_files=False``), computed like
    :func:`~i6_shard.core.pure.stats.compute_plan_stats` (the same bins: ``ShardPlan.layout``'s shuffle and cut)
    but one layout at a time, and once for ranks that shuffle with the same seed.

    Every rank shuffles all files, so planning every rank costs ``num_shards * num_files`` per full epoch. Where the
    distinct layouts of the asked full epochs hold more than ``max_entries`` entries, only the first full epoch is
    planned, on every rank if its layouts fit ``max_entries``, else on as many :func:`sampled_ranks` as fit (at
    least 2); the result says which
    (``ranks``, ``num_epochs``, ``exact``), and its figures are exactly those of the planned ranks and sub-epochs.

    :param costs: int64 costs in list order, shape [num_files]
    :param num_epochs: RETURNN's ``num_epochs`` (sub-epochs) to plan; a partial last full epoch counts partially
    :param max_entries: default :data:`UNSHARDED_EXACT_MAX_ENTRIES`

    >>> settings = PlanSettings(num_shards=4, partition_epoch=2, distrib_shard_files=False)
    >>> st = compute_unsharded_stats(np.array([1, 1, 78, 120]), settings, num_epochs=4, max_entries=8)
    >>> st.ranks.tolist(), st.num_epochs, st.exact, st.bytes.tolist()  # 2 ranks of 4 fit, in full epoch 1
    ([0, 2], 2, False, [[120, 120], [80, 80]])
    """
    costs = np.asarray(costs, dtype=np.int64)
    if settings.distrib_shard_files:
        raise ValueError("compute_unsharded_stats plans distrib_shard_files=False; use compute_plan_stats when sharded")
    num_epochs = check_int(num_epochs, name="num_epochs", minimum=1)
    max_entries = UNSHARDED_EXACT_MAX_ENTRIES if max_entries is None else check_int(max_entries, name="max_entries")
    n, part, num_shards = len(costs), settings.partition_epoch, settings.num_shards
    num_full = num_full_epochs_for(num_epochs, partition_epoch=part)
    ranks = np.arange(num_shards, dtype=np.int64)
    planned = num_epochs
    if _num_layouts(settings, ranks, num_full) * num_full * n > max_entries:
        planned, num_full = min(num_epochs, part), 1
        if _num_layouts(settings, ranks, 1) * n > max_entries:
            ranks = sampled_ranks(num_shards, num_sampled=max(2, max_entries // n))
    out_bytes = np.zeros((num_full * part, len(ranks)), dtype=np.int64)
    overlap = np.zeros(num_full * part, dtype=np.int64)
    coverage = np.zeros(num_full * part, dtype=np.float64)
    count_dtype = np.min_scalar_type(len(ranks))  # an entry is read at most once per planned rank
    block = max(1, min(part, _COUNTS_MAX_BYTES // max(n * count_dtype.itemsize, 1) - 1))
    for k in range(num_full):
        num_sub = min(part, planned - k * part)
        for start in range(0, num_sub, block):  # one block, unless the read counts of all sub-epochs are too big
            stop = min(num_sub, start + block)
            counts = _read_counts(costs, settings, ranks, k, sub_epochs=(start, stop), out_bytes=out_bytes)
            overlap[k * part + start : k * part + stop] = np.count_nonzero(counts > 1, axis=0)
            coverage[k * part + start : k * part + stop] = np.count_nonzero(counts, axis=0) / max(n, 1)
    return UnshardedStats(
        num_shards=num_shards,
        ranks=ranks,
        num_epochs=planned,
        asked_num_epochs=num_epochs,
        bytes=out_bytes[:planned],
        overlap=overlap[:planned],
        coverage=coverage[:planned],
    )


def _read_counts(
    costs: np.ndarray,
    settings: PlanSettings,
    ranks: np.ndarray,
    full_epoch_0idx: int,
    *,
    sub_epochs: Tuple[int, int],
    out_bytes: np.ndarray,
) -> np.ndarray:
    """How many of ``ranks`` read each entry in each of the sub-epochs ``range(*sub_epochs)`` (0-based) of full
    epoch ``full_epoch_0idx``, shape [num_files, len(range(*sub_epochs))]; from the first block on, also
    writes each rank's costs per sub-epoch of that full epoch into ``out_bytes`` (rows of the full epoch)."""
    n, part = len(costs), settings.partition_epoch
    start, stop = sub_epochs
    width = stop - start + 1  # the last column counts the entries read outside these sub-epochs
    counts = np.zeros((n, width), dtype=np.min_scalar_type(len(ranks)))
    flat = counts.reshape(-1)
    row_start = np.arange(n, dtype=np.int64) * width
    sub_of = np.empty(n, dtype=np.min_scalar_type(width))
    for columns, order, shuffled_costs, bounds in _layouts(costs, settings, ranks, full_epoch_0idx):
        if start == 0:
            prefix = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(shuffled_costs, out=prefix[1:])
            rows = slice(full_epoch_0idx * part, (full_epoch_0idx + 1) * part)
            out_bytes[rows, columns] = np.diff(prefix[bounds])[:, None]
        sub_of.fill(width - 1)
        sub_of[order[bounds[start] : bounds[stop]]] = np.repeat(
            np.arange(stop - start, dtype=sub_of.dtype), np.diff(bounds[start : stop + 1])
        )
        flat[row_start + sub_of] += len(columns)  # one index per entry: no repeated index within this add
    return counts[:, :-1]


def _seed_key(settings: PlanSettings, *, full_epoch_0idx: int, shard_index: int) -> Optional[int]:
    """What decides a rank's layout in a full epoch: its shuffle seed (None: not shuffled, the same on all ranks)."""
    if settings.seq_ordering != "random":
        return None
    return settings.seed_for(full_epoch_0idx=full_epoch_0idx, shard_index=shard_index)


def _num_layouts(settings: PlanSettings, ranks: np.ndarray, num_full: int) -> int:
    """Distinct layouts of ``ranks`` per full epoch (ranks with the same seed share one), at most over full epoch 0
    and the last (the seeds of a full epoch differ by rank alone, so every full epoch has as many)."""
    return max(
        len({_seed_key(settings, full_epoch_0idx=k, shard_index=int(r)) for r in ranks}) for k in {0, num_full - 1}
    )


def _layouts(
    costs: np.ndarray, settings: PlanSettings, ranks: np.ndarray, full_epoch_0idx: int
) -> Iterator[Tuple[List[int], np.ndarray, np.ndarray, np.ndarray]]:
    """The distinct layouts of full epoch ``full_epoch_0idx`` one at a time, as ``(columns, order, costs[order],
    bounds)``: the columns of ``ranks`` that read it, and its bins as ``ShardPlan.layout`` cuts them (P per rank)."""
    groups: Dict[Optional[int], List[int]] = {}
    for j, r in enumerate(ranks.tolist()):
        groups.setdefault(_seed_key(settings, full_epoch_0idx=full_epoch_0idx, shard_index=r), []).append(j)
    for seed, columns in groups.items():
        order = np.arange(len(costs), dtype=np.int64) if seed is None else shuffle_order(len(costs), seed=seed)
        shuffled_costs = costs[order]
        positions, bounds = cut_full_epoch(
            shuffled_costs,
            num_shards=1,
            partition_epoch=settings.partition_epoch,
            distribution=settings.distribution,
            options=settings.cut_options,
        )
        if cut_spec(settings.distribution).returnns_own:  # RETURNN's cut keeps the shuffled order (positions 0..n-1)
            yield columns, order, shuffled_costs, bounds
        else:
            yield columns, order[positions], shuffled_costs[positions], bounds

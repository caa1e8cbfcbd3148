"""Statistics of a shard plan over a training: files and bytes per (sub-epoch, shard),
balance, expected dropped data, passes per file, and the plan's invariants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from .args import check_int
from .plan import ShardPlan
from .settings import PlanSettings  # noqa: F401 (doctests)


def num_full_epochs_for(num_epochs: int, *, partition_epoch: int) -> int:
    """Full epochs touched by sub-epochs ``1..num_epochs`` (the last one may be partial).

    >>> num_full_epochs_for(41, partition_epoch=20)
    3
    """
    num_epochs = check_int(num_epochs, name="num_epochs", minimum=1, hint="RETURNN's num_epochs counts sub-epochs")
    return -(-num_epochs // check_int(partition_epoch, name="partition_epoch", minimum=1))


def check_layout(
    order: np.ndarray, bounds: np.ndarray, *, num_files: int, num_bins: int, reads: Optional[np.ndarray] = None
) -> None:
    """Raise ``AssertionError`` unless the bins of one full epoch cover every file entry
    exactly once and no bin is empty (what RETURNN asserts with ``assert all(files_per_bin)``).
    ``reads``: int64 [num_files], how often each entry is read instead (corpora by weight).

    >>> check_layout(np.array([1, 0, 2]), np.array([0, 1, 1, 3]), num_files=3, num_bins=3)
    Traceback (most recent call last):
    ...
    AssertionError: bin 1 of 3 is empty
    """
    order = np.asarray(order)
    bounds = np.asarray(bounds)
    num_reads = num_files if reads is None else int(np.sum(reads))
    if order.shape != (num_reads,):
        raise AssertionError(f"order has shape {order.shape}, expected ({num_reads},)")
    if bounds.shape != (num_bins + 1,) or bounds[0] != 0 or bounds[-1] != num_reads:
        raise AssertionError(
            f"bounds {bounds[:3].tolist()}... (shape {bounds.shape}) do not span 0..{num_reads} in {num_bins} bins"
        )
    widths = np.diff(bounds)
    if widths.size and int(widths.min()) < 1:
        empty = int(np.flatnonzero(widths < 1)[0])
        raise AssertionError(f"bin {empty} of {num_bins} is empty")
    counts = np.bincount(order, minlength=num_files) if num_files else np.zeros(0, dtype=np.int64)
    if reads is not None:
        if counts.shape != (num_files,) or not np.array_equal(counts, reads):
            raise AssertionError(
                f"the bins do not read each file as often as its corpus's weight asks "
                f"({int(np.sum(counts < reads))} read less, {int(np.sum(counts > reads))} more)"
            )
        return
    if counts.shape != (num_files,) or (num_files and (counts.min() != 1 or counts.max() != 1)):
        raise AssertionError(
            f"the bins do not cover every file entry exactly once "
            f"({int(np.sum(counts == 0))} missing, {int(np.sum(counts > 1))} repeated)"
        )


def check_no_repeat_in_sub_epochs(order: np.ndarray, bounds: np.ndarray, *, partition_epoch: int) -> None:
    """Raise ``AssertionError`` if some sub-epoch of a sharded full epoch (bins ``r*P + s`` over the ranks r) reads
    a file twice.

    >>> check_no_repeat_in_sub_epochs(np.array([0, 1, 0, 1]), np.array([0, 1, 2, 3, 4]), partition_epoch=2)
    Traceback (most recent call last):
    ...
    AssertionError: sub-epoch 0 reads 1 file(s) twice or more
    """
    order, bounds = np.asarray(order, dtype=np.int64), np.asarray(bounds, dtype=np.int64)
    sub = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds)) % partition_epoch
    for s in range(partition_epoch):
        files = order[sub == s]
        repeated = len(files) - len(np.unique(files))
        if repeated:
            raise AssertionError(f"sub-epoch {s} reads {repeated} file(s) twice or more")


def max_over_mean(bytes_per_shard: np.ndarray) -> np.ndarray:
    """Per row: max over shards / mean over shards; 1.0 for an all-zero row.

    :param bytes_per_shard: shape [num_epochs, num_shards]

    >>> max_over_mean(np.array([[1, 3], [0, 0]])).tolist()
    [1.5, 1.0]
    """
    b = np.asarray(bytes_per_shard)
    mean = b.mean(axis=1)
    return np.divide(b.max(axis=1).astype(np.float64), mean, out=np.ones_like(mean), where=mean > 0)


def dropped_fraction(bytes_per_shard: np.ndarray) -> np.ndarray:
    """Per row: ``1 - num_shards * min / sum``, the share of data beyond the shortest shard's
    length when every shard stops with the first one; 0.0 for an all-zero row.

    :param bytes_per_shard: shape [num_epochs, num_shards]

    >>> dropped_fraction(np.array([[1, 3], [0, 0]])).tolist()
    [0.5, 0.0]
    """
    b = np.asarray(bytes_per_shard)
    total = b.sum(axis=1).astype(np.float64)
    kept = b.shape[1] * b.min(axis=1).astype(np.float64)
    return 1.0 - np.divide(kept, total, out=np.ones_like(total), where=total > 0)


@dataclass(frozen=True)
class PlanStats:
    """What a plan does over ``num_epochs`` sub-epochs (RETURNN's ``num_epochs``).

    The plan's costs stand in for sequence lengths: bytes, as in RETURNN's own balancing, or the
    frames or sequences of a costs archive (``unit``).

    :ivar bytes: int64, shape [num_epochs, num_shards]: the costs (in ``unit``; bytes by default) rank r
        reads in sub-epoch e (row e-1)
    :ivar files: int64, shape [num_epochs, num_shards]: number of file entries, likewise
    :ivar passes: int64, shape [num_files]: how often each file entry is scheduled over the training,
        summed over ranks
    :ivar overlap: int64, shape [num_epochs]: entries read by more than one rank in that sub-epoch
        (always 0 when sharded)
    :ivar coverage: float64, shape [num_epochs]: fraction of entries read by some rank in that sub-epoch
    :ivar unit: what the costs count, the plan's ``settings.unit``
    """

    num_shards: int
    partition_epoch: int
    num_epochs: int
    num_files: int
    total_bytes: int
    bytes: np.ndarray
    files: np.ndarray
    passes: np.ndarray
    overlap: np.ndarray
    coverage: np.ndarray
    unit: str = "bytes"

    @property
    def num_full_epochs(self) -> int:
        return num_full_epochs_for(self.num_epochs, partition_epoch=self.partition_epoch)

    @property
    def max_over_mean(self) -> np.ndarray:
        """float64 [num_epochs]: max over shards of bytes / mean over shards (1.0 = balanced)."""
        return max_over_mean(self.bytes)

    @property
    def dropped_fraction(self) -> np.ndarray:
        """float64 [num_epochs]: expected fraction of the sub-epoch's data dropped when the first
        rank runs out, ``1 - num_shards * min / sum`` over shards (0 for an empty sub-epoch)."""
        return dropped_fraction(self.bytes)

    @property
    def full_epoch_coverage(self) -> float:
        """Fraction of entries scheduled at least once over the training."""
        return float(np.mean(self.passes > 0)) if self.num_files else 1.0


def compute_plan_stats(
    plan: ShardPlan,
    *,
    num_epochs: int,
    check: bool = True,
    layout: Optional[Callable[[int, int], Tuple[np.ndarray, np.ndarray]]] = None,
    on_full_epoch: Optional[Callable[[int], None]] = None,
) -> PlanStats:
    """Statistics of sub-epochs ``1..num_epochs`` of ``plan``, computed from each full
    epoch's layout with ``np.add.reduceat`` over the bin boundaries.

    :param num_epochs: RETURNN's ``num_epochs`` (sub-epochs); a partial last full epoch counts partially
    :param check: verify every layout with :func:`check_layout`
    :param layout: ``(full_epoch_0idx, shard_index) -> (order, bounds)`` if already computed
        (default: ``plan.layout``)
    :param on_full_epoch: called with 1 after each full epoch (e.g. ``Progress.add``: computing the layouts of
        ``"flexible_auto"`` can take seconds per full epoch); this function prints nothing itself

    >>> plan = ShardPlan(["a", "b", "c", "d"], [1, 1, 78, 120],
    ...                  PlanSettings(num_shards=2, partition_epoch=2, seq_ordering="default"))
    >>> st = compute_plan_stats(plan, num_epochs=3)
    >>> st.bytes.tolist(), st.passes.tolist()  # the partial 2nd full epoch reads a and c once more
    ([[1, 78], [1, 120], [1, 78]], [2, 1, 2, 1])
    """
    num_full = num_full_epochs_for(num_epochs, partition_epoch=plan.partition_epoch)
    if layout is None:
        layout = _layout_of(plan)
    num_shards, part = plan.num_shards, plan.partition_epoch
    n = plan.num_files
    sizes = plan.costs
    out_bytes = np.zeros((num_full * part, num_shards), dtype=np.int64)
    out_files = np.zeros((num_full * part, num_shards), dtype=np.int64)
    overlap = np.zeros(num_full * part, dtype=np.int64)
    coverage = np.zeros(num_full * part, dtype=np.float64)
    passes = np.zeros(n, dtype=np.int64)
    for k in range(num_full):
        num_sub = min(part, num_epochs - k * part)  # sub-epochs of this full epoch within the training
        rows = slice(k * part, k * part + part)
        if plan.settings.distrib_shard_files:
            out_bytes[rows], out_files[rows], reads = _sharded_full_epoch(
                plan, *layout(k, 0), num_sub=num_sub, check=check, full_epoch_0idx=k
            )
            coverage[rows] = out_files[rows].sum(axis=1) / max(n, 1)
            passes += reads
        else:
            layouts = [layout(k, r) for r in range(num_shards)]
            for r, (order, bounds) in enumerate(layouts):
                if check:
                    check_layout(order, bounds, num_files=n, num_bins=plan.settings.num_bins)
                bin_bytes, bin_files = _bin_totals(sizes, order, bounds)
                out_bytes[rows, r] = bin_bytes
                out_files[rows, r] = bin_files
                passes += np.bincount(order[: bounds[num_sub]], minlength=n)
            within = slice(k * part, k * part + num_sub)
            overlap[within], coverage[within] = _overlap_and_coverage(layouts, num_sub=num_sub, num_files=n)
        if on_full_epoch is not None:
            on_full_epoch(1)
    return PlanStats(
        num_shards=num_shards,
        partition_epoch=part,
        num_epochs=int(num_epochs),
        num_files=n,
        total_bytes=int(sizes.sum()),
        bytes=out_bytes[:num_epochs],
        files=out_files[:num_epochs],
        passes=passes,
        overlap=overlap[:num_epochs],
        coverage=coverage[:num_epochs],
        unit=plan.settings.unit,
    )


def _sharded_full_epoch(
    plan: ShardPlan, order: np.ndarray, bounds: np.ndarray, *, num_sub: int, check: bool, full_epoch_0idx: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cost and files ``[sub-epoch, shard]`` of one sharded full epoch's layout, and the reads of each entry."""
    num_shards, part, n = plan.num_shards, plan.partition_epoch, plan.num_files
    planned = None if plan.corpora is None else plan.reads(full_epoch_0idx=full_epoch_0idx)
    if check:
        check_layout(order, bounds, num_files=n, num_bins=plan.settings.num_bins, reads=planned)
    bin_bytes, bin_files = _bin_totals(plan.costs, order, bounds)
    if num_sub == part:  # check_layout: each entry as often as planned per full epoch
        reads = np.ones(n, dtype=np.int64) if planned is None else planned
    else:
        used = np.zeros(plan.settings.num_bins, dtype=bool)
        used.reshape(num_shards, part)[:, :num_sub] = True
        reads = np.bincount(order[np.repeat(used, bin_files)], minlength=n)
    return bin_bytes.reshape(num_shards, part).T, bin_files.reshape(num_shards, part).T, reads


def _layout_of(plan: ShardPlan) -> Callable[[int, int], Tuple[np.ndarray, np.ndarray]]:
    """``(full_epoch_0idx, shard_index) -> (order, bounds)`` of ``plan``."""
    return lambda k, r: plan.layout(full_epoch_0idx=k, shard_index=r)


def _overlap_and_coverage(
    layouts: Sequence[Tuple[np.ndarray, np.ndarray]], *, num_sub: int, num_files: int
) -> Tuple[np.ndarray, np.ndarray]:
    """Per sub-epoch ``0..num_sub-1`` of one full epoch of unsharded layouts (one per rank): the entries that
    more than one rank reads (int64), and the share of all entries that some rank reads (float64)."""
    overlap = np.zeros(num_sub, dtype=np.int64)
    coverage = np.zeros(num_sub, dtype=np.float64)
    for s in range(num_sub):
        counts = np.bincount(np.concatenate([o[b[s] : b[s + 1]] for o, b in layouts]), minlength=num_files)
        overlap[s] = int(np.count_nonzero(counts > 1))
        coverage[s] = np.count_nonzero(counts) / max(num_files, 1)
    return overlap, coverage


def _bin_totals(sizes: np.ndarray, order: np.ndarray, bounds: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Bytes and file counts per bin; bins are non-empty, so ``reduceat`` is exact."""
    return np.add.reduceat(sizes[order], bounds[:-1]), np.diff(bounds)

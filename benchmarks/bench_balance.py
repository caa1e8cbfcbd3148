"""Benchmark: data dropped per sub-epoch under RETURNN's own bin cut (called on RETURNN itself),
i6_shard's balanced split and its flexible split, on the same shuffled inputs, with the spread of
sub-epoch sizes, a lower bound for any split into contiguous sub-epochs within the size bound, and
planning time at 1M files; everything measured side by side in one run.

Run: ``python benchmarks/bench_balance.py [--quick] [--no-bound]`` (needs returnn).
"""

from __future__ import annotations

import argparse
import heapq
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from i6_shard import core
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.pure.balanced import distribute_balanced
from i6_shard.core.pure.distribute import full_epoch_seed
from i6_shard.core.pure.distribute import shuffle_order
from i6_shard.core.pure.flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, distribute_flexible, sub_epoch_size_range
from timing import best_of

#: (corpus, num_files, num_shards, partition_epoch): the balanced split's rows (lognormal sigma 1, equal)
ROWS = [
    ("lognormal", 1_000, 8, 10),
    ("lognormal", 10_000, 64, 20),
    ("lognormal", 100_000, 256, 20),
    ("equal", 10_000, 64, 20),
]
#: Skewed corpora: lognormal sigma 2, files beyond a rank's share, and HDF-like files (lognormal
#: sequence counts) planned by bytes or by frames and measured in frames.
SKEWED_ROWS = [
    ("lognormal2", 1_000, 8, 10),
    ("lognormal2", 10_000, 64, 20),
    ("lognormal2", 100_000, 256, 20),
    ("big files", 1_000, 8, 10),
    ("big files", 10_000, 64, 20),
    ("hdf", 64, 4, 3),
    ("hdf", 400, 8, 5),
]
DISTRIBUTIONS = ("returnn", "balanced", "flexible")
TARGET_DROPPED = 0.03


def corpus(
    kind: str, num_files: int, num_shards: int = 1, partition_epoch: int = 1
) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """``(bytes, frames)`` per file in list order (frames None where the corpus has none):

    - "lognormal" / "lognormal2": lognormal bytes, sigma 1 / 2, median 1 MB, seed 0;
    - "equal": all 1 MB;
    - "big files": lognormal bytes (sigma 0.5), plus P files of 1.05 to 1.5 times a rank's share of a
      sub-epoch (``total / (W*P)``), at random places: single files beyond what a rank gets;
    - "hdf": HDF-like files: lognormal sequence counts (median 60, sigma 1) of lognormal lengths
      (median 400 frames, sigma 0.4); bytes = 2048 + 320 per frame (80 float32 features) + 16 per sequence.
    """
    rng = np.random.RandomState(0)
    if kind in ("lognormal", "lognormal2"):
        return lognormal_sizes(num_files, seed=0, sigma=1.0 if kind == "lognormal" else 2.0), None
    if kind == "equal":
        return np.full(num_files, 1_000_000, dtype=np.int64), None
    if kind == "big files":
        small = lognormal_sizes(num_files - partition_epoch, seed=0, sigma=0.5)
        share = int(small.sum()) // (num_shards * partition_epoch)
        big = (share * rng.uniform(1.05, 1.5, size=partition_epoch)).astype(np.int64)
        sizes = small.tolist()
        for size, at in zip(big.tolist(), rng.randint(0, num_files, size=partition_epoch).tolist()):
            sizes.insert(at, size)
        return np.array(sizes, dtype=np.int64), None
    if kind == "hdf":
        seqs = np.maximum(1, np.exp(rng.normal(np.log(60), 1.0, size=num_files))).astype(np.int64)
        lengths = np.maximum(1, np.exp(rng.normal(np.log(400), 0.4, size=int(seqs.sum())))).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(seqs)[:-1]])
        frames = np.add.reduceat(lengths, starts)
        return 2048 + 320 * frames + 16 * seqs, frames
    raise ValueError(f"unknown corpus {kind!r}")


def keys_for(num_files: int) -> List[str]:
    return [f"/data/corpus/part-{i:07d}.hdf" for i in range(num_files)]


def returnn_loads(
    keys: List[str], costs: np.ndarray, measure: np.ndarray, *, num_shards: int, partition_epoch: int, seed: int
) -> np.ndarray:
    """``measure`` per (sub-epoch, rank) of one full epoch as RETURNN's DistributeFilesDataset cuts it
    by ``costs``: shuffle with ``RandomState(seed)``, then ``_distribute_evenly_by_size``; shape [P, W]."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    files = list(keys)
    np.random.RandomState(seed).shuffle(files)
    bins = DistributeFilesDataset._distribute_evenly_by_size(
        num_bins=num_shards * partition_epoch, file_sizes=dict(zip(keys, costs.tolist())), files_order=files
    )
    measure_of = dict(zip(keys, measure.tolist()))
    loads = np.array([sum(measure_of[f] for f in b) for b in bins], dtype=np.int64)
    return loads.reshape(num_shards, partition_epoch).T  # bin r*P + s is rank r, sub-epoch s


def core_loads(
    distribution: str, costs: np.ndarray, measure: np.ndarray, *, num_shards: int, partition_epoch: int, seed: int
) -> np.ndarray:
    """``measure`` per (sub-epoch, rank) under i6_shard's ``distribution``, cut by ``costs``; shape [P, W]."""
    shuffle = shuffle_order(len(costs), seed=seed)
    order, bounds = core.pure.cut_full_epoch(
        costs[shuffle], num_shards=num_shards, partition_epoch=partition_epoch, distribution=distribution
    )
    loads = np.add.reduceat(measure[shuffle][order], bounds[:-1])
    return loads.reshape(num_shards, partition_epoch).T


def textbook_lpt_loads(sizes: np.ndarray, *, num_shards: int, partition_epoch: int, seed: int) -> np.ndarray:
    """Reference: the balanced split's sub-epoch groups, each assigned by a plain one-file-at-a-time heap
    LPT (largest first onto the least-loaded rank, ties by rank index); shape [P, W]."""
    shuffled = sizes[shuffle_order(len(sizes), seed=seed)]
    groups = core.pure.balanced.group_bounds(shuffled, num_groups=partition_epoch, min_group_size=num_shards)
    out = np.zeros((partition_epoch, num_shards), dtype=np.int64)
    for s in range(partition_epoch):
        heap = [(0, r) for r in range(num_shards)]
        for size in sorted(shuffled[groups[s] : groups[s + 1]].tolist(), reverse=True):
            load, r = heap[0]
            heapq.heapreplace(heap, (load + size, r))
        for load, r in heap:
            out[s, r] = load
    return out


def dropped_per_sub_epoch(loads: np.ndarray) -> np.ndarray:
    """Per sub-epoch ``1 - W * min / sum``: the data the other ranks drop when the first rank runs out
    (RETURNN ends the sub-epoch on all ranks then)."""
    loads = loads.astype(np.float64)
    return 1.0 - loads.shape[1] * loads.min(axis=1) / loads.sum(axis=1)


def dropped(loads: np.ndarray) -> float:
    """Mean over sub-epochs of ``1 - W * min / sum``."""
    return float(np.mean(dropped_per_sub_epoch(loads)))


def max_over_mean(loads: np.ndarray) -> float:
    """Mean over sub-epochs of the largest rank's bytes over the mean rank's bytes."""
    loads = loads.astype(np.float64)
    return float(np.mean(loads.max(axis=1) / loads.mean(axis=1)))


def sub_epoch_sizes(loads: np.ndarray) -> np.ndarray:
    """Each sub-epoch's size over the mean sub-epoch's."""
    sums = loads.sum(axis=1).astype(np.float64)
    return sums / sums.mean()


def compare(
    kind: str,
    num_files: int,
    num_shards: int,
    partition_epoch: int,
    with_lpt: bool = True,
    seed: Optional[int] = None,
    unit: str = "bytes",
    measure: str = "bytes",
) -> Dict[str, np.ndarray]:
    """Loads [P, W] of one full epoch (default: the first) for every distribution, on the same shuffle,
    cut by ``unit`` and measured in ``measure`` ("bytes" or "frames")."""
    sizes, frames = corpus(kind, num_files, num_shards, partition_epoch)
    costs = sizes if unit == "bytes" else frames
    meas = sizes if measure == "bytes" else frames
    seed = full_epoch_seed(0) if seed is None else seed
    kw = dict(num_shards=num_shards, partition_epoch=partition_epoch, seed=seed)
    out = {"returnn": returnn_loads(keys_for(num_files), costs, meas, **kw)}
    for name in ("balanced", "flexible"):
        out[name] = core_loads(name, costs, meas, **kw)
    if with_lpt and unit == measure == "bytes":
        out["textbook LPT"] = textbook_lpt_loads(sizes, **kw)
    return out


def contiguous_lower_bound(
    costs: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    max_sub_epoch_deviation: float = DEFAULT_MAX_SUB_EPOCH_DEVIATION,
) -> float:
    """A lower bound on the mean dropped share of any split of ``costs`` (in this order) into contiguous
    sub-epochs of at least W files with sizes in :func:`sub_epoch_size_range`, with any assignment to
    the ranks: a dynamic program over the cuts of the per-group bound ``1 - W*U/S``, ``U = min over
    k < W of (S - its k largest) / (W - k)`` (no assignment's smallest rank holds more than U).
    Cost: about num_files * W * (files per sub-epoch) / 2 operations."""
    n, w = len(costs), num_shards
    prefix = np.concatenate([[0], np.cumsum(costs)]).astype(np.int64)
    low, high = sub_epoch_size_range(
        int(prefix[-1]), partition_epoch=partition_epoch, max_sub_epoch_deviation=max_sub_epoch_deviation
    )
    ends = {}  # start -> (first end, bound of each end)
    for a in range(n):
        b0 = max(a + w, int(np.searchsorted(prefix, prefix[a] + low, "left")))
        b1 = min(n, int(np.searchsorted(prefix, prefix[a] + high, "right")) - 1)
        if b0 > b1:
            continue
        seg = costs[a:b1].astype(np.int64)
        total = (prefix[b0 : b1 + 1] - prefix[a]).astype(np.float64)
        best_min = total / w
        taken = np.zeros_like(total)
        kth = None  # k-th largest of seg[:i] for every i
        for k in range(w - 1):
            cand = seg if kth is None else np.minimum(seg, np.concatenate([[0], kth[:-1]]))
            kth = np.maximum.accumulate(cand)
            taken = taken + kth[b0 - a - 1 : b1 - a]
            best_min = np.minimum(best_min, (total - taken) / (w - k - 1))
        ends[a] = (b0, 1.0 - w * best_min / np.where(total > 0, total, 1))
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    for _ in range(partition_epoch):
        nxt = np.full(n + 1, np.inf)
        for a, (b0, loss) in ends.items():
            if best[a] < np.inf:
                view = nxt[b0 : b0 + len(loss)]
                np.minimum(view, best[a] + loss, out=view)
        best = nxt
    return float(best[n] / partition_epoch)


def row_label(kind: str, num_files: int, num_shards: int, partition_epoch: int) -> str:
    return f"{kind:<10} {num_files:>8,} {num_shards:>4} {partition_epoch:>3}"


def balanced_table(args) -> bool:
    """The balanced split's rows: RETURNN vs balanced vs flexible, first full epoch, and averaged."""
    print("Dropped per sub-epoch (mean over sub-epochs of 1 - W*min/sum) and max/mean (mean over sub-epochs),")
    print("first full epoch (shuffle seed 1), sizes in bytes as the proxy for length; same inputs per row.\n")
    header = (
        f"{'sizes':<10} {'files':>8} {'W':>4} {'P':>3} | {'RETURNN drop':>12} {'max/mean':>8} | "
        f"{'balanced drop':>13} {'max/mean':>8} | {'flexible drop':>13} {'max/mean':>8} | "
        f"{'textbook LPT drop':>17} | {'bal/RETURNN':>11}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    for row in ROWS:
        loads = compare(*row)
        d = {k: dropped(v) for k, v in loads.items()}
        print(
            f"{row_label(*row)} | {d['returnn']:>12.2%} {max_over_mean(loads['returnn']):>8.3f} | "
            f"{d['balanced']:>13.2%} {max_over_mean(loads['balanced']):>8.3f} | "
            f"{d['flexible']:>13.2%} {max_over_mean(loads['flexible']):>8.3f} | "
            f"{d['textbook LPT']:>17.2%} | {d['balanced'] / d['returnn'] if d['returnn'] else float('nan'):>11.3f}"
        )
        if d["balanced"] > d["textbook LPT"] + 1e-12:
            ok = False
            print("  !! balanced drops more than textbook LPT on this row")
        if row[0] == "lognormal" and d["balanced"] > TARGET_DROPPED:
            ok = False
            print(f"  !! balanced drops more than the {TARGET_DROPPED:.0%} target on this row")
    print(
        f"\nbalanced <= {TARGET_DROPPED:.0%} dropped on every lognormal row and <= textbook LPT on every row: "
        f"{'yes' if ok else 'NO'}"
    )
    return ok


def skew_table(args) -> bool:
    """Every row, averaged over full epochs: dropped, worst sub-epoch and sub-epoch sizes of all three,
    the lower bound for contiguous sub-epochs within the size bound, and whether flexible halves balanced."""
    d = DEFAULT_MAX_SUB_EPOCH_DEVIATION
    print(
        f"\nAll three side by side, over full epochs 1..{args.full_epochs} (shuffle seeds 1..{args.full_epochs}); "
        f"flexible with sub-epoch sizes within +-{d:.0%} of the mean."
    )
    print(
        "drop: mean over sub-epochs of 1 - W*min/sum; worst: the worst sub-epoch; sizes: smallest..largest "
        "sub-epoch over the mean one;"
    )
    print(
        "bound: no split into contiguous sub-epochs within the size bound drops less (any assignment; "
        "'-' where not computed); half: flexible <= balanced / 2.\n"
    )
    header = (
        f"{'corpus':<10} {'files':>8} {'W':>4} {'P':>3} {'cut by':>6} {'in':>6} | "
        + " | ".join(f"{name + ' drop':>13} {'worst':>6} {'sizes':>9}" for name in DISTRIBUTIONS)
        + f" | {'flex/bal':>8} {'bound':>6} {'half':>4}"
    )
    print(header)
    print("-" * len(header))
    ok = True
    rows = [(row, "bytes", "bytes") for row in ROWS + SKEWED_ROWS]
    rows += [(row, unit, "frames") for row in SKEWED_ROWS if row[0] == "hdf" for unit in ("bytes", "frames")]
    for row, unit, measure in rows:
        kind, num_files, num_shards, partition_epoch = row
        per = {name: [] for name in DISTRIBUTIONS}
        for k in range(args.full_epochs):
            loads = compare(*row, with_lpt=False, seed=full_epoch_seed(k), unit=unit, measure=measure)
            for name in DISTRIBUTIONS:
                per[name].append(loads[name])
        stats = {}
        for name in DISTRIBUTIONS:
            drops = np.concatenate([dropped_per_sub_epoch(x) for x in per[name]])
            sizes = np.concatenate([sub_epoch_sizes(x) for x in per[name]])
            stats[name] = (float(drops.mean()), float(drops.max()), float(sizes.min()), float(sizes.max()))
        bal, flex = stats["balanced"][0], stats["flexible"][0]
        bound = "-"
        if not args.no_bound and num_files * num_shards * num_files / partition_epoch <= 4e8 and unit == measure:
            bound = f"{mean_lower_bound(row, unit, args.full_epochs):.2%}"
        half = "yes" if flex <= bal / 2 else "no"
        print(
            f"{row_label(*row)} {unit:>6} {measure:>6} | "
            + " | ".join(f"{s[0]:>13.2%} {s[1]:>6.1%} {s[2]:>4.2f}..{s[3]:<4.2f}" for s in stats.values())
            + f" | {flex / bal if bal else float('nan'):>8.3f} {bound:>6} {half:>4}"
        )
        if unit == measure and flex > bal + 1e-12:
            ok = False
            print("  !! flexible drops more than balanced on this row")
        lo, hi = stats["flexible"][2], stats["flexible"][3]
        if unit == measure and (lo < 1 - d - 1e-9 or hi > 1 + d + 1e-9) and not _is_balanced(row, unit, args):
            ok = False
            print("  !! flexible sub-epoch sizes outside the bound although it did not keep the balanced split")
    print(
        f"\nflexible <= balanced on every row (in the unit it is cut by), sizes within +-{d:.0%}: "
        f"{'yes' if ok else 'NO'}"
    )
    return ok


def mean_lower_bound(row, unit: str, full_epochs: int) -> float:
    """:func:`contiguous_lower_bound` averaged over the shuffles of full epochs 1..full_epochs."""
    kind, num_files, num_shards, partition_epoch = row
    sizes, frames = corpus(kind, num_files, num_shards, partition_epoch)
    costs = sizes if unit == "bytes" else frames
    return float(
        np.mean(
            [
                contiguous_lower_bound(
                    costs[shuffle_order(num_files, seed=full_epoch_seed(k))],
                    num_shards=num_shards,
                    partition_epoch=partition_epoch,
                )
                for k in range(full_epochs)
            ]
        )
    )


def _is_balanced(row, unit: str, args) -> bool:
    """Whether flexible returned the balanced split itself in some full epoch (its sizes are then the
    balanced split's, e.g. for a file larger than a sub-epoch may be)."""
    kind, num_files, num_shards, partition_epoch = row
    sizes, frames = corpus(kind, num_files, num_shards, partition_epoch)
    costs = sizes if unit == "bytes" else frames
    for k in range(args.full_epochs):
        shuffled = costs[shuffle_order(num_files, seed=full_epoch_seed(k))]
        kw = dict(num_shards=num_shards, partition_epoch=partition_epoch)
        if all(
            np.array_equal(a, b)
            for a, b in zip(distribute_balanced(shuffled, **kw), distribute_flexible(shuffled, **kw))
        ):
            return True
    return False


def timing(num_files: int, repeats: int) -> bool:
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    keys = keys_for(num_files)
    seed = full_epoch_seed(0)
    files_order = list(keys)
    np.random.RandomState(seed).shuffle(files_order)
    print(
        f"\nPlanning one full epoch of {num_files:,} files (shuffle + cut, int64 arrays; best of {repeats}; "
        "RETURNN's own cut and the dataset hook over file names, best of 1):"
    )
    timed = DISTRIBUTIONS + ("flexible_auto",)
    print(
        f"  {'sizes':<10} {'W':>5} {'P':>4} | {'returnn':>8} {'balanced':>8} {'flexible':>8} {'f._auto':>8} | "
        f"{'RETURNN own':>11} {'hook flex':>9} | {'flex/bal':>8} {'flex/RETURNN own':>16} {'auto/RETURNN own':>16}"
    )
    slowest = 0.0
    for sigma, num_shards, partition_epoch in (
        (1.0, 256, 20),
        (1.0, 8, 10),
        (1.0, 32, 20),
        (1.0, 1024, 20),
        (1.0, 256, 100),
        (1.0, 2048, 20),
        (2.0, 256, 20),
        (2.0, 8, 10),
        (2.0, 1024, 20),
    ):
        sizes = lognormal_sizes(num_files, seed=0, sigma=sigma)
        num_bins = num_shards * partition_epoch
        times = {}
        for name in timed:
            times[name], _ = best_of(
                lambda: core.pure.cut_full_epoch(
                    sizes[shuffle_order(num_files, seed=seed)],
                    num_shards=num_shards,
                    partition_epoch=partition_epoch,
                    distribution=name,
                ),
                repeats,
            )
        line = f"  lognormal{sigma:<1.0f} {num_shards:>5} {partition_epoch:>4} | " + " ".join(
            f"{times[n]:>7.3f}s" for n in timed
        )
        if (num_shards, partition_epoch) == (256, 20):
            size_of = dict(zip(keys, sizes.tolist()))
            t_returnn, bins_returnn = best_of(
                lambda: DistributeFilesDataset._distribute_evenly_by_size(
                    num_bins=num_bins, file_sizes=size_of, files_order=files_order
                ),
                1,
            )
            dataset = ShardedDistributeFilesDataset(
                files=keys,
                get_sub_epoch_dataset=None,
                partition_epoch=partition_epoch,
                distribution="flexible",
                _num_shards=num_shards,
                _shard_index=0,
            )
            t_ext, bins_ext = best_of(
                lambda: dataset._distribute_evenly_by_size(
                    num_bins=num_bins, file_sizes=size_of, files_order=files_order
                ),
                1,
            )
            assert sum(map(len, bins_ext)) == num_files and all(bins_ext) and len(bins_returnn) == num_bins
            line += (
                f" | {t_returnn:>10.3f}s {t_ext:>8.3f}s | {times['flexible'] / times['balanced']:>8.2f} "
                f"{times['flexible'] / t_returnn:>16.2f} {times['flexible_auto'] / t_returnn:>16.2f}"
            )
        else:
            line += f" | {'':>11} {'':>9} | {times['flexible'] / times['balanced']:>8.2f}"
        print(line)
        slowest = max(slowest, times["flexible"])
    ok = slowest <= 1.0
    print(
        f"  flexible within the budget of 1 s per full epoch on every row: {'OK' if ok else 'OVER'} "
        f"(slowest {slowest:.3f} s)"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 1M-file timing")
    parser.add_argument("--no-bound", action="store_true", help="skip the lower bound (a few seconds per row)")
    parser.add_argument("--timing-files", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--full-epochs", type=int, default=3, help="full epochs averaged over in the second table")
    args = parser.parse_args()
    ok = balanced_table(args)
    ok = skew_table(args) and ok
    if not args.quick:
        ok = timing(args.timing_files, args.repeats) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Benchmark: data dropped per sub-epoch under RETURNN's own bin cut (called on RETURNN
itself) versus i6_shard's balanced distribution, on the same shuffled inputs, plus
planning time at 1M files; everything measured side by side in one run.

Run: ``python benchmarks/bench_balance.py [--quick]`` (needs returnn).
"""

from __future__ import annotations

import argparse
import heapq
import sys
from typing import Dict, List

import numpy as np

from i6_shard import core
from timing import best_of

#: (sizes kind, num_files, num_shards, partition_epoch)
ROWS = [
    ("lognormal", 1_000, 8, 10),
    ("lognormal", 10_000, 64, 20),
    ("lognormal", 100_000, 256, 20),
    ("equal", 10_000, 64, 20),
]
TARGET_DROPPED = 0.03


def row_sizes(kind: str, num_files: int) -> np.ndarray:
    """Sizes in list order: lognormal (sigma=1, median 1 MB, seed 0) or all 1 MB."""
    if kind == "lognormal":
        return core.io.lognormal_sizes(num_files, seed=0, sigma=1.0)
    return np.full(num_files, 1_000_000, dtype=np.int64)


def keys_for(num_files: int) -> List[str]:
    return [f"/data/corpus/part-{i:07d}.hdf" for i in range(num_files)]


def returnn_loads(keys: List[str], sizes: np.ndarray, *, num_shards: int, partition_epoch: int,
                  seed: int) -> np.ndarray:
    """Bytes per (sub-epoch, rank) of one full epoch as RETURNN's DistributeFilesDataset cuts it:
    shuffle with ``RandomState(seed)``, then ``_distribute_evenly_by_size``; shape [P, W]."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    size_of = dict(zip(keys, sizes.tolist()))
    files = list(keys)
    np.random.RandomState(seed).shuffle(files)
    bins = DistributeFilesDataset._distribute_evenly_by_size(
        num_bins=num_shards * partition_epoch, file_sizes=size_of, files_order=files)
    loads = np.array([sum(size_of[f] for f in b) for b in bins], dtype=np.int64)
    return loads.reshape(num_shards, partition_epoch).T  # bin r*P + s is rank r, sub-epoch s


def balanced_loads(sizes: np.ndarray, *, num_shards: int, partition_epoch: int, seed: int) -> np.ndarray:
    """Bytes per (sub-epoch, rank) under ``core.distribute_balanced``; shape [P, W]."""
    shuffled = sizes[core.pure.shuffle_order(len(sizes), seed=seed)]
    order, bounds = core.distribute_balanced(shuffled, num_shards=num_shards, partition_epoch=partition_epoch)
    loads = np.add.reduceat(shuffled[order], bounds[:-1])
    return loads.reshape(num_shards, partition_epoch).T


def textbook_lpt_loads(sizes: np.ndarray, *, num_shards: int, partition_epoch: int, seed: int) -> np.ndarray:
    """Reference: the same sub-epoch groups, each assigned by a plain one-file-at-a-time heap LPT
    (largest first onto the least-loaded rank, ties by rank index); shape [P, W]."""
    shuffled = sizes[core.pure.shuffle_order(len(sizes), seed=seed)]
    groups = core.pure.balanced.group_bounds(shuffled, num_groups=partition_epoch, min_group_size=num_shards)
    out = np.zeros((partition_epoch, num_shards), dtype=np.int64)
    for s in range(partition_epoch):
        heap = [(0, r) for r in range(num_shards)]
        for size in sorted(shuffled[groups[s]:groups[s + 1]].tolist(), reverse=True):
            load, r = heap[0]
            heapq.heapreplace(heap, (load + size, r))
        for load, r in heap:
            out[s, r] = load
    return out


def dropped(loads: np.ndarray) -> float:
    """Mean over sub-epochs of ``1 - W * min / sum``: the data the other ranks drop when the
    first rank runs out (RETURNN ends the sub-epoch on all ranks then)."""
    loads = loads.astype(np.float64)
    return float(np.mean(1.0 - loads.shape[1] * loads.min(axis=1) / loads.sum(axis=1)))


def max_over_mean(loads: np.ndarray) -> float:
    """Mean over sub-epochs of the largest rank's bytes over the mean rank's bytes."""
    loads = loads.astype(np.float64)
    return float(np.mean(loads.max(axis=1) / loads.mean(axis=1)))


def compare(kind: str, num_files: int, num_shards: int, partition_epoch: int,
            with_lpt: bool = True) -> Dict[str, np.ndarray]:
    """Loads [P, W] of the first full epoch for every distribution, on the same shuffle."""
    sizes = row_sizes(kind, num_files)
    seed = core.pure.full_epoch_seed(0)
    kw = dict(num_shards=num_shards, partition_epoch=partition_epoch, seed=seed)
    out = {"returnn": returnn_loads(keys_for(num_files), sizes, **kw), "balanced": balanced_loads(sizes, **kw)}
    if with_lpt:
        out["textbook LPT"] = textbook_lpt_loads(sizes, **kw)
    return out


def timing(num_files: int, num_shards: int, partition_epoch: int, repeats: int) -> None:
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    sizes = core.io.lognormal_sizes(num_files, seed=0)
    keys = keys_for(num_files)
    size_of = dict(zip(keys, sizes.tolist()))
    seed = core.pure.full_epoch_seed(0)
    num_bins = num_shards * partition_epoch

    def core_balanced():
        shuffled = sizes[core.pure.shuffle_order(num_files, seed=seed)]
        return core.distribute_balanced(shuffled, num_shards=num_shards, partition_epoch=partition_epoch)

    def core_returnn():
        shuffled = sizes[core.pure.shuffle_order(num_files, seed=seed)]
        return core.distribute_evenly_by_size(shuffled, num_bins=num_bins)

    files_order = list(keys)
    np.random.RandomState(seed).shuffle(files_order)

    def returnn_own():
        return DistributeFilesDataset._distribute_evenly_by_size(
            num_bins=num_bins, file_sizes=size_of, files_order=files_order)

    dataset = ShardedDistributeFilesDataset(files=keys, get_sub_epoch_dataset=None, partition_epoch=partition_epoch,
                                            distribution="balanced", _num_shards=num_shards, _shard_index=0)

    def ext_balanced():
        return dataset._distribute_evenly_by_size(num_bins=num_bins, file_sizes=size_of, files_order=files_order)

    t_core_bal, _ = best_of(core_balanced, repeats)
    few_ranks = {}
    for w, p in ((8, 10), (32, 20)):
        few_ranks[w, p], _ = best_of(lambda: core.distribute_balanced(
            sizes[core.pure.shuffle_order(num_files, seed=seed)], num_shards=w, partition_epoch=p), repeats)
    t_core_ret, _ = best_of(core_returnn, repeats)
    t_returnn, bins_returnn = best_of(returnn_own, 1)
    t_ext, bins_ext = best_of(ext_balanced, 1)
    assert sorted(f for b in bins_ext for f in b) == sorted(keys) and all(bins_ext) and len(bins_returnn) == num_bins
    print(f"\nPlanning one full epoch, {num_files:,} files / {num_shards} ranks / P={partition_epoch} "
          f"(best of {repeats} for the core, 1 for the file-list paths):")
    print(f"  i6_shard core, balanced (shuffle + cut, int64 arrays)      {t_core_bal:7.3f} s")
    print(f"  i6_shard core, returnn  (shuffle + cut, int64 arrays)      {t_core_ret:7.3f} s")
    print(f"  RETURNN _distribute_evenly_by_size (file names, dict)      {t_returnn:7.3f} s")
    print(f"  ShardedDistributeFilesDataset, balanced (file names, dict) {t_ext:7.3f} s")
    for (w, p), t in few_ranks.items():
        print(f"  i6_shard core, balanced, {w} ranks / P={p} instead".ljust(62) + f"{t:7.3f} s")
    slowest = max([t_core_bal, *few_ranks.values()])
    print(f"  balanced core / RETURNN's own: {t_core_bal / t_returnn:.2f}x the time; "
          f"budget 1 s per full epoch: {'OK' if slowest <= 1.0 else 'OVER'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the 1M-file timing")
    parser.add_argument("--timing-files", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--full-epochs", type=int, default=5, help="full epochs for the averaged table")
    args = parser.parse_args()

    print("Dropped per sub-epoch (mean over sub-epochs of 1 - W*min/sum) and max/mean (mean over sub-epochs),")
    print("first full epoch (shuffle seed 1), sizes in bytes as the proxy for length; same inputs per row.\n")
    header = (f"{'sizes':<10} {'files':>8} {'W':>4} {'P':>3} | {'RETURNN drop':>12} {'max/mean':>8} | "
              f"{'balanced drop':>13} {'max/mean':>8} | {'textbook LPT drop':>17} | {'bal/RETURNN drop':>16}")
    print(header)
    print("-" * len(header))
    ok = True
    for kind, num_files, num_shards, partition_epoch in ROWS:
        loads = compare(kind, num_files, num_shards, partition_epoch)
        d_ret, d_bal, d_lpt = (dropped(loads[k]) for k in ("returnn", "balanced", "textbook LPT"))
        print(f"{kind:<10} {num_files:>8,} {num_shards:>4} {partition_epoch:>3} | {d_ret:>12.2%} "
              f"{max_over_mean(loads['returnn']):>8.3f} | {d_bal:>13.2%} {max_over_mean(loads['balanced']):>8.3f} | "
              f"{d_lpt:>17.2%} | {d_bal / d_ret if d_ret else float('nan'):>16.3f}")
        if d_bal > d_lpt + 1e-12:
            ok = False
            print("  !! balanced drops more than textbook LPT on this row")
        if kind == "lognormal" and d_bal > TARGET_DROPPED:
            ok = False
            print(f"  !! balanced drops more than the {TARGET_DROPPED:.0%} target on this row")
    print(f"\nbalanced <= {TARGET_DROPPED:.0%} dropped on every lognormal row and <= textbook LPT on every row: "
          f"{'yes' if ok else 'NO'}")
    print(f"\nSame rows, dropped averaged over full epochs 1..{args.full_epochs} (other shuffles of the same files):")
    for kind, num_files, num_shards, partition_epoch in ROWS:
        sizes, keys = row_sizes(kind, num_files), keys_for(num_files)
        seeds = [core.pure.full_epoch_seed(k) for k in range(args.full_epochs)]
        kw = dict(num_shards=num_shards, partition_epoch=partition_epoch)
        d_ret = [dropped(returnn_loads(keys, sizes, seed=seed, **kw)) for seed in seeds]
        d_bal = [dropped(balanced_loads(sizes, seed=seed, **kw)) for seed in seeds]
        print(f"{kind:<10} {num_files:>8,} {num_shards:>4} {partition_epoch:>3} | RETURNN {np.mean(d_ret):6.2%} "
              f"(range {min(d_ret):.2%}..{max(d_ret):.2%}) | balanced {np.mean(d_bal):6.2%} "
              f"(range {min(d_bal):.2%}..{max(d_bal):.2%})")
    if not args.quick:
        timing(args.timing_files, 256, 20, args.repeats)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Benchmark: the exact drop of today's best split (``flexible_auto`` by steps) against the same split after
:func:`i6_shard.core.pure.equal_steps.equalize_steps`, in the simulated engine (each rank's order with RETURNN's seed,
batches, sync), on synthetic corpora with lognormal sequences per file and lengths, with and without files above a
rank's share, at W = 2, 4 and 8, under grad and param sync.

Columns: RETURNN's cut, ``balanced`` and ``flexible_auto`` (all by steps), and equal_steps (from flexible_auto's
bins): the mean dropped share of frames per sub-epoch, the worst, and the share of sub-epochs that drop nothing. First
it times one full epoch at 100k files, W=8, P=20 (CPU seconds, peak RSS).

Run from the repository root: ``python benchmarks/bench_equal_steps.py [--files 400] [--seeds 1,2]
[--timing-files 100000] [--timing-only]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BATCH_SIZE, MAX_SEQS, PARTITION_EPOCH, NUM_FULL_EPOCHS = 2000, 20, 4, 2
#: The time goal of one full epoch at 100k files, W=8, P=20 (CPU seconds on one core).
GOAL_SECONDS = 10.0


def corpus(num_files: int, seed: int, *, skewed: bool):
    rng = np.random.RandomState(seed)
    sigma = 1.2 if skewed else 0.5
    num_seqs = np.clip(np.round(rng.lognormal(np.log(60), sigma, size=num_files)), 1, 3000).astype(int)
    return [np.clip(np.round(rng.lognormal(np.log(30), 0.6, size=n)), 1, 400).astype(np.int64) for n in num_seqs]


SYNCS = [
    ("grad", {}, 1),
    ("grad, accum 2", {}, 2),
    ("param 4", {"reduce_type": "param", "param_sync_step": 4}, 1),
    ("param 4, accum 2", {"reduce_type": "param", "param_sync_step": 4}, 2),
    ("param 25", {"reduce_type": "param", "param_sync_step": 25}, 1),
    ("param 25, accum 2", {"reduce_type": "param", "param_sync_step": 25}, 2),
    ("param 50", {"reduce_type": "param", "param_sync_step": 50}, 1),
    ("param 50, accum 2", {"reduce_type": "param", "param_sync_step": 50}, 2),
]
CUTS = ("returnn", "balanced", "flexible_auto")


def run(num_files: int, seed: int, skewed: bool, num_shards: int, sync: dict, accum: int) -> dict:
    """Per cut, the simulated drop of every sub-epoch (2 full epochs); equal_steps starts from flexible_auto."""
    from i6_shard import core
    from i6_shard.core.pure.batching import Batching, file_millisteps
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.equal_steps import equalize_steps
    from tests.sub_epoch_sims import simulate_bins

    lengths = corpus(num_files, seed, skewed=skewed)
    costs = file_millisteps(lengths, Batching(BATCH_SIZE, MAX_SEQS))
    engine = EngineSettings(
        batch_size=BATCH_SIZE, max_seqs=MAX_SEQS, torch_distributed=sync, accum_grad_multiple_step=accum
    )
    share = sum(int(x.size) for x in lengths) / (num_shards * PARTITION_EPOCH)
    out = {name: [] for name in CUTS + ("equal_steps",)}
    out["seconds"], out["above"] = [], sum(int(x.size) > share for x in lengths)
    for cut in CUTS:
        settings = core.PlanSettings(
            num_shards=num_shards,
            partition_epoch=PARTITION_EPOCH,
            num_epochs=NUM_FULL_EPOCHS * PARTITION_EPOCH,
            distribution=cut,
            unit="steps",
        )
        plan = core.ShardPlan([f"f{i}" for i in range(num_files)], costs, settings)
        for k in range(NUM_FULL_EPOCHS):
            order, bounds = plan.layout(full_epoch_0idx=k)
            layouts = [(np.asarray(order), bounds, cut)]
            if cut == "flexible_auto":
                start = time.process_time()
                new_order, new_bounds, _ = equalize_steps(
                    np.arange(num_files),
                    bounds,
                    file_lengths=[lengths[i] for i in order],
                    num_shards=num_shards,
                    partition_epoch=PARTITION_EPOCH,
                    engine=engine,
                    full_epoch_0idx=k,
                    random_seed_offset=0,
                )
                out["seconds"].append(time.process_time() - start)
                new_files = np.asarray(order)[new_order]
                assert sorted(new_files.tolist()) == list(range(num_files))  # every file exactly once
                layouts.append((new_files, new_bounds, "equal_steps"))
            for positions, b, name in layouts:
                sims = simulate_bins(
                    positions,
                    b,
                    lengths,
                    num_shards=num_shards,
                    partition_epoch=PARTITION_EPOCH,
                    engine=engine,
                    full_epoch_0idx=k,
                    random_seed_offset=0,
                )
                out[name].extend(sim.dropped_fraction for sim in sims)
    return out


def timing(num_files: int, *, num_shards: int = 8, partition_epoch: int = 20) -> None:
    """CPU seconds and peak memory of equalize_steps on one full epoch of ``num_files`` skewed files (flexible_auto's
    bins by sequences), grad sync, with its progress lines."""
    import resource

    from i6_shard import core
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.equal_steps import equalize_steps

    lengths = corpus(num_files, 1, skewed=True)
    settings = core.PlanSettings(
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        num_epochs=partition_epoch,
        distribution="flexible_auto",
        unit="steps",
    )
    plan = core.ShardPlan([f"f{i}" for i in range(num_files)], np.array([x.size for x in lengths]), settings)
    order, bounds = plan.layout(full_epoch_0idx=0)
    engine = EngineSettings(batch_size=BATCH_SIZE, max_seqs=MAX_SEQS, torch_distributed={})
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.process_time()
    _, _, info = equalize_steps(
        np.arange(num_files),
        bounds,
        file_lengths=[lengths[i] for i in order],
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        engine=engine,
        full_epoch_0idx=0,
        random_seed_offset=0,
        progress=lambda line: print(f"  {line} ({time.process_time() - start:.1f} s)", flush=True),
    )
    seconds = time.process_time() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lossless = sum(d == 0 for d in info["dropped_frames"])
    print(
        f"time per full epoch: {seconds:.1f} CPU s at {num_files} files ({sum(x.size for x in lengths)} sequences), "
        f"W={num_shards}, P={partition_epoch}, grad sync; peak RSS {rss:.0f} MB ({rss_before:.0f} MB before the "
        f"search); {lossless} of {partition_epoch} sub-epochs lossless; goal {GOAL_SECONDS:.0f} s: "
        f"{seconds / GOAL_SECONDS:.2f} of it",
        flush=True,
    )


def _cell(x: np.ndarray) -> str:
    return f"{100 * x.mean():.3f}% ({100 * x.max():.2f}%), {np.mean(x == 0):.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--timing-files", type=int, default=100_000, help="0: skip the timing")
    parser.add_argument("--timing-only", action="store_true", help="only the timing (its first line), no table")
    args = parser.parse_args()
    if args.timing_files:
        timing(args.timing_files)
    if args.timing_only:
        return
    print(
        "| corpus | W | sync | sub-epochs | returnn | balanced | flexible_auto | equal_steps | s per full epoch |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    for skewed in (True, False):
        for w in (2, 4, 8):
            for name, sync, accum in SYNCS:
                rs = [run(args.files, int(s), skewed, w, sync, accum) for s in args.seeds.split(",")]
                cells = [_cell(np.concatenate([r[c] for r in rs])) for c in CUTS + ("equal_steps",)]
                above = max(r["above"] for r in rs)
                print(
                    f"| {'skewed' if skewed else 'even'} ({above} files above a share) | {w} | {name} | "
                    f"{sum(len(r['equal_steps']) for r in rs)} | {' | '.join(cells)} | "
                    f"{np.mean([x for r in rs for x in r['seconds']]):.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

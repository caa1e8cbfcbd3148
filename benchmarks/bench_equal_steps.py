"""Benchmark: the exact drop of today's best split (``flexible_auto`` by steps) against the same split after
:func:`i6_shard.core.pure.equal_steps.equalize_steps`, in the simulated engine (each rank's order with RETURNN's seed,
batches, sync), on synthetic corpora with lognormal sequences per file and lengths, with and without files above a
rank's share, at W = 2, 4 and 8, under grad and param sync.

Run from the repository root: ``python benchmarks/bench_equal_steps.py [--files 400] [--seeds 1,2]``.
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


def corpus(num_files: int, seed: int, *, skewed: bool):
    rng = np.random.RandomState(seed)
    sigma = 1.2 if skewed else 0.5
    num_seqs = np.clip(np.round(rng.lognormal(np.log(60), sigma, size=num_files)), 1, 3000).astype(int)
    return [np.clip(np.round(rng.lognormal(np.log(30), 0.6, size=n)), 1, 400).astype(np.int64) for n in num_seqs]


def run(num_files: int, seed: int, skewed: bool, num_shards: int, sync: dict) -> dict:
    from i6_shard import core
    from i6_shard.core.pure.batching import Batching, file_millisteps
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.equal_steps import equalize_steps
    from tests.sub_epoch_sims import simulate_bins

    lengths = corpus(num_files, seed, skewed=skewed)
    costs = file_millisteps(lengths, Batching(BATCH_SIZE, MAX_SEQS))
    settings = core.PlanSettings(
        num_shards=num_shards,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=NUM_FULL_EPOCHS * PARTITION_EPOCH,
        distribution="flexible_auto",
        unit="steps",
    )
    plan = core.ShardPlan([f"f{i}" for i in range(num_files)], costs, settings)
    engine = EngineSettings(batch_size=BATCH_SIZE, max_seqs=MAX_SEQS, torch_distributed=sync)
    share = sum(int(x.size) for x in lengths) / (num_shards * PARTITION_EPOCH)
    above = sum(int(x.size) > share for x in lengths)
    before, after, seconds = [], [], []
    for k in range(NUM_FULL_EPOCHS):
        order, bounds = plan.layout(full_epoch_0idx=k)
        by_pos = list(range(num_files))
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
        seconds.append(time.process_time() - start)
        new_files = order[new_order]
        assert sorted(new_files.tolist()) == by_pos  # every file exactly once
        for positions, b, out in ((np.asarray(order), bounds, before), (new_files, new_bounds, after)):
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
            out.extend(sim.dropped_fraction for sim in sims)
    return {"before": before, "after": after, "seconds": seconds, "above": above}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--seeds", default="1,2")
    args = parser.parse_args()
    print(
        "| corpus | W | sync | sub-epochs | flexible_auto: mean (worst), lossless | equal_steps: mean (worst), lossless |"
        " s per full epoch |"
    )
    print("|---|---|---|---|---|---|---|")
    for skewed in (True, False):
        for w in (2, 4, 8):
            for name, sync in (("grad", {}), ("param 4", {"reduce_type": "param", "param_sync_step": 4})):
                rs = [run(args.files, int(s), skewed, w, sync) for s in args.seeds.split(",")]
                b = np.concatenate([r["before"] for r in rs])
                a = np.concatenate([r["after"] for r in rs])
                above = max(r["above"] for r in rs)
                print(
                    f"| {'skewed' if skewed else 'even'} ({above} files above a share) | {w} | {name} | {len(b)} | "
                    f"{100 * b.mean():.3f}% ({100 * b.max():.2f}%), {np.mean(b == 0):.0%} | "
                    f"{100 * a.mean():.3f}% ({100 * a.max():.2f}%), {np.mean(a == 0):.0%} | "
                    f"{np.mean([x for r in rs for x in r['seconds']]):.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

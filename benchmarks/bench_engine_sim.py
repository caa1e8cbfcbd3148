"""Benchmark: the simulated engine's steps against real 2-rank RETURNN trainings (torchrun, gloo, CPU, one training
at a time), per sync configuration: grad sync, param sync (with and without ``accum_grad_multiple_step=2``), sync
levels, and param sync at ``behavior_version=38`` (``sync_complete_frac`` and ``sync_at_epoch_end`` on).

Per seed: 12 skewed HDF files, a balanced plan of their frames (``i6_shard plan``), ``partition_epoch=2``,
4 sub-epochs, ``batch_size=150`` frames, ``max_seqs=4`` (``tests/training/test_engine_sim_live.py``). For every
(sub-epoch, rank) the steps the simulation says the rank takes are compared with RETURNN's "Trained N steps", and
the simulated drop with the drop measured from the logged batch sizes.

Run from the repository root: ``python benchmarks/bench_engine_sim.py [--seeds 3,4] [--only NAME]``
(needs torch, returnn, h5py; about 15 s per training on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NODE_GRAD_WORLD_PARAM = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 2}]}
RANK_PARAM_WORLD_PARAM = {
    "sync": [{"group": 1, "type": "param", "every": 2}, {"group": "world", "type": "param", "every": 4}]
}
#: name -> (torch_distributed, accum_grad_multiple_step, behavior_version, plan options)
CONFIGS = {
    "grad": ({}, 1, 31, []),
    "param 3": (
        {"reduce_type": "param", "param_sync_step": 3},
        1,
        31,
        ["--reduce-type", "param", "--param-sync-step", "3"],
    ),
    "param 3, accum 2": ({"reduce_type": "param", "param_sync_step": 3}, 2, 31, []),
    "grad, accum 2": ({}, 2, 31, []),
    "sync: node grad, world param every 2": (NODE_GRAD_WORLD_PARAM, 1, 31, []),
    "sync: rank param every 2, world param every 4": (RANK_PARAM_WORLD_PARAM, 1, 31, []),
    "param 3, behavior_version 38": ({"reduce_type": "param", "param_sync_step": 3}, 1, 38, []),
}


def run(name: str, seed: int, root: str) -> dict:
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.plan_sim import simulate_plan
    from tests.training.test_engine_sim_live import BATCH_SIZE, MAX_SEQS, NUM_EPOCHS, measured_drop, plan_and_train

    torch_distributed, accum, behavior_version, plan_options = CONFIGS[name]
    work = os.path.join(root, f"{name.replace(' ', '_').replace(',', '').replace(':', '')}_s{seed}")
    result = plan_and_train(
        work,
        seed=seed,
        torch_distributed=torch_distributed,
        accum=accum,
        behavior_version=behavior_version,
        plan_options=plan_options,
    )
    engine = EngineSettings(
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        accum_grad_multiple_step=accum,
        torch_distributed=torch_distributed,
        ranks_per_node=2,
    )
    sims, reason = simulate_plan(
        result["plan"], num_epochs=NUM_EPOCHS, file_lengths=result["file_lengths"], engine=engine
    )
    assert reason is None, reason
    taken = [s.steps_taken for s in sims]
    summary = result["summary"]
    return {
        "name": name,
        "seed": seed,
        "simulated": taken,
        "summary": summary["steps_taken"] if plan_options or not torch_distributed and accum == 1 else None,
        "logged": result["logged_steps"],
        "exact_batches": [s.steps_exact for s in sims],
        "dropped_simulated": sum(s.dropped_fraction for s in sims) / len(sims),
        "dropped_measured": measured_drop(result),
        "dropped_model": summary["batching"]["model_dropped_fraction"],
        "seconds": result["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="3,4")
    parser.add_argument("--only", default=None, help="one configuration name")
    args = parser.parse_args()
    names = [args.only] if args.only else list(CONFIGS)
    with tempfile.TemporaryDirectory(prefix="bench_engine_sim_") as root:
        for name in names:
            for seed in [int(s) for s in args.seeds.split(",")]:
                r = run(name, seed, root)
                equal = sum(a == b for a, b in zip(r["simulated"], r["logged"]))
                print(
                    f"{name:48s} seed {seed}: steps taken equal in {equal}/{len(r['logged'])} sub-epochs "
                    f"(simulated {r['simulated']}, logged {r['logged']}, batches {r['exact_batches']}); "
                    f"summary {'same' if r['summary'] == r['logged'] else r['summary']}; dropped simulated "
                    f"{100 * r['dropped_simulated']:.3f}% measured {100 * r['dropped_measured']:.3f}% "
                    f"(model {100 * r['dropped_model']:.3f}%); {r['seconds']:.0f} s",
                    flush=True,
                )


if __name__ == "__main__":
    main()

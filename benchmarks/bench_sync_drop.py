"""Benchmark: the dropped share under grad sync and param sync, measured in real 2-rank RETURNN trainings
on the CPU (torchrun, gloo, one training at a time) against the batching model with ``sync_every``
(``core.pure.batching.predict_plan_drop``, each file's own lengths).

Per seed: 12 skewed HDF files, RETURNN's cut, ``partition_epoch=2``, 6 sub-epochs, ``batch_size=150`` frames,
``max_seqs=4``, ``behavior_version=31``; trained with ``torch_distributed`` grad sync and with
``reduce_type="param"`` at ``param_sync_step`` 3 and 100. Per sub-epoch the dropped share of the frames is
measured from RETURNN's per-rank logs.

Run from the repository root: ``python benchmarks/bench_sync_drop.py [--seeds 1,2,3] [--keep DIR]``
(needs torch, returnn, h5py; about 10 s per training on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NUM_FILES, PARTITION_EPOCH, NUM_EPOCHS, BATCH_SIZE, MAX_SEQS = 12, 2, 6, 150, 4
SYNC_EVERY = (1, 3, 100)


def run(seed: int, sync_every: int, root: str) -> dict:
    from i6_shard import core
    from i6_shard.core.pure.batching import Batching, predict_plan_drop
    from i6_shard.returnn_config import sharded_files_dataset
    from tests.training.harness import hdf_seq_lengths, run_training, write_skewed_hdf_files
    from tests.training.test_engine_live import _per_rank

    work_dir = os.path.join(root, f"s{seed}_p{sync_every}")
    write_skewed_hdf_files(os.path.join(work_dir, "data"), num_files=NUM_FILES, seed=seed)
    files = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    train = sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=PARTITION_EPOCH,
        use_worker_proc=False,
        num_shards=2,
    )
    torch_distributed = {"backend": "gloo"}
    if sync_every > 1:
        torch_distributed.update(reduce_type="param", param_sync_step=sync_every)
    training = run_training(
        work_dir,
        train=train,
        num_ranks=2,
        num_epochs=NUM_EPOCHS,
        behavior_version=31,
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        torch_distributed=torch_distributed,
    )
    ranks = _per_rank(training, work_dir, NUM_FILES)
    epochs = range(1, NUM_EPOCHS + 1)
    measured = [1 - sum(ranks[(e, r)][1] for r in (0, 1)) / sum(ranks[(e, r)][2] for r in (0, 1)) for e in epochs]
    paths = [os.path.join(work_dir, f) for f in files]
    plan = core.ShardPlan(
        files,
        core.collect_file_sizes(paths).sizes,
        core.PlanSettings(num_shards=2, partition_epoch=PARTITION_EPOCH, num_epochs=NUM_EPOCHS),
    )
    lengths = [hdf_seq_lengths(p) for p in paths]
    predicted = {}
    for every in sorted({1, sync_every}):
        predicted[every] = predict_plan_drop(
            plan,
            num_epochs=NUM_EPOCHS,
            num_seqs=np.array([len(x) for x in lengths]),
            num_frames=np.array([int(x.sum()) for x in lengths]),
            file_lengths=lengths,
            sync_every=every,
            batching=Batching(batch_size=BATCH_SIZE, max_seqs=MAX_SEQS),
        )["dropped"].tolist()
    return {
        "seed": seed,
        "sync_every": sync_every,
        "measured": measured,
        "predicted": predicted[sync_every],
        "predicted_grad_model": predicted[1],
        "steps": [[ranks[(e, r)][0] for r in (0, 1)] for e in epochs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--keep", help="keep the trainings in this directory")
    args = parser.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="bench_sync_drop_")
    rows = [run(int(seed), every, root) for seed in args.seeds.split(",") for every in SYNC_EVERY]
    print("| sync | sub-epochs | measured mean | predicted (sync model) | predicted (grad model) | mean abs. error |")
    print("|---|---|---|---|---|---|")
    for every in SYNC_EVERY:
        sel = [r for r in rows if r["sync_every"] == every]
        m, p, g = (np.concatenate([r[k] for r in sel]) for k in ("measured", "predicted", "predicted_grad_model"))
        name = "grad" if every == 1 else f"param, param_sync_step={every}"
        print(
            f"| {name} | {m.size} | {100 * m.mean():.2f}% | {100 * p.mean():.2f}% | {100 * g.mean():.2f}% | "
            f"{100 * np.abs(p - m).mean():.2f} pt |"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

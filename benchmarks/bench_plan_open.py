"""Benchmark: a rank opening a plan file of 1M files and 100 full epochs (8 shards, partition_epoch 20,
num_epochs 2000) and getting its files of one sub-epoch (the last), as ShardedDistributeFilesDataset
with ``plan=`` does; against loading the whole plan (``read_plan_file``), measured in the same run.

Run: ``python benchmarks/bench_plan_open.py [--num-files N] [--full-epochs K] [--repeats R]``
Each measurement runs in its own process, which reports its time and peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from i6_shard import core
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.io.plan_file import read_plan_head
from i6_shard.core.io.plan_file import read_plan_layout
from i6_shard.core.io.npz import encode_keys
from timing import best_of, rss_mib

NUM_SHARDS, PARTITION_EPOCH = 8, 20


def _child(path: str, mode: str, repeats: int) -> None:
    """Print JSON: best time of ``mode`` and this process's peak RSS."""
    head = read_plan_head(path)  # not timed: the file list stands for the one the rank has from its config
    settings, files = head.settings, head.keys
    epoch = head.num_full_epochs * PARTITION_EPOCH
    rank = NUM_SHARDS - 1
    base_rss = rss_mib("VmRSS")
    del head

    def lazy():
        """What the dataset does with plan=: compare the file list with the plan's keys, read one full epoch."""
        h = read_plan_head(path, decode_keys=False)
        if not np.array_equal(encode_keys(files), h.keys_utf8):
            raise AssertionError("keys differ")
        order, bounds = read_plan_layout(path, full_epoch_0idx=(epoch - 1) // PARTITION_EPOCH)
        b = rank * PARTITION_EPOCH + (epoch - 1) % PARTITION_EPOCH
        return [files[i] for i in order[bounds[b] : bounds[b + 1]].tolist()]

    def dataset():
        from returnn.config import Config, global_config_ctx
        from returnn.datasets.basic import init_dataset
        from i6_shard.returnn_ext import ShardedDistributeFilesDataset

        config = Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})
        with global_config_ctx(config):
            ds = init_dataset(
                {
                    "class": ShardedDistributeFilesDataset,
                    "files": files,
                    "plan": path,
                    "get_sub_epoch_dataset": _sub_epoch,
                    "use_worker_proc": False,
                    "partition_epoch": PARTITION_EPOCH,
                    "distrib_shard_files": True,
                    "sharding_fix": True,
                    "seq_ordering": settings.seq_ordering,
                }
            )
            ds.init_seq_order(epoch=epoch)
            return ds._files_order_cache[(epoch - 1) // PARTITION_EPOCH][(epoch - 1) % PARTITION_EPOCH]

    def full():
        pf = core.read_plan_file(path)
        order, bounds = pf.layout((epoch - 1) // PARTITION_EPOCH)
        b = rank * PARTITION_EPOCH + (epoch - 1) % PARTITION_EPOCH
        return [pf.plan.keys[i] for i in order[bounds[b] : bounds[b + 1]].tolist()]

    def returnn_only():
        """Reference for the dataset: RETURNN's own DistributeFilesDataset with the same file list and a
        precomputed cache of its bins (no stat, no cut): what RETURNN spends on a 1M-file list anyway."""
        from returnn.config import Config, global_config_ctx
        from returnn.datasets.basic import init_dataset

        config = Config({"__debug_dummy_distributed_rank_and_size": (rank, NUM_SHARDS)})
        with global_config_ctx(config):
            ds = init_dataset(
                {
                    "class": "DistributeFilesDataset",
                    "files": files,
                    "get_sub_epoch_dataset": _sub_epoch,
                    "use_worker_proc": False,
                    "partition_epoch": PARTITION_EPOCH,
                    "distrib_shard_files": True,
                    "sharding_fix": True,
                    "seq_ordering": "random",
                }
            )
            ds._file_sizes = {"": 0}  # not used: the full epoch is in the cache
            ds._files_order_cache[(epoch - 1) // PARTITION_EPOCH] = [files[:1]] * PARTITION_EPOCH
            ds.init_seq_order(epoch=epoch)
            return files[:1]

    fn = {"lazy": lazy, "dataset": dataset, "full": full, "returnn_only": returnn_only}[mode]
    seconds, files = best_of(fn, repeats)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "num_files_read": len(files),
                "first": files[0],
                "peak_rss_mib": rss_mib(),
                "base_rss_mib": base_rss,
            }
        )
    )


def _sub_epoch(files):
    """A sub-epoch dataset that does not open its files (they do not exist here)."""
    return {
        "class": "DummyDataset",
        "input_dim": 1,
        "output_dim": 1,
        "num_seqs": 1,
        "seq_len": 1,
        "seq_ordering": "default",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-files", type=int, default=1_000_000)
    ap.add_argument("--full-epochs", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], args.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.npz")
        sizes = lognormal_sizes(args.num_files, seed=0)
        keys = [f"/data/corpus/shard-{i // 1000:04d}/part-{i:07d}.hdf" for i in range(args.num_files)]
        settings = core.PlanSettings(
            num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, num_epochs=args.full_epochs * PARTITION_EPOCH
        )
        t0 = time.perf_counter()
        core.save_plan(core.ShardPlan(keys, sizes, settings), path)
        print(
            f"wrote {args.num_files:,} files x {args.full_epochs} full epochs "
            f"({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s"
        )
        del keys, sizes
        results = {}
        for mode in ("lazy", "dataset", "returnn_only", "full"):
            out = subprocess.run(
                [sys.executable, __file__, "--repeats", str(args.repeats), "--child", path, mode],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                sys.exit(f"{mode} failed:\n{out.stderr}")
            out = out.stdout
            results[mode] = json.loads(out.strip().splitlines()[-1])
        assert results["lazy"]["first"] == results["full"]["first"] == results["dataset"]["first"]
        for mode, what in (
            ("lazy", "read_plan_head + key check + read_plan_layout (one full epoch)"),
            ("dataset", "ShardedDistributeFilesDataset(plan=...) start + init_seq_order(last epoch)"),
            ("returnn_only", "reference: RETURNN's DFD on the same list, bins given (no plan)"),
            ("full", "reference: read_plan_file (all full epochs)"),
        ):
            r = results[mode]
            print(
                f"{mode:12s} {r['seconds']:7.3f} s  peak RSS {r['peak_rss_mib']:7.0f} MiB  ({r['num_files_read']} "
                f"files of rank {NUM_SHARDS - 1}, sub-epoch {args.full_epochs * PARTITION_EPOCH}): {what}"
            )
        print(f"dataset - RETURNN's own: {results['dataset']['seconds'] - results['returnn_only']['seconds']:.3f} s")
        print(
            f"lazy / full: time {results['lazy']['seconds'] / results['full']['seconds']:.3f}, "
            f"peak RSS {results['lazy']['peak_rss_mib'] / results['full']['peak_rss_mib']:.3f}"
        )


if __name__ == "__main__":
    main()

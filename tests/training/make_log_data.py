"""Regenerate the committed RETURNN logs in tests/data/returnn_logs/ with real multi-rank CPU
trainings (one at a time): ``python -m tests.training.make_log_data [CASE ...]`` from the repository root.

Each case directory holds RETURNN's per-rank logs as written (no line changed), ``case.json`` (the
settings), ``file_sizes.npz`` (the files' bytes, as ``python -m i6_shard sizes`` writes them) and
``file_lengths.json`` (sequences and frames per file, read from the HDF files with h5py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from tests.training.harness import hdf_seq_lengths, run_sharded_training

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "returnn_logs")
#: Small skewed data, a few steps per sub-epoch, so that the logs stay a few KB.
DATA = {"median_seqs": 5.0, "median_frames": 20.0}
BATCH = {"batch_size": 300, "max_seqs": 10}
CASES = {
    # name: settings of run_sharded_training
    "w2_bv24": dict(num_ranks=2, num_files=16, seed=3, behavior_version=24),
    "w2_bv38_worker": dict(num_ranks=2, num_files=16, seed=3, behavior_version=38, use_worker_proc=True),
    "w4_bv24": dict(num_ranks=4, num_files=32, seed=4, behavior_version=24, data={"median_seqs": 12.0}),
    "w4_bv33_worker": dict(
        num_ranks=4, num_files=32, seed=4, behavior_version=33, use_worker_proc=True, data={"median_seqs": 12.0}
    ),
    "w2_nofix": dict(num_ranks=2, num_files=16, seed=3, behavior_version=24, sharding_fix=False),
    "w4_nofix": dict(
        num_ranks=4, num_files=32, seed=4, behavior_version=24, sharding_fix=False, data={"median_seqs": 12.0}
    ),
    "w2_bv24_nobatch": dict(num_ranks=2, num_files=16, seed=3, behavior_version=24, log_batch_size=False),
    "w2_bv38_nobatch": dict(num_ranks=2, num_files=16, seed=3, behavior_version=38, log_batch_size=False),
    "w2_balanced": dict(num_ranks=2, num_files=16, seed=3, behavior_version=24, distribution="balanced"),
}
#: Cases whose torchrun stdout (interleaved, [default<rank>]: prefixes) is kept too.
KEEP_STDOUT = {"w2_bv24"}


def make_case(name: str) -> None:
    from i6_shard import core

    settings = dict(CASES[name])
    data = {**DATA, **settings.pop("data", {})}
    out = os.path.join(DATA_DIR, name)
    with tempfile.TemporaryDirectory(prefix=f"i6_shard_logs_{name}_") as tmp:
        work = os.path.join(tmp, "run")
        sizes_path = None
        if settings.get("distribution", "returnn") != "returnn":
            # the balanced split needs the sizes; write the data first, then point the dataset at them
            from tests.training.harness import write_skewed_hdf_files

            paths = write_skewed_hdf_files(
                os.path.join(work, "data"), num_files=settings["num_files"], seed=settings["seed"], **data
            )
            sizes = core.collect_file_sizes(paths)
            sizes_path = os.path.join(tmp, "sizes_abs.npz")
            core.save_file_sizes(
                core.FileSizes(keys=[f"data/{os.path.basename(p)}" for p in paths], sizes=sizes.sizes), sizes_path
            )
        training = run_sharded_training(work, data_kwargs=data, file_sizes=sizes_path, **BATCH, **settings)
        paths = [os.path.join(work, "data", f"part{i:03d}.hdf") for i in range(settings["num_files"])]
        keys = [f"data/part{i:03d}.hdf" for i in range(settings["num_files"])]
        sizes = core.collect_file_sizes(paths)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        for path in training.log_files:
            shutil.copy(path, os.path.join(out, os.path.basename(path)))
        if name in KEEP_STDOUT:
            shutil.copy(training.stdout_path, os.path.join(out, "stdout.txt"))
        core.save_file_sizes(core.FileSizes(keys=keys, sizes=sizes.sizes), os.path.join(out, "file_sizes.npz"))
        lengths = {k: [int(len(hdf_seq_lengths(p))), int(hdf_seq_lengths(p).sum())] for k, p in zip(keys, paths)}
        with open(os.path.join(out, "file_lengths.json"), "w") as f:
            json.dump(lengths, f, indent=0, sort_keys=True)
            f.write("\n")
        case = {
            "partition_epoch": 2,
            "num_epochs": 4,
            "distribution": "returnn",
            "sharding_fix": True,
            "use_worker_proc": False,
            "log_batch_size": True,
            **settings,
            **BATCH,
            "data": data,
            "seconds": round(training.seconds, 1),
        }
        with open(os.path.join(out, "case.json"), "w") as f:
            json.dump(case, f, indent=1, sort_keys=True)
            f.write("\n")
    print(f"{name}: {training.seconds:.1f} s -> {out}", flush=True)


def main(argv=None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; choose from {list(CASES)}")
    for name in names:
        make_case(name)


if __name__ == "__main__":
    main()

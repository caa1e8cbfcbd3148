"""Keep the logs of the engine-mode trainings (tests/training/engine_cases.py) in tests/data/engine_logs/:
``python -m tests.training.make_engine_log_data [CASE ...]`` from the repository root. Each case directory holds
RETURNN's per-rank logs as written (no line changed), ``case.json`` (its settings, the dataset as JSON),
``file_lengths.json`` (sequences and frames per file) and ``seq_lengths.json`` (the frames of every sequence per
file), both read from the HDF files with h5py."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from tests.training.engine_cases import CASES, KEYS, case_settings, run_case
from tests.training.harness import hdf_seq_lengths

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "engine_logs")


def keep(name: str, work: str, out: str) -> None:
    """Copy a finished case's logs from ``work`` into ``out`` with its settings and the files' lengths."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for rank in range(2):
        log = f"returnn.torch-distrib-{rank}-2.log"
        shutil.copy(os.path.join(work, log), os.path.join(out, log))
    seqs = {k: [int(n) for n in hdf_seq_lengths(os.path.join(work, k))] for k in KEYS}
    with open(os.path.join(out, "seq_lengths.json"), "w") as f:
        json.dump(seqs, f, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "file_lengths.json"), "w") as f:
        json.dump({k: [len(v), sum(v)] for k, v in seqs.items()}, f, indent=0, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "case.json"), "w") as f:
        json.dump(case_settings(name), f, indent=1, sort_keys=True, default=repr)
        f.write("\n")


def main(names) -> None:
    for name in names or CASES:
        with tempfile.TemporaryDirectory(prefix=f"i6_shard_engine_{name}_") as tmp:
            work = os.path.join(tmp, "run")
            run_case(name, work)
            keep(name, work, os.path.join(DATA_DIR, name))


if __name__ == "__main__":
    main(sys.argv[1:])

"""The measured table of docs/rechunk.md: make-data corpora (W=4, P=10), as written and after ``rechunk``, planned by
steps under RETURNN's cut, "balanced" and "equal_steps" (free, and bounded by ``max_sub_epoch_deviation=0.1``): the
drop the exact simulation predicts and each sub-epoch's frames over the mean sub-epoch of its full epoch.

Run from the repository root: ``python benchmarks/rechunk_table.py [--keep DIR]`` (needs h5py; about two minutes on
two shared cores). Every number comes from the CLI's outputs (``summary.json``, ``plan.npz``) and the frames archive.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.cli import main as cli_main  # noqa: E402

W, P, FULL_EPOCHS, BATCH_SIZE, MAX_SEQS = 4, 10, 4, 1000, 8
#: (files, seed) of make-data: the largest file about 1.5 and 6.5 rank shares of a sub-epoch.
CORPORA = ((200, 4), (120, 102))
ROWS = (("returnn", ()), ("balanced", ()), ("equal_steps", ()), ("equal_steps", ("--max-sub-epoch-deviation", "0.1")))


def cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = cli_main(list(argv))
    if rc != 0:
        raise RuntimeError(f"python -m i6_shard {' '.join(argv)} exited with {rc}")


def frames_ratios(plan_dir: str, frames_path: str) -> np.ndarray:
    """Each sub-epoch's frames over the mean sub-epoch of its full epoch, from the plan's bins."""
    plan = core.load_plan(os.path.join(plan_dir, "plan.npz"))
    frames = core.load_file_sizes(frames_path)
    of = dict(zip(frames.keys, frames.sizes.tolist()))
    sub = np.array(
        [
            sum(of[k] for r in range(W) for k in plan.files_for(epoch=e, shard_index=r))
            for e in range(1, FULL_EPOCHS * P + 1)
        ]
    ).reshape(-1, P)
    return (sub / sub.mean(axis=1, keepdims=True)).ravel()


def measure(corpus: str, out: str) -> list:
    frames, steps = f"{corpus}.frames.npz", f"{corpus}.steps.npz"
    cli("costs", f"{corpus}/files.txt", "--unit", "frames", "-o", frames)
    cli(
        "costs",
        f"{corpus}/files.txt",
        "--unit",
        "steps",
        "--batch-size",
        str(BATCH_SIZE),
        "--max-seqs",
        str(MAX_SEQS),
        "-o",
        steps,
    )
    sizes = core.load_file_sizes(frames).sizes
    largest = float(sizes.max()) / (sizes.sum() / (W * P))
    rows = []
    for distribution, extra in ROWS:
        plan_dir = f"{out}/{os.path.basename(corpus)}_{distribution}{'_bound' if extra else ''}"
        cli("plan", "--sizes", steps, "--num-shards", str(W), "--partition-epoch", str(P), "--num-epochs",
            str(FULL_EPOCHS * P), "--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS), "--distribution",
            distribution, *extra, "--no-plot", "-o", plan_dir)  # fmt: skip
        with open(os.path.join(plan_dir, "summary.json")) as f:
            summary = json.load(f)
        ratios = frames_ratios(plan_dir, frames)
        rows.append(
            dict(
                files=len(sizes),
                largest=largest,
                distribution=distribution + (" (bound 0.1)" if extra else ""),
                dropped=summary["dropped_fraction_predicted"],
                dropped_max=summary["dropped_fraction_predicted_max"],
                lossless=sum(1 for x in summary["batching"]["per_sub_epoch"]["dropped_fraction"] if x == 0),
                low=float(ratios.min()),
                high=float(ratios.max()),
                outside=int(np.count_nonzero(np.abs(ratios - 1) > 0.1)),
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", default=None, help="work in this directory and keep it")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="i6_shard_rechunk_table_")
    print("| corpus | files | largest file (rank shares) | split | dropped mean (worst) | lossless sub-epochs "
          "| sub-epoch frames of the mean | more than 10% off |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for num_files, seed in CORPORA:
        made = f"{work}/make{num_files}"
        if not os.path.exists(made):
            cli("make-data", "-o", made, "--num-files", str(num_files), "--seed", str(seed))
        rechunked = f"{made}_rechunked"
        if not os.path.exists(rechunked):
            cli("rechunk", f"{made}/files.txt", "--num-shards", str(W), "--partition-epoch", str(P), "-o", rechunked)
        for name, corpus in ((f"make-data {num_files} (seed {seed})", made), ("  after rechunk", rechunked)):
            for row in measure(corpus, work):
                print(
                    f"| {name} | {row['files']} | {row['largest']:.2f} | {row['distribution']} | "
                    f"{100 * row['dropped']:.2f}% ({100 * row['dropped_max']:.1f}%) | {row['lossless']} of "
                    f"{FULL_EPOCHS * P} | {row['low']:.2f}-{row['high']:.2f} | {row['outside']} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())

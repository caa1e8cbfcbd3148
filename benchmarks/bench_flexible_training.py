"""Benchmark: the data a real 4-rank RETURNN training drops per sub-epoch, measured from RETURNN's
own logs, with RETURNN's cut, ``distribution="balanced"`` and ``distribution="flexible"`` on a
skewed HDF corpus in which single files exceed a rank's share of a sub-epoch. One training at a time
(torchrun, gloo, CPU, a one-layer model), through ``tests/training/harness.py``.

Per distribution it prints the dropped share of the frames, measured by the training report
(``core.reporting.train_report``) from the per-step batch sizes in the logs against the frames of
the files each rank was given, next to what the plan predicts (in frames, and in the cost it balanced),
whether every rank read the planned files, and the ratio flexible / balanced. The splits balance either
the files' sizes in bytes (what RETURNN and ``ComputeFileSizesJob`` use) or, through a sizes archive that
holds each file's frames, the frames; RETURNN's own cut always stats the files.

An HDF file carries about 38 KB besides its features, so with few features per frame bytes do not follow
frames: ``--feature-dim 40 --seq-frames 45,55`` gives files whose bytes track their frames within about
20%, as in real corpora, and the default (2 features) shows what the gap costs.

Run from the repository root: ``python benchmarks/bench_flexible_training.py [--cost bytes|frames|both]
[--corpora 2] [--full-epochs 2] [--feature-dim 2] [--seq-frames 190,210] [--keep DIR] [--distributions
returnn,balanced,flexible,flexible_auto] [--ranks 4] [--big 1] [--files 64]`` (needs torch,
returnn, dm-tree, h5py; about a minute per training on 2 cores, 10 trainings by default).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.core.pure.stats import compute_plan_stats  # noqa: E402
from i6_shard.core.pure.stats import dropped_fraction  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402
from tests.hdf_data import write_tiny_hdf_files  # noqa: E402
from tests.training import harness  # noqa: E402
from tests.training.harness import hdf_files_dataset, hdf_seq_lengths, run_training  # noqa: E402

NUM_RANKS = 4
PARTITION_EPOCH = 3
DISTRIBUTIONS = ("returnn", "balanced", "flexible")
#: The corpus: NUM_FILES lognormal files (sequences per file: median MEDIAN_SEQS, sigma SEQS_SIGMA), of which
#: NUM_BIG are then grown to BIG_SHARE times a rank's share of a sub-epoch; every sequence FRAMES frames
#: (190..210 by default) of the given feature dimension (2 by default, as the harness's model).
NUM_FILES = 64
NUM_BIG = 1
MEDIAN_SEQS, SEQS_SIGMA = 60.0, 0.5
BIG_SHARE = (1.1, 1.5)
FRAMES = (190, 210)
#: Batches of MAX_SEQS sequences (BATCH_SIZE frames never binds), so a rank makes ~90 steps per sub-epoch
#: and the last, partial batch is a small share of what it reads.
BATCH_SIZE, MAX_SEQS = 2000, 4


def seqs_per_file(seed: int) -> np.ndarray:
    """Sequences per file: lognormal, with NUM_BIG files (at random places) set to BIG_SHARE times a
    rank's share of a sub-epoch of the whole corpus (computed with the big files included)."""
    rng = np.random.RandomState(seed)
    seqs = np.maximum(1, np.round(rng.lognormal(np.log(MEDIAN_SEQS), SEQS_SIGMA, size=NUM_FILES))).astype(np.int64)
    big_at = rng.choice(NUM_FILES, size=NUM_BIG, replace=False)
    factors = rng.uniform(*BIG_SHARE, size=NUM_BIG)
    seqs[big_at] = 0
    rest, bins = int(seqs.sum()), NUM_RANKS * PARTITION_EPOCH
    # each big file b = f * total / bins with total = rest + sum(b): solve for the sum of the big files
    big_total = rest * factors.sum() / (bins - factors.sum())
    seqs[big_at] = np.round(factors * (rest + big_total) / bins).astype(np.int64)
    return seqs


def make_corpus(
    directory: str, seed: int, *, frames: Tuple[int, int] = FRAMES, feature_dim: int = 2
) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """The HDF files in ``directory/data`` (keys relative to ``directory``), their bytes and frames."""
    names = [f"part{i:03d}.hdf" for i in range(NUM_FILES)]
    write_tiny_hdf_files(
        os.path.join(directory, "data"),
        num_files=NUM_FILES,
        seed=seed,
        seqs_per_file=seqs_per_file(seed).tolist(),
        frames=frames,
        names=names,
        dim=feature_dim,
    )
    keys = [f"data/{n}" for n in names]
    paths = [os.path.join(directory, k) for k in keys]
    sizes = core.collect_file_sizes(paths).sizes
    frames = np.array([int(hdf_seq_lengths(p).sum()) for p in paths], dtype=np.int64)
    return keys, sizes, frames


def planned(
    keys: List[str],
    costs: np.ndarray,
    frames: np.ndarray,
    *,
    distribution: str,
    num_epochs: int,
    deviation: float = 0.25,
) -> Dict[str, Any]:
    """What the plan predicts: dropped share per sub-epoch in frames and in its own costs, and sub-epoch sizes
    in frames over the mean."""
    extra = {"max_sub_epoch_deviation": deviation} if distribution == "flexible" else {}
    settings = core.PlanSettings(
        num_shards=NUM_RANKS, partition_epoch=PARTITION_EPOCH, num_epochs=num_epochs, distribution=distribution, **extra
    )
    plan = core.ShardPlan(keys, costs, settings)
    # the plan's bins (cut by ``costs``), summed in frames
    by_frames = compute_plan_stats(
        core.ShardPlan(keys, frames, settings),
        num_epochs=num_epochs,
        layout=lambda k, r: plan.layout(full_epoch_0idx=k, shard_index=r),
    ).bytes
    totals = by_frames.sum(axis=1).reshape(-1, PARTITION_EPOCH)
    by_costs = compute_plan_stats(plan, num_epochs=num_epochs).bytes
    return {
        "plan": plan,
        "dropped": dropped_fraction(by_frames),
        "dropped_by_costs": dropped_fraction(by_costs),
        "size_over_mean": (totals / totals.mean(axis=1, keepdims=True)).ravel(),
    }


def run_one(
    work: str, keys: List[str], *, distribution: str, sizes_path: str, num_epochs: int, deviation: float = 0.25
) -> Dict[str, Any]:
    """One training; its per-sub-epoch dropped share measured from the logs."""
    extra = {"max_sub_epoch_deviation": deviation} if distribution == "flexible" else {}
    train = hdf_files_dataset(
        keys,
        num_shards=NUM_RANKS,
        partition_epoch=PARTITION_EPOCH,
        distribution=distribution,
        file_sizes=None if distribution == "returnn" else sizes_path,  # RETURNN's cut: its own sizes
        **extra,
    )
    training = run_training(
        work, train=train, num_ranks=NUM_RANKS, num_epochs=num_epochs, batch_size=BATCH_SIZE, max_seqs=MAX_SEQS
    )
    summary = write_train_report(
        training.log_files, os.path.join(work, "train_report"), partition_epoch=PARTITION_EPOCH, plot=False
    )
    sub = summary["sub_epochs"]
    consumed = sum(r["consumed_frames"] for s in sub for r in s["ranks"])
    available = sum(r["available_frames"] for s in sub for r in s["ranks"])
    return {
        "seconds": training.seconds,
        "dropped": np.array([s["dropped_fraction"] for s in sub]),
        "weighted": 1 - consumed / available,
        "steps": sum(s["ranks"][0]["steps"] for s in sub),
        "files": [[tuple(sorted(r_files)) for r_files in _logged_files(training, e)] for e in range(1, num_epochs + 1)],
    }


def _logged_files(training, epoch: int) -> List[List[str]]:
    """The files each rank logged for ``epoch`` (RETURNN's "using files for epoch" line)."""
    out = []
    for rank in range(training.num_ranks):
        m = re.search(rf"using files for epoch {epoch}: \[(.*)\]$", training.log_text(rank), flags=re.M)
        out.append(re.findall(r"'([^']+)'", m[1]) if m else [])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cost",
        choices=("bytes", "frames", "both"),
        default="both",
        help="what the balanced and flexible splits balance (default: both, one training each)",
    )
    parser.add_argument("--corpora", type=int, default=2, help="corpora (seeds) to train on (default 2)")
    parser.add_argument("--full-epochs", type=int, default=2, help="full epochs per training (default 2)")
    parser.add_argument(
        "--feature-dim",
        type=int,
        default=2,
        help="features per frame (default 2): with more, bytes follow frames more closely, as in "
        "real corpora (the model follows)",
    )
    parser.add_argument(
        "--seq-frames",
        default=f"{FRAMES[0]},{FRAMES[1]}",
        help=f"frames per sequence, LO,HI (default {FRAMES[0]},{FRAMES[1]})",
    )
    parser.add_argument("--keep", default=None, help="keep the trainings in this directory")
    parser.add_argument(
        "--distributions",
        default=",".join(DISTRIBUTIONS),
        help=f"the splits to train, comma-separated (default {','.join(DISTRIBUTIONS)})",
    )
    parser.add_argument(
        "--deviation", type=float, default=0.25, help="flexible's max_sub_epoch_deviation (default 0.25)"
    )
    parser.add_argument("--ranks", type=int, default=NUM_RANKS, help=f"ranks per training (default {NUM_RANKS})")
    parser.add_argument(
        "--big",
        type=int,
        default=NUM_BIG,
        help=f"files grown above a rank's share of a sub-epoch (default {NUM_BIG}; 0: none)",
    )
    parser.add_argument(
        "--files",
        type=int,
        default=NUM_FILES,
        help=f"files per corpus (default {NUM_FILES}); the corpus keeps its size, so with more files "
        f"each holds fewer sequences (median {MEDIAN_SEQS:g} * {NUM_FILES} / files)",
    )
    args = parser.parse_args()
    # the corpus, the plans and the trainings read them
    globals().update(
        NUM_RANKS=args.ranks, NUM_BIG=args.big, NUM_FILES=args.files, MEDIAN_SEQS=MEDIAN_SEQS * NUM_FILES / args.files
    )
    frames_range = tuple(int(x) for x in args.seq_frames.split(","))
    harness.FEATURE_DIM = args.feature_dim  # read by the harness when it writes each config: data and model dim
    base = args.keep or tempfile.mkdtemp(prefix="i6_shard_bench_flexible_training_")
    num_epochs = args.full_epochs * PARTITION_EPOCH
    costs_wanted = ["bytes", "frames"] if args.cost == "both" else [args.cost]
    print(
        f"{NUM_RANKS} ranks, partition_epoch={PARTITION_EPOCH}, {args.full_epochs} full epochs per training, "
        f"{NUM_FILES} HDF files per corpus ({NUM_BIG} of {BIG_SHARE[0]}..{BIG_SHARE[1]} times a rank's share of a "
        f"sub-epoch), {frames_range[0]}..{frames_range[1]} frames of {args.feature_dim} features per sequence, "
        f"max_seqs={MAX_SEQS}"
    )
    rows: List[Dict[str, Any]] = []
    start = time.monotonic()
    for corpus in range(args.corpora):
        cdir = os.path.join(base, f"corpus{corpus}")
        keys, sizes, frames = make_corpus(cdir, seed=100 + corpus, frames=frames_range, feature_dim=args.feature_dim)
        share = frames.sum() / (NUM_RANKS * PARTITION_EPOCH)
        print(
            f"\n== corpus {corpus}: {int(frames.sum()):,} frames, {int(sizes.sum()):,} bytes; largest file "
            f"{frames.max() / share:.2f} of a rank's share of a sub-epoch in frames; bytes per frame "
            f"{np.min(sizes / frames):.1f}..{np.max(sizes / frames):.1f} over the files"
        )
        for cost in costs_wanted:
            sizes_path = os.path.join(cdir, f"sizes_{cost}.npz")
            if cost == "bytes":
                core.save_file_sizes(core.FileSizes(keys=keys, sizes=sizes), sizes_path)
            else:  # a costs archive, as `costs --unit frames` writes it (with the mtimes the stale check reads)
                here = os.getcwd()
                os.chdir(cdir)  # the keys are relative to the corpus directory, as the trainings read them
                try:
                    archive = core.io.collect_file_costs(keys, unit="frames", num_procs=1)
                finally:
                    os.chdir(here)
                assert archive.costs.tolist() == frames.tolist()
                core.io.save_file_costs(archive, sizes_path)
            for distribution in args.distributions.split(","):
                if distribution == "returnn" and cost != costs_wanted[0]:
                    continue  # RETURNN cuts by its own stat sizes whatever the others balance
                work = os.path.join(cdir, f"{distribution}_{cost}")
                os.makedirs(work, exist_ok=True)  # the keys are relative to the training's working directory
                if not os.path.exists(os.path.join(work, "data")):
                    os.symlink(os.path.join(cdir, "data"), os.path.join(work, "data"))
                measured = run_one(
                    work,
                    keys,
                    distribution=distribution,
                    sizes_path=sizes_path,
                    num_epochs=num_epochs,
                    deviation=args.deviation,
                )
                unit = "bytes" if distribution == "returnn" else cost
                plan = planned(
                    keys,
                    sizes if unit == "bytes" else frames,
                    frames,
                    distribution=distribution,
                    num_epochs=num_epochs,
                    deviation=args.deviation,
                )
                as_planned = all(
                    measured["files"][e][r] == tuple(sorted(plan["plan"].files_for(epoch=e + 1, shard_index=r)))
                    for e in range(num_epochs)
                    for r in range(NUM_RANKS)
                )
                row = {
                    "corpus": corpus,
                    "cost": unit,
                    "distribution": distribution,
                    "as_planned": as_planned,
                    "planned": plan["dropped"],
                    "planned_costs": plan["dropped_by_costs"],
                    "sizes": plan["size_over_mean"],
                    **measured,
                }
                rows.append(row)
                print(
                    f"  {distribution:>8} by {unit:>6}: dropped {100 * row['dropped'].mean():5.2f}% (planned "
                    f"{100 * row['planned'].mean():5.2f}%; in {unit} {100 * row['planned_costs'].mean():5.2f}%), "
                    f"worst sub-epoch {100 * row['dropped'].max():5.2f}%, sub-epoch sizes {row['sizes'].min():.2f}.."
                    f"{row['sizes'].max():.2f}, {row['steps']} steps, files as planned: {as_planned}, "
                    f"{row['seconds']:.0f} s"
                )
    print(
        f"\n== summary: {args.corpora} corpora x {args.full_epochs} full epochs ({len(rows)} trainings, "
        f"{time.monotonic() - start:.0f} s). Dropped share of the frames per sub-epoch, measured from RETURNN's "
        "logs, and as planned (in frames, and in the cost the split balanced); sub-epoch sizes in frames over "
        "the mean of their full epoch"
    )
    print(
        f"  {'distribution':<20} {'measured':>9} {'worst':>7} {'of all frames':>13} {'planned':>8} "
        f"{'in its cost':>11} {'sizes':>10}  files as planned"
    )
    means: Dict[Tuple[str, str], float] = {}
    for cost in ("bytes", "frames"):
        for distribution in dict.fromkeys(r["distribution"] for r in rows):
            sel = [r for r in rows if r["distribution"] == distribution and r["cost"] == cost]
            if not sel:
                continue
            dropped = np.concatenate([r["dropped"] for r in sel])
            sizes = np.concatenate([r["sizes"] for r in sel])
            means[cost, distribution] = float(dropped.mean())
            print(
                f"  {distribution + ' by ' + cost:<20} {100 * dropped.mean():8.2f}% {100 * dropped.max():6.2f}% "
                f"{100 * float(np.mean([r['weighted'] for r in sel])):12.2f}% "
                f"{100 * np.concatenate([r['planned'] for r in sel]).mean():7.2f}% "
                f"{100 * np.concatenate([r['planned_costs'] for r in sel]).mean():10.2f}% "
                f"{sizes.min():.2f}..{sizes.max():.2f}  {all(r['as_planned'] for r in sel)}"
            )
    for cost in costs_wanted:
        b, f = means.get((cost, "balanced")), means.get((cost, "flexible"))
        if b:
            print(
                f"  flexible / balanced, both by {cost}, measured: {f / b:.2f} "
                f"({'at most' if f <= b / 2 else 'more than'} half)"
            )
    print(f"trainings in {base}")


if __name__ == "__main__":
    main()

"""Benchmark: the data real multi-rank RETURNN trainings drop per sub-epoch with ``distribution="equal_steps"``
(every rank's simulated steps equal per sub-epoch), next to ``"flexible_auto"`` and RETURNN's own cut, measured
from RETURNN's logs, under grad sync and under param sync. One training at a time (torchrun, gloo, CPU, a one-layer
model), through ``tests/training/harness.py``.

The corpus is skewed: lognormal sequences per file, of which ``--big`` files are grown above a rank's share of a
sub-epoch (in frames), and at least ``--files-per-bin`` files per bin (``num_shards * partition_epoch`` bins);
sequence lengths are uniform in ``--seq-frames``, so both ``batch_size`` (frames) and ``max_seqs`` bind. Every
split is planned by ``python -m i6_shard plan`` from the corpus's frames archive with the training's batch_size,
max_seqs and torch_distributed; equal_steps and flexible_auto train from the plan file (``plan=``), RETURNN's cut
from its own stat sizes (its plan is made from the bytes archive, its prediction from the frames archive's lengths).

Per training it prints the measured dropped share of the frames per sub-epoch (mean, worst, share of sub-epochs that
drop nothing), the plan's predicted drop, whether every rank read its planned files, and whether the plan's
``steps_taken`` equals the steps in RETURNN's logs in every (sub-epoch, rank), all from the training report
(``core.reporting.train_report.write_train_report`` with the plan).

Run from the repository root: ``python benchmarks/bench_equal_steps_training.py [--ranks 4,8] [--partition-epoch 2]
[--full-epochs 2] [--files-per-bin 6] [--syncs grad,param4] [--distributions equal_steps,flexible_auto,returnn]
[--first-corpus 0] [--corpora 1] [--keep DIR] [--plan-only]`` (needs torch, returnn, dm-tree, h5py; 30-60 s per
training with 4 or 8 ranks on 2 shared cores, about a second per plan with ``--plan-only``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.cli import main as cli_main  # noqa: E402
from i6_shard.core.io.plan_steps import read_planned_steps  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402
from tests.hdf_data import write_tiny_hdf_files  # noqa: E402
from tests.training.harness import hdf_files_dataset, run_training  # noqa: E402

DISTRIBUTIONS = ("equal_steps", "flexible_auto", "returnn")
SYNCS = ("grad", "param4")
#: Batching of every training: sequences of FRAMES frames (uniform), so a step holds 4..8 sequences and both limits
#: bind. behavior_version as the repository's equal_steps training test.
BATCH_SIZE, MAX_SEQS, FRAMES, BEHAVIOR_VERSION = 1000, 8, (20, 300), 31
#: Sequences per file: lognormal (median MEDIAN_SEQS, sigma SEQS_SIGMA); the big files BIG_SHARE times a rank's
#: share of a sub-epoch (of the whole corpus, the big files included).
MEDIAN_SEQS, SEQS_SIGMA, BIG_SHARE = 24.0, 0.8, (1.1, 1.5)


def seqs_per_file(seed: int, *, num_files: int, num_bins: int, num_big: int) -> np.ndarray:
    """Sequences per file: lognormal, with ``num_big`` files (at random places) set to BIG_SHARE times a bin's share
    of the corpus (sequences have one length distribution, so sequences stand for frames)."""
    rng = np.random.RandomState(seed)
    seqs = np.maximum(1, np.round(rng.lognormal(np.log(MEDIAN_SEQS), SEQS_SIGMA, size=num_files))).astype(np.int64)
    big_at = rng.choice(num_files, size=num_big, replace=False)
    factors = rng.uniform(*BIG_SHARE, size=num_big)
    seqs[big_at] = 0
    rest = int(seqs.sum())
    big_total = rest * factors.sum() / (num_bins - factors.sum())  # each big file b = f * (rest + sum(b)) / bins
    seqs[big_at] = np.round(factors * (rest + big_total) / num_bins).astype(np.int64)
    return seqs


def make_corpus(directory: str, *, seed: int, num_files: int, num_bins: int, num_big: int) -> Dict[str, Any]:
    """HDF files in ``directory/data`` (keys relative to ``directory``), their bytes archive and frames costs
    archive (``sizes_bytes.npz``, ``costs_frames.npz`` in ``directory``)."""
    names = [f"part{i:03d}.hdf" for i in range(num_files)]
    seqs = seqs_per_file(seed, num_files=num_files, num_bins=num_bins, num_big=num_big)
    write_tiny_hdf_files(
        os.path.join(directory, "data"),
        num_files=num_files,
        seed=seed,
        seqs_per_file=seqs.tolist(),
        frames=FRAMES,
        names=names,
    )
    keys = [f"data/{n}" for n in names]
    here = os.getcwd()
    os.chdir(directory)  # the keys are relative to the corpus directory, as the trainings read them
    try:
        sizes = core.collect_file_sizes(keys)
        costs = core.io.collect_file_costs(keys, unit="frames", num_procs=1)
    finally:
        os.chdir(here)
    out = {"keys": keys, "bytes": os.path.join(directory, "sizes_bytes.npz")}
    out["frames"] = os.path.join(directory, "costs_frames.npz")
    core.save_file_sizes(sizes, out["bytes"])
    core.io.save_file_costs(costs, out["frames"])
    out["frames_per_file"] = np.asarray(costs.costs, dtype=np.int64)
    return out


def torch_distributed_of(sync: str) -> Tuple[Dict[str, Any], core.SyncMode]:
    """``"grad"`` or ``"param<P>"``: the config's torch_distributed and the train report's sync mode."""
    if sync == "grad":
        return {"backend": "gloo"}, core.SyncMode()
    step = int(sync[len("param") :])
    return {"backend": "gloo", "reduce_type": "param", "param_sync_step": step}, core.SyncMode("param", step)


def make_plan(corpus: Dict[str, Any], plan_dir: str, *, distribution: str, opts: Dict[str, Any]) -> str:
    """``python -m i6_shard plan`` of one split with the training's engine settings; returns the plan file."""
    sizes = corpus["bytes"] if distribution == "returnn" else corpus["frames"]
    args = ["plan", "--sizes", sizes, "--lengths", corpus["frames"]] if distribution == "returnn" else ["plan"]
    args += [] if distribution == "returnn" else ["--sizes", sizes]
    args += ["--num-shards", str(opts["num_ranks"]), "--partition-epoch", str(opts["partition_epoch"])]
    args += ["--num-epochs", str(opts["num_epochs"]), "--distribution", distribution]
    args += ["--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS)]
    args += ["--torch-distributed", json.dumps(opts["torch_distributed"]), "--no-plot", "-o", plan_dir]
    os.makedirs(os.path.dirname(plan_dir), exist_ok=True)
    with open(plan_dir + "_output.txt", "w", encoding="utf-8") as out, contextlib.redirect_stdout(out):
        code = cli_main(args)
    if code != 0:
        raise RuntimeError(f"plan {args} failed; see {plan_dir}_output.txt")
    return os.path.join(plan_dir, "plan.npz")


def run_one(work: str, corpus: Dict[str, Any], *, distribution: str, sync: str, opts: Dict[str, Any]) -> Dict[str, Any]:
    """Plan, train and report one split under one sync mode; the measured and planned figures."""
    torch_distributed, sync_mode = torch_distributed_of(sync)
    opts = {**opts, "torch_distributed": torch_distributed}
    plan_path = make_plan(corpus, os.path.join(work, "plan"), distribution=distribution, opts=opts)
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir, exist_ok=True)
    if not os.path.exists(os.path.join(run_dir, "data")):  # the keys are relative to the training's directory
        os.symlink(os.path.join(os.path.dirname(corpus["bytes"]), "data"), os.path.join(run_dir, "data"))
    plan_opt = {} if distribution == "returnn" else {"plan": plan_path}
    train = hdf_files_dataset(
        corpus["keys"], num_shards=opts["num_ranks"], partition_epoch=opts["partition_epoch"], **plan_opt
    )
    training = run_training(
        run_dir,
        train=train,
        num_ranks=opts["num_ranks"],
        num_epochs=opts["num_epochs"],
        batch_size=BATCH_SIZE,
        max_seqs=MAX_SEQS,
        behavior_version=BEHAVIOR_VERSION,
        torch_distributed=torch_distributed,
    )
    summary = write_train_report(
        training.log_files,
        os.path.join(work, "train_report"),
        plan_path=plan_path,
        partition_epoch=opts["partition_epoch"],
        plot=False,
        sync=sync_mode,
    )
    planned = read_planned_steps(plan_path, num_shards=opts["num_ranks"], max_epoch=opts["num_epochs"])
    return _figures(summary, planned, seconds=training.seconds)


def plan_only(work: str, corpus: Dict[str, Any], *, distribution: str, sync: str, opts: Dict[str, Any]) -> Dict:
    """The plan's simulated drop per sub-epoch, no training."""
    opts = {**opts, "torch_distributed": torch_distributed_of(sync)[0]}
    plan_path = make_plan(corpus, os.path.join(work, "plan"), distribution=distribution, opts=opts)
    planned = read_planned_steps(plan_path, num_shards=opts["num_ranks"], max_epoch=opts["num_epochs"])
    return {"planned": np.asarray(planned["dropped"], dtype=float), "exact": all(planned["exact"])}


def _figures(summary: Dict[str, Any], planned: Dict[str, Any], *, seconds: float) -> Dict[str, Any]:
    """Measured and planned drop per sub-epoch, files and steps against the plan per (sub-epoch, rank)."""
    sub = summary["sub_epochs"]
    records = [r for s in sub for r in s["ranks"]]
    steps = [(r["steps"], r.get("planned_steps")) for r in records]
    return {
        "seconds": seconds,
        "dropped": np.array([s["dropped_fraction"] for s in sub], dtype=float),
        "planned": np.asarray(planned.get("dropped", []), dtype=float),
        "files_as_planned": all(r.get("files_match_plan") for r in records),
        "steps_as_planned": sum(a == b for a, b in steps),
        "records": len(steps),
        "steps_mismatch": [
            (r["epoch"], r["rank"], r["steps"], r.get("planned_steps"))
            for r in records
            if r["steps"] != r.get("planned_steps")
        ][:8],
        "steps_per_rank": [r["steps"] for r in records],
        "exact": bool(planned.get("simulated")) and all(planned.get("exact") or [False]),
    }


def _print_row(label: str, row: Dict[str, Any]) -> None:
    d, p = row["dropped"], row["planned"]
    print(
        f"  {label:<34} measured {100 * d.mean():6.3f}% (worst {100 * d.max():6.3f}%, lossless "
        f"{100 * np.mean(d <= 0):5.1f}%), predicted {100 * np.nanmean(p):6.3f}% "
        f"(gap {100 * abs(np.nanmean(p) - d.mean()):5.3f} pt, exact sim {row['exact']}), files as planned "
        f"{row['files_as_planned']}, steps as planned {row['steps_as_planned']}/{row['records']}, "
        f"steps/rank {min(row['steps_per_rank'])}..{max(row['steps_per_rank'])}, {row['seconds']:.0f} s"
    )
    if row["steps_mismatch"]:
        print(f"    steps differing (epoch, rank, logged, planned): {row['steps_mismatch']}")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="4,8", help="world sizes to train, comma-separated (default 4,8)")
    parser.add_argument("--partition-epoch", type=int, default=2, help="sub-epochs per full epoch (default 2)")
    parser.add_argument("--full-epochs", type=int, default=2, help="full epochs per training (default 2)")
    parser.add_argument(
        "--files-per-bin", type=int, default=6, help="files per bin: num_files = this * ranks * partition_epoch"
    )
    parser.add_argument("--big", type=int, default=1, help="files above a rank's share of a sub-epoch (default 1)")
    parser.add_argument(
        "--syncs", default=",".join(SYNCS), help="sync modes: grad, param<P> (default grad,param4), comma-separated"
    )
    parser.add_argument("--distributions", default=",".join(DISTRIBUTIONS), help="the splits, comma-separated")
    parser.add_argument("--corpora", type=int, default=1, help="corpora per world size (default 1)")
    parser.add_argument(
        "--first-corpus", type=int, default=0, help="the first corpus: corpus c has seed 200 + c (default 0)"
    )
    parser.add_argument("--keep", default=None, help="keep the trainings in this directory")
    parser.add_argument(
        "--plan-only",
        action="store_true",
        help="plan only, no training: the plans' simulated drop per corpus (the simulation is exact where the "
        "trainings above matched it), e.g. with --corpora 20 to see how often a sub-epoch is left unequal",
    )
    return parser.parse_args()


def main() -> None:
    args = _parse()
    base = args.keep or tempfile.mkdtemp(prefix="i6_shard_bench_equal_steps_training_")
    pe = args.partition_epoch
    print(
        f"partition_epoch={pe}, {args.full_epochs} full epochs, {args.files_per_bin} files per bin, {args.big} big "
        f"file(s) of {BIG_SHARE[0]}..{BIG_SHARE[1]} of a rank's share, {FRAMES[0]}..{FRAMES[1]} frames per sequence, "
        f"batch_size={BATCH_SIZE}, max_seqs={MAX_SEQS}, behavior_version={BEHAVIOR_VERSION}"
    )
    rows: List[Tuple[str, Dict[str, Any]]] = []
    start = time.monotonic()
    for num_ranks in [int(x) for x in args.ranks.split(",")]:
        for c in range(args.first_corpus, args.first_corpus + args.corpora):
            cdir = os.path.join(base, f"w{num_ranks}_corpus{c}")
            num_files = args.files_per_bin * num_ranks * pe
            corpus = make_corpus(cdir, seed=200 + c, num_files=num_files, num_bins=num_ranks * pe, num_big=args.big)
            frames = corpus["frames_per_file"]
            print(
                f"\n== {num_ranks} ranks, corpus {c}: {num_files} files, {int(frames.sum()):,} frames; largest file "
                f"{frames.max() * num_ranks * pe / frames.sum():.2f} of a rank's share of a sub-epoch"
            )
            opts = {"num_ranks": num_ranks, "partition_epoch": pe, "num_epochs": args.full_epochs * pe}
            for sync in args.syncs.split(","):
                for distribution in args.distributions.split(","):
                    work = os.path.join(cdir, f"{distribution}_{sync}")
                    if args.plan_only:
                        rows.append(
                            (
                                f"W={num_ranks} c{c} {sync} {distribution}",
                                plan_only(work, corpus, distribution=distribution, sync=sync, opts=opts),
                            )
                        )
                        continue
                    row = run_one(work, corpus, distribution=distribution, sync=sync, opts=opts)
                    label = f"W={num_ranks} c{c} {sync} {distribution}"
                    rows.append((label, row))
                    _print_row(label, row)
    _summary(rows, seconds=time.monotonic() - start)
    print(f"trainings in {base}")


def _summary(rows: List[Tuple[str, Dict[str, Any]]], *, seconds: float) -> None:
    if rows and "dropped" not in rows[0][1]:
        _plan_summary(rows, seconds=seconds)
        return
    print(f"\n== summary ({len(rows)} trainings, {seconds:.0f} s)")
    for label, row in rows:
        _print_row(label, row)
    pooled: Dict[str, Optional[np.ndarray]] = {}
    for label, row in rows:
        dist = label.rsplit(" ", 1)[1]
        pooled[dist] = np.concatenate([pooled.get(dist, np.zeros(0)), row["dropped"]])
    for dist, d in pooled.items():
        print(f"  {dist}: {len(d)} sub-epochs, mean {100 * d.mean():.3f}%, lossless {100 * np.mean(d <= 0):.1f}%")


def _plan_summary(rows: List[Tuple[str, Dict[str, Any]]], *, seconds: float) -> None:
    """Per world size, sync and split: the plans' simulated drop over all corpora, and which sub-epochs of a full
    epoch (by position) were left lossy."""
    print(f"\n== plans only ({len(rows)} plans, {seconds:.0f} s): simulated drop per sub-epoch over the corpora")
    groups: Dict[str, List[np.ndarray]] = {}
    for label, row in rows:
        w, _, sync, dist = label.split(" ")
        groups.setdefault(f"{w} {sync} {dist}", []).append(row["planned"])
    for key, drops in groups.items():
        d = np.stack(drops)  # [corpora, sub-epochs]
        lossy_at = [int(x) for x in np.nonzero(d > 0)[1]]
        print(
            f"  {key:<28} {d.size} sub-epochs: mean {100 * d.mean():.3f}%, worst {100 * d.max():.3f}%, lossless "
            f"{100 * np.mean(d <= 0):.1f}%; lossy sub-epochs by index (0-based): {sorted(lossy_at)}"
        )


if __name__ == "__main__":
    main()

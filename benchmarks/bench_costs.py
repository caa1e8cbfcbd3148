"""Benchmark: balancing by bytes, frames, sequences or expected steps, and the predicted versus the measured
drop, in real multi-rank RETURNN trainings on the CPU (torchrun, gloo, 4 ranks, one training at a time).

Skewed HDF files (lognormal sequence counts and lengths), ``batch_size`` in frames and ``max_seqs``.
Each unit trains the balanced split (``distribution="balanced"``) fed with that unit's archive through
the builder's ``file_sizes=``; RETURNN's own cut (by bytes) trains for reference. Per sub-epoch the
dropped share of the frames is measured from RETURNN's per-rank logs (``write_train_report``), and
compared with the byte formula ``1 - W min / sum`` (what the plan reported until now), the same formula
on frames, and the batching model (``core.pure.batching``, from the costs archive alone). Also the time
of the costs pass against the stat pass over the same files.

Run from the repository root: ``python benchmarks/bench_costs.py [--quick] [--keep DIR] [--reuse DIR]``
(needs torch, returnn, h5py; ``--reuse`` analyses trainings kept by an earlier ``--keep``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import core  # noqa: E402
from i6_shard.core.pure.stats import compute_plan_stats  # noqa: E402
from i6_shard.core.io.file_costs import FileCosts, collect_file_costs, load_file_costs, save_file_costs  # noqa: E402
from i6_shard.core.pure.batching import Batching, predict_plan_drop  # noqa: E402
from i6_shard.core.pure.stats import dropped_fraction  # noqa: E402
from i6_shard.core.reporting.train_report import write_train_report  # noqa: E402
from tests.training.harness import hdf_seq_lengths, run_sharded_training, torch_available  # noqa: E402
import tests.training.harness as harness  # noqa: E402

_write_files = harness.write_skewed_hdf_files


def write_skewed_hdf_files(directory: str, *, num_files: int, seed: int, **kwargs) -> List[str]:
    """The harness's files, written only when missing: the same seed writes the same files, and writing
    them again for every training would change their modification times, which the costs archives
    recorded (a rank then refuses them as stale)."""
    paths = [os.path.abspath(os.path.join(directory, f"part{i:03d}.hdf")) for i in range(num_files)]
    if all(os.path.isfile(p) for p in paths):
        return paths
    return _write_files(directory, num_files=num_files, seed=seed, **kwargs)


harness.write_skewed_hdf_files = write_skewed_hdf_files  # run_sharded_training writes through it

NUM_FILES, NUM_RANKS, PARTITION_EPOCH, NUM_EPOCHS = 64, 4, 3, 12
BATCHING = Batching(batch_size=2000, max_seqs=20)
DATA = {
    "median_seqs": 60.0,
    "seqs_sigma": 1.0,
    "max_seqs_per_file": 1000,
    "median_frames": 30.0,
    "frames_sigma": 0.6,
    "max_frames": 150,
}
SEED = 13
#: name: (distribution, unit of the archive given as file_sizes; None: RETURNN stats the files itself)
RUNS = {
    "returnn cut (bytes)": ("returnn", None),
    "balanced by bytes": ("balanced", "bytes"),
    "balanced by frames": ("balanced", "frames"),
    "balanced by seqs": ("balanced", "seqs"),
    "balanced by steps": ("balanced", "steps"),
    "flexible by frames": ("flexible", "frames"),
    "flexible by steps": ("flexible", "steps"),
    "flexible by frames, 0.9": ("flexible", "frames", 0.9),
    "flexible by steps, 0.9": ("flexible", "steps", 0.9),
    "flexible_auto by frames": ("flexible_auto", "frames"),
    "flexible_auto by steps": ("flexible_auto", "steps"),
}


def _run(name: str):
    """``(distribution, unit, max_sub_epoch_deviation)`` of a run (the deviation None: the default)."""
    distribution, unit, *deviation = RUNS[name]
    return distribution, unit, (deviation[0] if deviation else None)


QUICK = ["balanced by bytes", "balanced by frames"]


def make_archives(base: str) -> Dict[str, Any]:
    """The data once (in ``base/data``), its sizes and costs archives keyed as the trainings name the files."""
    paths = write_skewed_hdf_files(os.path.join(base, "data"), num_files=NUM_FILES, seed=SEED, **DATA)
    keys = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
    t0 = time.perf_counter()
    sizes = core.collect_file_sizes(paths)
    t_stat = time.perf_counter() - t0
    out = {"keys": keys, "paths": paths, "t_stat": t_stat}
    core.save_file_sizes(
        core.FileSizes(keys=keys, sizes=sizes.sizes, mtimes=sizes.mtimes), os.path.join(base, "bytes.npz")
    )
    for unit in ("frames", "seqs", "steps"):
        t0 = time.perf_counter()
        costs = collect_file_costs(paths, unit=unit, num_procs=1, batching=BATCHING if unit == "steps" else None)
        out[f"t_{unit}"] = time.perf_counter() - t0
        save_file_costs(
            FileCosts(
                keys=keys,
                costs=costs.costs,
                unit=unit,
                num_seqs=costs.num_seqs,
                num_frames=costs.num_frames,
                seq_length_quantiles=costs.seq_length_quantiles,
                seq_lengths=costs.seq_lengths,
                mtimes=costs.mtimes,
                batching=costs.batching,
            ),
            os.path.join(base, f"{unit}.npz"),
        )
    return out


def train(name: str, base: str, reuse: bool) -> str:
    distribution, unit, deviation = _run(name)
    work = os.path.join(base, name.replace(" ", "_").replace("(", "").replace(")", "").replace(",", ""))
    if reuse and os.path.isfile(os.path.join(work, f"returnn.torch-distrib-0-{NUM_RANKS}.log")):
        return work
    os.makedirs(work, exist_ok=True)
    if not os.path.exists(os.path.join(work, "data")):
        os.symlink(os.path.join(base, "data"), os.path.join(work, "data"))
    # run_sharded_training finds the files there (written once, see write_skewed_hdf_files): the archives stay valid
    run_sharded_training(
        work,
        num_ranks=NUM_RANKS,
        num_files=NUM_FILES,
        seed=SEED,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=NUM_EPOCHS,
        distribution=distribution,
        data_kwargs=DATA,
        file_sizes=None if unit is None else os.path.join(base, f"{unit}.npz"),
        batch_size=BATCHING.batch_size,
        max_seqs=BATCHING.max_seqs,
        max_sub_epoch_deviation=deviation,
    )
    return work


def analyse(name: str, work: str, base: str, keys) -> Dict[str, Any]:
    distribution, unit, deviation = _run(name)
    costs_of = {u: core.load_file_sizes(os.path.join(base, f"{u}.npz")) for u in ("bytes", "frames", "seqs", "steps")}
    frames_costs = load_file_costs(os.path.join(base, "frames.npz"))
    unit = unit or "bytes"
    settings = core.PlanSettings(
        num_shards=NUM_RANKS,
        partition_epoch=PARTITION_EPOCH,
        num_epochs=NUM_EPOCHS,
        distribution=distribution,
        unit=unit,
        **({} if deviation is None else {"max_sub_epoch_deviation": deviation}),
    )
    plan = core.ShardPlan(keys, costs_of[unit].sizes, settings)
    plan_path = os.path.join(work, "plan.npz")
    core.save_plan(plan, plan_path)
    logs = [os.path.join(work, f"returnn.torch-distrib-{r}-{NUM_RANKS}.log") for r in range(NUM_RANKS)]
    summary = write_train_report(logs, os.path.join(work, "report"), plan_path=plan_path, plot=False)
    measured = np.array([se["dropped_fraction"] for se in summary["sub_epochs"]], dtype=np.float64)
    matches = all(bool(x["files_match_plan"]) for se in summary["sub_epochs"] for x in se["ranks"])
    steps = np.array([[x["steps"] for x in se["ranks"]] for se in summary["sub_epochs"]])

    def formula(u: str) -> np.ndarray:
        return dropped_fraction(
            compute_plan_stats(
                core.ShardPlan(keys, costs_of[u].sizes, settings), num_epochs=NUM_EPOCHS, layout=plan_layout(plan)
            ).bytes
        )

    def predicted(**lengths) -> Dict[str, Any]:
        """The drop model under BATCHING from the frames archive's counts and the sequence ``lengths`` it is given."""
        return predict_plan_drop(
            plan,
            num_epochs=NUM_EPOCHS,
            num_seqs=frames_costs.num_seqs,
            num_frames=frames_costs.num_frames,
            batching=BATCHING,
            **lengths,
        )

    model = predicted(seq_length_quantiles=frames_costs.seq_length_quantiles)
    exact = predicted(file_lengths=[hdf_seq_lengths(os.path.join(base, k)) for k in keys])
    return {
        "name": name,
        "measured": measured,
        "bytes_formula": formula("bytes"),
        "frames_formula": formula("frames"),
        "model": model["dropped"],
        "model_lengths": exact["dropped"],
        "floor": model["floor"],
        "steps": steps,
        "steps_predicted": model["steps_mean"],
        "files_match_plan": matches,
    }


def plan_layout(plan):
    def layout(k, r):
        return plan.layout(full_epoch_0idx=k, shard_index=r)

    return layout


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if np.std(a) > 0 and np.std(b) > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    parser.add_argument("--keep", default=None, help="keep the data and trainings in this directory")
    parser.add_argument("--reuse", action="store_true", help="with --keep: analyse trainings already there")
    parser.add_argument("--json", default=None, help="also write the per-sub-epoch figures here")
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed of the data (default {SEED})")
    parser.add_argument(
        "--only",
        action="append",
        choices=list(RUNS),
        default=None,
        help="train only this split (repeatable; with --keep --reuse the others kept are analysed)",
    )
    args = parser.parse_args()
    globals()["SEED"] = args.seed
    if not torch_available():
        print("torch is not installed: no training can run; skipped")
        return
    base = args.keep or tempfile.mkdtemp(prefix="i6_shard_bench_costs_")
    os.makedirs(base, exist_ok=True)
    info = make_archives(base)
    print(
        f"{NUM_FILES} files, {NUM_RANKS} ranks, partition_epoch={PARTITION_EPOCH}, num_epochs={NUM_EPOCHS}, "
        f"{BATCHING.as_dict()}; data {DATA}"
    )
    print(
        f"stat pass {info['t_stat'] * 1e3:.1f} ms; costs pass: frames {info['t_frames'] * 1e3:.1f} ms "
        f"({info['t_frames'] / info['t_stat']:.1f}x the stat pass, stat included), seqs {info['t_seqs'] * 1e3:.1f} ms"
    )
    names = QUICK if args.quick else list(RUNS)
    if args.only:
        kept = [
            n
            for n in names
            if args.reuse
            and os.path.isfile(
                os.path.join(
                    base,
                    n.replace(" ", "_").replace("(", "").replace(")", ""),
                    f"returnn.torch-distrib-0-{NUM_RANKS}.log",
                )
            )
        ]
        names = [n for n in names if n in args.only or n in kept]
    results = []
    for name in names:
        t0 = time.monotonic()
        work = train(name, base, args.reuse)
        r = analyse(name, work, base, info["keys"])
        results.append(r)
        m = r["measured"]
        print(
            f"\n== {name} (training + analysis {time.monotonic() - t0:.0f} s; files as planned: "
            f"{r['files_match_plan']})"
        )
        print(
            f"  {'epoch':>5} {'steps per rank':>20} {'predicted':>20} {'measured':>9} {'model':>7} "
            f"{'model(L)':>8} {'floor':>6} {'frames f.':>9} {'bytes f.':>8}"
        )
        for e in range(len(m)):
            print(
                f"  {e + 1:>5} {str(r['steps'][e].tolist()):>20} {str(np.round(r['steps_predicted'][e], 1).tolist()):>20}"
                f" {100 * m[e]:>8.2f}% {100 * r['model'][e]:>6.2f}% {100 * r['model_lengths'][e]:>7.2f}% "
                f"{100 * r['floor'][e]:>5.2f}% {100 * r['frames_formula'][e]:>8.2f}% {100 * r['bytes_formula'][e]:>7.2f}%"
            )
        for label, key in (
            ("model", "model"),
            ("model, files' own lengths", "model_lengths"),
            ("frames formula", "frames_formula"),
            ("bytes formula", "bytes_formula"),
        ):
            p = r[key]
            print(
                f"  {label:<26} mean {100 * p.mean():5.2f}% vs measured {100 * m.mean():5.2f}% "
                f"(|mean diff| {100 * abs(p.mean() - m.mean()):.2f} pts, mean |diff| per sub-epoch "
                f"{100 * np.mean(np.abs(p - m)):.2f} pts, corr {_corr(p, m):.2f})"
            )
        print(
            f"  measured worst sub-epoch {100 * m.max():.2f}%; step floor (model, even split) "
            f"{100 * r['floor'].mean():.2f}%"
        )
    by_name = {r["name"]: r for r in results}
    if "balanced by bytes" in by_name:
        ref = by_name["balanced by bytes"]["measured"].mean()
        print("\nmeasured mean drop relative to balanced by bytes:")
        for r in results:
            print(f"  {r['name']:<22} {100 * r['measured'].mean():5.2f}%  ({r['measured'].mean() / ref:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in r.items()} for r in results],
                f,
                indent=1,
            )
    print(f"\ndata and trainings in {base}")


if __name__ == "__main__":
    main()

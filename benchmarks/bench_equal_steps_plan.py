"""Benchmark: the whole ``python -m i6_shard plan`` command for one full epoch with ``--distribution equal_steps``
against ``--distribution flexible_auto`` (the cut it starts from), side by side in one process, on a speech-like
corpus: 100k files of 1..7 sequences each (uniform), lognormal lengths of median 100 and mean 120 frames, so that
half the sequences are longer than ``batch_size // max_seqs`` = 2000 // 20 = 100 (those can end a batch before it
holds ``max_seqs``), W=8, P=20, grad sync, costs by steps (a costs archive with every sequence's length, as
``python -m i6_shard costs --unit steps`` writes it).

Per run it prints wall and CPU seconds (``resource.getrusage``) of each command, their ratio (the goal: equal_steps at
most 1.5x flexible_auto), and of equal_steps' search alone (``equalize_steps``, timed by wrapping the function the
cut calls; the goal: at most 10 s), and the sub-epoch sizes of the equal_steps plan in frames (the goal of the
bound: each within 10% of the mean). The machine's load moves wall time; CPU time much less.

Run from the repository root: ``python benchmarks/bench_equal_steps_plan.py [--files 100000] [--repeats 2]
[--no-plot] [--preload N] [--unit steps|frames] [--max-sub-epoch-deviation D] [--profile FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from i6_shard import cli  # noqa: E402
from i6_shard.core.io.file_costs import FileCosts, save_file_costs  # noqa: E402
from i6_shard.core.pure import equal_steps_cut  # noqa: E402
from i6_shard.core.pure.batching import Batching  # noqa: E402
from i6_shard.core.pure.costs import cost_arrays, sorted_length_quantiles  # noqa: E402

BATCH_SIZE, MAX_SEQS, NUM_SHARDS, PARTITION_EPOCH = 2000, 20, 8, 20
RATIO_GOAL, SEARCH_GOAL = 1.5, 10.0


def speech_lengths(num_files: int, *, seed: int = 0):
    """Per file 1..7 sequences, lengths lognormal with median 100 and mean 120 frames (sigma sqrt(2 ln 1.2))."""
    rng = np.random.RandomState(seed)
    counts = rng.randint(1, 8, size=num_files)
    sigma = float(np.sqrt(2 * np.log(1.2)))
    flat = np.clip(np.round(rng.lognormal(np.log(100), sigma, size=int(counts.sum()))), 5, 1500).astype(np.int64)
    return np.split(flat, np.cumsum(counts)[:-1])


def write_archive(path: str, lengths, *, unit: str) -> None:
    keys = [f"/corpus/part-{i:06d}.hdf" for i in range(len(lengths))]
    batching = Batching(BATCH_SIZE, MAX_SEQS) if unit == "steps" else None
    arrays = cost_arrays(lengths, unit=unit, batching=batching, names=keys)
    quantiles = sorted_length_quantiles(np.sort(np.concatenate(lengths)))
    costs = FileCosts(
        keys=keys,
        costs=arrays["costs"],
        unit=unit,
        num_seqs=arrays["num_seqs"],
        num_frames=arrays["num_frames"],
        seq_length_quantiles=quantiles,
        batching=batching,
        seq_lengths=arrays["seq_lengths"],
        batch_lengths="cost_stream",
    )
    save_file_costs(costs, path)


class SearchClock:
    """Wraps the ``equalize_steps`` that equal_steps' cut calls (looked up in :mod:`equal_steps_cut` per full epoch)
    to add up the CPU and wall seconds of the search alone."""

    def __init__(self):
        self.cpu = self.wall = 0.0
        self.calls = 0
        self._inner = equal_steps_cut.equalize_steps

    def __call__(self, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return self._inner(*args, **kwargs)
        finally:
            self.cpu += time.process_time() - c0
            self.wall += time.perf_counter() - t0
            self.calls += 1


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_plan(archive: str, out_dir: str, distribution: str, args) -> dict:
    """One ``plan`` command in this process; its wall and CPU seconds (and equal_steps' search)."""
    argv = ["plan", "--sizes", archive, "--num-shards", str(NUM_SHARDS), "--partition-epoch", str(PARTITION_EPOCH)]
    argv += ["--num-epochs", str(PARTITION_EPOCH), "--distribution", distribution]
    argv += ["--batch-size", str(BATCH_SIZE), "--max-seqs", str(MAX_SEQS), "-o", out_dir]
    argv += ["--no-plot"] if args.no_plot else []
    if args.preload is not None:
        argv += ["--preload-next-n-sub-epochs", str(args.preload)]
    if args.max_sub_epoch_deviation is not None:
        argv += ["--max-sub-epoch-deviation", str(args.max_sub_epoch_deviation)]
    clock = SearchClock()
    equal_steps_cut.equalize_steps = clock
    printed = io.StringIO()
    try:
        t0, c0 = time.perf_counter(), cpu_seconds()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            code = cli.main(argv)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    finally:
        equal_steps_cut.equalize_steps = clock._inner
    if code != 0:
        raise RuntimeError(f"plan {argv} exited {code}:\n{printed.getvalue()[-3000:]}")
    with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    with open(os.path.join(out_dir, "plan.npz"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return {"wall": wall, "cpu": cpu, "search": clock, "summary": summary, "digest": digest}


def sub_epoch_frames(out_dir: str, lengths) -> np.ndarray:
    """Frames of each sub-epoch of the plan file (first full epoch, sharded layout)."""
    with np.load(os.path.join(out_dir, "plan.npz")) as npz:
        orders, bounds = npz["orders"], npz["bounds"]
    frames = np.array([int(x.sum()) for x in lengths], dtype=np.int64)
    per_bin = np.add.reduceat(frames[orders[0, 0].astype(np.int64)], bounds[0, 0][:-1])
    return per_bin.reshape(NUM_SHARDS, PARTITION_EPOCH).sum(axis=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1, help="alternating pairs of runs")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--preload",
        type=int,
        default=None,
        help="--preload-next-n-sub-epochs (default: RETURNN's 1, so that the plan also holds the next full epoch's "
        "first sub-epoch and equal_steps searches two full epochs; 0: exactly one)",
    )
    parser.add_argument("--unit", choices=("steps", "frames"), default="steps")
    parser.add_argument("--max-sub-epoch-deviation", type=float, default=None)
    parser.add_argument("--profile", default=None, help="write cProfile stats of the equal_steps runs to this file")
    args = parser.parse_args()
    lengths = speech_lengths(args.files)
    flat = np.concatenate(lengths)
    print(
        f"corpus: {args.files} files, {flat.size} sequences (1..7 per file), {int(flat.sum())} frames, mean length "
        f"{flat.mean():.1f}, {np.mean(flat > BATCH_SIZE // MAX_SEQS):.1%} longer than batch_size // max_seqs = "
        f"{BATCH_SIZE} // {MAX_SEQS}; W={NUM_SHARDS}, P={PARTITION_EPOCH}, one full epoch, grad sync, costs in "
        f"{args.unit}, {'no plot' if args.no_plot else 'with the plot'}, "
        f"--preload-next-n-sub-epochs {'1 (default)' if args.preload is None else args.preload}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        archive = os.path.join(tmp, f"costs_{args.unit}.npz")
        write_archive(archive, lengths, unit=args.unit)
        profiler = None
        if args.profile:
            import cProfile

            profiler = cProfile.Profile()
        for rep in range(args.repeats):
            got = {}
            for dist in ("flexible_auto", "equal_steps") if rep % 2 == 0 else ("equal_steps", "flexible_auto"):
                out_dir = os.path.join(tmp, f"{dist}_{rep}")
                if profiler is not None and dist == "equal_steps":
                    profiler.enable()
                got[dist] = run_plan(archive, out_dir, dist, args)
                if profiler is not None and dist == "equal_steps":
                    profiler.disable()
                got[dist]["frames"] = sub_epoch_frames(out_dir, lengths)
            report(rep, got)
        if profiler is not None:
            profiler.dump_stats(args.profile)


def report(rep: int, got: dict) -> None:
    flex, eq = got["flexible_auto"], got["equal_steps"]
    search = eq["search"]
    ratio_wall, ratio_cpu = eq["wall"] / flex["wall"], eq["cpu"] / flex["cpu"]
    print(f"run {rep + 1}:")
    for name, res in (("flexible_auto", flex), ("equal_steps", eq)):
        frames = res["frames"]
        dev = frames / frames.mean() - 1
        print(
            f"  {name:<14} plan command {res['wall']:6.1f} s wall, {res['cpu']:6.1f} s CPU; dropped (simulated) "
            f"{100 * res['summary']['dropped_fraction_predicted']:.3f}%; sub-epoch frames {dev.min():+.1%}.."
            f"{dev.max():+.1%} of the mean; plan.npz sha256 {res['digest']}"
        )
    print(
        f"  equal_steps / flexible_auto: {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU (goal <= {RATIO_GOAL}x: "
        f"{'ok' if ratio_cpu <= RATIO_GOAL else 'MISSED'} by CPU)"
    )
    print(
        f"  equal_steps search (equalize_steps, {search.calls} call(s)): {search.wall:.1f} s wall, {search.cpu:.1f} s "
        f"CPU (goal <= {SEARCH_GOAL:.0f} s: {'ok' if search.cpu <= SEARCH_GOAL else 'MISSED'} by CPU)",
        flush=True,
    )


if __name__ == "__main__":
    main()

"""Command line: ``python -m i6_shard {sizes,plan,report,demo} ...``. Parses arguments,
calls the core, prints; no logic of its own."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import core
from .core.io import DEFAULT_NUM_THREADS, make_demo_files
from .core.pure import SEED_LIMIT
from .core.reporting import MISSING_MATPLOTLIB, matplotlib_available, plot_plan, plot_title


def _cmd_sizes(args: argparse.Namespace) -> int:
    core.check_output_path(args.output)  # before any stat call
    trees = core.read_file_list(args.file_list)
    sizes = core.collect_file_sizes(trees, num_threads=args.threads)
    core.save_file_sizes(sizes, args.output)
    print(f"{len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {args.output}")
    return 0


def _settings(args: argparse.Namespace) -> core.PlanSettings:
    """The CLI's plan options as validated PlanSettings (raises before any file is touched)."""
    return core.PlanSettings(
        num_shards=args.num_shards, partition_epoch=args.partition_epoch, num_epochs=args.num_epochs,
        seq_ordering=args.seq_ordering, random_seed_offset=args.random_seed_offset,
        fixed_random_seed=args.fixed_random_seed, distrib_shard_files=not args.unsharded,
        same_seed_on_all_ranks=args.same_seed_on_all_ranks, distribution=args.distribution)


_PLAN_OUTPUTS = (core.PLAN_FILE, core.SUMMARY_FILE, core.REPORT_FILE, core.PLOT_FILE)


def _check_output_dir(out: str, files=_PLAN_OUTPUTS, dirs=()) -> None:
    """The output directory can be created or written, and none of the names in it is in the way."""
    core.check_output_path(out, directory=True)
    if os.path.isdir(out):
        for name in files:
            core.check_output_path(os.path.join(out, name))
        for name in dirs:
            core.check_output_path(os.path.join(out, name), directory=True)


def _write_and_print(plan: core.ShardPlan, *, out: str, plot: bool) -> None:
    if plot and not matplotlib_available():
        print(f"note: {MISSING_MATPLOTLIB}; writing no plot", file=sys.stderr)
        plot = False
    os.makedirs(out, exist_ok=True)
    paths = {name: os.path.join(out, fn) for name, fn in (
        ("plan_path", core.PLAN_FILE), ("summary_path", core.SUMMARY_FILE), ("report_path", core.REPORT_FILE))}
    plot_path = os.path.join(out, core.PLOT_FILE) if plot else None
    summary = core.write_plan_outputs(plan, plot_path=plot_path, **paths)
    print(core.render_report(summary), end="")
    print()
    print(f"plan    -> {paths['plan_path']}")
    print(f"summary -> {paths['summary_path']}")
    print(f"report  -> {paths['report_path']}")
    if plot_path is not None:
        print(f"plot    -> {plot_path}")


def _cmd_plan(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _check_output_dir(args.output)
    sizes = core.load_file_sizes(args.sizes)
    plan = core.ShardPlan(sizes.keys, sizes.sizes, settings)  # checks the files against the settings
    _write_and_print(plan, out=args.output, plot=not args.no_plot)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    if args.plot is not None:
        if os.path.splitext(args.plot)[1].lower() != ".png":
            raise ValueError(f"--plot {args.plot!r}: the plot is a PNG image; give a path ending in .png")
        core.check_output_path(args.plot)
    path = os.path.join(args.dir, core.PLAN_FILE) if os.path.isdir(args.dir) else args.dir
    plan_file = core.read_plan_file(path, verify=args.verify)
    summary, stats = core.plan_summary(plan_file.plan, num_epochs=plan_file.num_epochs, layout=plan_file.layout)
    print(core.render_report(summary), end="")
    if args.verify:
        print(f"\nverified: every stored full epoch equals what this i6_shard computes ({path})")
    if args.plot:
        plot_plan(stats, args.plot, title=plot_title(plan_file.plan, num_epochs=plan_file.num_epochs))
        print(f"plot -> {args.plot}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    out = args.output
    # Every option is checked before the first file is written, so a bad one leaves nothing behind.
    if args.num_files < 1:
        raise ValueError(f"--num-files {args.num_files}: generate at least one file")
    if not 0 <= args.seed < SEED_LIMIT:
        raise ValueError(f"--seed {args.seed}: the generator takes seeds in [0, 2**32)")
    settings = _settings(args)
    settings.validate(num_files=args.num_files)
    _check_output_dir(out, files=_PLAN_OUTPUTS + ("files.txt", "file_sizes.npz"), dirs=("data",))
    paths = make_demo_files(os.path.join(out, "data"), num_files=args.num_files, seed=args.seed)
    list_path = os.path.join(out, "files.txt")
    core.write_file_list(paths, list_path)
    sizes = core.collect_file_sizes(core.read_file_list(list_path))
    sizes_path = os.path.join(out, "file_sizes.npz")
    core.save_file_sizes(sizes, sizes_path)
    print(f"demo: {len(paths)} generated files in {os.path.join(out, 'data')}, list {list_path}")
    print(f"file sizes: {len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {sizes_path}")
    print()
    _write_and_print(core.ShardPlan(sizes.keys, sizes.sizes, settings), out=out, plot=not args.no_plot)
    print(f"\nall demo outputs are in {os.path.abspath(out)}")
    return 0


def _add_plan_options(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    p.add_argument("--num-shards", type=int, required=not demo, default=4 if demo else None,
                   help="ranks that shard the files (distributed world size)" + (" (default 4)" if demo else ""))
    p.add_argument("--partition-epoch", type=int, required=not demo, default=4 if demo else None,
                   help="sub-epochs per full epoch" + (" (default 4)" if demo else ""))
    p.add_argument("--num-epochs", type=int, required=not demo, default=12 if demo else None,
                   help="RETURNN's num_epochs, counted in sub-epochs" + (" (default 12)" if demo else ""))
    p.add_argument("--seq-ordering", choices=core.SEQ_ORDERINGS, default="random")
    p.add_argument("--random-seed-offset", type=int, default=0,
                   help="sharded: the dataset's random_seed_offset, or else the config's dataset_random_seed_offset "
                        "(default 0); with --unsharded: the config's dataset_random_seed_offset, to which RETURNN "
                        "adds rank*16127 on each rank (with --same-seed-on-all-ranks: the dataset's "
                        "random_seed_offset)")
    p.add_argument("--fixed-random-seed", type=int, default=None, help="the dataset's fixed_random_seed")
    p.add_argument("--unsharded", action="store_true",
                   help="model distrib_shard_files=False: every rank shuffles all files itself, with seed offset "
                        "random_seed_offset + rank*16127")
    p.add_argument("--same-seed-on-all-ranks", action="store_true",
                   help="with --unsharded: the dataset dict sets random_seed_offset itself, which RETURNN uses "
                        "unchanged on every rank, so all ranks read the same files (the report shows the overlap)")
    p.add_argument("--distribution", choices=core.DISTRIBUTIONS, default="returnn",
                   help="how bins are cut (default: returnn, what DistributeFilesDataset does)")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m i6_shard",
        description="Plan and check file-level sharding for RETURNN's DistributeFilesDataset "
                    "(distrib_shard_files=True) before any training runs.",
        epilog="Start with `python -m i6_shard demo`; `python -m i6_shard COMMAND --help` explains each command.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sizes", help="compute file sizes of a file list (.txt/.json/.py) as RETURNN would")
    p.add_argument("file_list")
    p.add_argument("-o", "--output", required=True, help="output .npz")
    p.add_argument("--threads", type=int, default=None, help=f"stat threads (default {DEFAULT_NUM_THREADS})")
    p.set_defaults(func=_cmd_sizes)

    p = sub.add_parser("plan", help="plan which files each rank reads in each sub-epoch; write plan, summary, "
                                    "report and plot")
    p.add_argument("--sizes", required=True, help="file sizes .npz (from `sizes` or ComputeFileSizesJob)")
    _add_plan_options(p)
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("report", help="print the report of a plan directory (or plan .npz)")
    p.add_argument("dir", help=f"directory with {core.PLAN_FILE}, or a plan file")
    p.add_argument("--verify", action="store_true", help="recompute every full epoch and compare with the file")
    p.add_argument("--plot", default=None, help="also write the plot to this path (PNG; the name must end in .png)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("demo", help="generate a small file set and run the whole pipeline on it")
    p.add_argument("-o", "--output", default="i6_shard_demo", help="output directory (default: ./i6_shard_demo)")
    p.add_argument("--num-files", type=int, default=200, help="files to generate (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated sizes, in [0, 2**32) (default 0)")
    _add_plan_options(p, demo=True)
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ImportError) as exc:  # user errors and file errors: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

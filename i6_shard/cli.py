"""Command line: ``python -m i6_shard {make-data,sizes,costs,plan,compare-plans,report,demo,train-report} ...``.
Parses arguments, calls the core, prints; no logic of its own."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from . import __version__, core
from .core.io import DEFAULT_NUM_THREADS
from .core.io.hdf_corpus import write_hdf_corpus
from .core.io.atomic import atomic_dir, check_output_dir
from .core.io.plan_file import check_plan_fits_memory
from .core.io.preflight import read_training_file_list
from .core.pure import SEED_LIMIT
from .core.pure.batching import REDUCE_TYPES, batching_of, check_batching_for_unit
from .core.pure.settings import sharding_mode
from .core.reporting import MISSING_MATPLOTLIB, matplotlib_available, plot_plan, plot_title
from .core.reporting.outputs import PLAN_OUTPUTS, make_plan_dir
from .core.reporting.report import format_cost
from .core.pure.cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, parse_bytes


def _cmd_sizes(args: argparse.Namespace) -> int:
    core.check_output_path(args.output, suffix=".npz", kind="file sizes archive")  # before any stat call
    trees = read_training_file_list(args.file_list)
    sizes = core.collect_file_sizes(trees, num_threads=args.threads)
    core.save_file_sizes(sizes, args.output)
    print(f"{len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {args.output}")
    return 0


def _cmd_costs(args: argparse.Namespace) -> int:
    from .core.io.file_costs import collect_file_costs, save_file_costs

    core.check_output_path(args.output, suffix=".npz", kind="file costs archive")  # before any file is read
    trees = read_training_file_list(args.file_list)
    leaf = int(args.leaf) if args.leaf is not None and args.leaf.isdigit() else args.leaf
    batching = batching_of(args.batch_size, args.max_seqs)
    check_batching_for_unit(args.unit, batching)
    costs = collect_file_costs(
        trees,
        unit=args.unit,
        leaf=leaf,
        stream=args.stream,
        frame_rate=args.frame_rate,
        num_procs=args.procs,
        batching=batching,
        length_column=args.length_column,
    )
    save_file_costs(costs, args.output)
    total = format_cost(int(costs.costs.sum()), args.unit)
    print(
        f"{len(costs)} entries, {total} ({int(costs.num_seqs.sum()):,} sequences, "
        f"{int(costs.num_frames.sum()):,} frames of {args.stream!r}) -> {args.output}"
    )
    return 0


def _request(args: argparse.Namespace) -> core.PlanRequest:
    """The plan options as a validated PlanRequest (raises before any file is touched)."""
    cache_size = getattr(args, "cache_size", None)
    return core.PlanRequest.from_options(
        num_shards=args.num_shards,
        partition_epoch=args.partition_epoch,
        num_epochs=args.num_epochs,
        seq_ordering=args.seq_ordering,
        random_seed_offset=args.random_seed_offset,
        fixed_random_seed=args.fixed_random_seed,
        distribution=args.distribution,
        max_sub_epoch_deviation=args.max_sub_epoch_deviation,
        sharding=sharding_mode(
            distrib_shard_files=not args.unsharded, same_seed_on_all_ranks=args.same_seed_on_all_ranks
        ),
        batch_size=getattr(args, "batch_size", None),
        max_seqs=getattr(args, "max_seqs", None),
        ranks_per_node=getattr(args, "ranks_per_node", None),
        preload_next_n_sub_epochs=getattr(args, "preload_next_n_sub_epochs", None),
        cached_file=not getattr(args, "no_cached_file", False),
        cache_size=None if cache_size is None else parse_bytes(cache_size),
        reduce_type=getattr(args, "reduce_type", None),
        param_sync_step=getattr(args, "param_sync_step", None),
        sub_epoch_constant_bytes=None
        if getattr(args, "sub_epoch_constant_bytes", None) is None
        else parse_bytes(args.sub_epoch_constant_bytes, what="--sub-epoch-constant-bytes"),
    )


#: What the demo directory holds (written as one set, like a plan directory).
_DEMO_OUTPUTS = PLAN_OUTPUTS + ("files.txt", "file_sizes.npz", "data/")


def _plot_wanted(plot: bool) -> bool:
    if plot and not matplotlib_available():
        print(f"note: {MISSING_MATPLOTLIB}; writing no plot", file=sys.stderr)
        return False
    return plot


def _print_plan_outputs(summary: dict, *, out: str, plot: bool) -> None:
    print(core.render_report(summary), end="")
    print()
    print(f"plan    -> {os.path.join(out, core.PLAN_FILE)}")
    print(f"summary -> {os.path.join(out, core.SUMMARY_FILE)}")
    print(f"report  -> {os.path.join(out, core.REPORT_FILE)}")
    if plot:
        print(f"plot    -> {os.path.join(out, core.PLOT_FILE)}")


def _cmd_plan(args: argparse.Namespace) -> int:
    request = _request(args)
    plot = _plot_wanted(not args.no_plot)
    summary = make_plan_dir(args.sizes, request, args.output, plot=plot)
    _print_plan_outputs(summary, out=args.output, plot=plot)
    return 0


def _cmd_compare_plans(args: argparse.Namespace) -> int:
    from .core.reporting.plan_change import CHANGE_OUTPUTS, compare_plan_files, render_change_report

    summary = compare_plan_files(args.old_plan, args.new_plan, resume_epoch=args.resume_epoch, out_dir=args.output)
    print(render_change_report(summary), end="")
    if args.output is not None:
        print()
        for name in CHANGE_OUTPUTS:
            print(f"{name.split('.')[0]:<7} -> {os.path.join(args.output, name)}")
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
    settings = _request(args).settings
    settings.validate(num_files=args.num_files)
    check_plan_fits_memory(settings, num_files=args.num_files)
    check_output_dir(out, names=_DEMO_OUTPUTS, what="demo directory")
    plot = _plot_wanted(not args.no_plot)
    list_path, sizes_path = os.path.join(out, "files.txt"), os.path.join(out, "file_sizes.npz")
    # Built in a temporary directory and swapped in whole; the list and the sizes name the files where they end up.
    with atomic_dir(out, names=_DEMO_OUTPUTS, what="demo directory") as tmp:
        made = write_hdf_corpus(os.path.join(tmp, "data"), num_files=args.num_files, seed=args.seed)
        paths = [os.path.join(out, "data", os.path.basename(p)) for p in made]
        core.write_file_list(paths, os.path.join(tmp, "files.txt"))
        stat_ed = core.collect_file_sizes(made)
        sizes = core.FileSizes(keys=paths, sizes=stat_ed.sizes, mtimes=stat_ed.mtimes)
        core.save_file_sizes(sizes, os.path.join(tmp, "file_sizes.npz"))
        summary = core.write_plan_outputs(
            core.ShardPlan(sizes.keys, sizes.sizes, settings),
            plan_path=os.path.join(tmp, core.PLAN_FILE),
            summary_path=os.path.join(tmp, core.SUMMARY_FILE),
            report_path=os.path.join(tmp, core.REPORT_FILE),
            plot_path=os.path.join(tmp, core.PLOT_FILE) if plot else None,
        )
    print(f"demo: {len(paths)} generated RETURNN HDF files in {os.path.join(out, 'data')}, list {list_path}")
    print(f"file sizes: {len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {sizes_path}")
    print()
    _print_plan_outputs(summary, out=out, plot=plot)
    print(f"\nall demo outputs are in {os.path.abspath(out)}")
    return 0


#: What make-data writes into its output directory (as one set, like the demo's).
_DATA_OUTPUTS = ("files.txt", "data/")


def _cmd_make_data(args: argparse.Namespace) -> int:
    out = os.path.abspath(args.output)
    check_output_dir(out, names=_DATA_OUTPUTS, what="data directory")  # the options are checked before writing
    with atomic_dir(out, names=_DATA_OUTPUTS, what="data directory") as tmp:
        made = write_hdf_corpus(
            os.path.join(tmp, "data"), num_files=args.num_files, seed=args.seed, feature_dim=args.feature_dim
        )
        paths = [os.path.join(out, "data", os.path.basename(p)) for p in made]
        core.write_file_list(paths, os.path.join(tmp, "files.txt"))
    list_path = os.path.join(out, "files.txt")
    print(
        f"{len(paths)} RETURNN HDF files ({args.feature_dim} features per frame, skewed sizes) in "
        f"{os.path.join(out, 'data')}"
    )
    print(f"file list -> {list_path}")
    return 0


def _seq_length_arg(text: str):
    """--max-seq-length: an int, or a JSON dict {data key: int}."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, dict)):
        raise argparse.ArgumentTypeError(f"{text!r} is not an int or a JSON dict such as '{{\"data\": 400}}'")
    return value


def _cmd_train_report(args: argparse.Namespace) -> int:
    from .core.reporting import train_report

    names = (train_report.TRAIN_REPORT_FILE, train_report.TRAIN_SUMMARY_FILE, train_report.TRAIN_PLOT_FILE)
    check_output_dir(args.output, names=names, what="training report directory")
    plot = not args.no_plot
    if plot and not matplotlib_available():
        print(f"note: {MISSING_MATPLOTLIB}; writing no plot", file=sys.stderr)
        plot = False
    # Built beside the target and swapped in whole: a rerun without a plot leaves no older plot.png.
    with atomic_dir(args.output, names=names, what="training report directory") as tmp:
        summary = train_report.write_train_report(
            args.logs,
            tmp,
            plan_path=args.plan,
            file_lengths_path=args.file_lengths,
            read_hdf=not args.no_read_hdf,
            partition_epoch=args.partition_epoch,
            max_dropped=args.max_dropped,
            min_steps_ratio=args.min_steps_ratio,
            plot=plot,
            dataset_name=args.dataset_name,
            sync=core.SyncMode(args.reduce_type or "grad", args.param_sync_step),
            multi_epoch=args.multi_epoch,
            max_seq_length=args.max_seq_length,
        )
    print(train_report.render_train_report(summary), end="")
    print()
    for name in (train_report.TRAIN_SUMMARY_FILE, train_report.TRAIN_REPORT_FILE) + (
        (train_report.TRAIN_PLOT_FILE,) if plot else ()
    ):
        print(f"{name.split('.')[0]:<7} -> {os.path.join(args.output, name)}")
    return 1 if summary["alarms"] and args.fail_on_alarm else 0


def _add_plan_options(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    p.add_argument(
        "--num-shards",
        type=int,
        required=not demo,
        default=4 if demo else None,
        help="ranks that shard the files (distributed world size)" + (" (default 4)" if demo else ""),
    )
    p.add_argument(
        "--partition-epoch",
        type=int,
        required=not demo,
        default=4 if demo else None,
        help="sub-epochs per full epoch" + (" (default 4)" if demo else ""),
    )
    p.add_argument(
        "--num-epochs",
        type=int,
        required=not demo,
        default=12 if demo else None,
        help="the training's num_epochs, counted in sub-epochs; the plan also holds the sub-epochs "
        "RETURNN preloads after the last" + (" (default 12)" if demo else ""),
    )
    p.add_argument("--seq-ordering", choices=core.SEQ_ORDERINGS, default="random")
    p.add_argument(
        "--random-seed-offset",
        type=int,
        default=0,
        help="sharded: the dataset's random_seed_offset, or else the config's dataset_random_seed_offset "
        "(default 0); with --unsharded: the config's dataset_random_seed_offset, to which RETURNN "
        "adds rank*16127 on each rank (with --same-seed-on-all-ranks: the dataset's "
        "random_seed_offset)",
    )
    p.add_argument("--fixed-random-seed", type=int, default=None, help="the dataset's fixed_random_seed")
    p.add_argument(
        "--unsharded",
        action="store_true",
        help="model distrib_shard_files=False: every rank shuffles all files itself, with seed offset "
        "random_seed_offset + rank*16127",
    )
    p.add_argument(
        "--same-seed-on-all-ranks",
        action="store_true",
        help="with --unsharded: the dataset dict sets random_seed_offset itself, which RETURNN uses "
        "unchanged on every rank, so all ranks read the same files (the report shows the overlap)",
    )
    p.add_argument(
        "--distribution",
        choices=core.DISTRIBUTIONS,
        default="returnn",
        help="how bins are cut (default: returnn, what DistributeFilesDataset does; flexible_auto: "
        "sub-epochs of flexible size with the bound chosen per full epoch, docs/flexible_split.md)",
    )
    p.add_argument(
        "--max-sub-epoch-deviation",
        type=float,
        default=core.PlanSettings.max_sub_epoch_deviation,
        help="with --distribution flexible: how far a sub-epoch's size may be from the mean sub-epoch's, "
        "as a share of it, in [0, 1) (default %(default)s: +-25%%)",
    )
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")


def _prog() -> str:
    """How the user called the command line: ``python -m i6_shard``, or the console script's name."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m i6_shard" if name in ("", "__main__.py", "-c") else name


def _add_make_data(sub) -> None:
    p = sub.add_parser(
        "make-data",
        help="write a small corpus of real RETURNN HDF files with skewed sizes and their list, to try sharding on",
    )
    p.add_argument(
        "-o",
        "--output",
        default="i6_shard_data",
        help="output directory: data/part-*.hdf and files.txt (default: ./i6_shard_data)",
    )
    p.add_argument("--num-files", type=int, default=32, help="HDF files to write (default 32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    p.add_argument("--feature-dim", type=int, default=8, help="features per frame (default 8)")
    p.set_defaults(func=_cmd_make_data)


def _add_sizes(sub) -> None:
    p = sub.add_parser("sizes", help="compute file sizes of a file list (.txt/.json/.py) as RETURNN would")
    p.add_argument("file_list")
    p.add_argument("-o", "--output", required=True, help="output file sizes archive (a name ending in .npz)")
    p.add_argument("--threads", type=int, default=None, help=f"stat threads (default {DEFAULT_NUM_THREADS})")
    p.set_defaults(func=_cmd_sizes)


def _add_costs(sub) -> None:
    p = sub.add_parser(
        "costs",
        help="frames, sequences or expected steps per entry of a file list, read from the "
        "files' metadata (RETURNN HDF seqLengths, OggZip manifests, arrow shards), as an "
        "archive that `plan --sizes` takes",
    )
    p.add_argument("file_list")
    p.add_argument(
        "--unit",
        choices=("frames", "seqs", "steps"),
        default="frames",
        help="what a file costs: frames of --stream (default), sequences, or the expected steps of its "
        "sequences under --batch-size / --max-seqs (stored in milli-steps)",
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help="--unit steps: RETURNN's batch_size in frames (padding included)"
    )
    p.add_argument("--max-seqs", type=int, default=None, help="--unit steps: RETURNN's max_seqs")
    p.add_argument(
        "--leaf",
        default=None,
        help="multimodal file trees: the leaf whose sequences count, as a path of dict keys / list "
        "indices joined by '/' (e.g. audio) or its position among the leaves (default: the only "
        ".hdf leaf)",
    )
    p.add_argument("--stream", default="data", help="the HDF stream whose lengths count (default: data)")
    p.add_argument(
        "--length-column",
        default=None,
        help="arrow shards (.arrow): the column of each row's length, an int column or a list column whose "
        "lengths count (needed for frames and steps; without it a shard counts its rows)",
    )
    p.add_argument(
        "--frame-rate",
        type=float,
        default=100.0,
        help="OggZip zips: feature frames per second of the manifest's durations (default 100)",
    )
    p.add_argument("--procs", type=int, default=None, help="processes reading the files (default: CPUs, at most 8)")
    p.add_argument("-o", "--output", required=True, help="output file costs archive (a name ending in .npz)")
    p.set_defaults(func=_cmd_costs)


def _add_plan(sub) -> None:
    p = sub.add_parser(
        "plan", help="plan which files each rank reads in each sub-epoch; write plan, summary, report and plot"
    )
    p.add_argument(
        "--sizes",
        required=True,
        help="file sizes .npz (from `sizes` or ComputeFileSizesJob) or file costs .npz (from `costs` or "
        "ComputeFileCostsJob: the bins are balanced by its unit)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="RETURNN's batch_size in frames: predict the loss under its batching (needs a costs archive)",
    )
    p.add_argument("--max-seqs", type=int, default=None, help="RETURNN's max_seqs, for the prediction")
    _add_sync_options(p, what="the predicted loss")
    _add_plan_options(p)
    p.add_argument(
        "--ranks-per-node",
        type=int,
        default=None,
        help="ranks (GPUs) per node: report the bytes each node's file cache must hold at once per "
        "sub-epoch (cache_peak_bytes_per_node in summary.json) and reads from the shared file system",
    )
    p.add_argument(
        "--preload-next-n-sub-epochs",
        type=int,
        default=None,
        help=f"the dataset's preload_next_n_sub_epochs (default {DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS}, "
        "RETURNN's with use_worker_proc=True; 0 with use_worker_proc=False): the plan holds these "
        "sub-epochs after the training's last, and with --ranks-per-node the node cache holds them",
    )
    p.add_argument(
        "--no-cached-file",
        action="store_true",
        help="get_sub_epoch_dataset does not wrap the files in CachedFile: every rank reads from the "
        "shared file system and the node caches nothing",
    )
    p.add_argument(
        "--cache-size",
        default=None,
        help="bytes of each node's local cache, e.g. 800G or 1.5TiB: say whether the plan fits and which "
        "partition_epoch values do",
    )
    p.add_argument(
        "--sub-epoch-constant-bytes",
        default=None,
        help="with --ranks-per-node: bytes of the files the sub-epoch dataset reads in every sub-epoch "
        "besides its bin's (e.g. 20G): the node cache holds them in every sub-epoch",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="output directory: new, empty, or an earlier plan directory (replaced whole)",
    )
    p.set_defaults(func=_cmd_plan)


def _add_sync_options(p: argparse.ArgumentParser, *, what: str) -> None:
    p.add_argument(
        "--reduce-type",
        choices=REDUCE_TYPES,
        default=None,
        help=f"torch_distributed's reduce_type, for {what} (default grad: every rank stops in the step the "
        "first runs out; param: the others run on to their next sync)",
    )
    p.add_argument(
        "--param-sync-step",
        type=int,
        default=None,
        help="with --reduce-type param: torch_distributed's param_sync_step (steps between param syncs)",
    )


def _add_compare_plans(sub) -> None:
    p = sub.add_parser(
        "compare-plans",
        help="what resuming a sharded training under another plan (e.g. another "
        "num_shards) does: files read twice and never in the affected full epoch",
    )
    p.add_argument("old_plan", help=f"plan the training ran with (a plan directory with {core.PLAN_FILE}, or the file)")
    p.add_argument("new_plan", help="plan it resumes with (same files and partition_epoch)")
    p.add_argument(
        "--resume-epoch",
        type=int,
        required=True,
        help="the first sub-epoch the resumed training runs (1-based, as RETURNN counts)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=None,
        help="also write summary.json, report.txt and files.json (every file read twice or never) here",
    )
    p.set_defaults(func=_cmd_compare_plans)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="print the report of a plan directory (or plan .npz)")
    p.add_argument("dir", help=f"directory with {core.PLAN_FILE}, or a plan file")
    p.add_argument("--verify", action="store_true", help="recompute every full epoch and compare with the file")
    p.add_argument("--plot", default=None, help="also write the plot to this path (PNG; the name must end in .png)")
    p.set_defaults(func=_cmd_report)


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="generate a small file set and run the whole pipeline on it")
    p.add_argument("-o", "--output", default="i6_shard_demo", help="output directory (default: ./i6_shard_demo)")
    p.add_argument("--num-files", type=int, default=200, help="files to generate (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated sizes, in [0, 2**32) (default 0)")
    _add_plan_options(p, demo=True)
    p.set_defaults(func=_cmd_demo)


def _add_train_report(sub) -> None:
    p = sub.add_parser(
        "train-report",
        help="measure from RETURNN's training logs what each rank read and what was "
        "dropped per sub-epoch, against the plan; write report, summary and plot",
    )
    p.add_argument(
        "logs",
        nargs="+",
        metavar="LOG",
        help="RETURNN's per-rank logs (returnn.torch-distrib-<rank>-<size>.log) or the torchrun stdout "
        "with [default<rank>]: prefixes (i6_core's log.run.1)",
    )
    p.add_argument("--plan", default=None, help="plan.npz to compare the files with (ShardPlanJob or `plan`)")
    p.add_argument(
        "--file-lengths",
        default=None,
        help="JSON {file key: [num_seqs, num_frames]}; else the HDF files the log names are read",
    )
    p.add_argument("--no-read-hdf", action="store_true", help="do not read the HDF files for their lengths")
    p.add_argument(
        "--partition-epoch",
        type=int,
        default=None,
        help="sub-epochs per full epoch, without a plan (default: inferred from the files)",
    )
    p.add_argument(
        "--max-dropped",
        type=float,
        default=0.05,
        help="alarm when the mean dropped share of frames per sub-epoch exceeds this (default 0.05)",
    )
    p.add_argument(
        "--min-steps-ratio",
        type=float,
        default=0.75,
        help="alarm when a sub-epoch makes fewer than this share of the expected steps (default 0.75)",
    )
    p.add_argument("--dataset-name", default="train", help="the DistributeFilesDataset's name (default: train)")
    p.add_argument(
        "--multi-epoch",
        type=int,
        default=None,
        help="a wrapper's (MultiEpochDataset) multi_epoch: epochs of the DistributeFilesDataset per sub-epoch "
        "(default: inferred from the logs)",
    )
    p.add_argument(
        "--max-seq-length",
        type=_seq_length_arg,
        default=None,
        help="the training's max_seq_length (an int, or JSON such as '{\"data\": 400}'): its removals are shown "
        "apart from the dropped share",
    )
    _add_sync_options(p, what="the expected steps")
    p.add_argument("--fail-on-alarm", action="store_true", help="exit with status 1 when there is an alarm")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")
    p.set_defaults(func=_cmd_train_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Plan and check file-level sharding for RETURNN's DistributeFilesDataset "
        "(distrib_shard_files=True) before any training runs.",
        epilog="Start with `python -m i6_shard demo`; `python -m i6_shard COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"i6_shard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_make_data(sub)
    _add_sizes(sub)
    _add_costs(sub)
    _add_plan(sub)
    _add_compare_plans(sub)
    _add_report(sub)
    _add_demo(sub)
    _add_train_report(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ImportError) as exc:  # user errors and file errors: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

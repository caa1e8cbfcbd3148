"""Command line: ``python -m i6_shard {make-data,rechunk,sizes,costs,plan,files,compare-plans,report,demo,train-report} ...``.
Parses arguments, calls the core, prints; no logic of its own."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from typing import List, Optional

from . import __version__, core
from .core.io import (
    DEFAULT_NUM_THREADS,
    archive_bytes_bound,
    corpus_bytes_bound,
    costs_bytes_bound,
    plan_dir_bytes_bound,
    reporting_full_device,
    PROGRESS_INTERVAL,
    read_plan_head,
    read_plan_layout,
    atomic_dir,
    check_output_dir,
    read_training_file_list,
    rechunk_hdf_corpus,
    write_hdf_corpus,
)
from .core.pure import (
    PLAN_OPTIONS,
    RECHUNK_UNITS,
    SEED_LIMIT,
    batching_of,
    check_batching_for_unit,
    report_engine_options,
)
from .core import check_request_fits, make_plan_outputs, stored_plan_outputs
from .core.reporting import (
    summary_of,
    MISSING_MATPLOTLIB,
    PLAN_OUTPUTS,
    format_cost,
    matplotlib_available,
    plot_plan,
    plot_cost_distribution,
    plot_title,
    require_matplotlib,
)


def _check_histogram_plot(args: argparse.Namespace) -> bool:
    """``sizes``/``costs --plot``: its options checked before any file is read; whether to draw."""
    if (args.num_shards is None) != (args.partition_epoch is None):
        raise ValueError("--num-shards and --partition-epoch mark a rank's share on the --plot together: give both")
    if args.num_shards is not None and args.plot is None:
        raise ValueError("--num-shards and --partition-epoch are for the --plot: give --plot FILE.png too")
    for name in ("num_shards", "partition_epoch"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)}: give at least 1")
    if args.plot is None:
        return False
    if os.path.splitext(args.plot)[1].lower() != ".png":
        raise ValueError(f"--plot {args.plot!r}: the plot is a PNG image; give a path ending in .png")
    core.check_output_path(args.plot)
    require_matplotlib()
    return True


def _draw_histogram(args: argparse.Namespace, costs, *, unit: str) -> None:
    plot_cost_distribution(
        costs,
        args.plot,
        unit=unit,
        num_shards=args.num_shards,
        partition_epoch=args.partition_epoch,
        title=f"{os.path.basename(args.file_list)} ({unit})",
    )
    print(f"plot -> {args.plot}")


def _cmd_sizes(args: argparse.Namespace) -> int:
    core.check_output_path(args.output, suffix=".npz", kind="file sizes archive")  # before any stat call
    plot = _check_histogram_plot(args)
    trees = read_training_file_list(args.file_list)
    sizes = core.collect_file_sizes(trees, num_threads=args.threads, progress_interval=PROGRESS_INTERVAL)
    with reporting_full_device(args.output, needed=lambda: archive_bytes_bound(sizes.keys, int64_per_entry=2)):
        core.save_file_sizes(sizes, args.output)
    print(f"{len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {args.output}")
    if plot:
        _draw_histogram(args, sizes.sizes, unit="bytes")
    return 0


def _cmd_costs(args: argparse.Namespace) -> int:
    from .core.io import collect_file_costs, save_file_costs

    core.check_output_path(args.output, suffix=".npz", kind="file costs archive")  # before any file is read
    plot = _check_histogram_plot(args)
    trees = read_training_file_list(args.file_list)
    leaf = int(args.leaf) if args.leaf is not None and args.leaf.isdigit() else args.leaf
    batching = batching_of(**_table_options(args))  # --unit steps: the batching the steps are counted under
    check_batching_for_unit(args.unit, batching)
    costs = collect_file_costs(
        trees,
        unit=args.unit,
        leaf=leaf,
        stream=args.stream,
        frame_rate=args.frame_rate,
        num_procs=args.procs,
        progress_interval=PROGRESS_INTERVAL,
        batching=batching,
        length_column=args.length_column,
    )
    with reporting_full_device(args.output, needed=lambda: costs_bytes_bound(costs)):
        save_file_costs(costs, args.output)
    total = format_cost(int(costs.costs.sum()), args.unit)
    print(
        f"{len(costs)} entries, {total} ({int(costs.num_seqs.sum()):,} sequences, "
        f"{int(costs.num_frames.sum()):,} frames of {args.stream!r}) -> {args.output}"
    )
    if plot:
        _draw_histogram(args, costs.costs, unit=args.unit)
    return 0


def _table_options(args: argparse.Namespace) -> dict:
    """The plan options of the command (the rows of ``PLAN_OPTIONS`` that name it), from its parsed flags."""
    values = vars(args)
    return {name: o.value_from_cli(values) for name, o in PLAN_OPTIONS.items() if args.command in o.commands}


def _request(args: argparse.Namespace) -> core.PlanRequest:
    """The plan options as a validated PlanRequest (raises before any file is touched)."""
    return core.PlanRequest.from_options(**_table_options(args))


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
    core.check_plan_dir(args.output)  # before the archive is read
    sizes = args.sizes[0] if len(args.sizes) == 1 else args.sizes  # several: one corpus each
    with reporting_full_device(
        args.output, needed=lambda: sum(plan_dir_bytes_bound(path, request.settings) for path in args.sizes)
    ):
        summary = core.write_outputs_dir(core.plan_archive(sizes, request), args.output, plot=plot)
    _print_plan_outputs(summary, out=args.output, plot=plot)
    return 0


def _cmd_compare_plans(args: argparse.Namespace) -> int:
    from .core.reporting import CHANGE_OUTPUTS, CHANGE_PLOT_FILE, compare_plan_files, render_change_report

    plot = args.output is not None and _plot_wanted(not args.no_plot)
    summary = compare_plan_files(
        args.old_plan, args.new_plan, resume_epoch=args.resume_epoch, out_dir=args.output, plot=plot
    )
    print(render_change_report(summary), end="")
    if args.output is not None:
        print()
        for name in CHANGE_OUTPUTS + ((CHANGE_PLOT_FILE,) if plot else ()):
            print(f"{name.split('.')[0]:<7} -> {os.path.join(args.output, name)}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    if args.plot is not None:
        if os.path.splitext(args.plot)[1].lower() != ".png":
            raise ValueError(f"--plot {args.plot!r}: the plot is a PNG image; give a path ending in .png")
        core.check_output_path(args.plot)
    path = os.path.join(args.dir, core.PLAN_FILE) if os.path.isdir(args.dir) else args.dir
    plan_file = core.read_plan_file(path, verify=args.verify, **_table_options(args))  # the costs it was cut by
    outputs = stored_plan_outputs(plan_file)  # the planning floor, from the stored bins
    summary = summary_of(outputs)
    print(core.render_report(summary), end="")
    if args.verify:
        print(f"\nverified: every stored full epoch equals what this i6_shard computes ({path})")
    if args.plot:
        title = plot_title(plan_file.plan, num_epochs=plan_file.num_epochs)
        plot_plan(outputs.stats, args.plot, title=title, sizes=summary.get("sub_epoch_sizes"))
        print(f"plot -> {args.plot}")
    return 0


def _cmd_files(args: argparse.Namespace) -> int:
    path = os.path.join(args.plan, core.PLAN_FILE) if os.path.isdir(args.plan) else args.plan
    head = read_plan_head(path)  # the checked loader: format, settings, keys
    plan, s = head.plan, head.settings
    if not 0 <= args.rank < s.num_shards:
        raise ValueError(f"--rank {args.rank}: the plan has num_shards={s.num_shards}; use 0..{s.num_shards - 1}")
    if not 1 <= args.epoch <= s.num_epochs:
        raise ValueError(
            f"--epoch {args.epoch}: the plan holds sub-epochs 1..{s.num_epochs} (RETURNN counts from 1; "
            f"{s.preloaded_sub_epochs} of them only preloaded); plan more with a larger --num-epochs"
        )
    full_epoch_0idx = (args.epoch - 1) // s.partition_epoch
    # The stored layout, as the training reads it (i6_shard.returnn_ext), never a recomputation.
    order, bounds = read_plan_layout(
        path,
        full_epoch_0idx=full_epoch_0idx,
        layout_idx=0 if s.distrib_shard_files else args.rank,
        num_files=head.num_files,
    )
    b = plan.bin_index(epoch=args.epoch, shard_index=args.rank)
    idx = order[bounds[b] : bounds[b + 1]]
    keys, costs = [head.keys[i] for i in idx.tolist()], head.costs[idx]
    if args.json:
        out = {
            "epoch": args.epoch,
            "shard_index": args.rank,
            "full_epoch_0idx": full_epoch_0idx,
            "bin_index": b,
            "unit": s.unit,
            "keys": keys,
            "costs": [int(c) for c in costs.tolist()],
            "total_cost": int(costs.sum()),
        }
        print(json.dumps(out, indent=1, ensure_ascii=False))
        return 0
    print("\n".join(keys))
    print(
        f"rank {args.rank}, sub-epoch {args.epoch} (full epoch {full_epoch_0idx}, bin {b}): {len(keys)} files, "
        f"{format_cost(int(costs.sum()), s.unit)}",
        file=sys.stderr,
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    out = args.output
    # Every option is checked before the first file is written, so a bad one leaves nothing behind.
    if args.num_files < 1:
        raise ValueError(f"--num-files {args.num_files}: generate at least one file")
    if not 0 <= args.seed < SEED_LIMIT:
        raise ValueError(f"--seed {args.seed}: the generator takes seeds in [0, 2**32)")
    request = _request(args)
    check_request_fits(request.settings, num_files=args.num_files)  # the planning floor's check, before any file
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
        summary = core.write_outputs(
            make_plan_outputs(sizes, request),
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
    needed = functools.partial(
        corpus_bytes_bound, num_files=args.num_files, seed=args.seed, feature_dim=args.feature_dim
    )
    with reporting_full_device(out, needed=needed), atomic_dir(out, names=_DATA_OUTPUTS, what="data directory") as tmp:
        made = write_hdf_corpus(
            os.path.join(tmp, "data"),
            num_files=args.num_files,
            seed=args.seed,
            feature_dim=args.feature_dim,
            progress_interval=PROGRESS_INTERVAL,
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


def _cmd_rechunk(args: argparse.Namespace) -> int:
    out = os.path.abspath(args.output)
    made = rechunk_hdf_corpus(
        core.read_file_list(args.file_list),
        out,
        num_shards=args.num_shards,
        partition_epoch=args.partition_epoch,
        num_files=args.num_files,
        unit=args.unit,
        progress_interval=PROGRESS_INTERVAL,
    )
    costs = made.costs
    print(
        f"{made.num_seqs:,} sequences in {len(costs)} RETURNN HDF files of even {args.unit} "
        f"({int(costs.min()):,} to {int(costs.max()):,} each) in {os.path.join(out, 'data')}"
    )
    print(
        f"largest file: {made.max_share:.3f} of a rank's share of a sub-epoch "
        f"(num_shards={args.num_shards}, partition_epoch={args.partition_epoch})"
    )
    print(f"file list -> {made.list_path}")
    return 0


def _cmd_train_report(args: argparse.Namespace) -> int:
    from .core import reporting

    names = (reporting.TRAIN_REPORT_FILE, reporting.TRAIN_SUMMARY_FILE, reporting.TRAIN_PLOT_FILE)
    names += (reporting.TRAIN_RECORDS_FILE,)  # written above MAX_LISTED_RECORDS (sub-epoch, rank) records
    check_output_dir(args.output, names=names, what="training report directory")
    plot = not args.no_plot
    if plot and not matplotlib_available():
        print(f"note: {MISSING_MATPLOTLIB}; writing no plot", file=sys.stderr)
        plot = False
    # Built beside the target and swapped in whole: a rerun without a plot leaves no older plot.png.
    with atomic_dir(args.output, names=names, what="training report directory") as tmp:
        summary = reporting.write_train_report(
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
            multi_epoch=args.multi_epoch,
            **report_engine_options(_table_options(args)),  # the sync and length filter, as plan options
        )
    print(reporting.render_train_report(summary), end="")
    print()
    for name in (
        (reporting.TRAIN_SUMMARY_FILE, reporting.TRAIN_REPORT_FILE)
        + ((reporting.TRAIN_PLOT_FILE,) if plot else ())
        + ((summary["records_file"],) if summary.get("records_file") else ())
    ):
        print(f"{name.split('.')[0]:<7} -> {os.path.join(args.output, name)}")
    return 1 if summary["alarms"] and args.fail_on_alarm else 0


#: The one example of each command that ``COMMAND --help`` ends with (a test parses each of them).
EXAMPLES = {
    "make-data": [("write 32 skewed HDF files into data/data/ and their list data/files.txt", "make-data -o data")],
    "rechunk": [
        (
            "rewrite a corpus into files of even frames, none above 5% of a rank's share (4 GPUs, 10 sub-epochs)",
            "rechunk data/files.txt --num-shards 4 --partition-epoch 10 -o rechunked",
        )
    ],
    "sizes": [("the file sizes of a list, as RETURNN computes them", "sizes data/files.txt -o sizes.npz")],
    "costs": [
        ("frames per file, read from the HDF files' seqLengths", "costs data/files.txt --unit frames -o costs.npz"),
        (
            "each file's expected steps under RETURNN's batching",
            "costs data/files.txt --unit steps --batch-size 20000 --max-seqs 16 -o steps.npz",
        ),
    ],
    "plan": [
        (
            "8 GPUs, 20 sub-epochs per full epoch, 200 sub-epochs of training, bins balanced by frames",
            "plan --sizes costs.npz --num-shards 8 --partition-epoch 20 --num-epochs 200 --distribution balanced "
            "-o plan/",
        ),
        (
            "RETURNN's own cut by bytes (a plain DistributeFilesDataset), its loss predicted from the frame counts",
            "plan --sizes sizes.npz --lengths costs.npz --batch-size 20000 --num-shards 8 --partition-epoch 20 "
            "--num-epochs 200 -o plan/",
        ),
    ],
    "files": [
        ("the files rank 0 reads in sub-epoch 3", "files plan/ --rank 0 --epoch 3"),
        ("the same as JSON, with each file's cost", "files plan/plan.npz --rank 0 --epoch 3 --json"),
    ],
    "compare-plans": [
        (
            "a training planned for 8 GPUs resumes on 6 at sub-epoch 14",
            "compare-plans plan8/ plan6/ --resume-epoch 14 -o change/",
        )
    ],
    "report": [("the report of a plan, re-verified, and its plot", "report plan/ --verify --plot plan.png")],
    "demo": [("generate 200 files and plan them for 4 ranks", "demo -o i6_shard_demo")],
    "train-report": [
        (
            "what each rank of a finished training read, against the plan",
            "train-report work/returnn.torch-distrib-*.log --plan plan/plan.npz -o train_report/",
        )
    ],
}


def _epilog(command: str) -> str:
    lines = ["example:" if len(EXAMPLES[command]) == 1 else "examples:"]
    for what, argv in EXAMPLES[command]:
        lines += [f"  # {what}", f"  {_prog()} {argv}"]
    return "\n".join(lines)


def _parser(sub, name: str, *, help: str) -> argparse.ArgumentParser:
    """A command's parser: its help, and an example below the options."""
    return sub.add_parser(
        name, help=help, description=help, epilog=_epilog(name), formatter_class=argparse.RawDescriptionHelpFormatter
    )


def _add_table_options(p: argparse.ArgumentParser, command: str) -> None:
    """The plan options ``command`` takes, as their rows of ``PLAN_OPTIONS`` say: flags, default, help, value."""
    for o in PLAN_OPTIONS.values():
        if command in o.commands:
            for flag in o.cli_flags:
                _add_flag(p, o, flag, command)


def _add_flag(p: argparse.ArgumentParser, o, flag, command: str) -> None:
    if flag.action is not None:  # a flag that states a value of the option: its own help
        p.add_argument(flag.flag, action=flag.action, help=argparse.SUPPRESS if o.hidden else flag.help)
        return
    default = o.command_defaults.get(command, o.default)
    kwargs: dict = {"required": o.required and command not in o.command_defaults, "default": default}
    if o.metavar is not None:
        kwargs["metavar"] = o.metavar
    if o.choices is not None and o.offered is None:
        kwargs["choices"] = o.choices
    elif o.choices is not None:
        kwargs.update(type=_one_of(o.choices, offered=o.offered), metavar="{" + ",".join(o.offered) + "}")
    elif o.parse is not None:
        kwargs["type"] = o.parse if isinstance(o.parse, type) else _parsed(flag.flag, o.parse)
    shown = "" if default is None else f" (default: {default})"
    help_text = argparse.SUPPRESS if o.hidden else ((o.commands[command] or o.help) + shown).replace("%", "%%")
    p.add_argument(flag.flag, dest=o.name, help=help_text, **kwargs)


def _parsed(flag: str, parse):
    """An argparse type of a table's ``parse``, whose ``ValueError`` names the fix, shown after the flag."""

    def value(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{flag} {exc}") from None

    return value


def _one_of(choices: tuple, *, offered: tuple):
    """An argparse type accepting ``choices``, whose help and errors name only the ``offered`` ones."""

    def value(text: str):
        if text not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(offered)})")
        return text

    return value


def options_markdown(command: str) -> str:
    """docs/cli.md's table of the plan options ``command`` takes, built from ``PLAN_OPTIONS`` as the parser is."""
    rows = ["| option | meaning |", "|---|---|"]
    for o in PLAN_OPTIONS.values():
        if command not in o.commands:
            continue
        spelled = []
        for flag in o.cli_flags:
            value = "{" + ",".join(o.offered or o.choices) + "}" if o.choices else o.metavar
            spelled.append(f"`{flag.flag}{'' if flag.action or value is None else ' ' + value}`")
        default = o.command_defaults.get(command, o.default)
        if o.required and command not in o.command_defaults:
            tail = "; required"
        else:
            tail = "" if default is None or o.flags else f" (default `{default}`)"
        meaning = (o.commands[command] or o.doc or o.help) + tail
        rows.append(f"| {', '.join(spelled)} | {meaning} |")
    return "\n".join(rows) + "\n"


def _costs_unit(text: str) -> str:
    """``costs --unit``: bytes are the sizes, which ``sizes`` computes."""
    if text == "bytes":
        raise argparse.ArgumentTypeError(
            "'bytes': a file's bytes come from `sizes` (python -m i6_shard sizes FILE_LIST -o sizes.npz), whose "
            "archive `plan --sizes` takes as well; costs counts frames, seqs or steps"
        )
    return text


def _check_sizes_archive(args: argparse.Namespace) -> None:
    """``plan --sizes``: an existing file that is no zip archive is most likely a file list given too early."""
    for text in args.sizes:
        _check_sizes_archive_path(text)


def _check_sizes_archive_path(text: str) -> None:
    if not os.path.isfile(text):
        return  # the plan command names the problem
    try:
        with open(text, "rb") as f:
            magic = f.read(2)
    except OSError:
        return
    if magic != b"PK":
        raise ValueError(
            f"--sizes {text!r} is not a sizes or costs archive (an .npz file; this one has no zip header); if it "
            f"is a file list, run `{_prog()} sizes {text} -o sizes.npz` or `{_prog()} costs {text} -o costs.npz` "
            "first and give that archive"
        )


def _prog() -> str:
    """How the user called the command line: ``python -m i6_shard``, or the console script's name."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m i6_shard" if name in ("", "__main__.py", "-c") else name


def _add_make_data(sub) -> None:
    p = _parser(
        sub,
        "make-data",
        help="write a small corpus of real RETURNN HDF files with skewed sizes and their list, to try the planning on",
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


def _add_rechunk(sub) -> None:
    p = _parser(
        sub,
        "rechunk",
        help="rewrite a RETURNN HDF corpus into files of even size (every sequence whole, once, in order), small "
        "enough for the plan to keep every sub-epoch within 10%% of the mean without dropping data",
    )
    p.add_argument("file_list", help="a .txt/.json/.py list of RETURNN HDF files (or file trees of them)")
    p.add_argument("--num-shards", type=int, required=True, help="the training's ranks")
    p.add_argument("--partition-epoch", type=int, required=True, help="sub-epochs per full epoch")
    p.add_argument(
        "-o", "--output", required=True, help="output directory: data/part-*.hdf and files.txt (files.json for trees)"
    )
    p.add_argument(
        "--num-files",
        type=int,
        default=None,
        help="files to write (default: enough that no file is above 5%% of a rank's share of a sub-epoch, at "
        "least 20 * num_shards * partition_epoch; at most one per sequence)",
    )
    p.add_argument(
        "--unit", choices=RECHUNK_UNITS, default="frames", help="what the files hold evenly (default: frames)"
    )
    p.set_defaults(func=_cmd_rechunk)


def _add_sizes(sub) -> None:
    p = _parser(sub, "sizes", help="compute file sizes of a file list (.txt/.json/.py) as RETURNN would")
    p.add_argument("file_list", help="a .txt/.json/.py file list, read as RETURNN's DistributeFilesDataset reads it")
    p.add_argument("-o", "--output", required=True, help="output file sizes archive (a name ending in .npz)")
    p.add_argument("--threads", type=int, default=None, help=f"stat threads (default {DEFAULT_NUM_THREADS})")
    p.add_argument(
        "--plot",
        default=None,
        help="also draw a histogram of the file sizes to this PNG, marking files above a rank's share of a "
        "sub-epoch (with --num-shards and --partition-epoch)",
    )
    _add_share_options(p)
    p.set_defaults(func=_cmd_sizes)


def _add_share_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--num-shards", type=int, default=None, help="with --plot: the training's ranks, to mark a rank's share"
    )
    p.add_argument(
        "--partition-epoch", type=int, default=None, help="with --plot: sub-epochs per full epoch, for a rank's share"
    )


def _add_costs(sub) -> None:
    p = _parser(
        sub,
        "costs",
        help="frames, sequences or expected steps per entry of a file list, read from the "
        "files' metadata (RETURNN HDF seqLengths, OggZip manifests, arrow shards), as an "
        "archive that `plan --sizes` takes",
    )
    p.add_argument("file_list", help="a .txt/.json/.py file list, as for `sizes`")
    p.add_argument(
        "--unit",
        type=_costs_unit,
        choices=("frames", "seqs", "steps"),
        default="frames",
        help="what a file costs: frames of --stream (default), sequences, or the expected steps of its "
        "sequences under --batch-size / --max-seqs (stored in milli-steps); bytes come from `sizes`",
    )
    _add_table_options(p, "costs")
    p.add_argument(
        "--leaf",
        default=None,
        help="multimodal file trees: the leaf whose sequences count, as a path of dict keys / list "
        "indices joined by '/' (e.g. audio) or its position among the leaves (default: the only "
        ".hdf leaf)",
    )
    p.add_argument("--stream", default="data", help="the HDF stream whose frames count (default: data)")
    p.add_argument(
        "--length-column",
        default=None,
        help="arrow shards (.arrow): the column of each row's length, an int column or a list column (each list "
        "counts its items; needed for frames and steps; without it a shard counts its rows)",
    )
    p.add_argument(
        "--frame-rate",
        type=float,
        default=100.0,
        help="OggZip zips: feature frames per second of the manifest's durations (default 100)",
    )
    p.add_argument("--procs", type=int, default=None, help="processes reading the files (default: CPUs, at most 8)")
    p.add_argument("-o", "--output", required=True, help="output file costs archive (a name ending in .npz)")
    p.add_argument(
        "--plot",
        default=None,
        help="also draw a histogram of the files' costs (frames, sequences or steps) to this PNG, marking "
        "files above a rank's share of a sub-epoch (with --num-shards and --partition-epoch)",
    )
    _add_share_options(p)
    p.set_defaults(func=_cmd_costs)


def _add_plan(sub) -> None:
    p = _parser(
        sub, "plan", help="plan which files each rank reads in each sub-epoch; write plan, summary, report and plot"
    )
    p.add_argument(
        "--sizes",
        required=True,
        action="append",
        help="file sizes .npz (from `sizes` or ComputeFileSizesJob) or file costs .npz (from `costs` or "
        "ComputeFileCostsJob: the bins are balanced by its unit); given once per corpus to mix several corpora "
        "(their files one after the other, read by --weights)",
    )
    _add_table_options(p, "plan")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="output directory: new, empty, or an earlier plan directory (replaced whole)",
    )
    p.set_defaults(func=_cmd_plan, checks=(_check_sizes_archive,))


_FILES_HELP = (
    "print the files one rank reads in one sub-epoch, in the order RETURNN passes them to get_sub_epoch_dataset, "
    "as the training reads them from the plan file"
)


def _add_files(sub) -> None:
    p = _parser(sub, "files", help=_FILES_HELP)
    p.add_argument("plan", help=f"a plan directory with {core.PLAN_FILE}, or the plan file (from `plan`/ShardPlanJob)")
    p.add_argument("--rank", type=int, required=True, help="the rank (shard_index), 0..num_shards-1")
    p.add_argument("--epoch", type=int, required=True, help="the sub-epoch, 1-based as RETURNN counts")
    p.add_argument(
        "--json",
        action="store_true",
        help="print JSON (epoch, shard_index, full_epoch_0idx, bin_index, unit, keys, costs, total_cost) instead "
        "of one key per line",
    )
    p.set_defaults(func=_cmd_files)


def _add_compare_plans(sub) -> None:
    p = _parser(
        sub,
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
        help="also write summary.json, report.txt, files.json (every file read twice or never) and plot.png here",
    )
    p.add_argument("--no-plot", action="store_true", help="with -o: do not write plot.png")
    p.set_defaults(func=_cmd_compare_plans)


def _add_report(sub) -> None:
    p = _parser(sub, "report", help="print the report of a plan directory (or plan .npz)")
    p.add_argument("dir", help=f"directory with {core.PLAN_FILE}, or a plan file")
    p.add_argument("--verify", action="store_true", help="recompute every full epoch and compare with the file")
    _add_table_options(p, "report")
    p.add_argument("--plot", default=None, help="also write the plot to this path (PNG; the name must end in .png)")
    p.set_defaults(func=_cmd_report)


def _add_demo(sub) -> None:
    p = _parser(sub, "demo", help="generate a small file set and run the whole pipeline on it")
    p.add_argument("-o", "--output", default="i6_shard_demo", help="output directory (default: ./i6_shard_demo)")
    p.add_argument("--num-files", type=int, default=200, help="files to generate (default 200)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated sizes, in [0, 2**32) (default 0)")
    _add_table_options(p, "demo")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")
    p.set_defaults(func=_cmd_demo)


def _add_train_report(sub) -> None:
    p = _parser(
        sub,
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
    p.add_argument(
        "--plan",
        default=None,
        help="plan.npz (or the plan's directory) to compare the files with, and the steps and drop its summary.json "
        "simulated (ShardPlanJob or `plan`)",
    )
    p.add_argument(
        "--file-lengths",
        default=None,
        help="JSON {file key: [num_seqs, num_frames]}; else the HDF files the log names are read",
    )
    p.add_argument(
        "--no-read-hdf", action="store_true", help="do not read the HDF files for their sequences and frames"
    )
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
    _add_train_report_reading(p)
    _add_table_options(p, "train-report")  # the training's sync and length filter
    p.add_argument("--fail-on-alarm", action="store_true", help="exit with status 1 when there is an alarm")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")
    p.set_defaults(func=_cmd_train_report)


def _add_train_report_reading(p) -> None:
    """train-report's options on how the training read its dataset: its name and wrapper."""
    p.add_argument("--dataset-name", default="train", help="the DistributeFilesDataset's name (default: train)")
    p.add_argument(
        "--multi-epoch",
        type=int,
        default=None,
        help="a wrapper's (MultiEpochDataset) multi_epoch: epochs of the DistributeFilesDataset per sub-epoch "
        "(default: inferred from the logs)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Plan and check how RETURNN's DistributeFilesDataset shards the files "
        "(distrib_shard_files=True) before any training runs.",
        epilog="Start with `python -m i6_shard demo`; `python -m i6_shard COMMAND --help` explains each command "
        "and ends with an example.",
    )
    parser.add_argument("--version", action="version", version=f"i6_shard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_make_data(sub)
    _add_rechunk(sub)
    _add_sizes(sub)
    _add_costs(sub)
    _add_plan(sub)
    _add_files(sub)
    _add_compare_plans(sub)
    _add_report(sub)
    _add_demo(sub)
    _add_train_report(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for check in getattr(args, "checks", ()):  # the options' checks that name the next step, before the command
            check(args)
        return args.func(args)
    except (ValueError, TypeError, OSError, ImportError) as exc:  # user errors and file errors: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

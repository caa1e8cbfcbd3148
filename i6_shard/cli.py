"""Command line: ``python -m i6_shard {sizes,demo} ...``. Parses arguments, calls
the core, prints; no logic of its own."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import core


def _cmd_sizes(args: argparse.Namespace) -> int:
    trees = core.read_file_list(args.file_list)
    sizes = core.collect_file_sizes(trees, num_threads=args.threads)
    core.save_file_sizes(sizes, args.output)
    print(f"{len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {args.output}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    out = args.output
    paths = core.make_demo_files(os.path.join(out, "data"), num_files=args.num_files, seed=args.seed)
    list_path = os.path.join(out, "files.txt")
    core.write_file_list(paths, list_path)
    sizes = core.collect_file_sizes(core.read_file_list(list_path))
    sizes_path = os.path.join(out, "file_sizes.npz")
    core.save_file_sizes(sizes, sizes_path)
    print(f"demo: {len(paths)} generated files in {os.path.join(out, 'data')}, list {list_path}")
    print(f"file sizes: {len(sizes)} entries, {int(sizes.sizes.sum()):,} bytes -> {sizes_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m i6_shard", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sizes", help="compute file sizes of a file list (.txt/.json/.py) as RETURNN would")
    p.add_argument("file_list")
    p.add_argument("-o", "--output", required=True, help="output .npz")
    p.add_argument("--threads", type=int, default=None, help=f"stat threads (default {core.DEFAULT_NUM_THREADS})")
    p.set_defaults(func=_cmd_sizes)

    p = sub.add_parser("demo", help="generate a small file set and run the whole pipeline on it")
    p.add_argument("-o", "--output", default="i6_shard_demo", help="output directory (default: ./i6_shard_demo)")
    p.add_argument("--num-files", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

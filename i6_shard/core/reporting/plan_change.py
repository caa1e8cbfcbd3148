"""The report of a change of plan (e.g. of GPU count) when a training resumes: per affected full epoch the
files read twice and never, per rank, and the full-epoch boundaries where resuming avoids both; as JSON
summary, text report and the full file lists, written as one directory."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..io.atomic import atomic_dir, check_output_dir
from ..io.plan_file import read_plan_head, read_plan_layout
from ..pure.compare import PlanChange, ResumeFullEpoch, compare_plans
from ..pure.plan import ShardPlan
from .outputs import PLAN_FILE
from .plot import plot_plan_change, require_matplotlib
from .report import format_cost, summary_json

__all__ = ["CHANGE_OUTPUTS", "render_change_report", "compare_plan_files", "CHANGE_PLOT_FILE"]

CHANGE_FORMAT_VERSION = 1
#: What a compare-plans directory holds: the summary, the text report, every file read twice or never.
CHANGE_SUMMARY_FILE, CHANGE_REPORT_FILE, CHANGE_FILES_FILE = "summary.json", "report.txt", "files.json"
CHANGE_OUTPUTS = (CHANGE_SUMMARY_FILE, CHANGE_REPORT_FILE, CHANGE_FILES_FILE)
#: The picture of the change, written beside them when asked for (``plot=True``).
CHANGE_PLOT_FILE = "plot.png"
_NUM_EXAMPLES = 5


def _settings(change: PlanChange, which: str) -> Dict[str, Any]:
    plan = change.old if which == "old" else change.new
    return plan.settings.as_dict()


def _full_epoch_summary(change: PlanChange, full: ResumeFullEpoch) -> Dict[str, Any]:
    keys, costs = change.new.keys, change.new.costs
    num_ranks = max(change.old.num_shards, change.new.num_shards)
    twice, never = full.read_twice, full.never_read
    twice_rank, never_rank = full.read_twice_per_rank(num_ranks), full.never_read_per_rank(num_ranks)
    reads_before = np.bincount(full.old_rank[full.old_rank >= 0], minlength=num_ranks).tolist()
    reads_after = np.bincount(full.new_rank[full.new_rank >= 0], minlength=num_ranks).tolist()
    return {
        "full_epoch_0idx": full.full_epoch_0idx,
        "first_epoch": full.first_epoch,
        "last_epoch": full.last_epoch,
        "old_epochs": [full.first_epoch, full.resume_epoch - 1],
        "new_epochs": [full.resume_epoch, full.last_epoch],
        "num_files": change.new.num_files,
        "read_twice": int(twice.size),
        "never_read": int(never.size),
        "read_twice_bytes": int(costs[twice].sum()),
        "never_read_bytes": int(costs[never].sum()),
        "per_rank": [
            {
                "shard_index": r,
                "read_twice": int(twice_rank[r]),
                "never_read": int(never_rank[r]),
                "files_before": reads_before[r],
                "files_after": reads_after[r],
            }
            for r in range(num_ranks)
        ],
        "examples": {
            "read_twice": [keys[i] for i in twice[:_NUM_EXAMPLES].tolist()],
            "never_read": [keys[i] for i in never[:_NUM_EXAMPLES].tolist()],
        },
    }


def change_summary(change: PlanChange) -> Dict[str, Any]:
    """The comparison as JSON types: per affected full epoch (``full_epochs``, empty when resuming at a
    full-epoch boundary) the ``read_twice`` and ``never_read`` counts, bytes and per-rank counts; and the
    resume epochs at the boundaries around it with their (zero) counts."""
    return {
        "format_version": CHANGE_FORMAT_VERSION,
        "resume_epoch": change.resume_epoch,
        "partition_epoch": change.new.partition_epoch,
        "num_files": change.new.num_files,
        "old": _settings(change, "old"),
        "new": _settings(change, "new"),
        "at_full_epoch_boundary": change.at_boundary,
        "full_epochs": [_full_epoch_summary(change, full) for full in change.affected],
        "boundaries": [
            {
                "resume_epoch": e,
                "read_twice": sum(int(a.read_twice.size) for a in affected),
                "never_read": sum(int(a.never_read.size) for a in affected),
            }
            for e, affected in change.boundaries
        ],
    }


def change_files(change: PlanChange) -> Dict[str, Any]:
    """Every file read twice or never in the affected full epochs, with the ranks and sub-epochs involved
    (file entries in list order)."""
    keys = change.new.keys
    out = []
    for full in change.affected:
        out.append(
            {
                "full_epoch_0idx": full.full_epoch_0idx,
                "read_twice": [
                    {
                        "key": keys[i],
                        "entry_idx": i,
                        "old_rank": int(full.old_rank[i]),
                        "old_epoch": int(full.old_epoch[i]),
                        "new_rank": int(full.new_rank[i]),
                        "new_epoch": int(full.new_epoch[i]),
                    }
                    for i in full.read_twice.tolist()
                ],
                "never_read": [
                    {
                        "key": keys[i],
                        "entry_idx": i,
                        "planned_rank": int(full.planned_rank[i]),
                        "planned_epoch": int(full.planned_epoch[i]),
                    }
                    for i in full.never_read.tolist()
                ],
            }
        )
    return {"format_version": CHANGE_FORMAT_VERSION, "resume_epoch": change.resume_epoch, "full_epochs": out}


def _describe(settings: Mapping[str, Any]) -> str:
    parts = [
        f"num_shards={settings['num_shards']}",
        f"partition_epoch={settings['partition_epoch']}",
        f"seq_ordering={settings['seq_ordering']}",
        f"random_seed_offset={settings['random_seed_offset']}",
        f"distribution={settings['distribution']}",
    ]
    if settings.get("fixed_random_seed") is not None:
        parts.append(f"fixed_random_seed={settings['fixed_random_seed']}")
    return ", ".join(parts)


def render_change_report(summary: Mapping[str, Any]) -> str:
    """The text report of :func:`change_summary` (deterministic, no paths)."""
    old, new = summary["old"], summary["new"]
    e, part = summary["resume_epoch"], summary["partition_epoch"]
    unit = new.get("unit", "bytes")  # what the plans' costs count (a frames-balanced plan counts frames)
    k = (e - 1) // part
    title = f"i6_shard plan change: resume at epoch {e}, num_shards {old['num_shards']} -> {new['num_shards']}"
    lines = [
        title,
        "=" * len(title),
        "",
        f"  old plan  {_describe(old)}",
        f"  new plan  {_describe(new)}",
        f"  files     {summary['num_files']:,}",
        "",
    ]
    add = lines.append
    if summary["at_full_epoch_boundary"]:
        add(
            f"Epoch {e} starts full epoch {k} (epochs {k * part + 1}..{(k + 1) * part}): the new plan cuts that full "
            "epoch from its start, so every file is read exactly once in every full epoch; nothing is read twice "
            "or never."
        )
    for full in summary["full_epochs"]:
        lines += _render_full_epoch(full, old=old, new=new, unit=unit)
    add("")
    add("Resuming at a full-epoch boundary reads every file once per full epoch:")
    lines += _render_boundaries(summary["boundaries"], resume_epoch=e, old_num_shards=old["num_shards"])
    return "\n".join(lines) + "\n"


def _render_full_epoch(
    full: Mapping[str, Any], *, old: Mapping[str, Any], new: Mapping[str, Any], unit: str
) -> List[str]:
    """The lines of one affected full epoch in :func:`render_change_report`: what is read twice or never, per rank,
    with examples."""
    lines: List[str] = []
    add = lines.append
    n = full["num_files"]
    (a, b), (c, d) = full["old_epochs"], full["new_epochs"]
    add(
        f"Full epoch {full['full_epoch_0idx']} (epochs {full['first_epoch']}..{full['last_epoch']}): epochs "
        f"{a}..{b} were read under the old plan ({old['num_shards']} ranks), epochs {c}..{d} are read under the "
        f"new one ({new['num_shards']} ranks), which cuts the full epoch anew"
    )
    add(
        f"  read twice   {full['read_twice']:,} of {n:,} files ({format_cost(full['read_twice_bytes'], unit)}): read "
        "before the resume and again after it"
    )
    add(
        f"  never read   {full['never_read']:,} of {n:,} files ({format_cost(full['never_read_bytes'], unit)}): in "
        "neither part"
    )
    add(f"  {'rank':>6} {'files before':>12} {'files after':>11} {'read twice':>10} {'never read':>10}")
    for row in full["per_rank"]:
        r = row["shard_index"]
        was, now = r < old["num_shards"], r < new["num_shards"]  # '-': the rank is not in that plan
        cells = [
            f"{row['files_before']:,}" if was else "-",
            f"{row['files_after']:,}" if now else "-",
            f"{row['read_twice']:,}" if now else "-",
            f"{row['never_read']:,}" if was else "-",
        ]
        add(f"  {r:>6} {cells[0]:>12} {cells[1]:>11} {cells[2]:>10} {cells[3]:>10}")
    add(
        "    (read twice: of the files this rank reads from the resume on, those already read; never read: of "
        "the files this rank would have read under the old plan, those no rank reads)"
    )
    for what in ("read_twice", "never_read"):
        if full["examples"][what]:
            shown = ", ".join(json.dumps(x, ensure_ascii=False) for x in full["examples"][what])
            more = ", ..." if full[what] > len(full["examples"][what]) else ""
            add(f"  e.g. {what.replace('_', ' ')}: {shown}{more}")
    return lines


def _render_boundaries(boundaries: List[Mapping[str, Any]], *, resume_epoch: int, old_num_shards: int) -> List[str]:
    """The lines of :func:`render_change_report` that name each full-epoch boundary to resume at instead."""
    lines: List[str] = []
    add = lines.append
    for row in boundaries:
        be = row["resume_epoch"]
        if be < resume_epoch:
            how = (
                f"restart from the checkpoint of epoch {be - 1} and redo epochs {be}..{resume_epoch - 1}"
                if be > 1
                else "start the training anew"
            )
        elif be == resume_epoch:
            how = "as planned"
        else:
            how = f"finish epochs {resume_epoch}..{be - 1} on the old {old_num_shards} ranks first"
        add(f"  resume at epoch {be} ({how}): {row['read_twice']} read twice, {row['never_read']} never read")
    return lines


def check_change_dir(out_dir: str | os.PathLike) -> None:
    """Raise now what :func:`write_change_dir` would raise about ``out_dir``."""
    check_output_dir(out_dir, names=CHANGE_OUTPUTS + (CHANGE_PLOT_FILE,), what="compare-plans directory")


def write_change_dir(change: PlanChange, out_dir: str | os.PathLike, *, plot: bool = False) -> Dict[str, Any]:
    """``summary.json``, ``report.txt`` and ``files.json`` (with ``plot``, also ``plot.png``: see
    :func:`~i6_shard.core.reporting.plot.plot_plan_change`) into ``out_dir``, swapped in as one set.

    :return: the summary
    :raises ImportError: before anything is written, if ``plot`` and matplotlib is missing
    """
    summary = change_summary(change)
    if plot:
        require_matplotlib()
    names = CHANGE_OUTPUTS + (CHANGE_PLOT_FILE,)
    with atomic_dir(os.fspath(out_dir), names=names, what="compare-plans directory") as tmp:
        if plot:
            plot_plan_change(summary, os.path.join(tmp, CHANGE_PLOT_FILE))
        for name, text in (
            (CHANGE_SUMMARY_FILE, summary_json(summary)),
            (CHANGE_REPORT_FILE, render_change_report(summary)),
            (CHANGE_FILES_FILE, json.dumps(change_files(change), sort_keys=True, indent=1, ensure_ascii=True) + "\n"),
        ):
            with open(os.path.join(tmp, name), "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
    return summary


def compare_plan_files(
    old_plan: str | os.PathLike,
    new_plan: str | os.PathLike,
    *,
    resume_epoch: int,
    out_dir: Optional[str | os.PathLike] = None,
    plot: bool = False,
) -> Dict[str, Any]:
    """``python -m i6_shard compare-plans OLD NEW --resume-epoch E [-o DIR]`` as a function: compare the plan a
    training ran with and the one it resumes with at ``resume_epoch`` (each a plan file, or a plan directory
    holding one), and with ``out_dir`` write ``summary.json``, ``report.txt`` and ``files.json`` there (with
    ``plot``, also ``plot.png``).
    It reads each plan's stored bins (what the training read), never a recomputation, and checks that each
    full epoch it uses gives every file exactly once.

    :return: the summary (:func:`change_summary`): ``read_twice``/``never_read`` per affected full epoch
    :raises ValueError: for plans that cannot be compared (see :func:`~i6_shard.core.pure.compare.compare_plans`)
        or an ``out_dir`` that is not new, empty or an earlier compare-plans directory (checked first)
    """
    if out_dir is not None:
        check_change_dir(out_dir)
    paths = [os.path.join(p, PLAN_FILE) if os.path.isdir(p) else os.fspath(p) for p in (old_plan, new_plan)]
    old, new = (read_plan_head(p).plan for p in paths)

    def stored(path: str, plan: ShardPlan):  # the bins the training read, each checked to cover every file once
        return lambda k: read_plan_layout(path, full_epoch_0idx=k, num_files=plan.num_files)

    change = compare_plans(
        old, new, resume_epoch=resume_epoch, old_layout=stored(paths[0], old), new_layout=stored(paths[1], new)
    )
    return change_summary(change) if out_dir is None else write_change_dir(change, out_dir, plot=plot)

"""The report of a finished or running training, measured from RETURNN's own logs: the logs read, the
analysis (:mod:`i6_shard.core.pure.training`) rendered as text, JSON and plot."""

from __future__ import annotations

import json
import functools
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..io.atomic import atomic_path, atomic_write, check_output_path
from .train_records import dump_summary, summarize_records
from ..io.file_lengths import load_file_lengths, read_hdf_lengths
from ..io.plan_file import load_plan
from ..io.plan_steps import plan_file_of, read_planned_steps
from ..io.returnn_log import read_training_logs
from ..io.seq_filter import filtered_hdf_lengths
from ..pure.batching import SyncMode
from ..pure.fmt import num, pct
from ..pure.train_planned import compare_planned_steps
from ..pure.training import (
    DEFAULT_MAX_DROPPED,
    DEFAULT_MIN_STEPS_RATIO,
    analyze_training_records,
)
from .plot import require_matplotlib

__all__ = [
    "DEFAULT_MAX_DROPPED",
    "DEFAULT_MIN_STEPS_RATIO",
    "TRAIN_REPORT_FILE",
    "TRAIN_SUMMARY_FILE",
    "TRAIN_PLOT_FILE",
    "render_train_report",
    "write_train_report",
]

TRAIN_REPORT_FILE, TRAIN_SUMMARY_FILE, TRAIN_PLOT_FILE = "report.txt", "summary.json", "plot.png"
#: Percentages in the training report: one decimal.
_pct1 = functools.partial(pct, digits=1)


def train_summary_json(summary: Mapping[str, Any]) -> str:
    """The summary as JSON text with sorted keys."""
    return json.dumps(summary, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def render_train_report(summary: Mapping[str, Any]) -> str:
    """The text report of :func:`analyze_training`'s summary (deterministic, no times): one section per
    function below."""
    s = summary
    lines = [
        "i6_shard training report (measured from RETURNN's logs)",
        "=======================================================",
        "",
    ]
    lines += _train_settings_section(s) + [""] + _sub_epochs_section(s) + [""] + _full_epochs_section(s)
    p = s["passes"]
    lines += [
        "",
        "Whole training",
        f"  passes over the data made {'?' if p['made'] is None else format(p['made'], '.3f')}, "
        f"promised {'?' if p['promised'] is None else format(p['promised'], '.3f')}",
        f"  dropped per sub-epoch: mean {_pct1(s['dropped_fraction'])}, worst {_pct1(s['dropped_fraction_max'])} "
        "of the frames",
    ]
    if s.get("filtered_fraction") is not None:
        lines.append(
            f"  removed by the length filter (max_seq_length), not counted as dropped: mean "
            f"{_pct1(s['filtered_fraction'])} of the frames per sub-epoch"
        )
    lines += _corpora_section(s)
    lines += [
        "",
        "Alarms",
    ]
    lines += [f"  - {a}" for a in s["alarms"]] or ["  none"]
    if s["notes"]:
        lines += ["", "Notes"] + [f"  - {n}" for n in s["notes"]]
    return "\n".join(lines) + "\n"


def _corpora_section(s: Mapping[str, Any]) -> List[str]:
    """Per corpus of a plan mixed by weight: its frames read and consumed, its share of the sub-epochs' frames
    beside the plan's (none for a plan of one list)."""
    corpora = s.get("corpora")
    if not corpora:
        return []
    lines = ["", "Corpora (frames of the files given, once per read; consumed: each rank's split by share)"]
    lines.append("  corpus      weight   file reads  frames read  consumed  share mean  planned mean  max off")
    for c in corpora:
        pairs = [(x, y) for x, y in zip(c["share"], c["planned_share"]) if x is not None]
        total = [sum(v for v in c[key] if v is not None) for key in ("reads", "frames_read", "consumed_frames")]
        mean = float(np.mean([x for x, _ in pairs])) if pairs else None
        planned = float(np.mean([y for _, y in pairs])) if pairs else None
        off = max((abs(x - y) for x, y in pairs), default=None)
        lines.append(
            f"  {c['name']:<10} {c['weight']:>7} {total[0]:>12,} {total[1]:>12,} {total[2]:>9,} "
            f"{_pct1(mean):>11} {_pct1(planned):>13} {_pct1(off):>8}"
        )
    return lines


def _train_settings_section(s: Mapping[str, Any]) -> List[str]:
    pe = s["partition_epoch"]
    rows = [
        ("ranks", str(s["num_ranks"])),
        (
            "partition_epoch",
            "unknown"
            if pe is None
            else f"{pe}" + (" (inferred from the files)" if s["partition_epoch_inferred"] else ""),
        ),
        ("mode", _mode_text(s)),
        (
            "plan",
            "none"
            if s["plan"] is None
            else f"{s['plan']['num_files']:,} files, num_shards={s['plan']['num_shards']}, "
            f"partition_epoch={s['plan']['partition_epoch']}, distribution={s['plan']['distribution']}",
        ),
        ("files", f"{s['num_files']:,} ({num(s['total_seqs'])} sequences, {num(s['total_frames'])} frames)"),
        ("frames counted on", s["frames_dim"] or "unknown (no log_batch_size)"),
        ("frames per step", "?" if s["frames_per_step"] is None else f"{s['frames_per_step']:.1f} (mean per rank)"),
    ]
    if s.get("planned_steps") is not None:  # (with a plan file: write_train_report compares its steps)
        rows.insert(4, ("planned steps", _planned_steps_row(s["planned_steps"])))
    return [f"  {k:<18} {v}" for k, v in rows]


def _mode_text(s: Mapping[str, Any]) -> str:
    """The sharding mode the report takes, or that the logs do not tell it (a wrapper's dataset, e.g. in a
    MultiEpochDataset, without its partition_epoch or a plan)."""
    if s.get("sharded_known") is False:
        return (
            "not told by these logs (the DistributeFilesDataset is inside a wrapper, e.g. a MultiEpochDataset, and "
            "its partition_epoch is not shown: give --partition-epoch or --plan)"
        )
    if s["sharded"]:
        return "sharded (each file on one rank per full epoch)"
    return "unsharded (each rank reads every file per full epoch)"


def _planned_steps_row(p: Mapping[str, Any]) -> str:
    """Whether the plan's simulated steps are compared with the logged ones, and how many differ."""
    if not p["simulated"]:
        return "none (" + ("planned without batching" if p["found"] else "no summary.json beside the plan") + ")"
    if p["exact"] is None:
        return "none (no logged sub-epoch is in the plan)"
    exact = "simulated exactly" if p["exact"] else f"not simulated exactly everywhere ({p['reason'] or 'see notes'})"
    return (
        f"{exact}; {p['differences']:,} of {p['compared_records']:,} finished (sub-epoch, rank) differ from the "
        f"logged steps, {p['drop_differences']:,} sub-epochs in the dropped share"
    )


def _sub_epochs_section(s: Mapping[str, Any]) -> List[str]:
    sync = s.get("sync") or SyncMode().as_dict()
    ends = (
        "a sub-epoch ends on every rank when the first rank runs out"
        if sync["reduce_type"] == "grad"
        else f"param sync every {sync['param_sync_step']} steps: a rank that runs out stops, the others run on to "
        "their next sync"
    )
    lines = [
        "Per sub-epoch and rank: frames consumed/available (sequences consumed/available), files vs plan",
        f"  ({ends}; dropped = what the others still held)",
    ]
    for se in s["sub_epochs"]:
        exp = "" if se["expected_steps"] is None else f" (expected ~{se['expected_steps']})"
        state = "" if se["finished"] else "  [not finished]"
        lines.append(
            f"  sub-epoch {se['epoch']:>3}"
            + ("" if se["full_epoch_0idx"] is None else f" (full epoch {se['full_epoch_0idx']})")
            + f": {num(se['steps'])} steps{exp}, dropped {_pct1(se['dropped_fraction'])} of frames"
            + _planned_drop(se)
            + ", "
            f"{_pct1(se['dropped_fraction_seqs'])} of sequences"
            + ("" if se.get("filtered_fraction") is None else f", filtered {_pct1(se['filtered_fraction'])}")
            + state
        )
        lines += [_rank_line(x, finished=se["finished"]) for x in se["ranks"]] if se["ranks"] is not None else []
    return lines


def _planned_drop(se: Mapping[str, Any]) -> str:
    """The plan's drop beside the logged one, or that the plan's simulation is not exact there."""
    if se.get("planned_exact") is False:
        return " (plan: not simulated exactly)"
    p = se.get("dropped_fraction_planned")
    return "" if p is None else f" (planned {_pct1(p)})"


def _planned_steps(x: Mapping[str, Any], *, finished: bool) -> str:
    """The plan's steps (and batches) beside the logged steps; where they differ in a finished sub-epoch, said in
    capitals."""
    if "planned_steps" not in x:
        return ""
    p, b = x["planned_steps"], x["planned_batches"]
    if p is None:
        return " (planned: not simulated exactly)"
    differ = ", STEPS DIFFER FROM THE PLAN" if finished and x["steps"] is not None and x["steps"] != p else ""
    return f" (planned {num(p)} of {num(b)} batches){differ}"


def _rank_line(x: Mapping[str, Any], *, finished: bool = True) -> str:
    if x.get("missing"):
        return f"    rank {x['rank']:>2}: not in the log"
    match = {None: "", True: ", files as planned", False: ", FILES DIFFER FROM THE PLAN"}[x["files_match_plan"]]
    offered = (
        ""
        if x["offered_seqs"] is None or x["offered_seqs"] == x["available_seqs"]
        else f", dataset offered {x['offered_seqs']:,}"
    )
    return (
        f"    rank {x['rank']:>2}: {num(x['consumed_frames'])}/{num(x['available_frames'])} frames "
        f"({num(x['consumed_seqs'])}/{num(x['available_seqs'])} seqs{offered}), {num(x['steps'])} steps"
        f"{_planned_steps(x, finished=finished)}, "
        f"{num(x['num_files'])} files{match}"
    )


def _full_epochs_section(s: Mapping[str, Any]) -> List[str]:
    lines = ["Full epochs"]
    if not s["full_epochs"]:
        lines.append("  none (partition_epoch unknown)")
    for fe in s["full_epochs"]:
        lines.append(
            f"  full epoch {fe['full_epoch_0idx']}{'' if fe['complete'] else ' (incomplete)'}: "
            f"{num(fe['consumed_frames'])} frames, {num(fe['consumed_seqs'])} sequences consumed, "
            f"{'?' if fe['passes'] is None else format(fe['passes'], '.3f')} passes; "
            f"files read twice {num(fe['files_read_twice'])}, never {num(fe['files_never_read'])}; "
            f"sequences never read {num(fe['seqs_never_read'])}"
        )
    return lines


def plot_training(summary: Mapping[str, Any], path: str) -> None:
    """PNG: per rank and sub-epoch the share of its frames consumed (heat map), the dropped share
    per sub-epoch, and the steps against the expected steps. Written atomically.

    :raises ValueError: if ``path`` does not end in ``.png``
    :raises ImportError: without matplotlib
    """
    if not os.fspath(path).lower().endswith(".png"):
        raise ValueError(f"plot path {os.fspath(path)!r} must end in .png: the plot is written as PNG")
    require_matplotlib()
    from matplotlib.figure import Figure

    subs = summary["sub_epochs"]
    num_ranks = summary["num_ranks"]
    epochs = np.array([se["epoch"] for se in subs], dtype=np.int64)
    share = np.full((num_ranks, len(subs)), np.nan)
    for j, se in enumerate(subs):
        for x in se["ranks"] or ():  # (None: the records are in records.tsv)
            c, a = x.get("consumed_frames"), x.get("available_frames")
            if c is None or a is None:
                c, a = x.get("consumed_seqs"), x.get("available_seqs")
            if c is not None and a:
                share[x["rank"], j] = c / a
    drop = np.array([np.nan if se["dropped_fraction"] is None else 100 * se["dropped_fraction"] for se in subs])
    steps = np.array([np.nan if se["steps"] is None else se["steps"] for se in subs], dtype=np.float64)
    exp = np.array([np.nan if se["expected_steps"] is None else se["expected_steps"] for se in subs])

    n = max(len(subs), 1)
    width = float(np.clip(6 + n * 0.12, 8, 16))
    fig = Figure(figsize=(width, 8.0), dpi=100, layout="constrained")
    ax_map, ax_drop, ax_steps = fig.subplots(3, 1, sharex=True, height_ratios=[max(1.2, 0.3 * num_ranks), 1.6, 1.6])
    lo, hi = (float(epochs.min()) - 0.5, float(epochs.max()) + 0.5) if len(subs) else (0.5, 1.5)
    image = ax_map.imshow(
        share,
        aspect="auto",
        interpolation="nearest",
        origin="lower",
        cmap="viridis",
        vmin=0.0,
        vmax=1.0,
        extent=(lo, hi, -0.5, num_ranks - 0.5),
    )
    cbar = fig.colorbar(image, ax=ax_map, pad=0.01, fraction=0.04)
    cbar.set_label("consumed / available")
    ax_map.set_ylabel("rank")
    if num_ranks <= 16:
        ax_map.set_yticks(range(num_ranks))
    ax_map.set_title("Share of its frames each rank consumed per sub-epoch (1: all of them)", fontsize=10, loc="left")
    ax_drop.bar(epochs, np.nan_to_num(drop), width=0.8, color="tab:orange", label="dropped")
    thr = summary["thresholds"]["max_dropped"]
    if thr is not None:
        ax_drop.axhline(100 * thr, color="tab:red", linestyle=":", linewidth=1, label=f"alarm {100 * thr:.1f}%")
    if summary["dropped_fraction"] is not None:
        ax_drop.axhline(
            100 * summary["dropped_fraction"],
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"mean {100 * summary['dropped_fraction']:.2f}%",
        )
    planned = _draw_planned_drop(ax_drop, subs, epochs)
    ax_drop.set_ylabel("dropped %")
    top = np.fmax(drop, planned)  # the planned drop is beside the measured one: both fit
    ax_drop.set_ylim(
        0, max(float(np.nanmax(top)) * 1.15 if np.isfinite(top).any() else 0.0, 100 * (thr or 0) * 1.3, 0.1)
    )
    ax_drop.legend(loc="upper right", fontsize=8, framealpha=0.9)
    ax_drop.set_title(
        "Frames dropped per sub-epoch: 1 - sum consumed / sum available over the ranks", fontsize=10, loc="left"
    )
    ax_steps.bar(epochs, np.nan_to_num(steps), width=0.8, color="tab:blue", label="steps")
    if np.isfinite(exp).any():
        ax_steps.plot(
            epochs, exp, color="black", marker="_", markersize=14, linestyle="none", label="expected from the files"
        )
    ax_steps.set_ylabel("steps")
    ax_steps.set_xlabel("epoch (sub-epoch, 1-based as RETURNN counts)")
    ax_steps.legend(loc="upper right", fontsize=8, framealpha=0.9)
    too_few = any(a.startswith("steps far below") for a in summary["alarms"])  # the alarm, only where it was raised
    ax_steps.set_title(
        "Steps per sub-epoch and those the files should give"
        + (": far below them, as with double sharding (RETURNN #1738)" if too_few else ""),
        fontsize=10,
        loc="left",
    )
    ax_steps.set_xlim(lo, hi)
    if len(subs) <= 40:
        ax_steps.set_xticks(epochs)
    pe = summary["partition_epoch"]
    if pe:  # the start of each full epoch after the first that holds a logged sub-epoch (not every one up to the last)
        for k in sorted({(int(e) - 1) // pe for e in epochs} - {0}):
            for ax in (ax_map, ax_drop, ax_steps):
                ax.axvline(k * pe + 0.5, color="0.3", linewidth=0.8, linestyle=":")
    fig.suptitle(
        f"Training measured from RETURNN's logs: {num_ranks} ranks, {len(subs)} sub-epochs, "
        f"{len(summary['alarms'])} alarm{'' if len(summary['alarms']) == 1 else 's'}",
        fontsize=11,
    )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def _draw_planned_drop(ax, subs: Sequence[Mapping[str, Any]], epochs: np.ndarray) -> np.ndarray:
    """The plan's simulated drop per sub-epoch (``dropped_fraction_planned``, in %; NaN where not planned exactly)
    as a line with dots over the measured bars, drawn above them and the axis (a planned 0 stays visible); the
    values, for the y limit."""
    planned = np.array(
        [np.nan if se.get("dropped_fraction_planned") is None else 100 * se["dropped_fraction_planned"] for se in subs]
    )
    if np.isfinite(planned).any():
        ax.plot(
            epochs,
            planned,
            color="tab:red",
            marker="o",
            markersize=4,
            linewidth=1.2,
            zorder=3,
            clip_on=False,
            label=f"planned (mean {np.nanmean(planned):.2f}%)",
        )
    return planned


def _plan_sub_epochs_are_training_ones(log: Any) -> bool:
    """Whether the plan's sub-epochs are the training's: not under a wrapper whose sub-epoch holds several epochs of
    the DistributeFilesDataset (MultiEpochDataset), whose plan is the dataset's (its files are not compared either)."""
    files_from = log.files_from or {}
    return not (files_from.get("wrapped") and (files_from.get("multi_epoch") or 1) != 1)


def write_train_report(
    log_paths: Sequence[str],
    out_dir: str,
    *,
    plan_path: Optional[str] = None,
    file_lengths_path: Optional[str] = None,
    read_hdf: bool = True,
    partition_epoch: Optional[int] = None,
    max_dropped: float = DEFAULT_MAX_DROPPED,
    min_steps_ratio: float = DEFAULT_MIN_STEPS_RATIO,
    plot: bool = True,
    dataset_name: str = "train",
    sync: Optional[SyncMode] = None,
    multi_epoch: Optional[int] = None,
    max_seq_length: Any = None,
    min_seq_length: Any = None,
    records_file: bool = False,
) -> Dict[str, Any]:
    """Read the logs (and plan, lengths), analyze, and write ``out_dir``/report.txt, summary.json and
    (with ``plot``) plot.png, each atomically (and records.tsv above ``MAX_LISTED_RECORDS`` records); nothing is
    written if reading or analysis fails.

    ``plan_path``: the plan file, or its directory. The plan's steps (``steps_taken``, ``steps_exact``) and drop from
    the ``summary.json`` beside it are put beside the logged ones
    (:func:`~i6_shard.core.pure.train_planned.compare_planned_steps`), each difference an alarm.

    File lengths come from ``file_lengths_path`` (JSON, see :func:`~i6_shard.core.io.file_lengths.load_file_lengths`)
    and, with ``read_hdf``, from the HDF files the logs name (relative names resolved against the
    training's working directory from the log) for keys the JSON does not have. ``sync``: how the ranks
    synced (None: grad sync, torch_distributed's default), for the expected steps. ``multi_epoch``: epochs of a
    wrapped DistributeFilesDataset per sub-epoch (MultiEpochDataset; default: inferred from the logs).
    ``max_seq_length``/``min_seq_length``: the training's length filter (its config values), whose removals from
    the HDF files are shown apart from the dropped share. ``records_file``: write records.tsv also where the summary
    lists the records.
    """
    check_output_path(out_dir, directory=True)
    if plot:
        require_matplotlib()
    log = read_training_logs(list(log_paths), dataset_name=dataset_name, multi_epoch=multi_epoch)
    try:  # (the records wait in the log's scratch file until they are written; closed, it is gone)
        plan = load_plan(plan_file_of(plan_path)) if plan_path is not None else None
        lengths = dict(load_file_lengths(file_lengths_path)) if file_lengths_path is not None else {}
        if read_hdf:  # (each key once, not once per record that names it)
            keys = dict.fromkeys(log.file_keys())
            if plan is not None:
                keys.update(dict.fromkeys(plan.keys))
            base = log.ranks[0].cwd or os.path.dirname(os.path.abspath(log.ranks[0].path))
            missing = [k for k in keys if k not in lengths]
            lengths.update(read_hdf_lengths(missing, base_dir=base))
        filtered = None
        if max_seq_length is not None or min_seq_length is not None:
            keys = list(dict.fromkeys(log.file_keys()))
            base = log.ranks[0].cwd or os.path.dirname(os.path.abspath(log.ranks[0].path))
            filtered = filtered_hdf_lengths(
                keys, max_seq_length=max_seq_length, min_seq_length=min_seq_length, base_dir=base
            )
        summary, records = analyze_training_records(
            log,
            file_lengths=lengths,
            plan=plan,
            partition_epoch=partition_epoch,
            max_dropped=max_dropped,
            min_steps_ratio=min_steps_ratio,
            sync=sync or SyncMode(),
            filtered_lengths=filtered,
        )
        if plan is not None and plan.num_shards == log.num_ranks and _plan_sub_epochs_are_training_ones(log):
            planned = read_planned_steps(plan_path, num_shards=plan.num_shards, max_epoch=max(log.epochs, default=0))
            compare_planned_steps(summary, records, planned)
        os.makedirs(out_dir, exist_ok=True)
        # the records listed, or above MAX_LISTED_RECORDS streamed from their grids to records.tsv
        summary = summarize_records(summary, out_dir, records, always_file=records_file)
        with atomic_write(os.path.join(out_dir, TRAIN_SUMMARY_FILE), "wt", encoding="ascii", newline="\n") as f:
            dump_summary(summary, f)
        with atomic_write(os.path.join(out_dir, TRAIN_REPORT_FILE), "wt", encoding="utf-8", newline="\n") as f:
            f.write(render_train_report(summary))
        if plot:
            plot_training(summary, os.path.join(out_dir, TRAIN_PLOT_FILE))
    finally:
        if log.spill is not None:
            log.spill.close()
    return summary

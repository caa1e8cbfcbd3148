"""All outputs of a plan in one call (plan file, JSON summary, text report, plot), shared by the Sisyphus job and
the command line so that both write the same bytes; as one directory that is replaced whole, for the command line.
The plan and everything the outputs show are computed by the planning floor (:mod:`i6_shard.core.planning`); this
module renders what it returns and writes it."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from ..io.atomic import atomic_dir, atomic_write, check_output_dir, check_suffix
from ..io.file_costs import FileCosts
from ..io.enospc import needing
from ..io.npz import npz_bytes_bound, save_npz
from ..io.progress import heartbeat
from ..planning import PlanOutputs, plan_outputs, plan_stats_outputs
from ..pure.batching import Batching, SyncMode
from ..pure.cache import NodeCache
from ..pure.plan import ShardPlan
from ..pure.stats import PlanStats
from .corpora import corpora_summary
from .plot import plan_png, require_matplotlib
from .prediction import prediction_summary
from .sub_epoch_sizes import add_frame_sizes, update_trade_off
from .report import cache_summary, render_report, summarize, summary_json

__all__ = [
    "summary_of",
    "write_outputs",
    "write_outputs_dir",
    "check_plan_dir",
    "write_plan_outputs",
    "PLAN_OUTPUTS",
    "plot_title",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
]

#: File names the command line uses inside its output directory.
PLAN_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE = "plan.npz", "summary.json", "report.txt", "plot.png"
#: What a plan directory may hold (``plot.png`` only if a plot was asked for).
PLAN_OUTPUTS = (PLAN_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE)


def plot_title(plan: ShardPlan, *, num_epochs: int) -> str:
    """The plot's title line: the settings that shape the picture."""
    s = plan.settings
    preloaded = f" (and {s.preloaded_sub_epochs} preloaded, planned)" if s.preloaded_sub_epochs else ""
    mode = {"sharded": "sharded", "unsharded": "unsharded", "unsharded_same_seed": "unsharded, same seed on all ranks"}[
        s.sharding
    ]
    return (
        f"{plan.num_files:,} files, num_shards={s.num_shards}, partition_epoch={s.partition_epoch}, "
        f"num_epochs={num_epochs}{preloaded}\n{mode}, seq_ordering={s.seq_ordering}, distribution={s.distribution}"
        + ("" if s.unit == "bytes" else f", balanced by {s.unit}")
    )


def summary_of(outputs: PlanOutputs) -> Dict[str, Any]:
    """The summary dict (see :func:`summarize`) of what the planning floor computed: the stats over
    ``outputs.num_epochs`` sub-epochs, the comparison where computed, the per-node cache footprint and the predicted
    loss where asked for."""
    plan = outputs.plan
    cache = (
        None
        if outputs.footprint is None
        else cache_summary(
            plan,
            outputs.footprint,
            cache_size=outputs.cache_size,
            partition_epoch_fits=outputs.partition_epoch_fits,
        )
    )
    compared = {}
    if outputs.compare_num_epochs is not None:
        compared = dict(
            other_distributions=outputs.other_distributions,
            other_mode=outputs.other_mode,
            compare_num_epochs=outputs.compare_num_epochs,
        )
    summary = summarize(plan, outputs.stats, cache=cache, non_contiguous=outputs.non_contiguous(), **compared)
    if outputs.ranks.prediction is not None:
        summary.update(prediction_summary(outputs.ranks))
        update_trade_off(plan, summary)
        add_frame_sizes(summary, outputs.ranks.simulation, partition_epoch=plan.partition_epoch)
    if outputs.lengths_from is not None:  # the lengths came from another archive than the one cut
        summary["lengths_from"] = outputs.lengths_from
    if plan.corpora is not None:  # corpora mixed by weight (a plan of one list has no entry: its bytes stay)
        predicted = summary.get("batching", {}).get("per_sub_epoch", {}).get("dropped_fraction")
        summary["corpora"] = corpora_summary(
            plan, num_epochs=outputs.num_epochs, layout=outputs.layout, predicted=predicted
        )
    return summary


def plan_summary(
    plan: ShardPlan, *, num_epochs: int, compare: bool = True, layout=None
) -> Tuple[Dict[str, Any], PlanStats]:
    """Summary dict (see :func:`summarize`) and stats of ``plan`` over ``num_epochs`` sub-epochs, from ``layout``
    (stored bins) where given; with ``compare``, the other distributions over
    :func:`~i6_shard.core.planning.compare_num_epochs_for` sub-epochs (computed by the planning floor)."""
    outputs = plan_stats_outputs(plan, num_epochs=num_epochs, layout=layout, compare=compare)
    return summary_of(outputs), outputs.stats


def _check_output_paths(
    *, plan_path: str, summary_path: str, report_path: str, plot_path: Optional[str] = None
) -> None:
    """ValueError for a path with another extension than its format, ImportError if a plot is asked for and
    matplotlib is missing: both before anything is computed or written."""
    for path, suffix, kind in (
        (plan_path, ".npz", "plan file"),
        (summary_path, ".json", "plan summary"),
        (report_path, ".txt", "plan report"),
        (plot_path, ".png", "plot"),
    ):
        if path is not None:
            check_suffix(path, suffix=suffix, kind=kind)
    if plot_path is not None:
        require_matplotlib()


def write_outputs(
    outputs: PlanOutputs, *, plan_path: str, summary_path: str, report_path: str, plot_path: Optional[str] = None
) -> dict:
    """Write the plan file (``.npz``, the floor's :func:`~i6_shard.core.planning.plan_arrays`), the JSON summary,
    the text report and, if ``plot_path`` is given, the PNG plot of what the planning floor computed. Every file
    is written atomically and its bytes depend only on the plan. The files are four: a reader may find some of
    them from this call and some from an earlier one while it runs (a Sisyphus job's outputs count only once the
    job has finished); :func:`write_outputs_dir` writes them as one directory instead. Everything is rendered
    before the first byte is written, so a full device names what the whole set needs (:func:`needing`).

    :return: the summary (JSON types); ``max_imbalance`` and ``dropped_fraction`` are its headline floats
    :raises ValueError: before anything is written, if a path has another extension than its format (``.npz``,
        ``.json``, ``.txt``, ``.png``), or the outputs hold no plan file arrays (a plan read from its file)
    :raises ImportError: before anything is written, if a plot is asked for and matplotlib is missing
    """
    _check_output_paths(plan_path=plan_path, summary_path=summary_path, report_path=report_path, plot_path=plot_path)
    summary, texts, need = _rendered(outputs, plot=plot_path is not None)
    with needing(need):
        _write_rendered(
            outputs, texts, plan_path=plan_path, summary_path=summary_path, report_path=report_path, plot_path=plot_path
        )
    return summary


def _rendered(outputs: PlanOutputs, *, plot: bool) -> Tuple[dict, Dict[str, bytes], int]:
    """The summary, the bytes of the summary, report and (with ``plot``) plot, and at most the bytes of the whole
    set (these and the plan file's arrays); a line on stderr every few seconds of a long rendering."""
    if outputs.arrays is None:
        raise ValueError("these plan outputs hold no plan file arrays; make them with core.planning.plan_outputs")
    with heartbeat("plan outputs: the summary"):
        summary = summary_of(outputs)
        texts = {SUMMARY_FILE: summary_json(summary).encode("ascii")}
    with heartbeat("plan outputs: the report"):
        texts[REPORT_FILE] = render_report(summary).encode("utf-8")
    if plot:
        with heartbeat("plan outputs: the plot"):
            texts[PLOT_FILE] = plan_png(
                outputs.stats,
                title=plot_title(outputs.plan, num_epochs=outputs.num_epochs),
                cache=outputs.footprint,
                cache_size=outputs.cache_size,
                prediction=summary.get("batching") if outputs.ranks.prediction is not None else None,
                corpora=summary.get("corpora"),
                sizes=summary.get("sub_epoch_sizes"),
            )
    return summary, texts, npz_bytes_bound(outputs.arrays) + sum(len(b) for b in texts.values())


def _write_rendered(
    outputs: PlanOutputs,
    texts: Dict[str, bytes],
    *,
    plan_path: str,
    summary_path: str,
    report_path: str,
    plot_path: Optional[str],
) -> None:
    save_npz(plan_path, outputs.arrays, kind="plan file")
    for name, path in ((SUMMARY_FILE, summary_path), (REPORT_FILE, report_path), (PLOT_FILE, plot_path)):
        if path is not None:
            with atomic_write(path, "wb") as f:
                f.write(texts[name])


def check_plan_dir(out_dir: str | os.PathLike) -> None:
    """Raise now what :func:`write_outputs_dir` would raise about ``out_dir`` (run it before expensive work)."""
    check_output_dir(out_dir, names=PLAN_OUTPUTS, what="plan directory")


def write_outputs_dir(outputs: PlanOutputs, out_dir: str | os.PathLike, *, plot: bool = True) -> dict:
    """:func:`write_outputs` into ``out_dir`` as one set: ``plan.npz``, ``summary.json``, ``report.txt`` and, with
    ``plot``, ``plot.png``, built in a temporary directory beside it and swapped in whole
    (:func:`~i6_shard.core.io.atomic.atomic_dir`). A reader of ``out_dir`` finds an earlier complete set or this
    one, never a mix and never a part; a set without a plot leaves no older ``plot.png`` behind. ``out_dir`` must
    be new, empty, or an earlier plan directory.

    :return: the summary, as :func:`write_outputs`
    :raises ValueError: before anything is written, as :func:`write_outputs`, or if ``out_dir`` holds other
        files (they would be replaced with it)
    """
    out_dir = os.fspath(out_dir)
    if plot:
        require_matplotlib()
    with atomic_dir(out_dir, names=PLAN_OUTPUTS, what="plan directory") as tmp:
        return write_outputs(
            outputs,
            plan_path=os.path.join(tmp, PLAN_FILE),
            summary_path=os.path.join(tmp, SUMMARY_FILE),
            report_path=os.path.join(tmp, REPORT_FILE),
            plot_path=os.path.join(tmp, PLOT_FILE) if plot else None,
        )


def write_plan_outputs(
    plan: ShardPlan,
    *,
    plan_path: str,
    summary_path: str,
    report_path: str,
    plot_path: Optional[str] = None,
    node_cache: Optional[NodeCache] = None,
    cache_size: Optional[int] = None,
    batching: Optional[Batching] = None,
    lengths: Optional[FileCosts] = None,
    sync: SyncMode = SyncMode(),
) -> dict:
    """:func:`write_outputs` of a plan made already: the paths are checked, the planning floor computes the
    outputs (:func:`~i6_shard.core.planning.plan_outputs`, with its options), then they are written, for
    sub-epochs ``1..plan.settings.num_epochs``.

    :raises ValueError: before anything is written, as :func:`write_outputs` and
        :func:`~i6_shard.core.planning.plan_outputs`
    """
    paths = dict(plan_path=plan_path, summary_path=summary_path, report_path=report_path, plot_path=plot_path)
    _check_output_paths(**paths)
    outputs = plan_outputs(
        plan, node_cache=node_cache, cache_size=cache_size, batching=batching, lengths=lengths, sync=sync
    )
    return write_outputs(outputs, **paths)


def write_plan_dir(plan: ShardPlan, out_dir: str | os.PathLike, *, plot: bool = True, **options: Any) -> dict:
    """:func:`write_outputs_dir` of a plan made already (``options`` as :func:`write_plan_outputs`);
    ``out_dir`` is checked before the outputs are computed."""
    check_plan_dir(out_dir)
    if plot:
        require_matplotlib()
    return write_outputs_dir(plan_outputs(plan, **options), out_dir, plot=plot)

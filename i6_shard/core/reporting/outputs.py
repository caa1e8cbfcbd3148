"""All outputs of a plan in one call (plan file, JSON summary, text report, plot), shared
by the Sisyphus job and the command line so that both write the same bytes; as one directory
that is replaced whole, for the command line."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ..io.atomic import atomic_dir, atomic_write, check_output_dir, check_suffix
from ..pure.cache import NodeCache, compute_cache_footprint
from ..pure.plan import ShardPlan
from ..pure.settings import DISTRIBUTIONS, PlanSettings  # noqa: F401 (the doctests use PlanSettings)
from ..io.plan_file import check_plan_fits_memory, plan_arrays
from ..io.npz import save_npz
from ..io.file_costs import FileCosts, load_file_costs, prediction_batching
from ..io.file_sizes import FileSizes, load_file_sizes
from ..io.preflight import check_regular_file
from ..pure.request import PlanRequest
from ..pure.batching import Batching, SyncMode
from .plot import plot_plan, require_matplotlib
from .prediction import prediction_summary
from .report import cache_summary, render_report, summarize, summary_json
from ..pure.stats import PlanStats, compute_plan_stats
from ..pure.unsharded import UnshardedStats, compute_unsharded_stats

__all__ = [
    "make_plan",
    "plan_of_sizes",
    "make_plan_dir",
    "write_plan_outputs",
    "PLAN_OUTPUTS",
    "plan_summary",
    "plot_title",
    "FLEXIBLE_COMPARE_MIN_DROPPED",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
]

#: Full epochs over which the report compares distributions (each costs one more planning pass).
COMPARE_FULL_EPOCHS = 3
#: The flexible splits never drop more than the balanced one (flexible_auto: at most 0.1 point more), so where
#: the balanced split drops less than this (mean over the compared sub-epochs) the report does not compare
#: "flexible" and "flexible_auto": such a row would cost about one (flexible_auto: six) more splits per full
#: epoch (for "flexible" at 1M files and 8 ranks, 6% to 45% of the time to write the plan's outputs) to show a
#: gain below this.
FLEXIBLE_COMPARE_MIN_DROPPED = 0.005
#: File names the command line uses inside its output directory.
PLAN_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE = "plan.npz", "summary.json", "report.txt", "plot.png"
#: What a plan directory may hold (``plot.png`` only if a plot was asked for).
PLAN_OUTPUTS = (PLAN_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE)


def other_distribution_stats(
    plan: ShardPlan, *, num_epochs: int, own: Optional[PlanStats] = None
) -> Dict[str, Union[PlanStats, str]]:
    """Stats of every other distribution in ``DISTRIBUTIONS`` on the same files and settings
    (a str with the reason where one cannot plan them, or where "flexible" is not compared: see
    :data:`FLEXIBLE_COMPARE_MIN_DROPPED`).

    :param own: ``plan``'s own stats over at least ``num_epochs`` sub-epochs, if computed already
    """
    out: Dict[str, Union[PlanStats, str]] = {}
    for name in DISTRIBUTIONS:
        if name == plan.settings.distribution:
            continue
        if name in ("flexible", "flexible_auto"):
            balanced = own if plan.settings.distribution == "balanced" else out.get("balanced")
            if isinstance(balanced, PlanStats):
                drop = float(balanced.dropped_fraction[:num_epochs].mean())
                if drop < FLEXIBLE_COMPARE_MIN_DROPPED:
                    out[name] = (
                        f"the balanced split drops only {100 * drop:.2f}% here, all that flexible "
                        "sub-epochs could save (not computed; plan with distribution='flexible' to see it)"
                    )
                    continue
        try:
            out[name] = compute_plan_stats(plan.with_settings(distribution=name), num_epochs=num_epochs)
        except ValueError as exc:
            out[name] = str(exc)
    return out


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


def other_mode_stats(plan: ShardPlan, *, num_epochs: int) -> Union[PlanStats, UnshardedStats, str]:
    """Stats of plain RETURNN (distribution ``returnn``) with ``distrib_shard_files`` flipped,
    on the same files and settings: sharded versus each rank shuffling everything itself
    (a str with the reason where that mode cannot plan them, e.g. too few files to shard).
    The unsharded mode is RETURNN's default one, with a per-rank seed offset; many ranks of many files are
    planned on a sample that the stats name (:func:`~i6_shard.core.pure.unsharded.compute_unsharded_stats`)."""
    try:
        other = plan.with_settings(
            distrib_shard_files=not plan.settings.distrib_shard_files,
            same_seed_on_all_ranks=False,
            distribution="returnn",
        )
    except ValueError as exc:
        return str(exc)
    if not other.settings.distrib_shard_files:
        return compute_unsharded_stats(other.costs, other.settings, num_epochs=num_epochs)
    return compute_plan_stats(other, num_epochs=num_epochs)


def compare_num_epochs_for(plan: ShardPlan, *, num_epochs: int) -> int:
    """Sub-epochs over which distributions are compared: the first ``COMPARE_FULL_EPOCHS``
    full epochs at most (their expected balance is the same every full epoch).

    >>> compare_num_epochs_for(ShardPlan(list("ab"), [1, 1], PlanSettings(num_shards=1, partition_epoch=2)),
    ...                        num_epochs=99)
    6
    """
    return min(int(num_epochs), COMPARE_FULL_EPOCHS * plan.partition_epoch)


def plan_summary(
    plan: ShardPlan, *, num_epochs: int, compare: bool = True, layout=None, cache: Optional[Dict[str, Any]] = None
) -> Tuple[Dict[str, Any], PlanStats]:
    """Summary dict (see :func:`summarize`) and stats of ``plan`` over ``num_epochs`` sub-epochs;
    with ``compare``, the other distributions over :func:`compare_num_epochs_for` sub-epochs; with ``cache``
    (from :func:`~i6_shard.core.reporting.report.cache_summary`), the per-node cache footprint."""
    stats = compute_plan_stats(plan, num_epochs=num_epochs, layout=layout)
    if not compare:
        return summarize(plan, stats, cache=cache), stats
    cmp_epochs = compare_num_epochs_for(plan, num_epochs=num_epochs)
    others = other_distribution_stats(plan, num_epochs=cmp_epochs, own=stats)
    mode = other_mode_stats(plan, num_epochs=cmp_epochs)
    return summarize(
        plan, stats, other_distributions=others, other_mode=mode, compare_num_epochs=cmp_epochs, cache=cache
    ), stats


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
    """Write the plan file (``.npz``, see :func:`plan_arrays`), the JSON summary, the text report and,
    if ``plot_path`` is given, the PNG plot, for sub-epochs ``1..plan.settings.num_epochs``. Every file
    is written atomically and its bytes depend only on the plan. The files are four: a reader may find
    some of them from this call and some from an earlier one while it runs (a Sisyphus job's outputs
    count only once the job has finished); :func:`write_plan_dir` writes them as one directory instead.

    With ``node_cache``, the summary, report and plot also show the per-node cache footprint (and, with
    ``cache_size`` in bytes per node, what fits it); without, the outputs are exactly as before.
    With ``batching`` and ``lengths`` (a costs archive's sequence counts, frames and length quantiles, in
    the plan's key order), the summary and report also hold the predicted loss under RETURNN's batching
    (``dropped_fraction_predicted``, see :func:`~i6_shard.core.reporting.prediction.prediction_summary`), under
    the ranks' ``sync`` mode (default grad sync), which the summary and report name.

    :return: the summary (JSON types); ``max_imbalance`` and ``dropped_fraction`` are its headline floats
    :raises ValueError: before anything is written, if the settings have no ``num_epochs``, the plan's
        arrays would not fit in memory (:func:`check_plan_fits_memory`), or a path has another extension
        than its format (``.npz``, ``.json``, ``.txt``, ``.png``)
    :raises ImportError: before anything is written, if a plot is asked for and matplotlib is missing
    """
    if plan.settings.num_epochs is None:
        raise ValueError("the plan's settings have num_epochs=None; set how many sub-epochs to plan")
    num_epochs = plan.settings.training_num_epochs  # what the report covers; the plan file also holds the preloaded
    for path, suffix, kind in (
        (plan_path, ".npz", "plan file"),
        (summary_path, ".json", "plan summary"),
        (report_path, ".txt", "plan report"),
        (plot_path, ".png", "plot"),
    ):
        if path is not None:
            check_suffix(path, suffix=suffix, kind=kind)
    check_plan_fits_memory(plan.settings, num_files=plan.num_files)
    check_prediction_inputs(plan, batching=batching, lengths=lengths)
    if cache_size is not None and node_cache is None:
        raise ValueError(f"cache_size={cache_size!r} needs node_cache (the ranks per node) to compute the footprint")
    if plot_path is not None:
        require_matplotlib()
    arrays = plan_arrays(plan)
    orders, bounds = arrays["orders"], arrays["bounds"]

    def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
        return orders[k, 0 if plan.settings.distrib_shard_files else r], bounds[
            k, 0 if plan.settings.distrib_shard_files else r
        ]

    footprint = (
        None
        if node_cache is None
        else compute_cache_footprint(plan, node_cache=node_cache, num_epochs=num_epochs, layout=layout)
    )
    cache = None if footprint is None else cache_summary(plan, footprint, cache_size=cache_size)
    summary, stats = plan_summary(plan, num_epochs=num_epochs, layout=layout, cache=cache)
    if batching is not None:
        summary.update(
            prediction_summary(
                plan,
                num_epochs=num_epochs,
                batching=batching,
                num_seqs=lengths.num_seqs,
                num_frames=lengths.num_frames,
                seq_length_quantiles=lengths.seq_length_quantiles,
                layout=layout,
                sync=sync,
                file_lengths=lengths.file_lengths(),
            )
        )
    save_npz(plan_path, arrays, kind="plan file")
    arrays = orders = bounds = None  # frees the plan arrays before rendering (layout is not called again)
    with atomic_write(summary_path, "wt", encoding="ascii", newline="\n") as f:
        f.write(summary_json(summary))
    with atomic_write(report_path, "wt", encoding="utf-8", newline="\n") as f:
        f.write(render_report(summary))
    if plot_path is not None:
        plot_plan(
            stats,
            plot_path,
            title=plot_title(plan, num_epochs=num_epochs),
            cache=footprint,
            cache_size=cache_size,
            prediction=summary.get("batching") if batching is not None else None,
        )
    return summary


def check_prediction_inputs(plan: ShardPlan, *, batching: Optional[Batching], lengths: Optional[FileCosts]) -> None:
    """ValueError unless batching and lengths come together and the lengths belong to the plan's files."""
    if (batching is None) != (lengths is None):
        raise ValueError(
            "the predicted loss needs both the batching limits (batch_size / max_seqs) and the files' "
            "sequence lengths (a costs archive: `python -m i6_shard costs` or ComputeFileCostsJob)"
        )
    if lengths is not None and lengths.keys != plan.keys:
        raise ValueError(
            f"the costs archive lists {len(lengths.keys)} files, not the plan's {plan.num_files} in its "
            "order; compute the costs for the same file list"
        )


def check_plan_dir(out_dir: str | os.PathLike) -> None:
    """Raise now what :func:`write_plan_dir` would raise about ``out_dir`` (run it before expensive work)."""
    check_output_dir(out_dir, names=PLAN_OUTPUTS, what="plan directory")


def write_plan_dir(
    plan: ShardPlan,
    out_dir: str | os.PathLike,
    *,
    plot: bool = True,
    node_cache: Optional[NodeCache] = None,
    cache_size: Optional[int] = None,
    batching: Optional[Batching] = None,
    lengths: Optional[FileCosts] = None,
    sync: SyncMode = SyncMode(),
) -> dict:
    """:func:`write_plan_outputs` into ``out_dir`` as one set: ``plan.npz``, ``summary.json``,
    ``report.txt`` and, with ``plot``, ``plot.png``, built in a temporary directory beside it and swapped
    in whole (:func:`~i6_shard.core.io.atomic.atomic_dir`). A reader of ``out_dir`` finds an earlier
    complete set or this one, never a mix and never a part; a set without a plot leaves no older
    ``plot.png`` behind. ``out_dir`` must be new, empty, or an earlier plan directory.

    :return: the summary, as :func:`write_plan_outputs`
    :raises ValueError: before anything is written, as :func:`write_plan_outputs`, or if ``out_dir``
        holds other files (they would be replaced with it)
    """
    out_dir = os.fspath(out_dir)
    check_plan_fits_memory(plan.settings, num_files=plan.num_files)
    if plot:
        require_matplotlib()
    with atomic_dir(out_dir, names=PLAN_OUTPUTS, what="plan directory") as tmp:
        return write_plan_outputs(
            plan,
            plan_path=os.path.join(tmp, PLAN_FILE),
            summary_path=os.path.join(tmp, SUMMARY_FILE),
            report_path=os.path.join(tmp, REPORT_FILE),
            plot_path=os.path.join(tmp, PLOT_FILE) if plot else None,
            node_cache=node_cache,
            cache_size=cache_size,
            batching=batching,
            lengths=lengths,
            sync=sync,
        )


def plan_of_sizes(sizes: FileSizes, request: PlanRequest) -> ShardPlan:
    """The plan of ``request`` over loaded sizes or costs, balanced by their unit: the files are checked against
    the settings (too few for the bins is said first), then the memory the plan needs, then the plan is made.
    The plan outputs (:func:`make_plan`) and ``plan_for_returnn_config`` both go through it."""
    settings = request.settings.replace(unit=sizes.unit)
    settings.validate(num_files=len(sizes))  # too few files for the bins: said first, before the memory it would need
    check_plan_fits_memory(settings, num_files=len(sizes))
    return ShardPlan(sizes.keys, sizes.sizes, settings)  # checks the files against the settings


def _plan_inputs(archive_path: str | os.PathLike, request: PlanRequest) -> Tuple[ShardPlan, Dict[str, Any]]:
    """The plan of a sizes or costs archive under ``request`` (balanced by the archive's unit), and the keywords
    its outputs are written with: the per-node cache, and the batching, lengths and sync mode of the predicted loss
    (a plan by steps always predicts, under the limits its costs count)."""
    archive_path = os.fspath(archive_path)
    check_regular_file(archive_path, what="file sizes archive")  # a FIFO would block the load
    sizes = load_file_sizes(archive_path)
    plan = plan_of_sizes(sizes, request)
    extra: Dict[str, Any] = {"node_cache": request.node_cache, "cache_size": request.cache_size, "sync": request.sync}
    if request.batching is not None or sizes.unit == "steps":
        lengths = load_file_costs(archive_path)
        extra.update(batching=prediction_batching(lengths, request.batching), lengths=lengths)
    return plan, extra


def make_plan(
    archive_path: str | os.PathLike,
    request: PlanRequest,
    *,
    plan_path: str,
    summary_path: str,
    report_path: str,
    plot_path: Optional[str] = None,
) -> dict:
    """The one way from a sizes or costs archive to a plan's outputs (``ShardPlanJob``, the command line and
    the builders call it): the plan of ``request`` balanced by the archive's unit, written by
    :func:`write_plan_outputs` to the given paths.

    :return: the summary, as :func:`write_plan_outputs`
    """
    plan, extra = _plan_inputs(archive_path, request)
    return write_plan_outputs(
        plan, plan_path=plan_path, summary_path=summary_path, report_path=report_path, plot_path=plot_path, **extra
    )


def make_plan_dir(
    archive_path: str | os.PathLike, request: PlanRequest, out_dir: str | os.PathLike, *, plot: bool = True
) -> dict:
    """:func:`make_plan` into ``out_dir`` as one set (:func:`write_plan_dir`); ``out_dir`` is checked before the
    archive is read."""
    check_plan_dir(out_dir)
    plan, extra = _plan_inputs(archive_path, request)
    return write_plan_dir(plan, out_dir, plot=plot, **extra)

"""All outputs of a plan in one call (plan file, JSON summary, text report, plot), shared
by the Sisyphus job and the command line so that both write the same bytes."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from ..io.atomic import atomic_write
from ..pure.plan import ShardPlan
from ..pure.settings import DISTRIBUTIONS, PlanSettings
from ..io.plan_file import plan_arrays
from ..io.npz import save_npz
from .plot import plot_plan, require_matplotlib
from .report import render_report, summarize, summary_json
from ..pure.stats import PlanStats, compute_plan_stats

__all__ = [
    "write_plan_outputs",
    "plan_summary",
    "other_distribution_stats",
    "other_mode_stats",
    "compare_num_epochs_for",
    "plot_title",
    "COMPARE_FULL_EPOCHS",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
]

#: Full epochs over which the report compares distributions (each costs one more planning pass).
COMPARE_FULL_EPOCHS = 3
#: File names the command line uses inside its output directory.
PLAN_FILE, SUMMARY_FILE, REPORT_FILE, PLOT_FILE = "plan.npz", "summary.json", "report.txt", "plot.png"


def other_distribution_stats(plan: ShardPlan, *, num_epochs: int) -> Dict[str, Union[PlanStats, str]]:
    """Stats of every other distribution in ``DISTRIBUTIONS`` on the same files and settings
    (a str with the reason where one cannot plan them)."""
    out: Dict[str, Union[PlanStats, str]] = {}
    for name in DISTRIBUTIONS:
        if name == plan.settings.distribution:
            continue
        try:
            out[name] = compute_plan_stats(plan.with_settings(distribution=name), num_epochs=num_epochs)
        except ValueError as exc:
            out[name] = str(exc)
    return out


def plot_title(plan: ShardPlan, *, num_epochs: int) -> str:
    """The plot's title line: the settings that shape the picture."""
    s = plan.settings
    mode = {"sharded": "sharded", "unsharded": "unsharded",
            "unsharded_same_seed": "unsharded, same seed on all ranks"}[s.sharding]
    return (f"{plan.num_files:,} files, num_shards={s.num_shards}, partition_epoch={s.partition_epoch}, "
            f"num_epochs={num_epochs}\n{mode}, seq_ordering={s.seq_ordering}, distribution={s.distribution}")


def other_mode_stats(plan: ShardPlan, *, num_epochs: int) -> Union[PlanStats, str]:
    """Stats of plain RETURNN (distribution ``returnn``) with ``distrib_shard_files`` flipped,
    on the same files and settings: sharded versus each rank shuffling everything itself
    (a str with the reason where that mode cannot plan them, e.g. too few files to shard).
    The unsharded mode is RETURNN's default one, with a per-rank seed offset."""
    try:
        other = plan.with_settings(distrib_shard_files=not plan.settings.distrib_shard_files,
                                   same_seed_on_all_ranks=False, distribution="returnn")
    except ValueError as exc:
        return str(exc)
    return compute_plan_stats(other, num_epochs=num_epochs)


def compare_num_epochs_for(plan: ShardPlan, *, num_epochs: int) -> int:
    """Sub-epochs over which distributions are compared: the first ``COMPARE_FULL_EPOCHS``
    full epochs at most (their expected balance is the same every full epoch).

    >>> compare_num_epochs_for(ShardPlan(list("ab"), [1, 1], PlanSettings(num_shards=1, partition_epoch=2)),
    ...                        num_epochs=99)
    6
    """
    return min(int(num_epochs), COMPARE_FULL_EPOCHS * plan.partition_epoch)


def plan_summary(plan: ShardPlan, *, num_epochs: int, compare: bool = True,
                 layout=None) -> Tuple[Dict[str, Any], PlanStats]:
    """Summary dict (see :func:`summarize`) and stats of ``plan`` over ``num_epochs`` sub-epochs;
    with ``compare``, the other distributions over :func:`compare_num_epochs_for` sub-epochs."""
    stats = compute_plan_stats(plan, num_epochs=num_epochs, layout=layout)
    if not compare:
        return summarize(plan, stats), stats
    cmp_epochs = compare_num_epochs_for(plan, num_epochs=num_epochs)
    others = other_distribution_stats(plan, num_epochs=cmp_epochs)
    mode = other_mode_stats(plan, num_epochs=cmp_epochs)
    return summarize(plan, stats, other_distributions=others, other_mode=mode, compare_num_epochs=cmp_epochs), stats


def write_plan_outputs(plan: ShardPlan, *, plan_path: str, summary_path: str, report_path: str,
                       plot_path: Optional[str] = None) -> dict:
    """Write the plan file (``.npz``, see :func:`plan_arrays`), the JSON summary, the text report and,
    if ``plot_path`` is given, the PNG plot, for sub-epochs ``1..plan.settings.num_epochs``. Every file
    is written atomically and its bytes depend only on the plan.

    :return: the summary (JSON types); ``max_imbalance`` and ``dropped_fraction`` are its headline floats
    :raises ValueError: before anything is written, if the settings have no ``num_epochs``
    :raises ImportError: before anything is written, if a plot is asked for and matplotlib is missing
    """
    num_epochs = plan.settings.num_epochs
    if num_epochs is None:
        raise ValueError("the plan's settings have num_epochs=None; set how many sub-epochs to plan")
    if plot_path is not None:
        require_matplotlib()
    arrays = plan_arrays(plan)
    orders, bounds = arrays["orders"], arrays["bounds"]

    def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
        return orders[k, 0 if plan.settings.distrib_shard_files else r], \
            bounds[k, 0 if plan.settings.distrib_shard_files else r]

    summary, stats = plan_summary(plan, num_epochs=num_epochs, layout=layout)
    save_npz(plan_path, arrays)
    del arrays, orders, bounds
    with atomic_write(summary_path, "wt", encoding="ascii", newline="\n") as f:
        f.write(summary_json(summary))
    with atomic_write(report_path, "wt", encoding="utf-8", newline="\n") as f:
        f.write(render_report(summary))
    if plot_path is not None:
        plot_plan(stats, plot_path, title=plot_title(plan, num_epochs=num_epochs))
    return summary

"""The reporting part of the core: what users read, rendered from what the planning floor
(:mod:`i6_shard.core.planning`) computes. The JSON summary and text report of a plan, its plot, the writer of a
plan's whole output set, the verification report, the report of a
training measured from its logs, and the report of a change of plan on resume."""

from .outputs import PLAN_OUTPUTS, plot_title, summary_of
from .plan_change import CHANGE_OUTPUTS, CHANGE_PLOT_FILE, compare_plan_files, render_change_report
from .plot import MISSING_MATPLOTLIB, matplotlib_available, plot_cost_distribution, plot_plan, require_matplotlib
from .report import format_cost
from .train_records import TRAIN_RECORDS_FILE
from .train_report import (
    DEFAULT_MAX_DROPPED,
    DEFAULT_MIN_STEPS_RATIO,
    TRAIN_PLOT_FILE,
    TRAIN_REPORT_FILE,
    TRAIN_SUMMARY_FILE,
    render_train_report,
    write_train_report,
)
from .verify import verify_records

# What the layers above (and the docs' examples) use from this face (docs/architecture.md, "Faces"); nothing else.
__all__ = [
    "summary_of",
    "plot_plan",
    "plot_cost_distribution",
    "plot_title",
    "matplotlib_available",
    "require_matplotlib",
    "MISSING_MATPLOTLIB",
    "verify_records",
    "render_train_report",
    "write_train_report",
    "compare_plan_files",
    "render_change_report",
    "PLAN_OUTPUTS",
    "CHANGE_OUTPUTS",
    "TRAIN_RECORDS_FILE",
    "CHANGE_PLOT_FILE",
    "format_cost",
    "DEFAULT_MAX_DROPPED",
    "DEFAULT_MIN_STEPS_RATIO",
    "TRAIN_PLOT_FILE",
    "TRAIN_REPORT_FILE",
    "TRAIN_SUMMARY_FILE",
]

"""The reporting part of the core: what users read, rendered from what the planning floor
(:mod:`i6_shard.core.planning`) computes. The JSON summary and text report of a plan, its plot, the writer of a
plan's whole output set, the verification report, the report of a
training measured from its logs, and the report of a change of plan on resume."""

from .outputs import (
    PLAN_FILE,
    PLOT_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    check_plan_dir,
    plan_summary,
    plot_title,
    summary_of,
    write_outputs,
    write_outputs_dir,
    write_plan_dir,
    write_plan_outputs,
)
from .plan_change import change_summary, compare_plan_files, render_change_report, write_change_dir
from .plot import (
    MISSING_MATPLOTLIB,
    matplotlib_available,
    plot_cost_distribution,
    plot_plan,
    plot_plan_change,
    require_matplotlib,
)
from .report import render_report, summarize, summary_json
from .verify import render_verify_report, verify_records
from .train_report import analyze_training, plot_training, render_train_report, write_train_report

# What the layers above the core (jobs, returnn_config, returnn_ext, cli) use besides the names above.
from .outputs import PLAN_OUTPUTS
from .plan_change import CHANGE_OUTPUTS, CHANGE_PLOT_FILE
from .train_records import TRAIN_RECORDS_FILE
from .report import format_cost
from .train_report import (
    DEFAULT_MAX_DROPPED,
    DEFAULT_MIN_STEPS_RATIO,
    TRAIN_PLOT_FILE,
    TRAIN_REPORT_FILE,
    TRAIN_SUMMARY_FILE,
)

__all__ = [
    "summary_of",
    "write_outputs",
    "write_outputs_dir",
    "check_plan_dir",
    "write_plan_outputs",
    "write_plan_dir",
    "plan_summary",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
    "summarize",
    "summary_json",
    "render_report",
    "plot_plan",
    "plot_cost_distribution",
    "plot_plan_change",
    "plot_title",
    "matplotlib_available",
    "require_matplotlib",
    "MISSING_MATPLOTLIB",
    "verify_records",
    "render_verify_report",
    "analyze_training",
    "render_train_report",
    "plot_training",
    "write_train_report",
    "compare_plan_files",
    "change_summary",
    "render_change_report",
    "write_change_dir",
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

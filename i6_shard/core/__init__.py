"""The core of i6_shard (stdlib + numpy only), in three layers that import in one direction:

- :mod:`i6_shard.core.pure`: settings, RETURNN-exact shuffle and bins, the balanced split, plans,
  statistics, epochs, file trees; arrays in, arrays out (imports neither of the others);
- :mod:`i6_shard.core.io`: the stat engine, file lists, the sizes and plan files, atomic writes;
- :mod:`i6_shard.core.planning`: the planning floor, above those two: where a request becomes a plan and its
  outputs, for every entry point;
- :mod:`i6_shard.core.reporting`: the summary, report and plot of a plan (rendered from what the floor
  returns), and the verification report.

The names below are the ones the jobs, builders and CLI use; each layer's ``__all__`` lists its own.
"""

from .io.atomic import check_output_path
from .io.cost_archive import load_file_sizes
from .io.file_list import FILE_LIST_EXTENSIONS, read_file_list, write_file_list
from .io.file_sizes import FileSizes, save_file_sizes
from .io.stat_engine import MissingFilesError, collect_file_sizes
from .planning import (
    check_request_fits,
    load_plan,
    make_plan,
    make_plan_outputs,
    plan_archive,
    read_plan_file,
    save_plan,
    stored_plan_outputs,
)
from .pure.batching import SyncMode
from .pure.epochs import num_epochs_for_passes, passes_for_num_epochs
from .pure.file_tree import tree_key
from .pure.plan import ShardPlan
from .pure.options import PLAN_OPTIONS
from .pure.request import PLAN_OPTION_DEFAULTS, PlanRequest
from .pure.settings import PlanSettings
from .reporting.outputs import (
    PLAN_FILE,
    PLOT_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    check_plan_dir,
    write_outputs,
    write_outputs_dir,
    write_plan_outputs,
)
from .reporting.report import render_report

# What the layers above (and the docs' examples) use from this face (docs/architecture.md, "Faces"); nothing else.
__all__ = [
    "check_request_fits",
    "make_plan_outputs",
    "stored_plan_outputs",
    "PlanSettings",
    "PlanRequest",
    "PLAN_OPTION_DEFAULTS",
    "PLAN_OPTIONS",
    "ShardPlan",
    "make_plan",
    "plan_archive",
    "write_outputs",
    "write_outputs_dir",
    "check_plan_dir",
    "tree_key",
    "num_epochs_for_passes",
    "passes_for_num_epochs",
    "collect_file_sizes",
    "FileSizes",
    "MissingFilesError",
    "save_file_sizes",
    "load_file_sizes",
    "read_file_list",
    "write_file_list",
    "FILE_LIST_EXTENSIONS",
    "save_plan",
    "load_plan",
    "read_plan_file",
    "check_output_path",
    "write_plan_outputs",
    "render_report",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
    "SyncMode",
]

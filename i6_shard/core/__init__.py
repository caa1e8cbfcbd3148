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

from .io import (
    FILE_LIST_EXTENSIONS,
    FileSizes,
    MissingFilesError,
    PlanFile,
    check_output_path,
    collect_file_sizes,
    load_file_sizes,
    read_file_list,
    read_plan_head,
    read_plan_layout,
    save_file_sizes,
    write_file_list,
)
from .planning import PlanOutputs, load_plan, plan_archive, make_plan, plan_outputs, read_plan_file, save_plan
from .planning import check_request_fits, make_plan_outputs, stored_plan_outputs
from .pure import (
    DISTRIBUTIONS,
    SEQ_ORDERINGS,
    SHARDING_MODES,
    FileTree,
    NodeCache,
    PLAN_OPTION_DEFAULTS,
    PlanRequest,
    SyncMode,
    PlanSettings,
    ShardPlan,
    compare_plans,
    compute_cache_footprint,
    compute_plan_stats,
    distribute_balanced,
    distribute_evenly_by_size,
    num_epochs_for_passes,
    passes_for_num_epochs,
    tree_key,
)
from .reporting import (
    PLAN_FILE,
    PLOT_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    check_plan_dir,
    compare_plan_files,
    plan_summary,
    render_report,
    write_outputs,
    write_outputs_dir,
    write_plan_outputs,
)

__all__ = [
    "check_request_fits",
    "make_plan_outputs",
    "stored_plan_outputs",
    "PlanSettings",
    "PlanRequest",
    "PLAN_OPTION_DEFAULTS",
    "ShardPlan",
    "PlanOutputs",
    "make_plan",
    "plan_archive",
    "plan_outputs",
    "write_outputs",
    "write_outputs_dir",
    "check_plan_dir",
    "DISTRIBUTIONS",
    "SEQ_ORDERINGS",
    "SHARDING_MODES",
    "FileTree",
    "tree_key",
    "distribute_evenly_by_size",
    "distribute_balanced",
    "compute_plan_stats",
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
    "read_plan_head",
    "read_plan_layout",
    "PlanFile",
    "check_output_path",
    "write_plan_outputs",
    "plan_summary",
    "render_report",
    "PLAN_FILE",
    "SUMMARY_FILE",
    "REPORT_FILE",
    "PLOT_FILE",
    "NodeCache",
    "SyncMode",
    "compute_cache_footprint",
    "compare_plans",
    "compare_plan_files",
]

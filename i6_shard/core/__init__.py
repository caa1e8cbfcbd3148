"""Pure core of i6_shard (stdlib + numpy): file trees, lists and sizes, RETURNN-exact
shuffle and bin distribution, and shard plans."""

from .atomic import atomic_path, atomic_write, check_output_path
from .balanced import assign_largest_first, distribute_balanced, group_bounds
from .demo import lognormal_sizes, make_demo_files
from .distribute import (
    UNSHARDED_RANK_SEED_STRIDE,
    check_enough_files,
    distribute_evenly_by_size,
    full_epoch_seed,
    shuffle_order,
)
from .epochs import num_epochs_for_passes, passes_for_num_epochs, passes_per_full_epoch
from .file_list import (
    FILE_LIST_EXTENSIONS,
    normalize_file_tree,
    parse_returnn_py_literal,
    txt_entry_problem,
    read_file_list,
    write_file_list,
)
from .file_sizes import (
    DEFAULT_NUM_THREADS,
    FileSizes,
    MissingFilesError,
    collect_file_sizes,
    load_file_sizes,
    save_file_sizes,
)
from .file_tree import FileTree, check_file_trees, flatten, flatten_file_trees, leaves_and_keys, tree_key
from .npz import load_npz, save_npz
from .outputs import (
    PLAN_FILE,
    PLOT_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    other_distribution_stats,
    other_mode_stats,
    plan_summary,
    plot_title,
    write_plan_outputs,
)
from .plan import DISTRIBUTIONS, SEED_LIMIT, SEQ_ORDERINGS, ShardPlan, check_plan_settings
from .plan_io import PLAN_FORMAT_VERSION, PlanFile, load_plan, plan_arrays, read_plan_file, save_plan
from .plot import matplotlib_available, plot_plan
from .report import format_bytes, plan_warnings, render_report, summarize, summary_json
from .stats import PlanStats, check_layout, compute_plan_stats, num_full_epochs_for
from .progress import Progress
from .verify import (
    SubEpochRead,
    Violation,
    check_rank_settings,
    check_reads,
    render_verify_report,
    summarize_reads,
    verify_records,
)

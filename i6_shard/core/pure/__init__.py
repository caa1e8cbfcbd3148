"""The pure part of the core: arrays and integers in, arrays out; no file, process or print.

- settings: :class:`PlanSettings` (every rule of the settings) and the supported values; request:
  :class:`PlanRequest`, the settings with the batching and node cache of a plan's outputs; options: the one table
  of the plan options (:data:`PLAN_OPTIONS`);
- distribute: RETURNN's shuffle and bin cut, mirrored exactly; balanced: i6_shard's balanced cut;
- plan: :class:`ShardPlan`; stats: what a plan does over a training; epochs: sub-epochs vs passes;
- file_tree: RETURNN's file trees and keys; reads: what ranks read, checked against a plan;
- args: the type and range checks that every user-facing entry point shares;
- consumption: what a training consumed per sub-epoch and rank, measured from its logs;
- cache: the per-node file cache footprint of a plan; compare: what resuming under another plan does.
- text: values shown in messages, cut to a bounded length; fmt: numbers in summaries and reports;
- training: what a training consumed, analysed from its logs (the training report renders it).
"""

from .args import check_bool, check_int, check_optional_int
from .balanced import distribute_balanced
from .batching import SyncMode
from .cache import CacheFootprint, NodeCache, compute_cache_footprint, partition_epoch_fits
from .compare import PlanChange, ResumeFullEpoch, compare_plans
from .consumption import dropped_share, expected_steps, infer_partition_epoch, read_counts
from .cut import CUTS, cut_full_epoch, cut_spec
from .distribute import (
    UNSHARDED_RANK_SEED_STRIDE,
    check_enough_files,
    dfd_num_shards,
    distribute_evenly_by_size,
    full_epoch_seed,
    shuffle_order,
)
from .epochs import num_epochs_for_passes, passes_for_num_epochs, passes_per_full_epoch
from .file_tree import FileTree, check_file_trees, flatten, leaves_and_keys, tree_key
from .plan import ShardPlan
from .options import PLAN_OPTIONS, PlanOption
from .request import PLAN_OPTION_DEFAULTS, PlanRequest, report_engine_options
from .plan_sim import engine_differences, has_node_level
from .torch_distributed import DATASET_DISTRIBUTIONS, check_torch_distributed
from .reads import SubEpochRead, Violation, check_rank_settings, check_reads, summarize_reads
from .settings import (
    DISTRIBUTIONS,
    SEED_LIMIT,
    SEQ_ORDERINGS,
    SHARDING_MODES,
    PlanSettings,
    check_distribution,
    check_seq_ordering,
)
from .stats import PlanStats, check_layout, compute_plan_stats, num_full_epochs_for
from .text import short_repr

# What the layers above the core (jobs, returnn_config, returnn_ext, cli) use besides the names above.
from .args import check_optional_bool, check_optional_mapping
from .batching import DEFAULT_REDUCE_TYPE, REDUCE_TYPES, Batching, batching_of, check_batching_for_unit
from .cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, check_preload_next_n_sub_epochs, parse_bytes
from .costs import COST_UNITS
from .epochs import plan_coverage_problem
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_max_sub_epoch_deviation
from .returnn_features import MIN_RETURNN_VERSION, RETURNN_FEATURES, features_missing_before
from .settings import DEFAULT_DISTRIBUTION, sharding_mode
from .cut import check_bound_is_used, cut_options
from .rechunk import RECHUNK_UNITS, check_rechunk_args, rechunk_num_files
from .epochs import plan_covers
from .text import first_difference
from .costs_consistency import check_frame_rate
from .training import MAX_REPORT_RECORDS

__all__ = [
    "engine_differences",
    "has_node_level",
    "DATASET_DISTRIBUTIONS",
    "check_torch_distributed",
    "check_frame_rate",
    "MAX_REPORT_RECORDS",
    "cut_options",
    "first_difference",
    "plan_covers",
    "PlanSettings",
    "DEFAULT_DISTRIBUTION",
    "DEFAULT_REDUCE_TYPE",
    "SEQ_ORDERINGS",
    "DISTRIBUTIONS",
    "SHARDING_MODES",
    "SEED_LIMIT",
    "check_seq_ordering",
    "check_distribution",
    "ShardPlan",
    "PlanRequest",
    "PLAN_OPTIONS",
    "PlanOption",
    "PLAN_OPTION_DEFAULTS",
    "report_engine_options",
    "PlanStats",
    "compute_plan_stats",
    "check_layout",
    "num_full_epochs_for",
    "CUTS",
    "cut_spec",
    "cut_full_epoch",
    "distribute_evenly_by_size",
    "distribute_balanced",
    "shuffle_order",
    "full_epoch_seed",
    "check_enough_files",
    "dfd_num_shards",
    "UNSHARDED_RANK_SEED_STRIDE",
    "passes_per_full_epoch",
    "num_epochs_for_passes",
    "passes_for_num_epochs",
    "FileTree",
    "flatten",
    "tree_key",
    "check_file_trees",
    "leaves_and_keys",
    "SubEpochRead",
    "Violation",
    "check_rank_settings",
    "check_reads",
    "summarize_reads",
    "check_int",
    "check_optional_int",
    "check_bool",
    "dropped_share",
    "expected_steps",
    "read_counts",
    "infer_partition_epoch",
    "SyncMode",
    "NodeCache",
    "CacheFootprint",
    "compute_cache_footprint",
    "partition_epoch_fits",
    "PlanChange",
    "ResumeFullEpoch",
    "compare_plans",
    "short_repr",
    "check_optional_bool",
    "check_optional_mapping",
    "REDUCE_TYPES",
    "Batching",
    "batching_of",
    "check_batching_for_unit",
    "DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS",
    "check_preload_next_n_sub_epochs",
    "parse_bytes",
    "COST_UNITS",
    "plan_coverage_problem",
    "DEFAULT_MAX_SUB_EPOCH_DEVIATION",
    "check_bound_is_used",
    "check_max_sub_epoch_deviation",
    "RECHUNK_UNITS",
    "check_rechunk_args",
    "rechunk_num_files",
    "MIN_RETURNN_VERSION",
    "RETURNN_FEATURES",
    "features_missing_before",
    "sharding_mode",
]

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

from .args import check_bool, check_int, check_optional_bool, check_optional_int, check_optional_mapping, nesting_depth
from .batching import Batching, DEFAULT_REDUCE_TYPE, SyncMode, batching_of, check_batching_for_unit
from .cache import DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS, check_preload_next_n_sub_epochs
from .costs import COST_UNITS
from .costs_consistency import check_frame_rate
from .cut import (
    check_bound_is_used,
    cut_full_epoch,
    cut_options,
    cut_spec,
    release_cut_difference,
    training_distribution,
)
from .distribute import UNSHARDED_RANK_SEED_STRIDE, check_enough_files, dfd_num_shards
from .epochs import num_epochs_for_passes, plan_coverage_problem, plan_covers
from .file_tree import check_file_trees, flatten, leaves_and_keys
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_max_sub_epoch_deviation
from .plan_sim import engine_differences, engine_of_record, has_node_level
from .options import PLAN_OPTIONS, PlanOption
from .request import PLAN_OPTION_DEFAULTS, PlanRequest, report_engine_options
from .returnn_features import MIN_RETURNN_VERSION, RETURNN_FEATURES, features_missing_before
from .engine_sim import UNKNOWN_SEQ_ORDERING, EngineSettings, check_sub_epoch_seq_ordering, ranks_stop_together
from .engine_sim import inexact_reason as engine_inexact_reason
from .settings import (
    DEFAULT_DISTRIBUTION,
    PlanSettings,
    SEED_LIMIT,
    SEQ_ORDERINGS,
    check_distribution,
    check_seq_ordering,
)
from .returnn_features import release_has, returnn_feature
from .text import first_difference, short_repr
from .torch_distributed import DATASET_DISTRIBUTIONS, check_torch_distributed
from .rechunk import RECHUNK_UNITS, check_rechunk_args

# What the layers above (and the docs' examples) use from this face (docs/architecture.md, "Faces"); nothing else.
__all__ = [
    "engine_differences",
    "engine_of_record",
    "EngineSettings",
    "ranks_stop_together",
    "engine_inexact_reason",
    "UNKNOWN_SEQ_ORDERING",
    "check_sub_epoch_seq_ordering",
    "has_node_level",
    "DATASET_DISTRIBUTIONS",
    "check_torch_distributed",
    "check_frame_rate",
    "cut_options",
    "release_cut_difference",
    "first_difference",
    "plan_covers",
    "PlanSettings",
    "DEFAULT_DISTRIBUTION",
    "DEFAULT_REDUCE_TYPE",
    "SEQ_ORDERINGS",
    "SEED_LIMIT",
    "check_seq_ordering",
    "check_distribution",
    "PlanRequest",
    "PLAN_OPTIONS",
    "PlanOption",
    "PLAN_OPTION_DEFAULTS",
    "report_engine_options",
    "cut_full_epoch",
    "cut_spec",
    "training_distribution",
    "check_enough_files",
    "dfd_num_shards",
    "UNSHARDED_RANK_SEED_STRIDE",
    "num_epochs_for_passes",
    "flatten",
    "check_file_trees",
    "leaves_and_keys",
    "check_int",
    "check_optional_int",
    "check_bool",
    "nesting_depth",
    "SyncMode",
    "short_repr",
    "check_optional_bool",
    "check_optional_mapping",
    "Batching",
    "batching_of",
    "check_batching_for_unit",
    "DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS",
    "check_preload_next_n_sub_epochs",
    "COST_UNITS",
    "plan_coverage_problem",
    "DEFAULT_MAX_SUB_EPOCH_DEVIATION",
    "check_bound_is_used",
    "check_max_sub_epoch_deviation",
    "RECHUNK_UNITS",
    "check_rechunk_args",
    "MIN_RETURNN_VERSION",
    "RETURNN_FEATURES",
    "features_missing_before",
    "release_has",
    "returnn_feature",
]

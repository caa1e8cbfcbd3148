"""The one reader of RETURNN configs and dataset dicts: every DistributeFilesDataset in them, at any
depth inside wrapper datasets, with the settings RETURNN would give it on each rank. Each rule mirrors
one RETURNN function, named in its docstring; nothing else in i6_shard derives these rules.

One concern per module:

- classes: which class a dataset dict names (``init_dataset``'s class lookup);
- rules: the seed and the shard of a dataset on each rank (:class:`SeedRule`, :class:`ShardRule`);
- sync: how the torch ranks synchronize (``DistributedContext``), a building step of the engine's description;
- engine: the training's engine, one description (``read_engine``: batching, filters, accumulation, sync,
  DataLoader workers), and the ``dataset_distribution``;
- plan_options: the training's batching and sync as plan options (:func:`engine_plan_options`);
- context: the config settings that decide ranks and seeds, read once per config;
- info: the record of one DistributeFilesDataset (:class:`DistributeFilesDatasetInfo`); ranks: what it is
  on each rank and the plan it follows;
- sub_dataset: the sub-epoch dataset dict; tree: walks over nested options;
- inherit: what a parent passes to the datasets it builds; wrappers: RETURNN's wrapper datasets;
- dfd: a DistributeFilesDataset's settings; walk: the walk over a config (:func:`find_distribute_files_datasets`).

The ``files`` option (:func:`files_kind`, :func:`read_files`) is read in ``i6_shard.core.io.dataset_files``.
"""

from ...core.io import files_kind, read_files
from .classes import dataset_class_name, is_distribute_files_dataset
from .context import DATASET_DICT_CONTEXT
from .info import DistributeFilesDatasetInfo
from .plan_options import InexactPlanWarning, engine_plan_options, warn_inexact
from .rules import SeedRule, ShardRule  # noqa: F401
from .engine import read_engine, read_sync_mode
from .tree import _flatten_with_path  # noqa: F401
from .walk import find_distribute_files_datasets
from .wrappers import WRAPPER_CHILDREN, unknown_wrappers  # noqa: F401

__all__ = [
    "DistributeFilesDatasetInfo",
    "read_sync_mode",
    "read_engine",
    "engine_plan_options",
    "InexactPlanWarning",
    "warn_inexact",
    "find_distribute_files_datasets",
    "is_distribute_files_dataset",
    "dataset_class_name",
    "files_kind",
    "read_files",
    "DATASET_DICT_CONTEXT",
    "unknown_wrappers",
]

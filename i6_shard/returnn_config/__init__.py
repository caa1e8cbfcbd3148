"""Config builders: correct sharded DistributeFilesDataset dicts, the one reader of RETURNN configs and
dataset dicts, their checks and plans, safe config code, and placement into i6_core configs and training
jobs (those need Sisyphus and i6_core, imported lazily)."""

from .checks import (
    SHARDING_FIX_RETURNN_VERSION,
    CheckResult,
    ConfigCheckError,
    ConfigCheckWarning,
    check_dataset_dict,
    check_returnn_config,
    check_returnn_version,
    check_sub_epoch_dataset,
    parse_returnn_version,
    returnn_version_info,
)
from .dataset import DEFAULT_MAX_INLINE_FILES, sharded_files_dataset
from .plan import plan_for_returnn_config
from .pycode import config_code, write_returnn_config
from .reader import DistributeFilesDatasetInfo, find_distribute_files_datasets, read_files
from .sub_epoch import bind_sub_epoch_dataset, normalize_files_key

_I6CORE_EXPORTS = (
    "add_sharded_dataset",
    "sharded_returnn_config",
    "training_job_kwargs",
    "training_job",
    "SubEpochDatasetCode",
    "DelayedSubEpochPartial",
    "I6ShardImportCode",
)

__all__ = [
    "SHARDING_FIX_RETURNN_VERSION",
    "CheckResult",
    "ConfigCheckError",
    "ConfigCheckWarning",
    "check_dataset_dict",
    "check_returnn_config",
    "check_returnn_version",
    "check_sub_epoch_dataset",
    "parse_returnn_version",
    "returnn_version_info",
    "DEFAULT_MAX_INLINE_FILES",
    "sharded_files_dataset",
    "plan_for_returnn_config",
    "config_code",
    "write_returnn_config",
    "DistributeFilesDatasetInfo",
    "find_distribute_files_datasets",
    "read_files",
    "bind_sub_epoch_dataset",
    "normalize_files_key",
    *_I6CORE_EXPORTS,
]


def __getattr__(name):
    if name in _I6CORE_EXPORTS:
        from . import i6core

        return getattr(i6core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_I6CORE_EXPORTS))

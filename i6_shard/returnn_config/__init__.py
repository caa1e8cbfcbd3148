"""Config builders: correct sharded DistributeFilesDataset dicts, the one reader of RETURNN configs and
dataset dicts, their checks and plans, safe config code, and placement into i6_core configs and training
jobs (those need Sisyphus and i6_core, imported lazily)."""

from .checks import ConfigCheckError, ConfigCheckWarning, check_dataset_dict, check_returnn_config
from .dataset import sharded_files_dataset
from .plan import plan_for_returnn_config

#: The i6_core placement, imported on first use (it needs Sisyphus and i6_core).
_I6CORE_EXPORTS = ("sharded_returnn_config", "training_job", "training_job_kwargs")

# The recipe author's names from this layer (docs/architecture.md, "The recipe author's API"); nothing else.
__all__ = [
    "sharded_files_dataset",
    "sharded_returnn_config",
    "training_job",
    "training_job_kwargs",
    "check_returnn_config",
    "check_dataset_dict",
    "ConfigCheckError",
    "ConfigCheckWarning",
    "plan_for_returnn_config",
]


def __getattr__(name):
    if name in _I6CORE_EXPORTS:
        from . import i6core

        return getattr(i6core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_I6CORE_EXPORTS))

"""Runs inside RETURNN: the only part of i6_shard that imports returnn in-process.

Re-exported lazily, so that ``import i6_shard.returnn_ext.<module>`` of one part does not
import the others (importing the dataset checks RETURNN's hooks and fails loudly)."""

_EXPORTS = {"ShardedDistributeFilesDataset": "distrib_files"}

__all__ = ["ShardedDistributeFilesDataset"]


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))

"""The running RETURNN's features, detected by feature (not by its version string), with the fallbacks of a release
that lacks one, and one error naming the release, a feature it lacks and the first release that has it."""

from __future__ import annotations

import ast
import functools
import inspect
import os
from typing import Callable, Dict, List, Optional, Tuple

from i6_shard.core.pure import MIN_RETURNN_VERSION, RETURNN_FEATURES, returnn_feature


def _returnns_dfd():
    """RETURNN's own DistributeFilesDataset (also where its module attribute was replaced by a subclass)."""
    from returnn.datasets import distrib_files

    return next(c for c in distrib_files.DistributeFilesDataset.__mro__ if c.__module__ == distrib_files.__name__)


def _dfd_params() -> Tuple[str, ...]:
    return tuple(inspect.signature(_returnns_dfd().__init__).parameters)


def _dfd_code(name: str):
    function = inspect.getattr_static(_returnns_dfd(), name, None)
    return getattr(getattr(function, "__func__", function), "__code__", None)


def _basic():
    from returnn.datasets import basic

    return basic


def _seed_offset_reads_config() -> bool:
    code = getattr(getattr(_basic().Dataset, "_get_default_random_seed_offset", None), "__code__", None)
    return code is not None and "dataset_random_seed_offset" in code.co_consts


def _torch_data_module(name: str) -> Optional[ast.Module]:
    """RETURNN's ``returnn/torch/data/<name>.py``, parsed from its source: importing it imports torch, which seeing
    what the release has must not need (a data-only process has none); None where it cannot be read."""
    import returnn

    path = os.path.join(os.path.dirname(returnn.__file__), "torch", "data", f"{name}.py")
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


def _loader_defaults_to_a_worker() -> bool:
    """Whether ``create_data_loader_from_batches`` sets ``loader_opts.setdefault("num_workers", 1)`` (read from the
    source of ``returnn/torch/data/pipeline.py``)."""
    tree = _torch_data_module("pipeline")
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "setdefault" and len(node.args) == 2:
            key, value = node.args
            if getattr(key, "value", None) == "num_workers" and getattr(value, "value", None) == 1:
                return True
    return False


def _worker_gets_behavior_version() -> bool:
    """Whether ``SubProcCopyGlobalConfigPreInitFunc`` takes the behavior version along (``behavior_version_state``)."""
    from returnn.config import SubProcCopyGlobalConfigPreInitFunc

    return "behavior_version_state" in SubProcCopyGlobalConfigPreInitFunc.__init__.__code__.co_names


def _pipe_params() -> Tuple[str, ...]:
    """The parameters of RETURNN's ``ReturnnDatasetIterDataPipe.__init__``, read from its module's source."""
    tree = _torch_data_module("returnn_dataset_wrapper")
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == "ReturnnDatasetIterDataPipe":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    return tuple(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
    return ()


def _unpickles_with_shards() -> bool:
    """Whether DistributeFilesDataset.__init__ takes ``_distrib_info`` before it asserts ``_num_shards == 1`` (the
    other order fails when a DataLoader worker unpickles it: ``Dataset.__reduce__`` passes ``_num_shards``)."""
    try:
        source = inspect.getsource(_returnns_dfd().__init__)
    except (OSError, TypeError):
        return True  # no source: assume the fixed behaviour, RETURNN's own assertion names a problem
    guard, info = source.find("Cannot use both dataset-sharding"), source.find("if _distrib_info")
    # before 1.20241015 Dataset takes no _num_shards (nothing to clash with, nothing to check against _distrib_info)
    return _LOOKUPS["dataset_shards"]() and info >= 0 and not 0 <= guard < info


#: feature key -> how to see it in the importable RETURNN (keys of ``core.pure.RETURNN_FEATURES``)
_LOOKUPS: Dict[str, Callable[[], bool]] = {
    "distrib_shard_files": lambda: "distrib_shard_files" in _dfd_params(),
    "distrib_info": lambda: "_distrib_info" in _dfd_params(),
    "reaveraged_cut": lambda: "total_size_taken" in getattr(_dfd_code("_distribute_evenly_by_size"), "co_varnames", ()),
    "dataset_shards": lambda: "_num_shards" in inspect.signature(_basic().Dataset.__init__).parameters,
    "distrib_info_with_shards": _unpickles_with_shards,
    "files_list_file": lambda: _dfd_code("_lazy_init_file_list") is not None,
    "files_callable": lambda: "callable" in getattr(_dfd_code("_lazy_init_file_list"), "co_names", ()),
    "sharding_fix": lambda: "sharding_fix" in _dfd_params(),
    "use_worker_proc": lambda: "use_worker_proc" in _dfd_params(),
    "get_default_kwargs_train": lambda: callable(getattr(_basic().Dataset, "get_default_kwargs_train", None)),
    "get_distributed_rank_and_size": lambda: callable(getattr(_basic(), "_get_distributed_rank_and_size", None)),
    "dataset_random_seed_offset": _seed_offset_reads_config,
    "dataloader_shard_workers": lambda: "shard_workers" in _pipe_params(),
    "dataloader_worker_default": _loader_defaults_to_a_worker,
    "seed_fixed_by_distrib_shard_files": lambda: (
        "distrib_shard_files" in getattr(_dfd_code("_uses_custom_distributed_sharding"), "co_names", ())
    ),
    "propagate_behavior_version": _worker_gets_behavior_version,
}


@functools.lru_cache(maxsize=None)
def has_feature(key: str) -> bool:
    """Whether the importable RETURNN has feature ``key`` (a key of ``core.pure.RETURNN_FEATURES``)."""
    return _LOOKUPS[returnn_feature(key).key]()


def running_returnn() -> str:
    """The importable RETURNN, for messages: its version and where it is."""
    try:
        import returnn
    except ImportError:
        return "no importable RETURNN"
    return f"RETURNN {getattr(returnn, '__long_version__', getattr(returnn, '__version__', '?'))} at {returnn.__file__}"


def refuse_missing(key: str, *, why: str) -> None:
    """Raise ``ValueError`` if the running RETURNN lacks feature ``key``: the release, the feature, the first release
    that has it, and ``why`` the dataset needs it (what asked for it, and how to do without)."""
    if has_feature(key):
        return
    feature = returnn_feature(key)
    raise ValueError(
        f"{running_returnn()} lacks {feature.what}, which {why}; it came with RETURNN {feature.first}: "
        f"install that or later (pip install 'returnn>={feature.first_version}', or a checkout of that date)"
    )


def distributed_rank_and_size() -> Tuple[int, int]:
    """``(rank, size)`` of the distributed training as this RETURNN takes them: ``returnn.datasets.basic.
    _get_distributed_rank_and_size`` where it exists, else DistributeFilesDataset's ``_get_rank_and_size``
    (``torch_distributed`` or horovod only)."""
    if has_feature("get_distributed_rank_and_size"):
        return _basic()._get_distributed_rank_and_size()
    from returnn.datasets import distrib_files

    return distrib_files._get_rank_and_size()


def missing_returnn_features() -> List[str]:
    """The required features the importable RETURNN lacks (empty if none); a module that cannot be imported is
    named with why."""
    try:
        import returnn.datasets.basic  # noqa: F401
        import returnn.datasets.distrib_files  # noqa: F401
    except ImportError as exc:
        return [f"returnn.datasets ({exc})"]
    return [f.what for f in RETURNN_FEATURES if f.required and not has_feature(f.key)]


def require_returnn_features() -> None:
    """Raise ImportError naming every missing required feature, the RETURNN found and the version to install.

    :raises ImportError: if the importable RETURNN lacks something i6_shard cannot do without
    """
    missing = missing_returnn_features()
    if missing:
        raise ImportError(
            f"{running_returnn()} lacks what i6_shard needs: {'; '.join(missing)}. Install RETURNN >= "
            f"{MIN_RETURNN_VERSION} (pip install -U 'returnn>={MIN_RETURNN_VERSION}', or a git checkout "
            "of that date or later)"
        )

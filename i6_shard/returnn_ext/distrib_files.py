"""ShardedDistributeFilesDataset: RETURNN's DistributeFilesDataset with a selectable
distribution ("returnn", "balanced" or "flexible") and precomputed file sizes instead of a stat per file."""

from __future__ import annotations

import inspect
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import returnn
from returnn.datasets import distrib_files as _returnn_distrib_files
from returnn.datasets.basic import Dataset
from returnn.datasets.distrib_files import DistributeFilesDataset, FileTree

from i6_shard import core
from i6_shard.core.pure import check_distribution
from i6_shard.core.pure.cut import cut_full_epoch
from i6_shard.core.pure.flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_max_sub_epoch_deviation

__all__ = ["ShardedDistributeFilesDataset", "check_returnn_hooks"]
_MAX_LISTED_KEYS = 5


def check_returnn_hooks() -> None:
    """Fail loudly if this RETURNN lacks what :class:`ShardedDistributeFilesDataset` overrides
    or relies on (names and signatures); runs when this module is imported.

    :raises ImportError: naming the RETURNN version, its path and every missing hook
    """
    problems: List[str] = []
    dfd = DistributeFilesDataset
    distribute = dfd.__dict__.get("_distribute_evenly_by_size")
    if not isinstance(distribute, staticmethod):
        problems.append("DistributeFilesDataset._distribute_evenly_by_size is not a staticmethod")
    else:
        params = inspect.signature(distribute.__func__).parameters
        if [(n, p.kind) for n, p in params.items()] != [
                (n, inspect.Parameter.KEYWORD_ONLY) for n in ("num_bins", "file_sizes", "files_order")]:
            problems.append(f"DistributeFilesDataset._distribute_evenly_by_size has signature {list(params)}, "
                            "expected (*, num_bins, file_sizes, files_order)")
    lazy_sizes = dfd.__dict__.get("_lazy_init_file_sizes")
    if not callable(lazy_sizes) or list(inspect.signature(lazy_sizes).parameters) != ["self"]:
        problems.append("DistributeFilesDataset._lazy_init_file_sizes(self) is missing")
    init_seq_order = dfd.__dict__.get("init_seq_order")
    used = set(getattr(getattr(init_seq_order, "__code__", None), "co_names", ()))
    for name in ("_lazy_init_file_sizes", "_distribute_evenly_by_size", "_file_sizes", "_num_shards",
                 "_shard_index", "partition_epoch"):
        if name not in used:
            problems.append(f"DistributeFilesDataset.init_seq_order does not use {name}")
    init_params = inspect.signature(dfd.__init__).parameters
    for name in ("distribution", "file_sizes", "max_sub_epoch_deviation"):
        if name in init_params:
            problems.append(f"DistributeFilesDataset.__init__ has its own {name!r} argument")
    if "_meta_info_cache" not in init_params or "_file_sizes" not in dfd.__init__.__code__.co_names:
        problems.append("DistributeFilesDataset.__init__ does not restore _file_sizes from _meta_info_cache")
    if not isinstance(getattr(Dataset, "_getnewargs_remap", None), dict) or "__reduce__" not in Dataset.__dict__:
        problems.append("Dataset.__reduce__ / Dataset._getnewargs_remap (used for pickling) are missing")
    if not callable(getattr(_returnn_distrib_files, "_get_key_for_file_tree", None)):
        problems.append("returnn.datasets.distrib_files._get_key_for_file_tree is missing")
    if problems:
        raise ImportError(
            f"i6_shard.returnn_ext cannot extend RETURNN {getattr(returnn, '__version__', '?')} "
            f"at {os.path.dirname(returnn.__file__)}: " + "; ".join(problems)
            + ". Use a RETURNN version that has these hooks, or the plain DistributeFilesDataset.")


check_returnn_hooks()
_get_key_for_file_tree = _returnn_distrib_files._get_key_for_file_tree


class _StaticOnClassSelectedOnInstance:
    """``_distribute_evenly_by_size`` of the subclass. RETURNN declares it a staticmethod and calls it
    both ways: ``self._distribute_evenly_by_size(...)`` in ``init_seq_order`` (here: the dataset's
    selected distribution) and ``DistributeFilesDataset._distribute_evenly_by_size(...)`` on the class,
    as its own tests do (here: RETURNN's function, unchanged)."""

    def __init__(self, method_name: str):
        self.method_name = method_name

    def __get__(self, instance, owner=None):
        if instance is None:
            return DistributeFilesDataset._distribute_evenly_by_size
        return getattr(instance, self.method_name)


class ShardedDistributeFilesDataset(DistributeFilesDataset):
    """RETURNN's :class:`DistributeFilesDataset`, changed in two places only:

    - ``distribution``: ``"returnn"`` (default) cuts the bins exactly as RETURNN does;
      ``"balanced"`` cuts size-balanced sub-epoch groups and assigns each group's files to
      the ranks largest first (:func:`i6_shard.core.distribute_balanced`), so that ranks
      finish their sub-epochs at nearly the same time and little data is dropped.
      ``"flexible"`` also lets the sub-epochs differ in size by up to ``max_sub_epoch_deviation``
      (default 0.25: +-25% of the mean; :func:`i6_shard.core.pure.flexible.distribute_flexible`).
      ``ShardPlan(..., distribution=...)`` computes the same bins before training.
    - ``file_sizes``: path to what ``save_file_sizes`` / ``ComputeFileSizesJob`` wrote; the
      sizes are loaded from there instead of ``os.path.getsize`` on every file on every
      rank. The stored keys must be exactly the keys of ``files``, in the same order.

    Use it as the ``"class"`` of a dataset dict (RETURNN accepts the class object there)::

        from i6_shard.returnn_ext import ShardedDistributeFilesDataset
        train = {"class": ShardedDistributeFilesDataset, "files": [...], "get_sub_epoch_dataset": ...,
                 "partition_epoch": 20, "distrib_shard_files": True, "sharding_fix": True,
                 "distribution": "balanced", "file_sizes": "/path/to/file_sizes.npz"}
    """

    # Dataset.__reduce__ passes each __init__ argument from the attribute "_" + name if there is one:
    # "file_sizes" would pick up DistributeFilesDataset._file_sizes (the dict), so point it at the path.
    _getnewargs_remap = {**DistributeFilesDataset._getnewargs_remap, "file_sizes": "file_sizes_path"}

    def __init__(self, *, distribution: str = "returnn", file_sizes: Optional[str | os.PathLike] = None,
                 max_sub_epoch_deviation: float = DEFAULT_MAX_SUB_EPOCH_DEVIATION, **kwargs):
        """
        :param distribution: one of ``core.DISTRIBUTIONS``: ``"returnn"``, ``"balanced"`` or ``"flexible"``
        :param file_sizes: path of a file sizes archive (``i6_shard.core.save_file_sizes``), or None to
            stat every file as RETURNN does
        :param max_sub_epoch_deviation: ``"flexible"`` only: how far a sub-epoch's size may be from the
            mean sub-epoch's, as a share of it, in [0, 1) (``PlanSettings.max_sub_epoch_deviation``)
        :param kwargs: everything else goes to :class:`DistributeFilesDataset` unchanged
        """
        check_distribution(distribution)
        max_sub_epoch_deviation = check_max_sub_epoch_deviation(max_sub_epoch_deviation)
        if file_sizes is not None and not isinstance(file_sizes, (str, os.PathLike)):
            raise TypeError(f"file_sizes={file_sizes!r} must be the path (str) of a file sizes archive or None; "
                            "convert a tk.Path with .get_path()")
        super().__init__(**kwargs)
        self.distribution = distribution
        self.max_sub_epoch_deviation = max_sub_epoch_deviation
        self.file_sizes_path: Optional[str] = None if file_sizes is None else os.fspath(file_sizes)

    def _lazy_init_file_sizes(self):
        """Sizes from ``file_sizes`` if given (no stat call at all), else RETURNN's own."""
        if self._file_sizes:  # computed already, or restored from _meta_info_cache after pickling
            return
        if self.file_sizes_path is None:
            super()._lazy_init_file_sizes()
            return
        self._lazy_init_file_list()
        self._file_sizes = load_sizes_for_files(self.file_sizes_path, self._files)

    def _distribute_selected(
        self, *, num_bins: int, file_sizes: Dict[str, int], files_order: Sequence[FileTree]
    ) -> List[List[FileTree]]:
        """The bins of one full epoch; RETURNN gives rank r in sub-epoch s bin ``r*P + s``."""
        if self.distribution == "returnn":
            return DistributeFilesDataset._distribute_evenly_by_size(
                num_bins=num_bins, file_sizes=file_sizes, files_order=files_order)
        num_shards = self._num_shards
        if num_bins != num_shards * self.partition_epoch:
            raise RuntimeError(f"{self}: RETURNN asked for {num_bins} bins, expected num_shards*partition_epoch="
                               f"{num_shards}*{self.partition_epoch}; this RETURNN version is not supported")
        sizes = np.fromiter((file_sizes[t if type(t) is str else _get_key_for_file_tree(t)] for t in files_order),
                            dtype=np.int64, count=len(files_order))  # a str is its own key
        options = None  # the one option of a cut so far: "flexible"'s bound (PlanSettings.cut_options)
        if self.distribution == "flexible":
            options = {"max_sub_epoch_deviation": self.max_sub_epoch_deviation}
        order, bounds = cut_full_epoch(sizes, num_shards=num_shards, partition_epoch=self.partition_epoch,
                                       distribution=self.distribution, options=options)
        order_list, bounds_list = order.tolist(), bounds.tolist()
        return [[files_order[i] for i in order_list[bounds_list[b]:bounds_list[b + 1]]] for b in range(num_bins)]

    _distribute_evenly_by_size = _StaticOnClassSelectedOnInstance("_distribute_selected")


def load_sizes_for_files(path: str, files: Sequence[FileTree]) -> Dict[str, int]:
    """key -> size for ``files``, from a file sizes archive whose keys must be exactly the keys
    of ``files`` in the same order (then a plan made from the archive matches the dataset).

    :raises ValueError: naming the first missing, extra or reordered keys
    """
    loaded = core.load_file_sizes(path)
    keys = [_get_key_for_file_tree(t) for t in files]
    if keys == loaded.keys:
        return loaded.as_dict()
    known = set(loaded.keys)
    missing = [k for k in keys if k not in known]
    hint = ("Recompute the sizes for this file list (ComputeFileSizesJob or `python -m i6_shard sizes`), "
            "or drop file_sizes to stat every file")
    if missing:
        raise ValueError(f"file_sizes {path!r} has no size for {len(missing)} of the {len(keys)} files "
                         f"(first {min(len(missing), _MAX_LISTED_KEYS)}: {missing[:_MAX_LISTED_KEYS]}). {hint}.")
    wanted = set(keys)
    extra = [k for k in loaded.keys if k not in wanted]
    if extra:
        raise ValueError(f"file_sizes {path!r} has {len(loaded.keys)} entries, {len(extra)} of them not in the "
                         f"{len(keys)} files of the dataset (first {min(len(extra), _MAX_LISTED_KEYS)}: "
                         f"{extra[:_MAX_LISTED_KEYS]}); it was made for another file list. {hint}.")
    first = next((i for i, (a, b) in enumerate(zip(keys, loaded.keys)) if a != b), min(len(keys), len(loaded.keys)))
    raise ValueError(f"file_sizes {path!r} lists the dataset's files in another order or with other duplicates "
                     f"({len(loaded.keys)} entries for {len(keys)} files; first difference at entry {first}: "
                     f"{_at(loaded.keys, first)} there, {_at(keys, first)} in files), so a plan made from it would "
                     f"not match what the dataset reads. {hint}.")


def _at(keys: List[str], idx: int) -> Any:
    return repr(keys[idx]) if idx < len(keys) else "nothing"

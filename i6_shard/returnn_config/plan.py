"""``plan_for_returnn_config``: the ShardPlan that the DistributeFilesDataset of a RETURNN config
follows, with the settings the reader finds in the config (sharding mode, seeds, partition_epoch)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple, Union

from .. import core
from ..core.io.file_sizes import check_archive_path
from ..core.planning import plan_of_sizes
from ..core.pure.text import first_difference
from .reader import DistributeFilesDatasetInfo, find_distribute_files_datasets, read_files
from .pycode import resolve_paths

__all__ = ["plan_for_returnn_config", "find_dataset"]


def find_dataset(
    config: Mapping[str, Any], *, num_ranks: Optional[int], key: Union[str, Tuple[Any, ...]] = "train"
) -> DistributeFilesDatasetInfo:
    """The one DistributeFilesDataset of ``config`` at ``key`` (a config key, or a whole key path such
    as ``("train", "datasets", "asr")``); a dataset dict is searched as it is.

    :raises ValueError: if there is none or several there, naming what there is
    """
    records = find_distribute_files_datasets(config, num_ranks=num_ranks)
    if "class" in config:
        chosen = records
    else:
        path = (key,) if isinstance(key, str) else tuple(key)
        chosen = [r for r in records if r.key_path[: len(path)] == path]
    if len(chosen) == 1:
        return chosen[0]
    found = [r.name for r in records]
    if not chosen:
        raise ValueError(
            f"no DistributeFilesDataset at {key!r} in the config (found: {found or 'none'}); "
            "pass key= the config key or key path of the dataset to plan"
        )
    raise ValueError(
        f"{len(chosen)} DistributeFilesDatasets at {key!r}: {[r.name for r in chosen]}; pass key= "
        "the key path of one of them, e.g. key=" + repr(chosen[0].key_path)
    )


def _check_keys_match(info: DistributeFilesDatasetInfo, sizes: core.FileSizes) -> None:
    """The plan is made from the sizes archive's keys: they must be the dataset's files, in its order."""
    files = info.dataset.get("files")
    if info.files_kind == "list_file":
        path = files.get_path() if callable(getattr(files, "get_path", None)) else os.fspath(files)
        if not os.path.exists(path):
            return  # written by a job that has not run yet; RETURNN's i6_shard class checks again
    elif info.files_kind != "inline":
        return  # a callable: resolved only when the job runs
    keys = [core.tree_key(resolve_paths(t)) for t in read_files(files if info.files_kind == "inline" else path)]
    if keys != sizes.keys:
        first = first_difference(keys, sizes.keys)
        raise ValueError(
            f"{info.name}: the sizes archive lists {len(sizes.keys)} entries, the dataset {len(keys)} "
            f"files; they first differ at entry {first}. Compute the sizes from this dataset's files "
            "(ComputeFileSizesJob(files) or `python -m i6_shard sizes`)"
        )


def plan_for_returnn_config(
    config: Mapping[str, Any],
    *,
    file_sizes: Union[str, os.PathLike, core.FileSizes],
    num_ranks: int,
    num_epochs: int,
    key: Union[str, Tuple[Any, ...]] = "train",
    distribution: Optional[str] = None,
) -> core.ShardPlan:
    """The :class:`~i6_shard.core.ShardPlan` that the DistributeFilesDataset at ``key`` of a RETURNN
    config follows on ``num_ranks`` ranks: files sharded or not (``distrib_shard_files``, or torch's
    ``dataset_distribution="shard"``), each rank's seed, ``partition_epoch``, ``seq_ordering`` and the
    distribution of i6_shard's class, all as the reader finds them.

    :param config: the RETURNN config dict (config and post_config merged), or a dataset dict
    :param file_sizes: the sizes of the dataset's files, in its order (a sizes archive path, or FileSizes)
    :param num_ranks: number of training processes
    :param num_epochs: the training's ``num_epochs`` (sub-epochs); the plan also holds the sub-epochs the dataset
        preloads after them (``preload_next_n_sub_epochs``, RETURNN's default 1), as ``ShardPlanJob`` plans them
    :param key: config key (or key path) of the dataset
    :param distribution: plan with this distribution instead of the dataset's own
    :raises ValueError: if the config has no plannable DistributeFilesDataset there, saying why
    """
    if isinstance(file_sizes, (str, os.PathLike)):
        sizes = core.load_file_sizes(check_archive_path(os.fspath(file_sizes), name="file_sizes"))
    elif isinstance(file_sizes, core.FileSizes):
        sizes = file_sizes
    else:
        raise TypeError(
            f"file_sizes={file_sizes!r} must be the path of a sizes archive (ComputeFileSizesJob."
            "out_file_sizes, `python -m i6_shard sizes`) or a core.FileSizes"
        )
    info = find_dataset(config, num_ranks=num_ranks, key=key)
    request = info.plan_request(num_epochs=num_epochs, distribution=distribution)
    _check_keys_match(info, sizes)
    return plan_of_sizes(sizes, request)  # the planning floor

"""The RETURNN a training runs, as the builders and checks know it at graph time: what that release accepts of a
DistributeFilesDataset dict, and by which means it keeps the sub-epoch dataset from sharding again
(``core.pure.RETURNN_FEATURES``; RETURNN is never imported here)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from ..core.pure import release_has, returnn_feature

__all__ = ["config_release_problems", "release_problems", "sub_epoch_fix", "unpickling_fails"]


def _lacks(version: Optional[str], key: str) -> bool:
    return release_has(version, key) is False


def sub_epoch_fix(version: Optional[str]) -> Optional[str]:
    """How the DFD dict keeps the sub-epoch dataset from sharding again on RETURNN ``version``: ``"sharding_fix"``
    (the option; also for an unknown version, where it fails loudly on a release without it), ``"sub_epoch_shards"``
    (``"_num_shards": 1, "_shard_index": 0`` in the sub-epoch dict) or None (that release never shards it again).

    >>> [sub_epoch_fix(v) for v in (None, "1.20240620.64807", "1.20250115.110555", "1.20261022.211313")]
    ['sharding_fix', None, 'sub_epoch_shards', 'sharding_fix']
    """
    if not _lacks(version, "sharding_fix"):
        return "sharding_fix"
    return None if _lacks(version, "dataset_shards") else "sub_epoch_shards"


def unpickling_fails(version: Optional[str]) -> bool:
    """Whether RETURNN ``version``'s own DistributeFilesDataset with ``distrib_shard_files=True`` fails when a torch
    DataLoader worker unpickles it (1.20241015.225231 .. 1.20250717.120243: it asserts the ``_num_shards`` that
    ``Dataset.__reduce__`` passes to be 1); i6_shard's class does not.

    >>> [unpickling_fails(v) for v in ("1.20240620.64807", "1.20250115.110555", "1.20250717.120243", None)]
    [False, True, False, False]
    """
    return _lacks(version, "distrib_info_with_shards") and not _lacks(version, "dataset_shards")


def _refused(version: str, key: str, what: str) -> str:
    feature = returnn_feature(key)
    return (
        f"{what}, but RETURNN {version} lacks {feature.what}: it came with RETURNN {feature.first}; drop it, or "
        "train with that RETURNN or later"
    )


def release_problems(
    dataset: Mapping[str, Any],
    *,
    version: Optional[str],
    is_i6_shard: bool,
    files_kind: str,
    sub_epoch_dataset: Optional[Mapping[str, Any]],
    sharded: bool,
    name: str = "dataset",
    reading_process: str = "main process",
) -> List[str]:
    """What RETURNN ``version`` rejects of a DistributeFilesDataset dict, or would read wrongly (the sub-epoch
    dataset sharding again), each naming the release, the feature and the first release with it; empty for an
    unknown version. i6_shard's class takes ``sharding_fix`` and ``use_worker_proc=True`` on every release.

    >>> release_problems({"sharding_fix": True}, version="1.20250115.110555", is_i6_shard=False,
    ...                  files_kind="inline", sub_epoch_dataset={}, sharded=True)[0][:70]
    'dataset: sharding_fix=True is set, but RETURNN 1.20250115.110555 lacks'
    """
    if version is None:
        return []
    out = []
    if "sharding_fix" in dataset and not is_i6_shard and _lacks(version, "sharding_fix"):
        out.append(_refused(version, "sharding_fix", f"{name}: sharding_fix={dataset['sharding_fix']!r} is set"))
    worker = dataset.get("use_worker_proc", True)
    if "use_worker_proc" in dataset and (worker is False or not is_i6_shard) and _lacks(version, "use_worker_proc"):
        out.append(_refused(version, "use_worker_proc", f"{name}: use_worker_proc={worker!r} is set"))
    for kind, key in (("list_file", "files_list_file"), ("callable", "files_callable")):
        if files_kind == kind and _lacks(version, key):
            out.append(_refused(version, key, f"{name}: files is a {kind.replace('_', ' ')}"))
    explicit = sub_epoch_dataset is not None and (
        "_num_shards" in sub_epoch_dataset or "_shard_index" in sub_epoch_dataset
    )
    if explicit and _lacks(version, "dataset_shards"):
        out.append(_refused(version, "dataset_shards", f"{name}: the sub-epoch dataset sets _num_shards/_shard_index"))
    if sharded and not is_i6_shard and "DataLoader worker" in reading_process and unpickling_fails(version):
        feature = returnn_feature("distrib_info_with_shards")
        out.append(
            f"{name}: RETURNN {version}'s DistributeFilesDataset(distrib_shard_files=True) fails in the "
            f"{reading_process} that unpickles it (AssertionError 'Cannot use both dataset-sharding'; fixed in RETURNN "
            f"{feature.first}): use i6_shard's class (sharded_files_dataset(..., returnn_version=...) does), or "
            "torch_dataloader_opts={'num_workers': 0}"
        )
    taken_by_class = is_i6_shard and dataset.get("sharding_fix") is True
    unfixed = sub_epoch_dataset is not None and not explicit and not taken_by_class
    if sharded and sub_epoch_fix(version) == "sub_epoch_shards" and unfixed:
        out.append(
            f"{name}: RETURNN {version} shards the sub-epoch dataset again (it inherits _num_shards/_shard_index; "
            f"{returnn_feature('sharding_fix').what} and its behavior_version 26 came only with "
            f"{returnn_feature('sharding_fix').first}), so every rank reads 1/num_shards of its own files: put "
            "'_num_shards': 1, '_shard_index': 0 into the sub-epoch dataset dict (sharded_files_dataset(..., "
            "returnn_version=...) does)"
        )
    return out


def config_release_problems(config: Mapping[str, Any], *, version: Optional[str]) -> List[str]:
    """What RETURNN ``version`` rejects or ignores of a whole config's distributed settings: torch's
    ``dataset_distribution`` (its DistributedContext asserts that it read every option) and the config's
    ``dataset_random_seed_offset`` (not read: the seeds would not be the ones planned and checked).

    >>> config_release_problems({"dataset_random_seed_offset": 3}, version="1.20250115.110555")[0][:62]
    "the config's dataset_random_seed_offset=3 is ignored by RETURN"
    """
    if version is None:
        return []
    out = []
    opts = config.get("torch_distributed")
    if isinstance(opts, Mapping) and "dataset_distribution" in opts and _lacks(version, "get_default_kwargs_train"):
        out.append(
            _refused(
                version,
                "get_default_kwargs_train",
                f"torch_distributed sets dataset_distribution={opts['dataset_distribution']!r}",
            )
            + " (its DistributedContext fails on an option it does not read; shard with distrib_shard_files=True)"
        )
    offset = config.get("dataset_random_seed_offset")
    if offset not in (None, 0) and _lacks(version, "dataset_random_seed_offset"):
        feature = returnn_feature("dataset_random_seed_offset")
        out.append(
            f"the config's dataset_random_seed_offset={offset!r} is ignored by RETURNN {version} ({feature.what} came "
            f"with {feature.first}): every plan and check here would assume seeds the training does not use; set "
            "random_seed_offset in the dataset dict instead"
        )
    return out

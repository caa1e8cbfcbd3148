"""What i6_shard uses of RETURNN, feature by feature, with the first PyPI release that has each: one table for the
graph-time choices and checks (by version) and for the dataset class inside RETURNN (by feature)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple, Union

__all__ = [
    "MIN_RETURNN_VERSION",
    "RETURNN_FEATURES",
    "ReturnnFeature",
    "features_missing_before",
    "release_has",
    "returnn_feature",
    "returnn_version_key",
]

#: The oldest RETURNN i6_shard supports: the first PyPI release with DistributeFilesDataset's
#: ``distrib_shard_files`` (RETURNN PR #1538).
MIN_RETURNN_VERSION = "1.20240620.64807"


@dataclass(frozen=True)
class ReturnnFeature:
    """One row of :data:`RETURNN_FEATURES`.

    :ivar key: what ``i6_shard.returnn_ext.version`` looks up in the running RETURNN
    :ivar what: what it is in RETURNN, for messages
    :ivar first_version: the first PyPI release that has it (``1.YYYYMMDD.HHMMSS``)
    :ivar exact: whether ``first_version`` is the first release with it (from RETURNN's git history), or only the
        first release known to have it (it came between the newest release known to lack it and that one)
    :ivar required: i6_shard cannot work without it (every other feature has a fallback, or is refused only where a
        dataset asks for it)
    """

    key: str
    what: str
    first_version: str
    exact: bool = True
    required: bool = False

    @property
    def first(self) -> str:
        """``first_version`` as messages name it: "1.X" or "1.X (the first release known to have it)"."""
        return self.first_version if self.exact else f"{self.first_version} (the first release known to have it)"


#: The features, oldest first. Versions of RETURNN's commits that brought them: distrib_shard_files (#1538),
#: distrib_info (#1557, 2024-06-28), dataloader_worker_default (#1563, 2024-07-02), reaveraged_cut (#1572,
#: 2024-07-05), dataset_shards (#1630, 2024-10-15), distrib_info_with_shards (6850cd0e3, 2025-07-17), files_list_file
#: (#1717, 2025-04-23), files_callable (2025-10-07), sharding_fix (7803cb188, 2026-06-11); the inexact rows came after
#: RETURNN's git master of 2026-08-22 and are in 1.20261022.211313.
RETURNN_FEATURES: Tuple[ReturnnFeature, ...] = (
    ReturnnFeature(
        "distrib_shard_files", "DistributeFilesDataset's distrib_shard_files option", MIN_RETURNN_VERSION, required=True
    ),
    ReturnnFeature(
        "distrib_info", "DistributeFilesDataset passing its rank and size to a child process", "1.20240628.104058"
    ),
    ReturnnFeature(
        "dataloader_worker_default",
        "the torch engine's DataLoader reading in a worker process by default (torch_dataloader_opts num_workers=1)",
        "1.20240702.142741",
    ),
    ReturnnFeature(
        "reaveraged_cut",
        "DistributeFilesDataset._distribute_evenly_by_size re-averaging the rest over the bins left",
        "1.20240705.144031",
    ),
    ReturnnFeature("dataset_shards", "Dataset's _num_shards/_shard_index options", "1.20241015.225231"),
    ReturnnFeature(
        "distrib_info_with_shards",
        "DistributeFilesDataset(distrib_shard_files=True) unpickled with its _num_shards (a DataLoader worker)",
        "1.20250717.120243",
    ),
    ReturnnFeature("files_list_file", "DistributeFilesDataset's files given as a list file path", "1.20250423.155627"),
    ReturnnFeature("files_callable", "DistributeFilesDataset's files given as a callable", "1.20251007.115327"),
    ReturnnFeature("sharding_fix", "DistributeFilesDataset's sharding_fix option", "1.20260611.014531"),
    ReturnnFeature("use_worker_proc", "DistributeFilesDataset's use_worker_proc option", "1.20261022.211313", False),
    ReturnnFeature(
        "get_default_kwargs_train",
        "Dataset.get_default_kwargs_train (torch_distributed dataset_distribution='shard')",
        "1.20261022.211313",
        False,
    ),
    ReturnnFeature(
        "get_distributed_rank_and_size",
        "returnn.datasets.basic._get_distributed_rank_and_size",
        "1.20261022.211313",
        False,
    ),
    ReturnnFeature(
        "dataloader_shard_workers",
        "the torch engine's torch_dataloader_shard_workers (ReturnnDatasetIterDataPipe's shard_workers)",
        "1.20261022.211313",
        False,
    ),
    ReturnnFeature(
        "dataset_random_seed_offset",
        "the config's dataset_random_seed_offset (Dataset._get_default_random_seed_offset)",
        "1.20261022.211313",
        False,
    ),
    ReturnnFeature(
        "seed_fixed_by_distrib_shard_files",
        "DistributeFilesDataset's rank-independent seed offset by distrib_shard_files (_uses_custom_distributed_"
        "sharding; before: by _num_shards > 1)",
        "1.20261022.211313",
        False,
    ),
    ReturnnFeature(
        "propagate_behavior_version",
        "SubProcCopyGlobalConfigPreInitFunc passing the behavior version to a DataLoader worker "
        "(propagate_behavior_version_to_subprocs)",
        "1.20261022.211313",
        False,
    ),
)


def returnn_version_key(version: str) -> Tuple[int, int, int]:
    """``"1.YYYYMMDD.HHMMSS[+git...]"`` as a tuple that orders like the commit dates (PyPI drops the leading zeros
    of the time: 1.20260611.14531 is 01:45:31).

    >>> returnn_version_key("1.20260611.014531+git.7803cb1") == returnn_version_key("1.20260611.14531")
    True
    """
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)(?:[+-].*)?\s*", str(version))
    if not match:
        raise ValueError(f"RETURNN version {version!r} is not of the form 1.YYYYMMDD.HHMMSS (see returnn.__version__)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def returnn_feature(key: str) -> ReturnnFeature:
    """The row of ``key`` in :data:`RETURNN_FEATURES` (a typo is an internal error)."""
    for feature in RETURNN_FEATURES:
        if feature.key == key:
            return feature
    raise AssertionError(f"no RETURNN feature {key!r}")


def release_has(version: Union[None, str, Callable[[str], bool]], key: str) -> Optional[bool]:
    """Whether a RETURNN of ``version`` has feature ``key``; None where the version is None or between the newest
    release known to lack it and the first known to have it (an inexact row). Where RETURNN runs, ``version`` may be
    its features as detected there (``returnn_ext.version.has_feature``: key -> bool), which this returns as it is.

    >>> release_has("1.20250115.110555", "dataset_shards"), release_has("1.20250115.110555", "sharding_fix")
    (True, False)
    >>> release_has("1.20260901.0", "use_worker_proc") is None
    True
    """
    if version is None:
        return None
    feature = returnn_feature(key)
    if callable(version):
        return bool(version(feature.key))
    if returnn_version_key(version) >= returnn_version_key(feature.first_version):
        return True
    if not feature.exact and returnn_version_key(version) > returnn_version_key(_LAST_KNOWN_WITHOUT):
        return None
    return False


#: RETURNN's git master of 2026-08-22: the newest known to lack the inexact rows.
_LAST_KNOWN_WITHOUT = "1.20260822.041010"


def features_missing_before(version: str) -> List[str]:
    """The required features a RETURNN of ``version`` lacks (empty from :data:`MIN_RETURNN_VERSION` on).

    >>> features_missing_before("1.20240619.0")
    ["DistributeFilesDataset's distrib_shard_files option"]
    >>> features_missing_before(MIN_RETURNN_VERSION)
    []
    """
    return [f.what for f in RETURNN_FEATURES if f.required and release_has(version, f.key) is False]

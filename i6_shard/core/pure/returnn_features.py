"""What i6_shard needs from RETURNN, feature by feature, with the first RETURNN version known to have each:
one table for the graph-time check (by version) and the check inside RETURNN (by feature)."""

from __future__ import annotations

from typing import List, Tuple

__all__ = ["MIN_RETURNN_VERSION", "RETURNN_FEATURES", "features_missing_before"]

#: The first RETURNN known to have every feature below (the PyPI release 1.20261022.211313).
MIN_RETURNN_VERSION = "1.20261022.211313"
#: The newest RETURNN known to lack some of them (git HEAD of 2026-08-22): they came in between.
LAST_RETURNN_VERSION_WITHOUT = "1.20260822.041010"
#: ``(feature key, what it is in RETURNN, first version known to have it)``; the keys are what
#: ``i6_shard.returnn_ext.version`` looks up in the running RETURNN.
RETURNN_FEATURES: Tuple[Tuple[str, str, str], ...] = (
    ("sharding_fix", "DistributeFilesDataset's sharding_fix option", "1.20260611.014531"),
    ("use_worker_proc", "DistributeFilesDataset's use_worker_proc option", MIN_RETURNN_VERSION),
    (
        "get_default_kwargs_train",
        "Dataset.get_default_kwargs_train (the train dataset's _num_shards/_shard_index)",
        MIN_RETURNN_VERSION,
    ),
    ("get_distributed_rank_and_size", "returnn.datasets.basic._get_distributed_rank_and_size", MIN_RETURNN_VERSION),
    (
        "dataset_random_seed_offset",
        "the config's dataset_random_seed_offset (Dataset._get_default_random_seed_offset)",
        MIN_RETURNN_VERSION,
    ),
)


def _key(version: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in version.split("+")[0].split("."))


def features_missing_before(version: str) -> List[str]:
    """What a RETURNN of ``version`` (``1.YYYYMMDD.HHMMSS``) lacks, as far as the dates tell.

    >>> features_missing_before("1.20260822.041010")[0]
    "DistributeFilesDataset's use_worker_proc option"
    >>> features_missing_before(MIN_RETURNN_VERSION)
    []
    """
    return [what for _, what, first in RETURNN_FEATURES if _key(version) < _key(first)]

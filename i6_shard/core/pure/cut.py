"""The distributions: how one full epoch of shuffled files is cut into ``num_shards *
partition_epoch`` bins. The one table of them; ShardPlan and the RETURNN-side dataset both cut here."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from .balanced import distribute_balanced
from .distribute import distribute_evenly_by_size
from .flexible import distribute_flexible, distribute_flexible_auto

__all__ = ["CUTS", "CUT_VERSIONS", "cut_full_epoch", "cut_options"]


def _returnn(costs: np.ndarray, *, num_shards: int, partition_epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    bounds = distribute_evenly_by_size(costs, num_bins=num_shards * partition_epoch)
    return np.arange(len(costs), dtype=np.int64), bounds


#: distribution name -> ``f(costs, *, num_shards, partition_epoch, **options) -> (positions, bounds)``; the
#: first is the default, RETURNN's own cut. Options: see :func:`cut_options`.
CUTS: Dict[str, Callable[..., Tuple[np.ndarray, np.ndarray]]] = {
    "returnn": _returnn,
    "balanced": distribute_balanced,
    "flexible": distribute_flexible,
    "flexible_auto": distribute_flexible_auto,
}

#: distribution name -> the version of its output, which plan files record: raise it with any change that
#: moves a bin for some input (tests/core/io/test_stored_plans.py pins the bins of each version).
CUT_VERSIONS: Dict[str, int] = {"returnn": 1, "balanced": 1, "flexible": 1, "flexible_auto": 1}


def cut_options(distribution: str, *, max_sub_epoch_deviation: float) -> Dict[str, Any]:
    """Keyword options of the distribution's cut (see :data:`CUTS`), empty if it has none: the one rule that
    ``PlanSettings`` and the RETURNN-side dataset both take them from.

    >>> cut_options("flexible", max_sub_epoch_deviation=0.25), cut_options("returnn", max_sub_epoch_deviation=0.25)
    ({'max_sub_epoch_deviation': 0.25}, {})
    """
    if distribution == "flexible":
        return {"max_sub_epoch_deviation": max_sub_epoch_deviation}
    return {}


def cut_full_epoch(
    costs: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    distribution: str,
    options: Optional[Mapping[str, Any]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Bins of one full epoch for files whose costs are given in the shuffled order.

    :param costs: int64 costs in the (shuffled) order, shape [num_files]
    :param num_shards: the number of shards the cut is for (1 for each rank's own layout unsharded)
    :param distribution: a key of :data:`CUTS`
    :param options: keyword options of that distribution (:func:`cut_options`, e.g.
        ``max_sub_epoch_deviation`` of "flexible"); None: its defaults
    :return: ``(positions, bounds)``: int64 positions into ``costs``, shape [num_files], grouped bin by
        bin, and int64 boundaries, shape [num_shards * partition_epoch + 1]; bin ``r*P + s`` is what
        rank r reads in sub-epoch s

    >>> positions, bounds = cut_full_epoch(np.array([1, 1, 78, 120]), num_shards=2, partition_epoch=2,
    ...                                    distribution="returnn")
    >>> positions.tolist(), bounds.tolist()
    ([0, 1, 2, 3], [0, 1, 2, 3, 4])
    """
    return CUTS[distribution](
        np.asarray(costs), num_shards=num_shards, partition_epoch=partition_epoch, **(options or {})
    )

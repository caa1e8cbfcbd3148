"""The distributions: how one full epoch of shuffled files is cut into ``num_shards *
partition_epoch`` bins. The one table of them; ShardPlan and the RETURNN-side dataset both cut here."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .balanced import distribute_balanced
from .distribute import distribute_evenly_by_size
from .flexible import distribute_flexible, distribute_flexible_auto

__all__ = ["cut_full_epoch", "cut_options"]


def _returnn(costs: np.ndarray, *, num_shards: int, partition_epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    bounds = distribute_evenly_by_size(costs, num_bins=num_shards * partition_epoch)
    return np.arange(len(costs), dtype=np.int64), bounds


def _equal_steps(
    costs: np.ndarray,
    *,
    num_shards: int,
    partition_epoch: int,
    file_lengths: Optional[Sequence[np.ndarray]] = None,
    engine: Any = None,
    full_epoch_0idx: Optional[int] = None,
    random_seed_offset: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
    equalize: Optional[Callable[..., Any]] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """flexible_auto's cut, then ``equalize`` (:func:`~.equal_steps.equalize_steps`) on the full epoch with the
    simulated engine (options: :func:`~.equal_steps_cut.equal_steps_options`, which also gives ``equalize``: the
    table does not import the simulation, which imports the settings made from it)."""
    if file_lengths is None or engine is None or full_epoch_0idx is None or random_seed_offset is None:
        raise ValueError(
            "distribution='equal_steps' cuts with every file's sequence lengths and the training's engine settings "
            "(batch_size / max_seqs, sync): plan from a costs archive with per-sequence lengths and give the "
            "batching, or choose another distribution"
        )
    positions, bounds = distribute_flexible_auto(costs, num_shards=num_shards, partition_epoch=partition_epoch)
    positions, bounds, _ = equalize(
        positions,
        bounds,
        file_lengths=file_lengths,
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        engine=engine,
        full_epoch_0idx=full_epoch_0idx,
        random_seed_offset=random_seed_offset,
        progress=progress,
    )
    return positions, bounds


#: distribution name -> ``f(costs, *, num_shards, partition_epoch, **options) -> (positions, bounds)``; the
#: first is the default, RETURNN's own cut. Options: see :func:`cut_options`.
CUTS: Dict[str, Callable[..., Tuple[np.ndarray, np.ndarray]]] = {
    "returnn": _returnn,
    "balanced": distribute_balanced,
    "flexible": distribute_flexible,
    "flexible_auto": distribute_flexible_auto,
    "equal_steps": _equal_steps,
}

#: distribution name -> the version of its output, which plan files record: raise it with any change that
#: moves a bin for some input (tests/core/io/test_stored_plans.py pins the bins of each version).
CUT_VERSIONS: Dict[str, int] = {"returnn": 1, "balanced": 1, "flexible": 1, "flexible_auto": 1, "equal_steps": 2}


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

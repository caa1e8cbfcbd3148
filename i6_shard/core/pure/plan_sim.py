"""Every sub-epoch of a plan through the simulated torch engine (:mod:`.engine_sim`): each rank's exact batches,
the steps it takes under the sync mode and the frames it consumes, from each file's own sequence lengths."""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from .engine_sim import EngineSettings, SubEpochSim, inexact_reason, simulate_sub_epoch, sub_epoch_random_seed_offset
from .plan import ShardPlan

__all__ = ["simulate_plan"]

Layout = Callable[[int, int], Tuple[np.ndarray, np.ndarray]]


def rank_files(plan: ShardPlan, layout: Layout, *, epoch_0idx: int, shard_index: int) -> np.ndarray:
    """Indices (into the plan's keys) of the files rank ``shard_index`` reads in sub-epoch ``epoch_0idx + 1``, in the
    order the DistributeFilesDataset hands them to its sub-epoch dataset (the bin's order)."""
    k, s = divmod(epoch_0idx, plan.partition_epoch)
    order, bounds = layout(k, shard_index)
    b = shard_index * plan.partition_epoch + s if plan.settings.distrib_shard_files else s
    return order[bounds[b] : bounds[b + 1]]


def simulate_plan(
    plan: ShardPlan,
    *,
    num_epochs: int,
    file_lengths: Sequence[np.ndarray],
    engine: EngineSettings,
    layout: Optional[Layout] = None,
) -> Tuple[Optional[List[SubEpochSim]], Optional[str]]:
    """Sub-epochs ``1..num_epochs`` of ``plan``, each simulated with :func:`simulate_sub_epoch`: the ranks' files in
    bin order, the sub-epoch dataset's seed offset RETURNN derives (:func:`sub_epoch_random_seed_offset`) and its
    ``init_seq_order(epoch=full_epoch_0idx + 1)``.

    :param file_lengths: each file's sequence lengths (its first data key), in the plan's key order
    :return: ``(sims, None)``, or ``(None, reason)`` where the engine's settings cannot be simulated exactly
    """
    reason = inexact_reason(engine, num_ranks=plan.num_shards)
    if reason is not None:
        return None, reason
    if layout is None:

        def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
            return plan.layout(full_epoch_0idx=k, shard_index=r)

    offsets = [sub_epoch_random_seed_offset(plan.settings, shard_index=r) for r in range(plan.num_shards)]
    empty = np.zeros(0, dtype=np.int64)
    sims = []
    for e in range(num_epochs):
        per_rank = []
        for r in range(plan.num_shards):
            idx = rank_files(plan, layout, epoch_0idx=e, shard_index=r)
            per_rank.append(
                np.concatenate([np.asarray(file_lengths[i], dtype=np.int64) for i in idx]) if len(idx) else empty
            )
        sims.append(
            simulate_sub_epoch(
                per_rank, engine=engine, full_epoch_0idx=e // plan.partition_epoch, random_seed_offset=offsets
            )
        )
    return sims, None

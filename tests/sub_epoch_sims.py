"""The simulated sub-epochs of a full epoch's bins, for the equal-steps tests and benchmark."""

from typing import List

import numpy as np

from i6_shard.core.pure.engine_sim import SubEpochSim, simulate_sub_epoch


def simulate_bins(
    positions, bounds, file_lengths, *, num_shards, partition_epoch, engine, full_epoch_0idx, random_seed_offset
) -> List[SubEpochSim]:
    """Each sub-epoch ``s`` simulated: rank ``r`` reads the files ``positions[bounds[b] : bounds[b + 1]]`` of its bin
    ``b = r * partition_epoch + s`` (int64 ``bounds``, shape [num_shards * partition_epoch + 1]), each file with its
    sequences' ``file_lengths``, under the EngineSettings ``engine``."""
    sims = []
    for s in range(partition_epoch):
        bins = [r * partition_epoch + s for r in range(num_shards)]
        ranks = [positions[bounds[b] : bounds[b + 1]] for b in bins]
        sims.append(
            simulate_sub_epoch(
                [np.concatenate([file_lengths[i] for i in files]) for files in ranks],
                engine=engine,
                full_epoch_0idx=full_epoch_0idx,
                random_seed_offset=random_seed_offset,
            )
        )
    return sims

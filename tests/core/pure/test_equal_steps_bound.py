"""max_sub_epoch_deviation bounds equal_steps: its moves between sub-epochs keep every sub-epoch's frames within the
bound (or no farther outside than as cut), where without it they stretch sub-epochs to drop nothing."""

import numpy as np
import pytest

from i6_shard.core.pure.cut import cut_full_epoch, cut_options
from i6_shard.core.pure.engine_sim import EngineSettings
from i6_shard.core.pure.equal_steps import equalize_steps

W, P = 2, 4


def _corpus(seed):
    rng = np.random.RandomState(seed)
    lengths = [rng.randint(20, 120, size=rng.randint(1, 6)) for _ in range(40)]
    lengths[3] = rng.randint(20, 120, size=40)  # a file of about two ranks' shares
    return lengths


def _sizes(positions, bounds, lengths):
    frames = np.array([int(x.sum()) for x in lengths])
    per_bin = np.array([frames[positions[bounds[b] : bounds[b + 1]]].sum() for b in range(W * P)])
    sub = per_bin.reshape(W, P).sum(axis=0)
    return sub / sub.mean()


def _cut(lengths, bound):
    costs = np.array([int(x.sum()) for x in lengths])
    options = dict(
        file_lengths=lengths,
        engine=EngineSettings(batch_size=400, max_seqs=4),
        full_epoch_0idx=0,
        random_seed_offset=0,
        equalize=equalize_steps,
        **cut_options("equal_steps", max_sub_epoch_deviation=bound),
    )
    return cut_full_epoch(costs, num_shards=W, partition_epoch=P, distribution="equal_steps", options=options)


@pytest.mark.slow
def test_the_bound_holds_where_the_cut_held_it():
    stretched = 0
    for seed in range(6):
        lengths = _corpus(seed)
        free = _sizes(*_cut(lengths, 0.25), lengths)  # the default: no bound, it chooses up to 0.9
        bounded = _sizes(*_cut(lengths, 0.1), lengths)
        costs = np.array([int(x.sum()) for x in lengths])
        from i6_shard.core.pure.flexible import distribute_flexible_auto

        start = _sizes(
            *distribute_flexible_auto(costs, num_shards=W, partition_epoch=P, max_sub_epoch_deviation=0.1), lengths
        )
        off_start = np.maximum(np.abs(start - 1) - 0.1, 0)
        assert (np.maximum(np.abs(bounded - 1) - 0.1, 0) <= off_start.max() + 1e-9).all(), (seed, bounded, start)
        stretched += int(np.abs(free - 1).max() > np.abs(bounded - 1).max() + 1e-9)
    assert stretched > 0  # without the bound, some full epoch stretches its sub-epochs further


def test_the_default_bound_keeps_the_bins_as_before():
    assert cut_options("equal_steps", max_sub_epoch_deviation=0.25) == {}
    assert cut_options("equal_steps", max_sub_epoch_deviation=0.1) == {"max_sub_epoch_deviation": 0.1}

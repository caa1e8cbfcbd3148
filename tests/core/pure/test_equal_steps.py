"""The equal-steps search: every file stays exactly once in its full epoch, the bins of each sub-epoch stay within
it and non-empty, the result is deterministic, and the simulated drop never grows (and reaches zero where a
lossless split is easy to find)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core.pure.distribute import distribute_evenly_by_size
from i6_shard.core.pure.engine_sim import EngineSettings
from i6_shard.core.pure.equal_steps import equalize_steps
from tests.strategies import examples
from tests.sub_epoch_sims import simulate_bins


def _drops(positions, bounds, lengths, **kwargs):
    """Frames each sub-epoch drops, in the simulated engine."""
    sims = simulate_bins(positions, bounds, lengths, full_epoch_0idx=1, random_seed_offset=3, **kwargs)
    return [sum(sim.frames_total) - sum(sim.frames_consumed) for sim in sims]


@settings(max_examples=examples(60), deadline=None)
@given(
    seqs=st.lists(st.integers(1, 12), min_size=8, max_size=16),
    seed=st.integers(0, 100),
    num_shards=st.integers(2, 3),
    partition_epoch=st.integers(1, 2),
    sync=st.sampled_from([{}, {"reduce_type": "param", "param_sync_step": 2}]),
)
def test_equal_steps_keeps_the_files_and_never_drops_more(seqs, seed, num_shards, partition_epoch, sync):
    rng = np.random.RandomState(seed)
    lengths = [rng.randint(1, 40, size=n) for n in seqs]
    bins = num_shards * partition_epoch
    bounds = distribute_evenly_by_size(np.array([x.sum() for x in lengths]), num_bins=bins)
    positions = np.arange(len(lengths))
    engine = EngineSettings(batch_size=60, max_seqs=4, torch_distributed=sync)
    shared = dict(num_shards=num_shards, partition_epoch=partition_epoch, engine=engine)
    kwargs = dict(file_lengths=lengths, full_epoch_0idx=1, random_seed_offset=3, **shared)
    new_pos, new_bounds, info = equalize_steps(positions, bounds, **kwargs)
    assert sorted(new_pos.tolist()) == list(range(len(lengths)))
    assert len(new_bounds) == bins + 1 and all(np.diff(new_bounds) >= 1)
    for s in range(partition_epoch):  # a sub-epoch's files stay in it
        old = {
            i
            for r in range(num_shards)
            for i in positions[bounds[r * partition_epoch + s] : bounds[r * partition_epoch + s + 1]]
        }
        new = {
            i
            for r in range(num_shards)
            for i in new_pos[new_bounds[r * partition_epoch + s] : new_bounds[r * partition_epoch + s + 1]]
        }
        assert old == new
    before = _drops(positions, bounds, lengths, **shared)
    after = _drops(new_pos, new_bounds, lengths, **shared)
    assert after == info["dropped_frames"]
    assert all(a <= b for a, b in zip(after, before))
    again = equalize_steps(positions, bounds, **kwargs)
    assert again[0].tolist() == new_pos.tolist() and again[1].tolist() == new_bounds.tolist()


def test_equal_steps_reaches_zero_on_many_small_files():
    """40 files of 3..8 sequences on 2 ranks: RETURNN's cut by frames drops data in some sub-epoch; the search finds
    a split of every sub-epoch that drops nothing."""
    rng = np.random.RandomState(0)
    lengths = [rng.randint(5, 60, size=rng.randint(3, 9)) for _ in range(40)]
    bounds = distribute_evenly_by_size(np.array([x.sum() for x in lengths]), num_bins=4)
    engine = EngineSettings(batch_size=120, max_seqs=5)
    before = _drops(np.arange(40), bounds, lengths, num_shards=2, partition_epoch=2, engine=engine)
    assert sum(before) > 0
    _, _, info = equalize_steps(
        np.arange(40),
        bounds,
        file_lengths=lengths,
        num_shards=2,
        partition_epoch=2,
        engine=engine,
        full_epoch_0idx=1,
        random_seed_offset=3,
    )
    assert info["dropped_frames"] == [0, 0]

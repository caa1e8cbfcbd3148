"""The equal-steps search: every file stays exactly once in its full epoch, the bins stay non-empty (and, without
moves between sub-epochs, within their sub-epoch), the result is deterministic, the simulated drop never grows, and it
reaches zero where a lossless split is easy to find. Its shortcuts equal the engine simulation they stand for."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core.pure.distribute import distribute_evenly_by_size
from i6_shard.core.pure.flexible import distribute_flexible_auto
from i6_shard.core.pure.engine_sim import EngineSettings, batch_bounds, steps_taken
from i6_shard.core.pure.equal_steps import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MOVE_TRIALS,
    DEFAULT_REORDER_TRIALS,
    _Context,
    _forward,
    _period,
    _Rank,
    _repair,
    _taken,
    equalize_steps,
)
from tests.strategies import examples
from tests.sub_epoch_sims import simulate_bins

SYNCS = [
    {},
    {"reduce_type": "param", "param_sync_step": 2},
    {"reduce_type": "param", "param_sync_step": 3},
]


def _drops(positions, bounds, lengths, **kwargs):
    """Frames each sub-epoch drops, in the simulated engine."""
    sims = simulate_bins(positions, bounds, lengths, full_epoch_0idx=1, random_seed_offset=3, **kwargs)
    return [sum(sim.frames_total) - sum(sim.frames_consumed) for sim in sims]


def _sub_epoch_files(positions, bounds, s, *, num_shards, partition_epoch):
    return {
        int(i)
        for r in range(num_shards)
        for i in positions[bounds[r * partition_epoch + s] : bounds[r * partition_epoch + s + 1]]
    }


@settings(max_examples=examples(40), deadline=None)
@given(
    seqs=st.lists(st.integers(1, 12), min_size=10, max_size=16),
    seed=st.integers(0, 100),
    num_shards=st.integers(2, 3),
    partition_epoch=st.integers(1, 3),
    sync=st.sampled_from(SYNCS),
    accum=st.sampled_from([1, 2]),
    between=st.sampled_from([0, 2]),
)
def test_equal_steps_keeps_the_files_and_never_drops_more(
    seqs, seed, num_shards, partition_epoch, sync, accum, between
):
    rng = np.random.RandomState(seed)
    lengths = [rng.randint(1, 40, size=n) for n in seqs]
    bins = num_shards * partition_epoch
    bounds = distribute_evenly_by_size(np.array([x.sum() for x in lengths]), num_bins=bins)
    positions = np.arange(len(lengths))
    engine = EngineSettings(batch_size=60, max_seqs=4, torch_distributed=sync, accum_grad_multiple_step=accum)
    shared = dict(num_shards=num_shards, partition_epoch=partition_epoch, engine=engine)
    kwargs = dict(file_lengths=lengths, full_epoch_0idx=1, random_seed_offset=3, between_sub_epochs=between, **shared)
    new_pos, new_bounds, info = equalize_steps(positions, bounds, **kwargs)
    assert sorted(new_pos.tolist()) == list(range(len(lengths)))  # every file exactly once
    assert len(new_bounds) == bins + 1 and new_bounds[0] == 0 and all(np.diff(new_bounds) >= 1)
    before = _drops(positions, bounds, lengths, **shared)
    after = _drops(new_pos, new_bounds, lengths, **shared)
    assert after == info["dropped_frames"]
    assert sum(after) <= sum(before)
    if between == 0:  # a sub-epoch's files stay in it, and no sub-epoch drops more
        for s in range(partition_epoch):
            shape = dict(num_shards=num_shards, partition_epoch=partition_epoch)
            assert _sub_epoch_files(positions, bounds, s, **shape) == _sub_epoch_files(new_pos, new_bounds, s, **shape)
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


def test_equal_steps_reaches_zero_with_a_file_above_a_rank_share():
    """4 ranks, 2 sub-epochs; one file holds more sequences than a rank's share (total / 8) and fills a bin alone,
    so its rank cannot be reordered: the other ranks of its sub-epoch must reach its batches exactly (with files
    from the next sub-epoch), and every sub-epoch ends lossless."""
    rng = np.random.RandomState(5)
    lengths = [rng.randint(5, 90, size=300)] + [rng.randint(5, 90, size=rng.randint(5, 30)) for _ in range(80)]
    total = sum(x.size for x in lengths)
    assert lengths[0].size > total / 8
    costs = np.array([x.size for x in lengths])
    bounds = distribute_evenly_by_size(costs, num_bins=8)
    engine = EngineSettings(batch_size=400, max_seqs=8)
    shape = dict(num_shards=4, partition_epoch=2, engine=engine)
    assert sum(_drops(np.arange(81), bounds, lengths, **shape)) > 0
    pos, new_bounds, info = equalize_steps(
        np.arange(81), bounds, file_lengths=lengths, full_epoch_0idx=1, random_seed_offset=3, **shape
    )
    assert info["dropped_frames"] == [0, 0]
    assert _drops(pos, new_bounds, lengths, **shape) == [0, 0]


@settings(max_examples=examples(30), deadline=None)
@given(
    seqs=st.lists(st.integers(1, 12), min_size=10, max_size=16),
    seed=st.integers(0, 100),
    sync=st.sampled_from(SYNCS),
)
def test_a_repair_keeps_the_files_and_never_lets_another_sub_epoch_drop_more(seqs, seed, sync):
    """:func:`_repair` of a lossy sub-epoch trades with every other sub-epoch, but only where that one's drop does
    not grow: each other sub-epoch drops at most what it dropped before, every file stays exactly once."""
    rng = np.random.RandomState(seed)
    lengths = [rng.randint(1, 40, size=n) for n in seqs]
    bounds = distribute_evenly_by_size(np.array([x.sum() for x in lengths]), num_bins=6)
    original = [list(range(bounds[i], bounds[i + 1])) for i in range(6)]
    ctx = _Context(lengths, EngineSettings(batch_size=60, max_seqs=4, torch_distributed=sync), 1, 3)
    search = dict(max_rounds=DEFAULT_MAX_ROUNDS, reorder_trials=DEFAULT_REORDER_TRIALS, move_trials=DEFAULT_MOVE_TRIALS)
    shape = dict(num_shards=2, partition_epoch=3, between_sub_epochs=2, **search)
    got = _forward(ctx, original, [0, 1, 2], **shape)
    for s in [s for s in range(3) if got[2][s] > 0]:
        bins, _, dropped = _repair(ctx, got, s, **shape)
        assert sorted(f for b in bins for f in b) == list(range(len(lengths))) and all(bins)
        assert all(dropped[t] <= got[2][t] for t in range(3) if t != s)
        assert dropped[s] <= got[2][s]


def test_equal_steps_searches_a_lossy_full_epoch_again_until_its_last_sub_epoch_is_lossless():
    """4 ranks, 2 sub-epochs, 40 files of lognormal sequence counts, one of them 1.1-1.5 of a rank's share, cut by
    flexible_auto: searched in sub-epoch order, the first sub-epoch equalizes with files of the second, which then
    trades with no later one and stays lossy; searched again (the worst sub-epoch first, then repairs) the full epoch
    drops nothing, in the simulated engine, with every file exactly once and no bin empty."""
    rng = np.random.RandomState(4)
    seqs = np.maximum(1, np.round(rng.lognormal(np.log(10), 0.8, size=40))).astype(int)
    big = rng.choice(40, 1)
    seqs[big] = int(seqs.sum() / 8 * rng.uniform(1.1, 1.5))
    lengths = [rng.randint(20, 301, size=k) for k in seqs]
    positions, bounds = distribute_flexible_auto(np.array([x.sum() for x in lengths]), num_shards=4, partition_epoch=2)
    engine = EngineSettings(batch_size=1000, max_seqs=8)
    shape = dict(num_shards=4, partition_epoch=2, engine=engine, full_epoch_0idx=0, random_seed_offset=0)
    ctx = _Context(lengths, engine, 0, 0)
    original = [positions[bounds[i] : bounds[i + 1]].tolist() for i in range(8)]
    search = dict(max_rounds=DEFAULT_MAX_ROUNDS, reorder_trials=DEFAULT_REORDER_TRIALS, move_trials=DEFAULT_MOVE_TRIALS)
    in_order = _forward(ctx, original, [0, 1], num_shards=4, partition_epoch=2, between_sub_epochs=2, **search)
    assert in_order[2][0] == 0 and in_order[2][1] > 0  # the first pass leaves the last sub-epoch lossy
    new_pos, new_bounds, info = equalize_steps(positions, bounds, file_lengths=lengths, **shape)
    assert info["dropped_frames"] == [0, 0]
    sims = simulate_bins(new_pos, new_bounds, lengths, **shape)
    assert [sum(sim.frames_total) - sum(sim.frames_consumed) for sim in sims] == [0, 0]
    assert sorted(new_pos.tolist()) == list(range(40)) and all(np.diff(new_bounds) >= 1)


@settings(max_examples=examples(60), deadline=None)
@given(
    counts=st.lists(st.integers(0, 80), min_size=2, max_size=4),
    sync=st.sampled_from(SYNCS + [{"reduce_type": "param", "param_sync_step": 5}]),
    accum=st.sampled_from([1, 2, 3]),
)
def test_shortened_steps_taken_equal_the_simulation(counts, sync, accum):
    engine = EngineSettings(max_seqs=1, torch_distributed=sync, accum_grad_multiple_step=accum)
    expected = steps_taken(counts, torch_distributed=sync, accum_grad_multiple_step=accum)
    assert _taken(counts, engine, _period(engine)) == expected


@settings(max_examples=examples(60), deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=2, max_size=8),
    seed=st.integers(0, 1000),
    batch_size=st.sampled_from([None, 40, 150, 600]),
    max_seqs=st.sampled_from([None, 1, 3, 8]),
    long_share=st.sampled_from([1.0, 0.5, 0.1]),
    swaps=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.booleans()), min_size=1, max_size=4),
)
def test_reordered_files_rebatch_as_a_new_simulation(sizes, seed, batch_size, max_seqs, long_share, swaps):
    """A rank's batches are :func:`batch_bounds`' (also where they are computed vectorized), and the incremental
    re-batching after two files swap places gives the batches of simulating the rank anew; also where few sequences
    are long enough to end a batch early (long runs of full batches) and after re-batchings not taken."""
    if batch_size is None and max_seqs is None:
        max_seqs = 2
    rng = np.random.RandomState(seed)
    lengths = [np.where(rng.rand(n) < long_share, rng.randint(1, 80, size=n), rng.randint(1, 6, size=n)) for n in sizes]
    ctx = _Context(lengths, EngineSettings(batch_size=batch_size, max_seqs=max_seqs), 2, 7)
    rank = _Rank(ctx, list(range(len(sizes))))
    expected = batch_bounds(rank.xo, batch_size=batch_size, max_seqs=max_seqs)[:-1].tolist()
    assert rank.starts == expected and rank.count == len(expected)  # the fast batching is RETURNN's
    for i, j, taken in swaps:
        i, j = sorted((i % len(sizes), j % len(sizes)))
        if i == j:
            continue
        changes = rank._swap_changes(i, j)
        starts = rank.rebatch(changes)
        swapped = list(rank.files)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        assert starts == _Rank(ctx, swapped).starts  # taken or not
        if taken:
            rank.apply_swap(i, j, changes, starts)
        fresh = _Rank(ctx, rank.files)
        assert (rank.count, rank.starts, rank.tail.tolist()) == (fresh.count, fresh.starts, fresh.tail.tolist())

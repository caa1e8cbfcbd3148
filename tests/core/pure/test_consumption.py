"""The measures of a training's consumption: dropped share and expected steps against a brute-force
count on fuzzed inputs, and partition_epoch read back from the bins of real plans."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.consumption import dropped_share, expected_steps, infer_partition_epoch, read_counts


@st.composite
def consumption(draw):
    """(consumed, available) per (sub-epoch, rank), consumed <= available, some unknown (-1)."""
    num_epochs, num_ranks = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    available = np.array(
        draw(st.lists(st.integers(0, 10**6), min_size=num_epochs * num_ranks, max_size=num_epochs * num_ranks))
    ).reshape(num_epochs, num_ranks)
    share = np.array(draw(st.lists(st.floats(0, 1), min_size=available.size, max_size=available.size)))
    consumed = np.floor(available * share.reshape(available.shape)).astype(np.int64)
    unknown = np.array(draw(st.lists(st.booleans(), min_size=available.size, max_size=available.size)))
    if draw(st.booleans()):
        consumed[unknown.reshape(consumed.shape)] = -1
    return consumed, available


@given(consumption())
def test_dropped_share_is_what_the_ranks_did_not_consume(data):
    consumed, available = data
    got = dropped_share(consumed, available)
    for e in range(consumed.shape[0]):
        c, a = consumed[e].tolist(), available[e].tolist()
        if min(c) < 0 or sum(a) == 0:
            assert np.isnan(got[e])
        else:
            assert got[e] == pytest.approx((sum(a) - sum(c)) / sum(a))


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 10**4), st.integers(0, 10**4)), min_size=1, max_size=8))
def test_expected_steps_are_the_logged_steps_when_a_rank_consumed_all_it_had(ranks):
    # every rank steps alike; rank 0 ran out (consumed == available), the others hold more
    steps = ranks[0][0]
    consumed = [c for _, c, _ in ranks]
    available = [consumed[0]] + [c + extra for _, c, extra in ranks[1:]]
    got = expected_steps(np.array([[steps] * len(ranks)]), np.array([consumed]), np.array([available]))
    assert got.tolist() == [pytest.approx(steps)]
    # a dataset that shards its files again gives every rank only half of them: twice the steps were due
    doubled = expected_steps(np.array([[steps] * len(ranks)]), np.array([consumed]), np.array([available]) * 2)
    assert doubled.tolist() == [pytest.approx(2 * steps)]


def test_bad_shapes_and_rates_are_refused():
    with pytest.raises(ValueError, match=r"must both be \[num_epochs, num_ranks\]"):
        dropped_share(np.zeros((2, 2)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="must all be"):
        expected_steps(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(2))
    assert np.isnan(expected_steps(np.array([[0, 0]]), np.array([[0, 0]]), np.array([[5, 5]]))).all()


@given(
    num_shards=st.integers(1, 4),
    partition_epoch=st.integers(1, 5),
    extra=st.integers(0, 20),
    seed=st.integers(0, 100),
    more_epochs=st.integers(1, 6),
)
def test_partition_epoch_is_read_back_from_the_bins_of_a_plan(num_shards, partition_epoch, extra, seed, more_epochs):
    num_files = num_shards * partition_epoch + extra
    keys = [f"f{i}" for i in range(num_files)]
    plan = ShardPlan(
        keys,
        np.random.RandomState(seed).randint(1, 1000, size=num_files),
        PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch, random_seed_offset=seed),
    )
    epochs = partition_epoch + more_epochs
    per_epoch = [
        [k for r in range(num_shards) for k in plan.files_for(epoch=e, shard_index=r)] for e in range(1, epochs + 1)
    ]
    assert infer_partition_epoch(per_epoch) == partition_epoch
    assert infer_partition_epoch(per_epoch[:partition_epoch]) is None  # no sub-epoch after the first full epoch
    counts = read_counts(per_epoch[:partition_epoch])
    assert set(counts) == set(keys) and set(counts.values()) == {1}

"""compute_plan_stats against a brute-force count over files_for, hand-checked balance
numbers, and check_layout catching broken layouts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.pure.stats import check_layout


@st.composite
def stats_cases(draw):
    num_shards = draw(st.integers(1, 3))
    partition_epoch = draw(st.integers(1, 4))
    num_files = draw(st.integers(num_shards * partition_epoch, num_shards * partition_epoch + 15))
    sizes = draw(st.lists(st.integers(0, 50), min_size=num_files, max_size=num_files))
    plan = ShardPlan(
        [f"f{i}" for i in range(num_files)],
        sizes,
        PlanSettings(
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            distrib_shard_files=draw(st.booleans()),
            seq_ordering=draw(st.sampled_from(["random", "default"])),
        ),
    )
    return plan, draw(st.integers(1, 3 * partition_epoch + 2))


@settings(max_examples=examples(120))
@given(stats_cases())
def test_stats_equal_brute_force_over_files_for(case):
    plan, num_epochs = case
    st_ = compute_plan_stats(plan, num_epochs=num_epochs)
    size_of = dict(zip(plan.keys, plan.costs.tolist()))
    passes = {k: 0 for k in plan.keys}
    for e in range(1, num_epochs + 1):
        per_rank = [plan.files_for(epoch=e, shard_index=r) for r in range(plan.num_shards)]
        assert st_.bytes[e - 1].tolist() == [sum(size_of[k] for k in f) for f in per_rank]
        assert st_.files[e - 1].tolist() == [len(f) for f in per_rank]
        flat = [k for f in per_rank for k in f]
        assert st_.overlap[e - 1] == sum(1 for k in set(flat) if flat.count(k) > 1)
        assert st_.coverage[e - 1] == pytest.approx(len(set(flat)) / plan.num_files)
        for k in flat:
            passes[k] += 1
    assert st_.passes.tolist() == [passes[k] for k in plan.keys]
    total = st_.bytes.sum(axis=1)
    expect_drop = [1 - plan.num_shards * m / t if t else 0.0 for m, t in zip(st_.bytes.min(axis=1), total)]
    assert st_.dropped_fraction.tolist() == pytest.approx(expect_drop)


def test_balance_numbers_by_hand():
    # default order, 2 shards x 2 sub-epochs: bins [a] [b] [c] [d]; rank 0 reads a, b; rank 1 reads c, d.
    plan = ShardPlan(
        list("abcd"), [1, 1, 78, 120], PlanSettings(num_shards=2, partition_epoch=2, seq_ordering="default")
    )
    st_ = compute_plan_stats(plan, num_epochs=2)
    assert st_.bytes.tolist() == [[1, 78], [1, 120]]
    assert st_.max_over_mean.tolist() == pytest.approx([78 / 39.5, 120 / 60.5])
    assert st_.dropped_fraction.tolist() == pytest.approx([1 - 2 / 79, 1 - 2 / 121])
    assert st_.passes.tolist() == [1, 1, 1, 1] and st_.full_epoch_coverage == 1.0


def test_all_zero_sizes_count_as_balanced():
    plan = ShardPlan(list("abcd"), [0, 0, 0, 0], PlanSettings(num_shards=2, partition_epoch=2))
    st_ = compute_plan_stats(plan, num_epochs=2)
    assert st_.dropped_fraction.tolist() == [0.0, 0.0] and st_.max_over_mean.tolist() == [1.0, 1.0]


def test_unsharded_overlap_and_coverage():
    # Unsharded, default order: every rank reads the same bins, so everything overlaps.
    plan = ShardPlan(
        list("abcdef"),
        [1] * 6,
        PlanSettings(num_shards=3, partition_epoch=2, seq_ordering="default", distrib_shard_files=False),
    )
    st_ = compute_plan_stats(plan, num_epochs=2)
    assert st_.overlap.tolist() == [3, 3] and st_.coverage.tolist() == [0.5, 0.5]
    assert st_.passes.tolist() == [3] * 6


@pytest.mark.parametrize(
    "order, bounds, num_bins, message",
    [
        ([0, 1, 1], [0, 1, 3], 2, "exactly once"),
        ([0, 1, 2], [0, 2, 2, 3], 3, "bin 1 of 3 is empty"),
        ([0, 1], [0, 2], 1, r"shape \(2,\)"),
        ([0, 1, 2], [0, 1, 2], 2, "do not span"),
    ],
)
def test_check_layout_catches(order, bounds, num_bins, message):
    with pytest.raises(AssertionError, match=message):
        check_layout(np.array(order), np.array(bounds), num_files=3, num_bins=num_bins)


def test_num_epochs_must_be_positive():
    plan = ShardPlan(list("ab"), [1, 1], PlanSettings(num_shards=1, partition_epoch=2))
    with pytest.raises(ValueError, match="num_epochs=0"):
        compute_plan_stats(plan, num_epochs=0)

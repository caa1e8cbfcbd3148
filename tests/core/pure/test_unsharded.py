"""compute_unsharded_stats (the report's unsharded comparison) against a brute-force count over files_for: on
every rank and sub-epoch where it is exact, and on exactly the ranks and sub-epochs it names where it samples."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples, plan_settings_kwargs

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure import unsharded
from i6_shard.core.pure.unsharded import compute_unsharded_stats, sampled_ranks


@st.composite
def unsharded_cases(draw):
    kwargs = draw(
        plan_settings_kwargs(
            sharding=draw(st.sampled_from(["unsharded", "unsharded_same_seed"])),
            with_num_epochs=True,
            max_num_shards=5,
        )
    )
    num_epochs = kwargs.pop("num_epochs")
    bins = kwargs["partition_epoch"]
    num_files = draw(st.integers(bins, bins + 20))
    costs = draw(st.lists(st.integers(0, 10**6), min_size=num_files, max_size=num_files))
    plan = ShardPlan([f"f{i}" for i in range(num_files)], costs, PlanSettings(**kwargs))
    return plan, num_epochs


def brute_force(plan, *, ranks, num_epochs):
    """Costs per (sub-epoch, rank), and entries read by several / by some of ``ranks``, from files_for."""
    cost_of = dict(zip(plan.keys, plan.costs.tolist()))
    out_bytes, overlap, coverage = [], [], []
    for epoch in range(1, num_epochs + 1):
        per_rank = [plan.files_for(epoch=epoch, shard_index=r) for r in ranks]
        out_bytes.append([sum(cost_of[k] for k in files) for files in per_rank])
        read = [k for files in per_rank for k in files]  # keys are distinct here
        overlap.append(sum(1 for k in set(read) if read.count(k) > 1))
        coverage.append(len(set(read)) / plan.num_files)
    return out_bytes, overlap, coverage


def assert_matches_brute_force(plan, stats):
    out_bytes, overlap, coverage = brute_force(plan, ranks=stats.ranks.tolist(), num_epochs=stats.num_epochs)
    assert stats.bytes.tolist() == out_bytes
    assert stats.overlap.tolist() == overlap
    assert stats.coverage.tolist() == coverage  # the same division of the same ints: equal, not approximately


@settings(max_examples=examples(150), deadline=None)
@given(unsharded_cases())
def test_exact_equals_brute_force_on_every_rank_and_sub_epoch(case):
    plan, num_epochs = case
    stats = compute_unsharded_stats(plan.costs, plan.settings, num_epochs=num_epochs)
    assert stats.exact
    assert stats.ranks.tolist() == list(range(plan.num_shards)) and stats.num_epochs == num_epochs
    assert_matches_brute_force(plan, stats)


@settings(max_examples=examples(150), deadline=None)
@given(unsharded_cases(), st.integers(1, 200))
def test_a_sample_is_exact_on_the_ranks_and_sub_epochs_it_names(case, max_entries):
    plan, num_epochs = case
    stats = compute_unsharded_stats(plan.costs, plan.settings, num_epochs=num_epochs, max_entries=max_entries)
    assert_matches_brute_force(plan, stats)
    assert stats.exact == (stats.ranks.tolist() == list(range(plan.num_shards)) and stats.num_epochs == num_epochs)
    if not stats.exact:  # the first full epoch, on ranks evenly spaced from 0
        assert stats.num_epochs == min(num_epochs, plan.partition_epoch)
        assert stats.ranks.tolist() == sorted(set(stats.ranks.tolist())) and stats.ranks[0] == 0


@settings(max_examples=examples(60), deadline=None)
@given(unsharded_cases(), st.integers(1, 40))
def test_counting_the_sub_epochs_in_blocks_changes_nothing(case, max_bytes):
    plan, num_epochs = case
    whole = compute_unsharded_stats(plan.costs, plan.settings, num_epochs=num_epochs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(unsharded, "_COUNTS_MAX_BYTES", max_bytes)  # a few sub-epochs per block, or one
        blocked = compute_unsharded_stats(plan.costs, plan.settings, num_epochs=num_epochs)
    for name in ("bytes", "overlap", "coverage", "ranks"):
        assert getattr(blocked, name).tolist() == getattr(whole, name).tolist()


def test_many_ranks_of_many_files_are_sampled_and_one_shared_layout_is_not():
    costs = np.arange(1, 1001, dtype=np.int64)
    distinct = PlanSettings(num_shards=64, partition_epoch=4, distrib_shard_files=False)
    stats = compute_unsharded_stats(costs, distinct, num_epochs=12, max_entries=10_000)
    assert stats.ranks.tolist() == sampled_ranks(64, num_sampled=10).tolist() and stats.num_epochs == 4
    assert not stats.exact
    same = distinct.replace(seq_ordering="default")  # every rank reads the same bins: one layout for all
    stats = compute_unsharded_stats(costs, same, num_epochs=12, max_entries=10_000)
    assert stats.exact and (stats.bytes == stats.bytes[:, :1]).all()
    assert stats.overlap.tolist() == (stats.coverage * 1000).round().astype(int).tolist()  # all read what one reads
    with pytest.raises(ValueError, match="compute_plan_stats"):
        compute_unsharded_stats(costs, distinct.replace(distrib_shard_files=True), num_epochs=4)

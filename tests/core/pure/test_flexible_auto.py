"""The "flexible_auto" distribution: the flexible split with its bound on the sub-epoch sizes chosen per full
epoch, then single files moved between sub-epochs. Invariants as for every distribution, exactly once per full
epoch; within the tolerance of the balanced split and of the flexible split at every bound it tries, compared
with sums computed here, and never above the most regular of those within the tolerance; sizes within the
largest bound; moves that reach what no contiguous split does; and the option checks."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from tests.blocking import run_to_end
from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.pure.balanced import distribute_balanced, group_bounds
from i6_shard.core.pure.cut import check_bound_is_used
from i6_shard.core.pure.flexible import (
    AUTO_DEVIATIONS,
    AUTO_TOLERANCE,
    distribute_flexible,
    distribute_flexible_auto,
    sub_epoch_size_range,
)

from .test_flexible import check_bins, dropped, groups_of, is_contiguous_split, layouts, loads_of


@settings(max_examples=examples(150), deadline=None)
@given(layouts)
def test_invariants_and_within_the_tolerance_of_every_bound_it_tries(case):
    num_shards, partition_epoch, sizes, _ = case
    arr = np.array(sizes, dtype=np.int64)
    kw = dict(num_shards=num_shards, partition_epoch=partition_epoch)
    order, bounds = distribute_flexible_auto(arr, **kw)
    check_bins(order, bounds, len(sizes), num_shards, partition_epoch)
    got = dropped(loads_of(sizes, order, bounds, num_shards, partition_epoch))
    # The candidates, cut here by the public functions and scored with sums computed here.
    candidates = [distribute_balanced(arr, **kw)] + [
        distribute_flexible(arr, max_sub_epoch_deviation=d, **kw) for d in AUTO_DEVIATIONS
    ]
    losses = [dropped(loads_of(sizes, *c, num_shards, partition_epoch)) for c in candidates]
    assert got <= min(losses) + AUTO_TOLERANCE * partition_epoch
    # At most the first of them (the most regular) within the tolerance of the best: moving files only lowers
    # it. (The flexible split at a bound is itself the balanced split where that drops no more.)
    limit = min(losses) + AUTO_TOLERANCE * partition_epoch
    assert got <= next(loss for loss in losses if loss <= limit)
    again = distribute_flexible_auto(arr.copy(), **kw)
    assert order.tobytes() == again[0].tobytes() and bounds.tobytes() == again[1].tobytes()
    # Sub-epoch sizes within the largest bound, or no farther outside than the balanced split's cut.
    low, high = sub_epoch_size_range(
        sum(sizes), partition_epoch=partition_epoch, max_sub_epoch_deviation=AUTO_DEVIATIONS[-1]
    )
    start = group_bounds(arr, num_groups=partition_epoch, min_group_size=num_shards).tolist()
    start_sizes = [sum(sizes[start[s] : start[s + 1]]) for s in range(partition_epoch)]
    balanced_sizes = [sum(sizes[i] for i in g) for g in groups_of(*candidates[0], num_shards, partition_epoch)]
    for s, group in enumerate(groups_of(order, bounds, num_shards, partition_epoch)):
        size = sum(sizes[i] for i in group)
        assert min([low] + start_sizes + balanced_sizes) <= size <= max([high] + start_sizes + balanced_sizes), (
            s,
            size,
            low,
            high,
            start_sizes,
        )


def test_moving_files_between_sub_epochs_reaches_what_no_contiguous_split_does():
    """Two files of 15 among small ones, 3 ranks, 3 sub-epochs: each contiguous split, at every bound, drops
    more than moving a few files between the sub-epochs (sums computed here); every file still once."""
    sizes = [4, 4, 2, 15, 2, 4, 3, 15, 5, 4, 2, 3, 4]
    arr = np.array(sizes, dtype=np.int64)
    kw = dict(num_shards=3, partition_epoch=3)
    contiguous = [distribute_balanced(arr, **kw)] + [
        distribute_flexible(arr, max_sub_epoch_deviation=d, **kw) for d in AUTO_DEVIATIONS
    ]
    best = min(dropped(loads_of(sizes, *c, 3, 3)) for c in contiguous)
    order, bounds = distribute_flexible_auto(arr, **kw)
    check_bins(order, bounds, len(sizes), 3, 3)
    got = dropped(loads_of(sizes, order, bounds, 3, 3))
    assert got < best / 2, (got, best)
    assert not is_contiguous_split(groups_of(order, bounds, 3, 3), len(sizes))


def test_a_file_that_needs_room_gets_it_and_regular_corpora_keep_regular_sub_epochs():
    """A file of 1.4 mean sub-epochs drops 12% at the default bound and nothing with room; lognormal sizes
    with no such file keep sub-epochs within the smallest bound, where that is within the tolerance."""
    sizes = np.array([1, 1, 14] + [1] * 24)
    kw = dict(num_shards=2, partition_epoch=2)
    fixed = dropped(loads_of(sizes.tolist(), *distribute_flexible(sizes, **kw), 2, 2))
    assert fixed == Fraction(4, 24)  # sub-epoch 14 | 10: 1 - 20/24
    assert dropped(loads_of(sizes.tolist(), *distribute_flexible_auto(sizes, **kw), 2, 2)) == 0
    regular = lognormal_sizes(2000, seed=3, sigma=0.5)
    kw = dict(num_shards=4, partition_epoch=5)
    order, bounds = distribute_flexible_auto(regular, **kw)
    loads = np.array(loads_of(regular.tolist(), order, bounds, 4, 5))
    sizes_over_mean = loads.sum(axis=1) / (int(regular.sum()) / 5)
    assert np.all(np.abs(sizes_over_mean - 1) <= AUTO_DEVIATIONS[0] + 1e-9), sizes_over_mean


def test_plans_take_it_and_a_bound_caps_its_choice():
    keys = [f"/data/part-{i:02d}.hdf" for i in range(40)]
    sizes = lognormal_sizes(40, seed=9, sigma=2.0)
    plan = ShardPlan(keys, sizes, PlanSettings(num_shards=3, partition_epoch=2, distribution="flexible_auto"))
    assert sorted(k for r in range(3) for s in range(2) for k in plan.files_for(epoch=s + 1, shard_index=r)) == sorted(
        keys
    )
    check_bound_is_used(0.25, distribution="flexible_auto")  # the default: not given
    check_bound_is_used(0.5, distribution="flexible_auto")  # the most it may choose
    with pytest.raises(ValueError, match=r"max_sub_epoch_deviation=0.5 bounds the sub-epoch sizes of"):
        check_bound_is_used(0.5, distribution="balanced")
    cost = dict(zip(keys, np.asarray(sizes).tolist()))

    def off(distribution, **bound):
        settings = PlanSettings(num_shards=3, partition_epoch=2, distribution=distribution, **bound)
        made = ShardPlan(keys, sizes, settings)
        sub = np.array([sum(cost[k] for r in range(3) for k in made.files_for(epoch=e, shard_index=r)) for e in (1, 2)])
        return float(np.abs(sub / sub.mean() - 1).max())

    assert off("flexible_auto") > 0.25  # it chooses a bound that far on these files
    for bound in (
        0.1,
        0.3,
    ):  # within the bound (0.25, the default, is no bound), or no farther outside than the balanced split
        assert off("flexible_auto", max_sub_epoch_deviation=bound) <= max(bound, off("balanced")) + 1e-9


@pytest.mark.slow
def test_every_entry_point_takes_it_and_a_bound_with_it(tmp_path):
    """The CLI and the builder take "flexible_auto", and a bound as the most it may choose (ShardPlanJob:
    tests/jobs/test_plan.py)."""
    import sys

    from i6_shard.core import FileSizes, save_file_sizes
    from i6_shard.returnn_config import sharded_files_dataset

    keys = [f"/data/part-{i:02d}.hdf" for i in range(12)]
    sizes_path = str(tmp_path / "sizes.npz")
    save_file_sizes(FileSizes(keys=keys, sizes=lognormal_sizes(12, seed=1, sigma=1.0)), sizes_path)
    base = [
        sys.executable,
        "-m",
        "i6_shard",
        "plan",
        "--sizes",
        sizes_path,
        "--num-shards",
        "2",
        "--partition-epoch",
        "3",
        "--num-epochs",
        "6",
        "--distribution",
        "flexible_auto",
        "--no-plot",
    ]
    ok = run_to_end(base + ["-o", str(tmp_path / "ok")])
    assert ok.returncode == 0, ok.stderr
    assert "distribution         flexible_auto" in (tmp_path / "ok" / "report.txt").read_text()
    capped = run_to_end(
        base + ["--max-sub-epoch-deviation", "0.5", "-o", str(tmp_path / "capped")],
    )
    assert capped.returncode == 0, capped.stderr
    assert "up to 0.5" in (tmp_path / "capped" / "report.txt").read_text()
    sub = {"class": "HDFDataset", "seq_ordering": "random"}
    built = sharded_files_dataset(keys, sub_epoch_dataset=sub, partition_epoch=3, distribution="flexible_auto")
    assert built["distribution"] == "flexible_auto" and "max_sub_epoch_deviation" not in built
    capped = sharded_files_dataset(
        keys, sub_epoch_dataset=sub, partition_epoch=3, distribution="flexible_auto", max_sub_epoch_deviation=0.5
    )
    assert capped["max_sub_epoch_deviation"] == 0.5


def test_the_report_counts_the_sub_epochs_files_were_moved_into():
    """summary.json and the report say how many sub-epochs are not a contiguous part of the shuffled order,
    counted here from the layout and the shuffle; plans of other distributions have no such key."""
    from i6_shard.core.reporting.outputs import plan_summary
    from i6_shard.core.pure.distribute import shuffle_order
    from i6_shard.core.reporting.report import render_report

    sizes = [4, 4, 2, 15, 2, 4, 3, 15, 5, 4, 2, 3, 4]
    keys = [f"f{i:02d}" for i in range(len(sizes))]
    settings = PlanSettings(num_shards=3, partition_epoch=3, num_epochs=12, distribution="flexible_auto")
    plan = ShardPlan(keys, sizes, settings)
    expected = 0
    for k in range(4):
        position = np.argsort(shuffle_order(len(sizes), seed=settings.seed_for(full_epoch_0idx=k, shard_index=0)))
        order, bounds = plan.layout(full_epoch_0idx=k)
        for s in range(3):
            pos = sorted(int(position[i]) for r in range(3) for i in order[bounds[r * 3 + s] : bounds[r * 3 + s + 1]])
            expected += pos != list(range(pos[0], pos[0] + len(pos)))
    assert expected > 0
    summary = plan_summary(plan, num_epochs=12, compare=False)[0]
    assert (summary["non_contiguous_sub_epochs"], summary["non_contiguous_of"]) == (expected, 12)
    assert f"from other sub-epochs (so not a contiguous part of the shuffled order): {expected} of 12" in render_report(
        summary
    )
    other = plan_summary(plan.with_settings(distribution="flexible"), num_epochs=12, compare=False)[0]
    assert "non_contiguous_sub_epochs" not in other

"""The balanced distribution: invariants, exact largest-first placement against a
one-file-at-a-time heap reference, and its use through ShardPlan."""

import heapq
from fractions import Fraction

import numpy as np

from i6_shard.core.pure.cut import _draw_ranks
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.distribute import distribute_evenly_by_size
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.pure.distribute import shuffle_order
from i6_shard.core.pure.balanced import _lpt_heap, _lpt_runs, assign_largest_first, distribute_balanced, group_bounds
from tests.deps import RETURNN_REASON


def lpt_reference(sizes, num_bins, *, fewer_files_first=True):
    """Textbook LPT, one file at a time with a heap: largest first (ties: earlier first),
    onto the least-loaded bin (ties: fewer files if asked, then lower index)."""
    heap = [(0, 0, b) for b in range(num_bins)]
    out = [None] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        load, count, b = heap[0]
        out[i] = b
        heapq.heapreplace(heap, (load + sizes[i], count + 1 if fewer_files_first else 0, b))
    return out


def loads_of(sizes, assignment, num_bins):
    loads = [0] * num_bins
    for s, b in zip(sizes, assignment):
        loads[b] += s
    return loads


# Small size alphabets force ties everywhere; huge sizes check int64 exactness.
sizes_and_bins = st.tuples(
    st.one_of(
        st.lists(st.integers(0, 3), max_size=80),
        st.lists(st.integers(0, 10**6), max_size=80),
        st.lists(st.integers(0, 10**6), min_size=100, max_size=300),
        st.lists(st.integers(10**15, 10**15 + 5), max_size=80),
    ),
    st.integers(1, 12),
)


@settings(max_examples=examples(200))
@given(sizes_and_bins)
def test_assign_largest_first_is_exactly_lpt(case):
    sizes, num_bins = case
    got = assign_largest_first(np.array(sizes, dtype=np.int64), num_bins=num_bins).tolist()
    assert got == lpt_reference(sizes, num_bins)


@settings(max_examples=examples(300))
@given(sizes_and_bins, st.sampled_from([_lpt_heap, _lpt_runs]), st.integers(0, 40))
def test_both_lpt_loops_are_exactly_lpt_for_any_number_of_bins(case, loop, more_bins):
    # assign_largest_first picks the heap loop below 32 bins and runs above; check both everywhere.
    sizes, num_bins = case
    num_bins += more_bins
    by_size = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    got = loop(np.array([sizes[i] for i in by_size], dtype=np.int64), num_bins).tolist()
    ref = lpt_reference(sizes, num_bins)
    assert got == [ref[i] for i in by_size]


@settings(max_examples=examples(200))
@given(st.lists(st.floats(-3, 3), min_size=1, max_size=200), st.integers(1, 40))
def test_never_worse_than_textbook_lpt_on_continuous_sizes(log_sizes, num_bins):
    # Claim: with sizes drawn from a continuous distribution (no equal loads), the result is
    # textbook LPT's; in particular its smallest bin is never smaller and its largest never larger.
    sizes = [int(np.exp(x + 30)) for x in log_sizes]  # ~1e13 bytes: ties of loads are (near) impossible
    got = loads_of(sizes, assign_largest_first(np.array(sizes), num_bins=num_bins).tolist(), num_bins)
    ref = loads_of(sizes, lpt_reference(sizes, num_bins, fewer_files_first=False), num_bins)
    assert min(got) >= min(ref) and max(got) <= max(ref)


def test_assign_largest_first_fills_every_bin_even_with_empty_files():
    got = assign_largest_first(np.array([5, 0, 0]), num_bins=3).tolist()
    assert sorted(got) == [0, 1, 2]  # textbook LPT (ties by index only) would leave bin 2 empty
    assert lpt_reference([5, 0, 0], 3, fewer_files_first=False) == [0, 1, 1]


layouts = st.integers(1, 6).flatmap(
    lambda w: st.integers(1, 5).flatmap(
        lambda p: st.tuples(
            st.just(w),
            st.just(p),
            st.one_of(
                st.lists(st.integers(0, 10**12), min_size=w * p, max_size=w * p + 60),
                st.lists(st.integers(0, 2), min_size=w * p, max_size=w * p + 60),
                # one huge file up front: RETURNN's cut leaves the first groups with too few files
                st.lists(st.integers(1, 3), min_size=w * p, max_size=w * p + 20).map(lambda s: [10**9] + s),
            ),
        )
    )
)


@settings(max_examples=examples(300))
@given(layouts)
def test_distribute_balanced_invariants(case):
    num_shards, partition_epoch, sizes = case
    sizes = np.array(sizes, dtype=np.int64)
    order, bounds = distribute_balanced(sizes, num_shards=num_shards, partition_epoch=partition_epoch)
    assert bounds.shape == (num_shards * partition_epoch + 1,) and bounds[0] == 0 and bounds[-1] == len(sizes)
    assert sorted(order.tolist()) == list(range(len(sizes)))  # every file exactly once
    bins = [order[bounds[b] : bounds[b + 1]].tolist() for b in range(num_shards * partition_epoch)]
    assert all(bins), "empty bin"
    assert all(b == sorted(b) for b in bins), "a bin does not keep the given order"
    # Sub-epoch s of all ranks (bins r*P + s) is one contiguous group of the given order,
    # unless RETURNN's own bins were kept (they drop less on some tiny inputs).
    groups = [
        sorted(i for r in range(num_shards) for i in bins[r * partition_epoch + s]) for s in range(partition_epoch)
    ]
    returnn_bins = distribute_evenly_by_size(sizes, num_bins=num_shards * partition_epoch)
    is_returnn = order.tolist() == list(range(len(sizes))) and bounds.tolist() == returnn_bins.tolist()
    assert is_returnn or sum(groups, []) == list(range(len(sizes)))
    # Deterministic: a second call (another rank) gives the same bytes.
    order2, bounds2 = distribute_balanced(sizes.copy(), num_shards=num_shards, partition_epoch=partition_epoch)
    assert order.tobytes() == order2.tobytes() and bounds.tobytes() == bounds2.tobytes()


@settings(max_examples=examples(200))
@given(layouts)
def test_groups_are_returnns_cut_unless_too_small(case):
    num_shards, partition_epoch, sizes = case
    returnn_cut = distribute_evenly_by_size(np.array(sizes), num_bins=partition_epoch)
    got = group_bounds(np.array(sizes), num_groups=partition_epoch, min_group_size=num_shards)
    if np.diff(returnn_cut).min() >= num_shards:
        assert got.tolist() == returnn_cut.tolist()
    else:
        assert np.diff(got).min() >= num_shards and got[0] == 0 and got[-1] == len(sizes)


def mean_dropped(loads_per_sub_epoch):
    """Exact mean over sub-epochs of 1 - W*min/sum (0 for a sub-epoch without bytes)."""
    fracs = [Fraction(sum(ld) - len(ld) * min(ld), sum(ld)) if sum(ld) else Fraction(0) for ld in loads_per_sub_epoch]
    return sum(fracs) / len(fracs)


@settings(max_examples=examples(300))
@given(layouts)
def test_never_drops_more_than_lpt_on_returnns_cut(case):
    num_shards, partition_epoch, sizes = case
    order, bounds = distribute_balanced(np.array(sizes), num_shards=num_shards, partition_epoch=partition_epoch)
    bins = [sum(sizes[i] for i in order[bounds[b] : bounds[b + 1]]) for b in range(num_shards * partition_epoch)]
    got = [[bins[r * partition_epoch + s] for r in range(num_shards)] for s in range(partition_epoch)]
    cut = group_bounds(np.array(sizes), num_groups=partition_epoch, min_group_size=num_shards).tolist()
    ref = [loads_of(sizes[a:b], lpt_reference(sizes[a:b], num_shards), num_shards) for a, b in zip(cut, cut[1:])]
    assert mean_dropped(got) <= mean_dropped(ref)


def returnn_sub_epoch_loads(sizes, num_shards, partition_epoch):
    """Bytes per [sub-epoch][rank] of RETURNN's own DistributeFilesDataset cut (called on RETURNN)."""
    dfd = pytest.importorskip("returnn.datasets.distrib_files", reason=RETURNN_REASON).DistributeFilesDataset
    keys = [f"f{i}" for i in range(len(sizes))]
    bins = dfd._distribute_evenly_by_size(
        num_bins=num_shards * partition_epoch, file_sizes=dict(zip(keys, sizes)), files_order=keys
    )
    size_of = dict(zip(keys, sizes))
    return [
        [sum(size_of[k] for k in bins[r * partition_epoch + s]) for r in range(num_shards)]
        for s in range(partition_epoch)
    ]


def balanced_sub_epoch_loads(sizes, num_shards, partition_epoch):
    order, bounds = distribute_balanced(
        np.array(sizes, dtype=np.int64), num_shards=num_shards, partition_epoch=partition_epoch
    )
    bins = [sum(sizes[i] for i in order[bounds[b] : bounds[b + 1]]) for b in range(num_shards * partition_epoch)]
    return [[bins[r * partition_epoch + s] for r in range(num_shards)] for s in range(partition_epoch)]


@settings(max_examples=examples(300))
@given(layouts)
def test_never_drops_more_than_returnns_distribution(case):
    num_shards, partition_epoch, sizes = case
    assert mean_dropped(balanced_sub_epoch_loads(sizes, num_shards, partition_epoch)) <= mean_dropped(
        returnn_sub_epoch_loads(sizes, num_shards, partition_epoch)
    )


@pytest.mark.parametrize(
    "sizes, num_shards, partition_epoch",
    [
        ([31, 74, 23, 35, 75, 55, 28, 34], 2, 4),
        ([56, 60, 77, 30, 24, 2, 3, 94, 98, 13, 40, 72, 19, 95], 4, 3),
    ],
)
def test_tiny_inputs_where_returnns_cut_drops_less_keep_it(sizes, num_shards, partition_epoch):
    # Largest-first per group loses here (21.7% against RETURNN's 16.9% in the first case).
    cut = group_bounds(np.array(sizes), num_groups=partition_epoch, min_group_size=num_shards).tolist()
    lpt = [loads_of(sizes[a:b], lpt_reference(sizes[a:b], num_shards), num_shards) for a, b in zip(cut, cut[1:])]
    returnn = returnn_sub_epoch_loads(sizes, num_shards, partition_epoch)
    assert mean_dropped(returnn) < mean_dropped(lpt)
    assert mean_dropped(balanced_sub_epoch_loads(sizes, num_shards, partition_epoch)) == mean_dropped(returnn)


def test_equal_sizes_lose_nothing_to_file_granularity():
    # 1000 equal files, 8 ranks, P=10: RETURNN's cut gives groups of 100 files, 12.5 per rank,
    # so some ranks get 12 and 4% is dropped; groups of 96/104 files give every rank 12 or 13.
    sizes = np.full(1000, 7, dtype=np.int64)
    order, bounds = distribute_balanced(sizes, num_shards=8, partition_epoch=10)
    counts = np.diff(bounds).reshape(8, 10)  # [rank, sub-epoch]
    assert (counts == counts[0]).all(), "ranks read different numbers of files in a sub-epoch"
    assert counts.sum() == 1000 and set(counts[0].tolist()) == {12, 13}


def test_group_bounds_moves_as_little_as_needed():
    sizes = np.array([10**6] + [1] * 11)
    # RETURNN: the huge file alone, then the rest of the average (11 / 2) per group
    assert distribute_evenly_by_size(sizes, num_bins=3).tolist() == [0, 1, 7, 12]
    assert group_bounds(sizes, num_groups=3, min_group_size=2).tolist() == [0, 2, 7, 12]
    assert group_bounds(sizes, num_groups=3, min_group_size=4).tolist() == [0, 4, 8, 12]
    assert group_bounds(sizes, num_groups=3, min_group_size=1).tolist() == [0, 1, 7, 12]


def test_one_shard_is_returnns_cut():
    sizes = lognormal_sizes(500, seed=3)
    order, bounds = distribute_balanced(sizes, num_shards=1, partition_epoch=7)
    assert order.tolist() == list(range(500))
    assert bounds.tolist() == distribute_evenly_by_size(sizes, num_bins=7).tolist()


def test_too_few_files_is_a_clear_error():
    with pytest.raises(ValueError, match=r"5 files cannot fill num_shards\*partition_epoch=3\*2=6 bins"):
        distribute_balanced(np.ones(5, dtype=np.int64), num_shards=3, partition_epoch=2)
    with pytest.raises(TypeError, match="integers"):
        distribute_balanced(np.ones(6), num_shards=3, partition_epoch=2)


def _dropped(sizes, order, bounds, num_shards, partition_epoch):
    loads = np.add.reduceat(sizes[order], bounds[:-1]).reshape(num_shards, partition_epoch)
    return float(np.mean(1 - num_shards * loads.min(axis=0) / loads.sum(axis=0)))


def test_balanced_beats_returnn_on_skewed_sizes():
    # 2000 files / 16 ranks / P=5: RETURNN's greedy cut drops several percent per sub-epoch.
    sizes = lognormal_sizes(2000, seed=0)
    shuffled = sizes[shuffle_order(2000, seed=1)]
    bal = _dropped(shuffled, *distribute_balanced(shuffled, num_shards=16, partition_epoch=5), 16, 5)
    ret = _dropped(shuffled, np.arange(2000), distribute_evenly_by_size(shuffled, num_bins=80), 16, 5)
    assert bal < 0.02 < ret


@settings(max_examples=examples(50))
@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 40), st.integers(0, 3), st.booleans())
def test_shard_plan_balanced_full_epochs(num_shards, partition_epoch, extra, seed, shard_files):
    num_files = num_shards * partition_epoch + extra
    keys = [f"f{i}" for i in range(num_files)]
    sizes = lognormal_sizes(num_files, seed=seed)
    plan = ShardPlan(
        keys,
        sizes,
        PlanSettings(
            num_shards=num_shards,
            partition_epoch=partition_epoch,
            distrib_shard_files=shard_files,
            distribution="balanced",
            random_seed_offset=seed,
        ),
    )
    for full_epoch_0idx in range(2):
        first = full_epoch_0idx * partition_epoch + 1
        per_rank = [
            [plan.files_for(epoch=e, shard_index=r) for e in range(first, first + partition_epoch)]
            for r in range(num_shards)
        ]
        assert all(files for rank in per_rank for files in rank), "a rank has an empty sub-epoch"
        for r in range(num_shards):
            if shard_files:
                order, bounds = plan.layout(full_epoch_0idx=full_epoch_0idx, shard_index=r)
                first_order, first_bounds = plan.layout(full_epoch_0idx=full_epoch_0idx, shard_index=0)
                assert np.array_equal(order, first_order) and np.array_equal(bounds, first_bounds)
            else:  # each rank reads every file once per full epoch, with its own shuffle
                assert sorted(sum(per_rank[r], [])) == sorted(keys)
        if shard_files:
            assert sorted(sum(sum(per_rank, []), [])) == sorted(keys)


def test_shard_plan_balanced_layout_is_distribute_balanced_of_the_shuffle():
    sizes = lognormal_sizes(300, seed=5)
    plan = ShardPlan(
        [str(i) for i in range(300)],
        sizes,
        PlanSettings(num_shards=4, partition_epoch=3, distribution="balanced", random_seed_offset=11),
    )
    shuffled = shuffle_order(300, seed=1 + 1 + 11)  # full epoch 1
    positions, bounds = _draw_ranks(  # the ranks of each sub-epoch in a drawn order
        sizes[shuffled],
        *distribute_balanced(sizes[shuffled], num_shards=4, partition_epoch=3),
        num_shards=4,
        partition_epoch=3,
    )
    order, plan_bounds = plan.layout(full_epoch_0idx=1)
    assert order.tolist() == shuffled[positions].tolist() and plan_bounds.tolist() == bounds.tolist()
    # rank 2 reads bin 2*3 + 1 in sub-epoch 5 (the second of full epoch 1)
    assert plan.files_for(epoch=5, shard_index=2) == [str(i) for i in shuffled[positions[bounds[7] : bounds[8]]]]

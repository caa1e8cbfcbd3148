"""ShardPlan: per rank and sub-epoch the files RETURNN's own DistributeFilesDataset hands its
sub-epoch dataset (built per rank, RETURNN deriving each rank's shard and seed itself), plus
invariants and errors. PlanSettings: test_settings.py; the plan file: tests/core/io/test_plan_file.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.stats import check_layout

pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")

from ...returnn_ranks import returnn_files  # noqa: E402


@st.composite
def plan_cases(draw):
    num_shards = draw(st.integers(1, 4))
    partition_epoch = draw(st.integers(1, 4))
    num_files = draw(st.integers(num_shards * partition_epoch, num_shards * partition_epoch + 25))
    sizes = draw(st.lists(st.integers(0, 1000), min_size=num_files, max_size=num_files))
    sharded = draw(st.booleans())
    kwargs = dict(
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        seq_ordering=draw(st.sampled_from(["random", "random", "default"])),
        random_seed_offset=draw(st.sampled_from([0, 3, 16127])),
        fixed_random_seed=draw(st.sampled_from([None, None, 7])),
        distrib_shard_files=sharded,
        same_seed_on_all_ranks=False if sharded else draw(st.booleans()),
    )
    return [f"/d/file-{i}.hdf" for i in range(num_files)], sizes, kwargs


@settings(max_examples=examples(120))
@given(plan_cases())
def test_files_for_equals_returnn_over_three_full_epochs(case):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, PlanSettings(**kwargs))
    num_epochs = 3 * kwargs["partition_epoch"]
    expected = returnn_files(keys, sizes, plan.settings, num_epochs=num_epochs)
    assert [
        [plan.files_for(epoch=e, shard_index=r) for e in range(1, num_epochs + 1)] for r in range(kwargs["num_shards"])
    ] == expected


def test_the_reference_is_returnns_per_rank_seed():
    """Not vacuous: unsharded, RETURNN's own per-rank offset (which the reference lets RETURNN
    derive) gives each rank another order, and it is the one ShardPlan predicts."""
    keys, sizes = [f"f{i}" for i in range(8)], list(range(8))
    per_rank = PlanSettings(num_shards=2, partition_epoch=1, distrib_shard_files=False, random_seed_offset=3)
    got = returnn_files(keys, sizes, per_rank, num_epochs=1)
    same_seed = per_rank.replace(same_seed_on_all_ranks=True)
    assert got[0] == returnn_files(keys, sizes, same_seed, num_epochs=1)[0]  # rank 0: offset + 0 * stride
    assert got[1] != got[0] and sorted(got[1][0]) == keys
    assert got == [[ShardPlan(keys, sizes, per_rank).files_for(epoch=1, shard_index=r)] for r in range(2)]


@settings(max_examples=examples(100))
@given(plan_cases(), st.integers(0, 5))
def test_each_full_epoch_covers_every_entry_once(case, full):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, PlanSettings(**kwargs))
    p = kwargs["partition_epoch"]
    ranks = range(kwargs["num_shards"])
    for r in [0] if plan.settings.distrib_shard_files else ranks:  # sharded: one layout shared by all ranks
        order, bounds = plan.layout(full_epoch_0idx=full, shard_index=r)
        check_layout(order, bounds, num_files=len(keys), num_bins=plan.settings.num_bins)
    if plan.settings.distrib_shard_files:
        seen = [
            i
            for r in ranks
            for e in range(full * p + 1, (full + 1) * p + 1)
            for i in plan.file_indices_for(epoch=e, shard_index=r).tolist()
        ]
        assert sorted(seen) == list(range(len(keys)))
    again = ShardPlan(keys, sizes, PlanSettings(**kwargs))  # same settings, same plan
    assert [again.files_for(epoch=full * p + 1, shard_index=r) for r in ranks] == [
        plan.files_for(epoch=full * p + 1, shard_index=r) for r in ranks
    ]


def test_duplicate_entries_are_kept():
    keys = ["a", "b", "a", "c", "a", "d"]
    plan = ShardPlan(keys, [5, 1, 5, 2, 5, 3], PlanSettings(num_shards=2, partition_epoch=3))
    got = [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in range(1, 4)]
    assert sorted(sum(got, [])) == sorted(keys)


def test_errors_name_the_value():
    with pytest.raises(ValueError, match=r"5 files cannot fill num_shards\*partition_epoch=2\*3=6 bins"):
        ShardPlan(list("abcde"), [1] * 5, PlanSettings(num_shards=2, partition_epoch=3))
    plan = ShardPlan(list("abcd"), [1] * 4, PlanSettings(num_shards=2, partition_epoch=2))
    with pytest.raises(ValueError, match="epoch=0"):
        plan.files_for(epoch=0, shard_index=0)
    with pytest.raises(ValueError, match="shard_index=2"):
        plan.files_for(epoch=1, shard_index=2)


GOOD = dict(num_shards=2, partition_epoch=2)


@pytest.mark.parametrize(
    "sizes",
    [[1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4.5], ["1", "2", "3", "4"], np.ones(4, dtype=bool), [1, None, 2, 3]],
    ids=["floats", "one-float", "str", "bools", "none"],
)
def test_non_integer_sizes_are_rejected_like_distribute_evenly_by_size(sizes):
    with pytest.raises(TypeError, match=r"costs must be integers \(bytes\), got dtype .* \(entry \d"):
        ShardPlan(list("abcd"), sizes, PlanSettings(**GOOD))
    from i6_shard.core.pure.distribute import distribute_evenly_by_size

    if np.asarray(sizes).dtype.kind == "f":  # the same kind of error from the bin cut itself
        with pytest.raises(TypeError, match="sizes must be integers"):
            distribute_evenly_by_size(np.asarray(sizes), num_bins=4)


def test_negative_and_oversized_sizes_name_the_entry():
    with pytest.raises(ValueError, match=r"entry 2 \('c'\) has -5"):
        ShardPlan(list("abcd"), [1, 2, -5, -1], PlanSettings(**GOOD))
    with pytest.raises(ValueError, match="do not fit int64"):
        ShardPlan(list("abcd"), np.array([1, 2, 2**63, 1], dtype=np.uint64), PlanSettings(**GOOD))
    assert (
        ShardPlan(list("abcd"), np.array([1, 2, 3, 4], dtype=np.uint32), PlanSettings(**GOOD)).costs.dtype == np.int64
    )


def test_keys_must_be_str():
    with pytest.raises(TypeError, match=r"keys\[2\]=3 is a int; keys are tree keys \(str\)"):
        ShardPlan(["a", "b", 3, "d"], [1, 2, 3, 4], PlanSettings(**GOOD))
    with pytest.raises(TypeError, match=r"keys\[0\]=PosixPath"):
        import pathlib

        ShardPlan([pathlib.Path("a"), "b", "c", "d"], [1, 2, 3, 4], PlanSettings(**GOOD))
    assert ShardPlan(np.array(list("abcd")), [1, 2, 3, 4], PlanSettings(**GOOD)).files_for(epoch=1, shard_index=0)


@pytest.mark.parametrize(
    "shard_index, error", [(None, TypeError), (0.5, TypeError), (True, TypeError), (-1, ValueError), (2, ValueError)]
)
def test_shard_index_is_checked(shard_index, error):
    plan = ShardPlan(list("abcd"), [1, 2, 3, 4], PlanSettings(**GOOD))
    for query in (plan.files_for, plan.file_indices_for):
        with pytest.raises(error, match=rf"shard_index={shard_index!r} .*0\.\.1"):
            query(epoch=1, shard_index=shard_index)
    with pytest.raises(TypeError, match="epoch=1.0 has type float; epoch must be a positive int"):
        plan.files_for(epoch=1.0, shard_index=0)


@pytest.mark.parametrize("sharded", [False, True])
def test_going_over_the_ranks_computes_each_layout_once(monkeypatch, sharded):
    calls = []
    cut = ShardPlan._cut

    def counting_cut(self, order, **kwargs):
        calls.append(1)
        return cut(self, order, **kwargs)

    monkeypatch.setattr(ShardPlan, "_cut", counting_cut)
    num_shards, part = 6, 3  # more ranks than a sharded plan keeps layouts
    plan = ShardPlan(
        [f"f{i}" for i in range(40)],
        list(range(40)),
        PlanSettings(num_shards=num_shards, partition_epoch=part, distrib_shard_files=sharded),
    )
    num_full = 4
    for epoch in range(1, num_full * part + 1):  # as a training goes: sub-epoch by sub-epoch, every rank
        for r in range(num_shards):
            plan.files_for(epoch=epoch, shard_index=r)
    assert len(calls) == num_full * (1 if sharded else num_shards)
    assert len(plan._cache) <= (4 if sharded else num_shards)  # memory stays bounded

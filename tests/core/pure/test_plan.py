"""ShardPlan: RETURNN's per-rank file selection re-implemented independently in the test
from RETURNN's own shuffle and _distribute_evenly_by_size, plus invariants and errors."""

from typing import List

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core import PlanSettings, ShardPlan, read_plan_file, save_plan
from i6_shard.core.pure import check_layout

distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")
DFD = distrib_files.DistributeFilesDataset


def returnn_files_for(keys: List[str], sizes: List[int], *, epoch: int, shard_index: int, num_shards: int,
                      partition_epoch: int, seq_ordering: str = "random", random_seed_offset: int = 0,
                      fixed_random_seed=None, distrib_shard_files: bool = True,
                      same_seed_on_all_ranks: bool = False) -> List[str]:
    """What DistributeFilesDataset.init_seq_order picks, written out from its source. Unsharded,
    Dataset._get_default_random_seed_offset adds rank * 16127 to the config's dataset_random_seed_offset,
    unless the dataset sets random_seed_offset itself (same_seed_on_all_ranks)."""
    full = (epoch - 1) // partition_epoch
    files = list(keys)
    if seq_ordering == "random":
        per_rank = not distrib_shard_files and not same_seed_on_all_ranks
        offset = random_seed_offset + shard_index * 16127 if per_rank else random_seed_offset
        seed = fixed_random_seed if fixed_random_seed is not None else full + 1 + offset
        np.random.RandomState(seed).shuffle(files)
    num_bins = num_shards * partition_epoch if distrib_shard_files else partition_epoch
    bins = DFD._distribute_evenly_by_size(num_bins=num_bins, file_sizes=dict(zip(keys, sizes)), files_order=files)
    base = partition_epoch * shard_index if distrib_shard_files else 0
    return bins[base + (epoch - 1) % partition_epoch]


@st.composite
def plan_cases(draw):
    num_shards = draw(st.integers(1, 4))
    partition_epoch = draw(st.integers(1, 4))
    num_files = draw(st.integers(num_shards * partition_epoch, num_shards * partition_epoch + 25))
    sizes = draw(st.lists(st.integers(0, 1000), min_size=num_files, max_size=num_files))
    sharded = draw(st.booleans())
    kwargs = dict(
        num_shards=num_shards, partition_epoch=partition_epoch,
        seq_ordering=draw(st.sampled_from(["random", "random", "default"])),
        random_seed_offset=draw(st.sampled_from([0, 3, 16127])),
        fixed_random_seed=draw(st.sampled_from([None, None, 7])),
        distrib_shard_files=sharded,
        same_seed_on_all_ranks=False if sharded else draw(st.booleans()),
    )
    return [f"/d/file-{i}.hdf" for i in range(num_files)], sizes, kwargs


@settings(max_examples=120)
@given(plan_cases())
def test_files_for_equals_returnn_over_three_full_epochs(case):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, PlanSettings(**kwargs))
    for epoch in range(1, 3 * kwargs["partition_epoch"] + 1):
        for r in range(kwargs["num_shards"]):
            assert plan.files_for(epoch=epoch, shard_index=r) == returnn_files_for(
                keys, sizes, epoch=epoch, shard_index=r, **kwargs)


@settings(max_examples=100)
@given(plan_cases(), st.integers(0, 5))
def test_each_full_epoch_covers_every_entry_once(case, full):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, PlanSettings(**kwargs))
    p = kwargs["partition_epoch"]
    ranks = range(kwargs["num_shards"])
    for r in ([0] if plan.settings.distrib_shard_files else ranks):  # sharded: one layout shared by all ranks
        order, bounds = plan.layout(full_epoch_0idx=full, shard_index=r)
        check_layout(order, bounds, num_files=len(keys), num_bins=plan.settings.num_bins)
    if plan.settings.distrib_shard_files:
        seen = [i for r in ranks for e in range(full * p + 1, (full + 1) * p + 1)
                for i in plan.file_indices_for(epoch=e, shard_index=r).tolist()]
        assert sorted(seen) == list(range(len(keys)))
    again = ShardPlan(keys, sizes, PlanSettings(**kwargs))  # same settings, same plan
    assert [again.files_for(epoch=full * p + 1, shard_index=r) for r in ranks] == \
           [plan.files_for(epoch=full * p + 1, shard_index=r) for r in ranks]


def test_duplicate_entries_and_trees_are_kept():
    keys = ["a", "b", "a", "c", "a", "d"]
    trees = [("a", "x"), "b", ("a", "x"), {"k": "c"}, ("a", "x"), ["d"]]
    plan = ShardPlan(keys, [5, 1, 5, 2, 5, 3], PlanSettings(num_shards=2, partition_epoch=3), trees=trees)
    got = [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in range(1, 4)]
    assert sorted(sum(got, [])) == sorted(keys)
    got_trees = [plan.trees_for(epoch=e, shard_index=r) for r in range(2) for e in range(1, 4)]
    assert [[dict(zip(keys, trees))[k] for k in b] for b in got] == got_trees
    assert ("a", "x") in sum(got_trees, []) and ["d"] in sum(got_trees, [])


def test_iter_epochs_runs_over_ranks_and_the_full_epoch_boundary():
    plan = ShardPlan([f"f{i}" for i in range(12)], list(range(12)), PlanSettings(num_shards=2, partition_epoch=3))
    rows = list(plan.iter_epochs(first_epoch=3, num_epochs=2))
    assert [(e, r) for e, r, _ in rows] == [(3, 0), (3, 1), (4, 0), (4, 1)]
    for e, r, idx in rows:
        assert [plan.keys[i] for i in idx.tolist()] == plan.files_for(epoch=e, shard_index=r)


def test_errors_name_the_value():
    with pytest.raises(ValueError, match=r"5 files cannot fill num_shards\*partition_epoch=2\*3=6 bins"):
        ShardPlan(list("abcde"), [1] * 5, PlanSettings(num_shards=2, partition_epoch=3))
    plan = ShardPlan(list("abcd"), [1] * 4, PlanSettings(num_shards=2, partition_epoch=2))
    with pytest.raises(ValueError, match="epoch=0"):
        plan.files_for(epoch=0, shard_index=0)
    with pytest.raises(ValueError, match="shard_index=2"):
        plan.files_for(epoch=1, shard_index=2)
    with pytest.raises(ValueError, match="seq_ordering='sorted'"):
        ShardPlan(list("abcd"), [1] * 4, PlanSettings(num_shards=1, partition_epoch=1, seq_ordering="sorted"))
    with pytest.raises(ValueError, match="without trees"):
        plan.trees_for(epoch=1, shard_index=0)


def test_plan_file_round_trip_and_numpy_only_reading(tmp_path):
    keys = [f"/data/ü {i}\n.hdf" for i in range(30)]
    sizes = np.random.RandomState(0).randint(0, 100, size=30)
    for unsharded in (False, True):
        plan = ShardPlan(keys, sizes, PlanSettings(num_shards=3, partition_epoch=4, random_seed_offset=5, distrib_shard_files=not unsharded))
        path = tmp_path / f"plan{unsharded}.npz"
        save_plan(plan.with_settings(num_epochs=9), path)
        loaded = read_plan_file(path, verify=True)
        assert loaded.num_epochs == 9 and loaded.plan.keys == keys
        assert loaded.plan.settings.distrib_shard_files is not unsharded
        # Reading with numpy alone, as the file format documents it.
        with np.load(path, allow_pickle=False) as d:
            raw_keys = bytes(d["keys_utf8"]).decode("utf-8", "surrogatepass").split("\0")
            p = int(d["partition_epoch"])
            for epoch in range(1, 10):
                for r in range(3):
                    layout = 0 if bool(d["distrib_shard_files"]) else r
                    b = (r * p if bool(d["distrib_shard_files"]) else 0) + (epoch - 1) % p
                    order = d["orders"][(epoch - 1) // p, layout]
                    bnd = d["bounds"][(epoch - 1) // p, layout]
                    got = [raw_keys[i] for i in order[bnd[b]:bnd[b + 1]].tolist()]
                    assert got == returnn_files_for(keys, sizes.tolist(), epoch=epoch, shard_index=r, num_shards=3,
                                                    partition_epoch=4, random_seed_offset=5,
                                                    distrib_shard_files=not unsharded)


def test_same_seed_on_all_ranks_is_kept_in_the_plan_file_only_when_set(tmp_path):
    keys, sizes = [f"f{i}" for i in range(12)], list(range(12))
    common = dict(num_shards=3, partition_epoch=2, distrib_shard_files=False, random_seed_offset=4)
    for same in (False, True):
        plan = ShardPlan(keys, sizes, PlanSettings(same_seed_on_all_ranks=same, **common))
        save_plan(plan.with_settings(num_epochs=4), tmp_path / f"{same}.npz")
        with np.load(tmp_path / f"{same}.npz") as d:
            assert ("same_seed_on_all_ranks" in d.files) is same  # plans without it keep their old bytes
        loaded = read_plan_file(tmp_path / f"{same}.npz", verify=True)
        assert loaded.plan.settings.same_seed_on_all_ranks is same
        files = [[loaded.plan.files_for(epoch=e, shard_index=r) for e in range(1, 5)] for r in range(3)]
        assert (files[0] == files[1] == files[2]) is same
    with pytest.raises(ValueError, match="same_seed_on_all_ranks=True models distrib_shard_files=False"):
        ShardPlan(keys, sizes, PlanSettings(num_shards=3, partition_epoch=2, same_seed_on_all_ranks=True))


def test_load_plan_rejects_other_files(tmp_path):
    from i6_shard.core import load_plan
    from i6_shard.core.io.npz import save_npz

    save_npz(tmp_path / "x.npz", {"sizes": np.zeros(3, dtype=np.int64)})
    with pytest.raises(ValueError, match="is not a plan file"):
        load_plan(tmp_path / "x.npz")
    with pytest.raises(FileNotFoundError, match="python -m i6_shard plan"):
        load_plan(tmp_path / "missing.npz")


GOOD = dict(num_shards=2, partition_epoch=2)


@pytest.mark.parametrize("sizes", [[1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4.5], ["1", "2", "3", "4"],
                                   np.ones(4, dtype=bool), [1, None, 2, 3]],
                         ids=["floats", "one-float", "str", "bools", "none"])
def test_non_integer_sizes_are_rejected_like_distribute_evenly_by_size(sizes):
    with pytest.raises(TypeError, match=r"costs must be integers \(bytes\), got dtype .* \(entry \d"):
        ShardPlan(list("abcd"), sizes, PlanSettings(**GOOD))
    from i6_shard.core import distribute_evenly_by_size

    if np.asarray(sizes).dtype.kind == "f":  # the same kind of error from the bin cut itself
        with pytest.raises(TypeError, match="sizes must be integers"):
            distribute_evenly_by_size(np.asarray(sizes), num_bins=4)


def test_negative_and_oversized_sizes_name_the_entry():
    with pytest.raises(ValueError, match=r"entry 2 \('c'\) has -5"):
        ShardPlan(list("abcd"), [1, 2, -5, -1], PlanSettings(**GOOD))
    with pytest.raises(ValueError, match="do not fit int64"):
        ShardPlan(list("abcd"), np.array([1, 2, 2**63, 1], dtype=np.uint64), PlanSettings(**GOOD))
    assert ShardPlan(list("abcd"), np.array([1, 2, 3, 4], dtype=np.uint32), PlanSettings(**GOOD)).costs.dtype == np.int64


@pytest.mark.parametrize("name, value, error", [
    ("num_shards", None, TypeError), ("num_shards", True, TypeError), ("num_shards", 2.0, TypeError),
    ("num_shards", 0, ValueError),
    ("partition_epoch", None, TypeError), ("partition_epoch", 1.5, TypeError), ("partition_epoch", -1, ValueError),
    ("random_seed_offset", None, TypeError), ("random_seed_offset", 1.7, TypeError),
    ("random_seed_offset", True, TypeError), ("random_seed_offset", "3", TypeError),
    ("fixed_random_seed", 2.9, TypeError), ("fixed_random_seed", False, TypeError),
    ("distrib_shard_files", 1, TypeError), ("same_seed_on_all_ranks", 1, TypeError),
])
def test_settings_of_the_wrong_type_name_the_parameter(name, value, error):
    with pytest.raises(error, match=rf"^{re.escape(f'{name}={value!r}')} (has type \w+; {name} )?must be "):
        PlanSettings(**{**GOOD, name: value})


def test_numpy_ints_are_ints():
    plan = ShardPlan(list("abcd"), [1, 2, 3, 4], PlanSettings(num_shards=np.int64(2), partition_epoch=np.int32(2), random_seed_offset=np.int64(3), fixed_random_seed=np.uint8(7)))
    s = plan.settings
    assert (s.num_shards, s.random_seed_offset, s.fixed_random_seed) == (2, 3, 7)
    assert all(type(v) is int for v in (s.num_shards, s.partition_epoch, s.random_seed_offset, s.fixed_random_seed))


def test_keys_must_be_str():
    with pytest.raises(TypeError, match=r"keys\[2\]=3 is a int; keys are tree keys \(str\)"):
        ShardPlan(["a", "b", 3, "d"], [1, 2, 3, 4], PlanSettings(**GOOD))
    with pytest.raises(TypeError, match=r"keys\[0\]=PosixPath"):
        import pathlib

        ShardPlan([pathlib.Path("a"), "b", "c", "d"], [1, 2, 3, 4], PlanSettings(**GOOD))
    assert ShardPlan(np.array(list("abcd")), [1, 2, 3, 4], PlanSettings(**GOOD)).files_for(epoch=1, shard_index=0)


@pytest.mark.parametrize("shard_index, error", [(None, TypeError), (0.5, TypeError), (True, TypeError),
                                                (-1, ValueError), (2, ValueError)])
def test_shard_index_is_checked(shard_index, error):
    plan = ShardPlan(list("abcd"), [1, 2, 3, 4], PlanSettings(**GOOD))
    for query in (plan.files_for, plan.file_indices_for):
        with pytest.raises(error, match=rf"shard_index={shard_index!r} .*0\.\.1"):
            query(epoch=1, shard_index=shard_index)
    with pytest.raises(TypeError, match="epoch=1.0 has type float; epoch must be a positive int"):
        plan.files_for(epoch=1.0, shard_index=0)


def test_seed_bounds_are_numpys_and_are_checked_before_numpy_sees_them():
    # numpy's own limits, which RETURNN's shuffle inherits:
    np.random.RandomState(0), np.random.RandomState(2**32 - 1)
    for bad in (-1, 2**32):
        with pytest.raises(ValueError):
            np.random.RandomState(bad)
    keys, sizes = list("abcd"), [1, 2, 3, 4]
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=-1, **GOOD)).layout(full_epoch_0idx=0)  # seed 0
    with pytest.raises(ValueError, match=r"full epoch 0 \(epochs 1..2\) would shuffle with seed -1 "
                                         r"\(full_epoch_0idx \+ 1 \+ random_seed_offset=-2\).*>= -1"):
        ShardPlan(keys, sizes, PlanSettings(random_seed_offset=-2, **GOOD))
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=-5, seq_ordering="default", **GOOD))  # no shuffle: no seed
    for fixed in (-1, 2**32):
        with pytest.raises(ValueError, match=rf"fixed_random_seed={fixed} is a shuffle seed"):
            ShardPlan(keys, sizes, PlanSettings(fixed_random_seed=fixed, **GOOD))
    ShardPlan(keys, sizes, PlanSettings(fixed_random_seed=2**32 - 1, random_seed_offset=2**40, **GOOD)).layout(full_epoch_0idx=9)

    # Seeds grow with the full epoch: the last valid one is 2**32 - 1.
    plan = ShardPlan(keys, sizes, PlanSettings(random_seed_offset=2**32 - 3, **GOOD))
    plan.layout(full_epoch_0idx=1)
    plan.settings.replace(num_epochs=4)  # full epochs 0 and 1
    for call in (lambda: plan.layout(full_epoch_0idx=2), lambda: plan.files_for(epoch=5, shard_index=1),
                 lambda: plan.settings.replace(num_epochs=5)):
        with pytest.raises(ValueError, match=r"full epoch 2 \(epochs 5..6\) would shuffle with seed 4294967296 .*"
                                             r"random_seed_offset=4294967293.*lower random_seed_offset or num_epochs"):
            call()
    with pytest.raises(ValueError, match="full epoch 0 .* with seed 4294967296 .*: lower random_seed_offset$"):
        ShardPlan(keys, sizes, PlanSettings(random_seed_offset=2**32 - 1, **GOOD))

    # Unsharded, rank r adds r*16127: the last rank's seed bounds the offset.
    top = 2**32 - 1 - 3 * 16127 - 1  # full epoch 0 on rank 3 gets seed 2**32 - 1
    unsharded = dict(num_shards=4, partition_epoch=1, distrib_shard_files=False)
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=top, **unsharded)).layout(full_epoch_0idx=0, shard_index=3)
    with pytest.raises(ValueError, match=r"full epoch 0 .*\+ rank\*16127 on rank 3\)"):
        ShardPlan(keys, sizes, PlanSettings(random_seed_offset=top + 1, **unsharded))
    plan = ShardPlan(keys, sizes, PlanSettings(random_seed_offset=top, **unsharded))
    with pytest.raises(ValueError, match=r"full epoch 1 .*\+ rank\*16127 on rank 3"):
        plan.settings.replace(num_epochs=2)
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=top + 1, same_seed_on_all_ranks=True, **unsharded))
    with pytest.raises(ValueError, match="num_epochs=0 must be a positive int"):
        plan.settings.replace(num_epochs=0)


@pytest.mark.parametrize("sharded", [False, True])
def test_going_over_the_ranks_computes_each_layout_once(monkeypatch, sharded):
    calls = []
    cut = ShardPlan._cut

    def counting_cut(self, order):
        calls.append(1)
        return cut(self, order)

    monkeypatch.setattr(ShardPlan, "_cut", counting_cut)
    num_shards, part = 6, 3  # more ranks than a sharded plan keeps layouts
    plan = ShardPlan([f"f{i}" for i in range(40)], list(range(40)), PlanSettings(num_shards=num_shards, partition_epoch=part, distrib_shard_files=sharded))
    num_full = 4
    for epoch in range(1, num_full * part + 1):  # as a training goes: sub-epoch by sub-epoch, every rank
        for r in range(num_shards):
            plan.files_for(epoch=epoch, shard_index=r)
    assert len(calls) == num_full * (1 if sharded else num_shards)
    assert len(plan._cache) <= (4 if sharded else num_shards)  # memory stays bounded

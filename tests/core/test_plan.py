"""ShardPlan: RETURNN's per-rank file selection re-implemented independently in the test
from RETURNN's own shuffle and _distribute_evenly_by_size, plus invariants and errors."""

from typing import List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core import ShardPlan, check_layout, read_plan_file, save_plan

distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="parity tests need returnn (test extra)")
DFD = distrib_files.DistributeFilesDataset


def returnn_files_for(keys: List[str], sizes: List[int], *, epoch: int, shard_index: int, num_shards: int,
                      partition_epoch: int, seq_ordering: str = "random", random_seed_offset: int = 0,
                      fixed_random_seed=None, distrib_shard_files: bool = True) -> List[str]:
    """What DistributeFilesDataset.init_seq_order picks, written out from its source."""
    full = (epoch - 1) // partition_epoch
    files = list(keys)
    if seq_ordering == "random":
        offset = random_seed_offset if distrib_shard_files else random_seed_offset + shard_index * 16127
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
    kwargs = dict(
        num_shards=num_shards, partition_epoch=partition_epoch,
        seq_ordering=draw(st.sampled_from(["random", "random", "default"])),
        random_seed_offset=draw(st.sampled_from([0, 3, 16127])),
        fixed_random_seed=draw(st.sampled_from([None, None, 7])),
        distrib_shard_files=draw(st.booleans()),
    )
    return [f"/d/file-{i}.hdf" for i in range(num_files)], sizes, kwargs


@settings(max_examples=120)
@given(plan_cases())
def test_files_for_equals_returnn_over_three_full_epochs(case):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, **kwargs)
    for epoch in range(1, 3 * kwargs["partition_epoch"] + 1):
        for r in range(kwargs["num_shards"]):
            assert plan.files_for(epoch=epoch, shard_index=r) == returnn_files_for(
                keys, sizes, epoch=epoch, shard_index=r, **kwargs)


@settings(max_examples=100)
@given(plan_cases(), st.integers(0, 5))
def test_each_full_epoch_covers_every_entry_once(case, full):
    keys, sizes, kwargs = case
    plan = ShardPlan(keys, sizes, **kwargs)
    p = kwargs["partition_epoch"]
    ranks = range(kwargs["num_shards"])
    for r in ([0] if plan.distrib_shard_files else ranks):  # sharded: one layout shared by all ranks
        order, bounds = plan.layout(full_epoch_0idx=full, shard_index=r)
        check_layout(order, bounds, num_files=len(keys), num_bins=plan.num_bins)
    if plan.distrib_shard_files:
        seen = [i for r in ranks for e in range(full * p + 1, (full + 1) * p + 1)
                for i in plan.file_indices_for(epoch=e, shard_index=r).tolist()]
        assert sorted(seen) == list(range(len(keys)))
    again = ShardPlan(keys, sizes, **kwargs)  # same settings, same plan
    assert [again.files_for(epoch=full * p + 1, shard_index=r) for r in ranks] == \
           [plan.files_for(epoch=full * p + 1, shard_index=r) for r in ranks]


def test_duplicate_entries_and_trees_are_kept():
    keys = ["a", "b", "a", "c", "a", "d"]
    trees = [("a", "x"), "b", ("a", "x"), {"k": "c"}, ("a", "x"), ["d"]]
    plan = ShardPlan(keys, [5, 1, 5, 2, 5, 3], num_shards=2, partition_epoch=3, trees=trees)
    got = [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in range(1, 4)]
    assert sorted(sum(got, [])) == sorted(keys)
    got_trees = [plan.trees_for(epoch=e, shard_index=r) for r in range(2) for e in range(1, 4)]
    assert [[dict(zip(keys, trees))[k] for k in b] for b in got] == got_trees
    assert ("a", "x") in sum(got_trees, []) and ["d"] in sum(got_trees, [])


def test_iter_epochs_runs_over_ranks_and_the_full_epoch_boundary():
    plan = ShardPlan([f"f{i}" for i in range(12)], list(range(12)), num_shards=2, partition_epoch=3)
    rows = list(plan.iter_epochs(first_epoch=3, num_epochs=2))
    assert [(e, r) for e, r, _ in rows] == [(3, 0), (3, 1), (4, 0), (4, 1)]
    for e, r, idx in rows:
        assert [plan.keys[i] for i in idx.tolist()] == plan.files_for(epoch=e, shard_index=r)


def test_errors_name_the_value():
    with pytest.raises(ValueError, match=r"5 files cannot fill num_shards\*partition_epoch=2\*3=6 bins"):
        ShardPlan(list("abcde"), [1] * 5, num_shards=2, partition_epoch=3)
    plan = ShardPlan(list("abcd"), [1] * 4, num_shards=2, partition_epoch=2)
    with pytest.raises(ValueError, match="epoch=0"):
        plan.files_for(epoch=0, shard_index=0)
    with pytest.raises(ValueError, match="shard_index=2"):
        plan.files_for(epoch=1, shard_index=2)
    with pytest.raises(ValueError, match="seq_ordering='sorted'"):
        ShardPlan(list("abcd"), [1] * 4, num_shards=1, partition_epoch=1, seq_ordering="sorted")
    with pytest.raises(ValueError, match="without trees"):
        plan.trees_for(epoch=1, shard_index=0)


def test_plan_file_round_trip_and_numpy_only_reading(tmp_path):
    keys = [f"/data/ü {i}\n.hdf" for i in range(30)]
    sizes = np.random.RandomState(0).randint(0, 100, size=30)
    for unsharded in (False, True):
        plan = ShardPlan(keys, sizes, num_shards=3, partition_epoch=4, random_seed_offset=5,
                         distrib_shard_files=not unsharded)
        path = tmp_path / f"plan{unsharded}.npz"
        save_plan(plan, path, num_epochs=9)
        loaded = read_plan_file(path, verify=True)
        assert loaded.num_epochs == 9 and loaded.plan.keys == keys
        assert loaded.plan.distrib_shard_files is not unsharded
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


def test_load_plan_rejects_other_files(tmp_path):
    from i6_shard.core import load_plan, save_npz

    save_npz(tmp_path / "x.npz", {"sizes": np.zeros(3, dtype=np.int64)})
    with pytest.raises(ValueError, match="is not a plan file"):
        load_plan(tmp_path / "x.npz")
    with pytest.raises(FileNotFoundError, match="python -m i6_shard plan"):
        load_plan(tmp_path / "missing.npz")

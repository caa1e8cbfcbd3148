"""compare_plans against what the real RETURNN DistributeFilesDataset reads per rank when a training of
8 ranks resumes on 6 (and other counts), against a brute-force count over files_for, and its checks."""

import os
import tempfile
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core.pure import PlanSettings
from i6_shard.core.pure.plan import ShardPlan
from i6_shard.core.pure.compare import compare_plans


def count_resume(old_reads, new_reads, *, keys, planned_reads):
    """Brute force over ``{(epoch, rank): [keys]}`` dicts: read-twice and never-read keys, and per rank
    how many of its new reads repeat an old one and how many of its planned reads nobody makes."""
    before = Counter(k for files in old_reads.values() for k in files)
    after = Counter(k for files in new_reads.values() for k in files)
    twice = sorted(k for k in keys if before[k] and after[k])
    never = sorted(k for k in keys if not before[k] and not after[k])
    twice_per_rank, never_per_rank = Counter(), Counter()
    for (_, rank), files in new_reads.items():
        twice_per_rank[rank] += sum(1 for k in files if before[k])
    for (_, rank), files in planned_reads.items():
        never_per_rank[rank] += sum(1 for k in files if k in never)
    assert all(c == 1 for c in before.values()) and all(c == 1 for c in after.values())  # sharded: once per part
    return twice, never, twice_per_rank, never_per_rank


def check_change(change, old_reads, new_reads, planned_reads, *, keys):
    twice, never, twice_rank, never_rank = count_resume(old_reads, new_reads, keys=keys, planned_reads=planned_reads)
    if not old_reads:  # resumed at a full-epoch boundary
        assert change.at_boundary and not change.affected and twice == never == []
        return
    (full,) = change.affected
    assert sorted(keys[i] for i in full.read_twice) == twice
    assert sorted(keys[i] for i in full.never_read) == never
    num_ranks = max(change.old.num_shards, change.new.num_shards)
    assert full.read_twice_per_rank(num_ranks).tolist() == [twice_rank[r] for r in range(num_ranks)]
    assert full.never_read_per_rank(num_ranks).tolist() == [never_rank[r] for r in range(num_ranks)]
    for (epoch, rank), files in old_reads.items():
        for k in files:
            assert (full.old_rank[keys.index(k)], full.old_epoch[keys.index(k)]) == (rank, epoch)
    for (epoch, rank), files in new_reads.items():
        for k in files:
            assert (full.new_rank[keys.index(k)], full.new_epoch[keys.index(k)]) == (rank, epoch)


def plan_reads(plan, epochs):
    return {(e, r): plan.files_for(epoch=e, shard_index=r) for e in epochs for r in range(plan.num_shards)}


@st.composite
def resume_cases(draw):
    partition_epoch = draw(st.integers(1, 4))
    old_shards, new_shards = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    num_files = draw(st.integers(max(old_shards, new_shards) * partition_epoch, 40))
    sizes = draw(st.lists(st.integers(0, 100), min_size=num_files, max_size=num_files))
    common = dict(
        partition_epoch=partition_epoch,
        seq_ordering=draw(st.sampled_from(["random", "default"])),
        random_seed_offset=draw(st.integers(0, 20)),
    )
    keys = [f"f{i}" for i in range(num_files)]
    old = ShardPlan(
        keys,
        sizes,
        PlanSettings(num_shards=old_shards, distribution=draw(st.sampled_from(["returnn", "balanced"])), **common),
    )
    new = ShardPlan(
        keys,
        sizes,
        PlanSettings(num_shards=new_shards, distribution=draw(st.sampled_from(["returnn", "balanced"])), **common),
    )
    return old, new, draw(st.integers(1, 3 * partition_epoch + 1))


@settings(max_examples=examples(150))
@given(resume_cases())
def test_compare_equals_a_brute_force_count_over_files_for(case):
    old, new, resume = case
    part = old.partition_epoch
    k = (resume - 1) // part
    first, last = k * part + 1, (k + 1) * part
    change = compare_plans(old, new, resume_epoch=resume)
    old_reads = plan_reads(old, range(first, resume))
    check_change(
        change,
        old_reads,
        plan_reads(new, range(resume, last + 1)),
        plan_reads(old, range(resume, last + 1)),
        keys=old.keys,
    )
    # At the boundaries every file is read once: none twice, none never.
    assert [e for e, _ in change.boundaries] == [first] + ([last + 1] if resume != first else [])
    assert all(affected == () for _, affected in change.boundaries)
    if old.settings == new.settings.replace(num_shards=old.num_shards) and old.num_shards == new.num_shards:
        assert all(a.read_twice.size == a.never_read.size == 0 for a in change.affected)  # nothing changed


def test_compare_by_hand():
    # default order, 8 files of 1 byte, 2 sub-epochs: 4 ranks read 1 file per sub-epoch ([a] [b] ... [h];
    # rank r: bins 2r, 2r+1), 2 ranks read 2 ([a b] [c d] [e f] [g h]; rank 0: a b, c d; rank 1: e f, g h).
    keys = list("abcdefgh")
    old = ShardPlan(keys, [1] * 8, PlanSettings(num_shards=4, partition_epoch=2, seq_ordering="default"))
    new = old.with_settings(num_shards=2)
    (full,) = compare_plans(old, new, resume_epoch=2).affected
    # epoch 1 under 4 ranks read a c e g; epoch 2 under 2 ranks reads c d, g h
    assert [keys[i] for i in full.read_twice] == ["c", "g"]
    assert [keys[i] for i in full.never_read] == ["b", "f"]
    assert full.read_twice_per_rank(4).tolist() == [1, 1, 0, 0]
    assert full.never_read_per_rank(4).tolist() == [1, 0, 1, 0]  # b was old rank 0's, f old rank 2's
    assert (full.first_epoch, full.resume_epoch, full.last_epoch) == (1, 2, 2)


def test_compare_rejects_what_it_cannot_compare():
    keys = [f"f{i}" for i in range(8)]
    sharded = ShardPlan(keys, [1] * 8, PlanSettings(num_shards=2, partition_epoch=2))
    with pytest.raises(ValueError, match="unsharded"):
        compare_plans(sharded, sharded.with_settings(distrib_shard_files=False), resume_epoch=2)
    with pytest.raises(ValueError, match="partition_epoch=2 and 4"):
        compare_plans(sharded, sharded.with_settings(partition_epoch=4), resume_epoch=2)
    with pytest.raises(ValueError, match="first difference at entry 3"):
        compare_plans(sharded, ShardPlan(keys[:3] + ["x"] + keys[4:], [1] * 8, sharded.settings), resume_epoch=2)
    with pytest.raises(ValueError, match="resume_epoch=0 must be a positive int"):
        compare_plans(sharded, sharded, resume_epoch=0)
    with pytest.raises(TypeError, match="must be a ShardPlan"):
        compare_plans("plan.npz", sharded, resume_epoch=2)


# --- against the real RETURNN ----------------------------------------------------------------------


def returnn_reads(paths, *, num_shards, partition_epoch, epochs, seed_offset):
    """``{(epoch, rank): [paths]}``: what a fresh DistributeFilesDataset of each rank (RETURNN simulating rank
    r of ``num_shards`` with ``__debug_dummy_distributed_rank_and_size``) hands its sub-epoch dataset in
    ``epochs`` (as a training started, or resumed, at ``epochs[0]``)."""
    from returnn.config import Config, global_config_ctx

    from tests.returnn_ranks import new_dataset, placeholder_sub_epoch_dataset

    out = {}
    for rank in range(num_shards):
        config = Config(
            {"__debug_dummy_distributed_rank_and_size": (rank, num_shards), "dataset_random_seed_offset": seed_offset}
        )
        with global_config_ctx(config):
            dataset = new_dataset(
                paths,
                get_sub_epoch_dataset=placeholder_sub_epoch_dataset,
                partition_epoch=partition_epoch,
                distrib_shard_files=True,
                sharding_fix=True,
                seq_ordering="random",
            )
            assert (dataset._shard_index, dataset._num_shards) == (rank, num_shards)
            for epoch in epochs:
                dataset.init_seq_order(epoch=epoch)
                out[(epoch, rank)] = list(dataset._workers[epoch].dataset_dict["files"])
            dataset.finish_epoch(free_resources=True)
    return out


@settings(max_examples=examples(6))
@given(
    partition_epoch=st.integers(2, 4),
    extra=st.integers(0, 20),
    seed=st.integers(0, 2**16),
    seed_offset=st.integers(0, 9),
    data=st.data(),
)
def test_8_to_6_ranks_agrees_with_what_returnn_reads(partition_epoch, extra, seed, seed_offset, data):
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
    old_shards, new_shards = data.draw(st.sampled_from([(8, 6), (6, 8)]), label="num_shards old, new")
    num_files = 8 * partition_epoch + extra
    resume = data.draw(st.integers(2, 2 * partition_epoch), label="resume_epoch")
    sizes = np.random.RandomState(seed).randint(1, 10_000, size=num_files)
    keys = [f"f{i:03d}" for i in range(num_files)]
    k = (resume - 1) // partition_epoch
    first, last = k * partition_epoch + 1, (k + 1) * partition_epoch
    with tempfile.TemporaryDirectory() as directory:
        paths = [os.path.join(directory, key) for key in keys]
        for path, size in zip(paths, sizes):
            with open(path, "wb") as f:
                f.truncate(int(size))

        def as_keys(reads):
            return {place: [os.path.basename(p) for p in files] for place, files in reads.items()}

        common = dict(partition_epoch=partition_epoch, seed_offset=seed_offset)
        # The old training from epoch 1 up to the resume; the resumed one from the resume to the full epoch's end;
        # and the old one, had it gone on.
        old_all = as_keys(returnn_reads(paths, num_shards=old_shards, epochs=range(1, last + 1), **common))
        new_part = as_keys(returnn_reads(paths, num_shards=new_shards, epochs=range(resume, last + 1), **common))
    old_part = {(e, r): f for (e, r), f in old_all.items() if first <= e < resume}
    planned = {(e, r): f for (e, r), f in old_all.items() if e >= resume}
    settings_ = dict(partition_epoch=partition_epoch, random_seed_offset=seed_offset)
    old = ShardPlan(keys, sizes, PlanSettings(num_shards=old_shards, **settings_))
    new = ShardPlan(keys, sizes, PlanSettings(num_shards=new_shards, **settings_))
    change = compare_plans(old, new, resume_epoch=resume)
    check_change(change, old_part, new_part, planned, keys=keys)
    if old_part:
        (full,) = change.affected
        assert full.read_twice.size + full.never_read.size > 0  # with 8 vs 6 ranks the cut moves

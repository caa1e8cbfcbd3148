"""The verification logic finds every kind of broken sharding, on simulated reads."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.reads import (
    SubEpochRead,
    check_rank_settings,
    check_reads,
    summarize_reads,
)


def _setup(num_files, num_shards, partition_epoch, seed=0):
    rng = np.random.RandomState(seed)
    keys = [f"/data/part-{i:03d}.hdf" for i in range(num_files)]
    sizes = rng.randint(1, 1000, size=num_files)
    plan = ShardPlan(
        keys, sizes, PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch, random_seed_offset=seed)
    )
    tags = {k: [f"{k}/seq{j}" for j in range(1 + rng.randint(0, 4))] for k in keys}
    return plan, tags


def _reads(plan, tags, epochs, *, keep=lambda seqs, rank: seqs):
    """What a rank reads with the given per-rank filter over its files' sequences (reversed order,
    to show that the order of sequences within a sub-epoch does not matter)."""
    out = []
    for e in epochs:
        for r in range(plan.num_shards):
            files = plan.files_for(epoch=e, shard_index=r)
            seqs = [t for f in files for t in tags[f]][::-1]
            out.append(SubEpochRead(e, r, tuple(files), tuple(keep(seqs, r))))
    return out


@settings(max_examples=examples(60))
@given(
    num_files=st.integers(4, 30),
    num_shards=st.integers(1, 4),
    partition_epoch=st.integers(1, 3),
    seed=st.integers(0, 100),
)
def test_faithful_reads_pass(num_files, num_shards, partition_epoch, seed):
    if num_files < num_shards * partition_epoch:
        num_files = num_shards * partition_epoch
    plan, tags = _setup(num_files, num_shards, partition_epoch, seed)
    reads = _reads(plan, tags, range(1, 2 * partition_epoch + 1))
    assert check_reads(reads, plan=plan, file_tags=tags) == []
    assert check_reads(reads, plan=plan) == []


@settings(max_examples=examples(40))
@given(num_shards=st.integers(2, 4), partition_epoch=st.integers(1, 3), seed=st.integers(0, 100))
def test_double_sharding_is_caught(num_shards, partition_epoch, seed):
    # RETURNN without sharding_fix: the sub-epoch dataset shards its sequences again by rank.
    plan, tags = _setup(4 * num_shards * partition_epoch, num_shards, partition_epoch, seed)
    reads = _reads(plan, tags, range(1, partition_epoch + 1), keep=lambda seqs, r: seqs[r::num_shards])
    violations = check_reads(reads, plan=plan, file_tags=tags)
    kinds = {v.kind for v in violations}
    assert "files" not in kinds and "duplicate" not in kinds
    num_all = sum(len(tags[k]) for k in plan.keys)
    num_read = sum(len(r.seq_tags) for r in reads)
    assert num_read < num_all
    missing = [v for v in violations if v.kind == "missing"]
    assert len(missing) == 1 and f"{num_all - num_read} of {num_all} sequences" in missing[0].message
    # Every (sub-epoch, rank) whose files hold more than one sequence lost some.
    lossy = {(r.epoch, r.shard_index) for r in reads if len(r.seq_tags) < sum(len(tags[f]) for f in r.files)}
    assert {(v.epoch, v.shard_index) for v in violations if v.kind == "seqs"} == lossy


def test_wrong_files_are_caught():
    plan, tags = _setup(12, 2, 3)
    reads = _reads(plan, tags, range(1, 4))
    r0 = reads[0]
    other = reads[1].files[0]
    # Rank 0 reads rank 1's first file in addition to its own: the file, its sequences twice.
    bad = SubEpochRead(r0.epoch, r0.shard_index, r0.files + (other,), r0.seq_tags + tuple(tags[other]))
    violations = check_reads([bad] + reads[1:], plan=plan, file_tags=tags)
    assert [(v.kind, v.epoch, v.shard_index) for v in violations] == [("duplicate", None, None), ("files", r0.epoch, 0)]
    assert "1 not planned" in violations[1].message and repr(other) in violations[1].message
    assert f"{len(tags[other])} sequences were read more than once" in violations[0].message
    # The same files in another order is a violation too.
    if len(r0.files) > 1:
        swapped = SubEpochRead(r0.epoch, 0, r0.files[::-1], r0.seq_tags)
        assert [v.kind for v in check_reads([swapped] + reads[1:], plan=plan, file_tags=tags)] == ["files"]


def test_missing_is_only_claimed_for_complete_full_epochs():
    plan, tags = _setup(8, 2, 2)
    reads = _reads(plan, tags, [1])  # only half of full epoch 0
    assert check_reads(reads, plan=plan, file_tags=tags) == []
    summary = summarize_reads(reads, plan=plan, file_tags=tags)
    assert summary["full_epochs"] == [
        {
            "full_epoch_0idx": 0,
            "complete": False,
            "num_seqs_expected": sum(len(t) for t in tags.values()),
            "num_seqs_read": sum(len(r.seq_tags) for r in reads),
            "num_distinct_read": sum(len(r.seq_tags) for r in reads),
        }
    ]
    # A rank that read nothing at all in a complete full epoch.
    reads = _reads(plan, tags, [1, 2], keep=lambda seqs, r: seqs if r == 0 else [])
    kinds = [v.kind for v in check_reads(reads, plan=plan, file_tags=tags)]
    assert kinds == ["missing", "seqs", "seqs"]


def test_unknown_sequences_and_unsharded_rank_settings():
    plan, tags = _setup(4, 2, 1)
    reads = _reads(plan, tags, [1])
    reads[0] = SubEpochRead(1, 0, reads[0].files, reads[0].seq_tags + ("stray",))
    assert [v.kind for v in check_reads(reads, plan=plan, file_tags=tags)] == ["unknown", "seqs"]
    base = {"partition_epoch": 1, "seq_ordering": "random", "random_seed_offset": 0, "fixed_random_seed": None}
    ok = {r: {**base, "num_shards": 2, "shard_index": r} for r in range(2)}
    assert check_rank_settings(ok, num_shards=2) == []
    unsharded = {r: {**base, "num_shards": 1, "shard_index": 0, "random_seed_offset": 16127 * r} for r in range(2)}
    msgs = [str(v) for v in check_rank_settings(unsharded, num_shards=2)]
    assert len(msgs) == 3 and "distrib_shard_files=True" in msgs[0] and "random_seed_offset" in msgs[2]
    assert "no record for ranks [1]" in str(check_rank_settings({0: ok[0]}, num_shards=2)[0])


def test_duplicates_without_file_tags_and_bad_input():
    plan, tags = _setup(4, 2, 1)
    reads = _reads(plan, tags, [1])
    dup = SubEpochRead(1, 1, reads[1].files, reads[1].seq_tags + reads[1].seq_tags[:1])
    violations = check_reads([reads[0], dup], plan=plan)
    assert [v.kind for v in violations] == ["duplicate"]
    assert "by sub-epoch 1 rank 1, sub-epoch 1 rank 1" in violations[0].message
    with pytest.raises(ValueError, match="given twice"):
        check_reads([reads[0], reads[0]], plan=plan)
    with pytest.raises(ValueError, match="outside num_shards=2"):
        check_reads([SubEpochRead(1, 2, (), ())], plan=plan)
    with pytest.raises(ValueError, match="lacks 1 keys"):
        check_reads(reads, plan=plan, file_tags={k: v for k, v in list(tags.items())[1:]})

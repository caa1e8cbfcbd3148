"""Corpora mixed by weight: each corpus read weight x its files per full epoch, the fraction rotating so that every
file is read equally often over the full epochs (±1 at any point), no file twice in a sub-epoch on any rank, the same
seed the same plan; and what cannot work refused with the fix."""

import dataclasses
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core.pure.corpora import Corpora, exact_weight, read_order, separate_repeats
from i6_shard.core.pure.plan import ShardPlan
from i6_shard.core.pure.settings import PlanSettings
from i6_shard.core.pure.stats import check_no_repeat_in_sub_epochs, compute_plan_stats

from tests.strategies import examples

WEIGHTS = st.sampled_from(["1", "2.5", "0.5", "1/3", "2", "1.25", "3"])


@st.composite
def weighted_plans(draw):
    num_corpora = draw(st.integers(1, 3))
    num_shards = draw(st.integers(1, 3))
    partition_epoch = draw(st.integers(4, 6))  # above the weights
    sizes, weights = [], []  # (the first is drawn after the counts)
    for _ in range(num_corpora):
        w = Fraction(draw(WEIGHTS))
        # a file in every full epoch, and more files than a sub-epoch takes reads of the corpus (else no cut can
        # keep a file's reads apart: the refusal is tested below)
        least = max(math.ceil(1 / w), 4 * math.ceil(w) * num_shards * partition_epoch)
        sizes.append(draw(st.integers(least, least + 12)))
        weights.append(str(w))
    num_bins = num_shards * partition_epoch
    total = sum(math.floor(Fraction(w) * n) for w, n in zip(weights, sizes))
    if total < num_bins:  # more files in the first corpus until every bin can be filled
        sizes[0] += math.ceil((num_bins - total) / Fraction(weights[0])) + 1
    sizes[0] += max(0, num_bins - sum(sizes))  # and files enough for the bins (PlanSettings.validate)
    keys = [f"c{c}/f{i}" for c, n in enumerate(sizes) for i in range(n)]
    costs = draw(st.lists(st.integers(100, 1000), min_size=len(keys), max_size=len(keys)))
    plan_settings = PlanSettings(
        num_shards=num_shards,
        partition_epoch=partition_epoch,
        seq_ordering=draw(st.sampled_from(["random", "default"])),
        random_seed_offset=draw(st.integers(0, 50)),
        distribution=draw(st.sampled_from(["returnn", "balanced", "flexible_auto"])),
    )
    corpora = Corpora.of(names=[f"c{c}" for c in range(num_corpora)], sizes=sizes, weights=weights)
    return ShardPlan(keys, costs, plan_settings, corpora=corpora)


@settings(max_examples=examples(40), deadline=None)
@given(plan=weighted_plans(), num_full=st.integers(1, 7))
def test_reads_per_corpus_rotation_and_no_repeat_in_a_sub_epoch(plan, num_full):
    corpora, part = plan.corpora, plan.partition_epoch
    corpus_of = corpora.corpus_of()
    total = np.zeros(plan.num_files, dtype=np.int64)
    for k in range(num_full):
        order, bounds = plan.layout(full_epoch_0idx=k)
        reads = np.bincount(order, minlength=plan.num_files)
        for c in range(corpora.num_corpora):
            n, w = corpora.size(c), corpora.weights[c]
            got = int(reads[corpus_of == c].sum())
            assert got == math.floor((k + 1) * w * n) - math.floor(k * w * n)  # w x files per full epoch, exactly
            assert got >= 1
        check_no_repeat_in_sub_epochs(order, bounds, partition_epoch=part)
        for e in range(k * part + 1, (k + 1) * part + 1):  # the same through the ranks' files
            files = [f for r in range(plan.num_shards) for f in plan.files_for(epoch=e, shard_index=r)]
            assert len(files) == len(set(files))
        total += reads
        for c in range(corpora.num_corpora):  # every file of a corpus read equally often so far, ±1
            mine = total[corpus_of == c]
            assert int(mine.max()) - int(mine.min()) <= 1
            assert int(mine.sum()) == math.floor((k + 1) * corpora.weights[c] * corpora.size(c))


@settings(max_examples=examples(20), deadline=None)
@given(plan=weighted_plans())
def test_the_same_seed_gives_the_same_plan(plan):
    again = ShardPlan(plan.keys, plan.costs, plan.settings, corpora=plan.corpora)
    for k in range(3):
        a, b = plan.layout(full_epoch_0idx=k), again.layout(full_epoch_0idx=k)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_another_seed_rotates_in_another_order():
    corpora = Corpora.of(names=["A", "B"], sizes=[10, 40], weights=[1, "1.5"])
    keys = [f"k{i}" for i in range(50)]
    reads = [
        ShardPlan(keys, [1] * 50, PlanSettings(num_shards=2, partition_epoch=3, random_seed_offset=s), corpora=corpora)
        .reads(full_epoch_0idx=0)
        .tolist()
        for s in (0, 1)
    ]
    assert reads[0] != reads[1] and sum(reads[0]) == sum(reads[1]) == 10 + 60


def test_the_issues_example_over_six_full_epochs():
    """A weight 1, B weight 2.5: every A file once per full epoch, B's reads 2.5 x its files, and over 6 full epochs
    every B file exactly 15 times, no file twice in a sub-epoch."""
    corpora = Corpora.of(names=["A", "B"], sizes=[12, 7], weights=[1, 2.5])
    keys = [f"A/{i}" for i in range(12)] + [f"B/{i}" for i in range(7)]
    costs = np.random.RandomState(0).randint(100, 1000, size=19)
    plan = ShardPlan(
        keys,
        costs,
        PlanSettings(num_shards=2, partition_epoch=3, num_epochs=18, distribution="balanced"),
        corpora=corpora,
    )
    stats = compute_plan_stats(plan, num_epochs=18)
    assert stats.passes[:12].tolist() == [6] * 12 and stats.passes[12:].tolist() == [15] * 7
    per_full_epoch = [int(plan.reads(full_epoch_0idx=k)[12:].sum()) for k in range(6)]
    assert per_full_epoch == [17, 18, 17, 18, 17, 18]  # 2.5 x 7 = 17.5: the fraction alternates


def test_a_plan_without_corpora_is_unchanged():
    keys, costs = [f"f{i}" for i in range(20)], list(range(1, 21))
    settings_ = PlanSettings(num_shards=2, partition_epoch=2, distribution="balanced")
    plain = ShardPlan(keys, costs, settings_)
    one = ShardPlan(keys, costs, settings_, corpora=Corpora.of(names=["all"], sizes=[20], weights=[1]))
    for k in range(2):  # a weight of 1 reads every file once, but in a shuffle of reads: not the same bins
        assert sorted(plain.layout(full_epoch_0idx=k)[0]) == sorted(one.layout(full_epoch_0idx=k)[0])
    assert plain.reads(full_epoch_0idx=0).tolist() == [1] * 20


@pytest.mark.parametrize(
    "sizes, weights, partition_epoch, keys, match",
    [
        ([4, 4], [1, -1], 3, None, r"weights\[1\] \(B\)=-1 is negative.*give a weight >= 0"),
        ([4, 3], [1, 0.25], 3, None, r"corpus 'B' has 3 files at weight 0.25.*give it a weight >= 1/3"),
        (
            [4, 4],
            [1, 4],
            3,
            None,
            r"reads a file 4 times.*more than its partition_epoch=3 sub-epochs.*give partition_epoch > 4, or a weight below 3",
        ),
        ([4, 4], [1, 2], 3, list("abcdeafg"), r"file 'a' is in corpus 'A' \(weight 1\) and again in 'B' \(weight 2"),
        ([4, 4], [2, 2], 3, list("abcdeafg"), r"file 'a' is in corpora 'A' and 'B': list it in one"),
        ([9, 9], [1, 3], 3, None, r"in every one of its partition_epoch=3 sub-epochs"),
        ([4, 3], [1, 0.5], 3, None, r"5 reads in some full epoch, fewer than the num_shards\*partition_epoch=6 bins"),
    ],
)
def test_what_cannot_work_is_refused_with_the_fix(sizes, weights, partition_epoch, keys, match):
    keys = keys or [f"k{i}" for i in range(sum(sizes))]
    with pytest.raises(ValueError, match=match):
        corpora = Corpora.of(names=["A", "B"], sizes=sizes, weights=weights)
        ShardPlan(keys, [1] * len(keys), PlanSettings(num_shards=2, partition_epoch=partition_epoch), corpora=corpora)


def test_a_sub_epoch_of_more_reads_than_files_is_refused():
    # sub-epoch 0 takes three reads of two files: no swap helps
    with pytest.raises(ValueError, match="no swap puts its reads in different sub-epochs: lower the weights"):
        separate_repeats(
            np.array([0, 0, 1, 1]), np.array([1, 1, 1, 1]), np.array([0, 3, 4]), num_shards=1, partition_epoch=2
        )


def test_weights_are_exact_and_unsharded_is_refused():
    assert exact_weight(0.1, name="w") == Fraction(1, 10) and exact_weight("2/3", name="w") == Fraction(2, 3)
    with pytest.raises(TypeError, match="not a number"):
        exact_weight(True, name="w")
    corpora = Corpora.of(names=["A"], sizes=[8], weights=[2])
    with pytest.raises(ValueError, match="weights need a sharded plan"):
        ShardPlan(
            [f"k{i}" for i in range(8)],
            [1] * 8,
            PlanSettings(num_shards=2, partition_epoch=2).replace(distrib_shard_files=False),
            corpora=corpora,
        )


def test_separating_keeps_every_read_and_the_bin_sizes():
    rng = np.random.RandomState(3)
    reads = np.array([3, 3, 1, 2, 1, 1, 3, 1])
    order = read_order(reads, seed=4)
    bounds = np.array([0, 3, 5, 8, 11, 13, 15])  # 2 ranks x 3 sub-epochs
    costs = rng.randint(1, 50, size=len(reads))[order]
    perm = separate_repeats(order, costs, bounds, num_shards=2, partition_epoch=3)
    assert sorted(perm.tolist()) == list(range(len(order)))
    check_no_repeat_in_sub_epochs(order[perm], bounds, partition_epoch=3)
    assert Counter(order[perm].tolist()) == Counter(order.tolist())


def test_reads_of_a_weighted_plan_are_checked_against_its_reads_per_full_epoch():
    from i6_shard.core.pure.reads import SubEpochRead, check_reads, summarize_reads

    corpora = Corpora.of(names=["A", "B"], sizes=[4, 2], weights=[1, 2])
    keys = ["a0", "a1", "a2", "a3", "b0", "b1"]
    plan = ShardPlan(keys, [5, 5, 5, 5, 5, 5], PlanSettings(num_shards=2, partition_epoch=3), corpora=corpora)
    tags = {k: [f"{k}/s{j}" for j in range(2)] for k in keys}
    reads = [
        SubEpochRead(e, r, tuple(f), tuple(t for k in f for t in tags[k]))
        for e in (1, 2, 3)
        for r in (0, 1)
        for f in [plan.files_for(epoch=e, shard_index=r)]
    ]
    assert check_reads(reads, plan=plan, file_tags=tags) == []  # each B file's sequences twice: as planned
    (full,) = summarize_reads(reads, plan=plan, file_tags=tags)["full_epochs"]
    assert full["num_seqs_expected"] == full["num_seqs_read"] == 2 * 4 + 2 * 2 * 2
    assert full["corpora_seqs_read"] == {"A": 8, "B": 8}
    first = reads[0]
    short = [dataclasses.replace(first, seq_tags=first.seq_tags[1:])] + reads[1:]  # one sequence not read
    kinds = {v.kind for v in check_reads(short, plan=plan, file_tags=tags)}
    assert kinds == {"seqs", "missing"}

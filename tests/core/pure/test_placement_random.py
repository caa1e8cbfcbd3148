"""Placement stays random: over many full epochs, each file's sub-epoch and rank are as uniform under "balanced" and
"equal_steps" as under RETURNN's cut (chi-square per file), and a file's size says no more about its sub-epoch than
under RETURNN's cut (correlation per full epoch)."""

import numpy as np
import pytest

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.engine_sim import EngineSettings
from i6_shard.core.pure.equal_steps_cut import EqualStepsInputs

W, P, N, FULL_EPOCHS = 2, 3, 48, 120


def _corpus():
    rng = np.random.RandomState(1)
    lengths = [rng.randint(5, 40, size=max(1, int(np.exp(rng.normal(np.log(6), 0.8))))) for _ in range(N)]
    return lengths, [int(x.sum()) for x in lengths]


def _placements(distribution):
    """``(sub, rank, corr)``: per file the count of full epochs in each sub-epoch [N, P] and on each rank [N, W], and
    per full epoch the correlation of the files' size ranks with their sub-epoch index."""
    lengths, sizes = _corpus()
    keys = [f"f{i:02d}" for i in range(N)]
    inputs = EqualStepsInputs(lengths, EngineSettings(batch_size=60, max_seqs=4))
    settings = PlanSettings(num_shards=W, partition_epoch=P, distribution=distribution, num_epochs=FULL_EPOCHS * P)
    plan = ShardPlan(keys, sizes, settings, equal_steps=inputs if distribution == "equal_steps" else None)
    idx = {k: i for i, k in enumerate(keys)}
    size_rank = np.argsort(np.argsort(sizes, kind="stable"), kind="stable")
    sub, rank, corr = np.zeros((N, P)), np.zeros((N, W)), []
    for k in range(FULL_EPOCHS):
        where = np.zeros(N)
        for s in range(P):
            for r in range(W):
                for key in plan.files_for(epoch=k * P + s + 1, shard_index=r):
                    sub[idx[key], s] += 1
                    rank[idx[key], r] += 1
                    where[idx[key]] = s
        corr.append(np.corrcoef(size_rank, where)[0, 1])
    return sub, rank, np.asarray(corr)


def _chi_square(counts):
    expected = counts.sum(axis=1, keepdims=True) / counts.shape[1]
    return ((counts - expected) ** 2 / expected).sum(axis=1)


@pytest.fixture(scope="module")
def returnns():
    return _placements("returnn")


@pytest.mark.parametrize("distribution", ["balanced", pytest.param("equal_steps", marks=pytest.mark.slow)])
def test_each_files_sub_epoch_and_rank_are_as_uniform_as_under_returnns_cut(returnns, distribution):
    sub, rank, corr = _placements(distribution)
    ref_sub, ref_rank, ref_corr = returnns
    assert (sub.sum(axis=1) == FULL_EPOCHS).all() and (rank.sum(axis=1) == FULL_EPOCHS).all()  # once per full epoch
    for got, ref, what in (
        (_chi_square(sub), _chi_square(ref_sub), "sub-epoch"),
        (_chi_square(rank), _chi_square(ref_rank), "rank"),
    ):
        # under uniform placement a file's statistic has mean df (P - 1 or W - 1); a file pinned to a sub-epoch
        # or rank would reach FULL_EPOCHS * df
        assert got.mean() <= 1.5 * ref.mean() + 0.5, (what, got.mean(), ref.mean())
        assert got.max() <= 2 * ref.max() + 5, (what, got.max(), ref.max())
    assert abs(corr.mean()) <= abs(ref_corr.mean()) + 0.05, (corr.mean(), ref_corr.mean())

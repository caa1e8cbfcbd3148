"""Epoch accounting agrees with what the shard plan actually hands out, in both modes."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core.pure.epochs import num_epochs_for_passes, passes_for_num_epochs, passes_per_full_epoch


@settings(max_examples=examples(40))
@given(
    num_shards=st.integers(1, 4),
    partition_epoch=st.integers(1, 4),
    num_full_epochs=st.integers(1, 3),
    distrib_shard_files=st.booleans(),
    seed=st.integers(0, 10),
)
def test_passes_match_reads_in_plan(num_shards, partition_epoch, num_full_epochs, distrib_shard_files, seed):
    num_files = num_shards * partition_epoch + 3
    sizes = np.random.RandomState(seed).randint(1, 100, size=num_files)
    plan = ShardPlan(
        [f"f{i}" for i in range(num_files)],
        sizes,
        PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch, distrib_shard_files=distrib_shard_files),
    )
    num_epochs = num_full_epochs * partition_epoch
    reads = np.zeros(num_files, dtype=np.int64)
    for epoch in range(1, num_epochs + 1):
        for rank in range(num_shards):
            np.add.at(reads, plan.file_indices_for(epoch=epoch, shard_index=rank), 1)
    # Every file is read equally often; that count is the number of passes.
    assert len(set(reads.tolist())) == 1
    passes = int(reads[0])
    kwargs = dict(partition_epoch=partition_epoch, num_shards=num_shards, distrib_shard_files=distrib_shard_files)
    assert passes_for_num_epochs(num_epochs, **kwargs) == passes
    assert num_epochs_for_passes(passes, **kwargs) == num_epochs


@given(
    num_epochs=st.integers(1, 500),
    partition_epoch=st.integers(1, 50),
    num_shards=st.integers(1, 16),
    distrib_shard_files=st.booleans(),
)
def test_round_trip(num_epochs, partition_epoch, num_shards, distrib_shard_files):
    kwargs = dict(partition_epoch=partition_epoch, num_shards=num_shards, distrib_shard_files=distrib_shard_files)
    passes = passes_for_num_epochs(num_epochs, **kwargs)
    assert isinstance(passes, Fraction)
    assert num_epochs_for_passes(passes, **kwargs) == num_epochs


def test_modes_differ_by_num_shards():
    # 8 GPUs, P=10: sharded, 10 sub-epochs are one pass; unsharded, each rank makes one pass.
    assert num_epochs_for_passes(1, partition_epoch=10, num_shards=8) == 10
    assert num_epochs_for_passes(8, partition_epoch=10, num_shards=8, distrib_shard_files=False) == 10
    assert passes_per_full_epoch(num_shards=8, distrib_shard_files=False) == 8


def test_float_passes_and_errors():
    assert num_epochs_for_passes(0.5, partition_epoch=20) == 10
    with pytest.raises(ValueError, match=r"use passes=1/3 \(num_epochs=1\) or passes=2/3 \(num_epochs=2\)"):
        num_epochs_for_passes(0.5, partition_epoch=3)
    with pytest.raises(ValueError, match="must be > 0"):
        num_epochs_for_passes(0, partition_epoch=3)
    with pytest.raises(TypeError, match="must be a number"):
        num_epochs_for_passes("2", partition_epoch=3)
    with pytest.raises(ValueError, match="partition_epoch=0"):
        passes_for_num_epochs(3, partition_epoch=0)
    with pytest.raises(ValueError, match="num_shards=0"):
        passes_for_num_epochs(3, partition_epoch=1, num_shards=0)

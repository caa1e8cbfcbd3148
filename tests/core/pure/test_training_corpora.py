"""Per corpus in the training report: the frames of the files each rank was given (once per read), their share beside
the plan's, and an alarm where a sub-epoch's share is off the plan."""

import numpy as np

from i6_shard.core.pure.corpora import Corpora
from i6_shard.core.pure.plan import ShardPlan
from i6_shard.core.pure.settings import PlanSettings
from i6_shard.core.pure.training_corpora import corpora_contributions, expected_reads_by_key


def _plan():
    keys = [f"A{i}" for i in range(8)] + [f"B{i}" for i in range(4)]
    corpora = Corpora.of(names=["A", "B"], sizes=[8, 4], weights=[1, 2])
    settings = PlanSettings(num_shards=2, partition_epoch=3, num_epochs=6, distribution="balanced")
    lengths = {k: (2, 10 + 5 * i) for i, k in enumerate(keys)}
    return ShardPlan(keys, [lengths[k][1] for k in keys], settings, corpora=corpora), lengths


def test_the_plans_reads_give_the_planned_shares_and_no_alarm():
    plan, lengths = _plan()
    epochs = list(range(1, 7))
    read = [[plan.files_for(epoch=e, shard_index=r) for r in range(2)] for e in epochs]
    consumed = [[100, None] for _ in epochs]
    entries, alarms = corpora_contributions(
        plan, epochs=epochs, read_keys=read, consumed_frames=consumed, lengths=lengths
    )
    assert alarms == []
    a, b = entries
    assert a["share"] == a["planned_share"] and b["share"] == b["planned_share"]
    assert sum(a["reads"]) == 2 * 8 and sum(b["reads"]) == 2 * 2 * 4  # weight 2: every B file twice per full epoch
    frames_b = sum(lengths[k][1] for k in plan.keys[8:])
    assert sum(b["frames_read"]) == 2 * 2 * frames_b  # a repeated file's frames once per read
    rank0 = [sum(lengths[k][1] for k in read[i][0]) for i in range(6)]
    a0 = [sum(lengths[k][1] for k in read[i][0] if k.startswith("A")) for i in range(6)]
    assert a["consumed_frames"] == [round(100 * x / t) for x, t in zip(a0, rank0)]  # rank 0's split by share


def test_files_other_than_planned_are_an_alarm_naming_the_corpus():
    plan, lengths = _plan()
    epochs = list(range(1, 4))
    read = [[plan.files_for(epoch=e, shard_index=r) for r in range(2)] for e in epochs]
    read[1][0] = [k for k in read[1][0] if not k.startswith("B")] or ["A0"]  # rank 0 read no B file in sub-epoch 2
    entries, alarms = corpora_contributions(
        plan, epochs=epochs, read_keys=read, consumed_frames=[[None, None]] * 3, lengths=lengths
    )
    assert len(alarms) == 1 and "sub-epoch 2: corpus 'A'" in alarms[0] and "planned" in alarms[0]
    assert entries[0]["consumed_frames"] == [0, 0, 0]


def test_expected_reads_follow_the_weights():
    plan, _ = _plan()
    expected = expected_reads_by_key(plan, full_epoch_0idx=0)
    assert [expected[f"A{i}"] for i in range(8)] == [1] * 8 and [expected[f"B{i}"] for i in range(4)] == [2] * 4
    assert np.array_equal(plan.reads(full_epoch_0idx=1), plan.reads(full_epoch_0idx=0))

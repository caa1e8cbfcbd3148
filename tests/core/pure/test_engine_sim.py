"""Invariants of the simulated train loop (:func:`steps_taken`): grad sync stops every rank with the first, param
sync at the next sync after ``param_sync_step * accum_grad_multiple_step`` steps (the drop model's ``sync_stop``), and
sync levels keep a node's grad group together."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core.pure.batching import sync_stop
from i6_shard.core.pure.engine_sim import EngineSettings, inexact_reason, simulate_sub_epoch, steps_taken
from tests.strategies import examples

batches_st = st.lists(st.integers(0, 40), min_size=1, max_size=6)


@settings(max_examples=examples(300), deadline=None)
@given(num_batches=batches_st, accum=st.integers(1, 4), reduce_type=st.sampled_from(["grad", "grad_explicit"]))
def test_grad_sync_stops_every_rank_with_the_first(num_batches, accum, reduce_type):
    got = steps_taken(num_batches, torch_distributed={"reduce_type": reduce_type}, accum_grad_multiple_step=accum)
    assert got == [min(num_batches)] * len(num_batches)


@settings(max_examples=examples(300), deadline=None)
@given(num_batches=batches_st, accum=st.integers(1, 4), param_sync_step=st.integers(1, 6))
def test_param_sync_runs_on_to_the_next_sync(num_batches, accum, param_sync_step):
    got = steps_taken(
        num_batches,
        torch_distributed={"reduce_type": "param", "param_sync_step": param_sync_step},
        accum_grad_multiple_step=accum,
    )
    stop = int(sync_stop(np.array([min(num_batches)]), sync_every=param_sync_step * accum)[0])
    assert got == [min(n, stop) for n in num_batches]


def test_callable_accumulation_syncs_every_step():
    assert steps_taken(
        [3, 8], torch_distributed={"reduce_type": "param", "param_sync_step": 4}, accum_grad_multiple_step=None
    ) == [3, 3]


def test_node_grad_level_keeps_each_node_together():
    """4 ranks, 2 per node: grad sync within a node, param sync over the world every 4 updates. Node 0's first rank
    runs out after 5 steps: node 0 stops there together, node 1 runs on to the world sync after step 7 (index)."""
    sync = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]}
    assert steps_taken([5, 9, 20, 30], torch_distributed=sync, ranks_per_node=2) == [5, 5, 7, 7]
    assert steps_taken([20, 30, 5, 9], torch_distributed=sync, ranks_per_node=2) == [7, 7, 5, 5]


def test_filter_and_consumption():
    """max_seq_length drops the long sequence; every rank stops at the first rank's 2 steps under grad sync."""
    engine = EngineSettings(seq_ordering="default", max_seqs=1, max_seq_length=10)
    sim = simulate_sub_epoch(
        [np.array([4, 50, 4, 4]), np.array([3, 3])], engine=engine, full_epoch_0idx=0, random_seed_offset=0
    )
    assert (sim.steps_exact, sim.steps_taken, sim.frames_consumed, sim.seqs_consumed) == (
        [3, 2],
        [2, 2],
        [8, 6],
        [2, 2],
    )
    # the filter's 50 frames are removed, not dropped: the drop is of the 18 frames it keeps
    assert round(sim.dropped_fraction, 6) == round(1 - 14 / 18, 6)
    assert round(sim.filtered_fraction, 6) == round(50 / 68, 6)


def test_inexact_reasons():
    assert inexact_reason(EngineSettings(max_seqs=4), num_ranks=2) is None
    assert "batch_size or max_seqs" in inexact_reason(EngineSettings(), num_ranks=2)
    node = {"sync": [{"group": "node", "type": "grad"}]}
    assert "ranks_per_node" in inexact_reason(EngineSettings(max_seqs=4, torch_distributed=node), num_ranks=2)
    assert "workers" in inexact_reason(EngineSettings(max_seqs=4, inexact=("2 DataLoader workers",)), num_ranks=2)


_LEVEL = st.fixed_dictionaries(
    {"group": st.sampled_from(["world", "node"]), "type": st.sampled_from(["grad", "param"])},
    optional={"every": st.integers(1, 4)},
)


@settings(max_examples=examples(300), deadline=None)
@given(
    num_batches=st.lists(st.integers(0, 40), min_size=4, max_size=4),
    accum=st.integers(1, 3),
    sync=st.one_of(
        st.sampled_from([{}, {"reduce_type": "grad_explicit"}, {"reduce_type": "param", "param_sync_step": 3}]),
        # nested groups, inner to outer, as RETURNN's levels are: node levels inside world levels
        st.lists(_LEVEL, min_size=1, max_size=3).map(
            lambda levels: {"sync": sorted(levels, key=lambda lv: lv["group"] == "world")}
        ),
    ),
)
def test_the_one_rule_of_ranks_stopping_together_is_the_simulated_train_loops(num_batches, accum, sync):
    """ranks_stop_together (what the comparison of a plan with a training and the reader's sync mode take) holds
    where the simulated loop stops every rank with the first, for any batches: a world grad level stops them together
    wherever it stands among the levels."""
    from i6_shard.core.pure.engine_sim import ranks_stop_together

    got = steps_taken(num_batches, torch_distributed=sync, accum_grad_multiple_step=accum, ranks_per_node=2)
    if ranks_stop_together(sync):
        assert got == [min(num_batches)] * 4, (sync, num_batches, got)
    elif not any(lv["group"] == "world" and lv.get("every", 1) * accum == 1 for lv in sync.get("sync", [])):
        # some batches let a rank run on past the first one out (a world param sync after every step stops them
        # together too, but only with its accumulation, which the rule of torch_distributed alone does not count)
        ran = [
            steps_taken([n, 40, 40, 40], torch_distributed=sync, accum_grad_multiple_step=accum, ranks_per_node=2)
            for n in (5, 6, 7)
        ]
        assert any(r != [n] * 4 for n, r in zip((5, 6, 7), ran)), (sync, ran)

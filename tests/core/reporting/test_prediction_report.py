"""The report's predicted-loss section shows the expected steps of every rank beside the sub-epoch's
predicted drop, worst sub-epochs first: where the ranks' steps differ, the drop follows."""

import pytest

from tests.deps import needs_matplotlib

from i6_shard.core.reporting.prediction import render_prediction


def _summary(steps, dropped):
    return {
        "unit": "frames",
        "dropped_fraction": 0.2,
        "dropped_fraction_predicted": sum(dropped) / len(dropped),
        "dropped_fraction_predicted_max": max(dropped),
        "sync": {"reduce_type": "grad", "param_sync_step": None},
        "batching": {
            "batch_size": 1000,
            "max_seqs": None,
            "floor_mean": 0.01,
            "steps_per_rank": {"min": 1.0, "mean": 2.0, "max": 3.0},
            "per_sub_epoch": {"steps": steps, "dropped_fraction": dropped, "floor": [0.0] * len(steps)},
        },
    }


def _table(lines):
    start = lines.index("  expected steps per rank, worst sub-epochs first:")
    return [line.split() for line in lines[start + 1 :]]


def test_steps_per_rank_are_shown_worst_sub_epoch_first():
    steps = [[10.0, 10.04, 9.96], [12.0, 6.5, 9.25], [8.0, 8.0, 7.0]]
    table = _table(render_prediction(_summary(steps, [0.01, 0.3, 0.05])))
    assert table == [
        ["epoch", "r0", "r1", "r2", "dropped"],
        ["2", "12.0", "6.5", "9.2", "30.00%"],
        ["3", "8.0", "8.0", "7.0", "5.00%"],
        ["1", "10.0", "10.0", "10.0", "1.00%"],
    ]


def test_many_ranks_and_sub_epochs_are_bounded():
    """Above 8 ranks the table gives each sub-epoch's min and max steps; at most 5 sub-epochs are shown."""
    steps = [[float(e + r) for r in range(16)] for e in range(9)]
    dropped = [e / 100 for e in range(9)]
    table = _table(render_prediction(_summary(steps, dropped)))
    assert table[0] == ["epoch", "min", "max", "dropped"]
    assert table[1:] == [[str(e + 1), f"{e:.1f}", f"{e + 15:.1f}", f"{e:.2f}%"] for e in (8, 7, 6, 5, 4)]


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@needs_matplotlib
@pytest.mark.slow
def test_the_plot_of_a_plan_with_a_prediction_has_a_steps_panel(tmp_path):
    """With a prediction the plot gains a panel of every rank's expected steps (a taller picture); a
    prediction over other sub-epochs than the stats is refused, naming both shapes."""
    from i6_shard import core
    from i6_shard.core.io.demo import lognormal_sizes
    from i6_shard.core.reporting.outputs import plan_summary
    from i6_shard.core.reporting.plot import plot_plan

    keys = [f"/c/{i}.hdf" for i in range(24)]
    frames = lognormal_sizes(24, seed=3, median_bytes=2000)
    plan = core.ShardPlan(keys, frames, core.PlanSettings(num_shards=4, partition_epoch=3, num_epochs=6, unit="frames"))
    summary, stats = plan_summary(plan, num_epochs=6)
    steps = [[1.0 + e + r for r in range(4)] for e in range(6)]
    prediction = {"per_sub_epoch": {"steps": steps, "dropped_fraction": [0.1] * 6, "floor": [0.0] * 6}}
    plot_plan(stats, tmp_path / "without.png")
    plot_plan(stats, tmp_path / "with.png", prediction=prediction)
    (w0, h0), (w1, h1) = _png_size(tmp_path / "without.png"), _png_size(tmp_path / "with.png")
    assert w0 == w1 and h1 > h0 + 150, (h0, h1)
    bad = {"per_sub_epoch": {**prediction["per_sub_epoch"], "steps": steps[:5]}}
    with pytest.raises(ValueError, match=r"the prediction has steps of shape \[5, 4\], the stats 6 sub-epochs of 4"):
        plot_plan(stats, tmp_path / "bad.png", prediction=bad)
    assert not (tmp_path / "bad.png").exists()

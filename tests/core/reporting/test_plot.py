"""The pictures: the plan plot's legends cover no bar, the distribution of file costs marks the files above a rank's
share, and the picture of a change of plan shows per rank what is read twice and never."""

import numpy as np
import pytest

from tests.deps import needs_matplotlib

from i6_shard import core
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.pure.compare import compare_plans
from i6_shard.core.reporting import plot as plot_module
from i6_shard.core.reporting.plan_change import change_summary

pytestmark = needs_matplotlib


def _rising_stats(num_epochs: int):
    """Stats whose last sub-epoch drops the most: the bar the old legend (upper right) sat on."""
    sizes = np.r_[np.full(40, 10), [400, 500, 600, 700]]
    plan = core.ShardPlan(
        [f"f{i}" for i in range(sizes.size)],
        sizes,
        core.PlanSettings(num_shards=4, partition_epoch=2, num_epochs=num_epochs, seq_ordering="default"),
    )
    stats = compute_plan_stats(plan, num_epochs=num_epochs)
    stats.bytes[-1] = [1, 1, 1, 1000]  # the tallest bar is the last one
    assert stats.dropped_fraction.argmax() == num_epochs - 1
    return stats


@pytest.mark.parametrize(
    "num_epochs", [8, pytest.param(300, marks=pytest.mark.slow)]
)  # bars, and the filled area of long plans
def test_the_legend_covers_no_bar(num_epochs):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    stats = _rising_stats(num_epochs)
    fig = plot_module.plan_figure(stats, title="t")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    ax_drop = fig.axes[1]
    legend = ax_drop.get_legend().get_window_extent(canvas.get_renderer())
    # The legend's lower edge, in the panel's data units (dropped %), lies above every bar.
    legend_bottom = ax_drop.transData.inverted().transform((legend.x0, legend.y0))[1]
    assert legend_bottom > 100 * stats.dropped_fraction.max()
    assert legend.y1 <= ax_drop.get_window_extent(canvas.get_renderer()).y1 + 1  # and inside its panel


def test_the_distribution_marks_the_files_above_a_ranks_share(tmp_path):
    costs = np.r_[np.full(30, 100), [5000, 9000]]  # share = 17,000 / (2 * 4) = 2,125: two files above
    fig_path = tmp_path / "d.png"
    plot_module.plot_cost_distribution(costs, fig_path, unit="frames", num_shards=2, partition_epoch=4)
    assert fig_path.read_bytes()[:4] == b"\x89PNG"
    captured = {}
    real = plot_module._save
    plot_module._save = lambda fig, path: captured.setdefault("fig", fig)
    try:
        plot_module.plot_cost_distribution(costs, fig_path, unit="frames", num_shards=2, partition_epoch=4)
    finally:
        plot_module._save = real
    ax = captured["fig"].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "above a rank's share (2)" in labels and "files (30)" in labels
    assert "a rank's share: 2,125" in labels
    (markers,) = [line for line in ax.lines if line.get_marker() == "v"]
    assert sorted(markers.get_xdata().tolist()) == [5000, 9000]
    with pytest.raises(ValueError, match="give both num_shards and partition_epoch"):
        plot_module.plot_cost_distribution(costs, fig_path, unit="frames", num_shards=2)


def test_the_change_picture_shows_each_ranks_files(tmp_path):
    keys = [f"f{i:02d}" for i in range(48)]
    sizes = np.random.RandomState(0).randint(1, 100, size=48)
    old, new = (
        core.ShardPlan(keys, sizes, core.PlanSettings(num_shards=n, partition_epoch=3, num_epochs=9)) for n in (8, 6)
    )
    summary = change_summary(compare_plans(old, new, resume_epoch=5))
    captured = {}
    real = plot_module._save
    plot_module._save = lambda fig, path: captured.setdefault("fig", fig)
    try:
        plot_module.plot_plan_change(summary, tmp_path / "c.png")
    finally:
        plot_module._save = real
    (ax,) = captured["fig"].axes
    (full,) = summary["full_epochs"]
    heights = {}
    for container, label in zip(ax.containers, ax.get_legend_handles_labels()[1]):
        heights[label] = [int(bar.get_height()) for bar in container]
    assert heights["read twice"] == [r["read_twice"] for r in full["per_rank"]]
    assert heights["never read"] == [r["never_read"] for r in full["per_rank"]]
    assert heights["files after the resume (new plan)"][6:] == [0, 0]  # ranks 6 and 7 are gone
    assert f"{full['read_twice']:,} of 48 files read twice" in ax.get_title(loc="left")
    with pytest.raises(ValueError, match="must end in .png"):
        plot_module.plot_plan_change(summary, tmp_path / "c.svg")

"""The report's unsharded comparison where it is planned on a sample: summary.json and report.txt name the
sample, and its figures are those of the sampled ranks and sub-epochs, counted from files_for."""

import json

import numpy as np

from i6_shard import core
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.core.reporting.outputs import plan_summary
from i6_shard.core.pure import unsharded


def test_a_sampled_unsharded_row_names_its_sample_and_its_figures_are_the_samples(monkeypatch):
    num_files, num_shards, part = 300, 16, 3
    sizes = lognormal_sizes(num_files, seed=1)
    settings = core.PlanSettings(num_shards=num_shards, partition_epoch=part, num_epochs=4 * part)
    plan = core.ShardPlan([f"f{i}" for i in range(num_files)], sizes, settings)
    monkeypatch.setattr(unsharded, "UNSHARDED_EXACT_MAX_ENTRIES", 4 * num_files)  # 4 of the 16 ranks fit
    summary, _ = plan_summary(plan, num_epochs=12)
    row = json.loads(json.dumps(summary))["other_mode"]  # JSON types only
    assert row["sample"] == {"num_ranks": 4, "of_num_ranks": 16, "ranks": [0, 4, 8, 12], "num_epochs": 3,
                             "of_num_epochs": 9}  # fmt: skip
    flipped = plan.with_settings(distrib_shard_files=False)
    table = np.array(
        [[int(sizes[flipped.file_indices_for(epoch=e, shard_index=r)].sum()) for r in (0, 4, 8, 12)] for e in (1, 2, 3)]
    )
    drop = 1 - 4 * table.min(1) / table.sum(1)
    assert abs(row["dropped_fraction"] - drop.mean()) < 1e-6 and abs(row["dropped_fraction_max"] - drop.max()) < 1e-6
    report = core.render_report(summary)
    assert "  returnn, unsharded   ~ " in report
    assert (
        "(~ sampled: every rank reads every file once per full epoch, so 4 evenly spaced ranks of 16 were planned "
        "exactly over sub-epochs 1..3 of 1..9; the figures are those of these 4 ranks alone (with all 16, the first "
        "runs out no later); in a sub-epoch these ranks together read "
    ) in report


def test_an_exact_unsharded_row_names_no_sample():
    settings = core.PlanSettings(num_shards=16, partition_epoch=3, num_epochs=12)
    plan = core.ShardPlan([f"f{i}" for i in range(300)], lognormal_sizes(300, seed=1), settings)
    summary, _ = plan_summary(plan, num_epochs=12)
    assert "sample" not in summary["other_mode"]
    assert "sampled" not in core.render_report(summary)

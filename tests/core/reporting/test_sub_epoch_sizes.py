"""Sub-epoch sizes in plain view: the summary holds each sub-epoch's size over the mean, names the files above a
rank's share as the cause and gives the re-chunk that fixes it; an even corpus gets neither warning nor fix."""

import os

import numpy as np

from i6_shard import core
from i6_shard.core.reporting.report import render_report
from i6_shard.core.reporting.sub_epoch_sizes import sub_epoch_size_ratios


def _summary(tmp_path, sizes, *, num_shards=4, partition_epoch=10, distribution="balanced"):
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(len(sizes))]
    settings = core.PlanSettings(num_shards=num_shards, partition_epoch=partition_epoch, distribution=distribution)
    plan = core.ShardPlan(keys, sizes, settings).with_settings(num_epochs=2 * partition_epoch)
    names = {"plan_path": "plan.npz", "summary_path": "summary.json", "report_path": "report.txt"}
    paths = {k: os.path.join(tmp_path, name) for k, name in names.items()}
    return core.write_plan_outputs(plan, plot_path=None, **paths)


def test_a_big_file_is_named_with_its_fix(tmp_path):
    rng = np.random.RandomState(0)
    sizes = rng.randint(50, 150, size=120).tolist()
    sizes[17] = int(6 * sum(sizes) / 40)  # about 6 shares after it joins the total
    summary = _summary(tmp_path, sizes)
    s = summary["sub_epoch_sizes"]
    table = np.asarray(summary["per_sub_epoch"]["bytes"], dtype=float).sum(axis=1).reshape(2, 10)
    np.testing.assert_allclose(s["per_sub_epoch"], (table / table.mean(axis=1, keepdims=True)).ravel(), atol=1e-6)
    assert s["max"] > 1.2 and s["outside_bound"] > 0 and abs(s["spread"] - (s["max"] - s["min"])) < 1e-5
    assert s["files_above_share"]["keys"][0] == "/corpus/part-017.hdf" and s["largest_file_share"] > 4
    assert (
        s["rechunk"]["num_files"] == 800
        and "rechunk FILE_LIST --num-shards 4 --partition-epoch 10" in (s["rechunk"]["command"])
    )
    report = render_report(summary)
    assert "/corpus/part-017.hdf" in report and "re-chunk into 800 files" in report
    assert any(w.startswith("uneven sub-epochs") and "rechunk" in w for w in summary["warnings"])


def test_an_even_corpus_needs_no_fix(tmp_path):
    summary = _summary(tmp_path, [100] * 800)
    s = summary["sub_epoch_sizes"]
    assert s["outside_bound"] == 0 and s["rechunk"] is None and s["files_above_share"]["count"] == 0
    assert not any(w.startswith("uneven sub-epochs") for w in summary["warnings"])


def test_ratios_cover_complete_full_epochs_only():
    assert sub_epoch_size_ratios([[1, 1], [3, 3], [9, 9]], partition_epoch=2).tolist() == [0.5, 1.5]
    assert sub_epoch_size_ratios([[1, 1]], partition_epoch=2) is None

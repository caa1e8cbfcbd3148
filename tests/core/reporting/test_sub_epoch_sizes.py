"""Sub-epoch sizes in plain view: the summary holds each sub-epoch's size over the mean, names the files above a
rank's share as the cause and gives the re-chunk that fixes it; an even corpus gets neither warning nor fix."""

import json
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


def test_a_plan_in_steps_also_shows_its_sub_epochs_in_frames(tmp_path):
    """The bound of a re-chunked corpus is stated in frames: a plan balanced by steps shows its sub-epochs' frames
    too (from the exact simulation), as the plan file's bins give them."""
    from i6_shard import cli
    from i6_shard.core.io.file_costs import FileCosts, save_file_costs
    from i6_shard.core.pure.batching import Batching
    from i6_shard.core.pure.costs import cost_arrays, sorted_length_quantiles

    rng = np.random.RandomState(3)
    lengths = [rng.randint(20, 300, size=rng.randint(1, 40)).astype(np.int64) for _ in range(160)]
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(len(lengths))]
    batching = Batching(2000, 20)
    arrays = cost_arrays(lengths, unit="steps", batching=batching, names=keys)
    quantiles = sorted_length_quantiles(np.sort(np.concatenate(lengths)))
    costs = FileCosts(keys, arrays["costs"], "steps", arrays["num_seqs"], arrays["num_frames"], quantiles,
                      batching=batching, seq_lengths=arrays["seq_lengths"], batch_lengths="cost_stream")  # fmt: skip
    save_file_costs(costs, tmp_path / "costs.npz")
    out = tmp_path / "plan"
    argv = ["plan", "--sizes", str(tmp_path / "costs.npz"), "--num-shards", "4", "--partition-epoch", "4"]
    argv += ["--num-epochs", "8", "--distribution", "equal_steps", "--no-plot", "-o", str(out)]
    assert cli.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    frames = summary["sub_epoch_sizes"]["frames"]
    with np.load(out / "plan.npz") as npz:
        orders, bounds = npz["orders"].astype(np.int64), npz["bounds"]
    per_file = np.array([int(x.sum()) for x in lengths])
    table = np.array([[per_file[orders[k, 0][bounds[k, 0][r * 4 + s] : bounds[k, 0][r * 4 + s + 1]]].sum()
                       for r in range(4)] for k in range(2) for s in range(4)])  # fmt: skip
    np.testing.assert_allclose(frames["per_sub_epoch"], sub_epoch_size_ratios(table, partition_epoch=4), atol=1e-6)
    assert frames["per_sub_epoch"] != summary["sub_epoch_sizes"]["per_sub_epoch"]  # steps and frames differ
    report = (out / "report.txt").read_text()
    assert "Sub-epoch sizes (each sub-epoch's steps over" in report
    assert f"in frames (simulated): min {frames['min']:.3f}, max {frames['max']:.3f}" in report

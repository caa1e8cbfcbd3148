"""Plan outputs: golden report and summary, byte-identical reruns, the headline numbers
recomputed from the raw table, the distribution comparison, and the plot's optional skip."""

import json
import os
import re

import numpy as np
import pytest

from tests.deps import MATPLOTLIB_REASON, needs_matplotlib

from i6_shard import core
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.reporting.outputs import plan_summary
from i6_shard.core.reporting.report import summarize
from i6_shard.core import PlanSettings, ShardPlan
from i6_shard.core import planning
from i6_shard.core.pure import cut as cut_module
from i6_shard.core.reporting import plot_plan

from ...golden import check_golden


def golden_plan(**kwargs) -> core.ShardPlan:
    keys = [f"/corpus/part-{i:02d}.hdf" for i in range(40)]
    sizes = [((i * 7919) % 997 + 1) * 1000 for i in range(40)]
    kwargs = {"num_shards": 3, "partition_epoch": 4, **kwargs}
    return core.ShardPlan(keys, sizes, core.PlanSettings(**kwargs))


def write_outputs(plan, directory, *, num_epochs=10, plot=False):
    os.makedirs(directory, exist_ok=True)
    paths = {
        k: os.path.join(directory, fn)
        for k, fn in (("plan_path", "plan.npz"), ("summary_path", "summary.json"), ("report_path", "report.txt"))
    }
    summary = core.write_plan_outputs(
        plan.with_settings(num_epochs=num_epochs),
        plot_path=os.path.join(directory, "plot.png") if plot else None,
        **paths,
    )
    return summary, paths


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("sharded", {}),
        ("unsharded", {"distrib_shard_files": False}),
    ],
)
def test_golden_report_and_summary(tmp_path, monkeypatch, name, kwargs):
    # Only RETURNN's distribution, so that other distributions' numbers cannot move these files.
    monkeypatch.setattr(cut_module, "CUTS", {"returnn": cut_module.CUTS["returnn"]})
    summary, paths = write_outputs(golden_plan(**kwargs), str(tmp_path))
    with open(paths["report_path"], encoding="utf-8") as f:
        check_golden(f"report_{name}.txt", f.read())
    with open(paths["summary_path"], encoding="ascii") as f:
        text = f.read()
    check_golden(f"summary_{name}.json", text)
    assert json.loads(text) == summary


@needs_matplotlib
def test_outputs_are_byte_identical_and_headline_numbers_follow_the_table(tmp_path):
    plan = golden_plan()
    first, paths_a = write_outputs(plan, str(tmp_path / "a"), plot=True)
    second, paths_b = write_outputs(golden_plan(), str(tmp_path / "b"), plot=True)
    assert first == second
    for name in ("plan.npz", "summary.json", "report.txt", "plot.png"):
        with open(tmp_path / "a" / name, "rb") as fa, open(tmp_path / "b" / name, "rb") as fb:
            assert fa.read() == fb.read(), name
    with open(tmp_path / "a" / "plot.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # Recompute the headline numbers from files_for, independently of the stats module.
    size_of = dict(zip(plan.keys, plan.costs.tolist()))
    table = np.array(
        [[sum(size_of[k] for k in plan.files_for(epoch=e, shard_index=r)) for r in range(3)] for e in range(1, 11)],
        dtype=float,
    )
    assert isinstance(first["max_imbalance"], float) and isinstance(first["dropped_fraction"], float)
    assert first["max_imbalance"] == pytest.approx((table.max(1) / table.mean(1)).max(), abs=1e-6)
    assert first["dropped_fraction"] == pytest.approx((1 - 3 * table.min(1) / table.sum(1)).mean(), abs=1e-6)
    assert first["per_sub_epoch"]["bytes"] == table.astype(int).tolist()
    assert core.load_plan(paths_a["plan_path"], verify=True).files_for(epoch=7, shard_index=2) == plan.files_for(
        epoch=7, shard_index=2
    )


@pytest.mark.parametrize("distribution", ["returnn", "flexible_auto"])
def test_every_other_offered_distribution_is_compared(tmp_path, distribution):
    """The rows are the distributions offered (CutSpec.offered) and the plan's own, which may be one no longer
    offered (a stage of equal_steps): flexible and flexible_auto are not computed for another plan."""
    plan = golden_plan(distribution=distribution)
    summary, paths = write_outputs(plan, str(tmp_path))
    assert set(summary["distributions"]) == {"returnn", "balanced", "equal_steps", distribution}
    report = open(paths["report_path"], encoding="utf-8").read()
    assert summary["distributions"]["equal_steps"].startswith("not computed")  # it needs lengths and batching
    assert re.search(rf"^  {distribution} +\* ", report, flags=re.M)
    assert (
        distribution == "flexible_auto"
        or "flexible" not in report.split("Distributions on the same", 1)[1].split("Warnings", 1)[0]
    )
    for name in ("returnn", "balanced"):
        if name == distribution:
            continue
        other = core.ShardPlan(
            plan.keys, plan.costs, core.PlanSettings(num_shards=3, partition_epoch=4, distribution=name)
        )
        drop = compute_plan_stats(other, num_epochs=10).dropped_fraction
        assert summary["distributions"][name]["dropped_fraction"] == pytest.approx(drop.mean(), abs=1e-6)
        assert f"  {name:<20}   {100 * drop.mean():>11.2f}%" in report


def test_a_distribution_that_cannot_plan_is_reported_not_fatal(tmp_path, monkeypatch):
    def refuses(costs, *, num_shards, partition_epoch):
        raise ValueError("too few files for this cut")

    spec = cut_module.CutSpec("refusing", refuses, version=1, offered=True)
    monkeypatch.setattr(cut_module, "CUTS", {"returnn": cut_module.CUTS["returnn"], spec.name: spec})
    summary, paths = write_outputs(golden_plan(), str(tmp_path))
    assert summary["distributions"]["refusing"] == "too few files for this cut"
    assert (
        "refusing               not applicable: too few files for this cut"
        in open(paths["report_path"], encoding="utf-8").read()
    )


def test_a_requested_plot_without_matplotlib_fails_before_any_output(tmp_path, monkeypatch):
    from i6_shard.core.reporting import plot

    monkeypatch.setattr(plot, "matplotlib_available", lambda: False)
    with pytest.raises(ImportError, match=r"matplotlib is not installed.*pip install 'i6_shard\[plot\]'"):
        write_outputs(golden_plan(), str(tmp_path), plot=True)
    assert os.listdir(tmp_path) == []  # no plan, summary or report that could pass for a whole output set
    write_outputs(golden_plan(), str(tmp_path), plot=False)  # without a plot, the rest is written
    assert sorted(os.listdir(tmp_path)) == ["plan.npz", "report.txt", "summary.json"]


def test_report_warns_about_few_files_partial_epochs_and_overlap():
    plan = golden_plan(distrib_shard_files=False)
    summary, _ = plan_summary(plan, num_epochs=10, compare=False)
    text = " ".join(summary["warnings"])
    assert "few files per bin" in text  # 40 files in 3*4 bins
    assert "num_epochs=10 is not a multiple of partition_epoch=4" in text
    assert "read by more than one rank" in text
    quiet = core.ShardPlan(
        [f"f{i}" for i in range(400)], [1000] * 400, core.PlanSettings(num_shards=2, partition_epoch=2)
    )
    assert plan_summary(quiet, num_epochs=4, compare=False)[0]["warnings"] == []


def test_distributions_are_compared_over_the_first_full_epochs_only():
    plan = golden_plan()  # partition_epoch 4: the window is the first COMPARE_FULL_EPOCHS * 4 sub-epochs
    window = planning.COMPARE_FULL_EPOCHS * 4
    summary, stats = plan_summary(plan, num_epochs=window + 6)
    assert summary["distributions_num_epochs"] == window
    table = np.array(summary["per_sub_epoch"]["bytes"][:window], dtype=float)
    mine = summary["distributions"]["returnn"]
    assert mine["dropped_fraction"] == pytest.approx((1 - 3 * table.min(1) / table.sum(1)).mean(), abs=1e-6)
    assert mine["dropped_fraction"] != summary["dropped_fraction"]  # the headline covers all sub-epochs
    text = core.render_report(summary)
    assert (
        f"over sub-epochs 1..{window} (the first 3 full epochs; the sections above cover sub-epochs "
        f"1..{window + 6}) (* = this plan)"
    ) in text
    # every other table names its range too: the headline's and the per-shard table's are the plan's own
    assert f"Balance per shard (bytes over sub-epochs 1..{window + 6})" in text
    assert f"Worst sub-epochs (sub-epochs 1..{window + 6}, by the share dropped" in text
    assert f"  over sub-epochs 1..{window + 6}: mean " in text


def test_the_worst_sub_epochs_are_those_of_the_headline():
    """One "worst" in the report: the table lists the sub-epochs with the largest dropped share, so its first row
    is the headline's worst, also where another sub-epoch has the larger max/mean."""
    plan = golden_plan(distrib_shard_files=False)
    summary, _ = plan_summary(plan, num_epochs=10, compare=False)
    drops = summary["per_sub_epoch"]["dropped_fraction"]
    rows = summary["worst_sub_epochs"]
    assert [r["dropped_fraction"] for r in rows] == sorted(drops, reverse=True)[: len(rows)]
    assert rows[0]["dropped_fraction"] == summary["dropped_fraction_max"]
    ratios = summary["per_sub_epoch"]["max_over_mean"]
    assert ratios.index(max(ratios)) + 1 != rows[0]["epoch"]  # this plan tells the two measures apart
    text = core.render_report(summary)
    assert f"worst {100 * summary['dropped_fraction_max']:.2f}%" in text
    table = text.split("Worst sub-epochs")[1].split("\n\n")[0].splitlines()[2]
    assert table.split()[-1] == f"{100 * summary['dropped_fraction_max']:.2f}%"


def _ends(line: str, cells) -> list:
    """Where each of ``cells`` ends in ``line``, searched left to right."""
    out, pos = [], 0
    for cell in cells:
        pos = line.index(cell, pos) + len(cell)
        out.append(pos)
    return out


def test_columns_with_units_stay_under_their_headers():
    """Costs with their unit are wider than a fixed column: each column is as wide as its widest cell, so every
    cell ends where its header ends, and two cells never run into one."""
    plan = core.ShardPlan(
        [f"f{i}" for i in range(16)],
        [9_905_123, 9_985_456] * 8,
        core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=2, unit="frames"),
    )
    text = core.render_report(plan_summary(plan, num_epochs=2, compare=False)[0])
    for title, labels in (
        ("Worst sub-epochs", ["epoch", "full epoch", "min frames", "max frames", "max/mean", "dropped"]),
        ("Balance per shard", ["shard", "files", "frames", "vs mean", "min/sub-epoch", "max/sub-epoch"]),
    ):
        header, *rows = text.split(title)[1].split("\n\n")[0].splitlines()[1:]
        for row in rows:
            cells = re.findall(r"[\d.,%]+(?: frames)?", row)
            assert len(cells) == len(labels) and _ends(row, cells) == _ends(header, labels), (title, header, row)


def test_a_skipped_row_names_itself():
    """A distribution that is not computed (equal_steps: CutSpec.not_compared) says so, and names itself as the one
    to plan to see it."""
    plan = core.ShardPlan(
        [f"f{i}" for i in range(400)],
        [1000] * 400,
        core.PlanSettings(num_shards=2, partition_epoch=2, distribution="balanced", num_epochs=4),
    )
    summary, _ = plan_summary(plan, num_epochs=4)
    text = core.render_report(summary)
    (row,) = [line for line in text.splitlines() if line.startswith("  equal_steps ")]
    assert "not computed: it simulates the training for every move it tries" in row, row
    assert row.endswith("to see it") and "plan with distribution='equal_steps'" in row, row
    assert "not applicable" not in row


@pytest.mark.parametrize("sharded", [True, False])
def test_the_other_sharding_mode_is_compared(sharded):
    plan = golden_plan(distrib_shard_files=sharded)
    summary, _ = plan_summary(plan, num_epochs=8)
    row = summary["other_mode"]
    assert row["distrib_shard_files"] is (not sharded)
    flipped = golden_plan(distrib_shard_files=not sharded)
    size_of = dict(zip(plan.keys, plan.costs.tolist()))
    table = np.array(
        [[sum(size_of[k] for k in flipped.files_for(epoch=e, shard_index=r)) for r in range(3)] for e in range(1, 9)],
        dtype=float,
    )
    assert row["dropped_fraction"] == pytest.approx((1 - 3 * table.min(1) / table.sum(1)).mean(), abs=1e-6)
    assert row["max_imbalance"] == pytest.approx((table.max(1) / table.mean(1)).max(), abs=1e-6)
    label = "returnn, sharded" if not sharded else "returnn, unsharded"
    assert f"  {label:<20}   {100 * row['dropped_fraction']:>11.2f}%" in core.render_report(summary)


def test_other_mode_that_cannot_plan_is_reported_not_fatal():
    # 5 files: unsharded needs partition_epoch=2 bins per rank, sharded would need 3*2=6.
    plan = core.ShardPlan(
        list("abcde"), [1, 2, 3, 4, 5], core.PlanSettings(num_shards=3, partition_epoch=2, distrib_shard_files=False)
    )
    summary, _ = plan_summary(plan, num_epochs=2)
    assert "5 files cannot fill" in summary["other_mode"]["not_applicable"]
    report = core.render_report(summary)
    assert "  returnn, sharded       not applicable: 5 files cannot fill" in report
    assert report.endswith("\n") and "\nWarnings\n" in report


def test_same_seed_on_all_ranks_shows_the_overlap_and_warns():
    plan = golden_plan(distrib_shard_files=False, same_seed_on_all_ranks=True, random_seed_offset=7)
    summary, stats = plan_summary(plan, num_epochs=8)
    # Every rank reads the same bin: each of its entries is read by more than one rank.
    assert stats.overlap.tolist() == stats.files[:, 0].tolist()
    assert (stats.files == stats.files[:, :1]).all() and (stats.bytes == stats.bytes[:, :1]).all()
    assert summary["overlap"]["max"] == int(stats.files.max()) > 0
    assert summary["settings"]["same_seed_on_all_ranks"] is True
    warning = [w for w in summary["warnings"] if "same files in the same order" in w]
    assert len(warning) == 1 and "remove random_seed_offset from the dataset dict" in warning[0]
    assert f"up to {int(stats.files.max())} entries read by more than one rank" in warning[0]
    report = core.render_report(summary)
    assert "unsharded (distrib_shard_files=False, the same random_seed_offset on every rank)" in report
    # RETURNN's default unsharded mode (per-rank offsets): no such warning, no such setting.
    default = plan_summary(golden_plan(distrib_shard_files=False, random_seed_offset=7), num_epochs=8)[0]
    assert "same_seed_on_all_ranks" not in default["settings"]
    assert not any("same files in the same order" in w for w in default["warnings"])
    assert any("read by more than one rank" in w for w in default["warnings"])


def test_summarize_rejects_stats_over_other_sub_epochs_with_a_value_error():
    plan = golden_plan()
    stats = compute_plan_stats(plan, num_epochs=8)
    short = compute_plan_stats(plan, num_epochs=4)
    with pytest.raises(
        ValueError,
        match=r"other_distributions\['balanced'\] holds stats over 4 sub-epochs.*"
        r"compare_num_epochs=8",
    ):
        summarize(plan, stats, other_distributions={"balanced": short})
    with pytest.raises(ValueError, match=r"other_mode holds stats over 8 sub-epochs.*compare_num_epochs=4"):
        summarize(plan, stats, other_mode=stats, compare_num_epochs=4)
    for bad in (0, 9, 2.5, True):
        with pytest.raises(ValueError, match=rf"compare_num_epochs={bad!r} must be an int in 1..8"):
            summarize(plan, stats, compare_num_epochs=bad)
    assert summarize(plan, stats, other_mode=short, compare_num_epochs=4)["other_mode"]["dropped_fraction"] >= 0


def test_plot_path_must_name_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason=MATPLOTLIB_REASON)
    plan = ShardPlan(
        [f"f{i}" for i in range(8)], [5, 1, 3, 8, 2, 7, 4, 6], PlanSettings(num_shards=2, partition_epoch=2)
    )
    stats = compute_plan_stats(plan, num_epochs=2)
    with pytest.raises(ValueError, match=r"out\.jpg.*must end in \.png"):
        plot_plan(stats, str(tmp_path / "out.jpg"))
    assert not (tmp_path / "out.jpg").exists()
    plot_plan(stats, str(tmp_path / "out.png"))
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_warnings_speak_of_the_plans_unit(tmp_path):
    """A plan balanced by frames warns about frames, not bytes (the byte plan's text stays as it was)."""
    keys = [f"/corpus/part-{i:02d}.hdf" for i in range(8)]
    costs = [1, 1, 1, 1, 1, 1, 1, 50]  # one huge file: high loss, unbalanced, 2 files per bin
    texts = {}
    for unit in ("bytes", "frames"):
        plan = core.ShardPlan(keys, costs, core.PlanSettings(num_shards=2, partition_epoch=2, unit=unit))
        write_outputs(plan, str(tmp_path / unit), num_epochs=2)
        texts[unit] = (tmp_path / unit / "report.txt").read_text()
    assert "sub-epoch's bytes lie beyond" in texts["bytes"] and "the byte balance is coarse" in texts["bytes"]
    assert "sub-epoch's frames lie beyond" in texts["frames"] and "the balance by frames is coarse" in texts["frames"]
    assert "the mean frames of all shards" in texts["frames"]
    warnings = texts["frames"].split("Warnings", 1)[1]
    assert "bytes" not in warnings and "byte " not in warnings


def _large_file_warnings(sizes, **settings):
    plan = core.ShardPlan(
        [f"f{i}" for i in range(len(sizes))],
        sizes,
        core.PlanSettings(**{"num_shards": 2, "partition_epoch": 2, **settings}),
    )
    return [
        w for w in plan_summary(plan, num_epochs=4, compare=False)[0]["warnings"] if "more than a rank's share" in w
    ]


def test_files_above_a_ranks_share_are_named_with_the_deviation_that_holds_them():
    """A file of x times a rank's share of a sub-epoch (total / (W * P)) cannot be matched by the other ranks in a
    sub-epoch of the mean size: the warning gives flexible's deviation that lets its sub-epoch grow (x - 1, plus 5
    points), or says to split files of 2 shares or more; no warning once the deviation holds it, or unsharded."""
    sizes = [12] + [1] * 25  # total 37, share 37 / 4 = 9.25: the 12 is 1.30 shares, needs 0.30 + 0.05
    (warning,) = _large_file_warnings(sizes)
    assert warning.startswith("1 file entry holds more than a rank's share of a sub-epoch (9 B; the largest 1.30x)"), (
        warning
    )
    assert warning.endswith(
        "distribution='equal_steps' (from a costs archive with per-sequence lengths, and the batching) lets their "
        "sub-epochs grow by up to 0.9 to hold them (docs/flexible_split.md), or lower partition_epoch."
    ), warning
    (warning,) = _large_file_warnings(sizes, distribution="flexible")  # 0.25 by default
    assert "Raise max_sub_epoch_deviation to 0.35 or more (now 0.25)" in warning
    assert _large_file_warnings(sizes, distribution="flexible", max_sub_epoch_deviation=0.35) == []
    assert _large_file_warnings(sizes, distrib_shard_files=False) == []
    assert _large_file_warnings(sizes, distribution="flexible_auto") == []  # it grows sub-epochs by up to 0.9
    (warning,) = _large_file_warnings([19] + [1] * 21, distribution="flexible_auto")  # share 10: 1.90x, needs 0.95
    assert warning.endswith(
        "would need to grow by 0.95, flexible_auto lets them grow by 0.9 at most: split "
        "these files, or lower partition_epoch."
    ), warning
    (warning,) = _large_file_warnings([19] + [1] * 21)  # the same file under RETURNN's cut: nothing offered holds it
    assert warning.endswith(
        "would need to grow by 0.95, more than any distribution offered lets them: split these files, or lower "
        "partition_epoch."
    ), warning
    (warning,) = _large_file_warnings([20, 19] + [1] * 20)  # share 59 / 4 = 14.75: 1.36x and 1.29x, 2.0x below
    assert warning.startswith("2 file entries hold more than")
    (warning,) = _large_file_warnings([40] + [1] * 40)  # share 20: 2.00x, no deviation below 1 holds it
    assert "Split these files" in warning and "flexible" not in warning
    assert _large_file_warnings([9] + [1] * 27) == []  # share 9: exactly one share is no loss by itself


def test_a_flexible_auto_plan_is_cut_once_per_full_epoch(tmp_path, monkeypatch):
    """The moved files are counted on the layouts the plan file stores, not on layouts cut anew (each cut of
    flexible_auto takes up to seconds): writing the outputs cuts every full epoch once, and the count is the same."""
    sizes = np.r_[np.random.RandomState(0).randint(1, 100, size=60), [900, 1000]]
    plan = ShardPlan(
        [f"f{i}" for i in range(sizes.size)],
        sizes,
        PlanSettings(num_shards=2, partition_epoch=3, num_epochs=7, distribution="flexible_auto", unit="frames"),
    )
    calls = []
    real = ShardPlan.layout
    monkeypatch.setattr(
        ShardPlan, "layout", lambda self, **kw: calls.append((self.settings == plan.settings, kw)) or real(self, **kw)
    )
    summary = core.write_plan_outputs(
        plan,
        plan_path=str(tmp_path / "p.npz"),
        summary_path=str(tmp_path / "s.json"),
        report_path=str(tmp_path / "r.txt"),
    )
    own = [kw["full_epoch_0idx"] for mine, kw in calls if mine]  # not the other distributions' compared plans
    assert sorted(own) == [0, 1, 2]  # each full epoch of the plan file once
    monkeypatch.setattr(ShardPlan, "layout", real)
    recount = sum(len(plan.non_contiguous_sub_epochs(full_epoch_0idx=k)) for k in range(2))
    assert summary["non_contiguous_sub_epochs"] == recount and summary["non_contiguous_of"] == 6

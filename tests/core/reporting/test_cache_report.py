"""The per-node cache section of the plan outputs (summary, report, plot) and the compare-plans report:
goldens, numbers from the core, and plans without the option written exactly as before."""

import json
import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.pure.cache import NodeCache, compute_cache_footprint
from i6_shard.core.pure.compare import compare_plans
from i6_shard.core.pure import cut as cut_module
from i6_shard.core.reporting.plan_change import (
    CHANGE_OUTPUTS,
    change_files,
    change_summary,
    render_change_report,
    write_change_dir,
)
from i6_shard.core.reporting.plot import matplotlib_available, plot_plan

from ...golden import check_golden
from ..pure.test_cache import brute_force


def golden_plan(**kwargs) -> core.ShardPlan:
    keys = [f"/corpus/part-{i:02d}.hdf" for i in range(40)]
    sizes = [((i * 7919) % 997 + 1) * 1000 for i in range(40)]
    kwargs = {"num_shards": 3, "partition_epoch": 4, "num_epochs": 10, **kwargs}
    return core.ShardPlan(keys, sizes, core.PlanSettings(**kwargs))


def write(plan, directory, **cache):
    os.makedirs(directory, exist_ok=True)
    paths = {
        k: os.path.join(directory, fn)
        for k, fn in (("plan_path", "plan.npz"), ("summary_path", "summary.json"), ("report_path", "report.txt"))
    }
    summary = core.write_plan_outputs(plan, **paths, **cache)
    with open(paths["report_path"], encoding="utf-8") as f:
        report = f.read()
    with open(paths["summary_path"], encoding="ascii") as f:
        text = f.read()
    assert json.loads(text) == summary
    return summary, report, text


@pytest.mark.parametrize(
    "name, cache",
    [
        ("cache_fits_not", {"node_cache": NodeCache(ranks_per_node=2), "cache_size": 3 * 10**6}),
        ("cache_direct", {"node_cache": NodeCache(ranks_per_node=2, preload_next_n_sub_epochs=0, cached_file=False)}),
    ],
)
def test_golden_cache_report(tmp_path, monkeypatch, name, cache):
    monkeypatch.setattr(cut_module, "CUTS", {"returnn": cut_module.CUTS["returnn"]})
    _, report, text = write(golden_plan(), str(tmp_path), **cache)
    check_golden(f"report_{name}.txt", report)
    check_golden(f"summary_{name}.json", text)


def test_without_the_option_nothing_changes_and_with_it_only_the_cache_is_added(tmp_path, monkeypatch):
    monkeypatch.setattr(cut_module, "CUTS", {"returnn": cut_module.CUTS["returnn"]})
    plan = golden_plan()
    plain, plain_report, _ = write(plan, str(tmp_path / "plain"))
    assert "cache" not in plain and "cache_peak_bytes_per_node" not in plain and "file cache" not in plain_report
    cached, report, _ = write(
        plan, str(tmp_path / "cache"), node_cache=NodeCache(ranks_per_node=2), cache_size=10**12
    )  # fits: no warning added
    assert {k: v for k, v in cached.items() if not k.startswith("cache")} == plain
    before, after = plain_report.split("\nWarnings\n")
    assert report.startswith(before + "\nPer-node file cache (2 ranks per node, 2 nodes; ")
    assert report.endswith("\nWarnings\n" + after)


def test_summary_numbers_are_the_brute_force_count(tmp_path):
    plan = golden_plan(distribution="balanced")
    node_cache = NodeCache(ranks_per_node=2, preload_next_n_sub_epochs=2)
    summary, report, _ = write(plan, str(tmp_path), node_cache=node_cache, cache_size=2 * 10**6)
    held, files, shared = brute_force(plan, node_cache, 10)
    c = summary["cache"]
    assert c["per_sub_epoch"] == {"held_bytes": held, "held_files": files, "shared_fs_bytes": shared}
    assert summary["cache_peak_bytes_per_node"] == c["peak_bytes"] == max(map(max, held))
    assert held[c["peak_epoch"] - 1][c["peak_node"]] == c["peak_bytes"]
    assert c["fits"] == (c["peak_bytes"] <= 2 * 10**6)
    rows = {r["partition_epoch"]: r for r in c["partition_epochs"]}
    assert rows[4] == {"partition_epoch": 4, "peak_bytes": c["peak_bytes"], "fits": c["fits"]}
    for p, row in rows.items():
        if p != 4 and "peak_bytes" in row:
            other = plan.with_settings(partition_epoch=p, num_epochs=3 * p)
            assert (
                row["peak_bytes"] == compute_cache_footprint(other, node_cache=node_cache, num_epochs=3 * p).peak_bytes
            )
    assert f"peak {core.reporting.report.format_bytes(c['peak_bytes'])} (sub-epoch {c['peak_epoch']}" in report


def test_cache_size_needs_the_ranks_per_node(tmp_path):
    with pytest.raises(ValueError, match="cache_size=5 needs node_cache"):
        write(golden_plan(), str(tmp_path), cache_size=5)
    assert not os.listdir(tmp_path)


@pytest.mark.skipif(not matplotlib_available(), reason="the plot needs matplotlib: pip install matplotlib")
@pytest.mark.slow
def test_plot_has_a_cache_panel_only_when_asked(tmp_path):
    plan = golden_plan()
    stats = compute_plan_stats(plan, num_epochs=10)
    fp = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2), num_epochs=10)
    with_cache = {"cache": fp, "cache_size": 10**6}
    for name, kwargs in (("a", {}), ("b", with_cache), ("c", with_cache)):
        plot_plan(stats, str(tmp_path / f"{name}.png"), **kwargs)
    a, b, c = ((tmp_path / f"{n}.png").read_bytes() for n in "abc")
    assert b == c and a != b
    from matplotlib.image import imread

    assert imread(str(tmp_path / "b.png")).shape[0] > imread(str(tmp_path / "a.png")).shape[0]  # a panel more
    short = compute_cache_footprint(plan, node_cache=NodeCache(ranks_per_node=2), num_epochs=4)
    with pytest.raises(ValueError, match="covers 4 sub-epochs, the stats 10"):
        plot_plan(stats, str(tmp_path / "d.png"), cache=short)


# --- compare-plans ------------------------------------------------------------------------------------


def change_plans():
    keys = [f"/corpus/part-{i:02d}.hdf" for i in range(50)]
    sizes = [((i * 7919) % 997 + 1) * 1000 for i in range(50)]
    old = core.ShardPlan(keys, sizes, core.PlanSettings(num_shards=8, partition_epoch=3, num_epochs=9))
    return old, old.with_settings(num_shards=6)


def test_golden_change_report(tmp_path):
    old, new = change_plans()
    summary = write_change_dir(compare_plans(old, new, resume_epoch=5), str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == sorted(CHANGE_OUTPUTS + (".i6_shard-set",))
    check_golden("compare_plans_report.txt", (tmp_path / "out" / "report.txt").read_text(encoding="utf-8"))
    check_golden("compare_plans_summary.json", (tmp_path / "out" / "summary.json").read_text(encoding="ascii"))
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary


def test_change_summary_and_files_follow_files_for():
    old, new = change_plans()
    change = compare_plans(old, new, resume_epoch=5)
    summary, files = change_summary(change), change_files(change)
    (full,) = summary["full_epochs"]
    before = {k for e in (4,) for r in range(8) for k in old.files_for(epoch=e, shard_index=r)}
    after = {k for e in (5, 6) for r in range(6) for k in new.files_for(epoch=e, shard_index=r)}
    assert full["read_twice"] == len(before & after) and full["never_read"] == 50 - len(before | after)
    assert sorted(x["key"] for x in files["full_epochs"][0]["read_twice"]) == sorted(before & after)
    assert sorted(x["key"] for x in files["full_epochs"][0]["never_read"]) == sorted(set(old.keys) - before - after)
    for x in files["full_epochs"][0]["read_twice"]:
        assert x["key"] in old.files_for(epoch=x["old_epoch"], shard_index=x["old_rank"])
        assert x["key"] in new.files_for(epoch=x["new_epoch"], shard_index=x["new_rank"])
    for x in files["full_epochs"][0]["never_read"]:
        assert x["key"] in old.files_for(epoch=x["planned_epoch"], shard_index=x["planned_rank"])
    assert [row["files_before"] for row in full["per_rank"]] == [
        len(old.files_for(epoch=4, shard_index=r)) for r in range(8)
    ]
    assert [row["files_after"] for row in full["per_rank"]] == [
        sum(len(new.files_for(epoch=e, shard_index=r)) for e in (5, 6)) if r < 6 else 0 for r in range(8)
    ]
    assert summary["boundaries"] == [
        {"resume_epoch": 4, "read_twice": 0, "never_read": 0},
        {"resume_epoch": 7, "read_twice": 0, "never_read": 0},
    ]
    at_boundary = change_summary(compare_plans(old, new, resume_epoch=4))
    assert at_boundary["at_full_epoch_boundary"] and at_boundary["full_epochs"] == []
    assert "nothing is read twice or never" in render_change_report(at_boundary)


def test_change_dir_is_written_whole_or_not_at_all(tmp_path):
    old, new = change_plans()
    out = tmp_path / "out"
    out.mkdir()
    (out / "other.txt").write_text("mine")
    with pytest.raises(ValueError, match="other.txt"):
        write_change_dir(compare_plans(old, new, resume_epoch=5), str(out))
    assert os.listdir(out) == ["other.txt"]
    assert np.all([not n.endswith(".tmp") for n in os.listdir(tmp_path)])

"""The one cut table: a distribution is one row (a ``CutSpec``) that every caller reads; a row added to a copy of the
table is planned, stored, compared, reported and built into a dataset dict with no other edit, and no code outside
the table's module compares a distribution's name."""

import ast
import dataclasses
import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.core.pure import cut as cut_module
from i6_shard.core.pure.cut import CUTS, CutSpec, cut_spec, offered_distributions
from i6_shard.core.io.plan_file import read_plan_head
from i6_shard.core.pure.distribute import distribute_evenly_by_size, shuffle_order
from i6_shard.core.pure.stats import compute_plan_stats
from i6_shard.core.reporting.outputs import plan_summary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _reversed_returnn(costs, *, num_shards, partition_epoch):
    """RETURNN's greedy cut of the shuffled order read backwards: a cut no row has, so its bins are its own."""
    positions = np.arange(len(costs) - 1, -1, -1, dtype=np.int64)
    return positions, distribute_evenly_by_size(costs[positions], num_bins=num_shards * partition_epoch)


def _with_row(monkeypatch, **attributes) -> CutSpec:
    """A copy of the table with one more row, "reversed", in place of the table for the test."""
    spec = CutSpec("reversed", _reversed_returnn, **{"version": 1, "offered": True, **attributes})
    monkeypatch.setattr(cut_module, "CUTS", {**CUTS, spec.name: spec})
    return spec


def _plan(distribution="reversed", **settings):
    keys = [f"/corpus/part-{i:02d}.hdf" for i in range(24)]
    sizes = [((i * 7919) % 997 + 1) * 1000 for i in range(24)]
    kwargs = {"num_shards": 2, "partition_epoch": 3, "num_epochs": 6, "distribution": distribution, **settings}
    return core.ShardPlan(keys, sizes, core.PlanSettings(**kwargs))


def test_the_table_says_what_each_distribution_is():
    assert offered_distributions() == ("returnn", "balanced", "equal_steps")
    assert [name for name, spec in CUTS.items() if spec.returnns_own] == ["returnn"]
    stages = {name: spec.built_from for name, spec in CUTS.items() if spec.built_from}
    assert stages == {"flexible": "balanced", "flexible_auto": "flexible", "equal_steps": "flexible_auto"}
    assert all(CUTS[base].version >= 1 for base in stages.values())  # each stage is built from a row
    assert [name for name, spec in CUTS.items() if spec.cuts_with_inputs] == ["equal_steps"]
    assert core.pure.settings.COST_DISTRIBUTIONS == ("returnn", "balanced", "flexible", "flexible_auto")
    for name, spec in CUTS.items():
        assert spec.name == name and cut_spec(name) is spec
    with pytest.raises(ValueError, match=r"distribution='flexible_autoo' is unknown; use one of \('returnn', 'bal"):
        cut_spec("flexible_autoo")


def test_a_row_added_to_a_copy_of_the_table_is_planned_stored_and_reported(monkeypatch, tmp_path):
    _with_row(monkeypatch)
    plan = _plan()
    order, bounds = plan.layout(full_epoch_0idx=1)
    shuffled = shuffle_order(plan.num_files, seed=plan.settings.seed_for(full_epoch_0idx=1))
    expected_positions, expected_bounds = _reversed_returnn(plan.costs[shuffled], num_shards=2, partition_epoch=3)
    assert order.tolist() == shuffled[expected_positions].tolist() and bounds.tolist() == expected_bounds.tolist()
    paths = {k: str(tmp_path / name) for k, name in (("plan_path", "plan.npz"), ("summary_path", "summary.json"))}
    paths["report_path"] = str(tmp_path / "report.txt")
    summary = core.write_plan_outputs(plan, **paths)
    assert summary["settings"]["distribution"] == "reversed"
    assert set(summary["distributions"]) == {"reversed", "returnn", "balanced", "equal_steps"}
    with open(paths["report_path"], encoding="utf-8") as f:
        assert "  reversed             * " in f.read()
    stored = core.load_plan(paths["plan_path"], verify=True)  # the file records the row's version, and loads
    assert stored.files_for(epoch=5, shard_index=1) == plan.files_for(epoch=5, shard_index=1)
    assert read_plan_head(paths["plan_path"]).algorithm_version == 1


def test_the_comparison_of_another_plan_shows_the_new_row_as_it_says(monkeypatch, tmp_path):
    _with_row(monkeypatch)
    own = _plan("returnn")
    summary, _ = plan_summary(own, num_epochs=6)
    drop = compute_plan_stats(own.with_settings(distribution="reversed"), num_epochs=6).dropped_fraction
    assert summary["distributions"]["reversed"]["dropped_fraction"] == pytest.approx(drop.mean(), abs=1e-6)
    _with_row(monkeypatch, not_compared="it takes a week")  # its row says why it is not computed
    summary, _ = plan_summary(own, num_epochs=6)
    assert summary["distributions"]["reversed"] == "not computed: it takes a week"
    _with_row(monkeypatch, offered=False)  # a row not offered is not compared, but still planned
    summary, _ = plan_summary(own, num_epochs=6)
    assert "reversed" not in summary["distributions"] and "reversed" not in offered_distributions()
    assert _plan().files_for(epoch=1, shard_index=0)


def test_the_new_rows_needs_are_checked_where_the_settings_are(monkeypatch):
    _with_row(monkeypatch, sharded_only=True)
    with pytest.raises(ValueError, match=r"distribution='reversed' .* plan is 'unsharded'"):
        _plan(distrib_shard_files=False)
    _with_row(monkeypatch, sub_epoch_bound="given")
    assert _plan(max_sub_epoch_deviation=0.5).settings.cut_options == {"max_sub_epoch_deviation": 0.5}
    _with_row(monkeypatch, needs_lengths=True)
    with pytest.raises(ValueError, match=r"distribution='reversed' plan has no sequence lengths"):
        _plan().layout(full_epoch_0idx=0)


def test_the_builder_takes_the_new_row(monkeypatch):
    from i6_shard.returnn_config import sharded_files_dataset

    files = [f"/corpus/part-{i:02d}.hdf" for i in range(8)]
    sub = {"class": "HDFDataset", "seq_ordering": "random"}
    _with_row(monkeypatch)
    built = sharded_files_dataset(files, sub_epoch_dataset=sub, partition_epoch=2, distribution="reversed")
    assert built["distribution"] == "reversed" and built["class"] != "DistributeFilesDataset"
    _with_row(monkeypatch, returnns_own=True)  # RETURNN's own cut: the plain class, without the key
    built = sharded_files_dataset(files, sub_epoch_dataset=sub, partition_epoch=2, distribution="reversed")
    assert "distribution" not in built and built["class"] == "DistributeFilesDataset"


def test_a_row_whose_cut_fails_is_a_row_of_the_comparison_not_an_error(monkeypatch):
    def fails(costs, *, num_shards, partition_epoch):
        raise ValueError("this cut needs more files")

    spec = CutSpec("fails", fails, version=1, offered=True)
    monkeypatch.setattr(cut_module, "CUTS", {**CUTS, spec.name: spec})
    summary, _ = plan_summary(_plan("returnn"), num_epochs=6)
    assert summary["distributions"]["fails"] == "this cut needs more files"


#: Places outside the table's module where a distribution's name may still be compared: none.
ALLOWED_NAME_COMPARISONS = {}


def _name_comparisons(path: str, text: str):
    """``path:line`` of each comparison (``==``, ``!=``, ``in``, ``not in``) with a distribution's name."""
    names = set(CUTS)
    out = []
    for node in ast.walk(ast.parse(text, path)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            elements = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            if any(isinstance(e, ast.Constant) and e.value in names for e in elements):
                out.append(f"{path}:{node.lineno}")
                break
    return out


def test_no_code_outside_the_table_compares_a_distributions_name():
    found = {}
    for folder, dirs, files in os.walk(os.path.join(ROOT, "i6_shard")):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
        for name in files:
            path = os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")
            if name.endswith(".py") and path != "i6_shard/core/pure/cut.py":
                with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                    spots = _name_comparisons(path, f.read())
                if spots:
                    found[path] = spots
    assert {path: len(spots) for path, spots in found.items()} == ALLOWED_NAME_COMPARISONS, found


def test_the_comparison_finder_finds_comparisons():
    text = 'if d == "flexible" or d in ("returnn", "x"):\n    pass\nf(distribution="balanced")\n'
    assert _name_comparisons("x.py", text) == ["x.py:1", "x.py:1"]


def test_a_spec_is_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CUTS["returnn"].offered = False
    with pytest.raises(ValueError, match=r"CutSpec 'x': sub_epoch_bound='auto' must be one of \(None, 'given', 'ch"):
        CutSpec("x", _reversed_returnn, version=1, offered=True, sub_epoch_bound="auto")


def test_a_trainings_plan_takes_the_offered_cut_that_needs_the_most_it_has(monkeypatch):
    """training_distribution reads the rows' needs: a row added that needs the lengths only is what a plan with the
    lengths but an engine it cannot simulate exactly cuts with; one not offered is never chosen."""
    choose = cut_module.training_distribution
    assert choose(seq_lengths=True, exact_engine=False, sharded=True) == "balanced"
    _with_row(monkeypatch, needs_lengths=True)
    assert choose(seq_lengths=True, exact_engine=False, sharded=True) == "reversed"
    assert choose(seq_lengths=False, exact_engine=True, sharded=True) == "balanced"
    assert choose(seq_lengths=True, exact_engine=True, sharded=True) == "equal_steps"
    _with_row(monkeypatch, needs_lengths=True, offered=False)
    assert choose(seq_lengths=True, exact_engine=False, sharded=True) == "balanced"

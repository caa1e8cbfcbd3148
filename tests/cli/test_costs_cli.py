"""`python -m i6_shard costs` and `plan --sizes COSTS --batch-size --max-seqs`: the archive the plan takes,
balanced by its unit, the unit recorded in plan and summary, and the predicted loss."""

import json

import pytest

from i6_shard import core
from i6_shard.cli import main
from tests.hdf_data import write_tiny_hdf_files
from tests.deps import H5PY_REASON, RETURNN_REASON

pytest.importorskip("h5py", reason=H5PY_REASON)
pytest.importorskip("returnn", reason=RETURNN_REASON)


@pytest.fixture
def hdf_list(tmp_path):
    paths = write_tiny_hdf_files(str(tmp_path / "data"), num_files=16, seed=2, max_seqs=25, frames=(3, 70))
    list_path = str(tmp_path / "files.txt")
    core.write_file_list(paths, list_path)
    return list_path


def test_costs_then_plan_by_frames_with_prediction(tmp_path, hdf_list, capsys):
    costs = str(tmp_path / "costs.npz")
    assert main(["costs", hdf_list, "--unit", "frames", "-o", costs]) == 0
    out = str(tmp_path / "plan")
    assert (
        main(
            [
                "plan",
                "--sizes",
                costs,
                "--num-shards",
                "2",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--distribution",
                "balanced",
                "--batch-size",
                "500",
                "--max-seqs",
                "10",
                "--no-plot",
                "-o",
                out,
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "unit                 frames" in text and "Predicted loss under RETURNN's batching" in text
    with open(f"{out}/summary.json") as f:
        summary = json.load(f)
    assert summary["unit"] == "frames" and 0 <= summary["dropped_fraction_predicted"] <= 1
    plan = core.load_plan(f"{out}/plan.npz")
    assert plan.settings.unit == "frames"
    assert plan.costs.tolist() == core.load_file_sizes(costs).sizes.tolist()


def test_prediction_needs_a_costs_archive(tmp_path, hdf_list, capsys):
    sizes = str(tmp_path / "sizes.npz")
    assert main(["sizes", hdf_list, "-o", sizes]) == 0
    code = main(
        [
            "plan",
            "--sizes",
            sizes,
            "--num-shards",
            "2",
            "--partition-epoch",
            "2",
            "--num-epochs",
            "4",
            "--max-seqs",
            "10",
            "--no-plot",
            "-o",
            str(tmp_path / "plan"),
        ]
    )
    assert code == 2 and "holds sizes in bytes" in capsys.readouterr().err
    assert (
        main(
            [
                "plan",
                "--sizes",
                sizes,
                "--num-shards",
                "2",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--no-plot",
                "-o",
                str(tmp_path / "plan"),
            ]
        )
        == 0
    )
    with open(tmp_path / "plan" / "summary.json") as f:
        summary = json.load(f)
    assert summary["unit"] == "bytes" and "dropped_fraction_predicted" not in summary


def test_costs_in_steps_then_plan_predicts_under_their_limits(tmp_path, hdf_list, capsys):
    costs = str(tmp_path / "steps.npz")
    assert main(["costs", hdf_list, "--unit", "steps", "--batch-size", "500", "--max-seqs", "10", "-o", costs]) == 0
    assert " steps (" in capsys.readouterr().out
    archive = core.io.load_file_costs(costs)
    assert archive.unit == "steps" and archive.batching.as_dict() == {"batch_size": 500, "max_seqs": 10}
    assert archive.costs.dtype.kind == "i" and (archive.costs > 0).all()
    out = str(tmp_path / "plan")
    assert (
        main(
            [
                "plan",
                "--sizes",
                costs,
                "--num-shards",
                "2",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--distribution",
                "balanced",
                "--no-plot",
                "-o",
                out,
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "unit                 steps" in text and "milli-steps" in text and "batch_size=500, max_seqs=10" in text
    with open(f"{out}/summary.json") as f:
        summary = json.load(f)
    assert summary["unit"] == "steps" and summary["batching"]["batch_size"] == 500
    assert core.load_plan(f"{out}/plan.npz").settings.unit == "steps"
    code = main(
        [
            "plan",
            "--sizes",
            costs,
            "--num-shards",
            "2",
            "--partition-epoch",
            "2",
            "--num-epochs",
            "4",
            "--batch-size",
            "400",
            "--max-seqs",
            "10",
            "--no-plot",
            "-o",
            str(tmp_path / "other"),
        ]
    )
    assert code == 2 and "count steps under" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--unit", "steps"], ["--unit", "frames", "--max-seqs", "4"]])
def test_steps_and_batching_come_together(tmp_path, hdf_list, capsys, argv):
    assert main(["costs", hdf_list, *argv, "-o", str(tmp_path / "c.npz")]) == 2
    assert "unit='steps' needs batch_size and/or max_seqs" in capsys.readouterr().err


def test_the_prediction_assumes_the_sync_mode_given(tmp_path, hdf_list, capsys):
    costs = str(tmp_path / "costs.npz")
    assert main(["costs", hdf_list, "--unit", "frames", "-o", costs]) == 0
    plan = [
        "plan",
        "--sizes",
        costs,
        "--num-shards",
        "2",
        "--partition-epoch",
        "2",
        "--num-epochs",
        "4",
        "--batch-size",
        "300",
        "--max-seqs",
        "4",
        "--no-plot",
    ]
    summaries, texts = {}, {}
    for name, sync in (("grad", []), ("param", ["--reduce-type", "param", "--param-sync-step", "100000"])):
        capsys.readouterr()
        assert main([*plan, *sync, "-o", str(tmp_path / name)]) == 0
        texts[name] = capsys.readouterr().out
        with open(tmp_path / name / "summary.json") as f:
            summaries[name] = json.load(f)
    assert summaries["grad"]["sync"] == {"reduce_type": "grad", "param_sync_step": None}
    assert summaries["param"]["sync"] == {"reduce_type": "param", "param_sync_step": 100000}
    # RETURNN's cut leaves the ranks uneven: under grad sync the longer ranks lose their rest; no rank reaches a
    # param sync at step 99999, so under param sync each reads all of its data.
    assert summaries["grad"]["dropped_fraction_predicted"] > 0
    assert summaries["param"]["dropped_fraction_predicted"] == 0
    assert "max_seqs=4; grad sync;" in texts["grad"] and "dropped when the first rank runs out" in texts["grad"]
    assert "max_seqs=4; param sync;" in texts["param"]
    assert "dropped under param sync every 100000 steps (the others run on to their next sync)" in texts["param"]

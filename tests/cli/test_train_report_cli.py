"""Command line `train-report` on real logs: the plan made by `plan` from the files' sizes, the same
bytes as the core writer, the summary's public keys, errors as one line, --fail-on-alarm."""

import glob
import json
import os

import pytest

from tests.recorded_cuts import use_recorded_cuts

from tests.deps import needs_matplotlib

from i6_shard.cli import main
from i6_shard.core.reporting.train_report import write_train_report

LOGS = os.path.join(os.path.dirname(__file__), "..", "data", "returnn_logs")


@pytest.fixture(autouse=True)
def _recorded_cuts(monkeypatch):
    """The recorded trainings ran "balanced" of version 1 (tests/recorded_cuts.py)."""
    use_recorded_cuts(monkeypatch)


def _logs(name):
    return sorted(glob.glob(os.path.join(LOGS, name, "returnn.torch-distrib-*.log")))


def _plan(tmp_path, name):
    with open(os.path.join(LOGS, name, "case.json")) as f:
        c = json.load(f)
    out = tmp_path / "plan"
    assert (
        main(
            [
                "plan",
                "--sizes",
                os.path.join(LOGS, name, "file_sizes.npz"),
                "--num-shards",
                str(c["num_ranks"]),
                "--partition-epoch",
                str(c["partition_epoch"]),
                "--num-epochs",
                str(c["num_epochs"]),
                "--distribution",
                c["distribution"],
                "--no-plot",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    return str(out / "plan.npz")


@needs_matplotlib
@pytest.mark.parametrize("name", [pytest.param("w4_bv33_worker", marks=pytest.mark.slow), "w2_balanced"])
def test_train_report_writes_what_the_core_writes_and_the_files_match_the_plan(tmp_path, capsys, name):
    plan = _plan(tmp_path, name)
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    out = tmp_path / "out"
    assert main(["train-report", *_logs(name), "--plan", plan, "--file-lengths", lengths, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "i6_shard training report" in printed and f"summary -> {out / 'summary.json'}" in printed
    ref = tmp_path / "ref"
    write_train_report(_logs(name), str(ref), plan_path=plan, file_lengths_path=lengths)
    for fn in ("report.txt", "summary.json", "plot.png"):
        assert (out / fn).read_bytes() == (ref / fn).read_bytes(), fn
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) >= {"sub_epochs", "dropped_fraction", "alarms"}
    for s in summary["sub_epochs"]:
        assert isinstance(s["epoch"], int)
        for x in s["ranks"]:
            assert set(x) >= {
                "consumed_seqs",
                "available_seqs",
                "consumed_frames",
                "available_frames",
                "files_match_plan",
            }
            assert x["files_match_plan"] is True
            assert 0 < x["consumed_frames"] <= x["available_frames"]
    assert 0 <= summary["dropped_fraction"] < 1


def test_double_sharding_alarm_and_fail_on_alarm(tmp_path, capsys):
    name = "w4_nofix"
    plan = _plan(tmp_path, name)
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    assert (
        main(
            [
                "train-report",
                *_logs(name),
                "--plan",
                plan,
                "--file-lengths",
                lengths,
                "--no-plot",
                "--fail-on-alarm",
                "-o",
                str(tmp_path / "out"),
            ]
        )
        == 1
    )
    printed = capsys.readouterr().out
    assert "steps far below" in printed and "RETURNN #1738" in printed
    assert not (tmp_path / "out" / "plot.png").exists()


def test_interleaved_stdout_gives_the_same_numbers(tmp_path):
    name = "w2_bv24"
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    assert (
        main(
            [
                "train-report",
                os.path.join(LOGS, name, "stdout.txt"),
                "--file-lengths",
                lengths,
                "--no-plot",
                "-o",
                str(tmp_path / "a"),
            ]
        )
        == 0
    )
    assert main(["train-report", *_logs(name), "--file-lengths", lengths, "--no-plot", "-o", str(tmp_path / "b")]) == 0
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert a.pop("logs") != b.pop("logs")
    assert a == b


@needs_matplotlib
def test_errors_are_one_line_and_leave_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["train-report", str(tmp_path / "missing.log"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 log files do not exist") and err.count("\n") == 1
    assert not out.exists()
    bad = tmp_path / "lengths.json"
    bad.write_text('{"data/part000.hdf": [1]}')
    assert main(["train-report", *_logs("w2_bv24"), "--file-lengths", str(bad), "-o", str(out)]) == 2
    assert "must be [num_seqs, num_frames]" in capsys.readouterr().err
    assert not out.exists()
    assert main(["train-report", *_logs("w2_bv24"), "--max-dropped", "5", "-o", str(out)]) == 2
    assert "max_dropped=5.0 must be a share in [0, 1]" in capsys.readouterr().err
    assert not out.exists()


@needs_matplotlib
def test_a_rerun_replaces_the_whole_directory(tmp_path, capsys):
    """The report directory is one set: a rerun without a plot leaves no plot.png of the earlier run,
    and a directory holding other files is refused before anything is written."""
    name = "w2_bv24"
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    out = tmp_path / "out"
    assert main(["train-report", *_logs(name), "--file-lengths", lengths, "-o", str(out)]) == 0
    assert (out / "plot.png").exists()
    assert main(["train-report", *_logs(name), "--file-lengths", lengths, "--no-plot", "-o", str(out)]) == 0
    assert sorted(os.listdir(out)) == [".i6_shard-set", "report.txt", "summary.json"]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # nothing left beside it
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["train-report", *_logs(name), "--file-lengths", lengths, "-o", str(out)]) == 2
    assert "holds 1 entry that is not part of it ('notes.txt')" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("content", [b"hello world\n", bytes(range(256)) * 12])
def test_a_file_that_is_not_a_returnn_log_is_an_error(tmp_path, capsys, content):
    log = tmp_path / "returnn.torch-distrib-0-1.log"
    log.write_bytes(content)
    assert main(["train-report", str(log), "-o", str(tmp_path / "out"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of the logs hold no line of a RETURNN training") and err.count("\n") == 1, err
    assert "returnn.torch-distrib-0-1.log" in err and not (tmp_path / "out").exists()


def test_expected_steps_under_param_sync(tmp_path, capsys):
    """Under param sync with no sync before every rank is done, each rank would have read all of its files: the
    expected steps are those of the rank with the most work, at its own rate, from the summary's own counts."""
    name = "w2_bv24"
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    assert (
        main(
            [
                "train-report",
                *_logs(name),
                "--file-lengths",
                lengths,
                "--no-plot",
                "--reduce-type",
                "param",
                "--param-sync-step",
                "100000",
                "-o",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["sync"] == {"reduce_type": "param", "param_sync_step": 100000}
    assert (
        "(param sync every 100000 steps: a rank that runs out stops, the others run on to their next sync;" in printed
    )
    for se in summary["sub_epochs"]:
        work = [r["steps"] * r["available_frames"] / r["consumed_frames"] for r in se["ranks"]]
        assert se["expected_steps"] == round(max(work)) > se["steps"], se
    assert (
        main(
            [
                "train-report",
                *_logs(name),
                "--file-lengths",
                lengths,
                "--no-plot",
                "--param-sync-step",
                "3",
                "-o",
                str(tmp_path / "bad"),
            ]
        )
        == 2
    )
    assert "param_sync_step=3 is only used with reduce_type='param'" in capsys.readouterr().err

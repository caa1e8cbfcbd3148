"""The training report puts the plan's simulated steps (``steps_taken``, ``steps_exact`` of the summary.json beside
the plan) beside the logged ones per (sub-epoch, rank), and the planned drop beside the measured one per sub-epoch;
every difference is an alarm naming sub-epoch, rank, planned and logged; where the plan's simulation is not exact it
says so instead of comparing. On the logs of a real 2-rank training (tests/data/returnn_logs/w2_bv24) with a
summary.json written here from the logs' own "Trained N steps" lines (counted with a plain regex)."""

import glob
import json
import os
import re

import pytest

from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.reporting import train_records
from i6_shard.core.reporting.train_report import write_train_report

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs", "w2_bv24")
NUM_RANKS, NUM_EPOCHS = 2, 4


def logs():
    return sorted(glob.glob(os.path.join(LOGS, "returnn.torch-distrib-*.log")))


def trained_steps():
    """Per sub-epoch each rank's "Epoch E: Trained N steps", read with a regex."""
    steps = [[None] * NUM_RANKS for _ in range(NUM_EPOCHS)]
    for r, path in enumerate(logs()):
        for m in re.finditer(r"^Epoch (\d+): Trained (\d+) steps", open(path).read(), flags=re.M):
            steps[int(m[1]) - 1][r] = int(m[2])
    return steps


def plan_dir(tmp_path, *, steps_taken, steps_exact=None, exact=True, reason=None, dropped=None, summary=True):
    """A plan directory: the plan file made with core for the training's files and settings, and a summary.json with
    the given planned steps (steps_exact: the steps taken plus one batch each, unless given)."""
    sizes = core.load_file_sizes(os.path.join(LOGS, "file_sizes.npz"))
    settings = core.PlanSettings(num_shards=NUM_RANKS, partition_epoch=2, num_epochs=NUM_EPOCHS, distribution="returnn")
    d = tmp_path / "plan"
    d.mkdir(parents=True)
    core.save_plan(core.ShardPlan(sizes.keys, sizes.sizes, settings), str(d / "plan.npz"))
    if steps_exact is None and steps_taken is not None:
        steps_exact = [None if row is None else [x + 1 for x in row] for row in steps_taken]
    if summary:
        batching = {
            "simulation": {"exact": exact, "reason": reason},
            "per_sub_epoch": {"dropped_fraction": dropped or [0.0] * NUM_EPOCHS},
        }
        content = {"steps_taken": steps_taken, "steps_exact": steps_exact, "batching": batching}
        (d / "summary.json").write_text(json.dumps(content))
    return d


def report(tmp_path, plan, name="out"):
    lengths = os.path.join(LOGS, "file_lengths.json")
    return write_train_report(
        logs(), str(tmp_path / name), plan_path=str(plan), file_lengths_path=lengths, read_hdf=False, plot=False
    )


def step_alarms(summary):
    return [a for a in summary["alarms"] if a.startswith("steps differ from the plan")]


def measured_drops(tmp_path):
    """The measured drop per sub-epoch, from a report without planned steps."""
    summary = report(tmp_path, plan_dir(tmp_path, steps_taken=None, summary=False), name="bare")
    return [se["dropped_fraction"] for se in summary["sub_epochs"]]


def test_planned_steps_equal_to_the_logged_ones_raise_no_alarm_and_stand_beside_them(tmp_path):
    logged = trained_steps()
    summary = report(tmp_path, plan_dir(tmp_path, steps_taken=logged))
    assert step_alarms(summary) == []
    p = summary["planned_steps"]
    assert (p["exact"], p["compared_records"], p["differences"]) == (True, NUM_EPOCHS * NUM_RANKS, 0)
    for se, row in zip(summary["sub_epochs"], logged):
        assert se["planned_exact"] is True
        assert [x["planned_steps"] for x in se["ranks"]] == row == [x["steps"] for x in se["ranks"]]
        assert [x["planned_batches"] for x in se["ranks"]] == [x + 1 for x in row]
    text = (tmp_path / "out" / "report.txt").read_text()
    assert f"{logged[3][1]} steps (planned {logged[3][1]} of {logged[3][1] + 1} batches)" in text
    assert "0 of 8 finished (sub-epoch, rank) differ" in text


def test_every_step_difference_is_an_alarm_naming_sub_epoch_rank_planned_logged(tmp_path):
    logged = trained_steps()
    edited = [list(row) for row in logged]
    edited[2][1] += 1
    edited[3][0] -= 2
    plan = plan_dir(tmp_path, steps_taken=edited)
    summary = report(tmp_path, plan)
    alarms = step_alarms(summary)
    assert len(alarms) == 2
    assert f"sub-epoch 3 rank 1: planned {logged[2][1] + 1} steps (of {logged[2][1] + 2} batches), logged" in alarms[0]
    assert alarms[0].endswith(f"logged {logged[2][1]}")
    assert f"sub-epoch 4 rank 0: planned {logged[3][0] - 2} steps" in alarms[1]
    assert summary["planned_steps"]["differences"] == 2
    assert "STEPS DIFFER FROM THE PLAN" in (tmp_path / "out" / "report.txt").read_text()
    argv = ["train-report", *logs(), "--plan", str(plan), "--file-lengths", os.path.join(LOGS, "file_lengths.json")]
    argv += ["--no-read-hdf", "--no-plot", "--fail-on-alarm"]
    assert main(argv + ["-o", str(tmp_path / "cli")]) == 1  # the plan's directory, as --plan DIR
    assert step_alarms(json.loads((tmp_path / "cli" / "summary.json").read_text())) == alarms
    fine = plan_dir(tmp_path / "fine", steps_taken=logged)
    argv[argv.index(str(plan))] = str(fine / "plan.npz")  # the plan file, summary.json beside it
    main(argv + ["-o", str(tmp_path / "cli_fine")])
    assert step_alarms(json.loads((tmp_path / "cli_fine" / "summary.json").read_text())) == []


def test_where_the_simulation_is_not_exact_nothing_is_compared_and_the_report_says_so(tmp_path):
    planned = [None, [99, 99], None, [99, 99]]
    summary = report(tmp_path, plan_dir(tmp_path, steps_taken=planned, exact=False, reason="two DataLoader workers"))
    assert [se["planned_exact"] for se in summary["sub_epochs"]] == [False, True, False, True]
    assert all(x["planned_steps"] is None for x in summary["sub_epochs"][0]["ranks"])
    alarms = step_alarms(summary)
    assert len(alarms) == 4 and all("sub-epoch 2" in a or "sub-epoch 4" in a for a in alarms)
    assert any("not exact for sub-epochs [1, 3] (two DataLoader workers)" in n for n in summary["notes"])
    text = (tmp_path / "out" / "report.txt").read_text()
    assert "(plan: not simulated exactly)" in text and "(planned: not simulated exactly)" in text


def test_a_planned_drop_other_than_the_measured_is_an_alarm(tmp_path):
    drops = measured_drops(tmp_path)
    assert any(d > 0 for d in drops)  # not vacuous: the training drops data
    planned = list(drops)
    summary = report(tmp_path, plan_dir(tmp_path / "same", steps_taken=trained_steps(), dropped=planned))
    assert not [a for a in summary["alarms"] if "dropped share differs" in a]
    assert [se["dropped_fraction_planned"] for se in summary["sub_epochs"]] == drops
    planned[1] += 0.01
    summary = report(tmp_path, plan_dir(tmp_path / "other", steps_taken=trained_steps(), dropped=planned), "b")
    alarms = [a for a in summary["alarms"] if "dropped share differs" in a]
    assert len(alarms) == 1 and alarms[0].startswith("dropped share differs from the plan: sub-epoch 2: planned")


def test_a_plan_without_simulated_steps_or_summary_is_said_so(tmp_path):
    summary = report(tmp_path, plan_dir(tmp_path, steps_taken=None, summary=False))
    assert summary["planned_steps"]["found"] is False
    assert any("no summary.json beside the plan" in n for n in summary["notes"])
    d = plan_dir(tmp_path / "b", steps_taken=None, summary=False)
    (d / "summary.json").write_text(json.dumps({"dropped_fraction": 0.1}))
    summary = report(tmp_path, d, name="out_b")
    assert summary["planned_steps"]["simulated"] is False
    assert any("made without batching" in n for n in summary["notes"])
    assert "planned_steps" not in summary["sub_epochs"][0]["ranks"][0]


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1, 2", "is not JSON"),
        ('{"steps_taken": 3, "steps_exact": 3}', "steps_taken is a int, not a list per sub-epoch"),
        ('{"steps_taken": [[1, 2, 3]], "steps_exact": [[1, 2, 3]]}', "not a list of 2 step counts"),
        ('{"steps_taken": [[1, 2]], "steps_exact": [null]}', "do not cover the same sub-epochs"),
    ],
)
def test_a_damaged_plan_summary_is_refused_naming_the_file(tmp_path, content, message):
    d = plan_dir(tmp_path, steps_taken=None, summary=False)
    (d / "summary.json").write_text(content)
    with pytest.raises(ValueError, match=message):
        report(tmp_path, d)
    assert not (tmp_path / "out").exists()


def test_records_above_the_listed_size_carry_the_planned_steps_in_records_tsv(tmp_path, monkeypatch):
    monkeypatch.setattr(train_records, "MAX_LISTED_RECORDS", 3)
    logged = trained_steps()
    summary = report(tmp_path, plan_dir(tmp_path, steps_taken=logged))
    assert summary["records_file"] == "records.tsv"
    rows = [line.split("\t") for line in (tmp_path / "out" / "records.tsv").read_text().splitlines()]
    head = rows[0]
    got = {(int(x[0]), int(x[1])): (x[head.index("steps")], x[head.index("planned_steps")]) for x in rows[1:]}
    assert got == {(e + 1, r): (str(logged[e][r]),) * 2 for e in range(NUM_EPOCHS) for r in range(NUM_RANKS)}

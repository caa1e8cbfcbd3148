"""The length filter counted one way by the plan and the training report: on the logs of a real 2-rank training with
``max_seq_length={"data": 40}`` (tests/data/engine_logs/max_seq_len; its files' sizes in bytes, as RETURNN cut them,
in file_sizes.npz), the plan reports the filter's removal apart from the drop, its drop is of the frames the filter
keeps, and train-report, with the filter or without, finds every step and drop as planned and raises no alarm."""

import glob
import json
import os
import re

import numpy as np
import pytest

from i6_shard.cli import main
from i6_shard.core.io.cost_archive import save_file_costs
from i6_shard.core.reporting import train_report
from tests.costs_data import frames_costs

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "engine_logs", "max_seq_len")
KEYS = [f"data/part{i:03d}.hdf" for i in range(16)]
MAX_LEN = 40


def seq_lengths():
    with open(os.path.join(LOGS, "seq_lengths.json")) as f:
        return json.load(f)


def logs():
    return sorted(glob.glob(os.path.join(LOGS, "returnn.torch-distrib-*.log")))


def trained_steps():
    steps = [[None, None] for _ in range(4)]
    for r, path in enumerate(logs()):
        for m in re.finditer(r"^Epoch (\d+): Trained (\d+) steps", open(path).read(), flags=re.M):
            steps[int(m[1]) - 1][r] = int(m[2])
    return steps


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("filter")
    seqs = seq_lengths()
    save_file_costs(frames_costs(KEYS, [np.array(seqs[k]) for k in KEYS]), str(d / "costs.npz"))
    argv = ["plan", "--sizes", os.path.join(LOGS, "file_sizes.npz"), "--lengths", str(d / "costs.npz")]
    argv += ["--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4", "--batch-size", "300"]
    argv += ["--max-seqs", "10", "--max-seq-length", json.dumps({"data": MAX_LEN}), "--no-plot", "-o", str(d / "plan")]
    assert main(argv) == 0
    return d / "plan"


def test_the_plan_reports_the_filter_apart_from_the_drop(plan_dir):
    summary = json.loads((plan_dir / "summary.json").read_text())
    assert summary["batching"]["simulation"]["exact"] is True
    assert summary["steps_taken"] == trained_steps()
    seqs = seq_lengths()
    # what the filter removes, counted here from the lengths: the same for every planned sub-epoch's files
    removed = sum(n for k in KEYS for n in seqs[k] if n > MAX_LEN) / sum(n for k in KEYS for n in seqs[k])
    assert summary["filtered_fraction_predicted"] > 0.1 and 0.1 < removed < 0.5
    per = summary["batching"]["per_sub_epoch"]
    assert len(per["filtered_fraction"]) == len(per["dropped_fraction"])
    text = (plan_dir / "report.txt").read_text()
    assert "removed by the length filter (max_seq_length=40), not counted as dropped" in text


def _filtered_from_json(keys, *, max_seq_length, min_seq_length, base_dir):
    seqs = seq_lengths()
    limit = max_seq_length["data"]
    return {k: (sum(n > limit for n in seqs[k]), sum(n for n in seqs[k] if n > limit)) for k in keys}


@pytest.mark.parametrize("given", [True, False])
def test_train_report_finds_every_step_and_drop_as_planned(plan_dir, tmp_path, monkeypatch, given):
    # the HDF files are not kept: the filter's removals per file come from their lengths, as h5py read them
    monkeypatch.setattr(train_report, "filtered_hdf_lengths", _filtered_from_json)
    summary = train_report.write_train_report(
        logs(),
        str(tmp_path / "out"),
        plan_path=str(plan_dir),
        file_lengths_path=os.path.join(LOGS, "file_lengths.json"),
        read_hdf=False,
        plot=False,
        max_seq_length={"data": MAX_LEN} if given else None,
    )
    p = summary["planned_steps"]
    assert (p["exact"], p["compared_records"], p["differences"], p["drop_differences"]) == (True, 8, 0, 0)
    assert summary["alarms"] == []
    for se in summary["sub_epochs"]:
        assert se["dropped_fraction_planned"] == se["dropped_fraction"]
    assert any(n.startswith("as the plan simulated it exactly") for n in summary["notes"])
    assert given or any("the plan simulated a length filter" in n for n in summary["notes"])

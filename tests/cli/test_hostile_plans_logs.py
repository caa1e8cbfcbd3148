"""Edited plans in every reader, and damaged training logs: each is one error line (exit status 2) naming the plan
file or the log and its line, without a traceback and with nothing written."""

import os

import numpy as np
import pytest

from i6_shard.cli import main
from i6_shard.core.io.plan_integrity import check_stored_layout
from tests.plan_edits import edit_npz, empty_bin, long_distribution, repeat_file, vanish_file

from .test_train_report_hostile import _logs, _one_error_line, plans  # noqa: F401 (a fixture)

STORED = os.path.join(os.path.dirname(__file__), "..", "data", "plans", "format2_flexible_auto.npz")


EDITS = {
    "repeat": (repeat_file, "full epoch 0 (layout 0): the bins do not cover every file entry exactly once"),
    "vanish": (vanish_file, "full epoch 0 (layout 0): the bins do not cover every file entry exactly once"),
    "empty bin": (empty_bin, "full epoch 0 (layout 0): bin 0 of 6 is empty"),
    "10M distribution": (long_distribution, "holds settings no plan can have: distribution='xxx"),
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("command", ["report", "compare-plans"])
def test_an_edited_flexible_auto_plan_is_one_line_naming_the_file(tmp_path, capsys, edit, command):
    """``report`` crashed with an AssertionError traceback; a 10 M-character distribution did not name the file."""
    fn, message = EDITS[edit]
    path = edit_npz(STORED, tmp_path / "edited.npz", fn)
    argv = ["report", path] if command == "report" else ["compare-plans", STORED, path, "--resume-epoch", "2"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path!r}"), err
    assert message in err and err.count("\n") == 1 and len(err) < 800 and "Traceback" not in err, err


@pytest.mark.parametrize("edit", ["repeat", "empty bin", "10M distribution"])
def test_an_edited_plan_under_train_report_names_the_plan(tmp_path, capsys, plans, edit):  # noqa: F811
    fn, message = EDITS[edit]
    path = edit_npz(plans["plan"], tmp_path / "edited.npz", fn)
    paths, _ = _logs(tmp_path)
    err = _one_error_line(capsys, ["train-report", *paths, "--plan", path], tmp_path)
    assert err.startswith(f"error: {path!r}") and message.split(":")[0] in err, err


def test_the_one_integrity_function_refuses_what_returnn_would_assert():
    order, bounds = np.array([2, 0, 1]), np.array([0, 1, 1, 3])
    with pytest.raises(ValueError, match=r"^'x.npz' is corrupt: full epoch 3 \(layout 1\): bin 1 of 3 is empty"):
        check_stored_layout(order, bounds, path="x.npz", full_epoch_0idx=3, layout_idx=1, num_files=3)
    check_stored_layout(order, np.array([0, 1, 2, 3]), path="x.npz", full_epoch_0idx=3, layout_idx=1, num_files=3)


LINES = {
    "complete 1.2.3%": (
        "ep 1 train, step 0, mse 0.5, num_seqs 3, complete 1.2.3%\n",
        "complete '1.2.3'% is not a share of the sub-epoch",
    ),
    "files of ints": (
        "<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: [1, 2]\n",
        "the files of epoch 1 are not file trees: file tree entry 0 has a leaf of type int",
    ),
    "files of None in a tuple": (
        "<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: [('a.hdf', None)]\n",
        "the files of epoch 1 are not file trees: file tree entry 0 has a leaf of type NoneType",
    ),
}


@pytest.mark.parametrize("case", list(LINES))
def test_a_damaged_line_names_the_log_and_the_line(tmp_path, capsys, case):
    """``could not convert string to float: '1.2.3'`` and ``sequence item 0: expected str instance, int found``
    named neither the log nor the line."""
    tail, message = LINES[case]
    paths, num_lines = _logs(tmp_path, tail2=tail.encode())
    err = _one_error_line(capsys, ["train-report", *paths], tmp_path)
    assert err.startswith(f"error: returnn.torch-distrib-2-4.log:{num_lines}: {message}"), err


@pytest.mark.parametrize("edit", list(EDITS))
def test_the_returnn_side_reads_refuse_an_edited_plan_naming_it(tmp_path, edit):
    """What ShardedDistributeFilesDataset reads at each rank's start-up: the head, then its full epoch's layout."""
    from i6_shard.core.io.plan_file import read_plan_head, read_plan_layout

    fn, message = EDITS[edit]
    path = edit_npz(STORED, tmp_path / "edited.npz", fn)
    with pytest.raises(ValueError) as info:
        head = read_plan_head(path, decode_keys=False)
        read_plan_layout(path, full_epoch_0idx=0, num_files=head.num_files)
    assert str(info.value).startswith(repr(path)) and message in str(info.value), info.value

"""Huge records in training logs: the files of a "using files" line are tokenized (not parsed into an AST), one copy
of each name, and not read at all above MAX_FILES_LINE_CHARS (noted); above MAX_LISTED_RECORDS (sub-epoch, rank)
records the outputs list them in records.tsv, streamed, and summary.json and report.txt keep the per-sub-epoch
figures. The memory these bound is measured in benchmarks/bench_train_report_memory.py."""

import ast
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.cli import main
from i6_shard.core.io import log_files_line
from i6_shard.core.io.log_files_line import FilesLiteralError, parse_files_literal
from i6_shard.core.io.returnn_log import parse_rank_log
from i6_shard.core.reporting import train_records
from i6_shard.core.reporting.train_report import train_summary_json
from tests.deps import SISYPHUS_REASON
from tests.strategies import examples, file_trees

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs")
CASE = os.path.join(LOGS, "w4_bv24")
FILES = "<DistributeFilesDataset 'train' epoch={e}>: using files for epoch {e}: {files}"


@settings(max_examples=examples(200), deadline=None)
@given(trees=st.lists(file_trees(), max_size=6))
def test_the_tokenizer_reads_what_python_reads(trees):
    assert parse_files_literal(repr(trees)) == ast.literal_eval(repr(trees)) == trees


@pytest.mark.parametrize("text", ["[1, 2]", "['a', None]", "['a'", "['a'] x", "('a',)", "['a' 'b']", "[{'a'}]"])
def test_what_is_no_list_of_file_trees_is_refused(text):
    with pytest.raises(FilesLiteralError):
        parse_files_literal(text)


def test_each_file_name_is_held_once_however_often_the_log_lists_it():
    names = [f"/data/part{i:04d}.hdf" for i in range(50)]
    lines = []
    for e in range(1, 9):
        lines += [FILES.format(e=e, files=repr(names[e % 2 :: 2])), f"start epoch {e} global train step 0"]
    log = parse_rank_log(lines, rank=0, source="x.log")
    one, three = log.sub_epochs[1].files, log.sub_epochs[3].files
    assert one == three and all(a is b for a, b in zip(one, three))


def test_the_files_of_a_line_above_the_cap_are_not_read_and_said_so(tmp_path, monkeypatch, capsys):
    """A 2 MiB "using files" line took 1.05 GB, a 16 MiB one 7.9 GB: their files are now not parsed."""
    monkeypatch.setattr(log_files_line, "MAX_FILES_LINE_CHARS", 1000)
    long_files = repr([f"data/part{i:06d}.hdf" for i in range(100)])
    assert len(long_files) > 1000
    log = tmp_path / "returnn.log"
    log.write_text(
        "RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/python\n"
        + FILES.format(e=1, files=long_files)
        + "\nstart epoch 1 global train step 0\nep 1 train, step 0, mse 0.5, num_seqs 3, complete 100.00%\n"
        "Epoch 1: Trained 1 steps, 0:00:00 elapsed\n"
    )
    parsed = parse_rank_log(open(log).read().splitlines(), rank=0, source="returnn.log")
    assert parsed.sub_epochs[1].files is None
    assert parsed.notes == [
        'the files of 1 "using files" lines are longer than 1,000 characters and were not read, so they are not '
        f"compared: returnn.log:2 (sub-epoch 1, {len(long_files):,} characters)"
    ]
    assert main(["train-report", str(log), "--no-plot", "-o", str(tmp_path / "out")]) == 0
    assert parsed.notes[0] in open(tmp_path / "out" / "report.txt").read()


def _report(tmp_path, name, monkeypatch=None, limit=None):
    if monkeypatch is not None:
        monkeypatch.setattr(train_records, "MAX_LISTED_RECORDS", limit)
    logs = [os.path.join(CASE, f"returnn.torch-distrib-{r}-4.log") for r in range(4)]
    lengths = os.path.join(CASE, "file_lengths.json")
    out = tmp_path / name
    assert main(["train-report", *logs, "--file-lengths", lengths, "--no-read-hdf", "--no-plot", "-o", str(out)]) == 0
    return out


def test_records_above_the_listed_size_are_streamed_to_records_tsv(tmp_path, monkeypatch):
    """A log of 1,047,552 (sub-epoch, rank) records peaked at 2.93 GB and wrote 303 MB of report files."""
    full = _report(tmp_path, "full")
    small = _report(tmp_path, "small", monkeypatch, 4)
    assert not (full / "records.tsv").exists() and (small / "records.tsv").exists()
    with open(full / "summary.json") as f:
        listed = json.load(f)
    with open(small / "summary.json") as f:
        summarized = json.load(f)
    rows = [line.split("\t") for line in open(small / "records.tsv").read().splitlines()]
    assert tuple(rows[0]) == train_records.RECORD_COLUMNS
    expected = []
    for se in listed["sub_epochs"]:
        for x in se["ranks"]:
            cells = [se["epoch"]] + [x.get(c) for c in train_records.RECORD_COLUMNS[1:]]
            expected.append(["" if c is None else str(c).lower() if isinstance(c, bool) else str(c) for c in cells])
    assert rows[1:] == expected and len(expected) > 4
    assert all(se["ranks"] is None for se in summarized["sub_epochs"])
    assert summarized["records_file"] == "records.tsv"
    assert any("records, more than the 4 this summary and report list" in n for n in summarized["notes"])
    for se_full, se_small in zip(listed["sub_epochs"], summarized["sub_epochs"]):
        assert {k: v for k, v in se_full.items() if k != "ranks"} == {k: v for k, v in se_small.items() if k != "ranks"}
    report = open(small / "report.txt").read()
    assert "rank  0:" not in report and "rank  0:" in open(full / "report.txt").read()


def test_the_streamed_summary_is_the_same_bytes(tmp_path):
    out = _report(tmp_path, "full")
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert open(out / "summary.json").read() == train_summary_json(summary)


def test_the_report_job_asks_for_two_bytes_per_log_byte():
    """The documented rule (docs/reliability.md): 1 GB and two bytes per log byte, for the file lists of the "using
    files" lines (measured: 159 bytes per record of 183 log bytes, benchmarks/bench_train_report_memory.py); the records
    wait in a scratch file."""
    jobs = pytest.importorskip("i6_shard.jobs.train_report", reason=SISYPHUS_REASON)
    for log_bytes in (10**6, 40 * 10**6, 10**9):
        mem_gb = jobs.train_report_rqmt(log_bytes=log_bytes)[0]["mem"]
        assert mem_gb * 1e9 >= 1e9 + 2 * log_bytes


def test_records_past_the_cap_are_refused_at_their_line_before_they_are_made(tmp_path, monkeypatch):
    """A log holding more records than a report holds was parsed whole (memory per record) before it was refused."""
    from i6_shard.core.io.returnn_log import read_training_logs
    from i6_shard.core.pure import training

    monkeypatch.setattr(training, "MAX_REPORT_RECORDS", 10)
    log = tmp_path / "log.run.1"
    lines = [f"[default{r}]:start epoch {e} global train step 0" for e in range(1, 5) for r in range(3)]
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        read_training_logs([str(log)])
    assert str(info.value).startswith(
        "log.run.1 [rank 1]:11: sub-epoch 4 of rank 1 takes the logs past the 10 (sub-epoch, rank) records a report "
        "holds"
    ), info.value

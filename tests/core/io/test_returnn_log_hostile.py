"""RETURNN logs that are huge, damaged or crafted: read line by line in bounded memory (a 1 GiB line is never
held whole), numbers bounded before anything is allocated for them, each refusal one line naming the log and
its line."""

import os
import shutil
import tracemalloc

import pytest

from i6_shard.core.io import returnn_log
from i6_shard.core.io.returnn_log import parse_rank_log, read_training_logs

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs")
REAL = os.path.join(LOGS, "w2_bv24", "returnn.torch-distrib-{}-2.log")


def _two_rank_logs(tmp_path, tail0=b"", *, name0="returnn.torch-distrib-0-2.log"):
    """The real logs of a 2-rank training, rank 0's with ``tail0`` appended."""
    shutil.copy(REAL.format(1), tmp_path / "returnn.torch-distrib-1-2.log")
    with open(REAL.format(0), "rb") as f:
        (tmp_path / name0).write_bytes(f.read() + tail0)
    return [str(tmp_path / name0), str(tmp_path / "returnn.torch-distrib-1-2.log")]


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_big_log_is_read_line_by_line(tmp_path):
    """10 MB of lines the report does not use (e.g. a model's own prints): memory stays far below the file."""
    noise = (b"some other line of the training, as a model prints them " * 3 + b"\n") * 64_000
    paths = _two_rank_logs(tmp_path, noise)
    assert os.path.getsize(paths[0]) > 10 * 2**20
    peak = _peak_bytes(lambda: read_training_logs(paths))
    assert peak < 2**20, peak


def test_a_line_without_newline_is_not_read_whole(tmp_path, monkeypatch):
    """A line longer than the limit is cut there and the rest skipped unread into memory; the report still reads."""
    monkeypatch.setattr(returnn_log, "MAX_LINE_CHARS", 2**20, raising=False)
    paths = _two_rank_logs(tmp_path, b"x" * (30 * 2**20))  # 30 MB, no newline
    peak = _peak_bytes(lambda: read_training_logs(paths))
    assert peak < 8 * 2**20, peak
    assert read_training_logs(paths).ranks[0].sub_epochs[1].finished


def test_a_files_line_cut_at_the_limit_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(returnn_log, "MAX_LINE_CHARS", 2**16, raising=False)
    files = "[" + ", ".join(f"'data/part{i:06d}.hdf'" for i in range(5000)) + "]"
    line = f"<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: {files}\n"
    paths = _two_rank_logs(tmp_path, line.encode())
    num_lines = open(paths[0]).read().count("\n")
    with pytest.raises(ValueError) as info:
        read_training_logs(paths)
    msg = str(info.value)
    assert msg.startswith(f"returnn.torch-distrib-0-2.log:{num_lines}: the files of epoch 1 are not a Python literal")
    assert "longer than 65,536 characters and was cut there" in msg and len(msg) < 600


STEP = "ep 1 train, step {step}, mse 0.5, num_seqs {seqs}, sum_size:time:var-unk:data {frames}, complete 60.00%\n"


@pytest.mark.parametrize(
    "tail, message",
    [
        (STEP.format(step=3_000_000_000, seqs=3, frames=20), "step 3000000000 is more than 1,000,000; it would leave"),
        (STEP.format(step=0, seqs=10**30, frames=20), f"num_seqs {10**30} is more than 4,294,967,295"),
        (STEP.format(step=0, seqs=3, frames=10**30), f"sum_size:time:var-unk:data {10**30} is more than 4,294,967,295"),
        (
            STEP.format(step=0, seqs=3, frames="9" * 5000),
            "sum_size:time:var-unk:data 99999999999999999999...(5000 digits)",
        ),
        (f"ep 1 train num_seqs: {10**30}\n", f"num_seqs {10**30} is more than 4,294,967,295"),
        (
            STEP.format(step=0, seqs=3, frames=20) + "Epoch 1: Trained 99999999999999999999 steps, 0:00:01 elapsed\n",
            "trained steps 99999999999999999999 is more than",
        ),
        (
            STEP.format(step=0, seqs=3, frames=20).replace("ep 1 ", "ep 99999999999999 "),
            "sub-epoch 99999999999999 is more than 2,147,483,647; no training runs that many",
        ),
        (STEP.format(step=0, seqs=3, frames=20).replace("60.00", "1" * 400), "is not a share of the sub-epoch"),
    ],
    ids=["step", "step_num_seqs", "sum_size", "5000_digits", "dataset_num_seqs", "trained_steps", "epoch", "complete"],
)
def test_numbers_out_of_bounds_name_the_line(tmp_path, tail, message):
    """Each number is bounded before anything is allocated for it (a step of 3e9 took 14 GB before)."""
    paths = _two_rank_logs(tmp_path, tail.encode())
    num_lines = open(paths[0]).read().count("\n")
    with pytest.raises(ValueError) as info:
        read_training_logs(paths)
    msg = str(info.value)
    assert msg.startswith(f"returnn.torch-distrib-0-2.log:{num_lines}: ") and message in msg, msg
    assert "remove it, or give the log RETURNN wrote" in msg and len(msg) < 500


def test_lost_steps_are_bounded_over_the_whole_log():
    """Many moderate gaps add up: one log may leave MAX_LOST_STEPS steps without a line in all."""
    gap = returnn_log.MAX_LOST_STEPS // 4
    lines = [STEP.format(step=(k + 1) * gap, seqs=1, frames=1) for k in range(4)]
    rec = parse_rank_log(lines, rank=0, source="x.log").sub_epochs[1]
    assert rec.num_steps == 4 * gap + 1 and (rec.step_seqs == -1).sum() == 4 * gap + 1 - 4
    with pytest.raises(ValueError, match=r"^x\.log:5: step 1250000 is more than 1,000,004"):
        parse_rank_log(lines + [STEP.format(step=5 * gap, seqs=1, frames=1)], rank=0, source="x.log")


def test_a_huge_torchrun_rank_names_the_line(tmp_path):
    path = tmp_path / "log.run.1"
    with open(os.path.join(LOGS, "w2_bv24", "stdout.txt"), "rb") as f:
        path.write_bytes(f.read() + b"[default999999999999]:RETURNN starting up, x, cwd /x, Python y\n")
    num_lines = path.read_text().count("\n")
    with pytest.raises(ValueError) as info:
        read_training_logs([str(path)])
    assert str(info.value).startswith(f"log.run.1:{num_lines}: torchrun rank 999999999999 is more than 65,535")


@pytest.mark.parametrize(
    "name, message",
    [
        ("returnn.torch-distrib-0-999999999999.log", "world size 999999999999 is more than 65,536"),
        ("returnn.torch-distrib-999999999999-999999999999.log", "world size 999999999999 is more than 65,536"),
        ("returnn.torch-distrib-5-2.log", "rank 5 is outside the world size 2"),
    ],
)
def test_a_huge_world_size_in_a_name_is_refused_before_reading(tmp_path, name, message):
    paths = _two_rank_logs(tmp_path, name0=name)
    with pytest.raises(ValueError) as info:
        read_training_logs(paths)
    assert name in str(info.value) and message in str(info.value) and "names RETURNN wrote" in str(info.value)


def test_missing_ranks_are_listed_bounded(tmp_path):
    paths = _two_rank_logs(tmp_path, name0="returnn.torch-distrib-0-60000.log")[:1]
    with pytest.raises(
        ValueError,
        match=r"^logs of ranks \[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, \.\.\.\] \(59,999 in all\) "
        r"of 60000 are missing",
    ):
        read_training_logs(paths)


def test_the_stdout_names_its_own_lines():
    """The interleaved stdout is read in one pass; a rank's sub-epoch names the line of the stdout it began on."""
    path = os.path.join(LOGS, "w2_bv24", "stdout.txt")
    lines = open(path).read().splitlines()
    log = read_training_logs([path])
    rec = log.ranks[1].sub_epochs[2]
    assert lines[rec.line - 1].startswith("[default1]:") and " epoch 2" in lines[rec.line - 1].replace(
        "ep 2", " epoch 2"
    )


def test_a_few_kb_naming_thousands_of_ranks_and_sub_epochs_is_refused(tmp_path):
    """100 KB of stdout made 1.1 M (sub-epoch, rank) records for the report (3,000 x 3,000 took 7 GB and 40 s)."""
    path = tmp_path / "log.run.1"
    with open(path, "w") as f:
        f.writelines(f"[default{r}]:start epoch 1 global train step 0\n" for r in range(1100))
        f.writelines(f"[default0]:start epoch {e} global train step 0\n" for e in range(2, 1001))
    with pytest.raises(
        ValueError,
        match=r"^the logs name 1,000 sub-epochs of 1,100 ranks, 1,100,000 \(sub-epoch, "
        r"rank\) records, more than the 1,048,576 a report holds; give the logs",
    ):
        read_training_logs([str(path)])

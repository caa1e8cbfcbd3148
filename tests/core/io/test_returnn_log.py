"""Reading RETURNN's real training logs (tests/data/returnn_logs, made by real torchrun CPU trainings):
per-rank files and the interleaved torchrun stdout give the same records; preloaded file lines (DFD
worker process) land on their sub-epoch; restarts keep the last run; bad inputs fail naming the fix."""

import glob
import json
import os
import re

import pytest

from i6_shard.core.io.returnn_log import parse_rank_log, rank_of_log_file, read_training_logs, split_torchrun_stdout

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs")
CASES = sorted(os.path.basename(d) for d in glob.glob(os.path.join(LOGS, "*")) if os.path.isdir(d))


def case_logs(name):
    return sorted(glob.glob(os.path.join(LOGS, name, "returnn.torch-distrib-*.log")))


def case_settings(name):
    with open(os.path.join(LOGS, name, "case.json")) as f:
        return json.load(f)


def test_the_committed_cases_cover_what_the_parser_must_handle():
    settings = {name: case_settings(name) for name in CASES}
    assert {s["num_ranks"] for s in settings.values()} == {2, 4}
    assert {s["behavior_version"] >= 33 for s in settings.values()} == {True, False}
    assert {s["use_worker_proc"] for s in settings.values()} == {True, False}
    assert {s["sharding_fix"] for s in settings.values()} == {True, False}
    assert {s["log_batch_size"] for s in settings.values()} == {True, False}


@pytest.mark.parametrize("name", CASES)
def test_every_rank_and_sub_epoch_is_read_with_its_files_and_steps(name):
    settings = case_settings(name)
    log = read_training_logs(case_logs(name))
    assert log.num_ranks == settings["num_ranks"]
    assert log.epochs == list(range(1, settings["num_epochs"] + 1))
    for rank_log in log.ranks:
        text = open(rank_log.path).read()
        assert rank_log.num_starts == 1 and rank_log.cwd.endswith("/run")
        for epoch, rec in rank_log.sub_epochs.items():
            assert rec.finished and rec.trained_steps == rec.num_steps
            # the step count and the file list, counted here with plain regexes over the text
            steps = re.findall(rf"^ep {epoch} train, step (\d+),", text, flags=re.M)
            assert [int(s) for s in steps] == list(range(rec.num_steps))
            files_line = re.search(rf"using files for epoch {epoch}: \[(.*)\]$", text, flags=re.M).group(1)
            assert rec.file_keys == re.findall(r"'([^']+)'", files_line)
            if settings["log_batch_size"]:
                assert (rec.step_seqs > 0).all() and (rec.step_frames > 0).all()
                assert rank_log.frames_dim == "time:var-unk:data"
            else:
                assert (rec.step_seqs == -1).all() and (rec.step_frames == -1).all()
                assert rank_log.frames_dim is None
            assert rec.dataset_num_seqs == int(
                re.search(rf"^ep {epoch} train num_seqs: (\d+)$", text, flags=re.M).group(1)
            )


def test_worker_process_preloads_the_next_files_but_they_go_to_their_sub_epoch():
    # Same files, seeds and batching; with the worker process RETURNN logs epoch E+1's files during epoch E
    # (and the files of epoch 5, after the last one). The records must be the same.
    plain = read_training_logs(case_logs("w2_bv24"))
    worker = read_training_logs(case_logs("w2_bv38_worker"))
    text = open(worker.ranks[0].path).read()
    assert "using files for epoch 5:" in text
    assert text.index("using files for epoch 2:") < text.index("start epoch 2 ")
    assert 5 not in worker.ranks[0].sub_epochs
    for a, b in zip(plain.ranks, worker.ranks):
        for epoch in plain.epochs:
            ra, rb = a.sub_epochs[epoch], b.sub_epochs[epoch]
            assert ra.file_keys == rb.file_keys
            assert ra.step_seqs.tolist() == rb.step_seqs.tolist()
            assert ra.step_frames.tolist() == rb.step_frames.tolist()


def test_behavior_version_33_logs_one_complete_for_all_ranks():
    old = read_training_logs(case_logs("w2_bv24"))
    new = read_training_logs(case_logs("w2_bv38_worker"))
    for epoch in old.epochs:
        # below 33 each rank logs its own share of sequences; from 33 on the mean over the ranks
        per_rank = [r.sub_epochs[epoch] for r in old.ranks]
        for rec in per_rank:
            assert rec.step_complete[-1] == pytest.approx(rec.step_seqs.sum() / rec.dataset_num_seqs, abs=1e-4)
        synced = [r.sub_epochs[epoch] for r in new.ranks]
        assert synced[0].step_complete.tolist() == synced[1].step_complete.tolist()
        mean = sum(r.step_seqs.sum() / r.dataset_num_seqs for r in per_rank) / 2
        assert synced[0].step_complete[-1] == pytest.approx(mean, abs=1e-4)


def test_interleaved_torchrun_stdout_gives_the_per_rank_records():
    files = read_training_logs(case_logs("w2_bv24"))
    stdout = read_training_logs([os.path.join(LOGS, "w2_bv24", "stdout.txt")])
    assert [r.source for r in stdout.ranks] == ["stdout.txt [rank 0]", "stdout.txt [rank 1]"]
    lines = open(os.path.join(LOGS, "w2_bv24", "stdout.txt")).read().splitlines()
    prefixes = [line[:11] for line in lines if line.startswith("[default")]
    assert any(a != b for a, b in zip(prefixes, prefixes[1:]))  # the ranks' lines do interleave
    for a, b in zip(files.ranks, stdout.ranks):
        assert a.rank == b.rank and a.sub_epochs.keys() == b.sub_epochs.keys()
        for epoch in a.sub_epochs:
            ra, rb = a.sub_epochs[epoch], b.sub_epochs[epoch]
            assert (ra.file_keys, ra.dataset_num_seqs, ra.trained_steps) == (
                rb.file_keys,
                rb.dataset_num_seqs,
                rb.trained_steps,
            )
            assert ra.step_frames.tolist() == rb.step_frames.tolist()


def test_a_restart_runs_an_epoch_again_and_the_last_run_counts(tmp_path):
    path = case_logs("w2_bv24")[0]
    lines = open(path).read().splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("ep 3 train, step 1,"))
    # killed inside sub-epoch 3, then started again from the beginning: RETURNN appends to the log
    restarted = tmp_path / os.path.basename(path)
    restarted.write_text("\n".join(lines[: cut + 1] + lines) + "\n")
    partial = parse_rank_log(lines[: cut + 1], rank=0, source="cut")
    assert not partial.sub_epochs[3].finished and partial.sub_epochs[3].num_steps == 2
    again = parse_rank_log(restarted.read_text().splitlines(), rank=0, source="restarted")
    whole = parse_rank_log(lines, rank=0, source="whole")
    assert again.num_starts == 2
    for epoch, rec in whole.sub_epochs.items():
        assert again.sub_epochs[epoch].step_frames.tolist() == rec.step_frames.tolist()
        assert again.sub_epochs[epoch].finished


def test_files_logged_again_after_a_restart_replace_the_earlier_ones():
    """The files of an epoch logged again after a restart replace the earlier run's (not a second instance); an epoch
    the restart does not log again keeps its files; two instances in one run give both lists."""
    files = "<DistributeFilesDataset 'train' epoch={e}>: using files for epoch {e}: {files!r}"
    start = "RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/python"
    lines = [start, files.format(e=1, files=["a"]), "start epoch 1 global train step 0"]
    lines += [
        files.format(e=2, files=["b"]),
        start,
        files.format(e=2, files=["c"]),
        "start epoch 2 global train step 0",
    ]
    lines += [files.format(e=3, files=["d"]), files.format(e=3, files=["e"]), files.format(e=3, files=["d"])]
    lines += ["start epoch 3 global train step 0"]
    log = parse_rank_log(lines, rank=0, source="x")
    got = {e: (rec.file_keys, rec.num_instances) for e, rec in log.sub_epochs.items()}
    assert got == {1: (["a"], 1), 2: (["c"], 1), 3: (["d", "e"], 2)}


def test_a_lost_step_line_leaves_that_step_unknown():
    lines = open(case_logs("w2_bv24")[0]).read().splitlines()
    lines = [line for line in lines if not line.startswith("ep 1 train, step 1,")]
    rec = parse_rank_log(lines, rank=0, source="x").sub_epochs[1]
    assert rec.step_seqs[1] == -1 and rec.step_frames[1] == -1 and rec.step_seqs[0] > 0


def test_other_datasets_files_are_not_taken():
    lines = [
        "<DistributeFilesDataset 'dev' epoch=1>: using files for epoch 1: ['dev.hdf']",
        "start epoch 1 global train step 0 with effective learning rate 0.1 ...",
        "<ShardedDistributeFilesDataset 'train' epoch=1>: using files for epoch 1: [('a.hdf', 'b.hdf')]",
    ]
    rec = parse_rank_log(lines, rank=0, source="x").sub_epochs[1]
    assert rec.file_keys == ["a.hdf:b.hdf"] and not rec.finished


def test_bad_inputs_fail_naming_the_fix(tmp_path):
    logs = case_logs("w4_bv24")
    with pytest.raises(ValueError, match=r"logs of ranks \[2\] of 4 are missing"):
        read_training_logs([p for p in logs if "-2-4" not in p])
    with pytest.raises(ValueError, match="rank 0 is in two logs"):
        read_training_logs([logs[0], logs[0]] + logs[1:])
    with pytest.raises(FileNotFoundError, match="1 log files do not exist"):
        read_training_logs([str(tmp_path / "nope.log")])
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)  # would block a reader: refused without opening it
    with pytest.raises(ValueError, match="1 log files are not regular files .*FIFO"):
        read_training_logs([str(fifo)])
    plain = tmp_path / "returnn.log"
    plain.write_text("RETURNN starting up\n")
    with pytest.raises(ValueError, match="neither a per-rank RETURNN log .* --tee=3"):
        read_training_logs([str(plain)] + logs)
    with pytest.raises(ValueError, match="no log files given"):
        read_training_logs([])
    with pytest.raises(ValueError, match="not a Python literal"):
        parse_rank_log(
            ["<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: ['a.hdf', 'b"], rank=0, source="x"
        )


def test_names_and_prefixes():
    assert rank_of_log_file("/w/returnn.torch-distrib-12-16.log") == (12, 16)
    assert rank_of_log_file("/w/returnn.horovod-1-2.log") == (1, 2)
    assert rank_of_log_file("/w/returnn.log") is None
    assert split_torchrun_stdout(["[trainer3]:x", "[default0]:", "W1202 launcher line"]) == {3: ["x"], 0: [""]}

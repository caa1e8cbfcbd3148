"""The training report on real logs of the engine's modes (tests/data/engine_logs, 2-rank torchrun CPU trainings
with RETURNN 1.20261022, behavior_version 37): DataLoader workers that shard (several dataset instances per rank,
each with its own bins), a MultiEpochDataset that renames the DistributeFilesDataset, a max_seq_length filter,
logs without file lines. The counts compared with are made here with plain regexes over the logs."""

import glob
import json
import os
import re

import pytest

from i6_shard.core.io.file_lengths import load_file_lengths
from i6_shard.core.io.returnn_log import read_training_logs
from i6_shard.core.pure.training import analyze_training
from i6_shard.core.reporting.train_report import render_train_report

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "engine_logs")
SHARDING_ALARMS = ("#1738", "read twice", "never read", "given to no rank", "than planned", "offered fewer")


def logs_of(name):
    return sorted(glob.glob(os.path.join(LOGS, name, "returnn.torch-distrib-*.log")))


def lengths_of(name):
    return load_file_lengths(os.path.join(LOGS, name, "file_lengths.json"))


def seq_lengths_of(name):
    with open(os.path.join(LOGS, name, "seq_lengths.json")) as f:
        return json.load(f)


def file_lines(text):
    """(dataset name, epoch, keys) of every 'using files' line, each distinct line once."""
    out = []
    for m in re.finditer(r"^<\w+ '([^']*)' epoch=\S+>: using files for epoch (\d+): \[(.*)\]$", text, flags=re.M):
        entry = (m[1], int(m[2]), tuple(re.findall(r"'([^']+)'", m[3])))
        if entry not in out:
            out.append(entry)
    return out


def independent_counts(name, *, multi_epoch=1, max_len=None):
    """Per (sub-epoch, rank): frames consumed (the step lines), frames available (the files of all of its lines,
    less the sequences longer than max_len), and the keys."""
    seqs = seq_lengths_of(name)
    out = {}
    for rank, path in enumerate(logs_of(name)):
        text = open(path).read()
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?sum_size:time:var-unk:data (\d+)", text, flags=re.M):
            entry = out.setdefault((int(m[1]), rank), [0, 0, []])
            entry[0] += int(m[2])
        for _, epoch, keys in file_lines(text):
            entry = out.setdefault(((epoch - 1) // multi_epoch + 1, rank), [0, 0, []])
            entry[1] += sum(n for k in keys for n in seqs[k] if max_len is None or n <= max_len)
            entry[2] += list(keys)
    return out


def dropped(counts, epoch):
    consumed = sum(c for (e, _), (c, _, _) in counts.items() if e == epoch)
    available = sum(a for (e, _), (_, a, _) in counts.items() if e == epoch)
    return 1 - consumed / available


@pytest.mark.parametrize("name", ["dl_workers", "dl_workers_param", "mpd_sub_seq_order"])
def test_correct_trainings_raise_no_sharding_alarm_and_their_drop_is_the_count_from_the_lines(name):
    log = read_training_logs(logs_of(name))
    summary = analyze_training(log, file_lengths=lengths_of(name))
    counts = independent_counts(name)
    assert not [a for a in summary["alarms"] if any(s in a for s in SHARDING_ALARMS)], summary["alarms"]
    workers = name.startswith("dl_workers")
    assert any("2 dataset instances per rank" in n for n in summary["notes"]) == workers
    for s in summary["sub_epochs"]:
        assert abs(s["dropped_fraction"] - dropped(counts, s["epoch"])) < 0.0005
        for x in s["ranks"]:
            assert (x["offered_seqs"] is None) == workers  # one instance's count: not the rank's
            assert x["num_files"] == len(counts[(s["epoch"], x["rank"])][2])
    # every file once per full epoch, counted here from the lines
    for full_epoch in (0, 1):
        keys = [k for (e, _), (_, _, ks) in counts.items() if (e - 1) // 2 == full_epoch for k in ks]
        assert sorted(keys) == sorted(lengths_of(name))
    assert [(fe["files_read_twice"], fe["files_never_read"]) for fe in summary["full_epochs"]] == [(0, 0), (0, 0)]


def test_a_multi_epoch_dataset_is_found_under_its_other_name_and_its_loss_caught():
    name = "multi_epoch"
    log = read_training_logs(logs_of(name))
    assert log.files_from["wrapped"] and log.files_from["multi_epoch"] == 2
    unchecked = analyze_training(log, file_lengths=lengths_of(name))
    assert any("full epochs are not checked" in a for a in unchecked["alarms"])
    summary = analyze_training(log, file_lengths=lengths_of(name), partition_epoch=1)
    counts = independent_counts(name, multi_epoch=2)
    for s in summary["sub_epochs"]:
        assert abs(s["dropped_fraction"] - dropped(counts, s["epoch"])) < 0.0005
    for fe in summary["full_epochs"]:
        keys = [k for (e, _), (_, _, ks) in counts.items() if e == fe["full_epoch_0idx"] + 1 for k in ks]
        universe = {k for (_, _), (_, _, ks) in counts.items() for k in ks}
        assert fe["files_read_twice"] == len({k for k in keys if keys.count(k) > 1}) > 0
        assert fe["files_never_read"] == len(universe - set(keys)) > 0
    assert any("read twice" in a for a in summary["alarms"])
    assert any("given to no rank" in a for a in summary["alarms"])


def test_multi_epoch_can_be_given(tmp_path):
    log = read_training_logs(logs_of("multi_epoch"), multi_epoch=1)
    assert log.files_from["multi_epoch"] == 1 and not log.files_from["multi_epoch_inferred"]
    assert read_training_logs(logs_of("multi_epoch")).files_from["multi_epoch_inferred"]


def test_logs_without_file_lines_say_so_and_alarm(tmp_path):
    paths = []
    for path in logs_of("dl_workers"):
        out = tmp_path / os.path.basename(path)
        out.write_text("".join(line for line in open(path) if "using files for epoch" not in line))
        paths.append(str(out))
    summary = analyze_training(read_training_logs(paths), file_lengths=lengths_of("dl_workers"))
    alarm = [a for a in summary["alarms"] if a.startswith("no DFD file lines found")]
    assert alarm and "log_verbosity" in alarm[0] and "--dataset-name" in alarm[0]
    assert [(fe["files_read_twice"], fe["files_never_read"]) for fe in summary["full_epochs"]] in ([], [(None, None)])
    assert "Alarms\n  none" not in render_train_report(summary)


def _filtered(name, max_len):
    return {k: (sum(n > max_len for n in v), sum(n for n in v if n > max_len)) for k, v in seq_lengths_of(name).items()}


def test_max_seq_length_removals_are_shown_apart_from_the_dropped_share():
    name = "max_seq_len"
    log = read_training_logs(logs_of(name))
    summary = analyze_training(log, file_lengths=lengths_of(name), filtered_lengths=_filtered(name, 40))
    counts = independent_counts(name, max_len=40)
    plain = independent_counts(name)
    for s in summary["sub_epochs"]:
        assert abs(s["dropped_fraction"] - dropped(counts, s["epoch"])) < 0.0005
        kept = sum(a for (e, _), (_, a, _) in counts.items() if e == s["epoch"])
        whole = sum(a for (e, _), (_, a, _) in plain.items() if e == s["epoch"])
        assert abs(s["filtered_fraction"] - (1 - kept / whole)) < 0.0005
        assert s["first_out_read_all"] is True  # the first rank out read all that passed the filter
    assert summary["filtered_fraction"] > 0.1
    assert "removed by the length filter" in render_train_report(summary)


def test_without_the_filter_the_loss_is_not_blamed_on_the_balance():
    name = "max_seq_len"
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name))
    loss = [a for a in summary["alarms"] if a.startswith("high data loss")]
    assert loss and "no rank read all of its files' frames" in loss[0] and "--max-seq-length" in loss[0]
    assert "balance the bins" not in loss[0]
    assert not [s for s in summary["sub_epochs"] if s["first_out_read_all"]]


def test_the_cli_fails_on_alarm_when_it_cannot_check_and_takes_the_filter(tmp_path, capsys):
    from i6_shard.cli import main

    paths = []
    for path in logs_of("dl_workers"):
        out = tmp_path / os.path.basename(path)
        out.write_text("".join(line for line in open(path) if "using files for epoch" not in line))
        paths.append(str(out))
    lengths = os.path.join(LOGS, "dl_workers", "file_lengths.json")
    args = ["train-report", *paths, "--file-lengths", lengths, "--no-plot", "--no-read-hdf", "--fail-on-alarm"]
    assert main(args + ["-o", str(tmp_path / "out")]) == 1
    assert "no DFD file lines found" in capsys.readouterr().out
    lengths = os.path.join(LOGS, "dl_workers_param", "file_lengths.json")
    logs = logs_of("dl_workers_param")
    args = ["train-report", *logs, "--file-lengths", lengths, "--no-plot", "--no-read-hdf", "--fail-on-alarm"]
    args += ["--reduce-type", "param", "--param-sync-step", "3", "--max-dropped", "0.5", "-o", str(tmp_path / "p")]
    assert main(args) == 0, capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train-report", *logs, "--max-seq-length", "[1]", "-o", str(tmp_path / "x")])


def test_a_plan_of_the_wrapped_dataset_gives_the_full_epochs_and_every_file():
    from i6_shard import core

    name = "multi_epoch"
    lengths = lengths_of(name)
    keys = sorted(lengths)
    plan = core.ShardPlan(
        keys, [lengths[k][1] for k in keys], core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=4)
    )
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths, plan=plan)
    assert summary["partition_epoch"] == 1  # the plan's 2 epochs of the dataset per sub-epoch of the training
    assert not [a for a in summary["alarms"] if "than planned" in a or "not checked" in a]
    counts = independent_counts(name, multi_epoch=2)
    for fe in summary["full_epochs"]:
        read = {k for (e, _), (_, _, ks) in counts.items() if e == fe["full_epoch_0idx"] + 1 for k in ks}
        assert fe["files_never_read"] == len(set(keys) - read)  # also the file no line names
    assert any("the plan's sub-epochs are the DistributeFilesDataset's" in n for n in summary["notes"])


def test_the_header_does_not_misstate_the_mode_of_a_wrapped_dataset():
    """A MultiEpochDataset renames its DistributeFilesDataset and hides its partition_epoch: the header says the
    logs do not tell the mode (not "unsharded"); with --partition-epoch it is told (sharded here)."""
    name = "multi_epoch"
    log_paths = logs_of(name)
    bare = render_train_report(analyze_training(read_training_logs(log_paths), file_lengths=lengths_of(name)))
    mode = next(line for line in bare.splitlines() if line.strip().startswith("mode"))
    assert "not told by these logs" in mode and "--partition-epoch" in mode and "unsharded" not in mode
    told = analyze_training(read_training_logs(log_paths), file_lengths=lengths_of(name), partition_epoch=1)
    assert told["sharded"] is True and "sharded_known" not in told


def test_a_plan_of_ranks_times_workers_is_taken_for_dataloader_workers_that_shard():
    """The plan ShardPlanJob.for_training makes for DataLoader workers that shard cuts ranks * workers shards, as the
    training does: no alarm that it is for other ranks; a note that its files and steps are per worker."""
    from i6_shard import core

    name = "dl_workers"
    lengths = lengths_of(name)
    keys = sorted(lengths)
    log = read_training_logs(logs_of(name))
    partition_epoch = analyze_training(log, file_lengths=lengths)["partition_epoch"]
    settings = core.PlanSettings(num_shards=4, partition_epoch=partition_epoch, num_epochs=4)
    plan = core.ShardPlan(keys, [lengths[k][1] for k in keys], settings)
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths, plan=plan)
    assert not [a for a in summary["alarms"] if "plan is for num_shards" in a], summary["alarms"]
    assert any("one per DataLoader worker (2 ranks x 2 workers that shard)" in n for n in summary["notes"])

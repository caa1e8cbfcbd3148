"""The training report on real logs (tests/data/returnn_logs, real 2- and 4-rank torchrun CPU trainings):
the dropped share per sub-epoch equals a count made here from the per-batch lines and the HDF lengths;
the files per rank equal a plan made with core for the same files and settings; double sharding
(sharding_fix=False) raises the alarm and healthy runs do not; outputs are deterministic and atomic."""

import glob
import json
import os
import re

import numpy as np
import pytest

from tests.recorded_cuts import use_recorded_cuts

from tests.deps import needs_matplotlib

from i6_shard import core
from i6_shard.core.io.file_lengths import load_file_lengths
from i6_shard.core.io.returnn_log import read_training_logs
from i6_shard.core.pure.training import analyze_training
from i6_shard.core.reporting.train_report import render_train_report, write_train_report

from ...golden import check_golden

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs")
WITH_BATCH_SIZES = ["w2_bv24", "w2_bv38_worker", "w4_bv24", "w4_bv33_worker", "w2_nofix", "w4_nofix", "w2_balanced"]
DOUBLE_SHARDING = ["w2_nofix", "w4_nofix"]


@pytest.fixture(autouse=True)
def _recorded_cuts(monkeypatch):
    """The recorded trainings ran "balanced" of version 1 (tests/recorded_cuts.py)."""
    use_recorded_cuts(monkeypatch)


def case(name):
    with open(os.path.join(LOGS, name, "case.json")) as f:
        return json.load(f)


def logs_of(name):
    return sorted(glob.glob(os.path.join(LOGS, name, "returnn.torch-distrib-*.log")))


def lengths_of(name):
    return load_file_lengths(os.path.join(LOGS, name, "file_lengths.json"))


def plan_of(name, **changes):
    """A plan made with core for the files (their sizes in bytes) and the training's settings."""
    c = case(name)
    sizes = core.load_file_sizes(os.path.join(LOGS, name, "file_sizes.npz"))
    settings = dict(
        num_shards=c["num_ranks"],
        partition_epoch=c["partition_epoch"],
        num_epochs=c["num_epochs"],
        distribution=c["distribution"],
    )
    settings.update(changes)
    return core.ShardPlan(sizes.keys, sizes.sizes, core.PlanSettings(**settings))


def independent_drop(name):
    """Per sub-epoch: 1 - frames in the per-batch lines / frames in the files of the 'using files' lines,
    over all ranks, counted with plain regexes here."""
    lengths = lengths_of(name)
    consumed, available = {}, {}
    for path in logs_of(name):
        text = open(path).read()
        for m in re.finditer(r"^ep (\d+) train, step \d+, .*?sum_size:time:var-unk:data (\d+)", text, flags=re.M):
            consumed[int(m[1])] = consumed.get(int(m[1]), 0) + int(m[2])
        for m in re.finditer(r"using files for epoch (\d+): \[(.*)\]$", text, flags=re.M):
            if int(m[1]) <= case(name)["num_epochs"]:
                available[int(m[1])] = available.get(int(m[1]), 0) + sum(
                    lengths[k][1] for k in re.findall(r"'([^']+)'", m[2])
                )
    return {e: 1 - consumed.get(e, 0) / available[e] for e in available}


@pytest.mark.parametrize("name", WITH_BATCH_SIZES)
def test_dropped_share_per_sub_epoch_equals_the_count_from_the_batch_lines(name):
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    expected = independent_drop(name)
    assert [s["epoch"] for s in summary["sub_epochs"]] == sorted(expected)
    for s in summary["sub_epochs"]:
        assert abs(s["dropped_fraction"] - expected[s["epoch"]]) < 0.001, (s["epoch"], s["dropped_fraction"])
    assert summary["dropped_fraction"] == pytest.approx(np.mean(list(expected.values())), abs=1e-6)


@pytest.mark.parametrize("name", WITH_BATCH_SIZES)
def test_files_per_rank_equal_the_plan(name):
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    c = case(name)
    assert len(summary["sub_epochs"]) == c["num_epochs"]
    for s in summary["sub_epochs"]:
        assert [x["rank"] for x in s["ranks"]] == list(range(c["num_ranks"]))
        assert all(x["files_match_plan"] is True for x in s["ranks"])
    assert not [a for a in summary["alarms"] if "than planned" in a]
    assert summary["passes"]["promised"] == c["num_epochs"] / c["partition_epoch"]
    for fe in summary["full_epochs"]:
        assert fe["complete"] and fe["files_read_twice"] == 0 and fe["files_never_read"] == 0


def test_a_plan_with_other_seeds_or_files_is_an_alarm():
    name = "w2_bv24"
    log = read_training_logs(logs_of(name))
    summary = analyze_training(log, file_lengths=lengths_of(name), plan=plan_of(name, random_seed_offset=7))
    assert any(x["files_match_plan"] is False for s in summary["sub_epochs"] for x in s["ranks"])
    assert any("read other files than planned" in a for a in summary["alarms"])
    other = core.ShardPlan(["/elsewhere/" + k for k in plan_of(name).keys], plan_of(name).costs, plan_of(name).settings)
    summary = analyze_training(log, file_lengths=lengths_of(name), plan=other)
    assert any("none of the 16 files in the logs is in the plan" in a for a in summary["alarms"])
    wrong_size = plan_of("w4_bv24")
    summary = analyze_training(log, plan=wrong_size)
    assert any("the plan is for num_shards=4, but the training ran 2 ranks" in a for a in summary["alarms"])


@pytest.mark.parametrize("name", DOUBLE_SHARDING)
def test_double_sharding_raises_the_alarm(name):
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    w = case(name)["num_ranks"]
    steps_alarms = [a for a in summary["alarms"] if a.startswith("steps far below")]
    assert len(steps_alarms) == 1 and "#1738" in steps_alarms[0]
    assert any(a.startswith("sequences never read") and "#1738" in a for a in summary["alarms"])
    for s in summary["sub_epochs"]:
        assert s["steps_ratio"] < 0.75
        # each rank's dataset offered about 1/W of the sequences of its files
        offered = sum(x["offered_seqs"] for x in s["ranks"])
        held = sum(x["available_seqs"] for x in s["ranks"])
        assert offered / held == pytest.approx(1 / w, abs=0.15)


@pytest.mark.parametrize("name", [n for n in WITH_BATCH_SIZES if n not in DOUBLE_SHARDING])
def test_healthy_runs_raise_no_sharding_alarm(name):
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    assert not [a for a in summary["alarms"] if "#1738" in a or "twice" in a or "never" in a]
    for s in summary["sub_epochs"]:
        assert s["steps_ratio"] == 1.0  # the first rank out of data consumed all its files held
        assert max(x["consumed_frames"] / x["available_frames"] for x in s["ranks"]) == 1.0


def test_dropped_share_threshold():
    name = "w2_balanced"
    log = read_training_logs(logs_of(name))
    summary = analyze_training(log, file_lengths=lengths_of(name), plan=plan_of(name), max_dropped=0.5)
    assert summary["alarms"] == []
    summary = analyze_training(
        log, file_lengths=lengths_of(name), plan=plan_of(name), max_dropped=summary["dropped_fraction"] - 0.001
    )
    assert len(summary["alarms"]) == 1 and summary["alarms"][0].startswith("high data loss")


def test_without_batch_sizes_below_33_the_sequences_come_from_complete_and_from_33_on_they_are_unknown():
    with_sizes = analyze_training(read_training_logs(logs_of("w2_bv24")), file_lengths=lengths_of("w2_bv24"))
    old = analyze_training(read_training_logs(logs_of("w2_bv24_nobatch")), file_lengths=lengths_of("w2_bv24"))
    new = analyze_training(read_training_logs(logs_of("w2_bv38_nobatch")), file_lengths=lengths_of("w2_bv24"))
    assert not old["complete_is_mean"] and new["complete_is_mean"]
    assert old["consumed_seqs_from"] == ["complete"] and new["consumed_seqs_from"] is None
    for a, b, c in zip(with_sizes["sub_epochs"], old["sub_epochs"], new["sub_epochs"]):
        assert [x["consumed_seqs"] for x in b["ranks"]] == [x["consumed_seqs"] for x in a["ranks"]]
        assert [x["consumed_seqs"] for x in c["ranks"]] == [None, None]
        assert b["dropped_fraction"] is None and c["dropped_fraction"] is None
    assert any("mean over the ranks" in n for n in new["notes"])
    assert any("log_batch_size=True" in n for n in old["notes"])


def test_partition_epoch_is_inferred_without_a_plan():
    summary = analyze_training(read_training_logs(logs_of("w4_bv24")), file_lengths=lengths_of("w4_bv24"))
    assert summary["partition_epoch"] == 2 and summary["partition_epoch_inferred"]
    assert [fe["full_epoch_0idx"] for fe in summary["full_epochs"]] == [0, 1]
    with pytest.raises(ValueError, match="partition_epoch=3 but the plan has 2"):
        analyze_training(read_training_logs(logs_of("w4_bv24")), plan=plan_of("w4_bv24"), partition_epoch=3)


def test_golden_report_of_a_real_4_rank_training():
    name = "w4_bv24"
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    check_golden("train_report_w4.txt", render_train_report(summary))


@needs_matplotlib
def test_outputs_are_deterministic_and_nothing_is_written_on_failure(tmp_path):
    name = "w2_nofix"
    plan_path = str(tmp_path / "plan.npz")
    core.save_plan(plan_of(name), plan_path)
    kwargs = dict(plan_path=plan_path, file_lengths_path=os.path.join(LOGS, name, "file_lengths.json"))
    first = write_train_report(logs_of(name), str(tmp_path / "a"), **kwargs)
    write_train_report(logs_of(name), str(tmp_path / "b"), **kwargs)
    for fn in ("report.txt", "summary.json", "plot.png"):
        assert (tmp_path / "a" / fn).read_bytes() == (tmp_path / "b" / fn).read_bytes(), fn
    assert json.loads((tmp_path / "a" / "summary.json").read_text()) == first
    assert first["logs"] == ["returnn.torch-distrib-0-2.log", "returnn.torch-distrib-1-2.log"]
    with pytest.raises(ValueError, match="different world sizes"):
        write_train_report(logs_of(name)[:1] + logs_of("w4_bv24")[1:2], str(tmp_path / "c"), **kwargs)
    assert not (tmp_path / "c").exists()


def test_hdf_lengths_are_read_from_the_training_directory(tmp_path):
    pytest.importorskip("returnn", reason="writing HDF files needs RETURNN: pip install returnn")
    pytest.importorskip("h5py", reason="reading HDF lengths needs h5py: pip install h5py")
    from ...training.harness import write_skewed_hdf_files

    # The logs name data/partNNN.hdf relative to the training's cwd; put the same files (same seed) there.
    name = "w2_bv24"
    c = case(name)
    run = tmp_path / "run"
    write_skewed_hdf_files(str(run / "data"), num_files=c["num_files"], seed=c["seed"], **c["data"])
    logs = []
    for path in logs_of(name):
        text = open(path).read()
        cwd = re.search(r", cwd (.*?), Python ", text).group(1)
        (tmp_path / os.path.basename(path)).write_text(text.replace(f"cwd {cwd},", f"cwd {run},"))
        logs.append(str(tmp_path / os.path.basename(path)))
    from_hdf = write_train_report(logs, str(tmp_path / "out"), plot=False)
    from_json = analyze_training(read_training_logs(logs), file_lengths=lengths_of(name))
    assert from_hdf["total_frames"] == from_json["total_frames"] == sum(v[1] for v in lengths_of(name).values())
    assert [s["dropped_fraction"] for s in from_hdf["sub_epochs"]] == [
        s["dropped_fraction"] for s in from_json["sub_epochs"]
    ]


@pytest.mark.parametrize("name, too_few", [("w2_balanced", False), ("w2_nofix", True)])
def test_the_steps_panel_speaks_of_double_sharding_only_with_its_alarm(name, too_few, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib: pip install matplotlib")
    import matplotlib.figure

    from i6_shard.core.reporting.train_report import plot_training

    titles = []
    monkeypatch.setattr(
        matplotlib.figure.Figure,
        "savefig",
        lambda fig, *a, **k: titles.extend(ax.get_title(loc="left") for ax in fig.axes),
    )
    summary = analyze_training(read_training_logs(logs_of(name)), file_lengths=lengths_of(name), plan=plan_of(name))
    assert any(a.startswith("steps far below") for a in summary["alarms"]) is too_few
    plot_training(summary, str(tmp_path / "plot.png"))
    (steps_title,) = [t for t in titles if t.startswith("Steps per sub-epoch")]
    assert ("double sharding" in steps_title) is too_few, steps_title


def test_the_plot_marks_the_full_epochs_it_shows_not_every_one_up_to_the_last(tmp_path, monkeypatch):
    """A sub-epoch far past the others (here the highest a log may name) drew a line at every full epoch before
    it: a billion lines. Only the full epochs that hold a logged sub-epoch are marked."""
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib: pip install matplotlib")
    import matplotlib.axes
    import matplotlib.figure

    from i6_shard.core.io.returnn_log import MAX_EPOCH
    from i6_shard.core.reporting.train_report import plot_training

    marks = []

    def axvline(ax, x, **kwargs):
        marks.append(x)
        assert len(marks) < 100, "a line for every full epoch up to the last"

    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", axvline)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: None)  # only the marks count
    logs = []
    for path in logs_of("w2_bv24"):
        with open(path) as f:
            text = f.read()
        logs.append(str(tmp_path / os.path.basename(path)))
        with open(logs[-1], "w") as f:
            f.write(text + f"ep {MAX_EPOCH} train, step 0, mse 0.5, num_seqs 3, complete 10.00%\n")
    summary = analyze_training(read_training_logs(logs), partition_epoch=2)
    plot_training(summary, str(tmp_path / "plot.png"))
    assert sorted(set(marks)) == [2.5, MAX_EPOCH - 1 + 0.5]

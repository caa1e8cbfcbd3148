"""A plan directory is written as one set: readers find an earlier complete set or the new one,
never a mix or a part, also with concurrent writers, after a kill, and when the device is full;
stale files of an earlier set do not stay; plans that would not fit in memory are refused first."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.blocking import run_to_end
from tests.deps import needs_matplotlib, mount_unavailable

from i6_shard import core
from i6_shard.core.io import atomic
from i6_shard.core.io.plan_file import check_plan_fits_memory, plan_arrays_nbytes
from i6_shard.core.reporting.outputs import PLAN_OUTPUTS, write_plan_dir


def small_plan(num_epochs, num_files=30, seed=0):
    sizes = np.random.RandomState(seed).randint(1, 1000, size=num_files)
    return core.ShardPlan(
        [f"/d/f{i}.hdf" for i in range(num_files)],
        sizes,
        core.PlanSettings(num_shards=2, partition_epoch=3, num_epochs=num_epochs),
    )


def read_set(out):
    """(plan num_epochs, summary num_epochs, report matches summary) of one set, opened through one
    directory handle so that the files come from one directory; None if it vanished meanwhile."""
    try:
        fd = os.open(out, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        with open(os.open(core.SUMMARY_FILE, os.O_RDONLY, dir_fd=fd), "rb") as f:
            summary = json.loads(f.read())
        with open(os.open(core.PLAN_FILE, os.O_RDONLY, dir_fd=fd), "rb") as f:
            with np.load(f) as d:
                plan_epochs = int(d["num_epochs"])
        with open(os.open(core.REPORT_FILE, os.O_RDONLY, dir_fd=fd), "rb") as f:
            report = f.read().decode("utf-8")
    except (FileNotFoundError, ValueError, OSError):
        return None  # the set was replaced while reading: read again
    finally:
        os.close(fd)
    return plan_epochs, summary["settings"]["num_epochs"], report == core.render_report(summary)


@needs_matplotlib
def test_a_rerun_replaces_the_whole_set_and_leaves_no_stale_plot(tmp_path):
    out = tmp_path / "out"
    write_plan_dir(small_plan(6), out, plot=True)
    assert sorted(os.listdir(out)) == sorted(PLAN_OUTPUTS + (".i6_shard-set",))
    write_plan_dir(small_plan(9), out, plot=False)
    assert sorted(os.listdir(out)) == [
        ".i6_shard-set",
        "plan.npz",
        "report.txt",
        "summary.json",
    ]  # the older plot is gone
    assert read_set(out) == (9, 9, True)
    assert os.listdir(tmp_path) == ["out"]  # no temporary or old directory left beside it


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two_renames"])
def test_an_error_while_writing_leaves_the_earlier_set_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)  # as on a file system without it
    out = tmp_path / "out"
    write_plan_dir(small_plan(6), out, plot=False)
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    from i6_shard.core.reporting import outputs

    def fail(summary):
        raise RuntimeError("boom while writing the report")

    monkeypatch.setattr(outputs, "render_report", fail)
    with pytest.raises(RuntimeError, match="boom"):
        write_plan_dir(small_plan(9), out, plot=False)
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    assert os.listdir(tmp_path) == ["out"]
    monkeypatch.undo()
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    write_plan_dir(small_plan(9), out, plot=False)
    assert read_set(out) == (9, 9, True) and os.listdir(tmp_path) == ["out"]


_WRITER = """
    import sys
    from i6_shard.cli import main
    sizes, out, num_epochs, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    for _ in range(repeats):
        assert main(["plan", "--sizes", sizes, "--num-shards", "2", "--partition-epoch", "3",
                     "--preload-next-n-sub-epochs", "0", "--num-epochs",
                     num_epochs, "--no-plot", "-o", out]) == 0
"""


@pytest.mark.slow
def test_concurrent_writers_never_show_a_reader_a_mix(tmp_path, capfd):
    sizes = str(tmp_path / "sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=[f"/d/f{i}" for i in range(30)], sizes=np.arange(1, 31)), sizes)
    out = str(tmp_path / "out")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_WRITER), sizes, out, str(n), "8"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (3, 7)
    ]
    seen, mixed = set(), []
    while any(w.poll() is None for w in writers):
        got = read_set(out)
        if got is not None:
            seen.add(got[0])
            if got != (got[0], got[0], True):
                mixed.append(got)
    for w in writers:
        assert w.wait() == 0, w.stderr.read()
        w.stderr.close()
    assert not mixed, f"a reader saw files of two runs: {mixed[:5]}"
    final = read_set(out)
    assert final in ((3, 3, True), (7, 7, True))
    assert sorted(os.listdir(out)) == [".i6_shard-set", "plan.npz", "report.txt", "summary.json"]
    assert sorted(os.listdir(tmp_path)) == ["out", "sizes.npz"]
    assert seen == {3, 7}  # the reader did see both writers' sets


_KILLED = """
    import sys, time
    from i6_shard.cli import main
    from i6_shard.core.reporting import outputs
    real = outputs.render_report

    def slow(summary):
        print("plan file written", flush=True)
        time.sleep(120)
        return real(summary)

    outputs.render_report = slow
    main(sys.argv[1:])
"""


def test_sigkill_while_writing_leaves_the_earlier_set_whole(tmp_path):
    sizes = tmp_path / "sizes.npz"
    core.save_file_sizes(core.FileSizes(keys=[f"/d/f{i}" for i in range(30)], sizes=np.arange(1, 31)), sizes)
    out = tmp_path / "out"
    common = [
        "plan",
        "--sizes",
        str(sizes),
        "--num-shards",
        "2",
        "--partition-epoch",
        "3",
        "-o",
        str(out),
        "--preload-next-n-sub-epochs",
        "0",
    ]
    from i6_shard.cli import main

    assert main(common + ["--num-epochs", "6", "--no-plot"]) == 0
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED), *common, "--num-epochs", "9", "--no-plot"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline() == "plan file written\n"
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before  # the earlier set, whole
    leftovers = [n for n in os.listdir(tmp_path) if n not in ("out", "sizes.npz")]
    assert len(leftovers) == 1 and leftovers[0].startswith(".out.") and leftovers[0].endswith(".tmp")
    assert main(common + ["--num-epochs", "9", "--no-plot"]) == 0  # a later run is not disturbed by it
    assert read_set(out) == (9, 9, True)


def test_a_directory_holding_other_files_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "plan.npz").write_bytes(b"old")
    with pytest.raises(
        ValueError,
        match=r"it holds 1 entry that is not part of it \('notes.txt'\); the plan "
        "directory is replaced whole",
    ):
        write_plan_dir(small_plan(3), out, plot=False)
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "plan.npz").read_bytes() == b"old"
    (out / "notes.txt").unlink()
    (out / "plan.npz").unlink()
    (out / "plan.npz").mkdir()
    with pytest.raises(IsADirectoryError, match="plan.npz': it is a directory, not a file of an earlier plan"):
        write_plan_dir(small_plan(3), out, plot=False)


def test_the_working_directory_is_not_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for target in (".", str(tmp_path), os.path.dirname(str(tmp_path))):
        with pytest.raises(ValueError, match="it is the working directory, or holds it"):
            write_plan_dir(small_plan(3), target, plot=False)
    assert os.listdir(tmp_path) == []


def test_plans_that_would_not_fit_in_memory_are_refused_naming_the_size(tmp_path, monkeypatch):
    huge = core.PlanSettings(num_shards=1, partition_epoch=1, num_epochs=4_000_000_000)
    assert plan_arrays_nbytes(huge, num_files=1) == 4_000_000_000 * (4 + 2 * 8)
    plan = core.ShardPlan(["/d/a"], [5], huge)

    def planned(*args, **kwargs):
        raise AssertionError("a layout was planned: the plan was not refused from its settings")

    monkeypatch.setattr(core.ShardPlan, "layout", planned)  # refused from the settings: nothing planned or looped
    monkeypatch.setattr(np, "empty", lambda *a, **k: planned())  # nor the plan's arrays allocated
    for call in (
        lambda: write_plan_dir(plan, tmp_path / "out", plot=False),
        lambda: core.write_plan_outputs(
            plan,
            plan_path=str(tmp_path / "p.npz"),
            summary_path=str(tmp_path / "s.json"),
            report_path=str(tmp_path / "r.txt"),
        ),
        lambda: core.save_plan(plan, tmp_path / "p.npz"),
    ):
        with pytest.raises(
            ValueError,
            match=r"num_epochs=4000000000 with 1 files needs 80,000,000,000 bytes "
            r"\(74\.5 GiB\) for the plan's arrays",
        ):
            call()
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
    check_plan_fits_memory(huge, num_files=1, memory_bytes=10**11)  # fits a bigger machine


def test_output_names_must_have_their_formats_extension(tmp_path):
    plan = small_plan(3)
    paths = dict(
        plan_path=str(tmp_path / "p.npz"), summary_path=str(tmp_path / "s.json"), report_path=str(tmp_path / "r.txt")
    )
    for name, bad, message in (
        ("plan_path", "p.zip", "a plan file is a .npz file"),
        ("summary_path", "s.txt", "a plan summary is a .json file"),
        ("report_path", "r.json", "a plan report is a .txt file"),
        ("plot_path", "p.jpg", "a plot is a .png file"),
    ):
        with pytest.raises(ValueError, match=message.replace(".", r"\.")):
            core.write_plan_outputs(plan, **{**paths, name: str(tmp_path / bad)})
    assert os.listdir(tmp_path) == []


_FULL = """
    import json, os, sys
    import numpy as np
    from i6_shard import core
    from i6_shard.cli import main
    from i6_shard.core.reporting.outputs import write_plan_dir
    mnt = sys.argv[1]
    out = os.path.join(mnt, "out")
    keys = [f"/data/corpus/part-{i:06d}.hdf" for i in range(3000)]
    sizes = core.FileSizes(keys=keys, sizes=np.random.RandomState(0).randint(1, 10**6, size=3000))
    small = core.ShardPlan(keys[:20], sizes.sizes[:20], core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=2))
    write_plan_dir(small, out, plot=False)
    before = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}
    big = core.ShardPlan(keys, sizes.sizes, core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=40))
    result = {}
    try:
        write_plan_dir(big, out, plot=False)
    except OSError as exc:
        result["plan_error"] = str(exc)
    after = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}
    result["plan_kept"] = after == before
    result["beside"] = sorted(os.listdir(mnt))
    try:
        many = [f"/data/corpus/part-{i:06d}.hdf" for i in range(40000)]
        core.save_file_sizes(core.FileSizes(keys=many, sizes=np.random.RandomState(1).randint(1, 10**9, size=40000)),
                             os.path.join(mnt, "sizes.npz"))
    except OSError as exc:
        result["sizes_error"] = str(exc)
    result["beside_after_sizes"] = sorted(os.listdir(mnt))
    print(json.dumps(result))
"""


def test_a_full_device_names_the_file_and_leaves_the_earlier_set(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux) to mount a small tmpfs in a private mount namespace")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = run_to_end(
        [
            unshare,
            "-rm",
            "sh",
            "-c",
            'mount -t tmpfs -o size=48k tmpfs "$1" && shift && exec "$@"',
            "sh",
            str(mnt),
            sys.executable,
            "-c",
            textwrap.dedent(_FULL),
            str(mnt),
        ],
    )
    if res.returncode != 0 and mount_unavailable(res.stderr):
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()[-200:]}")
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(res.stdout)
    assert result["plan_error"].startswith(
        f"cannot write {os.path.join(str(mnt), 'out', 'plan.npz')!r}: no space left "
        "on device; free some space or choose another path"
    ), result
    assert result["plan_kept"] and result["beside"] == ["out"]
    assert result["sizes_error"].startswith(
        f"cannot write {os.path.join(str(mnt), 'sizes.npz')!r}: no space left on device"
    ), result
    assert result["beside_after_sizes"] == ["out"]


@pytest.mark.parametrize("names", [["report.txt"], ["plan.npz", "report.txt", "summary.json"]])
def test_a_folder_of_the_users_is_never_replaced_even_with_the_sets_file_names(tmp_path, capsys, names):
    """Only a set that i6_shard wrote (its marker naming a plan directory) is replaced; the user's files of the
    same names stay, and a train-report set is not a plan directory."""
    from i6_shard.cli import main

    sizes = tmp_path / "sizes.npz"
    core.save_file_sizes(core.FileSizes(keys=[f"/d/{i}" for i in range(8)], sizes=np.arange(1, 9)), sizes)
    out = tmp_path / "out"
    out.mkdir()
    for name in names:
        (out / name).write_text("the user's own\n")
    argv = [
        "plan",
        "--sizes",
        str(sizes),
        "--num-shards",
        "2",
        "--partition-epoch",
        "2",
        "--num-epochs",
        "2",
        "--no-plot",
        "-o",
        str(out),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "was not written as a plan directory by i6_shard" in err and err.count("\n") == 1, err
    assert sorted(os.listdir(out)) == sorted(names) and all((out / n).read_text() == "the user's own\n" for n in names)
    (out / ".i6_shard-set").write_text("training report directory\n")  # another kind of set
    assert main(argv) == 2 and "was not written as a plan directory" in capsys.readouterr().err
    for name in names + [".i6_shard-set"]:
        (out / name).unlink()
    assert main(argv) == 0 and main(argv) == 0  # an empty folder, then the set written there
    assert (out / ".i6_shard-set").read_text() == "plan directory\n"

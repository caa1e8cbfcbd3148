"""The command line under hostile input, round 5: costs archives with empty files under ``equal_steps``, engine
settings RETURNN reads in its own way, deeply nested settings, stale lengths, full scratch directories and
file-size limits. Each is the right result, or one clear error line (exit status 2) that names what to fix."""

import contextlib
import io
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from tests.blocking import run_to_end
from tests.costs_data import frames_costs
from tests.deps import H5PY_REASON, MATPLOTLIB_REASON, RETURNN_REASON, SISYPHUS_REASON
from i6_shard import core
from i6_shard.cli import main


def run_cli(*args, cpu_seconds=None):
    """``python -W error::RuntimeWarning -m i6_shard ARGS`` as a finished process: its exit status, stdout and stderr.
    In this process (``main``, what ``python -m i6_shard`` calls; test_sizes_cli.py and test_hostile_cli.py start
    it as one), unless ``cpu_seconds`` asks for a process that a run-away is stopped in: by the CPU time it used
    (RLIMIT_CPU), which a loaded machine does not shorten as it does a wall-clock limit."""
    argv = [str(a) for a in args]
    if cpu_seconds is not None:
        import resource

        def limited():
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))

        cmd = [sys.executable, "-W", "error::RuntimeWarning", "-m", "i6_shard", *argv]
        return subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limited)
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.simplefilter("error", RuntimeWarning)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def one_error_line(res):
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, (
        res.stderr[-2000:]
    )
    return res.stderr


def costs_with_empty_files(path, *, num_files=60, seed=1):
    """A frames costs archive of ``num_files`` files, about 40% of them of no sequences: its path and lengths."""
    rng = np.random.RandomState(seed)
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(num_files)]
    num_seqs = rng.randint(1, 9, size=num_files)
    num_seqs[rng.rand(num_files) < 0.4] = 0
    lengths = [rng.randint(20, 400, size=n).astype(np.int32) for n in num_seqs]
    core.io.save_file_costs(frames_costs(keys, lengths), str(path))
    return str(path), lengths


def test_equal_steps_plans_a_costs_archive_with_files_of_no_sequences(tmp_path):
    costs, lengths = costs_with_empty_files(tmp_path / "costs.npz")
    for distribution in ("returnn", "flexible_auto", "equal_steps"):
        out = tmp_path / distribution
        argv = ["plan", "--sizes", costs, "--num-shards", 3, "--partition-epoch", 2, "--num-epochs", 4]
        res = run_cli(*argv, "--distribution", distribution, "--batch-size", 700, "--no-plot", "-o", out)
        assert res.returncode == 0, (distribution, res.stderr[-2000:])
        with np.load(out / "plan.npz") as npz:
            orders = npz["orders"]
        for full_epoch in orders:  # every file once in each full epoch, the empty ones too
            assert sorted(np.concatenate(list(full_epoch)).tolist()) == list(range(len(lengths)))
    summary = json.load(open(tmp_path / "equal_steps" / "summary.json"))
    assert summary["dropped_fraction_predicted"] == 0.0


def test_accum_grad_multiple_step_0_means_an_update_every_step_as_in_returnn(tmp_path):
    """RETURNN's ``Engine.train_epoch`` counts the step before it compares with ``accum_grad_multiple_step``: 0
    updates every step, as 1. A plan made for such a config records 1, and neither the dataset class
    (``engine_differences``) nor ``training_job`` refuses the training for it (no re-plan loop)."""
    import warnings

    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.plan_sim import engine_differences
    from tests.jobs.test_plan_gates_training import CONFIG, _plan_and_train

    param = {"reduce_type": "param", "param_sync_step": 4}  # under param sync the accumulation moves the syncs
    for other, differs in ((0, False), (2, True)):
        plan, config = (EngineSettings(accum_grad_multiple_step=n, torch_distributed=param) for n in (1, other))
        assert bool(engine_differences(plan, config)) == differs, other
    config = {**CONFIG, "max_seqs": 20, "accum_grad_multiple_step": 0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for opts in ({}, {"accum_grad_multiple_step": 0}):
            _plan_and_train(tmp_path, plan_opts={"batch_size": 1000, "max_seqs": 20, **opts}, config=config)
    assert [str(w.message) for w in caught if "accum_grad" in str(w.message)] == []


@pytest.mark.slow
def test_a_huge_param_sync_step_costs_what_a_small_one_does(tmp_path):
    """The simulated control syncs find the next update a sync level fires after in closed form: 10**12 steps
    between param syncs plan in seconds (it counted one update at a time), with the steps of 10**4 (both beyond
    every rank's batches)."""
    costs, _ = costs_with_empty_files(tmp_path / "costs.npz", seed=2)
    summaries = []
    for step in (10**4, 10**12):
        argv = ["plan", "--sizes", costs, "--num-shards", 3, "--partition-epoch", 2, "--num-epochs", 2]
        argv += ["--batch-size", 700, "--reduce-type", "param", "--param-sync-step", step, "--no-plot"]
        res = run_cli(*argv, "-o", tmp_path / str(step), cpu_seconds=30)
        assert res.returncode == 0, res.stderr[-2000:]
        summaries.append(json.load(open(tmp_path / str(step) / "summary.json")))
    assert summaries[0]["steps_taken"] == summaries[1]["steps_taken"]
    assert summaries[0]["steps_exact"] == summaries[1]["steps_exact"]


def _deep(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def test_deeply_nested_torch_distributed_is_refused_by_name_in_plan(tmp_path):
    costs, _ = costs_with_empty_files(tmp_path / "costs.npz", seed=3)
    argv = ["plan", "--sizes", costs, "--num-shards", 3, "--partition-epoch", 2, "--num-epochs", 2, "--no-plot"]
    for depth in (30, 500, 5000):
        text = '{"reduce_type": "grad", "options": ' + _deep(depth) + "}"
        res = run_cli(*argv, "--torch-distributed", text, "-o", tmp_path / f"out{depth}")
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
        last = res.stderr.strip().splitlines()[-1]
        assert "torch-distributed" in last or "torch_distributed" in last, last
        assert "nests dicts and lists" in last and len(last) < 400, last
        assert not (tmp_path / f"out{depth}" / "plan.npz").exists()


def _plan_with_deep_engine_settings(tmp_path, depth):
    """A plan of 12 placeholder files (tests/returnn_ranks.py) whose stored engine settings nest ``depth`` deep."""
    from i6_shard.core import PlanSettings, ShardPlan, save_plan
    from tests.plan_edits import edit_npz
    from tests.returnn_ranks import _sized_files

    sizes = list(range(1, 13))
    files = _sized_files(sizes)
    settings = PlanSettings.from_mode(sharding="sharded", num_shards=2, partition_epoch=2, num_epochs=4)
    save_plan(ShardPlan(files, sizes, settings), str(tmp_path / "plain.npz"))
    text = '{"batch_size": 700, "torch_distributed": {"reduce_type": "grad", "options": ' + _deep(depth) + "}}"
    path = edit_npz(
        tmp_path / "plain.npz", tmp_path / f"deep{depth}.npz", lambda d: {**d, "engine_settings": np.array(text)}
    )
    return path, files, settings


def test_deeply_nested_engine_settings_in_a_plan_file_are_one_error_line_in_files_report_and_the_dataset(tmp_path):
    import pytest

    pytest.importorskip("returnn.datasets.distrib_files", reason=RETURNN_REASON)
    from tests.returnn_ext.test_plan_dataset import _dataset
    from tests.returnn_ranks import as_rank, dfd_files_per_epoch

    for depth in (30, 5000):
        path, files, settings = _plan_with_deep_engine_settings(tmp_path, depth)
        for argv in (["files", "--rank", 0, "--epoch", 1, path], ["report", path]):
            err = one_error_line(run_cli(*argv))
            assert f"{path!r} is corrupt: engine_settings nests dicts and lists more than 16 levels deep" in err, err
        with as_rank(0, 2, dataset_random_seed_offset=0):
            with pytest.raises(ValueError, match="engine_settings nests dicts and lists more than 16 levels deep"):
                dfd_files_per_epoch(_dataset(files, path, settings), num_epochs=1)


def test_deeply_nested_torch_distributed_is_refused_by_name_in_the_plan_job():
    import pytest

    pytest.importorskip("sisyphus", reason=SISYPHUS_REASON)
    from sisyphus import tk

    from i6_shard.jobs import ShardPlanJob

    for depth in (30, 5000):
        deep = 1
        for _ in range(depth):
            deep = {"a": deep}
        with pytest.raises(ValueError, match="torch_distributed nests dicts and lists more than 1[06]0? levels deep"):
            ShardPlanJob(
                tk.Path("/data/sizes.npz"),
                num_shards=2,
                partition_epoch=2,
                num_epochs=4,
                torch_distributed={"reduce_type": "grad", "options": deep},
            )


def test_plan_lengths_refuses_a_costs_archive_of_an_older_version_of_a_file(tmp_path):
    """A file rewritten after its costs were computed: the sizes archive, computed after, has another modification
    time for it. ``plan --lengths`` names the file and the archive to compute again, instead of predicting with
    lengths of a file that is no longer there."""
    import os

    import pytest

    pytest.importorskip("h5py", reason=H5PY_REASON)
    assert run_cli("make-data", "-o", tmp_path / "corpus", "--num-files", 8).returncode == 0
    files = tmp_path / "corpus" / "files.txt"
    assert run_cli("costs", files, "-o", tmp_path / "costs.npz").returncode == 0
    rewritten = core.read_file_list(str(files))[3]
    with open(rewritten, "r+b") as f:  # rewritten in place: same bytes, a new modification time
        data = f.read()
        f.seek(0)
        f.write(data)
    os.utime(rewritten, ns=(os.stat(rewritten).st_atime_ns, os.stat(rewritten).st_mtime_ns + 10**9))
    assert run_cli("sizes", files, "-o", tmp_path / "sizes.npz").returncode == 0
    argv = ["plan", "--sizes", tmp_path / "sizes.npz", "--lengths", tmp_path / "costs.npz", "--batch-size", 2000]
    argv += ["--num-shards", 2, "--partition-epoch", 2, "--num-epochs", 2, "--no-plot", "-o", tmp_path / "out"]
    err = one_error_line(run_cli(*argv))
    assert f"were computed over other versions of 1 of their 8 files (first at entry 3, {rewritten!r}" in err, err
    assert f"{str(tmp_path / 'costs.npz')!r} is older; compute it again" in err and "i6_shard costs" in err, err
    assert not (tmp_path / "out" / "plan.npz").exists()
    # computed again, the costs fit
    assert run_cli("costs", files, "-o", tmp_path / "costs.npz").returncode == 0
    assert run_cli(*argv).returncode == 0


def test_batching_lengths_stored_equal_to_the_lengths_give_equal_steps_the_same_bins(tmp_path):
    """The bins depend on the lengths, not on how an archive stores them: batching lengths kept though they equal
    the sequence lengths plan as the archive without them."""
    import dataclasses

    rng = np.random.RandomState(5)
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(40)]
    lengths = [rng.randint(20, 400, size=n).astype(np.int32) for n in rng.randint(1, 12, size=40)]
    plain = frames_costs(keys, lengths)
    explicit = dataclasses.replace(plain, seq_batch_lengths=plain.seq_lengths.copy())
    argv = ["--num-shards", 3, "--partition-epoch", 2, "--num-epochs", 4, "--distribution", "equal_steps"]
    argv += ["--batch-size", 700, "--no-plot"]
    for name, costs in (("plain", plain), ("explicit", explicit)):
        core.io.save_file_costs(costs, str(tmp_path / f"{name}.npz"))
        res = run_cli("plan", "--sizes", tmp_path / f"{name}.npz", *argv, "-o", tmp_path / name)
        assert res.returncode == 0, res.stderr[-2000:]
    with np.load(tmp_path / "explicit.npz") as npz:
        assert "seq_batch_lengths" in npz.files  # the case checks something
    with np.load(tmp_path / "plain" / "plan.npz") as a, np.load(tmp_path / "explicit" / "plan.npz") as b:
        assert np.array_equal(a["orders"], b["orders"]) and np.array_equal(a["bounds"], b["bounds"])
    summaries = [json.load(open(tmp_path / name / "summary.json")) for name in ("plain", "explicit")]
    assert summaries[0]["steps_exact"] == summaries[1]["steps_exact"]


@pytest.mark.slow
def test_plan_under_a_file_size_limit_names_the_file_and_the_limit(tmp_path):
    """``ulimit -f`` (RLIMIT_FSIZE; Python ignores SIGXFSZ, so the write fails with EFBIG) is this process's limit,
    not the file system's: the error names the file it could not write, the limit and its fix, and what the whole
    set needs (the bytes it renders, not a blanket 4 MiB)."""
    import resource

    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(8)]
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=np.arange(1, 9) * 1000), str(tmp_path / "sizes.npz"))
    limit = 20 << 10

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    argv = [sys.executable, "-m", "i6_shard", "plan", "--sizes", str(tmp_path / "sizes.npz"), "--num-shards", "2"]
    argv += ["--partition-epoch", "2", "--num-epochs", "4", "-o", str(tmp_path / "out")]
    res = run_to_end(argv, preexec_fn=limited)
    err = res.stderr.splitlines()[-1] + "\n"
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    plot = str(tmp_path / "out" / "plot.png")  # the one file above 20 KiB
    assert err.startswith(f"error: cannot write {plot!r}: larger than this process's file size limit (ulimit -f, "), err
    assert f"{limit:,} bytes); it needs about " in err and "raise the limit (ulimit -f unlimited)" in err, err
    need = err.split("it needs about ")[1].split(":")[0]
    assert need.endswith("KiB") and float(need.split()[0]) < 300, err  # a set of 8 files: some KiB
    assert not (tmp_path / "out").exists()


def _each_heartbeat_beats_before_its_stage_ends(monkeypatch):
    """The stages' heartbeats, each held open until its thread printed a line: a stage may end within a millisecond,
    or before a loaded machine runs the heartbeat's thread, and the lines are to show which stages have one."""
    import contextlib
    import threading

    from i6_shard.core import planning
    from i6_shard.core.io import progress
    from i6_shard.core.reporting import outputs

    class Beats:
        def __init__(self):
            self.beat = threading.Event()

        def write(self, text):
            sys.stderr.write(text)
            self.beat.set()

        def flush(self):
            sys.stderr.flush()

    @contextlib.contextmanager
    def heartbeat(label, *, interval=None, stream=None):
        beats = Beats()
        with progress.heartbeat(label, interval=interval, stream=beats):
            yield
            beats.beat.wait(600)  # a hang guard only; without a line the test fails naming the stage

    for module in (planning, outputs):
        monkeypatch.setattr(module, "heartbeat", heartbeat)


def test_plan_shows_it_is_alive_in_every_long_stage_after_the_cut(tmp_path, capsys, monkeypatch):
    """After the cut, checking the batching limits, the predicted loss, the simulated steps and rendering the plot
    took 40 s at 200k files with no line: each now prints one every few seconds (here every millisecond)."""
    import pytest

    from i6_shard.cli import main
    from i6_shard.core.io import progress

    pytest.importorskip("matplotlib", reason=MATPLOTLIB_REASON)
    monkeypatch.setattr(progress, "DEFAULT_INTERVAL", 0.001)
    _each_heartbeat_beats_before_its_stage_ends(monkeypatch)
    costs, _ = costs_with_empty_files(tmp_path / "costs.npz", num_files=400, seed=4)
    argv = ["plan", "--sizes", costs, "--num-shards", "4", "--partition-epoch", "4", "--num-epochs", "40"]
    assert main([*argv, "--batch-size", "700", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    for stage in (
        "plan: batching limits checked against 400 files' lengths: running, elapsed ",
        "plan: predicted loss of 40 sub-epochs (model): running, elapsed ",
        "plan: steps of 40 sub-epochs (simulated): running, elapsed ",
        "plan outputs: the plot: running, elapsed ",
    ):
        assert stage in err, (stage, err[-3000:])


def test_train_report_on_a_full_tmpdir_names_the_scratch_file_and_tmpdir(tmp_path, capsys, monkeypatch):
    """The records wait in an unnamed scratch file in TMPDIR: a full TMPDIR names it (and TMPDIR, and the fix), not
    the output directory, which has room."""
    import errno
    import os
    import tempfile

    from i6_shard.cli import main
    from i6_shard.core.io import spill

    case = os.path.join(os.path.dirname(__file__), "..", "data", "returnn_logs", "w4_bv24")
    logs = [os.path.join(case, f"returnn.torch-distrib-{r}-4.log") for r in range(4)]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill.os, "pwrite", full)
    out = tmp_path / "report"
    capsys.readouterr()
    assert main(["train-report", *logs, "--no-plot", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write the scratch file 'i6_shard.*' in {str(scratch)!r} (TMPDIR)"), err
    assert "no space left on device" in err and "set TMPDIR to a directory with more room" in err, err
    assert err.count("\n") == 1 and str(out) not in err, err
    assert not out.exists()


def _distinct_names_log(path, *, num_lines, names_per_line, ranks=2):
    """A torchrun stdout whose "using files" lines name distinct files only (none twice)."""
    i = 0
    with open(path, "w") as f:
        for r in range(ranks):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_lines + 1):
            for r in range(ranks):
                names = [f"/corpus/part-{i + j:09d}.hdf" for j in range(names_per_line)]
                i += names_per_line
                f.write(
                    f"[default{r}]:<DistributeFilesDataset 'train' epoch={e}>: using files for epoch {e}: {names!r}\n"
                )
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(ranks)))


def test_train_report_holds_a_bounded_number_of_distinct_file_names(tmp_path, capsys, monkeypatch):
    """Each distinct file name of the logs is held once (some 500 bytes): past MAX_CATALOG_FILES, lines that name
    further ones are not read and the report says so, so its memory stays in what TrainReportJob asks for (1 GB and
    2 bytes per log byte) whatever the logs; measured on logs of distinct names 44 bytes each: 48 MB, 555 MiB peak
    before and 563 after; 120 MB, 563 MiB after (the cap reached), where it grew 11 bytes per log byte before."""
    from i6_shard.cli import main
    from i6_shard.core.io import returnn_log

    monkeypatch.setattr(returnn_log, "MAX_CATALOG_FILES", 1000)
    _distinct_names_log(tmp_path / "train.log", num_lines=20, names_per_line=100)  # 4,000 distinct names
    capsys.readouterr()
    assert main(["train-report", str(tmp_path / "train.log"), "--no-plot", "-o", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "report.txt").read_text()
    assert 'the files of 15 "using files" lines were not read: the logs name more than 1,000 distinct files' in report
    assert "train.log [rank 0]:" in report.split("the logs name more than 1,000")[1]


def _setup_tutorial(monkeypatch, tmp_path, *, download_fails=False):
    """scripts/setup_tutorial.py's module with pip, the torch check and make-data stubbed (no network), and an i6_core
    package in tmp_path; a RETURNN root is unpacked already unless ``download_fails``."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "setup_tutorial.py")
    spec = importlib.util.spec_from_file_location("setup_tutorial_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def run(cmd, **kwargs):
        if download_fails and "download" in cmd:
            raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(module, "_run", run)
    monkeypatch.setattr(module, "check_torch", lambda *a: module.TORCH_VERSION)
    i6_core = tmp_path / "i6_core"
    i6_core.mkdir(exist_ok=True)
    (i6_core / "__init__.py").write_text("")
    return module, str(i6_core)


def _with_root(setup):
    (setup / "returnn-1.0").mkdir(parents=True, exist_ok=True)
    (setup / "returnn-1.0" / "rnn.py").write_text("")


def test_setup_tutorial_run_again_in_a_half_made_setup_is_one_line_or_completes(tmp_path, capsys, monkeypatch):
    import os

    module, i6_core = _setup_tutorial(monkeypatch, tmp_path)
    setup = tmp_path / "setup"

    def fails(*, naming):
        capsys.readouterr()
        assert module.main([str(setup), "--i6-core", i6_core]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert naming in err and "then run this again" in err, err
        return err

    _with_root(setup)
    (setup / "recipe").write_text("not a directory")  # FileExistsError before
    fails(naming=f"{str(setup / 'recipe')!r}")
    os.remove(setup / "recipe")
    (setup / "recipe").mkdir()
    (setup / "settings.py").mkdir()  # IsADirectoryError before
    err = fails(naming=f"{str(setup / 'settings.py')!r}")
    assert "move it away" in err
    os.rmdir(setup / "settings.py")
    os.remove(setup / "recipe" / "i6_core")  # (made by the run before)
    os.symlink(tmp_path / "gone", setup / "recipe" / "i6_core")  # a link that leads nowhere: kept, rc 0 before
    assert module.main([str(setup), "--i6-core", i6_core]) == 0
    assert os.path.realpath(setup / "recipe" / "i6_core") == os.path.realpath(i6_core)
    assert module.main([str(setup), "--i6-core", i6_core]) == 0  # and again: nothing to redo
    os.remove(setup / "recipe" / "i6_core")
    (setup / "recipe" / "i6_core").mkdir()  # the user's own directory there: refused by name
    fails(naming=f"{str(setup / 'recipe' / 'i6_core')!r} is a directory, not the link to --i6-core")
    (tmp_path / "file").write_text("")
    capsys.readouterr()
    assert module.main([str(tmp_path / "file"), "--i6-core", i6_core]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_setup_tutorial_with_a_failed_download_is_one_line(tmp_path, capsys, monkeypatch):
    """A failed pip (no network) was a CalledProcessError traceback: one line naming the command (pip's own output
    above it)."""
    module, i6_core = _setup_tutorial(monkeypatch, tmp_path, download_fails=True)
    assert module.main([str(tmp_path / "setup"), "--i6-core", i6_core]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: `") and "pip download" in err and "failed with exit status 1" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_setup_tutorial_names_a_permission_error_with_its_path_and_fix(tmp_path, monkeypatch):
    """(As root no permission is refused, so the error is made by hand.)"""
    import errno

    module, _ = _setup_tutorial(monkeypatch, tmp_path)
    line = module._os_error_line(PermissionError(errno.EACCES, "Permission denied", "/s/settings.py"))
    assert (
        line == "'/s/settings.py': permission denied: make it writable (or run this as its owner), then run this again"
    )


def test_an_archive_where_the_file_list_belongs_is_named_as_what_it_is(tmp_path):
    """`costs costs.npz` advised renaming the archive or converting it with write_file_list: it is a costs archive,
    and the command wants the list of files it was made from."""
    costs, _ = costs_with_empty_files(tmp_path / "costs.npz", num_files=8)
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(8)]
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=np.arange(1, 9)), str(tmp_path / "sizes.npz"))
    for command in ("costs", "sizes"):
        for archive, kind in ((costs, "a costs archive"), (str(tmp_path / "sizes.npz"), "a sizes archive")):
            err = one_error_line(run_cli(command, archive, "-o", tmp_path / "out.npz"))
            assert (
                f"file list {archive!r} is {kind} (.npz), not a file list: give the list of files it was made " in err
            )
            assert "write_file_list" not in err and "rename" not in err, err


def _drawn_figures(monkeypatch):
    """The figures saved while the test runs (Figure.savefig recorded, then done)."""
    import pytest

    pytest.importorskip("matplotlib", reason=MATPLOTLIB_REASON)
    from matplotlib.figure import Figure

    figures, save = [], Figure.savefig

    def recording(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording)
    return figures


def _line_above_bars(fig, label_start):
    """The line of ``fig`` whose label starts with ``label_start``, checked to be drawn above the bars and the axes'
    spines of its panel and not clipped at the x axis (a 0 there stays visible)."""
    for ax in fig.axes:
        for line in ax.get_lines():
            if str(line.get_label()).startswith(label_start):
                bars = [p.get_zorder() for p in ax.patches]
                spines = [s.get_zorder() for s in ax.spines.values()]
                assert line.get_zorder() > max(bars + spines) and not line.get_clip_on(), label_start
                return line
    raise AssertionError(f"no line {label_start!r} in the figure")


@pytest.mark.slow
def test_the_plan_plot_shows_a_predicted_drop_of_zero_above_the_bars(tmp_path, monkeypatch):
    """An equal_steps plan predicts 0 everywhere: that line lay on the x axis, under the bars' feet and the spine."""
    from i6_shard.cli import main

    figures = _drawn_figures(monkeypatch)
    costs, _ = costs_with_empty_files(tmp_path / "costs.npz", seed=6)
    argv = ["plan", "--sizes", costs, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "8"]
    assert main([*argv, "--batch-size", "700", "--distribution", "equal_steps", "-o", str(tmp_path / "out")]) == 0
    (fig,) = figures
    line = _line_above_bars(fig, "predicted under the batching")
    assert list(line.get_ydata()) == [0.0] * 8


def test_the_training_plot_shows_the_planned_drop_beside_the_measured_one(tmp_path, monkeypatch):
    import os

    from i6_shard.core.reporting.train_report import write_train_report
    from tests.core.reporting.test_train_report_planned import LOGS, logs, plan_dir, trained_steps

    figures = _drawn_figures(monkeypatch)
    plan = plan_dir(tmp_path, steps_taken=trained_steps(), dropped=[0.0, 0.05, 0.0, 0.02])
    lengths = os.path.join(LOGS, "file_lengths.json")
    write_train_report(logs(), str(tmp_path / "out"), plan_path=str(plan), file_lengths_path=lengths, read_hdf=False)
    (fig,) = figures
    line = _line_above_bars(fig, "planned (mean 1.75%)")
    assert list(line.get_ydata()) == [0.0, 5.0, 0.0, 2.0]


def test_accum_grad_multiple_step_0_is_1_in_the_sync_mode_and_the_plan_job():
    import pytest

    from i6_shard.core import SyncMode

    assert SyncMode("param", 4, 0) == SyncMode("param", 4, 1)
    with pytest.raises(ValueError, match="accum_grad_multiple_step=-2 must be a positive int .*0 is 1"):
        SyncMode("param", 4, -2)
    pytest.importorskip("sisyphus", reason=SISYPHUS_REASON)
    from sisyphus import tk

    from i6_shard.jobs import ShardPlanJob

    jobs = [
        ShardPlanJob(tk.Path("/data/a.npz"), num_shards=2, partition_epoch=2, num_epochs=4, batch_size=900, **extra)
        for extra in ({}, {"accum_grad_multiple_step": 0}, {"accum_grad_multiple_step": 1})
    ]
    assert jobs[0] is jobs[1] is jobs[2]  # one job: the same plan

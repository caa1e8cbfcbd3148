"""recipe_examples/ runs to the end through Sisyphus' real Slurm engine (``sbatch``) on a single-node Slurm
that scripts/start_local_slurm.sh starts from Debian's slurm-wlm and munge, and stops again. Skipped, with
the reason, where slurmctld is not installed or cannot be started by this user (slurmd needs root)."""

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from tests.blocking import run_to_end, wait_for_process, wait_for_state
from tests.jobs.conftest import SISYPHUS_REASON, sis_command

pytestmark = pytest.mark.slurm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "start_local_slurm.sh")
_SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_missing() -> str:
    """Why this machine cannot start the test cluster ("" if it can)."""
    missing = [
        b
        for b in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "srun")
        if shutil.which(b, path=_SBIN) is None
    ]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} not found): on Debian, apt-get install -y slurm-wlm "
            f"munge (or {os.path.relpath(SCRIPT, REPO)} install)"
        )
    if os.geteuid() != 0:
        return (
            "starting slurmd needs root (it starts the jobs as their user); run the tests as root to include this one"
        )
    return ""


def _processes_using(directory: str) -> list:
    """``(pid, command)`` of the processes with a file, or their working directory, under ``directory``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = [os.readlink(f"/proc/{pid}/cwd")] + [
                os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")
            ]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if any(link == directory or link.startswith(directory + os.sep) for link in links):
            found.append((int(pid), command))
    return found


@contextlib.contextmanager
def _cluster(state: str):
    """Start the single-node Slurm in ``state``; yield the environment that finds it (SLURM_CONF); stop it
    and check that no process of it (daemons, job steps) is left."""
    env = dict(
        os.environ, PATH=_SBIN, I6_SHARD_SLURMCTLD_PORT=str(_free_port()), I6_SHARD_SLURMD_PORT=str(_free_port())
    )
    started = run_to_end([SCRIPT, "start", state], env=env)
    try:
        assert started.returncode == 0, f"{SCRIPT} start failed:\n{started.stdout}\n{started.stderr}\n" + _logs(state)
        yield dict(env, SLURM_CONF=os.path.join(state, "slurm.conf"))
    finally:
        stopped = run_to_end([SCRIPT, "stop", state], env=env)
        assert stopped.returncode == 0, stopped.stderr
        for name in ("munged", "slurmctld", "slurmd"):
            assert not os.path.exists(os.path.join(state, f"{name}.pid")), f"{name} still has a pid file"
        assert _processes_using(state) == []


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running single-node Slurm for the module's tests, stopped afterwards."""
    reason = _slurm_missing()
    if reason:
        pytest.skip(reason)
    with _cluster(str(tmp_path_factory.mktemp("slurm"))) as env:
        yield env


def test_without_slurm_the_tests_are_skipped_with_the_reason(monkeypatch, tmp_path):
    # No Slurm binaries on the search path: the reason names them and how to install them.
    monkeypatch.setattr(sys.modules[__name__], "_SBIN", str(tmp_path))
    reason = _slurm_missing()
    assert (
        reason.startswith(
            "Slurm is not installed (slurmctld, slurmd, munged, mungekey, sbatch, squeue, srun not found)"
        )
        and "apt-get install -y slurm-wlm munge" in reason
    ), reason


def _all_processes() -> list:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append((int(pid), f.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            continue
    return out


def _logs(state: str) -> str:
    out = []
    for name in ("slurmctld.log", "slurmd.log", "munged.log"):
        path = os.path.join(state, "log", name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                out.append(f"--- {name} (tail)\n" + "".join(f.readlines()[-30:]))
    return "\n".join(out)


def _queue(env) -> str:
    """Slurm's queue as ``<job id> <state>`` lines ("" when empty)."""
    return subprocess.run(
        ["squeue", "-h", "-o", "%i %T"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _run_manager(setup_dir, log_path, env):
    """``sis m -r`` in ``setup_dir`` until it exits by itself (done, or nothing runnable left): no time limit, only a
    hang guard that fails when its log, its work dir and Slurm's queue all stood still for a long time."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            sis_command() + ["m", "-r"],
            cwd=setup_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return wait_for_process(
                proc,
                what=f"`sis m -r` on Slurm (log: {log_path})",
                watch=[log_path, os.path.join(setup_dir, "work")],
                snapshot=lambda: _queue(env),
            )
        except BaseException:
            subprocess.run(["scancel", "--user", str(os.getuid())], env=env, capture_output=True)
            raise


def _job_dirs(setup_dir: str) -> list:
    """The job directories under the setup's work dir (work/<module path>/<Job>.<hash>)."""
    found = []
    for root, dirs, _ in os.walk(os.path.join(setup_dir, "work")):
        for d in list(dirs):
            if os.path.exists(os.path.join(root, d, "info")):
                found.append(os.path.join(root, d))
                dirs.remove(d)
    return found


def _read(path, mode="rt"):
    with open(path, mode) as f:
        return f.read()


def test_settings_slurm_puts_mini_tasks_locally_or_on_slurm(monkeypatch):
    pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
    from sisyphus.localengine import LocalEngine
    from sisyphus.simple_linux_utility_for_resource_management_engine import (
        SimpleLinuxUtilityForResourceManagementEngine as Slurm,
    )

    with open(os.path.join(REPO, "recipe_examples", "settings_slurm.py")) as f:
        code = compile(f.read(), "settings_slurm.py", "exec")
    for value, short_type in ((None, LocalEngine), ("slurm", Slurm)):
        if value is None:
            monkeypatch.delenv("I6_SHARD_MINI_TASKS", raising=False)
        else:
            monkeypatch.setenv("I6_SHARD_MINI_TASKS", value)
        namespace = {}
        exec(code, namespace)
        selector = namespace["engine"]()
        assert selector.default_engine == "long" and isinstance(selector.engines["long"], Slurm)
        assert isinstance(selector.engines["short"], short_type)
    monkeypatch.setenv("I6_SHARD_MINI_TASKS", "everywhere")
    namespace = {}
    exec(code, namespace)
    with pytest.raises(ValueError, match="I6_SHARD_MINI_TASKS='everywhere'"):
        namespace["engine"]()


@pytest.mark.parametrize("mini_tasks", ["local", "slurm"])
def test_recipe_example_runs_through_the_slurm_engine(slurm, tmp_path, mini_tasks):
    pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
    pytest.importorskip("psutil", reason="Sisyphus' LocalEngine needs psutil: pip install psutil")
    pytest.importorskip(
        "better_exchook", reason="the example's settings.py uses better_exchook: pip install better_exchook"
    )
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
    from i6_shard import cli, core

    setup_dir = str(tmp_path / "setup")
    shutil.copytree(
        os.path.join(REPO, "recipe_examples"),
        setup_dir,
        ignore=shutil.ignore_patterns("__pycache__", "work", "output", "alias"),
    )
    os.mkdir(os.path.join(setup_dir, "work"))
    env = dict(
        slurm,
        PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
        SIS_GLOBAL_SETTINGS_FILE="settings.py:settings_slurm.py",
        I6_SHARD_MINI_TASKS=mini_tasks,
    )
    log_path = str(tmp_path / "sis.log")
    start = time.monotonic()
    assert _run_manager(setup_dir, log_path, env) == 0, _read(log_path)[-5000:]
    took = time.monotonic() - start
    log = _read(log_path)
    assert "All output calculated" in log, log[-5000:]

    # The tasks went through sbatch (mini tasks only with I6_SHARD_MINI_TASKS=slurm): a Slurm job id per task
    # in the manager's log, and Slurm ran them all to the end.
    submitted = re.findall(r"Submitted with job_id: (\d+) (\S+)", re.sub(r"\x1b\[[0-9;]*m", "", log))
    names = {name.split(".")[-3] for _, name in submitted}  # .../<JobClass>.<hash>.<task>
    if mini_tasks == "slurm":
        assert {"TinyHdfDataJob", "ComputeFileSizesJob", "ShardPlanJob", "VerifyShardingJob"} <= names, submitted
    else:  # TinyHdfDataJob is a mini task; the verification, running RETURNN per rank, is not
        assert "VerifyShardingJob" in names and "TinyHdfDataJob" not in names, submitted
    # The last batch step ends a few seconds after its task wrote the outputs (on a loaded machine, much later):
    # wait for Slurm's queue to empty, as long as the jobs' states keep changing.
    wait_for_state(lambda: _queue(slurm), done=lambda queue: queue == "", what="the jobs leaving Slurm's queue")
    with open(os.path.join(os.path.dirname(slurm["SLURM_CONF"]), "log", "slurmctld.log"), errors="replace") as f:
        done = set(re.findall(r"_job_complete: JobId=(\d+)\S* done", f.read()))
    assert {job_id for job_id, _ in submitted} <= done

    # The two parallel parts of the sizes job went out as one array job of two tasks: one submission, and
    # Slurm's per-task logs <name>.<array job id>.<task id> of that one job id in the job's engine dir.
    sizes_runs = [
        (job_id, name)
        for job_id, name in submitted
        if name.split(".")[-3:-2] == ["ComputeFileSizesJob"] and name.endswith(".run")
    ]
    assert len(sizes_runs) == 1, submitted
    (sizes_job_dir,) = [d for d in _job_dirs(setup_dir) if os.path.basename(d).startswith("ComputeFileSizesJob.")]
    logs = os.listdir(os.path.join(sizes_job_dir, "engine"))
    array_id = sizes_runs[0][0]
    assert {f"{sizes_runs[0][1]}.{array_id}.{i}" for i in (1, 2)} <= set(logs), logs

    out = os.path.join(setup_dir, "output", "sharded_training")
    # The merged sizes are byte for byte what a local run of the command line computes for the same list.
    local_sizes = str(tmp_path / "local_sizes.npz")
    assert cli.main(["sizes", os.path.join(out, "files.txt"), "-o", local_sizes]) == 0
    assert _read(os.path.join(out, "file_sizes.npz"), "rb") == _read(local_sizes, "rb")
    assert _read(os.path.join(out, "verify_ok")).strip() == "True"
    report = _read(os.path.join(out, "verify_report.txt"))
    assert report.startswith("i6_shard sharding verification: OK\n")
    # The plan job on Slurm wrote what the command line writes here for the same sizes.
    cli_out = str(tmp_path / "cli")
    assert (
        cli.main(
            [
                "plan",
                "--sizes",
                os.path.join(out, "file_sizes.npz"),
                "--num-shards",
                "2",
                "--partition-epoch",
                "3",
                "--num-epochs",
                "6",
                "-o",
                cli_out,
                "--no-plot",
            ]
        )
        == 0
    )
    assert _read(os.path.join(out, "plan.npz"), "rb") == _read(os.path.join(cli_out, core.PLAN_FILE), "rb")
    assert _read(os.path.join(out, "plan_report.txt")) == _read(os.path.join(cli_out, core.REPORT_FILE))
    print(f"recipe example on Slurm: {took:.1f} s, {len(submitted)} sbatch submissions")


def test_stopping_the_cluster_ends_its_running_jobs(slurm, tmp_path):
    """Last in this module: it stops the module's cluster (whose teardown then finds it stopped)."""
    state = os.path.dirname(slurm["SLURM_CONF"])
    marker = f"sleep 299.{os.getpid()}"  # a command line no other process has
    subprocess.run(
        ["sbatch", "--mem=100M", "--time=10", "-o", str(tmp_path / "job.out"), f"--wrap=srun {marker}"],
        env=slurm,
        check=True,
        capture_output=True,
        cwd=str(tmp_path),
    )
    # Until its step runs (a loaded machine starts it late) or the job left the queue without running it.
    running, _ = wait_for_state(
        lambda: (any(marker in cmd for _, cmd in _all_processes()), _queue(slurm)),
        done=lambda seen: seen[0] or seen[1] == "",
        what="the test job starting",
        poll=0.25,
    )
    assert running, "the test job left the queue without running its step: " + _logs(state)
    stopped = run_to_end([SCRIPT, "stop", state], env=slurm)
    assert stopped.returncode == 0, stopped.stderr
    assert not any(marker in cmd for _, cmd in _all_processes())
    assert _processes_using(state) == []

"""recipe_examples/ runs end to end with the real Sisyphus manager (``sis m -r``), in a copy
in a temp dir: tiny HDF data -> file sizes -> shard plan -> verification with RETURNN."""

import os
import re
import shutil
import subprocess

import pytest

from tests.blocking import wait_for_process
from tests.jobs.conftest import SISYPHUS_REASON, sis_command

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("psutil", reason="Sisyphus' LocalEngine needs psutil: pip install psutil")
pytest.importorskip(
    "better_exchook", reason="the example's settings.py uses better_exchook: pip install better_exchook"
)
pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from i6_shard import cli, core  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_manager(setup_dir, log_path, answer=""):
    """``sis m -r`` in ``setup_dir``; ``answer`` goes to its stdin (it asks only when all is done)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            sis_command() + ["m", "-r"],
            cwd=setup_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.stdin.write(answer.encode())  # read only when it asks, at the end
        proc.stdin.close()
        # until it exits by itself, as long as its log or work dir changes (no time limit: only a hang guard)
        return wait_for_process(
            proc, what=f"`sis m -r` (log: {log_path})", watch=[log_path, os.path.join(setup_dir, "work")]
        )


def _read(path, mode="rt"):
    with open(path, mode) as f:
        return f.read()


@pytest.mark.slow
def test_recipe_example_with_the_real_manager(tmp_path):
    setup_dir = str(tmp_path / "setup")
    shutil.copytree(
        os.path.join(REPO, "recipe_examples"),
        setup_dir,
        ignore=shutil.ignore_patterns("__pycache__", "work", "output", "alias"),
    )
    os.mkdir(os.path.join(setup_dir, "work"))  # else the manager asks whether to create it
    log_path = str(tmp_path / "sis.log")
    assert _run_manager(setup_dir, log_path) == 0, _read(log_path)[-5000:]
    out = os.path.join(setup_dir, "output", "sharded_training")
    log = _read(log_path)
    assert "All output calculated" in log, log[-5000:]

    assert _read(os.path.join(out, "verify_ok")).strip() == "True"
    report = _read(os.path.join(out, "verify_report.txt"))
    assert report.startswith("i6_shard sharding verification: OK\n")
    for full_epoch in (0, 1):
        assert re.search(rf"full epoch {full_epoch}: (\d+) / \1 / \1\n", report), report

    # The plan job wrote what the command line writes for the same sizes.
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
            ]
        )
        == 0
    )
    assert _read(os.path.join(out, "plan.npz"), "rb") == _read(os.path.join(cli_out, core.PLAN_FILE), "rb")
    assert _read(os.path.join(out, "plan_report.txt")) == _read(os.path.join(cli_out, core.REPORT_FILE))
    assert float(_read(os.path.join(out, "dropped_fraction"))) >= 0.0
    assert len(core.read_file_list(os.path.join(out, "files.txt"))) == 24

    # A second run finds everything done (and asks what to do; "c": cancel) and rewrites nothing.
    before = {n: os.stat(os.path.join(out, n)).st_mtime_ns for n in os.listdir(out)}
    assert _run_manager(setup_dir, log_path, answer="c\n") == 0
    assert "All calculations are done" in _read(log_path)
    assert {n: os.stat(os.path.join(out, n)).st_mtime_ns for n in os.listdir(out)} == before

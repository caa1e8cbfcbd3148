"""Job tests in i6_core's pattern: a temporary Sisyphus work dir, then each task run in-process."""

import os
import shutil
import sys
from typing import List

import pytest

from tests.deps import SISYPHUS_REASON, needs_torch  # noqa: F401 (the job tests import SISYPHUS_REASON from here)


def sis_command() -> List[str]:
    """The ``sis`` script of this Python (what a user types), else the one on PATH; skips the test without one."""
    here = os.path.join(os.path.dirname(sys.executable), "sis")
    found = here if os.path.isfile(here) else shutil.which("sis")
    if not found:
        pytest.skip("the `sis` command of Sisyphus is not installed next to this Python or on PATH")
    return [found]


def needs_recipe_training(torch_why: str):
    """Skip unless a recipe can train under the real Sisyphus manager: Sisyphus (and psutil, for its LocalEngine),
    torch, h5py (make-data), i6_core and RETURNN; returns torch."""
    pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
    pytest.importorskip("psutil", reason="Sisyphus' LocalEngine needs psutil: pip install psutil")
    torch = needs_torch(torch_why)
    pytest.importorskip("h5py", reason="make-data writes HDF files with h5py: pip install h5py")
    pytest.importorskip(
        "i6_core.returnn",
        reason="the training job is i6_core's ReturnnTrainingJob: clone github.com/rwth-i6/i6_core into recipe/ "
        "or put its parent directory on PYTHONPATH",
    )
    pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn dm-tree")
    return torch


@pytest.fixture
def work_dir(tmp_path, monkeypatch):
    """gs.WORK_DIR in a temp dir, and a fresh job cache (Sisyphus keeps one job object per id)."""
    pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
    from sisyphus import gs
    import sisyphus.job

    monkeypatch.setattr(gs, "WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setattr(sisyphus.job, "created_jobs", {})
    return tmp_path


def run_job(job):
    """Set up the job directory and run every task, every argument, in order (what the worker does)."""
    job._sis_setup_directory()
    for task in job.tasks():
        for args in task._args:
            getattr(job, task.name())(*(args if isinstance(args, (list, tuple)) else [args]))

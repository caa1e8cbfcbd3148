"""Job tests in i6_core's pattern: a temporary Sisyphus work dir, then each task run in-process."""

import os
import shutil
import sys
from typing import List

import pytest

from tests.deps import SISYPHUS_REASON  # noqa: F401 (the job tests import it from here)


def sis_command() -> List[str]:
    """The ``sis`` script of this Python (what a user types), else the one on PATH; skips the test without one."""
    here = os.path.join(os.path.dirname(sys.executable), "sis")
    found = here if os.path.isfile(here) else shutil.which("sis")
    if not found:
        pytest.skip("the `sis` command of Sisyphus is not installed next to this Python or on PATH")
    return [found]


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

"""The RETURNN releases the matrix runs on, installed once each into a cache outside the repository
(``pip install --no-deps --target``), and the run of ``release_checks`` inside one of them."""

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict

import pytest

from tests.blocking import run_to_end

#: The newest release the matrix knows (the one the test extra installs), and the older releases recipes pin:
#: the first with distrib_shard_files, the first with Dataset._num_shards in the matrix, a list file, a callable,
#: the last before sharding_fix.
NEWEST = "1.20261022.211313"
OLD_RELEASES = ("1.20240620.64807", "1.20250115.110555", "1.20250717.120243", "1.20260115.224445", "1.20260608.172901")
#: Where the releases are installed: ``$I6_SHARD_RETURNN_RELEASES``, else the system's temporary directory.
CACHE = os.environ.get("I6_SHARD_RETURNN_RELEASES") or os.path.join(tempfile.gettempdir(), "returnn_versions")
#: What pip prints when it cannot reach the package index at all (then, and only then, the test is skipped).
_UNREACHABLE = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "NewConnectionError",
    "ConnectTimeoutError",
    "ProxyError",
)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def install(version: str) -> str:
    """The directory that holds RETURNN ``version`` (``<CACHE>/returnn-<version>``), installed there first if it is
    not yet (into a temporary directory, then renamed: a parallel run never sees half a release). Skips the test
    only if pip cannot reach the package index; any other failure fails it."""
    target = os.path.join(CACHE, f"returnn-{version}")
    if os.path.isfile(os.path.join(target, "returnn", "datasets", "distrib_files.py")):
        return target
    os.makedirs(CACHE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".returnn-{version}-", dir=CACHE)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", tmp, f"returnn=={version}"]
    proc = run_to_end(cmd)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        output = proc.stdout + proc.stderr
        if any(sign in output for sign in _UNREACHABLE):
            pytest.skip(f"cannot install RETURNN {version}: pip cannot reach the package index ({' '.join(cmd)})")
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    try:
        os.rename(tmp, target)
    except OSError:  # installed by a parallel run meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def run_release_checks(version: str, workdir: str) -> Dict[str, Any]:
    """``release_checks`` in a subprocess whose first path entry is the installed release; its result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([install(version), _REPO])}
    cmd = [sys.executable, "-m", "tests.returnn_versions.release_checks", version, workdir]
    proc = run_to_end(cmd, cwd=workdir, env=env)  # its dumps there
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"release checks on RETURNN {version} failed:\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT ") :])

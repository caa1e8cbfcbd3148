"""RETURNN's own DistributeFilesDataset tests (from the returnn sdist on PyPI) run on RETURNN's class
and with i6_shard's ShardedDistributeFilesDataset substituted: every test that passes on RETURNN's
class passes on the subclass. The fast ones run by default; I6_SHARD_RETURNN_TESTS=all runs every one."""

import glob
import os
import re
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree

import pytest

from tests.blocking import run_to_end

returnn = pytest.importorskip("returnn", reason="needs RETURNN: pip install returnn")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: RETURNN's DFD tests that take more than a few seconds (68 s, 18 s, 11 s measured on 2 cores).
SLOW = (
    "test_DistributeFilesDataset_no_worker_proc",
    "test_DistributeFilesDataset",
    "test_DistributeFilesDataset_with_multi_proc_postprocessing_cleanup",
)


def _sdist_tests_dir() -> str:
    """The ``tests`` dir of the returnn sdist of the installed version: I6_SHARD_RETURNN_SDIST, an
    unpacked copy under the temp dir, or downloaded with pip into the cache (skips where there is no network or index,
    fails for any other failure)."""
    version = returnn.__version__
    candidates = [os.environ.get("I6_SHARD_RETURNN_SDIST", "")]
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "i6_shard", "returnn_sdist")
    for root in (os.path.join(tempfile.gettempdir(), "returnn_sdist"), cache):
        candidates.append(os.path.join(root, f"returnn-{version}"))
    for candidate in candidates:
        if candidate and os.path.isfile(os.path.join(candidate, "tests", "test_Dataset.py")):
            return os.path.join(candidate, "tests")
    os.makedirs(cache, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-binary",
        ":all:",
        "--no-deps",
        "--no-build-isolation",
        f"returnn=={version}",
        "-d",
        cache,
    ]
    proc = run_to_end(cmd)
    archives = glob.glob(os.path.join(cache, f"returnn-{version}.tar.gz"))
    if proc.returncode != 0 and network_unreachable(proc.stderr):
        pytest.skip(
            f"no network or package index here: pip cannot fetch the returnn {version} sdist with its tests "
            f"({proc.stderr.strip()[-200:]!r}); set I6_SHARD_RETURNN_SDIST to an unpacked returnn sdist to run "
            "RETURNN's own DistributeFilesDataset tests"
        )
    if proc.returncode != 0 or not archives:  # any other failure is an error, not a reason to skip
        pytest.fail(
            f"could not fetch the returnn {version} sdist with its tests ({' '.join(cmd)}: exit "
            f"{proc.returncode}, {proc.stderr.strip()[-300:]!r}, archives {archives})"
        )
    with tarfile.open(archives[0]) as tar:
        tar.extractall(cache, filter="data")
    return os.path.join(cache, f"returnn-{version}", "tests")


#: What pip says when there is no network or no index to reach, or the index has no such sdist (the one case in
#: which the fetch is skipped rather than failed).
_UNREACHABLE = re.compile(
    r"NewConnectionError|ConnectionError|Max retries exceeded|Temporary failure in name resolution|"
    r"Network is unreachable|Name or service not known|No route to host|Connection refused|timed out|"
    r"No matching distribution found|Could not find a version that satisfies"
)


def network_unreachable(pip_stderr: str) -> bool:
    """Whether pip failed for want of a network or an index that has the sdist (and for nothing else)."""
    return _UNREACHABLE.search(pip_stderr or "") is not None


def _dfd_tests(tests_dir: str) -> list:
    """Names of RETURNN's DistributeFilesDataset tests in test_Dataset.py (the slow ones only with
    I6_SHARD_RETURNN_TESTS=all)."""
    with open(os.path.join(tests_dir, "test_Dataset.py"), encoding="utf-8") as f:
        names = re.findall(r"^def (test_\w*DistributeFilesDataset\w*)\(", f.read(), re.MULTILINE)
    if os.environ.get("I6_SHARD_RETURNN_TESTS") != "all":
        names = [n for n in names if n not in SLOW]
    return names


def _run(tests_dir: str, names: list, tmp_path, *, substitute: bool) -> dict:
    """test name -> "passed"/"failed"/"skipped" for the given tests of RETURNN's test_Dataset.py."""
    report = tmp_path / f"junit-{int(substitute)}.xml"
    env = {
        **os.environ,
        "I6_SHARD_SUBSTITUTE_DFD": "1" if substitute else "0",
        "PYTHONPATH": os.pathsep.join(
            [REPO, os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH", "")]
        ),
    }
    proc = run_to_end(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "returnn_substitute_plugin",
            *[f"test_Dataset.py::{n}" for n in names],
            f"--junitxml={report}",
        ],
        cwd=tests_dir,
        env=env,
    )
    if not report.exists():
        raise AssertionError(f"pytest did not run RETURNN's tests:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    out = {}
    for case in ElementTree.parse(report).iter("testcase"):
        kinds = {child.tag for child in case}
        out[case.get("name")] = (
            "failed" if kinds & {"failure", "error"} else ("skipped" if "skipped" in kinds else "passed")
        )
    return out


@pytest.mark.slow
def test_returnn_dfd_tests_pass_on_the_subclass(tmp_path):
    tests_dir = _sdist_tests_dir()
    names = _dfd_tests(tests_dir)
    plain = _run(tests_dir, names, tmp_path, substitute=False)
    ours = _run(tests_dir, names, tmp_path, substitute=True)
    assert set(plain) == set(names), (names, plain)
    assert "test_DistributeFilesDataset_distribute_evenly_by_size" in plain  # the class-level static call
    assert "test_DistributeFilesDataset_sharding_with_distrib_shard_files" in plain
    assert set(ours) == set(plain)
    passed = sorted(name for name, result in plain.items() if result == "passed")
    assert len(passed) >= 4, plain
    assert {name: ours[name] for name in passed} == {name: "passed" for name in passed}

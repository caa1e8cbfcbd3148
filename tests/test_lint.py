"""The whole tree is formatted and linted with ruff (settings in pyproject.toml: line length 120)."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ruff() -> list:
    pytest.importorskip("ruff", reason="ruff is in the test extra: pip install -e '.[test]'")
    exe = shutil.which("ruff")
    return [exe] if exe else [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("args", [["format", "--check", "--diff"], ["check"]], ids=["format", "check"])
def test_tree_is_clean_under_ruff(args):
    proc = subprocess.run([*_ruff(), *args, "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, (
        f"ruff {' '.join(args)} found problems (fix: ruff format . && ruff check --fix .):\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"
    )

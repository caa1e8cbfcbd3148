"""The ``>>>`` examples of the jobs run (setup.cfg collects doctests only from i6_shard/core; the jobs need the
real Sisyphus to import)."""

import doctest
import importlib

import pytest

from .conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

MODULES = ["plan", "sizes", "train_report", "util", "verify"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"i6_shard.jobs.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module.__name__} has no doctests: add one or drop it from this list"
    assert result.failed == 0

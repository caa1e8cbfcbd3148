"""Shared test settings: hypothesis profiles sized for 2-core CI machines, and the quick tier: ``-m "not slow"``
leaves out real trainings, Slurm and Sisyphus manager runs (marked ``slow``) and runs the invariants with fewer
examples."""

import os

import pytest
from hypothesis import HealthCheck, settings

from tests import strategies

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("quick", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=10)
settings.load_profile("ci" if os.environ.get("CI") else "default")

#: Test folders whose every test is slow: real multi-rank trainings, a real Slurm cluster.
SLOW_FOLDERS = ("training", "cluster")


def pytest_configure(config):
    if "not slow" in " ".join((config.getoption("markexpr", "") or "").split()):
        strategies.QUICK = True
        settings.load_profile("quick")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        rel = os.path.relpath(str(item.path), here).split(os.sep)
        if rel[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)

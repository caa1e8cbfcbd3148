"""Shared test settings: hypothesis profiles sized for 2-core CI machines, and the quick tier: ``-m "not slow"``
leaves out real trainings, Slurm and Sisyphus manager runs, RETURNN runs through worker processes, the release matrix
and other tests of several seconds of CPU (marked ``slow``), and runs the invariants with fewer examples."""

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
#: Test folders whose tests run on one pytest-xdist worker, one after the other (``--dist loadgroup`` in setup.cfg):
#: the trainings take a machine-wide lock anyway (a second worker would wait for it, idle) and share session- and
#: module-scoped trainings; the Slurm tests share the module's cluster. Being the largest groups, xdist hands them
#: out first, and the other worker takes the remaining tests one by one meanwhile.
XDIST_GROUPS = {"training": "training", "cluster": "slurm"}


def pytest_configure(config):
    if "not slow" in " ".join((config.getoption("markexpr", "") or "").split()):
        strategies.QUICK = True
        settings.load_profile("quick")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's hook turns the group marks into node ids
def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        rel = os.path.relpath(str(item.path), here).split(os.sep)
        if rel[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        if rel[0] in XDIST_GROUPS:
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUPS[rel[0]]))

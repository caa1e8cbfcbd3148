"""Cluster tests: the ``slurm`` marker (deselect with ``-m "not slurm"``)."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slurm: runs jobs on a single-node Slurm it starts (needs slurm-wlm, munge, "
        "root); skipped where Slurm is not installed",
    )

"""Sisyphus settings of the i6_shard recipe example on Slurm, read after settings.py:

    SIS_GLOBAL_SETTINGS_FILE=settings.py:settings_slurm.py sis m -r

Every task goes through ``sbatch`` (Sisyphus' Slurm engine), except mini tasks (``mini_task=True``:
creating the tiny data, a small sizes or plan job), which run on this machine; with
``I6_SHARD_MINI_TASKS=slurm`` in the environment they go to Slurm too. ``sbatch``, ``squeue`` and the
jobs find the cluster through the usual ``SLURM_CONF`` (or /etc/slurm/slurm.conf). A single-node Slurm
to try this: ``scripts/start_local_slurm.sh``.
"""

import os

#: Where mini tasks run: "local" (this machine, the default) or "slurm".
MINI_TASKS = os.environ.get("I6_SHARD_MINI_TASKS", "local")
#: Extra sbatch options for every task, e.g. ["--partition=cpu"] (none for the single-node test cluster).
SBATCH_ARGS = os.environ.get("I6_SHARD_SBATCH_ARGS", "").split()


def engine():
    from sisyphus.engine import EngineSelector
    from sisyphus.localengine import LocalEngine
    from sisyphus.simple_linux_utility_for_resource_management_engine import (
        SimpleLinuxUtilityForResourceManagementEngine,
    )

    if MINI_TASKS not in ("local", "slurm"):
        raise ValueError(f"I6_SHARD_MINI_TASKS={MINI_TASKS!r}: use 'local' or 'slurm'")
    # Requests a task does not set itself: 1 CPU, 2 GB, 1 hour. The i6_shard jobs size theirs from their input.
    default_rqmt = {"cpu": 1, "mem": 2, "time": 1}
    if SBATCH_ARGS:
        default_rqmt["sbatch_args"] = SBATCH_ARGS
    slurm = SimpleLinuxUtilityForResourceManagementEngine(default_rqmt=default_rqmt)
    short = slurm if MINI_TASKS == "slurm" else LocalEngine(cpus=2, mem=4)
    return EngineSelector(engines={"short": short, "long": slurm}, default_engine="long")

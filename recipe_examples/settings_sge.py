"""Sisyphus settings of the i6_shard recipe example on Son of Grid Engine (SGE), the equivalent of
settings_slurm.py, read after settings.py:

    SIS_GLOBAL_SETTINGS_FILE=settings.py:settings_sge.py sis m -r

Every task goes through ``qsub`` (Sisyphus' SonOfGridEngine), mini tasks (``mini_task=True``) run on
this machine (``I6_SHARD_MINI_TASKS=sge`` sends them to SGE too). ``qsub``/``qstat`` must work where
the manager runs (else set ``gateway`` to a host where they do). The test suite does not run this
one; it runs the Slurm variant on a real single-node Slurm (tests/cluster/test_slurm.py).
"""

import os

#: Where mini tasks run: "local" (this machine, the default) or "sge".
MINI_TASKS = os.environ.get("I6_SHARD_MINI_TASKS", "local")


def engine():
    from sisyphus.engine import EngineSelector
    from sisyphus.localengine import LocalEngine
    from sisyphus.son_of_grid_engine import SonOfGridEngine

    if MINI_TASKS not in ("local", "sge"):
        raise ValueError(f"I6_SHARD_MINI_TASKS={MINI_TASKS!r}: use 'local' or 'sge'")
    # Requests a task does not set itself: 1 CPU, 2 GB, 1 hour, no GPU. The i6_shard jobs size theirs from
    # their input. Add "qsub_args" (e.g. "-q cpu.q") for a queue, and gateway="host" to submit over ssh.
    sge = SonOfGridEngine(default_rqmt={"cpu": 1, "mem": 2, "gpu": 0, "time": 1})
    short = sge if MINI_TASKS == "sge" else LocalEngine(cpus=2, mem=4)
    return EngineSelector(engines={"short": short, "long": sge}, default_engine="long")

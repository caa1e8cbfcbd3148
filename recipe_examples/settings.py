"""Sisyphus settings of the i6_shard recipe example: everything runs on this machine."""


def engine():
    from sisyphus.localengine import LocalEngine

    return LocalEngine(cpus=2, mem=4)


# A local disk needs no waiting for network file system syncs; keep the tiny example quick.
WAIT_PERIOD_JOB_FS_SYNC = 1
WAIT_PERIOD_BETWEEN_CHECKS = 1
WAIT_PERIOD_CACHE = 1
WAIT_PERIOD_MTIME_OF_INPUTS = 0
JOB_AUTO_CLEANUP = False
VERBOSE_TRACEBACK_TYPE = "better_exchook"

"""The verify runner reads a DistributeFilesDataset's sub-epoch datasets in the process that reads the dataset (RETURNN's
own in-process path) wherever RETURNN's separate process for each sub-epoch would see the same global config and
behavior version. Starting those processes was most of a verification's time."""

from __future__ import annotations

__all__ = ["read_sub_epochs_in_process"]

#: ``BehaviorVersion._get_state()`` of a fresh process (``BehaviorVersion._reset(None)``).
_FRESH_BEHAVIOR_VERSION = (None, 0)


def read_sub_epochs_in_process(dataset) -> bool:
    """Make ``dataset`` (a DistributeFilesDataset, in the process that reads it) build each sub-epoch dataset in this
    process, as RETURNN's ``use_worker_proc=False`` does (``_WorkerInProc``, "same interface as _WorkerProcParent"),
    instead of starting a process per sub-epoch (``_WorkerProcParent``), which imports RETURNN again (and torch,
    under ``torch_distributed``). The files, their sub-epoch dataset dict, its seed (``random_seed_offset`` and
    RETURNN's environment variable for it) and the order it gives the sequences in come from the same RETURNN code
    either way. Only done where that process would see what this one sees: it is given the global config and
    behavior version that ``returnn.datasets.distrib_files`` took when it was imported in this process
    (``SubProcCopyGlobalConfigPreInitFunc``: the behavior version from 31, else a fresh one). Else, and on a release
    without ``use_worker_proc`` (before 1.20261022), RETURNN's processes stay.

    ``preload_next_n_sub_epochs`` keeps the value the dataset was built with (1 by default with processes): the
    sub-epochs loaded ahead are then built when the previous one starts instead of in the background.

    :return: whether the sub-epoch datasets are read in this process
    """
    from returnn.config import get_global_config
    from returnn.datasets import distrib_files
    from returnn.util.basic import BehaviorVersion

    if not getattr(dataset, "use_worker_proc", False):
        return hasattr(dataset, "use_worker_proc")  # in this process already; or a release with processes only
    pre_init = getattr(getattr(distrib_files, "_mp", None), "process_pre_init_func", None)
    if pre_init is None or not hasattr(BehaviorVersion, "_get_state"):
        return False
    child_behavior_version = getattr(pre_init, "behavior_version_state", None) or _FRESH_BEHAVIOR_VERSION
    same_config = getattr(pre_init, "global_config", None) is get_global_config(raise_exception=False)
    if not same_config or tuple(child_behavior_version) != tuple(BehaviorVersion._get_state()):
        return False
    dataset.use_worker_proc = False
    return True

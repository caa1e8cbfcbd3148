"""Trainings in the engine's modes (2 ranks, torchrun, gloo, CPU, 16 skewed HDF files, seed 11): DataLoader
workers that shard (behavior_version 37), a MultiEpochDataset around the DistributeFilesDataset, a
``max_seq_length`` filter, a MultiProcDataset (``seq_order``) as the sub-epoch dataset, DataLoader workers under
param sync. The live tests run them; ``python -m tests.training.make_engine_log_data`` keeps their logs in
tests/data/engine_logs for the quick tests."""

from __future__ import annotations

import os
from typing import Any, Dict

from .harness import Training, run_training, write_skewed_hdf_files

NUM_FILES = 16
SEED = 11
KEYS = [f"data/part{i:03d}.hdf" for i in range(NUM_FILES)]
#: Frames of a sequence above which the max_seq_length case's filter removes it.
MAX_SEQ_LENGTH = 40
_HDF = {"class": "HDFDataset", "seq_ordering": "random"}


def dfd(*, sub_epoch_dataset=None, **kwargs) -> Dict[str, Any]:
    """The DistributeFilesDataset of the cases: the 16 files, partition_epoch 2, sharded over 2 ranks."""
    from i6_shard.returnn_config import sharded_files_dataset

    return sharded_files_dataset(
        KEYS,
        sub_epoch_dataset=sub_epoch_dataset or _HDF,
        partition_epoch=2,
        use_worker_proc=False,
        num_shards=2,
        **kwargs,
    )


def case_settings(name: str) -> Dict[str, Any]:
    """The run_training arguments of a case (besides the work dir)."""
    workers = {"torch_dataloader_opts": {"num_workers": 2}}
    cases = {
        "dl_workers": dict(train=dfd(), extra_config=workers),
        "multi_epoch": dict(train={"class": "MultiEpochDataset", "multi_epoch": 2, "dataset": dfd()}, num_epochs=2),
        "max_seq_len": dict(train=dfd(), extra_config={"max_seq_length": {"data": MAX_SEQ_LENGTH}}),
        "mpd_sub_seq_order": dict(
            train=dfd(
                sub_epoch_dataset={
                    "class": "MultiProcDataset",
                    "num_workers": 2,
                    "buffer_size": 5,
                    "sharding_method": "seq_order",
                    "dataset": _HDF,
                },
                files_key=("dataset", "files"),
            )
        ),
        "dl_workers_param": dict(
            train=dfd(),
            extra_config=workers,
            torch_distributed={"backend": "gloo", "reduce_type": "param", "param_sync_step": 3},
        ),
    }
    settings = dict(num_ranks=2, num_epochs=4, batch_size=300, max_seqs=10, behavior_version=37)
    settings.update(cases[name])
    return settings


CASES = ["dl_workers", "multi_epoch", "max_seq_len", "mpd_sub_seq_order", "dl_workers_param"]


def run_case(name: str, work_dir: str) -> Training:
    """Write the case's HDF files into ``work_dir/data`` and train."""
    write_skewed_hdf_files(os.path.join(work_dir, "data"), num_files=NUM_FILES, seed=SEED)
    return run_training(work_dir, **case_settings(name))

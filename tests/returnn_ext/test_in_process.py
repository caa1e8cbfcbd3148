"""The verify runner's sub-epoch datasets read in the reading process give exactly what RETURNN's process per sub-epoch
gives, and are read there only where that process would see the same global config and behavior version. Each case
runs in a fresh Python: what RETURNN gives its sub-epoch processes is taken when its module is first imported."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from tests.hdf_data import write_tiny_hdf_files  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Rank 1 of 2 (RETURNN's debug rank), behavior_version 37 set before RETURNN's DistributeFilesDataset is imported,
#: as in a DataLoader worker; then the sub-epochs read once through RETURNN's processes and once in this process.
_SCRIPT = """
import json, sys
from returnn.config import Config, set_global_config
from returnn.util.basic import BehaviorVersion
config = Config()
config.update({"behavior_version": 37, "__debug_dummy_distributed_rank_and_size": (1, 2)})
BehaviorVersion.set(37)
set_global_config(config)
import returnn.datasets.distrib_files
from returnn.datasets.basic import init_dataset
from i6_shard.returnn_ext.in_process import read_sub_epochs_in_process
from tests.hdf_data import iterate_tags, sharded_dfd

def dataset():
    return init_dataset(sharded_dfd(json.loads(sys.argv[1]), partition_epoch=2, use_worker_proc=True))

out = {}
own_procs = dataset()
out["own_procs"] = [iterate_tags(own_procs, e) for e in (1, 2)]
out["own_procs_still"] = own_procs.use_worker_proc
in_process = dataset()
out["switched"] = read_sub_epochs_in_process(in_process)
out["in_process"] = [iterate_tags(in_process, e) for e in (1, 2)]
out["workers"] = sorted(type(w).__name__ for w in in_process._workers.values())
set_global_config(Config({"behavior_version": 37}))  # not the config RETURNN hands its sub-epoch processes
other = dataset()
out["other_config"] = [read_sub_epochs_in_process(other), other.use_worker_proc]
BehaviorVersion._reset((30, 0))  # nor the behavior version
set_global_config(config)
other = dataset()
out["other_behavior_version"] = [read_sub_epochs_in_process(other), other.use_worker_proc]
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


def test_sub_epoch_datasets_in_the_reading_process_give_what_their_own_processes_give(tmp_path):
    files = write_tiny_hdf_files(str(tmp_path), num_files=8, seed=2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(files), str(tmp_path / "out.json")],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "out.json") as f:
        out = json.load(f)
    assert out["own_procs_still"] is True and out["switched"] is True
    assert out["workers"] and set(out["workers"]) == {"_WorkerInProc"}
    assert all(out["own_procs"]) and out["in_process"] == out["own_procs"]  # sequence for sequence, in order
    # where RETURNN's sub-epoch process would see another config or behavior version, its processes stay
    assert out["other_config"] == [False, True] and out["other_behavior_version"] == [False, True]

"""VerifyShardingJob's runner on the oldest supported release: three ranks of RETURNN 1.20240620.64807 read through
torch's DataLoader as its engine does, each rank simulated as that release takes it (no debug rank option, no
DistributedContext from the environment), and the check against the plan cut as that release cuts (before
1.20240705.144031 every bin aimed at the mean of all files); the newest cut would not match what it read."""

import json
import os
import pickle
import sys

import pytest

from i6_shard.core.reporting import verify_records
from i6_shard.returnn_config import sharded_files_dataset
from i6_shard.returnn_config.pycode import resolve_refs

from tests.blocking import run_to_end
from ..deps import needs_torch
from ..hdf_data import write_tiny_hdf_files
from .releases import OLD_RELEASES, install

pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # three RETURNN subprocesses through torch's DataLoader
def test_the_verifier_runs_on_the_oldest_release_and_checks_its_own_cut(tmp_path):
    needs_torch("the verifier reads through torch's DataLoader")
    version = OLD_RELEASES[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([install(version), REPO])}
    files = write_tiny_hdf_files(str(tmp_path / "data"), num_files=14, seed=43, max_seqs=4)
    d = sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "default"},
        partition_epoch=2,
        returnn_version=version,
    )
    with open(tmp_path / "dataset.pkl", "wb") as f:
        pickle.dump(resolve_refs(d), f)
    ranks = []
    for rank in range(3):
        out = str(tmp_path / f"rank-{rank}.json")
        cmd = [sys.executable, "-m", "i6_shard.returnn_ext.verify", "--dataset-pickle", str(tmp_path / "dataset.pkl")]
        cmd += ["--rank", str(rank), "--num-shards", "3", "--epochs", "1,2", "--output", out]
        cmd += ["--config-json", json.dumps({"torch_distributed": {}, "backend": "torch"})]
        if rank == 0:
            cmd += ["--reference", str(tmp_path / "reference.json")]
        proc = run_to_end(cmd, env=env, cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open(out) as f:
            ranks.append(json.load(f))
    with open(tmp_path / "reference.json") as f:
        reference = json.load(f)
    assert {r["settings"]["returnn_version"] for r in ranks} == {"1.20240620.064807"}
    violations, report = verify_records(ranks, reference, num_shards=3)
    assert violations == [], report
    for r in ranks:  # as if the ranks had run the newest RETURNN: its cut is not what this release read
        r["settings"].pop("returnn_version")
    violations, report = verify_records(ranks, reference, num_shards=3)
    assert {v.kind for v in violations} == {"files"}, report

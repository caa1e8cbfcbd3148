"""VerifyShardingJob with the real Sisyphus and the real RETURNN: passes with sharding_fix=True,
fails listing the violations for RETURNN's double sharding (sharding_fix=False)."""

import functools
import os
import subprocess
import sys

import pytest

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from sisyphus import tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.jobs import VerifyShardingJob  # noqa: E402
from i6_shard.jobs.verify import ShardingVerificationError  # noqa: E402
from tests.hdf_data import hdf_sub_epoch_dataset, sharded_dfd, write_tiny_hdf_files  # noqa: E402


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory):
    return write_tiny_hdf_files(str(tmp_path_factory.mktemp("hdf")), num_files=9, seed=2)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_passes_with_sharding_fix(work_dir, hdf_files):
    # Files as tk.Path leaves: the job turns them into plain strings for RETURNN.
    files = [tk.Path(f) for f in hdf_files]
    job = VerifyShardingJob(sharded_dfd(files, partition_epoch=3, sharding_fix=True), num_shards=3, epochs=6)
    run_job(job)
    assert job.out_ok.get() is True
    report = _read(job.out_report.get_path())
    assert report.startswith("i6_shard sharding verification: OK\n")
    assert "full epoch 0: " in report and "full epoch 1: " in report and "partly read" not in report


def test_fails_listing_the_double_sharding_loss(work_dir, hdf_files):
    job = VerifyShardingJob(sharded_dfd(hdf_files, partition_epoch=3, sharding_fix=False), num_shards=3,
                            epochs=[1, 2, 3])
    with pytest.raises(ShardingVerificationError) as exc:
        run_job(job)
    msg = str(exc.value)
    assert "sharding violations" in msg and "[missing] full epoch 0:" in msg and "[seqs] sub-epoch 1, rank" in msg
    assert job.out_ok.get() is False
    assert _read(job.out_report.get_path()).startswith("i6_shard sharding verification: FAILED\n")


def test_config_file_input_and_list_file(work_dir, hdf_files, monkeypatch):
    list_path = str(work_dir / "files.txt")
    core.write_file_list(hdf_files, list_path)
    config = work_dir / "returnn.config"
    config.write_text(
        "#!rnn.py\n"
        "import functools\n"
        "from tests.hdf_data import hdf_sub_epoch_dataset\n"
        f"train = {{'class': 'DistributeFilesDataset', 'files': {list_path!r}, 'partition_epoch': 3,\n"
        "         'get_sub_epoch_dataset': functools.partial(hdf_sub_epoch_dataset, seq_ordering='random'),\n"
        "         'distrib_shard_files': True, 'sharding_fix': True, 'use_worker_proc': False,\n"
        "         'seq_ordering': 'random'}\n")
    job = VerifyShardingJob(tk.Path(str(config)), num_shards=2, epochs=[4, 5, 6])
    # The config imports tests.hdf_data: the repository must be on the RETURNN process's path.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
         os.environ.get("PYTHONPATH", "")]))
    run_job(job)
    assert job.out_ok.get() is True
    assert "full epoch 1: " in _read(job.out_report.get_path())


def test_a_failing_rank_leaves_no_output(work_dir, hdf_files):
    dataset = sharded_dfd(hdf_files, partition_epoch=20)  # 9 files cannot fill 2*20 bins
    job = VerifyShardingJob(dataset, num_shards=2, epochs=[1])
    with pytest.raises(subprocess.CalledProcessError):
        run_job(job)
    assert os.listdir(os.path.dirname(job.out_report.get_path())) == []


def test_pinned_id_and_what_is_hashed(work_dir):
    files = tk.Path("/data/corpus/files.txt")
    dataset = {
        "class": "DistributeFilesDataset",
        "files": files,
        "get_sub_epoch_dataset": functools.partial(hdf_sub_epoch_dataset, seq_ordering="random"),
        "partition_epoch": 20,
        "seq_ordering": "random",
        "distrib_shard_files": True,
        "sharding_fix": True,
    }
    job = VerifyShardingJob(dataset, num_shards=8, epochs=40)
    assert job._sis_id() == "i6_shard/jobs/verify/VerifyShardingJob.Yhj54w5Fydc7"
    assert VerifyShardingJob(dataset, num_shards=8, epochs=40, returnn_python_exe=tk.Path(sys.executable)) is job
    rooted = VerifyShardingJob(dataset, num_shards=8, epochs=40, returnn_root=tk.Path("/opt/returnn"))
    assert rooted is not job
    other = dict(dataset, get_sub_epoch_dataset=functools.partial(hdf_sub_epoch_dataset, seq_ordering="default"))
    assert VerifyShardingJob(other, num_shards=8, epochs=40) is not job
    assert files in job._sis_inputs  # Sisyphus waits for the list file


def test_bad_options_fail_at_graph_construction(work_dir):
    with pytest.raises(ValueError, match="class 'HDFDataset'"):
        VerifyShardingJob({"class": "HDFDataset", "files": []}, num_shards=2, epochs=1)
    with pytest.raises(ValueError, match="epochs contains 0"):
        VerifyShardingJob({"class": "DistributeFilesDataset"}, num_shards=2, epochs=[0, 1])
    with pytest.raises(ValueError, match="train_dataset\\['get_sub_epoch_dataset'\\] is .*<lambda>.*module-level"):
        VerifyShardingJob({"class": "DistributeFilesDataset", "get_sub_epoch_dataset": lambda files: {}},
                          num_shards=2, epochs=1)

    def local(files):
        return {}

    with pytest.raises(ValueError, match="\\.func is .*<locals>.local"):
        VerifyShardingJob({"get_sub_epoch_dataset": functools.partial(local)}, num_shards=2, epochs=1)
    with pytest.raises(TypeError, match="must be an int N"):
        VerifyShardingJob({"class": "DistributeFilesDataset"}, num_shards=2, epochs=range(1, 3))


def test_runs_the_given_python_with_returnn_root_first_on_the_path(work_dir, hdf_files, monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append((cmd, kwargs))
        raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(subprocess, "run", fake_run)
    job = VerifyShardingJob(sharded_dfd(hdf_files, partition_epoch=3), num_shards=2, epochs=3,
                            returnn_python_exe=tk.Path("/opt/py/bin/python3"), returnn_root=tk.Path("/opt/returnn"))
    with pytest.raises(subprocess.CalledProcessError):
        run_job(job)
    (cmd, kwargs), = calls
    assert cmd[:3] == ["/opt/py/bin/python3", "-m", "i6_shard.returnn_ext.verify"]
    assert cmd[cmd.index("--epochs") + 1] == "1,2,3" and cmd[cmd.index("--rank") + 1] == "0"
    path = kwargs["env"]["PYTHONPATH"].split(os.pathsep)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert path[:2] == ["/opt/returnn", repo]  # then i6_shard's and tests.hdf_data's root

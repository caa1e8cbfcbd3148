"""RechunkHdfJob with the real Sisyphus: its outputs are the CLI's, its id is pinned, requests stay out of the hash,
arguments are checked before hashing and the request is sized from the input."""

import os

import pytest

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("h5py", reason="re-chunking writes HDF files with h5py: pip install h5py")

from sisyphus import tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.cli import main  # noqa: E402
from i6_shard.core.io import write_hdf_corpus  # noqa: E402
from i6_shard.jobs import RechunkHdfJob  # noqa: E402
from i6_shard.jobs.rechunk import rechunk_rqmt  # noqa: E402


def _corpus(tmp_path):
    paths = write_hdf_corpus(str(tmp_path / "data"), num_files=6, seed=3, feature_dim=2)
    core.write_file_list(paths, str(tmp_path / "files.txt"))
    return paths


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_job_outputs_equal_cli_outputs(work_dir):
    paths = _corpus(work_dir)
    job = RechunkHdfJob(tk.Path(str(work_dir / "files.txt")), num_shards=2, partition_epoch=2, num_files=5)
    run_job(job)
    listed = core.read_file_list(job.out_file_list.get_path())
    assert job.out_file_list.get_path().endswith("rechunked/files.txt") and len(listed) == 5
    assert all(p.startswith(job.out_dir.get_path() + os.sep) and os.path.isfile(p) for p in listed)
    out = str(work_dir / "cli")
    assert main(["rechunk", str(work_dir / "files.txt"), "--num-shards", "2", "--partition-epoch", "2"] +
                ["-o", out, "--num-files", "5"]) == 0  # fmt: skip
    assert [_bytes(p) for p in listed] == [_bytes(p) for p in core.read_file_list(os.path.join(out, "files.txt"))]
    inline = RechunkHdfJob(paths, num_shards=2, partition_epoch=2, num_files=5)
    assert inline.out_file_list.get_path().endswith("files.json")  # a list given inline may hold file trees


def test_pinned_id_and_requests_not_hashed(work_dir):
    files = tk.Path("/data/corpus/files.txt")
    job = RechunkHdfJob(files, num_shards=8, partition_epoch=20)
    assert job._sis_id() == "i6_shard/jobs/rechunk/RechunkHdfJob.lpo1X2rvE0YE"  # the pinned id
    same = RechunkHdfJob(files, num_shards=8, partition_epoch=20, time_rqmt=3, mem_rqmt=16, cpu_rqmt=2)
    assert same._sis_id() == job._sis_id()
    assert RechunkHdfJob(files, num_shards=8, partition_epoch=20, num_files=100)._sis_id() != job._sis_id()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_shards": 0, "partition_epoch": 2}, ValueError, "num_shards=0"),
        ({"num_shards": 2, "partition_epoch": "2"}, TypeError, "partition_epoch='2'"),
        ({"num_shards": 2, "partition_epoch": 2, "unit": "bytes"}, ValueError, "unit='bytes'"),
        ({"num_shards": 2, "partition_epoch": 2, "num_files": 0}, ValueError, "num_files=0"),
        ({"num_shards": 2, "partition_epoch": 2, "mem_rqmt": -1}, ValueError, "mem_rqmt=-1"),
    ],
)
def test_arguments_are_checked_before_hashing(work_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        RechunkHdfJob.hash({"files": tk.Path("/data/files.txt"), **kwargs})
    with pytest.raises(error, match=match):
        RechunkHdfJob(tk.Path("/data/files.txt"), **kwargs)


def test_bad_file_lists_are_refused(work_dir):
    with pytest.raises(ValueError, match="extension '.csv'"):
        RechunkHdfJob(tk.Path("/data/files.csv"), num_shards=2, partition_epoch=2)
    with pytest.raises(TypeError, match="give a tk.Path"):
        RechunkHdfJob([], num_shards=2, partition_epoch=2)


def test_request_is_sized_from_the_input(work_dir):
    _corpus(work_dir)
    job = RechunkHdfJob(tk.Path(str(work_dir / "files.txt")), num_shards=2, partition_epoch=2, mem_rqmt=3)
    (task,) = job.tasks()
    assert task._rqmt["mem"] == 3 and task._rqmt["time"] == 0.5 and not task.mini_task
    missing = RechunkHdfJob(tk.Path(str(work_dir / "missing.txt")), num_shards=2, partition_epoch=2)
    (task,) = missing.tasks()
    assert task._rqmt == {"cpu": 1, "mem": 4, "time": 2}  # the list is not there yet: run() says why
    assert rechunk_rqmt(total_bytes=10**12, largest_bytes=10**9, num_files=100)["mem"] == 34


def test_the_costs_job_takes_its_list(work_dir):
    """A recipe puts the re-chunk's list where the corpus's list went: the costs of the new files are even."""
    from i6_shard.jobs import ComputeFileCostsJob

    _corpus(work_dir)
    job = RechunkHdfJob(tk.Path(str(work_dir / "files.txt")), num_shards=2, partition_epoch=2, num_files=8)
    run_job(job)
    costs_job = ComputeFileCostsJob(job.out_file_list, unit="frames")
    run_job(costs_job)
    costs = core.load_file_sizes(costs_job.out_file_costs.get_path())
    assert costs.keys == core.read_file_list(job.out_file_list.get_path())
    assert costs.sizes.max() - costs.sizes.min() <= 2 * 120  # even, up to a sequence (20..120 frames) at each end

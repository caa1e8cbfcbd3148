"""TrainReportJob with the real Sisyphus and i6_core: built from a ReturnnTrainingJob it reads the logs
RETURNN writes in that job's work dir and runs after it; its outputs equal `train-report`'s byte for
byte (on real logs copied there); stable hash; clear errors."""

import glob
import json
import os
import shutil

import pytest

from tests.deps import needs_matplotlib

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip(
    "i6_core.returnn",
    reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ and put recipe/ on PYTHONPATH",
)

from sisyphus import gs, tk  # noqa: E402

from i6_shard import cli  # noqa: E402
from i6_shard.jobs import TrainReportJob  # noqa: E402
from i6_shard.jobs.train_report import training_log_files  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.i6core import sharded_returnn_config, training_job  # noqa: E402

LOGS = os.path.join(os.path.dirname(__file__), "..", "data", "returnn_logs")
EXE = dict(returnn_python_exe=tk.Path("/usr/bin/python3"), returnn_root=tk.Path("/opt/returnn"))
#: Pinned: a change here moves the id of every user's report job.
PINNED_ID = "i6_shard/jobs/train_report/TrainReportJob.2jijxlJpxzS8"


def _config():
    train = sharded_files_dataset(
        [f"/data/part{i:03d}.hdf" for i in range(16)],
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
    )
    return sharded_returnn_config({"backend": "torch", "behavior_version": 24, "batch_size": 300}, train)


def _training(num_gpus=2):
    return training_job(_config(), num_gpus=num_gpus, num_epochs=4, **EXE)


def test_for_training_reads_the_logs_in_the_trainings_work_dir_after_it(work_dir):
    training = _training()
    job = TrainReportJob.for_training(training)
    work = training._sis_path(gs.JOB_WORK_DIR, abspath=True)
    assert [os.path.normpath(p.get_path()) for p in job.log_files] == [
        os.path.normpath(os.path.join(work, f"returnn.torch-distrib-{r}-2.log")) for r in range(2)
    ]
    assert job.after == training.out_learning_rates
    assert {p.creator for p in job._sis_inputs} == {training}
    assert training.out_learning_rates in job._sis_inputs
    assert job._sis_id() == PINNED_ID
    assert TrainReportJob.for_training(training, plot=False, time_rqmt=1)._sis_id() == job._sis_id()
    assert TrainReportJob.for_training(training, max_dropped=0.1)._sis_id() != job._sis_id()
    single = training_log_files(_training(num_gpus=1))
    assert [os.path.basename(p.get_path()) for p in single] == ["returnn.log"]


def test_for_training_reads_every_rank_torchrun_starts_on_several_nodes(work_dir):
    """i6_core's torchrun starts horovod_num_processes ranks on each of multi_node_slots nodes (a world of 4 here),
    all logging into the job's work dir."""
    from i6_core.returnn import ReturnnTrainingJob

    rc = _config()
    rc.config["torch_distributed"] = {}
    training = ReturnnTrainingJob(
        rc, num_epochs=4, horovod_num_processes=2, multi_node_slots=2, distributed_launch_cmd="torchrun", **EXE
    )
    assert [os.path.basename(p.get_path()) for p in training_log_files(training)] == [
        f"returnn.torch-distrib-{r}-4.log" for r in range(4)
    ]


def test_for_training_takes_the_sync_mode_from_the_config(work_dir):
    train = sharded_files_dataset(
        [f"/data/part{i:03d}.hdf" for i in range(16)],
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
    )
    rc = sharded_returnn_config({"backend": "torch", "behavior_version": 24, "batch_size": 300}, train)
    training = training_job(
        rc, num_gpus=2, num_epochs=4, torch_distributed={"reduce_type": "param", "param_sync_step": 3}, **EXE
    )
    job = TrainReportJob.for_training(training)
    assert (job.reduce_type, job.param_sync_step) == ("param", 3)
    assert job._sis_id() != TrainReportJob.for_training(training, reduce_type="grad")._sis_id()
    assert TrainReportJob.for_training(_training()).reduce_type == "grad"
    with pytest.raises(ValueError, match="param_sync_step=3 is only used with reduce_type='param'"):
        TrainReportJob.for_training(training, param_sync_step=3)


@needs_matplotlib
@pytest.mark.slow
def test_outputs_equal_the_cli_on_the_real_logs(work_dir):
    training = _training()
    name = "w2_nofix"
    lengths = os.path.abspath(os.path.join(LOGS, name, "file_lengths.json"))
    job = TrainReportJob.for_training(training, file_lengths=lengths, partition_epoch=2)
    work = training._sis_path(gs.JOB_WORK_DIR, abspath=True)
    os.makedirs(work)
    for path in glob.glob(os.path.join(LOGS, name, "returnn.torch-distrib-*.log")):
        shutil.copy(path, work)
    run_job(job)
    out = str(work_dir / "cli")
    assert (
        cli.main(
            [
                "train-report",
                *sorted(glob.glob(os.path.join(work, "*.log"))),
                "--file-lengths",
                lengths,
                "--partition-epoch",
                "2",
                "-o",
                out,
            ]
        )
        == 0
    )
    for path, fn in ((job.out_report, "report.txt"), (job.out_summary, "summary.json"), (job.out_plot, "plot.png")):
        with open(path.get_path(), "rb") as a, open(os.path.join(out, fn), "rb") as b:
            assert a.read() == b.read(), fn
    summary = json.loads(open(job.out_summary.get_path()).read())
    assert job.out_num_alarms.get() == len(summary["alarms"]) >= 2
    assert job.out_dropped_fraction.get() == summary["dropped_fraction"] > 0.5
    # out_records: one line per listed record, the same as the summary's, though the summary lists them too
    rows = [line.split("\t") for line in open(job.out_records.get_path()).read().splitlines()]
    listed = [(se["epoch"], x["rank"], x["steps"]) for se in summary["sub_epochs"] for x in se["ranks"]]
    steps = rows[0].index("steps")
    assert [(int(x[0]), int(x[1]), int(x[steps])) for x in rows[1:]] == listed and len(listed) >= 4
    assert not os.path.exists(os.path.join(out, "records.tsv"))  # the CLI writes it above MAX_LISTED_RECORDS only


def test_bad_arguments_fail_at_construction(work_dir):
    with pytest.raises(ValueError, match=r"log_files\[0\]='rel.log' is a relative path"):
        TrainReportJob(["rel.log"])
    with pytest.raises(TypeError, match="must be a non-empty list"):
        TrainReportJob(tk.Path("/x/returnn.torch-distrib-0-1.log"))
    with pytest.raises(TypeError, match="is not an i6_core ReturnnTrainingJob"):
        TrainReportJob.for_training(object())
    with pytest.raises(ValueError, match="min_steps_ratio=0 must be in"):
        TrainReportJob([tk.Path("/x/a.log")], min_steps_ratio=0)


def test_request_is_sized_from_the_bytes_of_the_logs(work_dir, monkeypatch):
    from i6_shard.jobs import train_report as module

    logs = [work_dir / f"returnn.torch-distrib-{r}-2.log" for r in range(2)]
    for path, size in zip(logs, (300, 700)):
        with open(path, "wb") as f:
            f.truncate(size)
    paths = [tk.Path(str(p)) for p in logs]
    (task,) = TrainReportJob(paths).tasks()
    assert task.mini_task  # 1000 bytes of logs
    monkeypatch.setattr(module, "MINI_TASK_MAX_LOG_BYTES", 999)
    (task,) = TrainReportJob(paths).tasks()
    assert not task.mini_task and task.rqmt() == module.train_report_rqmt(log_bytes=1000)[0]
    # (Sisyphus keeps one job object per id, and requests are not hashed: another max_dropped, another job.)
    (task,) = TrainReportJob(paths, mem_rqmt=8, cpu_rqmt=2, max_dropped=0.1).tasks()
    assert task.rqmt() == {**module.train_report_rqmt(log_bytes=1000)[0], "mem": 8, "cpu": 2}
    monkeypatch.setattr(module, "MINI_TASK_MAX_LOG_BYTES", 10**9)
    (task,) = TrainReportJob(paths, time_rqmt=3, max_dropped=0.2).tasks()
    assert not task.mini_task and task.rqmt()["time"] == 3  # a request given: a cluster task
    (task,) = TrainReportJob([tk.Path(str(work_dir / "missing.log"))]).tasks()
    assert task.mini_task  # its run says what is missing
    # More logs ask for more: 10 times the bytes, at least as much memory and time.
    small, big = (module.train_report_rqmt(log_bytes=n)[0] for n in (10**9, 10**10))
    assert big["mem"] > small["mem"] and big["time"] > small["time"]
    with pytest.raises(ValueError, match="mem_rqmt=0 must be a positive number"):
        TrainReportJob(paths, mem_rqmt=0)  # checked before the hash, also for a job Sisyphus already has


def test_for_training_takes_the_length_filter_from_the_config(work_dir):
    train = sharded_files_dataset(
        [f"/data/part{i:03d}.hdf" for i in range(16)],
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=2,
    )
    config = {"backend": "torch", "behavior_version": 24, "batch_size": 300, "max_seq_length": {"data": 400}}
    training = training_job(sharded_returnn_config(config, train), num_gpus=2, num_epochs=4, **EXE)
    job = TrainReportJob.for_training(training)
    assert job.max_seq_length == {"data": 400}
    assert job._sis_id() != TrainReportJob.for_training(training, max_seq_length=None)._sis_id()
    assert TrainReportJob.for_training(_training()).max_seq_length is None
    assert TrainReportJob.for_training(_training(), multi_epoch=None)._sis_id() == PINNED_ID
    with pytest.raises(TypeError, match="max_seq_length='400' must be an int or a dict"):
        TrainReportJob.for_training(training, max_seq_length="400")

"""VerifyShardingJob with the real Sisyphus and the real RETURNN: passes with sharding_fix=True,
fails listing the violations for RETURNN's double sharding (sharding_fix=False)."""

import functools
import json
import os
import re
import subprocess
import sys

import pytest

from tests.deps import needs_torch

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from sisyphus import gs, tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.jobs import VerifyShardingJob  # noqa: E402
from i6_shard.jobs.verify import RankFailedError, ShardingVerificationError  # noqa: E402
from tests.hdf_data import hdf_sub_epoch_dataset, sharded_dfd, write_tiny_hdf_files  # noqa: E402


@pytest.fixture(scope="module")
def hdf_files(tmp_path_factory):
    return write_tiny_hdf_files(str(tmp_path_factory.mktemp("hdf")), num_files=9, seed=2)


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.slow  # the quick tier runs each of its checks in test_verifies_a_wrapped_dfd (three RETURNN processes)
def test_passes_with_sharding_fix(work_dir, hdf_files, capsys):
    # Files as tk.Path leaves: the job turns them into plain strings for RETURNN.
    files = [tk.Path(f) for f in hdf_files]
    job = VerifyShardingJob(sharded_dfd(files, partition_epoch=3, sharding_fix=True), num_shards=3, epochs=6)
    run_job(job)
    _assert_ok_on_3_ranks(job, capsys)


@pytest.mark.slow
def test_fails_listing_the_double_sharding_loss(work_dir, hdf_files):
    job = VerifyShardingJob(
        sharded_dfd(hdf_files, partition_epoch=3, sharding_fix=False), num_shards=3, epochs=[1, 2, 3]
    )
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
        "         'seq_ordering': 'random'}\n"
    )
    job = VerifyShardingJob(tk.Path(str(config)), num_shards=2, epochs=[4, 5, 6])
    # The config imports tests.hdf_data: the repository must be on the RETURNN process's path.
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(
            [
                os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                os.environ.get("PYTHONPATH", ""),
            ]
        ),
    )
    run_job(job)
    assert job.out_ok.get() is True
    assert "full epoch 1: " in _read(job.out_report.get_path())


@pytest.mark.slow
def test_a_failing_rank_leaves_no_output_and_shows_its_error(work_dir, hdf_files):
    gone = str(work_dir / "gone.hdf")  # e.g. deleted after the graph was built
    job = VerifyShardingJob(sharded_dfd(hdf_files[:5] + [gone], partition_epoch=3), num_shards=2, epochs=[1])
    with pytest.raises(subprocess.CalledProcessError) as exc:
        run_job(job)
    assert isinstance(exc.value, RankFailedError)
    msg = str(exc.value)
    assert msg.startswith("the RETURNN process of rank 0 of 2 failed with exit status 1; the end of its stderr:\n")
    assert "FileNotFoundError" in msg and gone in msg  # RETURNN's own error, from the tail of its stderr
    assert os.listdir(os.path.dirname(job.out_report.get_path())) == []


def test_too_few_inline_files_fail_at_graph_construction(work_dir, hdf_files):
    with pytest.raises(ValueError, match=re.escape("5 files cannot fill num_shards*partition_epoch=2*3=6 bins")):
        VerifyShardingJob(sharded_dfd(hdf_files[:5], partition_epoch=3), num_shards=2, epochs=3)
    # Without distrib_shard_files every rank reads all files: 5 files fill 3 sub-epochs.
    VerifyShardingJob(sharded_dfd(hdf_files[:5], partition_epoch=3, distrib_shard_files=False), num_shards=2, epochs=3)


@pytest.mark.slow
def test_too_few_files_in_a_list_file_fail_with_the_same_message(work_dir, hdf_files):
    list_path = str(work_dir / "files.txt")
    core.write_file_list(hdf_files[:5], list_path)
    job = VerifyShardingJob(sharded_dfd(tk.Path(list_path), partition_epoch=3), num_shards=2, epochs=3)
    with pytest.raises(RankFailedError) as exc:
        run_job(job)
    assert "ValueError: 5 files cannot fill num_shards*partition_epoch=2*3=6 bins" in str(exc.value)
    assert "Lower partition_epoch to at most 2" in str(exc.value)
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
    # As i6_core hashes them: returnn_python_exe and returnn_root as given. A given Python is another
    # job (it was not hashed before, so such graphs moved once); the default None keeps the old id.
    exe = VerifyShardingJob(dataset, num_shards=8, epochs=40, returnn_python_exe=tk.Path("/usr/bin/python3"))
    assert exe._sis_id() == "i6_shard/jobs/verify/VerifyShardingJob.2g2hwPhr5LQ2"
    assert VerifyShardingJob(dataset, num_shards=8, epochs=40, returnn_python_exe="/usr/bin/python3") is not exe
    rooted = VerifyShardingJob(dataset, num_shards=8, epochs=40, returnn_root=tk.Path("/opt/returnn"))
    assert rooted is not job
    other = dict(dataset, get_sub_epoch_dataset=functools.partial(hdf_sub_epoch_dataset, seq_ordering="default"))
    assert VerifyShardingJob(other, num_shards=8, epochs=40) is not job
    assert files in job._sis_inputs  # Sisyphus waits for the list file
    # The same sub-epochs, however given: one job.
    assert VerifyShardingJob(dataset, num_shards=8, epochs=list(range(1, 41))) is job
    assert VerifyShardingJob(dataset, num_shards=8, epochs=(40, *range(1, 41))) is job
    assert VerifyShardingJob(dataset, num_shards=8, epochs=[3, 1]) is VerifyShardingJob(
        dataset, num_shards=8, epochs=(1, 3, 1)
    )
    assert VerifyShardingJob(dataset, num_shards=8, epochs=[1, 3]) is not job
    assert VerifyShardingJob(dataset, num_shards=8, epochs=39) is not job


def test_bad_options_fail_at_graph_construction(work_dir):
    files = [f"/data/f{i}.hdf" for i in range(4)]
    with pytest.raises(ValueError, match="class 'HDFDataset'"):
        VerifyShardingJob({"class": "HDFDataset", "files": []}, num_shards=2, epochs=1)
    with pytest.raises(ValueError, match="epochs contains 0"):
        VerifyShardingJob(sharded_dfd(files, partition_epoch=1), num_shards=2, epochs=[0, 1])
    with pytest.raises(ValueError, match="train_dataset\\['get_sub_epoch_dataset'\\] is .*<lambda>.*module-level"):
        VerifyShardingJob(
            {"class": "DistributeFilesDataset", "get_sub_epoch_dataset": lambda files: {}}, num_shards=2, epochs=1
        )

    def local(files):
        return {}

    with pytest.raises(ValueError, match="\\.func is .*<locals>.local"):
        VerifyShardingJob({"get_sub_epoch_dataset": functools.partial(local)}, num_shards=2, epochs=1)
    with pytest.raises(TypeError, match="must be an int N"):
        VerifyShardingJob(sharded_dfd(files, partition_epoch=1), num_shards=2, epochs=range(1, 3))
    with pytest.raises(TypeError, match="train_dataset\\['files'\\] is a tuple; DistributeFilesDataset takes a list"):
        VerifyShardingJob(sharded_dfd(tuple(files), partition_epoch=1), num_shards=2, epochs=1)
    with pytest.raises(
        TypeError, match="train_dataset\\['get_sub_epoch_dataset'\\] is 'HDFDataset'; it must be a function"
    ):
        VerifyShardingJob(
            sharded_dfd(files, partition_epoch=1, get_sub_epoch_dataset="HDFDataset"), num_shards=2, epochs=1
        )


@pytest.mark.parametrize(
    "drop, match",
    [
        (
            "class",
            "train_dataset \\(class None\\) holds no DistributeFilesDataset; set 'class': 'DistributeFilesDataset'",
        ),
        (
            "get_sub_epoch_dataset",
            "train_dataset has no 'get_sub_epoch_dataset', which DistributeFilesDataset requires",
        ),
        ("files", "train_dataset has no 'files', which DistributeFilesDataset requires"),
    ],
)
def test_incomplete_dataset_dict_fails_at_graph_construction(work_dir, drop, match):
    dataset = sharded_dfd([f"/data/f{i}.hdf" for i in range(4)], partition_epoch=2)
    del dataset[drop]
    with pytest.raises(ValueError, match=match):
        VerifyShardingJob(dataset, num_shards=2, epochs=2)


def test_dataset_class_may_be_a_subclass_object(work_dir):
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    files = [f"/data/f{i}.hdf" for i in range(4)]
    VerifyShardingJob(
        sharded_dfd(files, partition_epoch=2, **{"class": ShardedDistributeFilesDataset}), num_shards=2, epochs=2
    )
    with pytest.raises(ValueError, match="class dict, not a subclass of DistributeFilesDataset"):
        VerifyShardingJob(sharded_dfd(files, partition_epoch=2, **{"class": dict}), num_shards=2, epochs=2)


def test_relative_path_strings_fail_at_graph_construction(work_dir):
    """Sisyphus runs the task in the job's work dir, where a relative str would point elsewhere."""
    from sisyphus import gs

    files = [f"/data/f{i}.hdf" for i in range(4)]
    hint = "is a relative path. .*give an absolute path or a tk.Path"
    with pytest.raises(ValueError, match="train_dataset='returnn.config' " + hint):
        VerifyShardingJob("returnn.config", num_shards=2, epochs=2)
    with pytest.raises(ValueError, match="train_dataset\\['files'\\]='lists/files.txt' " + hint):
        VerifyShardingJob(sharded_dfd("lists/files.txt", partition_epoch=2), num_shards=2, epochs=2)
    relative = re.escape("['files'] holds 2 relative file names (first 2: ['f1.hdf', 'x/f3.hdf']). ")
    with pytest.raises(ValueError, match=relative + ".*give an absolute path or a tk.Path"):
        VerifyShardingJob(
            sharded_dfd([files[0], "f1.hdf", (files[2], "x/f3.hdf")], partition_epoch=2), num_shards=2, epochs=2
        )
    with pytest.raises(ValueError, match="returnn_root='returnn' " + hint):
        VerifyShardingJob(sharded_dfd(files, partition_epoch=2), num_shards=2, epochs=2, returnn_root="returnn")
    with pytest.raises(ValueError, match="returnn_python_exe='venv/bin/python' " + hint):
        VerifyShardingJob(
            sharded_dfd(files, partition_epoch=2), num_shards=2, epochs=2, returnn_python_exe="venv/bin/python"
        )
    # A command name is looked up on PATH; a relative tk.Path is resolved against the setup dir.
    VerifyShardingJob(sharded_dfd(files, partition_epoch=2), num_shards=2, epochs=2, returnn_python_exe="python3")
    job = VerifyShardingJob(tk.Path("returnn.config"), num_shards=2, epochs=2)
    assert job.train_dataset.get_path() == os.path.join(gs.BASE_DIR, "returnn.config")
    VerifyShardingJob(sharded_dfd([tk.Path("data/f.hdf")] * 4, partition_epoch=2), num_shards=2, epochs=2)


def test_runs_the_given_python_with_returnn_root_first_on_the_path(work_dir, hdf_files, monkeypatch):
    calls = []
    real_popen = subprocess.Popen

    def fake_popen(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return real_popen([sys.executable, "-c", "import sys; sys.exit('no RETURNN here')"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    job = VerifyShardingJob(
        sharded_dfd(hdf_files, partition_epoch=3),
        num_shards=2,
        epochs=3,
        returnn_python_exe=tk.Path("/opt/py/bin/python3"),
        returnn_root=tk.Path("/opt/returnn"),
    )
    with pytest.raises(RankFailedError, match="rank 0 of 2 failed with exit status 1; .*\nno RETURNN here\n$"):
        run_job(job)
    # both ranks ran (at the same time where there are CPUs for both), and the lowest failed rank's error is raised
    assert len(calls) == 2
    cmd, kwargs = _rank_call(calls, rank=0)
    assert cmd[:3] == ["/opt/py/bin/python3", "-m", "i6_shard.returnn_ext.verify"]
    assert cmd[cmd.index("--epochs") + 1] == "1,2,3" and cmd[cmd.index("--rank") + 1] == "0"
    path = kwargs["env"]["PYTHONPATH"].split(os.pathsep)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert path[:2] == ["/opt/returnn", repo]  # then i6_shard's and tests.hdf_data's root


def _rank_call(calls, *, rank):
    """The Popen call of rank ``rank``'s process."""
    (call,) = [(cmd, kwargs) for cmd, kwargs in calls if cmd[cmd.index("--rank") + 1] == str(rank)]
    return call


# --- RETURNN's Python and root as i6_core's jobs take them; requests; checks before the hash ------


def _dataset():
    return sharded_dfd(tk.Path("/data/corpus/files.txt"), partition_epoch=20)


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"RETURNN_PYTHON_EXE": "/opt/py/bin/python3", "RETURNN_ROOT": "/opt/returnn"},
        {"RETURNN_ROOT": "/opt/returnn"},
    ],
)
def test_returnn_defaults_follow_i6_core(work_dir, monkeypatch, settings):
    """The same Python and root as i6_core's ReturnnTrainingJob would take, and the same id as without
    settings: like i6_core, the defaults from gs are not hashed."""
    i6_core_util = pytest.importorskip(
        "i6_core.util",
        reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ and put recipe/ on PYTHONPATH",
    )
    from sisyphus import gs

    for name in ("RETURNN_PYTHON_EXE", "RETURNN_ROOT"):
        monkeypatch.setattr(gs, name, settings.get(name), raising=False)
    job = VerifyShardingJob(_dataset(), num_shards=8, epochs=40)
    assert job.returnn_python_exe.get_path() == i6_core_util.get_returnn_python_exe(None).get_path()
    if "RETURNN_ROOT" in settings:
        assert job.returnn_root.get_path() == i6_core_util.get_returnn_root(None).get_path() == "/opt/returnn"
    else:
        assert job.returnn_root is None  # where i6_core fails: the RETURNN installed for that Python
    assert job._sis_id() == VerifyShardingJob.__module__.replace(
        ".", "/"
    ) + "/VerifyShardingJob." + VerifyShardingJob.hash(
        {"train_dataset": _dataset(), "num_shards": 8, "epochs": 40, "returnn_root": None}
    )
    given = VerifyShardingJob(
        _dataset(),
        num_shards=8,
        epochs=40,
        returnn_python_exe=tk.Path("/usr/bin/python3"),
        returnn_root=tk.Path("/srv/returnn"),
    )
    assert (
        given.returnn_python_exe.get_path()
        == i6_core_util.get_returnn_python_exe(tk.Path("/usr/bin/python3")).get_path()
    )
    assert given.returnn_root.get_path() == "/srv/returnn"


def test_the_run_uses_the_python_and_root_from_the_settings(work_dir, hdf_files, monkeypatch):
    from sisyphus import gs

    monkeypatch.setattr(gs, "RETURNN_PYTHON_EXE", "/opt/py/bin/python3", raising=False)
    monkeypatch.setattr(gs, "RETURNN_ROOT", "/opt/returnn-from-settings", raising=False)
    calls = []
    real_popen = subprocess.Popen

    def fake_popen(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return real_popen([sys.executable, "-c", "import sys; sys.exit('no RETURNN here')"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    job = VerifyShardingJob(sharded_dfd(hdf_files, partition_epoch=3), num_shards=2, epochs=3)
    with pytest.raises(RankFailedError):
        run_job(job)
    cmd, kwargs = _rank_call(calls, rank=0)
    assert cmd[0] == "/opt/py/bin/python3"
    assert kwargs["env"]["PYTHONPATH"].split(os.pathsep)[0] == "/opt/returnn-from-settings"


def test_numpy_numbers_are_the_job_of_python_numbers(work_dir):
    import numpy as np

    job = VerifyShardingJob(_dataset(), num_shards=8, epochs=40)
    assert (
        VerifyShardingJob(
            dict(_dataset(), partition_epoch=np.int64(20), sharding_fix=np.bool_(True)),
            num_shards=np.int64(8),
            epochs=np.int32(40),
            cpu_rqmt=np.int64(2),
        )
        is job
    )
    listed = VerifyShardingJob(_dataset(), num_shards=8, epochs=[np.int64(3), 1])
    assert listed is VerifyShardingJob(_dataset(), num_shards=8, epochs=[1, 3]) and listed.epochs == [1, 3]
    assert [type(e) for e in listed.epochs] == [int, int] and type(job.num_shards) is int


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"num_shards": 0}, ValueError, "num_shards=0 must be a positive int"),
        ({"num_shards": "8"}, TypeError, "num_shards='8' has type str; .*pass num_shards=8"),
        (
            {"time_rqmt": "1h"},
            TypeError,
            "time_rqmt='1h' has type str; time_rqmt must be a positive number \\(hours\\)",
        ),
        ({"mem_rqmt": 0}, ValueError, "mem_rqmt=0 must be a positive number \\(GB\\)"),
        ({"returnn_root": 3}, TypeError, "returnn_root=3 has type int; give a tk.Path"),
        (
            {"returnn_python_exe": ["/usr/bin/python3"]},
            TypeError,
            "returnn_python_exe=\\['/usr/bin/python3'\\] has type list",
        ),
    ],
)
def test_every_argument_is_checked_before_the_hash(work_dir, options, error, match):
    VerifyShardingJob(_dataset(), num_shards=8, epochs=40)
    args = {"train_dataset": _dataset(), "num_shards": 8, "epochs": 40, **options}
    with pytest.raises(error, match=match):
        VerifyShardingJob.hash(
            dict(args, returnn_python_exe=options.get("returnn_python_exe"), returnn_root=options.get("returnn_root"))
        )
    with pytest.raises(error, match=match):  # the requests are not hashed: this id exists already
        VerifyShardingJob(**args)


def test_requests_are_sized_from_ranks_and_sub_epochs(work_dir):
    import sisyphus.job

    from i6_shard.jobs.verify import verify_rqmt

    (task,) = VerifyShardingJob(_dataset(), num_shards=8, epochs=40).tasks()
    # 1 h + 1 min x 8 x 40 over 4 ranks at a time
    assert not task.mini_task and task.rqmt() == {"cpu": 4, "mem": 6.0, "time": 2.5}
    # a 2-rank verification fits the 2-CPU, 4 GB LocalEngine of recipe_examples/settings.py: Sisyphus never starts
    # a task that asks for more than its engine has, so the manager waited for it forever
    assert verify_rqmt(num_shards=2, num_epochs=6) == {"cpu": 2, "mem": 4, "time": 1.25}
    assert verify_rqmt(num_shards=16, num_epochs=40)["time"] > verify_rqmt(num_shards=8, num_epochs=40)["time"]
    sisyphus.job.created_jobs.clear()  # requests are not hashed: the same id, another object
    (task,) = VerifyShardingJob(_dataset(), num_shards=8, epochs=40, mem_rqmt=16, time_rqmt=24).tasks()
    assert task.rqmt() == {"cpu": 4, "mem": 16.0, "time": 24.0}


def _combined(dfd, *, other_dfd=None):
    """A CombinedDataset holding the DFD (as public i6 recipes wrap one), and optionally a second one."""
    datasets = {"asr": dfd}
    data_map = {("asr", "data"): "data"}
    if other_dfd is not None:
        datasets["lm"] = other_dfd
        data_map[("lm", "data")] = "lm_data"
    return {"class": "CombinedDataset", "seq_ordering": "interleave", "datasets": datasets, "data_map": data_map}


def test_a_wrapped_dfd_is_found_and_checked_at_graph_construction(work_dir):
    files = [f"/data/f{i}.hdf" for i in range(4)]
    job = VerifyShardingJob(_combined(sharded_dfd(files, partition_epoch=2)), num_shards=2, epochs=2)
    # The key path is not hashed when not given; given, it is another job.
    assert (
        VerifyShardingJob(
            _combined(sharded_dfd(files, partition_epoch=2)), num_shards=2, epochs=2, key_path=["datasets", "asr"]
        )
        is not job
    )
    # The file rule holds inside the wrapper too.
    with pytest.raises(ValueError, match="4 files cannot fill num_shards\\*partition_epoch=2\\*4=8 bins"):
        VerifyShardingJob(_combined(sharded_dfd(files, partition_epoch=4)), num_shards=2, epochs=2)
    # Two DFDs: the job must be told which.
    two = _combined(sharded_dfd(files, partition_epoch=2), other_dfd=sharded_dfd(files, partition_epoch=2))
    with pytest.raises(ValueError, match="at \\[\\['datasets', 'asr'\\], \\['datasets', 'lm'\\]\\].*key_path"):
        VerifyShardingJob(two, num_shards=2, epochs=2)
    VerifyShardingJob(two, num_shards=2, epochs=2, key_path=("datasets", "lm"))
    with pytest.raises(ValueError, match="none is at key_path=\\['datasets', 'nope'\\]"):
        VerifyShardingJob(two, num_shards=2, epochs=2, key_path=["datasets", "nope"])
    with pytest.raises(ValueError, match="class 'HDFDataset'\\) holds no DistributeFilesDataset"):
        VerifyShardingJob(hdf_sub_epoch_dataset(files), num_shards=2, epochs=2)


def test_config_opts_decide_the_mode_and_are_checked(work_dir):
    files = [f"/data/f{i}.hdf" for i in range(4)]
    unsharded = sharded_dfd(files, partition_epoch=4, distrib_shard_files=False)
    # Unsharded, 4 files fill 4 sub-epochs on every rank; under dataset_distribution="shard" the
    # files are split over the 2 ranks as with distrib_shard_files, so they cannot.
    VerifyShardingJob(unsharded, num_shards=2, epochs=4)
    with pytest.raises(ValueError, match="4 files cannot fill num_shards\\*partition_epoch=2\\*4=8 bins"):
        VerifyShardingJob(
            unsharded, num_shards=2, epochs=4, config_opts={"torch_distributed": {"dataset_distribution": "shard"}}
        )
    with pytest.raises(TypeError, match="config_opts=.* must be a dict"):
        VerifyShardingJob(unsharded, num_shards=2, epochs=4, config_opts=[("behavior_version", 24)])
    with pytest.raises(ValueError, match="config_opts is for a train_dataset dict"):
        VerifyShardingJob(tk.Path("/data/returnn.config"), num_shards=2, epochs=4, config_opts={"behavior_version": 24})


def test_a_plan_job_simulated_under_batching_needs_the_trainings_config_opts(work_dir):
    """A dataset that reads its bins from a ShardPlanJob simulated under batching and sync refuses, at start-up, a
    config that states other ones: the verify job's RETURNN processes run it under config_opts, so the job refuses
    config_opts without the training's settings when the graph is built, naming each."""
    from i6_shard.jobs import ShardPlanJob
    from i6_shard.returnn_config import sharded_files_dataset

    keys = [f"/data/f{i}.hdf" for i in range(8)]
    sizes_path = str(work_dir / "sizes.npz")
    core.save_file_sizes(core.FileSizes(keys, list(range(1, 9))), sizes_path)
    config = {"batch_size": 1000, "max_seqs": 20, "torch_distributed": {"reduce_type": "param", "param_sync_step": 4}}
    plan = ShardPlanJob.for_training(
        config, file_sizes=tk.Path(sizes_path), num_ranks=2, num_epochs=4, partition_epoch=2
    )
    dataset = sharded_files_dataset(
        keys, plan=plan, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    with pytest.raises(ValueError, match=re.escape("simulated with batch_size=1000, the config has batch_size=None")):
        VerifyShardingJob(dataset, num_shards=2, epochs=4)
    with pytest.raises(ValueError, match=re.escape("simulated with max_seqs=20, the config has max_seqs=5")):
        VerifyShardingJob(dataset, num_shards=2, epochs=4, config_opts={**config, "max_seqs": 5})
    with pytest.raises(ValueError, match="Give config_opts the training's config"):
        VerifyShardingJob(dataset, num_shards=2, epochs=4, config_opts={"batch_size": 1000, "max_seqs": 20})
    VerifyShardingJob(dataset, num_shards=2, epochs=4, config_opts=config)


def test_ranks_and_epochs_come_from_the_plan_job_the_dataset_names(work_dir):
    """Stated once: a dataset built from a ShardPlanJob (plan=job) gives the verify job its ranks and the training's
    sub-epochs, and the job is the one given them explicitly (the same id); a value given must agree, and without a
    plan job both are needed."""
    from i6_shard.jobs import ShardPlanJob
    from i6_shard.returnn_config import sharded_files_dataset

    keys = [f"/data/f{i}.hdf" for i in range(12)]
    sizes_path = str(work_dir / "sizes.npz")
    core.save_file_sizes(core.FileSizes(keys, list(range(1, 13))), sizes_path)
    plan = ShardPlanJob(tk.Path(sizes_path), num_shards=3, partition_epoch=2, num_epochs=4)
    hdf = {"class": "HDFDataset", "seq_ordering": "random"}
    dataset = sharded_files_dataset(keys, plan=plan, sub_epoch_dataset=hdf)
    job = VerifyShardingJob(dataset)
    assert (job.num_shards, job.epochs) == (3, [1, 2, 3, 4])
    assert job is VerifyShardingJob(dataset, num_shards=3, epochs=4)
    assert VerifyShardingJob(dataset, epochs=2).epochs == [1, 2]  # fewer sub-epochs: given, taken
    with pytest.raises(
        ValueError, match=r"num_shards=2, but the dataset reads its bins from .*ShardPlanJob.*num_shards=3"
    ):
        VerifyShardingJob(dataset, num_shards=2, epochs=4)
    unplanned = sharded_files_dataset(keys, partition_epoch=2, sub_epoch_dataset=hdf)
    with pytest.raises(
        ValueError, match="give num_shards and epochs: train_dataset reads its bins from no ShardPlanJob"
    ):
        VerifyShardingJob(unplanned)
    with pytest.raises(ValueError, match="give epochs: "):
        VerifyShardingJob(unplanned, num_shards=2)
    with pytest.raises(ValueError, match="give num_shards: "):
        VerifyShardingJob(tk.Path("/data/returnn.config"), epochs=4)


@pytest.mark.slow  # a RETURNN subprocess through torch's DataLoader: several seconds
def test_verifies_the_dataset_distribution_shard_mode(work_dir, hdf_files):
    """The real RETURNN per rank: torch's dataset_distribution="shard" splits the files of a DFD with
    distrib_shard_files=False over the ranks; told so by config_opts, the job proves exactly-once reading.
    torch_distributed stays in the config the ranks run: RETURNN shards the train dataset itself and gives every
    rank the same seed (the runner simulates each rank with RETURNN's own DistributedContext)."""
    needs_torch("the shard mode is torch's")
    dfd = sharded_dfd(hdf_files, partition_epoch=3, distrib_shard_files=False, random_seed_offset=3)
    job = VerifyShardingJob(
        dfd, num_shards=3, epochs=3, config_opts={"torch_distributed": {"dataset_distribution": "shard"}}
    )
    run_job(job)
    assert job.out_ok.get() is True
    ranks = [
        json.loads(_read(os.path.join(job._sis_path(gs.JOB_WORK_DIR, abspath=True), f"rank-{r}.json")))
        for r in range(3)
    ]
    assert [r["settings"]["distrib_shard_files"] for r in ranks] == [False] * 3
    assert [r["settings"]["random_seed_offset"] for r in ranks] == [3] * 3
    # The same dict under RETURNN's default distribution reads every file on every rank.
    bad = VerifyShardingJob(dfd, num_shards=3, epochs=3)
    with pytest.raises(ShardingVerificationError):
        run_job(bad)
    assert bad.out_ok.get() is False


@pytest.mark.slow
def test_verifies_a_wrapped_dfd(work_dir, hdf_files, capsys):
    """A MultiEpochDataset around the DFD (with the random_seed_offset it needs); the runner reads the
    DFD at the key path inside it. Also what test_passes_with_sharding_fix checks (files as tk.Path leaves,
    sharding_fix=True, two full epochs, a progress line per rank), so that the quick tier runs it once."""
    wrapped = {
        "class": "MultiEpochDataset",
        "multi_epoch": 1,
        "random_seed_offset": 0,
        "dataset": sharded_dfd([tk.Path(f) for f in hdf_files], partition_epoch=3, sharding_fix=True),
    }
    job = VerifyShardingJob(wrapped, num_shards=3, epochs=6, key_path=["dataset"])
    run_job(job)
    _assert_ok_on_3_ranks(job, capsys)


@pytest.fixture(scope="module")
def skewed_files(tmp_path_factory):
    """HDF files whose frames vary far more than their bytes (the HDF structure dominates small files)."""
    return write_tiny_hdf_files(
        str(tmp_path_factory.mktemp("skewed")),
        num_files=12,
        seed=5,
        seqs_per_file=[1, 30, 2, 25, 3, 1, 20, 2, 1, 15, 4, 1],
        frames=(1, 60),
    )


@pytest.fixture(scope="module")
def frame_costs(skewed_files, tmp_path_factory):
    """A costs archive in frames of the skewed files."""
    from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs

    path = str(tmp_path_factory.mktemp("costs") / "costs.npz")
    save_file_costs(collect_file_costs(list(skewed_files), unit="frames", num_procs=1), path)
    return path


@pytest.mark.slow
def test_the_reference_is_the_datasets_own_costs_archive(work_dir, skewed_files, frame_costs):
    """A dataset balanced by a frames archive is checked against the plan of that archive, not of the bytes on
    disk (which cut other bins: the verification would report files that were right)."""
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    by_frames = core.ShardPlan(
        *_keys_and_costs(frame_costs),
        core.PlanSettings(num_shards=3, partition_epoch=3, distribution="balanced", unit="frames"),
    )
    by_bytes = core.ShardPlan(
        *_keys_and_costs(None, skewed_files),
        core.PlanSettings(num_shards=3, partition_epoch=3, distribution="balanced"),
    )
    assert any(
        by_frames.files_for(epoch=e, shard_index=r) != by_bytes.files_for(epoch=e, shard_index=r)
        for e in (1, 2, 3)
        for r in range(3)
    ), "pick files whose frames and bytes balance differently"
    dataset = sharded_dfd(
        skewed_files,
        partition_epoch=3,
        distribution="balanced",
        file_sizes=frame_costs,
        **{"class": ShardedDistributeFilesDataset},
    )
    job = VerifyShardingJob(dataset, num_shards=3, epochs=3)
    run_job(job)
    assert job.out_ok.get() is True


@pytest.mark.slow
def test_the_reference_is_the_datasets_own_plan_file(work_dir, skewed_files, frame_costs):
    from i6_shard.returnn_ext import ShardedDistributeFilesDataset

    plan_path = str(work_dir / "plan.npz")
    core.save_plan(
        core.ShardPlan(
            *_keys_and_costs(frame_costs),
            core.PlanSettings(num_shards=3, partition_epoch=3, num_epochs=4, distribution="balanced", unit="frames"),
        ),
        plan_path,
    )
    dataset = sharded_dfd(skewed_files, partition_epoch=3, plan=plan_path, **{"class": ShardedDistributeFilesDataset})
    job = VerifyShardingJob(dataset, num_shards=3, epochs=3)
    run_job(job)
    assert job.out_ok.get() is True


def _keys_and_costs(costs_path, files=None):
    sizes = core.load_file_sizes(costs_path) if costs_path else core.collect_file_sizes(list(files))
    return sizes.keys, sizes.sizes


@pytest.mark.slow  # RETURNN processes through torch's DataLoader with 2 workers each
def test_verifies_dataloader_workers_that_shard(work_dir, hdf_files):
    """behavior_version 37 with 2 DataLoader workers, given to the job as config_opts: each worker's copy is one of
    2 * 2 shards, and the job passes. (That the runner catches a MultiEpochDataset whose DFD takes the wrapper's
    per-rank seed is shown on a real training of it, in tests/training/test_engine_modes_live.py; that a failing
    verification fails the job, in test_fails_listing_the_double_sharding_loss.)"""
    needs_torch("the torch engine's DataLoader needs torch")
    opts = {"backend": "torch", "torch_distributed": {}, "behavior_version": 37}
    workers = VerifyShardingJob(
        sharded_dfd(hdf_files[:8], partition_epoch=2),
        num_shards=2,
        epochs=2,
        config_opts={**opts, "torch_dataloader_opts": {"num_workers": 2}},
    )
    run_job(workers)
    assert workers.out_ok.get() is True
    report = _read(workers.out_report.get_path())  # the job's 2 ranks, each of whose 2 workers reads a shard
    assert "num_shards=2 " in report and "4 shards" in report and "num_shards=4" not in report
    assert "verified with RETURNN " in report


def _assert_ok_on_3_ranks(job, capsys) -> None:
    """The job passed: one progress line per rank (each a RETURNN process that can take a while), 6 sub-epochs of
    3 ranks read, and a report that says OK and covers both full epochs completely."""
    assert job.out_ok.get() is True
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("i6_shard verify: rank ")]
    import returnn

    assert [re.sub(r"in [0-9.]+s ", "in Ts ", line) for line in progress] == [
        f"i6_shard verify: rank {r} of 3 read 6 sub-epochs in Ts with RETURNN {returnn.__version__}" for r in range(3)
    ]
    report = _read(job.out_report.get_path())
    assert report.startswith("i6_shard sharding verification: OK\n")
    assert "full epoch 0: " in report and "full epoch 1: " in report and "partly read" not in report

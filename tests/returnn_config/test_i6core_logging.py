"""training_job_kwargs switches on the logging the training report reads (log_batch_size, log_verbosity 5)
outside the hash: the job id is the same with and without it, and the written config holds it."""

import copy
import os

import pytest

pytest.importorskip(
    "sisyphus.job",
    reason="needs the real Sisyphus: pip install it from its source repository "
    "(github.com/rwth-i6/sisyphus); the PyPI package 'sisyphus' is unrelated",
)
pytest.importorskip(
    "i6_core.returnn",
    reason="needs i6_core: clone github.com/rwth-i6/i6_core into recipe/ and put recipe/ on PYTHONPATH",
)

from i6_core.returnn.training import ReturnnTrainingJob  # noqa: E402
from sisyphus import gs, tk  # noqa: E402

from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.i6core import sharded_returnn_config, training_job_kwargs  # noqa: E402

EXE = dict(returnn_python_exe=tk.Path("/usr/bin/python3"), returnn_root=tk.Path("/opt/returnn"))
HDF = {"class": "HDFDataset", "seq_ordering": "random"}


def _config(**extra):
    train = sharded_files_dataset([f"/d/{i}.hdf" for i in range(8)], sub_epoch_dataset=HDF, partition_epoch=2)
    return sharded_returnn_config({"backend": "torch", "behavior_version": 24, "batch_size": 1000, **extra}, train)


def test_logging_for_the_report_is_on_and_unhashed(tmp_path, monkeypatch):
    monkeypatch.setattr(gs, "WORK_DIR", str(tmp_path / "work"))
    kwargs = training_job_kwargs(_config(), num_gpus=2, num_epochs=4, **EXE)
    assert kwargs["returnn_config"].post_config["log_batch_size"] is True
    assert kwargs["log_verbosity"] == 5
    job = ReturnnTrainingJob(**kwargs)
    plain = copy.deepcopy(kwargs)
    del plain["returnn_config"].post_config["log_batch_size"]
    del plain["log_verbosity"]
    assert ReturnnTrainingJob(**plain)._sis_id() == job._sis_id()
    job._sis_setup_directory()
    os.makedirs(job._sis_path(gs.JOB_WORK_DIR), exist_ok=True)
    monkeypatch.chdir(job._sis_path(gs.JOB_WORK_DIR))
    job.create_files()
    from returnn.config import Config

    config = Config()
    config.load_file(job.out_returnn_config_file.get_path())
    assert config.bool("log_batch_size", False) and config.int_list("log_verbosity") == [5]
    assert config.list("log") == ["./returnn.log"]  # RETURNN makes it returnn.torch-distrib-<rank>-<size>.log


def test_the_users_choice_is_kept():
    kwargs = training_job_kwargs(_config(log_batch_size=False), num_gpus=2, num_epochs=4, log_verbosity=4, **EXE)
    assert "log_batch_size" not in kwargs["returnn_config"].post_config
    assert kwargs["returnn_config"].config["log_batch_size"] is False
    assert kwargs["log_verbosity"] == 4

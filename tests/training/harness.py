"""Real multi-rank RETURNN trainings on the CPU (torchrun, gloo) for tests and benchmarks: skewed
HDF files, a tiny torch model, a DistributeFilesDataset; returns RETURNN's own per-rank logs.

Import it as ``tests.training.harness`` (benchmarks put the repository root on ``sys.path``).
Trainings take one lock on this machine, so only one runs at a time, whoever starts it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from tests.blocking import STALL_SECONDS, wait_for_process

__all__ = [
    "Training",
    "torch_available",
    "write_skewed_hdf_files",
    "hdf_seq_lengths",
    "hdf_files_dataset",
    "training_config",
    "write_training_config",
    "run_training",
    "launch_command",
    "run_sharded_training",
    "TRAINING_LOCK",
]

#: Lock file that serializes trainings on this machine (2 shared cores: one training at a time).
TRAINING_LOCK = os.path.join(tempfile.gettempdir(), "i6_shard_training.lock")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The model and train step of every harness training: one linear layer that reconstructs its input
#: features, MSE over the real frames (padding masked out). Adam keeps it from diverging.
MODEL_CODE = '''
import torch as _torch
import returnn.frontend as _rf


def get_model(**_kwargs):
    """One linear layer on the features."""
    return _torch.nn.Linear(FEATURE_DIM, FEATURE_DIM)


def train_step(*, model, extern_data, **_kwargs):
    """MSE of the reconstructed features over the frames of each sequence."""
    data = extern_data["data"]
    x = data.raw_tensor
    lens = data.dims[1].dyn_size_ext.raw_tensor
    mask = _torch.arange(x.shape[1])[None, :] < lens[:, None]
    loss = ((model(x) - x) ** 2).sum(-1)[mask]
    _rf.get_run_ctx().mark_as_loss(name="mse", loss=loss)
'''
FEATURE_DIM = 2


def torch_available() -> bool:
    """Whether torch imports (the trainings need it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# --- data ------------------------------------------------------------------------------------------


def _write_hdf(path: str, seq_lens: Sequence[int], *, tags: Sequence[str], rng: np.random.RandomState) -> None:
    """One HDF file: random features of dim FEATURE_DIM, one sequence per length."""
    from tests.hdf_data import write_hdf_file

    lens = np.asarray(seq_lens, dtype=np.int64)
    # One draw for all sequences, padded to the longest: the committed logs were made from these draws.
    features = rng.rand(len(lens), int(lens.max()), FEATURE_DIM)
    write_hdf_file(path, [f[:n] for f, n in zip(features, lens.tolist())], tags=tags)


def write_skewed_hdf_files(
    directory: str,
    *,
    num_files: int,
    seed: int = 0,
    median_seqs: float = 8.0,
    seqs_sigma: float = 1.0,
    median_frames: float = 20.0,
    frames_sigma: float = 0.6,
    max_seqs_per_file: int = 200,
    max_frames: int = 150,
) -> List[str]:
    """``num_files`` HDF files with lognormal numbers of sequences (median ``median_seqs``) and
    lognormal sequence lengths in frames (median ``median_frames``), so files differ a lot in size;
    tags ``file{i}/seq{j}``. Deterministic for a seed.

    :return: absolute paths, in file order
    """
    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    paths = []
    for i in range(num_files):
        num_seqs = int(np.clip(round(rng.lognormal(np.log(median_seqs), seqs_sigma)), 1, max_seqs_per_file))
        lens = np.clip(np.round(rng.lognormal(np.log(median_frames), frames_sigma, size=num_seqs)), 1, max_frames)
        path = os.path.abspath(os.path.join(directory, f"part{i:03d}.hdf"))
        _write_hdf(path, lens.astype(np.int64), tags=[f"file{i}/seq{j}" for j in range(num_seqs)], rng=rng)
        paths.append(path)
    return paths


def hdf_seq_lengths(path: str) -> np.ndarray:
    """Frames of every sequence of a RETURNN HDF file (its ``seqLengths``, data stream), read with
    h5py: what the training can read from this file."""
    import h5py

    with h5py.File(path, "r") as f:
        lengths = np.asarray(f["seqLengths"])
    return (lengths[:, 0] if lengths.ndim == 2 else lengths).astype(np.int64)


# --- config ----------------------------------------------------------------------------------------


def training_config(
    *,
    train: Mapping[str, Any],
    num_epochs: int,
    batch_size: int = 200,
    max_seqs: int = 8,
    behavior_version: int = 24,
    torch_distributed: Optional[Mapping[str, Any]] = None,
    log_batch_size: bool = True,
    extra: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """The RETURNN config of a harness training (without the model code, see :func:`write_training_config`):
    torch on the CPU, ``torch_distributed`` with the gloo backend, ``batch_size`` in frames, ``max_seqs``,
    every step logged (``log_verbosity=5``) with its batch size (``log_batch_size``) into ``returnn.log``
    (RETURNN turns it into one file per rank, ``returnn.torch-distrib-<rank>-<size>.log``)."""
    config: Dict[str, Any] = {
        "backend": "torch",
        "task": "train",
        "device": "cpu",
        "behavior_version": behavior_version,
        "torch_distributed": dict(torch_distributed) if torch_distributed is not None else {"backend": "gloo"},
        "extern_data": {"data": {"dim": FEATURE_DIM}},
        "train": dict(train),
        "batch_size": batch_size,
        "max_seqs": max_seqs,
        "optimizer": {"class": "adam"},
        "learning_rate": 0.001,
        "num_epochs": num_epochs,
        "model": "models/epoch",
        "log": ["./returnn.log"],  # RETURNN takes a log target as a file only with a directory part
        "log_verbosity": 5,
        "log_batch_size": log_batch_size,
    }
    config.update(extra or {})
    return config


def write_training_config(path: str, config: Mapping[str, Any]) -> None:
    """Write ``config`` as RETURNN config code (i6_shard's safe literals) plus the model code."""
    from i6_shard.returnn_config.pycode import config_code

    text = config_code(config) + f"\nFEATURE_DIM = {FEATURE_DIM}\n" + MODEL_CODE
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, path)


# --- running ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Training:
    """A finished training: its directory, config, RETURNN's per-rank log files in rank order,
    and the launcher's combined stdout/stderr (every line prefixed ``[default<rank>]:``)."""

    work_dir: str
    config_path: str
    log_files: List[str]
    stdout_path: str
    num_ranks: int
    seconds: float

    @property
    def stdout(self) -> str:
        with open(self.stdout_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def log_text(self, rank: int) -> str:
        with open(self.log_files[rank], encoding="utf-8", errors="replace") as f:
            return f.read()


def launch_command(config_path: str, *, num_ranks: int) -> List[str]:
    """torchrun (as i6_core's ReturnnTrainingJob runs it: ``-mtorch.distributed.run --standalone --tee=3``)
    on RETURNN's main module, ``python -m returnn`` (its ``__main__`` runs ``main``, as ``rnn.py`` does),
    so no RETURNN source checkout is needed."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={num_ranks}",
        "--tee=3",
        "-m",
        "returnn",
        config_path,
    ]


@contextlib.contextmanager
def _training_lock():
    """One training at a time on this machine (flock on TRAINING_LOCK). The wait has no deadline: the training that
    holds the lock ends, or its own hang guard (:func:`tests.blocking.wait_for_process`) ends it."""
    with open(TRAINING_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_LOG_NAME = re.compile(r"^returnn\.torch-distrib-(\d+)-(\d+)\.log$")


def run_training(
    work_dir: str,
    *,
    train: Mapping[str, Any],
    num_ranks: int,
    num_epochs: int,
    batch_size: int = 200,
    max_seqs: int = 8,
    behavior_version: int = 24,
    torch_distributed: Optional[Mapping[str, Any]] = None,
    log_batch_size: bool = True,
    extra_config: Optional[Mapping[str, Any]] = None,
    stall: float = STALL_SECONDS,
) -> Training:
    """Write the config into ``work_dir`` (which must not hold an earlier training) and train with
    ``num_ranks`` processes; raise ``RuntimeError`` with the output's tail if the training fails.

    :param train: the train dataset dict (e.g. from ``sharded_files_dataset``), with str paths
    :param stall: the training is taken for hung (and killed, failing the caller) only when its output and work dir
        stood still this many seconds: a loaded machine makes it slow, and no clock decides
    :return: the finished :class:`Training`
    """
    os.makedirs(work_dir, exist_ok=True)
    if any(_LOG_NAME.match(n) for n in os.listdir(work_dir)):
        raise ValueError(f"{work_dir!r} already holds RETURNN logs; give a fresh directory per training")
    config_path = os.path.join(work_dir, "returnn.config")
    write_training_config(
        config_path,
        training_config(
            train=train,
            num_epochs=num_epochs,
            batch_size=batch_size,
            max_seqs=max_seqs,
            behavior_version=behavior_version,
            torch_distributed=torch_distributed,
            log_batch_size=log_batch_size,
            extra=extra_config,
        ),
    )
    stdout_path = os.path.join(work_dir, "stdout.txt")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (_REPO_ROOT, os.environ.get("PYTHONPATH")) if p),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    with _training_lock(), open(stdout_path, "wb") as out:
        start = time.monotonic()
        proc = subprocess.Popen(
            launch_command(config_path, num_ranks=num_ranks),
            cwd=work_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        returncode = wait_for_process(
            proc, what=f"the training in {work_dir}", watch=(stdout_path, work_dir), stall=stall
        )
        seconds = time.monotonic() - start
    if returncode != 0:
        with open(stdout_path, encoding="utf-8", errors="replace") as f:
            tail = "".join(f.readlines()[-40:])
        raise RuntimeError(f"training in {work_dir} failed with exit code {returncode}; last output:\n{tail}")
    logs = [os.path.join(work_dir, f"returnn.torch-distrib-{r}-{num_ranks}.log") for r in range(num_ranks)]
    missing = [p for p in logs if not os.path.isfile(p)]
    if missing:
        raise RuntimeError(
            f"training in {work_dir} wrote no per-rank log {missing}; files: {sorted(os.listdir(work_dir))}"
        )
    return Training(
        work_dir=work_dir,
        config_path=config_path,
        log_files=logs,
        stdout_path=stdout_path,
        num_ranks=num_ranks,
        seconds=seconds,
    )


def hdf_files_dataset(
    files: Sequence[str], *, num_shards: int, partition_epoch: int, use_worker_proc: bool = False, **options
) -> Dict[str, Any]:
    """The trainings' DistributeFilesDataset over the HDF ``files`` (each sub-epoch in random order), built by
    ``i6_shard.returnn_config.sharded_files_dataset`` with its further ``options`` (distribution, file_sizes, plan)."""
    from i6_shard.returnn_config import sharded_files_dataset

    return sharded_files_dataset(
        files,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        partition_epoch=partition_epoch,
        use_worker_proc=use_worker_proc,
        num_shards=num_shards,
        **options,
    )


def run_sharded_training(
    work_dir: str,
    *,
    num_ranks: int,
    num_files: int = 16,
    seed: int = 0,
    partition_epoch: int = 2,
    num_epochs: int = 4,
    behavior_version: int = 24,
    use_worker_proc: bool = False,
    sharding_fix: bool = True,
    distribution: str = "returnn",
    file_sizes: Optional[str] = None,
    data_kwargs: Optional[Mapping[str, Any]] = None,
    max_sub_epoch_deviation: Optional[float] = None,
    **run_kwargs,
) -> Training:
    """Skewed HDF files in ``work_dir/data`` (named ``data/partNNN.hdf`` relative to ``work_dir``, the
    training's working directory, so the logs name no machine's directories), a DistributeFilesDataset
    over them from ``i6_shard.returnn_config.sharded_files_dataset``, and a training on ``num_ranks`` ranks.

    :param sharding_fix: False gives RETURNN's legacy double sharding (RETURNN #1738)
    :param file_sizes: sizes archive for ``distribution`` other than "returnn" (absolute path)
    :param max_sub_epoch_deviation: with ``distribution="flexible"``: its bound (None: the default)
    :param run_kwargs: further arguments of :func:`run_training` (batch_size, max_seqs, ...)
    """
    write_skewed_hdf_files(os.path.join(work_dir, "data"), num_files=num_files, seed=seed, **dict(data_kwargs or {}))
    files = [f"data/part{i:03d}.hdf" for i in range(num_files)]
    train = hdf_files_dataset(
        files,
        num_shards=num_ranks,
        partition_epoch=partition_epoch,
        use_worker_proc=use_worker_proc,
        distribution=distribution,
        file_sizes=file_sizes,
        **({} if max_sub_epoch_deviation is None else {"max_sub_epoch_deviation": max_sub_epoch_deviation}),
    )
    if not sharding_fix:
        train["sharding_fix"] = False
    return run_training(
        work_dir,
        train=train,
        num_ranks=num_ranks,
        num_epochs=num_epochs,
        behavior_version=behavior_version,
        **run_kwargs,
    )

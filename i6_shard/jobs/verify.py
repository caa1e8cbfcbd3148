"""VerifyShardingJob: runs the real RETURNN once per rank and proves that a sharded
DistributeFilesDataset reads every sequence exactly once per full epoch, as planned."""

from __future__ import annotations

import collections
import functools
import json
import os
import pickle
import subprocess
import sys
import time
import types
from typing import Any, Dict, List, Optional, Sequence, Union

from sisyphus import Job, Task, gs, tk

from i6_shard import core
from i6_shard.core.reporting import verify_records

from .util import check_absolute, check_absolute_leaves, import_roots, instantiate, pythonpath_env, write_variable

__all__ = ["VerifyShardingJob", "ShardingVerificationError", "RankFailedError"]

#: Violations listed in the error message of a failed verification.
NUM_LISTED = 10
#: Last lines of a failed rank's stderr put into the error.
STDERR_TAIL_LINES = 20


class ShardingVerificationError(RuntimeError):
    """The ranks did not read what they should have; the message lists the first violations."""


class RankFailedError(subprocess.CalledProcessError):
    """The RETURNN process of one rank failed; the message ends with the last lines of its stderr
    (where its error is)."""

    def __init__(self, returncode: int, cmd: List[str], *, rank: int, num_shards: int, stderr_tail: str):
        super().__init__(returncode, cmd, stderr=stderr_tail)
        self.rank = rank
        self.num_shards = num_shards

    def __str__(self):
        return (f"the RETURNN process of rank {self.rank} of {self.num_shards} failed with exit status "
                f"{self.returncode}; the end of its stderr:\n{self.stderr}")


def _run_rank(cmd: List[str], *, rank: int, num_shards: int, env: Dict[str, str], cwd: str) -> None:
    """Run one rank's RETURNN process; its stderr goes on to ours, and its tail into the error."""
    tail = collections.deque(maxlen=STDERR_TAIL_LINES)
    with subprocess.Popen(cmd, env=env, cwd=cwd, stderr=subprocess.PIPE, text=True, errors="replace") as proc:
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line)
    if proc.returncode:
        raise RankFailedError(proc.returncode, cmd, rank=rank, num_shards=num_shards, stderr_tail="".join(tail))


def _normalize_epochs(epochs: Union[int, Sequence[int]]) -> List[int]:
    if isinstance(epochs, int) and not isinstance(epochs, bool):
        if epochs < 1:
            raise ValueError(f"epochs={epochs!r} must be >= 1 (the first N sub-epochs) or a list of sub-epochs")
        return list(range(1, epochs + 1))
    if not isinstance(epochs, (list, tuple)) or not epochs:
        raise TypeError(f"epochs={epochs!r} must be an int N (sub-epochs 1..N) or a non-empty list of sub-epochs")
    for e in epochs:
        if not isinstance(e, int) or isinstance(e, bool) or e < 1:
            raise ValueError(f"epochs contains {e!r}; sub-epochs are ints >= 1, as RETURNN counts them")
    return sorted(set(epochs))


def _check_picklable_functions(obj: Any, where: str = "train_dataset") -> None:
    """Functions in the dataset dict must be importable by name: the RETURNN processes unpickle
    them, and Sisyphus hashes them by module and name."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_picklable_functions(v, f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check_picklable_functions(v, f"{where}[{i}]")
    elif isinstance(obj, functools.partial):
        _check_picklable_functions(obj.func, f"{where}.func")
        _check_picklable_functions(list(obj.args) + list(obj.keywords.values()), f"{where}.args")
    elif isinstance(obj, types.FunctionType):
        if "<" in obj.__qualname__ or obj.__module__ == "__main__":
            raise ValueError(
                f"{where} is {obj.__module__}.{obj.__qualname__}, which cannot be pickled for the RETURNN "
                "processes nor hashed stably; use a module-level function (bind arguments with functools.partial)")


def _check_dataset_dict(dataset: Dict[str, Any], *, num_shards: int) -> None:
    """What can be checked before RETURNN runs: the class, the keys RETURNN requires, absolute
    paths, and (for an inline list) enough files for every rank and sub-epoch."""
    cls = dataset.get("class")
    if isinstance(cls, type):
        if not any(c.__name__ == "DistributeFilesDataset" for c in cls.__mro__):
            raise ValueError(f"train_dataset has class {cls.__qualname__}, not a subclass of DistributeFilesDataset; "
                             "VerifyShardingJob checks a DistributeFilesDataset")
    elif cls != "DistributeFilesDataset":
        raise ValueError(f"train_dataset has class {cls!r}; VerifyShardingJob checks a DistributeFilesDataset: "
                         "set 'class': 'DistributeFilesDataset' (or a subclass of it)")
    for key in ("files", "get_sub_epoch_dataset"):
        if key not in dataset:
            raise ValueError(f"train_dataset has no {key!r}, which DistributeFilesDataset requires; give the dict "
                             "exactly as the training uses it (see i6_shard.returnn_config.sharded_files_dataset)")
    if not callable(dataset["get_sub_epoch_dataset"]):
        raise TypeError(f"train_dataset['get_sub_epoch_dataset'] is {dataset['get_sub_epoch_dataset']!r}; it must be "
                        "a function from a list of file trees to a dataset dict")
    files = dataset["files"]
    if isinstance(files, tuple):
        raise TypeError("train_dataset['files'] is a tuple; DistributeFilesDataset takes a list (or a list file)")
    check_absolute(files, name="train_dataset['files']")
    if isinstance(files, list):
        check_absolute_leaves(files, name="train_dataset['files']")
        shards = core.pure.dfd_num_shards(distrib_shard_files=bool(dataset.get("distrib_shard_files")),
                                          num_ranks=num_shards, explicit_num_shards=dataset.get("_num_shards"))
        core.pure.check_enough_files(len(files), num_shards=shards, partition_epoch=dataset.get("partition_epoch") or 1)


class VerifyShardingJob(Job):
    """Runs the real RETURNN once per rank (``__debug_dummy_distributed_rank_and_size``), reads
    the given sub-epochs of the training dataset and checks, per full epoch, that every sequence
    is read by exactly one rank exactly once, that each rank read exactly the sequences of its
    files, and that the files per rank and sub-epoch equal the i6_shard plan for the dataset's
    own files, sizes and settings. The job fails listing the first violations. It prints a
    line per rank; a rank whose RETURNN process fails raises RankFailedError, whose message
    ends with the last lines of that process's stderr.

    Outputs: out_report (text), out_ok (tk.Variable, True when every check passed).
    """

    def __init__(
        self,
        train_dataset: Union[Dict[str, Any], tk.Path, str],
        *,
        num_shards: int,
        epochs: Union[int, Sequence[int]],
        returnn_python_exe: Optional[Union[tk.Path, str]] = None,
        returnn_root: Optional[Union[tk.Path, str]] = None,
    ):
        """
        :param train_dataset: the DistributeFilesDataset dict the training uses (its
            ``get_sub_epoch_dataset`` a module-level function or a ``functools.partial`` of one,
            so that it pickles), or a RETURNN config file whose ``train`` is that dataset
        :param num_shards: number of ranks to check
        :param epochs: sub-epochs to read (1-based): an int N for 1..N, or a list; give whole
            full epochs (multiples of partition_epoch) to check exactly-once reading
        :param returnn_python_exe: Python that runs RETURNN (None: the running Python); not hashed
        :param returnn_root: RETURNN checkout put on PYTHONPATH (None: the installed RETURNN)
        """
        if not isinstance(train_dataset, (dict, tk.Path, str)):
            raise TypeError(f"train_dataset must be a DistributeFilesDataset dict or a RETURNN config path, "
                            f"got {type(train_dataset).__name__}")
        if not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1:
            raise ValueError(f"num_shards={num_shards!r} must be a positive int")
        if isinstance(train_dataset, dict):
            _check_dataset_dict(train_dataset, num_shards=num_shards)
        check_absolute(train_dataset, name="train_dataset")
        check_absolute(returnn_root, name="returnn_root")
        if isinstance(returnn_python_exe, str) and os.sep in returnn_python_exe:  # else a command on PATH
            check_absolute(returnn_python_exe, name="returnn_python_exe")
        self.train_dataset = train_dataset
        self.num_shards = num_shards
        self.epochs = _normalize_epochs(epochs)
        self.returnn_python_exe = returnn_python_exe
        self.returnn_root = returnn_root
        self.rqmt = {"cpu": 1, "mem": 4, "time": 1}

        self.out_report = self.output_path("report.txt")
        self.out_ok = self.output_var("ok")

    @classmethod
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: reject what cannot be hashed (or pickled) here, clearly.
        if isinstance(parsed_args["train_dataset"], dict):
            _check_picklable_functions(parsed_args["train_dataset"])
        d = dict(parsed_args)
        del d["returnn_python_exe"]
        epochs = _normalize_epochs(d["epochs"])
        # epochs=4 and [1, 2, 3, 4] (in any order) are one job; 4 is how the first N were always hashed.
        d["epochs"] = len(epochs) if epochs == list(range(1, len(epochs) + 1)) else epochs
        return super().hash(d)

    def tasks(self):
        yield Task("run", rqmt=self.rqmt)

    def run(self):
        work = self._sis_path(gs.JOB_WORK_DIR, abspath=True)  # tasks run with the job's work dir as cwd
        os.makedirs(work, exist_ok=True)
        ranks = self._record_ranks(work)
        violations, report = verify_records(ranks, self._load(os.path.join(work, "reference.json")),
                                            num_shards=self.num_shards)
        with core.io.atomic_write(self.out_report.get_path(), "wt", encoding="utf-8") as f:
            f.write(report)
        write_variable(self.out_ok, not violations)
        if violations:
            listed = "\n".join(f"  {v}" for v in violations[:NUM_LISTED])
            raise ShardingVerificationError(
                f"{len(violations)} sharding violations (full report: {self.out_report.get_path()}); "
                f"the first {min(len(violations), NUM_LISTED)}:\n{listed}")

    def _record_ranks(self, work: str) -> List[Dict[str, Any]]:
        """One RETURNN process per rank, one after the other (rank 0 also writes the reference);
        their records, and a line on stdout per rank."""
        source = self._write_source(work)
        python = self._path_str(self.returnn_python_exe) or sys.executable
        roots = ([self._path_str(self.returnn_root)] if self.returnn_root is not None else []) + \
            import_roots(self.train_dataset)
        ranks = []
        for rank in range(self.num_shards):
            start = time.monotonic()
            out = os.path.join(work, f"rank-{rank}.json")
            cmd = [python, "-m", "i6_shard.returnn_ext.verify", *source, "--rank", str(rank),
                   "--num-shards", str(self.num_shards), "--epochs", ",".join(map(str, self.epochs)), "--output", out]
            if rank == 0:
                cmd += ["--reference", os.path.join(work, "reference.json")]
            _run_rank(cmd, rank=rank, num_shards=self.num_shards, env=pythonpath_env(roots), cwd=work)
            ranks.append(self._load(out))
            print(f"i6_shard verify: rank {rank} of {self.num_shards} read {len(self.epochs)} sub-epochs in "
                  f"{time.monotonic() - start:.1f}s", flush=True)
        return ranks

    @staticmethod
    def _path_str(path: Optional[Union[tk.Path, str]]) -> Optional[str]:
        return path.get_path() if isinstance(path, tk.Path) else path

    @staticmethod
    def _load(path: str) -> Dict[str, Any]:
        with open(path, "rt", encoding="utf-8") as f:
            return json.load(f)

    def _write_source(self, work: str) -> List[str]:
        """Arguments naming the dataset for the runner; a dict is pickled with plain path strings."""
        if not isinstance(self.train_dataset, dict):
            return ["--config", self._path_str(self.train_dataset)]
        path = os.path.join(work, "dataset.pkl")
        with core.io.atomic_write(path, "wb") as f:
            pickle.dump(instantiate(self.train_dataset), f, protocol=4)
        return ["--dataset-pickle", path]

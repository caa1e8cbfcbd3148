"""VerifyShardingJob: runs the real RETURNN once per rank and proves that a sharded
DistributeFilesDataset reads every sequence exactly once per full epoch, as planned."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import numbers
import os
import pickle
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from sisyphus import Job, gs, tk

from i6_shard import core
from i6_shard.core.reporting import verify_records

from .util import (
    RQMT_ARGS,
    PlainNumbersJobType,
    check_absolute,
    check_absolute_leaves,
    check_picklable_functions,
    check_rqmt_args,
    default_returnn_python_exe,
    default_returnn_root,
    import_roots,
    instantiate,
    path_str,
    plain_numbers,
    pythonpath_env,
    round_up,
    sized_task,
    write_variable,
)

__all__ = ["VerifyShardingJob"]

#: Violations listed in the error message of a failed verification.
NUM_LISTED = 10
#: Last lines of a failed rank's stderr put into the error.
STDERR_TAIL_LINES = 20
#: Ranks whose RETURNN processes run at the same time (each starts its DataLoader and sub-epoch worker processes,
#: whose start-up is most of a rank's time), bounded by the CPUs the task has.
MAX_PARALLEL_RANKS = 4


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
        return (
            f"the RETURNN process of rank {self.rank} of {self.num_shards} failed with exit status "
            f"{self.returncode}; the end of its stderr:\n{self.stderr}"
        )


def _run_rank(cmd: List[str], *, rank: int, num_shards: int, env: Dict[str, str], cwd: str) -> None:
    """Run one rank's RETURNN process; its stderr goes on to ours, and its tail into the error."""
    tail = collections.deque(maxlen=STDERR_TAIL_LINES)
    with subprocess.Popen(cmd, env=env, cwd=cwd, stderr=subprocess.PIPE, text=True, errors="replace") as proc:
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line)
    if proc.returncode:
        raise RankFailedError(proc.returncode, cmd, rank=rank, num_shards=num_shards, stderr_tail="".join(tail))


def _is_int(value: Any) -> bool:
    """An integer (numpy ones too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _normalize_epochs(epochs: Union[int, Sequence[int]]) -> List[int]:
    """The sub-epochs to read, as sorted distinct Python ints (numpy integers are converted)."""
    if _is_int(epochs):
        if epochs < 1:
            raise ValueError(f"epochs={epochs!r} must be >= 1 (the first N sub-epochs) or a list of sub-epochs")
        return list(range(1, int(epochs) + 1))
    if not isinstance(epochs, (list, tuple)) or not epochs:
        raise TypeError(f"epochs={epochs!r} must be an int N (sub-epochs 1..N) or a non-empty list of sub-epochs")
    for e in epochs:
        if not _is_int(e) or e < 1:
            raise ValueError(f"epochs contains {e!r}; sub-epochs are ints >= 1, as RETURNN counts them")
    return sorted(set(map(int, epochs)))


def _check_returnn_paths(returnn_python_exe: Any, returnn_root: Any) -> None:
    for name, value in (("returnn_python_exe", returnn_python_exe), ("returnn_root", returnn_root)):
        if value is not None and not isinstance(value, (tk.Path, str)):
            raise TypeError(
                f"{name}={value!r} has type {type(value).__name__}; give a tk.Path (as i6_core's jobs "
                "take it), an absolute str, or None (gs.RETURNN_PYTHON_EXE / gs.RETURNN_ROOT, else "
                "the Python running Sisyphus and its installed RETURNN)"
            )
    check_absolute(returnn_root, name="returnn_root")
    if isinstance(returnn_python_exe, str) and os.sep in returnn_python_exe:  # else a command on PATH
        check_absolute(returnn_python_exe, name="returnn_python_exe")


def verify_rqmt(*, num_shards: int, num_epochs: int) -> Dict[str, Union[int, float]]:
    """The request of the verification task, which runs a RETURNN process per rank, up to
    :data:`MAX_PARALLEL_RANKS` at a time (a CPU each), each reading ``num_epochs`` sub-epochs of its share: an hour,
    plus a minute per rank and sub-epoch spread over the CPUs (its start and its share of the data; give
    ``time_rqmt`` for more data), 2 GB and 1 GB per RETURNN process at a time (one that reads a rank's share holds
    well under 1 GB), so that a 2-rank verification fits a 2-CPU, 4 GB machine (Sisyphus never starts a task that
    asks for more than its engine has).

    >>> verify_rqmt(num_shards=8, num_epochs=40)
    {'cpu': 4, 'mem': 6, 'time': 2.5}
    >>> verify_rqmt(num_shards=2, num_epochs=4)
    {'cpu': 2, 'mem': 4, 'time': 1.25}
    """
    cpu = min(num_shards, MAX_PARALLEL_RANKS)
    return {"cpu": cpu, "mem": 2 + cpu, "time": round_up(1 + num_shards * num_epochs / 60 / cpu, step=0.25)}


def _checked_args(args: Dict[str, Any]) -> Tuple[Any, int, List[int], Dict[str, Union[int, float]]]:
    """Every argument checked (Sisyphus hashes them before ``__init__`` runs, so ``hash`` calls this
    too): the dataset (numpy numbers converted), num_shards, the sorted sub-epochs, the requests given."""
    train_dataset = args["train_dataset"]
    if not isinstance(train_dataset, (dict, tk.Path, str)):
        raise TypeError(
            f"train_dataset must be a DistributeFilesDataset dict or a RETURNN config path, "
            f"got {type(train_dataset).__name__}"
        )
    config_opts = _checked_config_opts(args.get("config_opts"))
    key_path = _checked_key_path(args.get("key_path"))
    num_shards, epochs = _ranks_and_epochs(train_dataset, args, config_opts=config_opts, key_path=key_path)
    num_shards = core.pure.check_int(num_shards, name="num_shards", minimum=1, hint="the number of ranks")
    if isinstance(train_dataset, dict):
        check_picklable_functions(train_dataset, where="train_dataset")
        train_dataset = plain_numbers(train_dataset)
        _check_returnn_paths(args.get("returnn_python_exe"), args.get("returnn_root"))
        _check_dataset_dict(
            train_dataset,
            num_shards=num_shards,
            config_opts=config_opts,
            key_path=key_path,
            returnn_version=_release_of(args.get("returnn_root")),
        )
    elif config_opts is not None:
        raise ValueError("config_opts is for a train_dataset dict; a RETURNN config file holds its own options")
    check_absolute(train_dataset, name="train_dataset")
    epochs = _normalize_epochs(epochs)
    _check_returnn_paths(args.get("returnn_python_exe"), args.get("returnn_root"))
    given = check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    return train_dataset, num_shards, epochs, given


def _ranks_and_epochs(
    train_dataset: Any, args: Dict[str, Any], *, config_opts: Any, key_path: Optional[Tuple[Any, ...]]
) -> Tuple[Any, Any]:
    """``num_shards`` and ``epochs`` as given; where left out (None), those of the ``ShardPlanJob`` the dataset
    reads its bins from (``sharded_files_dataset(files, plan=job)``): its ranks and the training's sub-epochs."""
    from i6_shard.returnn_config.plan import named_plan_job
    from i6_shard.returnn_config.reader import find_distribute_files_datasets

    num_shards, epochs = args.get("num_shards"), args.get("epochs")
    named = None
    if isinstance(train_dataset, dict):
        records = find_distribute_files_datasets(train_dataset, config=config_opts)
        named = named_plan_job([r for r in records if key_path is None or r.key_path == key_path])
    if named is not None and num_shards is not None and num_shards != named[1]:
        raise ValueError(
            f"num_shards={num_shards!r}, but the dataset reads its bins from {named[0]}, planned for "
            f"num_shards={named[1]}: leave num_shards out (the plan job states it)"
        )
    if num_shards is not None and epochs is not None:
        return num_shards, epochs
    if named is None:
        missing = " and ".join(name for name, v in (("num_shards", num_shards), ("epochs", epochs)) if v is None)
        raise ValueError(
            f"give {missing}: train_dataset reads its bins from no ShardPlanJob to take them from "
            "(sharded_files_dataset(files, plan=job) names one)"
        )
    _, plan_ranks, plan_epochs = named
    return (plan_ranks if num_shards is None else num_shards), (plan_epochs if epochs is None else epochs)


def _checked_config_opts(config_opts: Any) -> Optional[Dict[str, Any]]:
    if config_opts is None:
        return None
    if not isinstance(config_opts, dict):
        raise TypeError(
            f"config_opts={config_opts!r} must be a dict of RETURNN config options (e.g. "
            "{'torch_distributed': {...}, 'behavior_version': 24}) or None"
        )
    opts = plain_numbers(config_opts)
    try:
        json.dumps(opts)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"config_opts must hold JSON values only (the RETURNN processes get them as JSON): {exc}")
    return opts


def _checked_key_path(key_path: Any) -> Optional[Tuple[Any, ...]]:
    if key_path is None:
        return None
    if not isinstance(key_path, (list, tuple)) or not all(isinstance(k, (str, int)) for k in key_path):
        raise TypeError(
            f"key_path={key_path!r} must be a list of keys into train_dataset, e.g. "
            "['datasets', 'asr'], or None for its only DistributeFilesDataset"
        )
    return tuple(key_path)


def _release_of(returnn_root: Any) -> Optional[str]:
    """The RETURNN release at ``returnn_root`` where it can be known when the graph is built (None: the newest's
    rules apply)."""
    from i6_shard.returnn_config.checks import returnn_version_info

    return None if returnn_root is None else returnn_version_info(returnn_root)[0]


def _check_dataset_dict(
    dataset: Dict[str, Any],
    *,
    num_shards: int,
    config_opts: Optional[Dict[str, Any]] = None,
    key_path: Optional[Tuple[Any, ...]] = None,
    returnn_version: Optional[str] = None,
) -> None:
    """What can be checked before RETURNN runs, on the DistributeFilesDataset the reader finds in the
    dict (at its top or inside wrappers), read as RETURNN ``returnn_version`` reads it (its DataLoader workers shard
    again or not): one to check, the keys RETURNN requires, a setup RETURNN would not run, absolute paths, and (for an
    inline list) enough files for every rank and sub-epoch."""
    from i6_shard.returnn_config.reader import find_distribute_files_datasets

    records = find_distribute_files_datasets(
        dataset, num_ranks=num_shards, config=config_opts, returnn_version=returnn_version
    )
    found = [list(r.key_path) for r in records]
    if key_path is not None:
        records = [r for r in records if r.key_path == key_path]
    if len(records) != 1:
        if not found:
            cls = dataset.get("class")
            raise ValueError(
                f"train_dataset (class {getattr(cls, '__qualname__', cls)!r}) holds no "
                "DistributeFilesDataset; set 'class': 'DistributeFilesDataset' (or a subclass of it); "
                "VerifyShardingJob checks one: give the dict exactly as the training uses it (see "
                "i6_shard.returnn_config.sharded_files_dataset)"
            )
        raise ValueError(
            f"train_dataset holds DistributeFilesDatasets at {found} (key paths into the dict); "
            f"{'none is at key_path=' + repr(list(key_path)) if key_path is not None else 'several'}: "
            "name the one to verify with key_path"
        )
    info = records[0]
    where = f"train_dataset{''.join(f'[{k!r}]' for k in info.key_path)}"
    cls = info.dataset.get("class")
    if isinstance(cls, type) and not any(c.__name__ == "DistributeFilesDataset" for c in cls.__mro__):
        raise ValueError(
            f"{where} has class {cls.__qualname__}, not a subclass of DistributeFilesDataset; "
            "VerifyShardingJob checks a DistributeFilesDataset"
        )
    for key in ("files", "get_sub_epoch_dataset"):
        if key not in info.dataset:
            raise ValueError(
                f"{where} has no {key!r}, which DistributeFilesDataset requires; give the dict "
                "exactly as the training uses it (see i6_shard.returnn_config.sharded_files_dataset)"
            )
    if not callable(info.dataset["get_sub_epoch_dataset"]):
        raise TypeError(
            f"{where}['get_sub_epoch_dataset'] is {info.dataset['get_sub_epoch_dataset']!r}; it must "
            "be a function from a list of file trees to a dataset dict"
        )
    _check_files(info, where)
    _check_plan_engine(info, where)


def _check_files(info, where: str) -> None:
    """The dataset's ``files`` as DistributeFilesDataset takes them, absolute, and (an inline list) enough of them."""
    files = info.dataset["files"]
    if isinstance(files, tuple):
        raise TypeError(f"{where}['files'] is a tuple; DistributeFilesDataset takes a list, a list file or a callable")
    if info.returnn_fails:
        raise ValueError(f"{where}: RETURNN would fail on this setup: {info.returnn_fails}")
    if info.files_kind == "invalid":
        raise TypeError(
            f"{where}['files'] is {type(files).__name__}; give a list of file trees, a list file "
            "(.txt/.json/.py) or a module-level function returning the list"
        )
    check_absolute(files, name=f"{where}['files']")
    if isinstance(files, list):
        check_absolute_leaves(files, name=f"{where}['files']")
        partition_epoch = info.partition_epoch if isinstance(info.partition_epoch, int) else 1
        core.pure.check_enough_files(len(files), num_shards=info.num_shards(), partition_epoch=partition_epoch)


def _check_plan_engine(info, where: str) -> None:
    """A dataset that reads its bins from a ``ShardPlanJob`` simulated under batching and sync refuses, at start-up,
    a config that states others (:func:`~i6_shard.returnn_config.checks.plan_engine_problems`); the verify job runs
    it under ``config_opts``, which must then state the training's."""
    from i6_shard.returnn_config.checks import plan_engine_problems

    job = getattr(info.dataset.get("plan"), "creator", None)
    request = getattr(job, "plan_request", None)
    problems = plan_engine_problems(info, request) if isinstance(request, core.pure.PlanRequest) else []
    if problems:
        raise ValueError(
            f"{where} reads its bins from the plan of {job}, which its RETURNN processes would refuse under "
            f"config_opts: " + "; ".join(problems) + ". Give config_opts the training's config (its batch_size, "
            "max_seqs, max_seq_length, accum_grad_multiple_step and torch_distributed)"
        )


class VerifyShardingJob(Job, metaclass=PlainNumbersJobType):
    """Runs the real RETURNN once per rank (``__debug_dummy_distributed_rank_and_size``), reads
    the given sub-epochs of the training dataset and checks, per full epoch, that every sequence
    is read by exactly one rank exactly once, that each rank read exactly the sequences of its
    files, and that the files per rank and sub-epoch equal the i6_shard plan for the dataset's
    own files, sizes and settings. The job fails listing the first violations. It prints a
    line per rank; a rank whose RETURNN process fails raises RankFailedError, whose message
    ends with the last lines of that process's stderr.

    Outputs: out_report (text), out_ok (tk.Variable, True when every check passed).
    """

    # As i6_core hashes them: the paths as given; None (the default, resolved from gs) hashes as
    # before returnn_python_exe was hashed at all.
    __sis_hash_exclude__ = {"returnn_python_exe": None, "config_opts": None, "key_path": None}

    def __init__(
        self,
        train_dataset: Union[Dict[str, Any], tk.Path, str],
        *,
        num_shards: Optional[int] = None,
        epochs: Union[int, Sequence[int], None] = None,
        config_opts: Optional[Dict[str, Any]] = None,
        key_path: Optional[Sequence[Union[str, int]]] = None,
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
        returnn_python_exe: Optional[Union[tk.Path, str]] = None,
        returnn_root: Optional[Union[tk.Path, str]] = None,
    ):
        """
        :param train_dataset: the DistributeFilesDataset dict the training uses (its
            ``get_sub_epoch_dataset`` a module-level function or a ``functools.partial`` of one,
            so that it pickles), or a RETURNN config file whose ``train`` is that dataset
        :param num_shards: number of ranks to check (None: the ``num_shards`` of the ``ShardPlanJob`` the dataset
            reads its bins from, ``sharded_files_dataset(files, plan=job)``)
        :param epochs: sub-epochs to read (1-based): an int N for 1..N, or a list; give whole
            full epochs (multiples of partition_epoch) to check exactly-once reading (None: the training's
            ``num_epochs`` that plan job was planned for)
        :param config_opts: for a dataset dict: the RETURNN config options the training runs it under
            that decide its sharding (``torch_distributed``, ``behavior_version``,
            ``dataset_random_seed_offset``, ...); None: a torch distributed training with RETURNN's defaults
        :param key_path: where the DistributeFilesDataset is inside a wrapping dataset dict, e.g.
            ``["datasets", "asr"]``; None: the only one in the dict
        :param time_rqmt: hours (default: sized from ranks x sub-epochs, see :func:`verify_rqmt`); not hashed
        :param mem_rqmt: GB (default 4); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        :param returnn_python_exe: the Python that runs RETURNN (a tk.Path, an absolute str, or a command
            name on PATH); None: as i6_core's jobs, ``gs.RETURNN_PYTHON_EXE``, else the Python that runs
            Sisyphus. Hashed as given, as i6_core hashes it (None, the default, as before)
        :param returnn_root: RETURNN checkout put first on PYTHONPATH; None: as i6_core's jobs,
            ``gs.RETURNN_ROOT``, else the RETURNN installed for that Python. Hashed as given
        """
        self.train_dataset, self.num_shards, self.epochs, self.given_rqmt = _checked_args(
            dict(
                train_dataset=train_dataset,
                num_shards=num_shards,
                epochs=epochs,
                config_opts=config_opts,
                key_path=key_path,
                time_rqmt=time_rqmt,
                mem_rqmt=mem_rqmt,
                cpu_rqmt=cpu_rqmt,
                returnn_python_exe=returnn_python_exe,
                returnn_root=returnn_root,
            )
        )
        self.config_opts = _checked_config_opts(config_opts)
        self.key_path = _checked_key_path(key_path)
        self.returnn_python_exe = default_returnn_python_exe(returnn_python_exe)
        self.returnn_root = default_returnn_root(returnn_root)

        self.out_report = self.output_path("report.txt")
        self.out_ok = self.output_var("ok")

    @classmethod
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: every check happens here, and only plain values are hashed.
        d = dict(parsed_args)
        d["train_dataset"], d["num_shards"], epochs, _ = _checked_args(d)
        d["config_opts"] = _checked_config_opts(d.get("config_opts"))
        if d.get("key_path") is not None:
            d["key_path"] = list(_checked_key_path(d["key_path"]))
        # epochs=4 and [1, 2, 3, 4] (in any order) are one job; 4 is how the first N were always hashed.
        d["epochs"] = len(epochs) if epochs == list(range(1, len(epochs) + 1)) else epochs
        for name in RQMT_ARGS:
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        sized = verify_rqmt(num_shards=self.num_shards, num_epochs=len(self.epochs))
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=False)

    def run(self):
        work = self._sis_path(gs.JOB_WORK_DIR, abspath=True)  # tasks run with the job's work dir as cwd
        os.makedirs(work, exist_ok=True)
        ranks = self._record_ranks(work)
        violations, report = verify_records(
            ranks, self._load(os.path.join(work, "reference.json")), num_shards=self.num_shards
        )
        with core.io.atomic_write(self.out_report.get_path(), "wt", encoding="utf-8") as f:
            f.write(report)
        write_variable(self.out_ok, not violations)
        if violations:
            listed = "\n".join(f"  {v}" for v in violations[:NUM_LISTED])
            raise ShardingVerificationError(
                f"{len(violations)} sharding violations (full report: {self.out_report.get_path()}); "
                f"the first {min(len(violations), NUM_LISTED)}:\n{listed}"
            )

    def _record_ranks(self, work: str) -> List[Dict[str, Any]]:
        """One RETURNN process per rank, up to the task's CPUs at a time (:func:`verify_rqmt`; rank 0 also writes the
        reference); their records, and a line on stdout per rank (its time and the RETURNN release it imported), in
        rank order. Where a rank fails, the others are
        run to their end, and the lowest failed rank's error is raised."""
        env = pythonpath_env(
            ([path_str(self.returnn_root)] if self.returnn_root is not None else []) + import_roots(self.train_dataset)
        )
        cmds = self._rank_commands(work)
        cpus = self.given_rqmt.get("cpu") or verify_rqmt(num_shards=self.num_shards, num_epochs=len(self.epochs))["cpu"]
        parallel = max(1, min(self.num_shards, int(cpus), len(os.sched_getaffinity(0))))

        def run(rank: int) -> Tuple[float, Optional[RankFailedError]]:
            start = time.monotonic()
            try:
                _run_rank(cmds[rank], rank=rank, num_shards=self.num_shards, env=env, cwd=work)
            except RankFailedError as exc:
                return time.monotonic() - start, exc
            return time.monotonic() - start, None

        with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(pool.map(run, range(self.num_shards)))
        failed = [exc for _, exc in results if exc is not None]
        if failed:
            raise failed[0]
        records = [self._load(os.path.join(work, f"rank-{rank}.json")) for rank in range(self.num_shards)]
        for rank, (seconds, _) in enumerate(results):
            print(
                f"i6_shard verify: rank {rank} of {self.num_shards} read {len(self.epochs)} sub-epochs in "
                f"{seconds:.1f}s with RETURNN {records[rank]['settings'].get('returnn_version', '?')}",
                flush=True,
            )
        return records

    def _rank_commands(self, work: str) -> List[List[str]]:
        """The command of each rank's RETURNN process (rank 0 also writes the per-file reference)."""
        source = self._write_source(work)
        python = path_str(self.returnn_python_exe) or sys.executable
        cmds = []
        for rank in range(self.num_shards):
            cmd = [python, "-m", "i6_shard.returnn_ext.verify", *source, "--rank", str(rank)]
            cmd += ["--num-shards", str(self.num_shards), "--epochs", ",".join(map(str, self.epochs))]
            cmd += ["--output", os.path.join(work, f"rank-{rank}.json")]
            if self.config_opts is not None:
                cmd += ["--config-json", json.dumps(self.config_opts, sort_keys=True)]
            if self.key_path is not None:
                cmd += ["--key-path", json.dumps(["train", *self.key_path])]
            if rank == 0:
                cmd += ["--reference", os.path.join(work, "reference.json")]
            cmds.append(cmd)
        return cmds

    @staticmethod
    def _load(path: str) -> Dict[str, Any]:
        with open(path, "rt", encoding="utf-8") as f:
            return json.load(f)

    def _write_source(self, work: str) -> List[str]:
        """Arguments naming the dataset for the runner; a dict is pickled with plain path strings."""
        if not isinstance(self.train_dataset, dict):
            return ["--config", path_str(self.train_dataset)]
        path = os.path.join(work, "dataset.pkl")
        with core.io.atomic_write(path, "wb") as f:
            pickle.dump(instantiate(self.train_dataset), f, protocol=4)
        return ["--dataset-pickle", path]

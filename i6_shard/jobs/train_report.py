"""TrainReportJob: what a finished training really read and dropped, per sub-epoch and rank,
measured from RETURNN's own logs and compared with the plan (the same outputs as
``python -m i6_shard train-report``)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core import reporting
from i6_shard.core.io import data_key_limit
from i6_shard.returnn_config.reader import read_engine, read_sync_mode

from .util import RQMT_ARGS, check_absolute, check_rqmt_args, path_str, round_up, sized_task, write_variable

__all__ = ["TrainReportJob"]

#: Logs up to this many bytes in all are read in a mini task (about 10 s of parsing).
MINI_TASK_MAX_LOG_BYTES = 40 * 10**6


def training_world_size(training: Any) -> int:
    """The ranks an i6_core ``ReturnnTrainingJob`` starts (``_get_run_cmd``): ``horovod_num_processes`` (mpirun's
    ``-np``), times ``multi_node_slots`` under torchrun, which starts ``--nproc-per-node=horovod_num_processes`` on
    each of its ``--nnodes=multi_node_slots`` nodes; 1 without either."""
    num_ranks = int(getattr(training, "horovod_num_processes", None) or 1)
    if getattr(training, "distributed_launch_cmd", None) == "torchrun":
        num_ranks *= int(getattr(training, "multi_node_slots", None) or 1)
    return num_ranks


def training_log_files(training: Any) -> List[tk.Path]:
    """The log files RETURNN writes in an i6_core ``ReturnnTrainingJob``'s work dir: one per rank,
    ``returnn.torch-distrib-<rank>-<size>.log`` under torch distributed (i6_core's ``log`` is
    ``["./returnn.log"]`` and ``horovod_num_processes`` ranks), else ``returnn.log``. They are paths
    of the training job (hashed by its id), so a report depends on that training.

    :raises TypeError: if ``training`` is not such a job
    :raises ValueError: if its config logs to no file
    """
    config = getattr(training, "returnn_config", None)
    if not hasattr(training, "out_learning_rates") or config is None:
        raise TypeError(
            f"training={training!r} is not an i6_core ReturnnTrainingJob; pass its log files as log_files=[...] instead"
        )
    logs = config.post_config.get("log", config.config.get("log"))
    logs = [logs] if isinstance(logs, str) else list(logs or [])
    logs = [name for name in logs if isinstance(name, str) and name != "stdout"]
    if not logs:
        raise ValueError(
            "the training's config logs to no file (its 'log' is empty or only 'stdout'); "
            "set log = ['./returnn.log'] (i6_core's default)"
        )
    name = os.path.normpath(logs[0])
    merged = {**config.config, **config.post_config}
    num_ranks = training_world_size(training)
    if merged.get("torch_distributed") is not None:
        stem, ext = os.path.splitext(name)
        names = [f"{stem}.torch-distrib-{r}-{num_ranks}{ext}" for r in range(num_ranks)]
    else:
        names = [name]
    # A path of the training job, relative to its output dir: RETURNN runs in the job's work dir.
    return [tk.Path(os.path.join("..", "work", n), creator=training) for n in names]


#: Memory per byte of the logs, beside the 1 GB: the catalog of distinct file names holds at most 2**20 of them
#: (``MAX_CATALOG_FILES``, about 500 bytes each, beside a name's own characters: lines naming further ones are noted,
#: not read), so it stays in the 1 GB whatever the logs (logs of distinct names: 554.6 MiB at 48 MB before the bound,
#: 563 MiB at 120 MB with it). The records, their file lists (as int32 ids) and the step lines wait in a scratch file,
#: not in memory (1,047,552 records with a files line each, a 183 MiB log: 62.5 MiB, as 65,536).
_BYTES_PER_LOG_BYTE = 2


def train_report_rqmt(*, log_bytes: Optional[int]) -> Tuple[Dict[str, Union[int, float]], bool]:
    """The report task's request sized from the bytes of the logs, and whether they are few enough for a
    mini task; unknown ``log_bytes`` (a log that cannot be stat-ed): a mini task, whose run then says what
    is wrong. The rule (docs/reliability.md): 1 GB, plus two bytes per log byte (the distinct file names, at most
    2**20 held, about 500 bytes each; the records, at most 2**20, their file lists and the step lines wait in a scratch
    file in ``TMPDIR``, about 150 bytes a record and 24 a step line; measured: 1,047,552 records from a 183 MiB torchrun log with a "using
    files" line each peaked at 62.5 MiB, as 65,536 did; ``benchmarks/bench_train_report_memory.py``); and about 10
    times the time of 4 MB/s.

    >>> train_report_rqmt(log_bytes=2 * 10**9)
    ({'cpu': 1, 'mem': 5, 'time': 1.75}, False)
    >>> train_report_rqmt(log_bytes=40 * 10**6)[0]["mem"]
    2
    """
    if log_bytes is None:
        return {"cpu": 1, "mem": 2, "time": 1}, True
    mem_gb = 1 + _BYTES_PER_LOG_BYTE * log_bytes / 1e9
    hours = max(0.5, 0.25 + log_bytes / 4e6 * 10 / 3600)
    return {
        "cpu": 1,
        "mem": round_up(mem_gb, step=1),
        "time": round_up(hours, step=0.25),
    }, log_bytes <= MINI_TASK_MAX_LOG_BYTES


def _log_bytes(log_files: Sequence[Any]) -> Optional[int]:
    """The bytes of the logs in all, None if one cannot be stat-ed."""
    try:
        return sum(os.stat(path_str(p)).st_size for p in log_files)
    except (OSError, TypeError, ValueError):
        return None


def _check_paths(log_files: Any) -> List[Union[tk.Path, str]]:
    if isinstance(log_files, (str, tk.Path)) or not isinstance(log_files, (list, tuple)) or not log_files:
        raise TypeError(
            f"log_files={log_files!r} must be a non-empty list of tk.Path or absolute str: the per-rank "
            "logs, e.g. training_log_files(training) or TrainReportJob.for_training(training)"
        )
    for idx, path in enumerate(log_files):
        if not isinstance(path, (str, tk.Path)):
            raise TypeError(f"log_files[{idx}]={path!r} must be a tk.Path or an absolute str")
        check_absolute(path, name=f"log_files[{idx}]")
    return list(log_files)


class TrainReportJob(Job):
    """Measures from a training's own RETURNN logs, per sub-epoch and rank: the files given (against
    the plan), the sequences and frames consumed out of those available, the share dropped, the
    steps; per full epoch the passes made; and raises alarms (files other than planned, sequences
    read twice or never, steps far below what the files give -- RETURNN #1738 --, too much dropped).

    Build it with :meth:`for_training` from an i6_core ``ReturnnTrainingJob`` (the report then runs
    after the training), or give the logs. The training needs ``log_verbosity=5`` and
    ``log_batch_size=True`` (``i6_shard.returnn_config.training_job_kwargs`` sets both, unhashed).

    Given the plan, the plan's simulated steps (``steps_taken``, ``steps_exact`` of the ``summary.json`` beside
    ``plan.npz``) stand beside the logged steps per (sub-epoch, rank), and each difference is an alarm.

    Outputs: out_report (text), out_summary (json), out_records (records.tsv: one tab-separated line per (sub-epoch,
    rank) record with the logged and planned steps, always; ``summary.json`` lists them too up to
    ``MAX_LISTED_RECORDS``), out_plot (png, with ``plot=True``),
    out_dropped_fraction (tk.Variable: mean share of the frames dropped per sub-epoch, None if unknown),
    out_num_alarms (tk.Variable).
    """

    # Options added later go here with the value that reproduces the old behavior.
    __sis_hash_exclude__ = {
        "after": None,
        "reduce_type": core.PLAN_OPTION_DEFAULTS["reduce_type"],
        "param_sync_step": None,
        "multi_epoch": None,
        "max_seq_length": None,
    }

    def __init__(
        self,
        log_files: Sequence[Union[tk.Path, str]],
        *,
        plan: Optional[Union[tk.Path, str]] = None,
        file_lengths: Optional[Union[tk.Path, str]] = None,
        read_hdf: bool = True,
        partition_epoch: Optional[int] = None,
        max_dropped: float = reporting.DEFAULT_MAX_DROPPED,
        min_steps_ratio: float = reporting.DEFAULT_MIN_STEPS_RATIO,
        dataset_name: str = "train",
        after: Optional[tk.Path] = None,
        plot: bool = True,
        reduce_type: str = core.PLAN_OPTION_DEFAULTS["reduce_type"],
        param_sync_step: Optional[int] = None,
        multi_epoch: Optional[int] = None,
        max_seq_length: Optional[Union[int, Dict[str, int]]] = None,
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param log_files: RETURNN's per-rank logs (or one torchrun stdout with rank prefixes)
        :param plan: ShardPlanJob.out_plan, to compare the files with
        :param file_lengths: JSON ``{file key: [num_seqs, num_frames]}``; else (and for keys it lacks)
            the HDF files the logs name are read (``read_hdf``)
        :param read_hdf: read the HDF files' ``seqLengths`` for the sequences and frames per file
        :param partition_epoch: without a plan (else inferred from the logged files)
        :param max_dropped: alarm above this mean dropped share of the frames per sub-epoch
        :param min_steps_ratio: alarm where a sub-epoch's steps are below this share of what its files give
        :param dataset_name: the DistributeFilesDataset's name in the log (its config key)
        :param after: a path that must exist first, e.g. the training's out_learning_rates (only a dependency)
        :param plot: write out_plot (needs matplotlib); not hashed
        :param reduce_type: the training's ``torch_distributed`` ``reduce_type``, which the expected steps assume:
            "grad" (the default) or "param" (the others run on to their next sync; :meth:`for_training` reads it
            from the training's config)
        :param param_sync_step: with ``reduce_type="param"``: ``torch_distributed``'s ``param_sync_step``
        :param multi_epoch: a wrapper's (MultiEpochDataset) ``multi_epoch``, the DistributeFilesDataset's epochs per
            sub-epoch (default: inferred from the logs)
        :param max_seq_length: the training's ``max_seq_length`` (:meth:`for_training` reads it from the config):
            its removals are shown apart from the dropped share
        :param time_rqmt: hours (default: sized from the bytes of the logs, see :func:`train_report_rqmt`;
            a mini task up to ``MINI_TASK_MAX_LOG_BYTES`` unless a request is given); not hashed
        :param mem_rqmt: GB (default: sized as time_rqmt); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        """
        self.log_files = _check_paths(log_files)
        for name, path in (("plan", plan), ("file_lengths", file_lengths)):
            if path is not None:
                check_absolute(path, name=name)
        self.plan = plan
        self.file_lengths = file_lengths
        self.read_hdf = core.pure.check_bool(read_hdf, name="read_hdf")
        self.partition_epoch = core.pure.check_optional_int(partition_epoch, name="partition_epoch", minimum=1)
        if not 0.0 <= max_dropped <= 1.0:
            raise ValueError(f"max_dropped={max_dropped!r} must be a share in [0, 1], e.g. 0.05")
        if not 0.0 < min_steps_ratio <= 1.0:
            raise ValueError(f"min_steps_ratio={min_steps_ratio!r} must be in (0, 1], e.g. 0.75")
        self.max_dropped = float(max_dropped)
        self.min_steps_ratio = float(min_steps_ratio)
        self.dataset_name = dataset_name
        self.after = after
        self.plot = core.pure.check_bool(plot, name="plot")
        sync = core.SyncMode(reduce_type, param_sync_step)
        self.reduce_type, self.param_sync_step = sync.reduce_type, sync.param_sync_step
        self.multi_epoch = core.pure.check_optional_int(multi_epoch, name="multi_epoch", minimum=1)
        if max_seq_length is not None:
            data_key_limit(max_seq_length, name="max_seq_length")
        self.max_seq_length = max_seq_length
        self.given_rqmt = check_rqmt_args(time_rqmt=time_rqmt, mem_rqmt=mem_rqmt, cpu_rqmt=cpu_rqmt)

        self.out_report = self.output_path(reporting.TRAIN_REPORT_FILE)
        self.out_summary = self.output_path(reporting.TRAIN_SUMMARY_FILE)
        self.out_records = self.output_path(reporting.TRAIN_RECORDS_FILE)
        if self.plot:
            self.out_plot = self.output_path(reporting.TRAIN_PLOT_FILE)
        self.out_dropped_fraction = self.output_var("dropped_fraction")
        self.out_num_alarms = self.output_var("num_alarms")

    @classmethod
    def for_training(cls, training: Any, **kwargs) -> "TrainReportJob":
        """The report of an i6_core ``ReturnnTrainingJob``: its logs (:func:`training_log_files`),
        run once the training has finished (after its ``out_learning_rates``); the sync mode of the expected
        steps is the config's ``torch_distributed`` unless ``reduce_type`` is given, and the length filter its
        ``max_seq_length`` unless given."""
        logs = training_log_files(training)
        config = {**training.returnn_config.config, **training.returnn_config.post_config}
        engine = read_engine(config)  # the training's engine, one description, as the plan and the checks read it
        if "max_seq_length" not in kwargs:
            by_key = engine.max_seq_length_by_key
            kwargs["max_seq_length"] = engine.max_seq_length if by_key is None else by_key
        if "reduce_type" not in kwargs and "param_sync_step" not in kwargs:
            sync = read_sync_mode(config)  # (its sync: sync_mode_of the same description, junk refused)
            kwargs.update(reduce_type=sync.reduce_type, param_sync_step=sync.param_sync_step)
        return cls(logs, after=training.out_learning_rates, **kwargs)

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        d.pop("plot", None)
        # Sisyphus hashes before __init__ runs (and not again for a job it has): check the requests here.
        check_rqmt_args(**{name: d.pop(name, None) for name in RQMT_ARGS})
        return super().hash(d)

    def tasks(self):
        sized, mini = train_report_rqmt(log_bytes=_log_bytes(self.log_files))
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=mini)

    def run(self):
        summary = reporting.write_train_report(
            # normpath: the logs of a training are "<job>/output/../work/...", which needs no output dir this way
            [os.path.normpath(path_str(p)) for p in self.log_files],
            os.path.dirname(self.out_summary.get_path()),
            plan_path=path_str(self.plan),
            file_lengths_path=path_str(self.file_lengths),
            read_hdf=self.read_hdf,
            partition_epoch=self.partition_epoch,
            max_dropped=self.max_dropped,
            min_steps_ratio=self.min_steps_ratio,
            plot=self.plot,
            dataset_name=self.dataset_name,
            sync=core.SyncMode(self.reduce_type, self.param_sync_step),
            multi_epoch=self.multi_epoch,
            max_seq_length=self.max_seq_length,
            records_file=True,  # out_records, always
        )
        write_variable(self.out_dropped_fraction, summary["dropped_fraction"])
        write_variable(self.out_num_alarms, len(summary["alarms"]))

"""ShardPlanJob: which files each rank reads in each sub-epoch, with its statistics, report
and plot, as cached Sisyphus outputs (the same bytes as ``python -m i6_shard plan``)."""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
import math
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core.io import archive_entry_count, check_archive_path
from i6_shard.returnn_config.plan import training_plan_options
from i6_shard.returnn_config.reader import InexactPlanWarning

from .costs import ComputeFileCostsJob
from .sizes import ComputeFileSizesJob

from .util import (
    RQMT_ARGS,
    PlainNumbersJobType,
    check_absolute,
    check_rqmt_args,
    path_str,
    round_up,
    sized_task,
    write_variable,
)

__all__ = ["ShardPlanJob"]

#: Files x full epochs (x layouts: one per rank unsharded) up to which the plan runs as a mini task.
#: Measured on one core: 1M files x 20 full epochs (20M) plan, report and plot in 23 s, 0.5 GB peak.
MINI_TASK_MAX_WORK = 20_000_000
#: The job's arguments besides the plan options (core.PLAN_OPTIONS): (name, default, annotation, meaning).
_JOB_ARGS = (
    (
        "plot",
        True,
        "bool",
        "declare and write ``out_plot`` (the task fails if matplotlib is missing where it runs); ``plot=False`` is "
        "another job (hashed), ``True`` hashes as before the option existed",
    ),
    (
        "time_rqmt",
        None,
        "Optional[float]",
        "hours (default: sized from files x full epochs, see :func:`plan_rqmt`; a small plan runs as a mini task "
        "unless a request is given); not hashed",
    ),
    ("mem_rqmt", None, "Optional[float]", "GB (default: sized as time_rqmt); not hashed"),
    ("cpu_rqmt", None, "Optional[int]", "CPUs (default 1); not hashed"),
)
_FILE_SIZES_DOC = (
    "ComputeFileSizesJob.out_file_sizes (or ``python -m i6_shard sizes`` output), or a costs archive; a list of "
    "them: one corpus each, mixed by ``weights`` (the dataset's files are their lists in this order)"
)


def job_signature(options: Mapping[str, core.pure.PlanOption]) -> inspect.Signature:
    """``ShardPlanJob.__init__``'s signature (which Sisyphus binds the arguments by): ``file_sizes``, then every
    plan option of ``options`` by keyword, with its default, then the job's own arguments."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter(
            "file_sizes",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation="Union[tk.Path, str, Sequence[Union[tk.Path, str]]]",
        ),
    ]
    for name, o in options.items():
        annotation = "Optional[Union[tk.Path, str]]" if o.path else o.annotation
        params.append(
            inspect.Parameter(name, kw, annotation=annotation, **({} if o.required else {"default": o.default}))
        )
    params += [inspect.Parameter(name, kw, default=d, annotation=a) for name, d, a, _ in _JOB_ARGS]
    return inspect.Signature(params)


def job_docstring(options: Mapping[str, core.pure.PlanOption]) -> str:
    """``ShardPlanJob.__init__``'s docstring: each argument's meaning, the plan options' from ``options``."""
    lines = [f":param file_sizes: {_FILE_SIZES_DOC}"]
    lines += [f":param {name}: {o.help}" for name, o in options.items()]
    lines += [f":param {name}: {meaning}" for name, _, _, meaning in _JOB_ARGS]
    return "\n".join(lines)


def hash_exclude(options: Mapping[str, core.pure.PlanOption]) -> Dict[str, Any]:
    """``__sis_hash_exclude__``: each option added after the first jobs, at its default, hashes as if absent (so those
    jobs keep their ids); ``plot=False`` is hashed: it declares no out_plot, so it cannot share a job with True."""
    return {"plot": True, **{name: o.default for name, o in options.items() if not o.hashed_at_default}}


@dataclasses.dataclass(frozen=True)
class _Derived:
    """What a job's arguments make: its request, its plain values (attributes) and what it hashes."""

    request: core.PlanRequest
    plot: bool
    given_rqmt: Dict[str, Union[int, float]]
    values: Dict[str, Any]
    hashed: Dict[str, Any]


def _request(args: Mapping[str, Any], options: Mapping[str, core.pure.PlanOption]) -> core.PlanRequest:
    """The plan options among ``args`` as a validated PlanRequest; a path option as the path string it names."""
    given = {name: args[name] for name in options if name in args}
    paths = {name: path_str(given[name]) for name, o in options.items() if o.path and given.get(name) is not None}
    return core.PlanRequest.from_options(**{**given, **paths})


def derive(args: Mapping[str, Any], options: Mapping[str, core.pure.PlanOption] = core.PLAN_OPTIONS) -> _Derived:
    """Every argument checked (Sisyphus hashes them before ``__init__`` runs: ``hash`` and ``__init__`` both call
    this pure function), the request built from them, and each option's plain value: as the request holds it (a
    path option as given; one that ``keeps_none`` None where not given), hashed as its row says."""
    _check_file_sizes(args["file_sizes"])
    for name, o in options.items():
        if o.path and args.get(name) is not None:
            _check_archive_input(args[name], name=name, made_by=o.path + ", or None")
    request = _request(args, options)
    plot = core.pure.check_bool(args.get("plot", True), name="plot")
    given_rqmt = check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    values = {name: _plain(o, request, args.get(name)) for name, o in options.items()}
    hashed = {name: value for name, value in args.items() if name not in RQMT_ARGS}
    for name, o in options.items():
        if name in args:
            hashed[name] = values[name] if o.hash_read is None else o.hash_read(request)
    return _Derived(request, plot, given_rqmt, values, {**hashed, "plot": plot})


#: Set while ``for_training`` makes its job: the config reader has said the verdict (the request's) already, with
#: its other notes.
_VERDICT_SAID = contextvars.ContextVar("_VERDICT_SAID", default=False)


#: ShardPlanJob.__init__'s signature, built once from the table.
_SIGNATURE = job_signature(core.PLAN_OPTIONS)


def _arguments(file_sizes: Any, options: Mapping[str, Any]) -> Dict[str, Any]:
    """The job's arguments as Sisyphus parses them for ``hash``: bound to the signature, with the defaults."""
    bound = _SIGNATURE.bind(None, file_sizes, **options)
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if name != "self"}


def _plain(option: core.pure.PlanOption, request: core.PlanRequest, given: Any) -> Any:
    if option.path or (option.keeps_none and given is None):
        return given
    return option.read(request)


def plan_rqmt(*, num_files: Optional[int], settings: core.PlanSettings) -> Tuple[Dict[str, Union[int, float]], bool]:
    """The plan task's request sized from files x full epochs (x layouts), and whether it is small
    enough for a mini task; unknown ``num_files`` (an unreadable archive): a mini task, whose run
    then says what is wrong. Memory and time are about 4 and 10 times what was measured.

    >>> plan_rqmt(num_files=10_000_000, settings=core.PlanSettings(num_shards=8, partition_epoch=20, num_epochs=2000))
    ({'cpu': 1, 'mem': 43, 'time': 3.25}, False)
    """
    if num_files is None:
        return {"cpu": 1, "mem": 2, "time": 1}, True
    full_epochs = math.ceil((settings.num_epochs or settings.partition_epoch) / settings.partition_epoch)
    work = num_files * full_epochs * settings.num_layouts
    mem_gb = 1 + num_files * 1000 / 1e9 + work * 32 / 1e9  # keys and trees; orders and bounds of every full epoch
    hours = max(0.5, 0.25 + work * 10e-6 / 3600)
    return {"cpu": 1, "mem": round_up(mem_gb, step=1), "time": round_up(hours, step=0.25)}, work <= MINI_TASK_MAX_WORK


def _check_file_sizes(file_sizes: Any) -> None:
    """A sizes or costs archive input: a tk.Path or absolute str of an .npz, or a non-empty list of them (one
    corpus each)."""
    made_by = "ComputeFileSizesJob(...).out_file_sizes or the .npz of `python -m i6_shard sizes`"
    if isinstance(file_sizes, (list, tuple)):
        if not file_sizes:
            raise ValueError(f"file_sizes=[] names no archive: give one, or one per corpus ({made_by})")
        for idx, path in enumerate(file_sizes):
            _check_archive_input(path, name=f"file_sizes[{idx}]", made_by=made_by)
        return
    _check_archive_input(file_sizes, name="file_sizes", made_by=made_by)


def _archive_paths(file_sizes: Any) -> Union[str, List[str]]:
    """The archive's path, or the list of them (one corpus each)."""
    if isinstance(file_sizes, (list, tuple)):
        return [path_str(p) for p in file_sizes]
    return path_str(file_sizes)


def _check_archive_input(value: Any, *, name: str, made_by: str) -> None:
    """TypeError/ValueError naming ``name`` unless ``value`` is a tk.Path or an absolute str of an .npz archive."""
    if not isinstance(value, (tk.Path, str)):
        raise TypeError(f"{name}={value!r} must be a tk.Path or str: pass {made_by}")
    check_absolute(value, name=name)
    check_archive_path(path_str(value), name=name)


def _default_distribution(options: Dict[str, Any], *, file_sizes: Any) -> Dict[str, str]:
    """The distribution of a training's plan where neither the recipe nor the training's config names one (``options``:
    :func:`training_plan_options`' plan options) and the training's batching is known: ``core.pure.
    training_distribution`` of what the plan has (each file's sequence lengths: ``file_sizes`` made by a
    ``ComputeFileCostsJob``, or a ``path`` option given; an engine it simulates exactly; sharded ranks), with a
    warning naming what is missing where that is not the one which needs all of them; empty: nothing to choose."""
    cut = next(name for name, o in core.PLAN_OPTIONS.items() if o.cut)
    if cut in options or not any(o.batching and name in options for name, o in core.PLAN_OPTIONS.items()):
        return {}
    paths = {name: o.path for name, o in core.PLAN_OPTIONS.items() if o.path}
    request = _request(options, core.PLAN_OPTIONS)
    has_lengths = isinstance(getattr(file_sizes, "creator", None), ComputeFileCostsJob) or any(
        n in options for n in paths
    )
    reason, sharded = request.inexact_reason(), request.settings.distrib_shard_files
    chosen = core.pure.training_distribution(seq_lengths=has_lengths, exact_engine=reason is None, sharded=sharded)
    best = core.pure.training_distribution(seq_lengths=True, exact_engine=True, sharded=True)
    if chosen != best:
        has_not = [
            (
                has_lengths,
                f"every file's sequence lengths (file_sizes={file_sizes} is no ComputeFileCostsJob's out_file_costs): "
                "give file_sizes=ComputeFileCostsJob(...).out_file_costs, or "
                + " or ".join(f"{name}={made_by}" for name, made_by in paths.items()),
            ),
            (reason is None, f"an engine the plan simulates exactly ({reason})"),
            (sharded, "sharded ranks (it cuts sharded files only)"),
        ]
        missing = [text for has, text in has_not if not has]
        warnings.warn(
            f"no {cut} given: the plan of the training's batching cuts with {cut}={chosen!r}, as {cut}={best!r} "
            f"needs " + "; and ".join(missing) + f"; or give {cut}= to choose",
            UserWarning,
            stacklevel=3,
        )
    return {cut: chosen}


class ShardPlanJob(Job, metaclass=PlainNumbersJobType):
    """Plans which files each rank reads in each sub-epoch, exactly as RETURNN's
    DistributeFilesDataset will, before any training runs.

    Outputs:
      - out_plan: ``plan.npz`` (see ``i6_shard.core.load_plan``);
      - out_summary: ``summary.json``, out_report: ``report.txt``;
      - out_plot: ``plot.png`` (only declared with ``plot=True``; the task fails if matplotlib is missing);
      - out_max_imbalance, out_dropped_fraction: tk.Variables with the headline figures
        (worst max/mean bytes across shards of a sub-epoch; mean share of the data dropped
        when every sub-epoch stops at its shortest rank), so that a graph can branch on them;
      - out_dropped_fraction_predicted (only where a ``batching`` option of ``core.PLAN_OPTIONS`` is given): the
        mean predicted share dropped under RETURNN's batching;
      - out_cache_peak_bytes_per_node (only with a node cache): the peak bytes a node's file cache holds.

    ``file_sizes`` may be a costs archive (ComputeFileCostsJob.out_file_costs): the bins are then
    balanced by its unit (frames or sequences), and the plan records it.

    The plan options are the rows of ``core.PLAN_OPTIONS``, which make the signature, the docstring of ``__init__``,
    the attributes and the hash: each option hashes its plain value (the training's sub-epochs with the preloaded
    ones added, as an earlier job given their sum), and one added after the first jobs hashes as absent at its
    default, so that their ids stay.
    """

    __sis_hash_exclude__ = hash_exclude(core.PLAN_OPTIONS)

    def __init__(self, file_sizes: Union[tk.Path, str, Sequence[Union[tk.Path, str]]], **options: Any):
        # The signature (job_signature) and this docstring (job_docstring) are built from core.PLAN_OPTIONS.
        derived = derive(_arguments(file_sizes, options))
        self.plan_request = derived.request  # the one request of this job, which tasks() and run() take
        reason = None if _VERDICT_SAID.get() else self.plan_request.inexact_reason()
        if reason is not None:
            warnings.warn(f"ShardPlanJob: the plan is not exactly its training's: {reason}", InexactPlanWarning, 3)
        self.plot, self.given_rqmt = derived.plot, derived.given_rqmt
        self.file_sizes = file_sizes
        for name, value in derived.values.items():
            setattr(self, name, value)

        self.out_plan = self.output_path(core.PLAN_FILE)
        self.out_summary = self.output_path(core.SUMMARY_FILE)
        self.out_report = self.output_path(core.REPORT_FILE)
        if self.plot:
            self.out_plot = self.output_path(core.PLOT_FILE)
        self.out_max_imbalance = self.output_var("max_imbalance")
        self.out_dropped_fraction = self.output_var("dropped_fraction")
        if self.plan_request.batching is not None:
            self.out_dropped_fraction_predicted = self.output_var("dropped_fraction_predicted")
        if self.plan_request.node_cache is not None:
            self.out_cache_peak_bytes_per_node = self.output_var("cache_peak_bytes_per_node")

    __init__.__signature__ = _SIGNATURE
    __init__.__doc__ = job_docstring(core.PLAN_OPTIONS)

    @classmethod
    def for_training(
        cls,
        training_config: Any,
        *,
        file_sizes: Union[tk.Path, str, Sequence[Union[tk.Path, str]]],
        num_ranks: int,
        key: Union[str, Tuple[Any, ...]] = "train",
        returnn_root: Optional[Union[tk.Path, str]] = None,
        **options: Any,
    ) -> "ShardPlanJob":
        """The plan of the training that ``training_config`` describes, its settings stated once, in that config
        (:func:`~i6_shard.returnn_config.plan.training_plan_options`): its batching, length filter, gradient
        accumulation and sync as RETURNN's torch engine reads them (the options of ``core.PLAN_OPTIONS`` marked
        ``engine``), its sub-epochs, and the settings of its DistributeFilesDataset at ``key`` (how the ranks split the
        files, seeds, sub-epochs per full epoch, sequence order, cut, preloaded sub-epochs);
        without one there (the dataset is built from this job, ``sharded_files_dataset(files, plan=job, ...)``),
        the sub-epochs per full epoch and the cut are given here. Warns (``InexactPlanWarning``) naming
        each setting the plan cannot take exactly; a ``file_sizes`` in bytes (a ``ComputeFileSizesJob``'s) has no
        per-sequence frames, so the batching is then left out, with a warning, unless a costs archive is given for
        them (a ``path`` option).

        :param training_config: the training's i6_core ``ReturnnConfig`` (or ``ReturnnConfigV2``), or its config dict
        :param file_sizes: as for the job
        :param num_ranks: the training's ranks (GPUs): the plan's shards
        :param key: the config key (or key path) of the training's dataset
        :param returnn_root: the RETURNN the training runs: the plan cuts as that release does where its version can
            be known at graph time (else give the release as an option; see docs/returnn_versions.md)
        :param options: further job options (the training's sub-epochs among them; None or left out: the
            config's); one that the config states must agree with it
        :raises ValueError: where an option contradicts the config
        """
        kwargs = training_plan_options(
            training_config, num_ranks=num_ranks, key=key, returnn_root=returnn_root, **options
        )
        kwargs.update(_default_distribution(kwargs, file_sizes=file_sizes))  # where the batching is known
        paths = [name for name, o in core.PLAN_OPTIONS.items() if o.path and kwargs.get(name) is not None]
        if not paths and isinstance(getattr(file_sizes, "creator", None), ComputeFileSizesJob):
            engine = [name for name, o in core.PLAN_OPTIONS.items() if o.engine and name in kwargs]
            left_out = {name: kwargs.pop(name) for name in engine}
            if any(core.PLAN_OPTIONS[name].batching for name in left_out):
                warnings.warn(
                    f"file_sizes={file_sizes} counts bytes, without sequence lengths: the plan does not simulate the "
                    f"training's batching ({', '.join(f'{k}={v!r}' for k, v in left_out.items())}); give "
                    + " or ".join(f"{n}={o.path}" for n, o in core.PLAN_OPTIONS.items() if o.path)
                    + ", or plan a costs archive",
                    InexactPlanWarning,
                    stacklevel=2,
                )
        said = _VERDICT_SAID.set(True)  # training_plan_options said the verdict, with the config's other notes
        try:
            return cls(file_sizes, **kwargs)
        finally:
            _VERDICT_SAID.reset(said)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "plan_request" not in self.__dict__:  # pickled before the job kept its request: rebuilt from its options
            self.plan_request = _request(
                {name: getattr(self, name, None) for name in core.PLAN_OPTIONS}, core.PLAN_OPTIONS
            )

    @classmethod
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: derive() checks everything, and gives plain Python values.
        return super().hash(derive(parsed_args).hashed)

    def tasks(self):
        # Only the header of the sizes archive is read (the manager calls this): its number of files.
        paths = _archive_paths(self.file_sizes)
        counts = [archive_entry_count(p) for p in ([paths] if isinstance(paths, str) else paths)]
        num_files = None if None in counts else sum(counts)  # a header not read: the run says what is wrong
        sized, mini = plan_rqmt(num_files=num_files, settings=self.plan_request.settings)
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=mini)

    def run(self):
        if self.plot and not core.reporting.matplotlib_available():  # fail before anything is written
            raise ImportError(
                f"ShardPlanJob(plot=True) declares out_plot, but {core.reporting.MISSING_MATPLOTLIB} "
                "(plot=False: another job, without out_plot)"
            )
        request = self.plan_request  # rebuilt on unpickling where an older version pickled none (__setstate__)
        # A path option (a request field of its name) is resolved where the job runs, as file_sizes is; a job
        # pickled before the option existed has none.
        paths = {name: getattr(self, name, None) for name, o in core.PLAN_OPTIONS.items() if o.path}
        request = dataclasses.replace(request, **{k: path_str(v) for k, v in paths.items() if v is not None})
        outputs = core.plan_archive(_archive_paths(self.file_sizes), request)  # the planning floor
        summary = core.write_outputs(
            outputs,
            plan_path=self.out_plan.get_path(),
            summary_path=self.out_summary.get_path(),
            report_path=self.out_report.get_path(),
            plot_path=self.out_plot.get_path() if self.plot else None,
        )
        write_variable(self.out_max_imbalance, float(summary["max_imbalance"]))
        write_variable(self.out_dropped_fraction, float(summary["dropped_fraction"]))
        if hasattr(self, "out_dropped_fraction_predicted"):
            write_variable(self.out_dropped_fraction_predicted, float(summary["dropped_fraction_predicted"]))
        if hasattr(self, "out_cache_peak_bytes_per_node"):
            write_variable(self.out_cache_peak_bytes_per_node, int(summary["cache_peak_bytes_per_node"]))

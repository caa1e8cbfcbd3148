"""ShardPlanJob: which files each rank reads in each sub-epoch, with its statistics, report
and plot, as cached Sisyphus outputs (the same bytes as ``python -m i6_shard plan``)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Dict, List, Optional, Tuple, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core.io import archive_entry_count, check_archive_path
from i6_shard.returnn_config.plan import ENGINE_PLAN_OPTIONS, training_plan_options
from i6_shard.returnn_config.reader import InexactPlanWarning

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
_D = core.PLAN_OPTION_DEFAULTS  # each plan option's default, written once (core.pure.request)
#: The plan options of the job, in core.PlanRequest.from_options' names.
_PLAN_OPTIONS = ("num_shards", "partition_epoch", "num_epochs", *core.PLAN_OPTION_DEFAULTS)


#: The last request built, by its options: Sisyphus hashes a job's arguments (``ShardPlanJob.hash``) right before
#: it runs ``__init__`` with the same ones, so that both take the one request built from them.
_last_request: List[Any] = [None, None]


def _request(args: Dict[str, Any]) -> core.PlanRequest:
    """The job's plan options as a validated PlanRequest, built once (``PlanRequest.from_options``) for the hash
    and ``__init__`` of one job; raises naming the option. ``args``: Sisyphus' parsed arguments."""
    options = {name: args[name] for name in _PLAN_OPTIONS if name in args}
    if options.get("torch_distributed") is not None and options.get("reduce_type") == _D["reduce_type"]:
        options["reduce_type"] = None  # the signature's default, not given: torch_distributed states the sync
    if options.get("lengths") is not None:  # the request holds the path string the job's run reads
        options["lengths"] = path_str(options["lengths"])
    key = tuple((name, type(value), value) for name, value in options.items())
    if _last_request[0] != key:
        _last_request[:] = [None, None]  # a failed build leaves no request behind
        _last_request[:] = [key, core.PlanRequest.from_options(**options)]
    return _last_request[1]


def _plain_options(request: core.PlanRequest, *, given_preload: Any) -> Dict[str, Any]:
    """The batching and cache options of the request as plain Python values, None and the defaults where
    not used (``preload_next_n_sub_epochs`` stays None where it was not given: RETURNN's default)."""
    batching, node_cache = request.batching, request.node_cache
    return {
        "batch_size": None if batching is None else batching.batch_size,
        "max_seqs": None if batching is None else batching.max_seqs,
        "ranks_per_node": None if node_cache is None else node_cache.ranks_per_node,
        "cached_file": True if node_cache is None else node_cache.cached_file,
        "cache_size": request.cache_size,
        "sub_epoch_constant_bytes": None
        if node_cache is None or not node_cache.constant_bytes
        else node_cache.constant_bytes,
        "reduce_type": request.sync.reduce_type,
        "param_sync_step": request.sync.param_sync_step,
        "accum_grad_multiple_step": None
        if request.sync.accum_grad_multiple_step == 1
        else request.sync.accum_grad_multiple_step,
        "preload_next_n_sub_epochs": None if given_preload is None else request.settings.preloaded_sub_epochs,
    }


def _checked(args: Dict[str, Any]) -> Tuple[core.PlanRequest, bool, Dict[str, Union[int, float]]]:
    """Every argument checked (Sisyphus hashes them before ``__init__`` runs, so ``hash`` calls this
    too): the request, ``plot`` and the resource requests given, in plain Python values."""
    _check_file_sizes(args["file_sizes"])
    _check_lengths(args.get("lengths"))
    request = _request(args)
    plot = core.pure.check_bool(args.get("plot", True), name="plot")
    given = check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    return request, plot, given


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
    """A sizes or costs archive input: a tk.Path or absolute str of an .npz."""
    _check_archive_input(
        file_sizes,
        name="file_sizes",
        made_by="ComputeFileSizesJob(...).out_file_sizes or the .npz of `python -m i6_shard sizes`",
    )


def _check_lengths(lengths: Any) -> None:
    """The optional lengths archive: None, or a tk.Path or absolute str of a costs .npz."""
    if lengths is not None:
        _check_archive_input(
            lengths,
            name="lengths",
            made_by="ComputeFileCostsJob(...).out_file_costs or the .npz of `python -m i6_shard costs`, or None",
        )


def _check_archive_input(value: Any, *, name: str, made_by: str) -> None:
    """TypeError/ValueError naming ``name`` unless ``value`` is a tk.Path or an absolute str of an .npz archive."""
    if not isinstance(value, (tk.Path, str)):
        raise TypeError(f"{name}={value!r} must be a tk.Path or str: pass {made_by}")
    check_absolute(value, name=name)
    check_archive_path(path_str(value), name=name)


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
      - out_dropped_fraction_predicted (only with ``batch_size`` or ``max_seqs``): the mean predicted
        share dropped under RETURNN's batching.

    ``file_sizes`` may be a costs archive (ComputeFileCostsJob.out_file_costs): the bins are then
    balanced by its unit (frames or sequences), and the plan records it.
    """

    # Options added later go here with the value that reproduces the old behavior. plot=False is
    # hashed: it declares no out_plot, so it cannot share a job (and its finished outputs) with plot=True.
    __sis_hash_exclude__ = {
        "plot": True,
        **{
            name: _D[name]
            for name in (
                "distribution",
                "sharding",
                "batch_size",
                "max_seqs",
                "max_sub_epoch_deviation",
                "ranks_per_node",
                "preload_next_n_sub_epochs",
                "cached_file",
                "cache_size",
                "reduce_type",
                "param_sync_step",
                "accum_grad_multiple_step",
                "sub_epoch_constant_bytes",
                "lengths",
                "torch_distributed",
                "max_seq_length",
                "sub_epoch_seq_ordering",
            )
        },
    }

    def __init__(
        self,
        file_sizes: Union[tk.Path, str],
        *,
        num_shards: int,
        partition_epoch: int,
        num_epochs: int,
        seq_ordering: str = _D["seq_ordering"],
        random_seed_offset: Optional[int] = _D["random_seed_offset"],
        fixed_random_seed: Optional[int] = _D["fixed_random_seed"],
        distribution: str = _D["distribution"],
        max_sub_epoch_deviation: float = _D["max_sub_epoch_deviation"],
        sharding: str = _D["sharding"],
        plot: bool = True,
        batch_size: Optional[int] = _D["batch_size"],
        max_seqs: Optional[int] = _D["max_seqs"],
        ranks_per_node: Optional[int] = _D["ranks_per_node"],
        preload_next_n_sub_epochs: Optional[int] = _D["preload_next_n_sub_epochs"],
        cached_file: bool = _D["cached_file"],
        cache_size: Optional[int] = _D["cache_size"],
        reduce_type: str = _D["reduce_type"],
        param_sync_step: Optional[int] = _D["param_sync_step"],
        accum_grad_multiple_step: Optional[int] = _D["accum_grad_multiple_step"],
        sub_epoch_constant_bytes: Optional[int] = _D["sub_epoch_constant_bytes"],
        lengths: Optional[Union[tk.Path, str]] = _D["lengths"],
        torch_distributed: Optional[Dict[str, Any]] = _D["torch_distributed"],
        max_seq_length: Optional[Union[int, Dict[str, int]]] = _D["max_seq_length"],
        sub_epoch_seq_ordering: str = _D["sub_epoch_seq_ordering"],
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param file_sizes: ComputeFileSizesJob.out_file_sizes (or ``python -m i6_shard sizes`` output)
        :param num_shards: number of ranks (GPUs) in the training
        :param partition_epoch: the DistributeFilesDataset's partition_epoch
        :param num_epochs: the training's ``num_epochs`` (sub-epochs); the plan also holds the
            ``preload_next_n_sub_epochs`` sub-epochs RETURNN loads after the last one (and hashes as an earlier
            ShardPlanJob given their sum, so that a recipe that added them itself keeps its job ids by
            dropping them)
        :param seq_ordering: the DistributeFilesDataset's seq_ordering (one of ``core.SEQ_ORDERINGS``)
        :param random_seed_offset: the seed offset (see ``core.PlanSettings``; None: RETURNN's default 0)
        :param fixed_random_seed: the dataset's fixed_random_seed, if any
        :param distribution: "returnn" (RETURNN's own cut) or another of ``core.DISTRIBUTIONS``
        :param max_sub_epoch_deviation: with ``distribution="flexible"``: how far a sub-epoch's size may be
            from the mean sub-epoch's, as a share of it, in [0, 1) (``core.PlanSettings``; default 0.25)
        :param sharding: how the training splits the files, a key of ``core.SHARDING_MODES``
        :param plot: declare and write ``out_plot`` (the task fails if matplotlib is missing where it runs);
            ``plot=False`` is another job (hashed), ``True`` hashes as before the option existed
        :param batch_size: RETURNN's ``batch_size`` in frames: predict the loss under its batching
            (``dropped_fraction_predicted`` in the summary; needs a costs archive as ``file_sizes``)
        :param max_seqs: RETURNN's ``max_seqs``, for the prediction
        :param ranks_per_node: GPUs per node: the summary, report and plot add the per-node cache footprint
            (``cache_peak_bytes_per_node``, also as ``out_cache_peak_bytes_per_node``) and the bytes each node
            reads from the shared file system per sub-epoch (``core.NodeCache``)
        :param preload_next_n_sub_epochs: the dataset's option (None: RETURNN's default 1): the sub-epochs the
            plan holds after the training's last, and, with ranks_per_node, what the node cache holds ahead
        :param cached_file: the files go through ``CachedFile`` (one copy per node), with ranks_per_node
        :param cache_size: bytes of file cache per node: the report says which partition_epoch values fit
        :param reduce_type: the training's ``torch_distributed`` ``reduce_type``, which the predicted loss assumes:
            "grad" (the default: every rank stops in the step the first runs out) or "param" (the others run on
            to their next sync)
        :param param_sync_step: with ``reduce_type="param"``: ``torch_distributed``'s ``param_sync_step``
        :param accum_grad_multiple_step: the config's ``accum_grad_multiple_step`` (None: 1): the param syncs come
            every ``param_sync_step`` optimizer updates, and the simulated steps accumulate as the training does
        :param sub_epoch_constant_bytes: with ranks_per_node: bytes of the files the sub-epoch dataset reads in
            every sub-epoch besides its bin's; the node cache footprint holds them in every sub-epoch
        :param torch_distributed: the config's ``torch_distributed`` (a dict, sync levels included): the simulated
            steps assume its sync (``core.PLAN_OPTION_HELP``); None: the sync of reduce_type / param_sync_step
        :param max_seq_length: the config's ``max_seq_length`` (an int, or a dict by data key), for the simulation
        :param sub_epoch_seq_ordering: the sub-epoch dataset's ``seq_ordering`` (an HDFDataset's, e.g. ``"laplace:.100"``),
            which the simulation mirrors (``core.PLAN_OPTION_HELP``; for_training reads it from the config)
        :param lengths: a costs archive of the same files in the same order (ComputeFileCostsJob.out_file_costs):
            the prediction takes its sequence lengths while the bins stay cut by ``file_sizes`` (e.g. sizes in
            bytes, RETURNN's cut of a plain DistributeFilesDataset); None: ``file_sizes``' own
        :param time_rqmt: hours (default: sized from files x full epochs, see :func:`plan_rqmt`; a small
            plan runs as a mini task unless a request is given); not hashed
        :param mem_rqmt: GB (default: sized as time_rqmt); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        """
        request, self.plot, self.given_rqmt = _checked(
            dict(
                file_sizes=file_sizes,
                num_shards=num_shards,
                partition_epoch=partition_epoch,
                num_epochs=num_epochs,
                seq_ordering=seq_ordering,
                random_seed_offset=random_seed_offset,
                fixed_random_seed=fixed_random_seed,
                distribution=distribution,
                max_sub_epoch_deviation=max_sub_epoch_deviation,
                sharding=sharding,
                plot=plot,
                batch_size=batch_size,
                max_seqs=max_seqs,
                ranks_per_node=ranks_per_node,
                preload_next_n_sub_epochs=preload_next_n_sub_epochs,
                cached_file=cached_file,
                cache_size=cache_size,
                reduce_type=reduce_type,
                param_sync_step=param_sync_step,
                accum_grad_multiple_step=accum_grad_multiple_step,
                sub_epoch_constant_bytes=sub_epoch_constant_bytes,
                lengths=lengths,
                torch_distributed=torch_distributed,
                max_seq_length=max_seq_length,
                sub_epoch_seq_ordering=sub_epoch_seq_ordering,
                time_rqmt=time_rqmt,
                mem_rqmt=mem_rqmt,
                cpu_rqmt=cpu_rqmt,
            )
        )
        self.plan_request = request  # the one request of this job, which tasks() and run() take
        settings = request.settings
        self.file_sizes = file_sizes
        self.num_shards = settings.num_shards
        self.partition_epoch = settings.partition_epoch
        self.num_epochs = settings.training_num_epochs
        self.seq_ordering = settings.seq_ordering
        self.random_seed_offset = random_seed_offset if random_seed_offset is None else settings.random_seed_offset
        self.fixed_random_seed = settings.fixed_random_seed
        self.distribution = settings.distribution
        self.max_sub_epoch_deviation = settings.max_sub_epoch_deviation
        self.sharding = settings.sharding
        plain = _plain_options(request, given_preload=preload_next_n_sub_epochs)
        self.batch_size, self.max_seqs = plain["batch_size"], plain["max_seqs"]
        self.ranks_per_node, self.cached_file = plain["ranks_per_node"], plain["cached_file"]
        self.preload_next_n_sub_epochs, self.cache_size = plain["preload_next_n_sub_epochs"], plain["cache_size"]
        self.reduce_type, self.param_sync_step = plain["reduce_type"], plain["param_sync_step"]
        self.accum_grad_multiple_step = plain["accum_grad_multiple_step"]
        self.sub_epoch_constant_bytes = plain["sub_epoch_constant_bytes"]
        self.lengths = lengths  # an input of the job (a tk.Path), read when it runs
        self.torch_distributed, self.max_seq_length = request.torch_distributed, request.max_seq_length
        self.sub_epoch_seq_ordering = request.sub_epoch_seq_ordering

        self.out_plan = self.output_path(core.PLAN_FILE)
        self.out_summary = self.output_path(core.SUMMARY_FILE)
        self.out_report = self.output_path(core.REPORT_FILE)
        if self.plot:
            self.out_plot = self.output_path(core.PLOT_FILE)
        self.out_max_imbalance = self.output_var("max_imbalance")
        self.out_dropped_fraction = self.output_var("dropped_fraction")
        if batch_size is not None or max_seqs is not None:
            self.out_dropped_fraction_predicted = self.output_var("dropped_fraction_predicted")
        if ranks_per_node is not None:
            self.out_cache_peak_bytes_per_node = self.output_var("cache_peak_bytes_per_node")

    @classmethod
    def for_training(
        cls,
        training_config: Any,
        *,
        file_sizes: Union[tk.Path, str],
        num_ranks: int,
        num_epochs: Optional[int] = None,
        key: Union[str, Tuple[Any, ...]] = "train",
        **options: Any,
    ) -> "ShardPlanJob":
        """The plan of the training that ``training_config`` describes, its settings stated once, in that config
        (:func:`~i6_shard.returnn_config.plan.training_plan_options`): its ``batch_size``, ``max_seqs``,
        ``max_seq_length``, ``accum_grad_multiple_step`` and ``torch_distributed`` as RETURNN's torch engine reads
        them, and the settings of its DistributeFilesDataset at ``key`` (sharding, seeds, ``partition_epoch``,
        ``seq_ordering``, distribution, preloaded sub-epochs); without one there (the dataset is built from this job,
        ``sharded_files_dataset(files, plan=job, ...)``), ``partition_epoch`` and ``distribution`` are given here.
        Warns (``InexactPlanWarning``) naming each setting the plan cannot take exactly; a ``file_sizes`` in bytes
        (a ``ComputeFileSizesJob``'s) has no sequence lengths, so the batching is then left out, with a warning,
        unless ``lengths`` gives them.

        :param training_config: the training's i6_core ``ReturnnConfig`` (or ``ReturnnConfigV2``), or its config dict
        :param file_sizes: as for the job
        :param num_ranks: the training's ranks (GPUs): the plan's ``num_shards``
        :param num_epochs: the training's ``num_epochs`` (None: the config's)
        :param key: the config key (or key path) of the training's dataset
        :param options: further job options; one that the config states must agree with it
        :raises ValueError: where an option contradicts the config
        """
        kwargs = training_plan_options(training_config, num_ranks=num_ranks, num_epochs=num_epochs, key=key, **options)
        if kwargs.get("lengths") is None and isinstance(getattr(file_sizes, "creator", None), ComputeFileSizesJob):
            left_out = {name: kwargs.pop(name) for name in ENGINE_PLAN_OPTIONS if name in kwargs}
            if "batch_size" in left_out or "max_seqs" in left_out:
                warnings.warn(
                    f"file_sizes={file_sizes} counts bytes, without sequence lengths: the plan does not simulate the "
                    f"training's batching ({', '.join(f'{k}={v!r}' for k, v in left_out.items())}); give "
                    "lengths=ComputeFileCostsJob(files).out_file_costs, or plan a costs archive",
                    InexactPlanWarning,
                    stacklevel=2,
                )
        return cls(file_sizes, **kwargs)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "plan_request" not in self.__dict__:  # pickled before the job kept its request: rebuilt from its options
            args = {name: getattr(self, name, None) for name in _PLAN_OPTIONS}
            args["lengths"] = getattr(self, "lengths", None)
            self.plan_request = _request(args)

    @classmethod
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: check everything here, and hash plain Python values.
        d = dict(parsed_args)
        request, d["plot"], _ = _checked(d)
        settings = request.settings
        for name in ("num_shards", "partition_epoch", "num_epochs", "fixed_random_seed", "max_sub_epoch_deviation"):
            d[name] = getattr(settings, name)  # num_epochs: the planned sub-epochs, the preloaded included
        # None and 0 are the same plan: None means RETURNN's default 0.
        d["random_seed_offset"] = settings.random_seed_offset or None
        for name, value in _plain_options(request, given_preload=d.get("preload_next_n_sub_epochs")).items():
            if name in d:  # given: hashed as a plain value (at its default, excluded from the hash)
                d[name] = value
        for name in RQMT_ARGS:
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        # Only the header of the sizes archive is read (the manager calls this): its number of files.
        sized, mini = plan_rqmt(
            num_files=archive_entry_count(path_str(self.file_sizes)), settings=self.plan_request.settings
        )
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=mini)

    def run(self):
        if self.plot and not core.reporting.matplotlib_available():  # fail before anything is written
            raise ImportError(
                f"ShardPlanJob(plot=True) declares out_plot, but {core.reporting.MISSING_MATPLOTLIB} "
                "(plot=False: another job, without out_plot)"
            )
        request = self.plan_request  # rebuilt on unpickling where an older version pickled none (__setstate__)
        lengths = getattr(self, "lengths", None)  # a job pickled before the option existed has none
        if lengths is not None:  # resolved where the job runs, as file_sizes is
            request = dataclasses.replace(request, lengths=path_str(lengths))
        outputs = core.plan_archive(path_str(self.file_sizes), request)  # the planning floor
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

"""ShardPlanJob: which files each rank reads in each sub-epoch, with its statistics, report
and plot, as cached Sisyphus outputs (the same bytes as ``python -m i6_shard plan``)."""

from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional, Tuple, Union

from sisyphus import Job, tk

from i6_shard import core
from i6_shard.core.pure.flexible import check_bound_is_used
from i6_shard.core.io.preflight import archive_entry_count, check_regular_file

from i6_shard.core.pure.batching import Batching

from .util import RQMT_ARGS, PlainNumbersJobType, check_absolute, check_rqmt_args, path_str, round_up, sized_task, \
    write_variable

__all__ = ["ShardPlanJob"]

#: Files x full epochs (x layouts: one per rank unsharded) up to which the plan runs as a mini task.
#: Measured on one core: 1M files x 20 full epochs (20M) plan, report and plot in 23 s, 0.5 GB peak.
MINI_TASK_MAX_WORK = 20_000_000
_DEFAULT_DEVIATION = core.PlanSettings.max_sub_epoch_deviation  # the settings' default, hashed as before


def _preload(args: Dict[str, Any]) -> int:
    """The sub-epochs RETURNN loads after the training's last, which the plan holds too."""
    preload = args.get("preload_next_n_sub_epochs")
    preload = core.pure.cache.DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS if preload is None else preload
    return core.pure.check_int(preload, name="preload_next_n_sub_epochs", minimum=0,
                               hint="the dataset's preload_next_n_sub_epochs, or None for RETURNN's default 1")


def _plan_settings(args: Dict[str, Any]) -> core.PlanSettings:
    """The job's arguments as validated PlanSettings (numpy ints become ints); raises naming the argument.
    The plan holds the training's ``num_epochs`` and the sub-epochs RETURNN preloads after the last."""
    num_epochs = core.pure.check_int(args["num_epochs"], name="num_epochs", minimum=1,
                                     hint="the training's num_epochs, counted in sub-epochs")
    preload = _preload(args)
    return core.PlanSettings.from_mode(
        sharding=args.get("sharding", "sharded"), num_shards=args["num_shards"],
        partition_epoch=args["partition_epoch"], num_epochs=num_epochs + preload, preloaded_sub_epochs=preload,
        seq_ordering=args.get("seq_ordering", "random"), random_seed_offset=args.get("random_seed_offset") or 0,
        fixed_random_seed=args.get("fixed_random_seed"), distribution=args.get("distribution", "returnn"),
        max_sub_epoch_deviation=args.get("max_sub_epoch_deviation", _DEFAULT_DEVIATION))


def _batching(args: Dict[str, Any]) -> Optional[Batching]:
    """The batching limits of the prediction, or None without batch_size and max_seqs."""
    if args.get("batch_size") is None and args.get("max_seqs") is None:
        return None
    return Batching(batch_size=args.get("batch_size"), max_seqs=args.get("max_seqs"))


def _node_cache(args: Dict[str, Any]) -> Tuple[Optional[core.NodeCache], Optional[int]]:
    """The per-node cache of the footprint report and the cache size in bytes, or (None, None)
    without ``ranks_per_node``; the other cache options need it."""
    if args.get("ranks_per_node") is None:
        given = [name for name, default in (("cached_file", True), ("cache_size", None))
                 if args.get(name, default) != default]
        if given:
            raise ValueError(f"{', '.join(given)} describe the per-node cache; give ranks_per_node too (GPUs per "
                             "node), or leave them out")
        return None, None
    preload = args.get("preload_next_n_sub_epochs")
    node_cache = core.NodeCache(
        ranks_per_node=args["ranks_per_node"], cached_file=args.get("cached_file", True),
        preload_next_n_sub_epochs=core.pure.cache.DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS if preload is None else preload)
    cache_size = core.pure.check_optional_int(args.get("cache_size"), name="cache_size", minimum=1,
                                              hint="bytes of file cache per node, or None")
    return node_cache, cache_size


def _checked_args(args: Dict[str, Any]) -> Tuple[core.PlanSettings, bool, Dict[str, Union[int, float]]]:
    """Every argument checked (Sisyphus hashes them before ``__init__`` runs, so ``hash`` calls this
    too): the settings, ``plot`` and the resource requests given, in plain Python values."""
    _check_file_sizes(args["file_sizes"])
    settings = _plan_settings(args)
    check_bound_is_used(settings.max_sub_epoch_deviation, distribution=settings.distribution)
    plot = core.pure.check_bool(args.get("plot", True), name="plot")
    _batching(args)
    _node_cache(args)
    given = check_rqmt_args(**{name: args.get(name) for name in RQMT_ARGS})
    return settings, plot, given


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
    if not isinstance(file_sizes, (tk.Path, str)):
        raise TypeError(f"file_sizes={file_sizes!r} must be a tk.Path or str: pass "
                        "ComputeFileSizesJob(...).out_file_sizes or the .npz of `python -m i6_shard sizes`")
    check_absolute(file_sizes, name="file_sizes")
    if os.path.splitext(path_str(file_sizes))[1] != ".npz":
        raise ValueError(f"file_sizes={path_str(file_sizes)!r} is not a .npz file: pass "
                         "ComputeFileSizesJob(...).out_file_sizes (not its out_file_list) or the .npz that "
                         "`python -m i6_shard sizes -o` wrote")


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
    __sis_hash_exclude__ = {"distribution": "returnn", "sharding": "sharded", "plot": True, "batch_size": None,
                            "max_seqs": None, "max_sub_epoch_deviation": _DEFAULT_DEVIATION, "ranks_per_node": None,
                            "preload_next_n_sub_epochs": None, "cached_file": True, "cache_size": None}

    def __init__(
        self,
        file_sizes: Union[tk.Path, str],
        *,
        num_shards: int,
        partition_epoch: int,
        num_epochs: int,
        seq_ordering: str = "random",
        random_seed_offset: Optional[int] = None,
        fixed_random_seed: Optional[int] = None,
        distribution: str = "returnn",
        max_sub_epoch_deviation: float = _DEFAULT_DEVIATION,
        sharding: str = "sharded",
        plot: bool = True,
        batch_size: Optional[int] = None,
        max_seqs: Optional[int] = None,
        ranks_per_node: Optional[int] = None,
        preload_next_n_sub_epochs: Optional[int] = None,
        cached_file: bool = True,
        cache_size: Optional[int] = None,
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
        :param time_rqmt: hours (default: sized from files x full epochs, see :func:`plan_rqmt`; a small
            plan runs as a mini task unless a request is given); not hashed
        :param mem_rqmt: GB (default: sized as time_rqmt); not hashed
        :param cpu_rqmt: CPUs (default 1); not hashed
        """
        settings, self.plot, self.given_rqmt = _checked_args(locals())
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
        self.batch_size = batch_size
        self.max_seqs = max_seqs
        self.ranks_per_node = ranks_per_node
        self.preload_next_n_sub_epochs = preload_next_n_sub_epochs
        self.cached_file = cached_file
        self.cache_size = cache_size

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
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: check everything here, and hash plain Python values.
        d = dict(parsed_args)
        settings, d["plot"], _ = _checked_args(d)
        for name in ("num_shards", "partition_epoch", "num_epochs", "fixed_random_seed", "max_sub_epoch_deviation"):
            d[name] = getattr(settings, name)  # num_epochs: the planned sub-epochs, the preloaded included
        # None and 0 are the same plan: None means RETURNN's default 0.
        d["random_seed_offset"] = settings.random_seed_offset or None
        batching = _batching(d)
        if batching is not None:  # plain ints; an unset limit stays None, excluded from the hash
            d["batch_size"], d["max_seqs"] = batching.batch_size, batching.max_seqs
        if d.get("preload_next_n_sub_epochs") is not None:  # plain int, as given (None stays excluded)
            d["preload_next_n_sub_epochs"] = _preload(d)
        node_cache, cache_size = _node_cache(d)
        if node_cache is not None:  # plain values, as given (None and True stay excluded from the hash)
            d["ranks_per_node"], d["cache_size"] = node_cache.ranks_per_node, cache_size
            d["cached_file"] = node_cache.cached_file
        for name in RQMT_ARGS:
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        # Only the header of the sizes archive is read (the manager calls this): its number of files.
        sized, mini = plan_rqmt(num_files=archive_entry_count(path_str(self.file_sizes)),
                                settings=_plan_settings(vars(self)))
        yield sized_task("run", given=self.given_rqmt, sized=sized, mini=mini)

    def run(self):
        if self.plot and not core.reporting.matplotlib_available():  # fail before anything is written
            raise ImportError(f"ShardPlanJob(plot=True) declares out_plot, but {core.reporting.MISSING_MATPLOTLIB} "
                              "(plot=False: another job, without out_plot)")
        check_regular_file(path_str(self.file_sizes), what="file sizes archive")  # a FIFO would block the load
        sizes = core.load_file_sizes(path_str(self.file_sizes))
        plan = core.ShardPlan(sizes.keys, sizes.sizes, _plan_settings(vars(self)).replace(unit=sizes.unit))
        batching = _batching(vars(self))
        lengths = None
        if batching is not None or sizes.unit == "steps":  # a plan by steps predicts under the steps' limits
            lengths = core.io.load_file_costs(path_str(self.file_sizes))
            batching = core.io.file_costs.prediction_batching(lengths, batching)
        node_cache, cache_size = _node_cache(vars(self))
        summary = core.write_plan_outputs(
            plan, plan_path=self.out_plan.get_path(), summary_path=self.out_summary.get_path(),
            report_path=self.out_report.get_path(), plot_path=self.out_plot.get_path() if self.plot else None,
            batching=batching, lengths=lengths, node_cache=node_cache, cache_size=cache_size)
        write_variable(self.out_max_imbalance, float(summary["max_imbalance"]))
        write_variable(self.out_dropped_fraction, float(summary["dropped_fraction"]))
        if hasattr(self, "out_dropped_fraction_predicted"):
            write_variable(self.out_dropped_fraction_predicted, float(summary["dropped_fraction_predicted"]))
        if node_cache is not None:
            write_variable(self.out_cache_peak_bytes_per_node, int(summary["cache_peak_bytes_per_node"]))

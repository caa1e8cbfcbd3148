"""ShardPlanJob: which files each rank reads in each sub-epoch, with its statistics, report
and plot, as cached Sisyphus outputs (the same bytes as ``python -m i6_shard plan``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

from sisyphus import Job, Task, tk

from i6_shard import core

from .util import check_absolute, path_str, rqmt_from_args, task_for, write_variable

__all__ = ["ShardPlanJob"]


def _plan_settings(args: Dict[str, Any]) -> core.PlanSettings:
    """The job's arguments as validated PlanSettings (numpy ints become ints); raises naming the argument."""
    return core.PlanSettings.from_mode(
        sharding=args.get("sharding", "sharded"), num_shards=args["num_shards"],
        partition_epoch=args["partition_epoch"], num_epochs=args["num_epochs"],
        seq_ordering=args.get("seq_ordering", "random"), random_seed_offset=args.get("random_seed_offset") or 0,
        fixed_random_seed=args.get("fixed_random_seed"), distribution=args.get("distribution", "returnn"))


def _check_file_sizes(file_sizes: Any) -> None:
    if not isinstance(file_sizes, (tk.Path, str)):
        raise TypeError(f"file_sizes={file_sizes!r} must be a tk.Path or str: pass "
                        "ComputeFileSizesJob(...).out_file_sizes or the .npz of `python -m i6_shard sizes`")
    check_absolute(file_sizes, name="file_sizes")
    if os.path.splitext(path_str(file_sizes))[1] != ".npz":
        raise ValueError(f"file_sizes={path_str(file_sizes)!r} is not a .npz file: pass "
                         "ComputeFileSizesJob(...).out_file_sizes (not its out_file_list) or the .npz that "
                         "`python -m i6_shard sizes -o` wrote")


class ShardPlanJob(Job):
    """Plans which files each rank reads in each sub-epoch, exactly as RETURNN's
    DistributeFilesDataset will, before any training runs.

    Outputs:
      - out_plan: ``plan.npz`` (see ``i6_shard.core.load_plan``);
      - out_summary: ``summary.json``, out_report: ``report.txt``;
      - out_plot: ``plot.png`` (only declared with ``plot=True``; the task fails if matplotlib is missing);
      - out_max_imbalance, out_dropped_fraction: tk.Variables with the headline figures
        (worst max/mean bytes across shards of a sub-epoch; mean share of the data dropped
        when every sub-epoch stops at its shortest rank), so that a graph can branch on them.
    """

    # Options added later go here with the value that reproduces the old behavior.
    __sis_hash_exclude__ = {"distribution": "returnn", "sharding": "sharded"}

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
        sharding: str = "sharded",
        plot: bool = True,
        time_rqmt: Optional[float] = None,
        mem_rqmt: Optional[float] = None,
        cpu_rqmt: Optional[int] = None,
    ):
        """
        :param file_sizes: ComputeFileSizesJob.out_file_sizes (or ``python -m i6_shard sizes`` output)
        :param num_shards: number of ranks (GPUs) in the training
        :param partition_epoch: the DistributeFilesDataset's partition_epoch
        :param num_epochs: RETURNN's num_epochs (sub-epochs) to plan
        :param seq_ordering: the DistributeFilesDataset's seq_ordering (one of ``core.SEQ_ORDERINGS``)
        :param random_seed_offset: the seed offset (see ``core.PlanSettings``; None: RETURNN's default 0)
        :param fixed_random_seed: the dataset's fixed_random_seed, if any
        :param distribution: "returnn" (RETURNN's own cut) or another of ``core.DISTRIBUTIONS``
        :param sharding: how the training splits the files, a key of ``core.SHARDING_MODES``
        :param plot: write ``out_plot`` (needs matplotlib where the task runs); not hashed
        :param time_rqmt: hours; with mem_rqmt/cpu_rqmt the task runs on the cluster, else as a mini task; not hashed
        :param mem_rqmt: GB; not hashed
        :param cpu_rqmt: CPUs; not hashed
        """
        _check_file_sizes(file_sizes)
        settings = _plan_settings(locals())
        self.file_sizes = file_sizes
        self.num_shards = settings.num_shards
        self.partition_epoch = settings.partition_epoch
        self.num_epochs = settings.num_epochs
        self.seq_ordering = settings.seq_ordering
        self.random_seed_offset = random_seed_offset if random_seed_offset is None else settings.random_seed_offset
        self.fixed_random_seed = settings.fixed_random_seed
        self.distribution = settings.distribution
        self.sharding = settings.sharding
        self.plot = core.pure.check_bool(plot, name="plot")
        self.rqmt = rqmt_from_args(time_rqmt=time_rqmt, mem_rqmt=mem_rqmt, cpu_rqmt=cpu_rqmt)

        self.out_plan = self.output_path(core.PLAN_FILE)
        self.out_summary = self.output_path(core.SUMMARY_FILE)
        self.out_report = self.output_path(core.REPORT_FILE)
        if self.plot:
            self.out_plot = self.output_path(core.PLOT_FILE)
        self.out_max_imbalance = self.output_var("max_imbalance")
        self.out_dropped_fraction = self.output_var("dropped_fraction")

    @classmethod
    def hash(cls, parsed_args):
        # Sisyphus hashes before __init__ runs: check everything here, and hash plain Python values.
        d = dict(parsed_args)
        _check_file_sizes(d["file_sizes"])
        settings = _plan_settings(d)
        for name in ("num_shards", "partition_epoch", "num_epochs", "fixed_random_seed"):
            if name in d:
                d[name] = getattr(settings, name)
        # None and 0 are the same plan: None means RETURNN's default 0.
        d["random_seed_offset"] = settings.random_seed_offset or None
        for name in ("plot", "time_rqmt", "mem_rqmt", "cpu_rqmt"):
            d.pop(name, None)
        return super().hash(d)

    def tasks(self):
        yield task_for("run", self.rqmt)

    def run(self):
        sizes = core.load_file_sizes(path_str(self.file_sizes))
        plan = core.ShardPlan(sizes.keys, sizes.sizes, _plan_settings(vars(self)))
        summary = core.write_plan_outputs(
            plan, plan_path=self.out_plan.get_path(), summary_path=self.out_summary.get_path(),
            report_path=self.out_report.get_path(), plot_path=self.out_plot.get_path() if self.plot else None)
        write_variable(self.out_max_imbalance, float(summary["max_imbalance"]))
        write_variable(self.out_dropped_fraction, float(summary["dropped_fraction"]))

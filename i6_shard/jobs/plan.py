"""ShardPlanJob: which files each rank reads in each sub-epoch, with its statistics, report
and plot, as cached Sisyphus outputs (the same bytes as ``python -m i6_shard plan``)."""

from __future__ import annotations

import os
from typing import Optional, Union

from sisyphus import Job, Task, tk

from i6_shard import core

from .util import check_absolute, write_variable

__all__ = ["ShardPlanJob"]


class ShardPlanJob(Job):
    """Plans which files each rank reads in each sub-epoch, exactly as RETURNN's
    DistributeFilesDataset will (``distrib_shard_files=True``), before any training runs.

    Outputs:
      - out_plan: ``plan.npz`` (see ``i6_shard.core.load_plan``);
      - out_summary: ``summary.json``, out_report: ``report.txt``;
      - out_plot: ``plot.png`` (only when matplotlib is importable);
      - out_max_imbalance, out_dropped_fraction: tk.Variables with the headline figures
        (worst max/mean bytes across shards of a sub-epoch; mean share of the data dropped
        when every sub-epoch stops at its shortest rank), so that a graph can branch on them.
    """

    # Options added later go here with the value that reproduces the old behavior.
    __sis_hash_exclude__ = {"distribution": "returnn"}

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
    ):
        """
        :param file_sizes: ComputeFileSizesJob.out_file_sizes (or ``python -m i6_shard sizes`` output)
        :param num_shards: number of ranks (GPUs) in the training
        :param partition_epoch: the DistributeFilesDataset's partition_epoch
        :param num_epochs: RETURNN's num_epochs (sub-epochs) to plan
        :param seq_ordering: the DistributeFilesDataset's seq_ordering ("random" or "default")
        :param random_seed_offset: the dataset's random_seed_offset (None: RETURNN's default 0 under sharding)
        :param fixed_random_seed: the dataset's fixed_random_seed, if any
        :param distribution: "returnn" (RETURNN's own cut) or another of ``core.DISTRIBUTIONS``
        """
        if not isinstance(file_sizes, (tk.Path, str)):
            raise TypeError(f"file_sizes={file_sizes!r} must be a tk.Path or str: pass "
                            "ComputeFileSizesJob(...).out_file_sizes or the .npz of `python -m i6_shard sizes`")
        check_absolute(file_sizes, name="file_sizes")
        sizes_path = file_sizes.get_path() if isinstance(file_sizes, tk.Path) else file_sizes
        if os.path.splitext(sizes_path)[1] != ".npz":
            raise ValueError(f"file_sizes={sizes_path!r} is not a .npz file: pass "
                             "ComputeFileSizesJob(...).out_file_sizes (not its out_file_list) or the .npz that "
                             "`python -m i6_shard sizes -o` wrote")
        for name, value in (("num_shards", num_shards), ("partition_epoch", partition_epoch),
                            ("num_epochs", num_epochs)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        if seq_ordering not in core.SEQ_ORDERINGS:
            raise ValueError(f"seq_ordering={seq_ordering!r} is not supported by DistributeFilesDataset; "
                             f"use one of {core.SEQ_ORDERINGS}")
        if distribution not in core.DISTRIBUTIONS:
            raise ValueError(f"distribution={distribution!r} is unknown; use one of {core.DISTRIBUTIONS}")
        for name, value in (("random_seed_offset", random_seed_offset), ("fixed_random_seed", fixed_random_seed)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"{name}={value!r} must be an int or None")
        self.file_sizes = file_sizes
        self.num_shards = num_shards
        self.partition_epoch = partition_epoch
        self.num_epochs = num_epochs
        self.seq_ordering = seq_ordering
        self.random_seed_offset = random_seed_offset
        self.fixed_random_seed = fixed_random_seed
        self.distribution = distribution

        self.out_plan = self.output_path(core.PLAN_FILE)
        self.out_summary = self.output_path(core.SUMMARY_FILE)
        self.out_report = self.output_path(core.REPORT_FILE)
        self.out_plot = self.output_path(core.PLOT_FILE)
        self.out_max_imbalance = self.output_var("max_imbalance")
        self.out_dropped_fraction = self.output_var("dropped_fraction")

    @classmethod
    def hash(cls, parsed_args):
        d = dict(parsed_args)
        if type(d["random_seed_offset"]) is int and d["random_seed_offset"] == 0:
            d["random_seed_offset"] = None  # the same plan: None means RETURNN's 0 under sharding
        return super().hash(d)

    def tasks(self):
        yield Task("run", mini_task=True)

    def run(self):
        sizes = core.load_file_sizes(self.file_sizes.get_path() if isinstance(self.file_sizes, tk.Path)
                                     else self.file_sizes)
        plan = core.ShardPlan(
            sizes.keys, sizes.sizes, num_shards=self.num_shards, partition_epoch=self.partition_epoch,
            seq_ordering=self.seq_ordering, random_seed_offset=self.random_seed_offset or 0,
            fixed_random_seed=self.fixed_random_seed, distribution=self.distribution,
        )
        summary = core.write_plan_outputs(
            plan, num_epochs=self.num_epochs, plan_path=self.out_plan.get_path(),
            summary_path=self.out_summary.get_path(), report_path=self.out_report.get_path(),
            plot_path=self.out_plot.get_path(),
        )
        write_variable(self.out_max_imbalance, float(summary["max_imbalance"]))
        write_variable(self.out_dropped_fraction, float(summary["dropped_fraction"]))

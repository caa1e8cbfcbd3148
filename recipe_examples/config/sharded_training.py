"""The i6_shard pipeline on tiny HDF data: file sizes -> shard plan -> verification that a
2-rank sharded DistributeFilesDataset reads every sequence exactly once per full epoch."""

import importlib.util

from sisyphus import tk

from i6_shard.jobs import ComputeFileSizesJob, ShardPlanJob, VerifyShardingJob
from i6_shard.returnn_config import sharded_files_dataset
from shard_example import TinyHdfDataJob

NUM_SHARDS = 2  # GPUs of the training
PARTITION_EPOCH = 3  # sub-epochs per full epoch
NUM_EPOCHS = 6  # RETURNN's num_epochs (sub-epochs): two full epochs


def run(prefix: str = "sharded_training"):
    data = TinyHdfDataJob(num_files=24, seed=1)

    # One stat pass over the list, cached; its list file is what the training reads as "files". Two parallel
    # parts (one per 200,000 entries by default) to show the split: on a cluster engine they go out as one
    # array job, then a mini task merges them.
    sizes = ComputeFileSizesJob(data.out_file_list, num_parallel_tasks=2)

    # Which files each rank reads in each sub-epoch, before any GPU hour is spent.
    plan = ShardPlanJob(
        sizes.out_file_sizes, num_shards=NUM_SHARDS, partition_epoch=PARTITION_EPOCH, num_epochs=NUM_EPOCHS
    )

    # The training dataset, as it would go into the RETURNN config of the training job; plan=: it reads its bins
    # from the plan and takes num_shards and partition_epoch from the plan job.
    train = sharded_files_dataset(
        sizes.out_file_list,
        plan=plan,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        use_worker_proc=False,  # tiny data: read in the main process; keep RETURNN's default for real data
    )

    # Proof with the real RETURNN, one process per rank: the plan job's ranks, for its sub-epochs.
    verify = VerifyShardingJob(train)

    tk.register_output(f"{prefix}/files.txt", sizes.out_file_list)
    tk.register_output(f"{prefix}/file_sizes.npz", sizes.out_file_sizes)
    tk.register_output(f"{prefix}/plan.npz", plan.out_plan)
    tk.register_output(f"{prefix}/plan_summary.json", plan.out_summary)
    tk.register_output(f"{prefix}/plan_report.txt", plan.out_report)
    tk.register_output(f"{prefix}/max_imbalance", plan.out_max_imbalance)
    tk.register_output(f"{prefix}/dropped_fraction", plan.out_dropped_fraction)
    if importlib.util.find_spec("matplotlib") is not None:  # the picture needs matplotlib
        tk.register_output(f"{prefix}/plan_plot.png", plan.out_plot)
    tk.register_output(f"{prefix}/verify_report.txt", verify.out_report)
    tk.register_output(f"{prefix}/verify_ok", verify.out_ok)

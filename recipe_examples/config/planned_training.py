"""Optional: from tiny HDF data to a real training on this machine's CPU, with the reviewed plan as
what trains: file costs -> shard plan -> verification -> a 2-rank torchrun training (gloo, device cpu)
whose ranks read their files from the plan (``plan=``); the training job waits for the plan job. The training's
settings are stated once: the plan takes batching and sync from the training's config
(``ShardPlanJob.for_training``); the dataset takes ranks, ``partition_epoch`` and the distribution from the plan
job, and the verify and training jobs the ranks and sub-epochs. The training report and the pictures of the plan and
of the training are outputs too (they need matplotlib).

Needs torch, i6_core (importable, e.g. recipe/i6_core) and a RETURNN root with rnn.py (a source checkout
or the PyPI sdist unpacked; the wheel has none), given as ``RETURNN_ROOT`` in the environment or settings.py; RETURNN
runs in this Python (``sys.executable``), which needs dm-tree. Run: ``sis m -r config/planned_training.py``.
"""

import os
import sys

from sisyphus import gs, tk

from i6_shard.jobs import ComputeFileCostsJob, ShardPlanJob, TrainReportJob, VerifyShardingJob
from i6_shard.returnn_config import sharded_files_dataset, sharded_returnn_config, training_job
from shard_example import TinyHdfDataJob

NUM_RANKS = 2  # torchrun processes, one per CPU core here
PARTITION_EPOCH = 3  # sub-epochs per full epoch
NUM_EPOCHS = 6  # RETURNN's num_epochs (sub-epochs): two full epochs
FEATURE_DIM = 8  # TinyHdfDataJob's features


def get_model(**_kwargs):
    """A toy model: one linear layer that reconstructs its input features."""
    import torch

    return torch.nn.Linear(FEATURE_DIM, FEATURE_DIM)


def train_step(*, model, extern_data, **_kwargs):
    """MSE of the reconstructed features over the real frames of each sequence."""
    import torch
    import returnn.frontend as rf

    data = extern_data["data"]
    x, lens = data.raw_tensor, data.dims[1].dyn_size_ext.raw_tensor
    mask = torch.arange(x.shape[1])[None, :] < lens[:, None]
    rf.get_run_ctx().mark_as_loss(name="mse", loss=((model(x) - x) ** 2).sum(-1)[mask])


def run(prefix: str = "planned_training"):
    data = TinyHdfDataJob(num_files=24, seed=1)
    costs = ComputeFileCostsJob(data.out_file_list, unit="frames")  # batch_size counts frames: balance by them
    config = {  # batching and sync are stated here only: the plan takes them from this config
        "backend": "torch",
        "behavior_version": 24,
        "batch_size": 2_000,
        "max_seqs": 8,
        "optimizer": {"class": "adam"},
        "learning_rate": 1e-3,
        "FEATURE_DIM": FEATURE_DIM,
        "extern_data": {"data": {"dim": FEATURE_DIM}},
        "torch_distributed": {"backend": "gloo"},
    }
    plan = ShardPlanJob.for_training(
        config,
        file_sizes=costs.out_file_costs,
        num_ranks=NUM_RANKS,
        num_epochs=NUM_EPOCHS,
        partition_epoch=PARTITION_EPOCH,
        distribution="balanced",
    )
    # plan=: the dataset takes num_shards, partition_epoch and the distribution from the plan job.
    train = sharded_files_dataset(
        costs.out_file_list, plan=plan, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    # config_opts: the verify job runs the dataset under the training's batching and sync, which its plan checks.
    # Ranks and sub-epochs: the plan job's, which the dataset reads its bins from.
    verify = VerifyShardingJob(train, config_opts=config)
    returnn_config = sharded_returnn_config(config, train, python_epilog=[get_model, train_step])
    job = training_job(
        returnn_config,
        device="cpu",
        cpu_rqmt=1,
        mem_rqmt=2,
        time_rqmt=1,
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(os.environ.get("RETURNN_ROOT") or getattr(gs, "RETURNN_ROOT", "/path/to/returnn")),
    )

    tk.register_output(f"{prefix}/plan.npz", plan.out_plan)
    tk.register_output(f"{prefix}/plan_report.txt", plan.out_report)
    tk.register_output(f"{prefix}/verify_ok", verify.out_ok)
    tk.register_output(f"{prefix}/learning_rates", job.out_learning_rates)  # needs the training's run task
    # What each rank really read and dropped, from RETURNN's per-rank logs, against the plan; and the two pictures.
    report = TrainReportJob.for_training(job, plan=plan.out_plan)
    tk.register_output(f"{prefix}/train_report.txt", report.out_report)
    tk.register_output(f"{prefix}/plan_plot.png", plan.out_plot)
    tk.register_output(f"{prefix}/train_plot.png", report.out_plot)


def py():
    run()

"""ShardPlanJob with distribution "equal_steps" and the engine options (torch_distributed, max_seq_length): it plans
through the same request as the command line, writes the same plan file, and the new options at their default keep
the job's hash."""

import os

import numpy as np
import pytest

from tests.deps import H5PY_REASON
from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)
pytest.importorskip("h5py", reason=H5PY_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import cli, core  # noqa: E402
from i6_shard.core.io.plan_file import read_plan_head  # noqa: E402
from i6_shard.core.io.file_costs import collect_file_costs, save_file_costs  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402

from ..hdf_data import write_tiny_hdf_files  # noqa: E402

LEVELS = {"sync": [{"group": "world", "type": "param", "every": 2}]}


def test_the_job_plans_equal_steps_as_the_command_line_does(work_dir):
    files = write_tiny_hdf_files(str(work_dir / "data"), num_files=18, seed=2, frames=(1, 50), max_seqs=12)
    costs = str(work_dir / "costs.npz")
    save_file_costs(collect_file_costs(files, unit="frames", num_procs=1), costs)
    job = ShardPlanJob(
        tk.Path(costs),
        num_shards=3,
        partition_epoch=2,
        num_epochs=4,
        distribution="equal_steps",
        batch_size=90,
        max_seqs=3,
        torch_distributed=LEVELS,
        max_seq_length=40,
        plot=False,
    )
    run_job(job)
    out = str(work_dir / "cli")
    args = ["plan", "--sizes", costs, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4"]
    args += ["--distribution", "equal_steps", "--batch-size", "90", "--max-seqs", "3", "--max-seq-length", "40"]
    assert cli.main(args + ["--torch-distributed", repr(LEVELS), "--no-plot", "-o", out]) == 0
    with open(job.out_plan.get_path(), "rb") as a, open(os.path.join(out, core.PLAN_FILE), "rb") as b:
        assert a.read() == b.read()
    head = read_plan_head(job.out_plan.get_path())
    assert head.settings.distribution == "equal_steps" and head.engine_settings["torch_distributed"] == LEVELS
    assert np.load(job.out_plan.get_path())["engine_settings"].shape == ()


def test_the_engine_options_at_their_default_keep_the_hash(work_dir):
    path = tk.Path("/data/s.npz")
    plain = ShardPlanJob(path, num_shards=2, partition_epoch=2, num_epochs=2)
    given = ShardPlanJob(
        path, num_shards=2, partition_epoch=2, num_epochs=2, torch_distributed=None, max_seq_length=None
    )
    other = ShardPlanJob(path, num_shards=2, partition_epoch=2, num_epochs=2, batch_size=10, max_seq_length=40)
    assert plain._sis_id() == given._sis_id() != other._sis_id()

"""ShardPlanJob(lengths=...): the sequence lengths of a costs archive for a plan cut by another archive, an input
of the job, checked when the graph is built; without it the job ids stay the pinned ones."""

import json
import os

import pytest

from tests.cli.test_plan_lengths import BATCH_SIZE, _archives
from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import cli  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402


def test_without_lengths_the_pinned_id_holds_and_with_it_the_archive_is_an_input(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, lengths=None)
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"  # pinned in test_plan.py
    costs = tk.Path("/data/corpus/file_costs.npz")
    with_lengths = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, lengths=costs, batch_size=5000)
    assert costs in with_lengths._sis_inputs and costs not in job._sis_inputs
    plain = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, batch_size=5000)
    assert len({job._sis_id(), with_lengths._sis_id(), plain._sis_id()}) == 3


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        ("costs.npz", ValueError, r"lengths='costs.npz' is a relative path"),
        (tk.Path("/data/corpus/files.txt"), ValueError, r"lengths='/data/corpus/files.txt' is not a \.npz file"),
        (3, TypeError, r"lengths=3 must be a tk.Path or str"),
    ],
)
def test_a_bad_lengths_archive_is_refused_when_the_graph_is_built(work_dir, lengths, error, match):
    with pytest.raises(error, match=match):
        ShardPlanJob(
            tk.Path("/data/corpus/file_sizes.npz"), num_shards=8, partition_epoch=20, num_epochs=99, lengths=lengths
        )


def test_the_job_writes_what_the_command_line_writes(work_dir):
    sizes_path, costs_path, _ = _archives(work_dir)
    job = ShardPlanJob(
        tk.Path(sizes_path),
        num_shards=3,
        partition_epoch=2,
        num_epochs=4,
        batch_size=BATCH_SIZE,
        lengths=tk.Path(costs_path),
        plot=False,
    )
    run_job(job)
    out = str(work_dir / "cli")
    argv = ["plan", "--sizes", sizes_path, "--lengths", costs_path, "--batch-size", str(BATCH_SIZE), "--no-plot"]
    assert cli.main(argv + ["--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4", "-o", out]) == 0
    for name, path in (("plan.npz", job.out_plan), ("summary.json", job.out_summary)):
        with open(path.get_path(), "rb") as a, open(os.path.join(out, name), "rb") as b:
            assert a.read() == b.read(), name
    summary = json.load(open(job.out_summary.get_path()))
    assert summary["lengths_from"] == "costs.npz"
    assert job.out_dropped_fraction_predicted.get() == summary["dropped_fraction_predicted"] > 0

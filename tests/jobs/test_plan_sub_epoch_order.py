"""The sub-epoch dataset's ``seq_ordering`` reaches the plan: ``ShardPlanJob.for_training`` reads it from the config
(an HDFDataset's, simulated exactly; one it cannot mirror says inexact), a hand-built job is told it, and an order
RETURNN would fail on is refused when the graph is built, naming the value and the fix."""

import re
import warnings

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard.jobs import ShardPlanJob  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.reader import InexactPlanWarning  # noqa: E402

SIZES = "/data/costs.npz"


def config(sub_epoch_dataset, **extra):
    files = [f"/data/f{i}.hdf" for i in range(8)]
    dataset = sharded_files_dataset(files, sub_epoch_dataset=sub_epoch_dataset, partition_epoch=2, num_shards=2)
    return {"backend": "torch", "batch_size": 1000, "max_seqs": 10, "torch_distributed": {}, "train": dataset, **extra}


def for_training(cfg, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        job = ShardPlanJob.for_training(cfg, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=4, **options)
    return job, [str(w.message) for w in caught if issubclass(w.category, InexactPlanWarning)]


@pytest.mark.parametrize("order", ["laplace:.20", "sorted_reverse", "default", "sort_bin_shuffle:4:2"])
def test_for_training_plans_the_hdf_datasets_own_order_exactly(work_dir, order):
    job, inexact = for_training(config({"class": "HDFDataset", "seq_ordering": order}))
    assert job.plan_request.engine().seq_ordering == order
    assert job.plan_request.inexact_reason() is None and inexact == []
    by_hand = ShardPlanJob(
        tk.Path(SIZES),
        num_shards=2,
        partition_epoch=2,
        num_epochs=4,
        batch_size=1000,
        max_seqs=10,
        torch_distributed={},
        sub_epoch_seq_ordering=order,
    )
    assert job is by_hand


def test_the_builders_random_order_keeps_the_job_id(work_dir):
    job, _ = for_training(config({"class": "HDFDataset", "seq_ordering": "random"}))
    assert job is ShardPlanJob(
        tk.Path(SIZES),
        num_shards=2,
        partition_epoch=2,
        num_epochs=4,
        batch_size=1000,
        max_seqs=10,
        torch_distributed={},
    )


@pytest.mark.parametrize(
    "order, words",
    [
        ("laplace:x", "seq_ordering='laplace:x': RETURNN reads 'x' as an int of at least 1 (bins) or '.N'"),
        ("shuffle", "seq_ordering='shuffle' is not one RETURNN's get_seq_order_for_epoch knows"),
        ("random:a", "seq_ordering='random:a': RETURNN reads 'a' as an int"),
        ("sorted:3", "seq_ordering='sorted:3': 'sorted' takes 0 ':' option(s) at most"),
    ],
)
def test_an_order_returnn_fails_on_is_refused_when_the_graph_is_built(work_dir, order, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        for_training(config({"class": "HDFDataset", "seq_ordering": order}))
    with pytest.raises(ValueError, match=re.escape(words)):
        ShardPlanJob(
            tk.Path(SIZES), num_shards=2, partition_epoch=2, num_epochs=4, max_seqs=10, sub_epoch_seq_ordering=order
        )


def test_an_order_the_simulation_does_not_mirror_for_the_dataset_is_said_inexact(work_dir):
    meta = {
        "class": "MetaDataset",
        "datasets": {"feat": {"class": "HDFDataset", "files": "__files__", "seq_ordering": "laplace:.20"}},
        "data_map": {"data": ("feat", "data")},
        "seq_order_control_dataset": "feat",
    }
    job, inexact = for_training(config(meta))
    assert job.plan_request.engine().seq_ordering == "unknown"
    assert "seq_ordering is not known" in job.plan_request.inexact_reason()
    assert len(inexact) == 1 and "sub_epoch_seq_ordering=" in inexact[0]
    with pytest.raises(ValueError, match="not simulated exactly"):
        for_training(config(meta), distribution="equal_steps")


def test_what_the_simulation_does_not_mirror_is_in_the_plans_one_verdict(work_dir):
    """Several DataLoader workers interleaving their batches, and a PostprocessingDataset that maps the sub-epoch
    dataset's sequences: the reader gives them to the plan, whose verdict (said when the job is made, and in its
    simulation's outputs) names each."""
    import copy

    import numpy as np

    from i6_shard import core
    from i6_shard.core.pure.plan_sim import plan_simulation

    mapped = {"class": "PostprocessingDataset", "dataset": {"class": "HDFDataset"}, "map_seq": copy.copy}
    mapped["dataset"]["seq_ordering"] = "random"
    # (DataLoader workers that shard, from behavior_version 37: workers that do not would each train all the data)
    job, inexact = for_training(config(mapped, torch_dataloader_opts={"num_workers": 2}, behavior_version=37))
    reason = job.plan_request.inexact_reason()
    assert "num_workers=2" in reason and "map_seq" in reason
    assert len(inexact) == 1 and reason in inexact[0]
    assert job.plan_request.engine_record()["engine_inexact"] == list(job.plan_request.engine_inexact)
    request = job.plan_request
    plan = core.ShardPlan([f"f{i}" for i in range(8)], np.arange(1, 9), request.settings)
    lengths = [np.full(3, 50, dtype=np.int64) for _ in range(8)]
    sim = plan_simulation(plan, num_epochs=4, file_lengths=lengths, engine=request.engine())
    assert sim["exact"] is False and sim["reason"] == reason
    # without them the same training is simulated exactly
    plain, said = for_training(config({"class": "HDFDataset", "seq_ordering": "random"}))
    assert plain.plan_request.inexact_reason() is None and said == []

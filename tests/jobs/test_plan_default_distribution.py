"""ShardPlanJob.for_training without a distribution: equal_steps where the training's batching is known, the costs
archive has per-sequence lengths and the engine is simulated exactly; balanced, with a warning naming what is
missing, where the batching is known but equal_steps cannot cut; RETURNN's own cut where nothing is known. A
distribution given, by the recipe or by the training's dataset, is kept, with the job id it had."""

import warnings

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard.jobs import ComputeFileCostsJob, ComputeFileSizesJob, ShardPlanJob  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402

FILES = [f"/data/f{i}.hdf" for i in range(20)]
CONFIG = {
    "backend": "torch",
    "batch_size": 20_000,
    "max_seqs": 16,
    "accum_grad_multiple_step": 2,
    "torch_distributed": {"reduce_type": "param", "param_sync_step": 4},
    "dataset_random_seed_offset": 3,
}
#: The job for_training gives without a distribution, of costs with lengths: equal_steps (it was RETURNN's cut's,
#: igx2LcbXoIFR, before for_training chose; docs/jobs.md, "Job ids that moved").
EQUAL_STEPS_ID = "i6_shard/jobs/plan/ShardPlanJob.pNcyv7qftgXB"
#: The ids of the distributions given explicitly, as they were before for_training chose one.
GIVEN_IDS = {
    "returnn": "i6_shard/jobs/plan/ShardPlanJob.igx2LcbXoIFR",
    "balanced": "i6_shard/jobs/plan/ShardPlanJob.c6r2IWLoq6HW",
    "equal_steps": EQUAL_STEPS_ID,
}


def _plan(config=CONFIG, file_sizes=None, **options):
    file_sizes = ComputeFileCostsJob(FILES).out_file_costs if file_sizes is None else file_sizes
    return ShardPlanJob.for_training(
        config, file_sizes=file_sizes, num_ranks=4, num_epochs=8, **{"partition_epoch": 2, **options}
    )


def test_costs_with_lengths_and_the_batching_plan_equal_steps_silently(work_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job = _plan()
    assert job.plan_request.settings.distribution == "equal_steps"
    assert job._sis_id() == EQUAL_STEPS_ID
    assert job is _plan(distribution="equal_steps")


@pytest.mark.parametrize("distribution", sorted(GIVEN_IDS))
def test_a_distribution_given_keeps_its_job_id(work_dir, distribution):
    job = _plan(distribution=distribution)
    assert (job.plan_request.settings.distribution, job._sis_id()) == (distribution, GIVEN_IDS[distribution])


def test_lengths_given_beside_sizes_in_bytes_plan_equal_steps(work_dir):
    sizes = ComputeFileSizesJob(FILES).out_file_sizes
    job = _plan(file_sizes=sizes, lengths=ComputeFileCostsJob(FILES).out_file_costs)
    assert job.plan_request.settings.distribution == "equal_steps"


def test_sizes_in_bytes_plan_balanced_and_name_the_lengths_to_give(work_dir):
    sizes = ComputeFileSizesJob(FILES).out_file_sizes
    with pytest.warns(UserWarning, match=r"cuts with distribution='balanced', as distribution='equal_steps' needs ev"):
        job = _plan(file_sizes=sizes)
    assert job.plan_request.settings.distribution == "balanced"


def test_a_path_of_unknown_origin_plans_balanced_and_says_so(work_dir):
    with pytest.warns(UserWarning, match=r"file_sizes=/data/costs.npz is no ComputeFileCostsJob's out_file_costs.*"):
        job = _plan(file_sizes=tk.Path("/data/costs.npz"))
    assert job.plan_request.settings.distribution == "balanced"


def test_an_engine_not_simulated_exactly_plans_balanced_naming_why(work_dir):
    config = {**CONFIG, "torch_distributed": {"sync": [{"group": "node", "type": "grad"}]}}
    with pytest.warns(UserWarning, match=r"needs an engine the plan simulates exactly \(.*ranks_per_node"):
        job = _plan(config)
    assert job.plan_request.settings.distribution == "balanced"
    assert _plan(config, ranks_per_node=2).plan_request.settings.distribution == "equal_steps"


def test_unsharded_plans_balanced(work_dir):
    with pytest.warns(UserWarning, match=r"needs sharded ranks"):
        job = _plan(sharding="unsharded")
    assert job.plan_request.settings.distribution == "balanced"


def test_without_batching_the_default_stays_returnns_cut(work_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job = _plan({})
    assert job.plan_request.settings.distribution == "returnn"


def test_the_trainings_dataset_keeps_its_own_distribution(work_dir):
    dataset = sharded_files_dataset(
        FILES, partition_epoch=2, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}
    )
    job = ShardPlanJob.for_training(
        {**CONFIG, "train": dataset}, file_sizes=ComputeFileCostsJob(FILES).out_file_costs, num_ranks=4, num_epochs=8
    )
    assert job.plan_request.settings.distribution == "returnn"  # what the training's dataset cuts

"""ShardPlanJob.for_training: the plan job of a training takes its batching, sync, seeds and dataset settings from
the training's config (stated once), is the job a recipe gets by stating them to the job by hand (same id), refuses
an option that contradicts the config, and warns, naming it, where a setting cannot be passed exactly."""

import pickle
import warnings

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.jobs import ComputeFileSizesJob, ShardPlanJob  # noqa: E402
from i6_shard.returnn_config import sharded_files_dataset  # noqa: E402
from i6_shard.returnn_config.reader import InexactPlanWarning  # noqa: E402

SIZES = "/data/costs.npz"
CONFIG = {
    "backend": "torch",
    "batch_size": 20_000,
    "max_seqs": 16,
    "accum_grad_multiple_step": 2,
    "torch_distributed": {"reduce_type": "param", "param_sync_step": 4},
    "dataset_random_seed_offset": 3,
}


def test_the_config_states_batching_sync_and_seed_once(work_dir):
    job = ShardPlanJob.for_training(
        CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2, distribution="balanced"
    )
    by_hand = ShardPlanJob(
        tk.Path(SIZES),
        num_shards=4,
        partition_epoch=2,
        num_epochs=8,
        distribution="balanced",
        batch_size=20_000,
        max_seqs=16,
        accum_grad_multiple_step=2,
        random_seed_offset=3,
        **(
            {"torch_distributed": CONFIG["torch_distributed"]}
            if "torch_distributed" in core.PLAN_OPTION_DEFAULTS
            else {"reduce_type": "param", "param_sync_step": 4}
        ),
    )
    assert job is by_hand
    request = job.plan_request
    assert (request.batching.batch_size, request.batching.max_seqs) == (20_000, 16)
    assert (request.sync.reduce_type, request.sync.param_sync_step, request.sync.accum_grad_multiple_step) == (
        "param",
        4,
        2,
    )
    assert request.settings.random_seed_offset == 3


def test_without_batching_the_job_is_the_one_of_before(work_dir):
    """A config with no batching or sync gives the job it gave before for_training existed (a pinned id)."""
    job = ShardPlanJob.for_training(
        {}, file_sizes=tk.Path("/data/corpus/file_sizes.npz"), num_ranks=8, num_epochs=99, partition_epoch=20
    )
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"


def test_an_i6_core_config_is_read_with_its_post_config(work_dir):
    config = pytest.importorskip("i6_core.returnn.config", reason="needs i6_core on PYTHONPATH")
    rc = config.ReturnnConfig({"batch_size": 5000}, post_config={"max_seqs": 8})
    job = ShardPlanJob.for_training(rc, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=4, partition_epoch=2)
    assert (job.batch_size, job.max_seqs) == (5000, 8)


@pytest.mark.parametrize(
    "option, value",
    [("batch_size", 10_000), ("max_seqs", 32), ("reduce_type", "grad"), ("random_seed_offset", 0), ("num_shards", 2)],
)
def test_an_option_that_contradicts_the_config_is_refused(work_dir, option, value):
    with pytest.raises(ValueError, match=rf"{option}={value!r} is given, but the training's config states {option}="):
        ShardPlanJob.for_training(
            CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2, **{option: value}
        )


def test_the_dataset_in_the_config_gives_its_settings(work_dir):
    files = [f"/data/f{i}.hdf" for i in range(20)]
    dataset = sharded_files_dataset(
        files,
        partition_epoch=5,
        distribution="balanced",
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        extra_opts={"random_seed_offset": 7},
    )
    job = ShardPlanJob.for_training({**CONFIG, "train": dataset}, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=10)
    s = job.plan_request.settings
    assert (s.partition_epoch, s.distribution, s.random_seed_offset, s.num_shards) == (5, "balanced", 7, 2)
    assert job.batch_size == 20_000
    with pytest.raises(
        ValueError, match=r"partition_epoch=2 is given, but the config's train states partition_epoch=5"
    ):
        ShardPlanJob.for_training(
            {**CONFIG, "train": dataset}, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=10, partition_epoch=2
        )


def test_no_partition_epoch_without_a_dataset_is_named(work_dir):
    with pytest.raises(TypeError, match="give partition_epoch"):
        ShardPlanJob.for_training(CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8)


@pytest.mark.parametrize(
    "config, named",
    [
        ({"batch_size": {"data": 1000, "classes": 20}}, "batch_size={'data': 1000, 'classes': 20} is not passed"),
        ({"batch_size": 1000, "accum_grad_multiple_step": len}, "accum_grad_multiple_step=<built-in function len>"),
        ({"batch_size": 1000, "max_seq_length": 300}, "max_seq_length=300 drops sequences"),
        (
            {
                "batch_size": 1000,
                "torch_distributed": {
                    "sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]
                },
            },
            "is planned as param sync every 4 steps",
        ),
    ],
)
def test_what_cannot_be_passed_exactly_is_named(work_dir, config, named):
    from i6_shard import core

    if "max_seq_length" in config and "max_seq_length" in core.PLAN_OPTION_DEFAULTS:
        pytest.skip("the plan options take max_seq_length")
    if "torch_distributed" in config and "torch_distributed" in core.PLAN_OPTION_DEFAULTS:
        pytest.skip("the plan options take torch_distributed")
    with pytest.warns(InexactPlanWarning, match="the plan is not exactly this training's") as caught:
        ShardPlanJob.for_training(config, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2)
    assert named in str(caught[0].message)


def test_sizes_in_bytes_leave_the_batching_out_with_a_warning(work_dir):
    sizes = ComputeFileSizesJob(tk.Path("/data/files.txt")).out_file_sizes
    with pytest.warns(InexactPlanWarning, match=r"counts bytes, without sequence lengths.*batch_size=20000"):
        job = ShardPlanJob.for_training(CONFIG, file_sizes=sizes, num_ranks=4, num_epochs=8, partition_epoch=2)
    assert job.plan_request.batching is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with lengths the batching is simulated: no warning
        job = ShardPlanJob.for_training(
            CONFIG, file_sizes=sizes, num_ranks=4, num_epochs=8, partition_epoch=2, lengths=tk.Path(SIZES)
        )
    assert job.plan_request.batching.batch_size == 20_000


def test_a_job_pickled_without_its_request_rebuilds_it(work_dir):
    job = ShardPlanJob.for_training(CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2)
    import sisyphus.job

    request = job.plan_request
    del job.plan_request  # as a version before the job kept its request pickled it
    data = pickle.dumps(job)
    sisyphus.job.created_jobs.clear()  # a new manager process
    old = pickle.loads(data)
    assert old is not job and old.plan_request == request


def _training(tmp_path, plan_job, **dataset_opts):
    pytest.importorskip("i6_core.returnn", reason="needs i6_core on PYTHONPATH (clone it into recipe/)")
    import sys

    from i6_shard.returnn_config.i6core import sharded_returnn_config, training_job

    dataset = sharded_files_dataset(
        tk.Path(str(tmp_path / "files.txt")),
        plan=plan_job,
        sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
        **dataset_opts,
    )
    return training_job(
        sharded_returnn_config(CONFIG, dataset),
        num_gpus=4,
        num_epochs=8,
        returnn_version="1.20261022.211313",
        returnn_python_exe=tk.Path(sys.executable),
        returnn_root=tk.Path(str(tmp_path)),
    )


def test_the_training_of_the_plan_builds_without_a_prediction_gap(work_dir):
    from i6_shard.returnn_config import ConfigCheckWarning

    job = ShardPlanJob.for_training(CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _training(work_dir, job)
    assert not [w for w in caught if issubclass(w.category, ConfigCheckWarning) and "predicted loss" in str(w.message)]


def test_a_dataset_seed_other_than_the_plans_is_refused_when_the_graph_is_built(work_dir):
    job = ShardPlanJob.for_training(CONFIG, file_sizes=tk.Path(SIZES), num_ranks=4, num_epochs=8, partition_epoch=2)
    with pytest.raises(ValueError, match=r"the dataset has random_seed_offset=5, but the plan job has random_seed_off"):
        _training(work_dir, job, extra_opts={"random_seed_offset": 5})


def test_several_archives_and_weights_for_a_training(work_dir):
    archives = [tk.Path("/data/costs_A.npz"), tk.Path("/data/costs_B.npz")]
    job = ShardPlanJob.for_training(
        CONFIG, file_sizes=archives, num_ranks=4, num_epochs=8, partition_epoch=4, weights=[1, 2.5]
    )
    assert job.file_sizes == archives and job.weights == ("1", "2.5")
    assert job.plan_request.weights == ("1", "2.5") and job.plan_request.batching.batch_size == 20_000
    plain = ShardPlanJob.for_training(CONFIG, file_sizes=archives, num_ranks=4, num_epochs=8, partition_epoch=4)
    assert plain is not job  # the weights are hashed where given

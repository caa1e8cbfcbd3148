"""ShardPlanJob's ``returnn_version``: the job of before where it is not given (a pinned id), another job where it
is, whose request cuts as that release does; ``for_training`` reads it from ``returnn_root``."""

import warnings

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard.jobs import ShardPlanJob  # noqa: E402
from i6_shard.returnn_config.reader import InexactPlanWarning  # noqa: E402

from ..returnn_versions.releases import OLD_RELEASES, install  # noqa: E402

SIZES = "/data/corpus/file_sizes.npz"
OLDEST = OLD_RELEASES[0]


def test_without_a_release_the_job_keeps_its_id(work_dir):
    job = ShardPlanJob(tk.Path(SIZES), num_shards=8, partition_epoch=20, num_epochs=99)
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"
    assert ShardPlanJob(tk.Path(SIZES), num_shards=8, partition_epoch=20, num_epochs=99, returnn_version=None) is job
    assert ShardPlanJob.__sis_hash_exclude__["returnn_version"] is None
    assert job.returnn_version is None and job.plan_request.returnn_version is None


def test_a_release_is_another_job_that_cuts_as_it(work_dir):
    plain = ShardPlanJob(tk.Path(SIZES), num_shards=8, partition_epoch=20, num_epochs=99, distribution="returnn")
    old = ShardPlanJob(
        tk.Path(SIZES), num_shards=8, partition_epoch=20, num_epochs=99, distribution="returnn", returnn_version=OLDEST
    )
    assert old is not plain and old._sis_id() != plain._sis_id()
    assert old.returnn_version == OLDEST and old.plan_request.returnn_version == OLDEST


def test_a_release_that_is_none_is_refused_when_the_graph_is_built(work_dir):
    with pytest.raises(ValueError, match="returnn_version='1.20230101.0' is older than 1.20240620.64807"):
        ShardPlanJob(tk.Path(SIZES), num_shards=2, partition_epoch=2, num_epochs=4, returnn_version="1.20230101.0")


def test_for_training_reads_the_release_from_returnn_root(work_dir):
    root = install(OLDEST)
    job = ShardPlanJob.for_training(
        {}, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=4, partition_epoch=2, returnn_root=root
    )
    assert job.returnn_version is not None and job.returnn_version.startswith("1.20240620.")
    given = ShardPlanJob.for_training(
        {}, file_sizes=tk.Path(SIZES), num_ranks=2, num_epochs=4, partition_epoch=2, returnn_version=OLDEST
    )
    assert given.returnn_version == OLDEST
    both = ShardPlanJob.for_training(
        {},
        file_sizes=tk.Path(SIZES),
        num_ranks=2,
        num_epochs=4,
        partition_epoch=2,
        returnn_version=OLDEST,
        returnn_root="/elsewhere/returnn",
    )
    assert both is given  # the given release wins over the root's


def test_for_training_with_an_unknown_root_cuts_as_the_newest_and_says_so(work_dir, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        job = ShardPlanJob.for_training(
            {},
            file_sizes=tk.Path(SIZES),
            num_ranks=2,
            num_epochs=4,
            partition_epoch=2,
            returnn_root=str(tmp_path / "not_cloned_yet"),
        )
    assert job.returnn_version is None
    texts = [str(w.message) for w in caught if issubclass(w.category, InexactPlanWarning)]
    assert any("the plan cuts as the newest release does; give returnn_version=" in t for t in texts), texts


@pytest.mark.parametrize("planned_for, refused", [(None, True), (OLDEST, False), ("1.20240610.0", "older")])
def test_the_builder_refuses_a_plan_job_cut_for_a_release_that_cuts_otherwise(work_dir, planned_for, refused):
    from i6_shard.returnn_config import sharded_files_dataset

    if refused == "older":  # older than any supported release: the job itself refuses it
        with pytest.raises(ValueError, match="older than 1.20240620.64807"):
            ShardPlanJob(tk.Path(SIZES), num_shards=2, partition_epoch=2, num_epochs=4, returnn_version=planned_for)
        return
    job = ShardPlanJob(
        tk.Path(SIZES),
        num_shards=2,
        partition_epoch=2,
        num_epochs=4,
        distribution="returnn",
        returnn_version=planned_for,
    )

    def build():
        return sharded_files_dataset(
            [f"/data/f{i}.hdf" for i in range(8)],
            plan=job,
            sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"},
            returnn_version="1.20240620.64807",
        )

    if not refused:
        assert build()["partition_epoch"] == 2
        return
    with pytest.raises(ValueError, match="give the plan job returnn_version='1.20240620.64807'") as info:
        build()
    assert "as RETURNN (the newest) does, but the training runs RETURNN 1.20240620.64807" in str(info.value)

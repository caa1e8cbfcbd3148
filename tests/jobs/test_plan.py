"""ShardPlanJob with the real Sisyphus: the same bytes as ``python -m i6_shard plan``, the
plan RETURNN's own cut gives, headline variables, clear errors, stable hashes."""

import os
import re

import numpy as np
import pytest

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import cli, core  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402


def _sizes_file(directory, num_files=40, seed=3):
    keys = [f"/data/part-{i:03d}.hdf" for i in range(num_files)]
    path = os.path.join(directory, "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=core.io.lognormal_sizes(num_files, seed=seed)), path)
    return path


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("options, cli_args", [
    ({}, []),
    ({"seq_ordering": "default"}, ["--seq-ordering", "default"]),
    ({"random_seed_offset": 5, "distribution": "balanced"}, ["--random-seed-offset", "5", "--distribution", "balanced"]),
])
def test_outputs_equal_cli_byte_for_byte(work_dir, options, cli_args):
    sizes_path = _sizes_file(str(work_dir))
    job = ShardPlanJob(tk.Path(sizes_path), num_shards=4, partition_epoch=3, num_epochs=7, **options)
    run_job(job)
    out = str(work_dir / "cli")
    assert cli.main(["plan", "--sizes", sizes_path, "--num-shards", "4", "--partition-epoch", "3",
                     "--num-epochs", "7", "-o", out] + cli_args) == 0
    outputs = {core.PLAN_FILE: job.out_plan, core.SUMMARY_FILE: job.out_summary,
               core.REPORT_FILE: job.out_report}
    if core.reporting.matplotlib_available():
        outputs[core.PLOT_FILE] = job.out_plot
    for name, path in outputs.items():
        assert _read(path.get_path()) == _read(os.path.join(out, name)), name
    summary = __import__("json").loads(_read(job.out_summary.get_path()))
    assert job.out_max_imbalance.get() == summary["max_imbalance"]
    assert job.out_dropped_fraction.get() == summary["dropped_fraction"]
    assert isinstance(job.out_max_imbalance.get(), float)


def test_plan_is_returnns_cut(work_dir):
    """The stored plan gives, per rank and sub-epoch, the bins of RETURNN's own function."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    sizes_path = _sizes_file(str(work_dir), num_files=30, seed=7)
    job = ShardPlanJob(tk.Path(sizes_path), num_shards=3, partition_epoch=2, num_epochs=4, random_seed_offset=2)
    run_job(job)
    plan = core.load_plan(job.out_plan.get_path())
    fs = core.load_file_sizes(sizes_path)
    for full_epoch in range(2):
        files = list(fs.keys)
        np.random.RandomState(full_epoch + 1 + 2).shuffle(files)
        bins = DistributeFilesDataset._distribute_evenly_by_size(
            num_bins=6, file_sizes=fs.as_dict(), files_order=files)
        for rank in range(3):
            for sub in range(2):
                epoch = full_epoch * 2 + sub + 1
                assert plan.files_for(epoch=epoch, shard_index=rank) == bins[rank * 2 + sub]


def test_rerun_is_idempotent_and_leaves_no_temp_files(work_dir):
    job = ShardPlanJob(tk.Path(_sizes_file(str(work_dir))), num_shards=2, partition_epoch=2, num_epochs=4)
    run_job(job)
    out_dir = os.path.dirname(job.out_plan.get_path())
    before = {n: _read(os.path.join(out_dir, n)) for n in os.listdir(out_dir)}
    job.run()
    assert {n: _read(os.path.join(out_dir, n)) for n in os.listdir(out_dir)} == before
    assert not [n for n in before if n.startswith(".")]
    assert {"plan.npz", "summary.json", "report.txt", "max_imbalance", "dropped_fraction"} <= set(before)


def test_too_few_files_fail_clearly_and_write_nothing(work_dir):
    job = ShardPlanJob(tk.Path(_sizes_file(str(work_dir), num_files=10)), num_shards=4, partition_epoch=3,
                       num_epochs=3)
    with pytest.raises(ValueError, match="10 files cannot fill num_shards\\*partition_epoch=4\\*3=12 bins"):
        run_job(job)
    assert os.listdir(os.path.dirname(job.out_plan.get_path())) == []


def test_bad_options_fail_at_graph_construction(work_dir):
    with pytest.raises(ValueError, match="seq_ordering='sorted'"):
        ShardPlanJob(tk.Path("/data/s.npz"), num_shards=2, partition_epoch=2, num_epochs=2, seq_ordering="sorted")
    with pytest.raises(ValueError, match="num_shards=0"):
        ShardPlanJob(tk.Path("/data/s.npz"), num_shards=0, partition_epoch=2, num_epochs=2)
    with pytest.raises(ValueError, match="distribution='even'"):
        ShardPlanJob(tk.Path("/data/s.npz"), num_shards=2, partition_epoch=2, num_epochs=2, distribution="even")


def test_file_sizes_must_be_an_absolute_npz_path(work_dir):
    for bad in (123, None, ["/data/s.npz"]):
        with pytest.raises(TypeError, match=re.escape(f"file_sizes={bad!r} must be a tk.Path or str: pass Compute")):
            ShardPlanJob(bad, num_shards=2, partition_epoch=2, num_epochs=2)
    # out_file_list passed by mistake
    with pytest.raises(ValueError, match="file_sizes='/data/files.txt' is not a .npz file: pass ComputeFileSizesJob"
                                         "\\(...\\).out_file_sizes \\(not its out_file_list\\)"):
        ShardPlanJob(tk.Path("/data/files.txt"), num_shards=2, partition_epoch=2, num_epochs=2)
    # Sisyphus runs the task in the job's work dir: a relative str would be looked up there.
    with pytest.raises(ValueError, match="file_sizes='sizes.npz' is a relative path. .*give an absolute path or a "
                                         "tk.Path"):
        ShardPlanJob("sizes.npz", num_shards=2, partition_epoch=2, num_epochs=2)
    ShardPlanJob(tk.Path("sizes.npz"), num_shards=2, partition_epoch=2, num_epochs=2)  # relative to the setup dir
    ShardPlanJob("/data/sizes.npz", num_shards=2, partition_epoch=2, num_epochs=2)


def test_equivalent_seed_offsets_share_one_job(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100)
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, random_seed_offset=0) is job
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, random_seed_offset=1) is not job


def test_pinned_ids_and_what_is_hashed(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100)
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"
    # An option added later keeps old hashes at its default value.
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, distribution="returnn") is job
    args = {"file_sizes": sizes, "num_shards": 8, "partition_epoch": 20, "num_epochs": 100, "seq_ordering": "random",
            "random_seed_offset": None, "fixed_random_seed": None}
    assert job._sis_id().endswith("." + ShardPlanJob.hash(args))
    balanced = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, distribution="balanced")
    assert balanced._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.D9ofqMsIxKtP"
    other = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, random_seed_offset=1)
    assert len({job._sis_id(), balanced._sis_id(), other._sis_id()}) == 3

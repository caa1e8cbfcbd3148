"""ShardPlanJob with the real Sisyphus: the same bytes as ``python -m i6_shard plan``, the
plan RETURNN's own cut gives, headline variables, clear errors, stable hashes."""

import os
import re

import numpy as np
import pytest

from tests.deps import needs_matplotlib

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import cli, core  # noqa: E402
from i6_shard.core.io.demo import lognormal_sizes  # noqa: E402
from i6_shard.jobs import ShardPlanJob  # noqa: E402


def _sizes_file(directory, num_files=40, seed=3):
    keys = [f"/data/part-{i:03d}.hdf" for i in range(num_files)]
    path = os.path.join(directory, "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=lognormal_sizes(num_files, seed=seed)), path)
    return path


def _read(path):
    with open(path, "rb") as f:
        return f.read()


#: The plot, drawn twice per case (0.5 to 1 s each), is compared where its picture differs: the plain one and the
#: cache panels with and without CachedFile; the other cases compare the plan, summary and report, whose bytes hold
#: everything the plot is drawn from.
@pytest.mark.parametrize(
    "options, cli_args, plot",
    [
        ({}, [], True),
        ({"seq_ordering": "default"}, ["--seq-ordering", "default"], False),
        (
            {"random_seed_offset": 5, "distribution": "balanced"},
            ["--random-seed-offset", "5", "--distribution", "balanced"],
            False,
        ),
        (
            {"distribution": "flexible", "max_sub_epoch_deviation": 0.1},
            ["--distribution", "flexible", "--max-sub-epoch-deviation", "0.1"],
            False,
        ),
        (
            {"ranks_per_node": 2, "cache_size": 600_000_000},
            ["--ranks-per-node", "2", "--cache-size", "600000000"],
            True,
        ),
        pytest.param(
            {"ranks_per_node": 3, "preload_next_n_sub_epochs": 0, "cached_file": False},
            ["--ranks-per-node", "3", "--preload-next-n-sub-epochs", "0", "--no-cached-file"],
            True,
            marks=pytest.mark.slow,
        ),
        (
            {"ranks_per_node": 2, "sub_epoch_constant_bytes": 4096},
            ["--ranks-per-node", "2", "--sub-epoch-constant-bytes", "4096"],
            False,
        ),
    ],
)
@needs_matplotlib
def test_outputs_equal_cli_byte_for_byte(work_dir, options, cli_args, plot):
    sizes_path = _sizes_file(str(work_dir))
    job = ShardPlanJob(tk.Path(sizes_path), num_shards=4, partition_epoch=3, num_epochs=7, plot=plot, **options)
    run_job(job)
    out = str(work_dir / "cli")
    assert (
        cli.main(
            [
                "plan",
                "--sizes",
                sizes_path,
                "--num-shards",
                "4",
                "--partition-epoch",
                "3",
                "--num-epochs",
                "7",
                "-o",
                out,
            ]
            + cli_args
            + ([] if plot else ["--no-plot"])
        )
        == 0
    )
    outputs = {core.PLAN_FILE: job.out_plan, core.SUMMARY_FILE: job.out_summary, core.REPORT_FILE: job.out_report}
    if plot:
        outputs[core.PLOT_FILE] = job.out_plot
    assert os.path.exists(os.path.join(out, core.PLOT_FILE)) == plot == hasattr(job, "out_plot")
    for name, path in outputs.items():
        assert _read(path.get_path()) == _read(os.path.join(out, name)), name
    summary = __import__("json").loads(_read(job.out_summary.get_path()))
    assert job.out_max_imbalance.get() == summary["max_imbalance"]
    assert job.out_dropped_fraction.get() == summary["dropped_fraction"]
    assert isinstance(job.out_max_imbalance.get(), float)
    if "ranks_per_node" in options:
        # Without CachedFile the node caches nothing: a peak of 0.
        peak = summary["cache_peak_bytes_per_node"]
        assert job.out_cache_peak_bytes_per_node.get() == peak and (peak > 0) == options.get("cached_file", True)
    else:
        assert not hasattr(job, "out_cache_peak_bytes_per_node") and "cache_peak_bytes_per_node" not in summary


@needs_matplotlib
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
        bins = DistributeFilesDataset._distribute_evenly_by_size(num_bins=6, file_sizes=fs.as_dict(), files_order=files)
        for rank in range(3):
            for sub in range(2):
                epoch = full_epoch * 2 + sub + 1
                assert plan.files_for(epoch=epoch, shard_index=rank) == bins[rank * 2 + sub]


@needs_matplotlib
@pytest.mark.slow
def test_rerun_is_idempotent_and_leaves_no_temp_files(work_dir):
    job = ShardPlanJob(tk.Path(_sizes_file(str(work_dir))), num_shards=2, partition_epoch=2, num_epochs=4)
    run_job(job)
    out_dir = os.path.dirname(job.out_plan.get_path())
    before = {n: _read(os.path.join(out_dir, n)) for n in os.listdir(out_dir)}
    job.run()
    assert {n: _read(os.path.join(out_dir, n)) for n in os.listdir(out_dir)} == before
    assert not [n for n in before if n.startswith(".")]
    assert {"plan.npz", "summary.json", "report.txt", "max_imbalance", "dropped_fraction"} <= set(before)


@needs_matplotlib
def test_too_few_files_fail_clearly_and_write_nothing(work_dir):
    job = ShardPlanJob(tk.Path(_sizes_file(str(work_dir), num_files=10)), num_shards=4, partition_epoch=3, num_epochs=3)
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
    for bad in (123, None, {"A": "/data/s.npz"}):  # (a list: one archive per corpus)
        with pytest.raises(TypeError, match=re.escape(f"file_sizes={bad!r} must be a tk.Path or str: pass Compute")):
            ShardPlanJob(bad, num_shards=2, partition_epoch=2, num_epochs=2)
    # out_file_list passed by mistake
    with pytest.raises(
        ValueError,
        match="file_sizes='/data/files.txt' is not a .npz file: pass ComputeFileSizesJob"
        "\\(...\\).out_file_sizes \\(not its out_file_list\\)",
    ):
        ShardPlanJob(tk.Path("/data/files.txt"), num_shards=2, partition_epoch=2, num_epochs=2)
    # Sisyphus runs the task in the job's work dir: a relative str would be looked up there.
    with pytest.raises(
        ValueError, match="file_sizes='sizes.npz' is a relative path. .*give an absolute path or a tk.Path"
    ):
        ShardPlanJob("sizes.npz", num_shards=2, partition_epoch=2, num_epochs=2)
    ShardPlanJob(tk.Path("sizes.npz"), num_shards=2, partition_epoch=2, num_epochs=2)  # relative to the setup dir
    ShardPlanJob("/data/sizes.npz", num_shards=2, partition_epoch=2, num_epochs=2)


def test_equivalent_seed_offsets_share_one_job(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100)
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, random_seed_offset=0) is job
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100, random_seed_offset=1) is not job


def test_pinned_ids_and_what_is_hashed(work_dir):
    """The ids were pinned when num_epochs had to include the preloaded sub-epoch: num_epochs=99 (the training's)
    with RETURNN's one preloaded sub-epoch is the job that num_epochs=100 was, so a recipe keeps its ids."""
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99)
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"
    # An option added later keeps old hashes at its default value.
    assert ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="returnn") is job
    assert (
        ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=98, preload_next_n_sub_epochs=2) is not job
    )  # the preload, once given, is hashed
    args = {
        "file_sizes": sizes,
        "num_shards": 8,
        "partition_epoch": 20,
        "num_epochs": 99,
        "seq_ordering": "random",
        "random_seed_offset": None,
        "fixed_random_seed": None,
    }
    assert job._sis_id().endswith("." + ShardPlanJob.hash(args))
    balanced = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="balanced")
    assert balanced._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.D9ofqMsIxKtP"
    other = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, random_seed_offset=1)
    assert len({job._sis_id(), balanced._sis_id(), other._sis_id()}) == 3


def test_flexible_bound_hashes_only_when_not_the_default(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    flexible = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="flexible")
    assert flexible._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.cvqcuxHHeS7R"
    for same in (0.25, np.float64(0.25)):
        assert (
            ShardPlanJob(
                sizes,
                num_shards=8,
                partition_epoch=20,
                num_epochs=99,
                distribution="flexible",
                max_sub_epoch_deviation=same,
            )
            is flexible
        )
    plain = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, max_sub_epoch_deviation=0.25)
    assert plain._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"
    wider = ShardPlanJob(
        sizes,
        num_shards=8,
        partition_epoch=20,
        num_epochs=99,
        distribution="flexible",
        max_sub_epoch_deviation=np.float32(0.5),
    )
    assert wider._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.WWb5tAnslYwl"
    assert type(wider.max_sub_epoch_deviation) is float
    assert wider is ShardPlanJob(
        sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="flexible", max_sub_epoch_deviation=0.5
    )


def test_flexible_auto_is_another_job_and_takes_a_bound(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    auto = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="flexible_auto")
    flexible = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, distribution="flexible")
    assert auto.distribution == "flexible_auto" and auto._sis_id() != flexible._sis_id()
    capped = ShardPlanJob(
        sizes,
        num_shards=8,
        partition_epoch=20,
        num_epochs=99,
        distribution="flexible_auto",
        max_sub_epoch_deviation=0.5,
    )
    assert capped._sis_id() != auto._sis_id()  # the most it may choose: another plan


def test_numpy_numbers_are_the_job_of_python_numbers(work_dir):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99)
    assert (
        ShardPlanJob(
            sizes,
            num_shards=np.int64(8),
            partition_epoch=np.int32(20),
            num_epochs=np.uint16(99),
            random_seed_offset=np.int64(0),
            plot=np.bool_(True),
            mem_rqmt=np.float64(2),
        )
        is job
    )
    assert job._sis_id() == "i6_shard/jobs/plan/ShardPlanJob.t9Wa7fZSuTFs"
    seeded = ShardPlanJob(
        sizes, num_shards=np.int64(8), partition_epoch=20, num_epochs=99, fixed_random_seed=np.int64(7)
    )
    assert seeded is ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, fixed_random_seed=7)
    assert type(seeded.num_shards) is int and type(seeded.fixed_random_seed) is int


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"random_seed_offset": -5}, ValueError, "would shuffle with seed -4 .*use random_seed_offset >= -1"),
        ({"num_shards": np.float64(8)}, TypeError, "num_shards=np.float64\\(8.0\\) has type float64"),
        ({"plot": "no"}, TypeError, "plot='no' has type str; plot must be True or False"),
        ({"time_rqmt": -1}, ValueError, "time_rqmt=-1 must be a positive number \\(hours\\)"),
        ({"cpu_rqmt": 0}, ValueError, "cpu_rqmt=0 must be a positive int \\(CPUs\\)"),
        ({"max_sub_epoch_deviation": 1.0}, ValueError, "max_sub_epoch_deviation=1.0 must be in \\[0, 1\\)"),
        ({"max_sub_epoch_deviation": "0.1"}, TypeError, "max_sub_epoch_deviation='0.1' must be a float"),
    ],
)
def test_every_argument_is_checked_before_the_hash(work_dir, options, error, match):
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=100)
    args = {"file_sizes": sizes, "num_shards": 8, "partition_epoch": 20, "num_epochs": 100, **options}
    with pytest.raises(error, match=match):
        ShardPlanJob.hash(args)  # what Sisyphus calls first
    # The requests and plot are not hashed, so this id exists already and Sisyphus would hand out that
    # job without calling __init__: only the check in hash() sees the bad value.
    with pytest.raises(error, match=match):
        ShardPlanJob(**args)


def test_plot_false_declares_no_plot_and_is_its_own_job(work_dir):
    sizes_path = _sizes_file(str(work_dir))
    with_plot = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4)
    without = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, plot=False)
    assert without is not with_plot and not hasattr(without, "out_plot") and hasattr(with_plot, "out_plot")
    assert ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, plot=True) is with_plot
    run_job(without)
    assert sorted(os.listdir(os.path.dirname(without.out_plan.get_path()))) == [
        "dropped_fraction",
        "max_imbalance",
        "plan.npz",
        "report.txt",
        "summary.json",
    ]
    sizes = tk.Path("/data/corpus/file_sizes.npz")
    assert (
        ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=99, plot=False)._sis_id()
        == "i6_shard/jobs/plan/ShardPlanJob.LRHWQLLDatCg"
    )  # plot=False: a new id


def test_plot_true_fails_before_writing_anything_without_matplotlib(work_dir, monkeypatch):
    import sys

    sizes_path = _sizes_file(str(work_dir))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert not core.reporting.matplotlib_available()
    job = ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4)
    with pytest.raises(
        ImportError,
        match="ShardPlanJob\\(plot=True\\) declares out_plot, but matplotlib is not "
        "installed.*plot=False: another job, without out_plot",
    ):
        run_job(job)
    assert os.listdir(os.path.dirname(job.out_plan.get_path())) == []
    run_job(ShardPlanJob(tk.Path(sizes_path), num_shards=2, partition_epoch=2, num_epochs=4, plot=False))


def test_requests_are_sized_from_files_times_full_epochs(work_dir, monkeypatch):
    import sisyphus.job

    from i6_shard.jobs import plan as plan_module

    sizes = tk.Path(_sizes_file(str(work_dir), num_files=40))
    (task,) = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=3).tasks()
    assert task.mini_task  # 40 files x 2 full epochs (3 sub-epochs and 1 preloaded)
    sisyphus.job.created_jobs.clear()  # requests are not hashed: the same id, another object
    (task,) = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=3, time_rqmt=2).tasks()
    assert not task.mini_task and task.rqmt()["time"] == 2.0 and task.rqmt()["cpu"] == 1

    # Above the mini-task bound, a cluster task; the number of files comes from the archive's header.
    for bound, mini in ((80, True), (79, False)):  # 40 files x 2 full epochs
        with monkeypatch.context() as m:
            m.setattr(plan_module, "MINI_TASK_MAX_WORK", bound)
            sisyphus.job.created_jobs.clear()
            (task,) = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=3).tasks()
        assert task.mini_task is mini
    settings = core.PlanSettings(num_shards=2, partition_epoch=2, num_epochs=4)
    assert task.rqmt() == plan_module.plan_rqmt(num_files=40, settings=settings)[0]
    assert task.rqmt() != plan_module.plan_rqmt(num_files=None, settings=settings)[0]
    # The request grows with files x full epochs (x ranks unsharded).
    settings = core.PlanSettings(num_shards=8, partition_epoch=20, num_epochs=2000)
    small = plan_module.plan_rqmt(num_files=1_000_000, settings=settings)[0]
    many_epochs = plan_module.plan_rqmt(num_files=1_000_000, settings=settings.replace(num_epochs=20_000))[0]
    unsharded = plan_module.plan_rqmt(num_files=1_000_000, settings=settings.replace(distrib_shard_files=False))[0]
    assert many_epochs["mem"] > small["mem"] and many_epochs["time"] > small["time"]
    assert unsharded["mem"] > small["mem"]
    # Measured: 1M files x 20 full epochs, plan, report and plot: 23 s and 0.5 GB.
    measured = plan_module.plan_rqmt(num_files=1_000_000, settings=settings.replace(num_epochs=400))
    assert measured[0]["mem"] >= 2 * 0.5 and measured[0]["time"] >= 10 * 23 / 3600 and measured[1]
    # An archive whose header cannot be read: a mini task, whose run says what is wrong.
    sisyphus.job.created_jobs.clear()
    (task,) = ShardPlanJob(
        tk.Path(str(work_dir / "missing.npz")), num_shards=2, partition_epoch=2, num_epochs=3
    ).tasks()
    assert task.mini_task


def test_cache_options_hash_only_when_given_and_need_ranks_per_node(work_dir):
    sizes = tk.Path("/data/sizes/file_sizes.npz")
    job = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=40)
    cached = ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=40, ranks_per_node=4)
    assert cached is not job
    # The defaults of the other cache options hash as if absent; numpy numbers are plain.
    assert (
        ShardPlanJob(
            sizes, num_shards=8, partition_epoch=20, num_epochs=40, ranks_per_node=np.int64(4), cached_file=True
        )
        is cached
    )
    assert (
        ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=40, ranks_per_node=4, cache_size=10**9)
        is not cached
    )
    with pytest.raises(ValueError, match="cache_size describes the per-node cache: give ranks_per_node too"):
        ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=40, cache_size=10**9)
    with pytest.raises(ValueError, match="ranks_per_node=0 must be a positive int"):
        ShardPlanJob(sizes, num_shards=8, partition_epoch=20, num_epochs=40, ranks_per_node=0)


def test_sync_and_constant_bytes_hash_only_when_not_the_default(work_dir):
    sizes = tk.Path("/data/sizes/file_sizes.npz")
    kw = dict(num_shards=8, partition_epoch=20, num_epochs=40)
    job = ShardPlanJob(sizes, **kw)
    assert job._sis_id() == ShardPlanJob(sizes, **kw, reduce_type="grad", param_sync_step=None)._sis_id()
    param = ShardPlanJob(sizes, **kw, reduce_type="param", param_sync_step=np.int64(100))
    assert param._sis_id() != job._sis_id() and param.param_sync_step == 100 and type(param.param_sync_step) is int
    assert ShardPlanJob(sizes, **kw, reduce_type="param", param_sync_step=50)._sis_id() != param._sis_id()
    cached = ShardPlanJob(sizes, **kw, ranks_per_node=4)
    assert ShardPlanJob(sizes, **kw, ranks_per_node=4, sub_epoch_constant_bytes=0) is cached
    assert ShardPlanJob(sizes, **kw, ranks_per_node=4, sub_epoch_constant_bytes=10**9) is not cached
    with pytest.raises(ValueError, match="reduce_type='param' needs param_sync_step"):
        ShardPlanJob(sizes, **kw, reduce_type="param")


def test_a_batch_size_by_data_key_is_its_own_job(work_dir):
    """A dict of limits by data key is another training's batching than its smallest limit alone: another job."""
    sizes = tk.Path("/data/sizes/file_sizes.npz")
    kw = dict(num_shards=2, partition_epoch=2, num_epochs=4)
    by_key = ShardPlanJob(sizes, **kw, batch_size={"data": 2000, "classes": 50})
    assert by_key is not ShardPlanJob(sizes, **kw, batch_size=50) and by_key.batch_size == {"data": 2000, "classes": 50}
    assert by_key is ShardPlanJob(sizes, **kw, batch_size={"classes": 50, "data": 2000})
    assert ShardPlanJob(sizes, **kw, batch_size=50).batch_size == 50


def test_a_bound_without_the_flexible_distribution_is_refused(work_dir):
    sizes = tk.Path("/data/sizes/file_sizes.npz")
    with pytest.raises(
        ValueError,
        match="max_sub_epoch_deviation=0.1 bounds the sub-epoch sizes of "
        "distribution='flexible' only, but distribution='balanced'",
    ):
        ShardPlanJob(
            sizes, num_shards=8, partition_epoch=20, num_epochs=40, distribution="balanced", max_sub_epoch_deviation=0.1
        )


@pytest.mark.parametrize(
    "options, cli_args, message",
    [
        (
            {"cache_size": 10**9},
            ["--cache-size", "1000000000"],
            "cache_size describes the per-node cache: give ranks_per_node too",
        ),
        (
            {"distribution": "balanced", "max_sub_epoch_deviation": 0.1},
            ["--distribution", "balanced", "--max-sub-epoch-deviation", "0.1"],
            "max_sub_epoch_deviation=0.1 bounds",
        ),
        (
            {"preload_next_n_sub_epochs": -1},
            ["--preload-next-n-sub-epochs", "-1"],
            "preload_next_n_sub_epochs=-1 must be a non-negative int",
        ),
        ({"num_epochs": 0}, ["--num-epochs", "0"], "num_epochs=0 must be a positive int"),
    ],
)
def test_the_command_line_and_the_job_refuse_alike(work_dir, capsys, options, cli_args, message):
    """One PlanRequest checks the options of both: the same bad value, the same message."""
    sizes_path = _sizes_file(str(work_dir))
    args = {"num_shards": 2, "partition_epoch": 2, "num_epochs": 4, **options}
    with pytest.raises(ValueError) as info:
        ShardPlanJob(tk.Path(sizes_path), **args)
    assert message in str(info.value)
    argv = [
        "plan",
        "--sizes",
        sizes_path,
        "--num-shards",
        "2",
        "--partition-epoch",
        "2",
        "--num-epochs",
        "4",
        *cli_args,
        "-o",
        str(work_dir / "cli"),
    ]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == f"error: {info.value}\n"


def test_each_option_default_is_the_requests():
    """The job's hash exclusions are the options' defaults, as core.PlanRequest writes them."""
    for name, default in ShardPlanJob.__sis_hash_exclude__.items():
        if name in ("torch_distributed", "max_seq_length"):  # the request may not have them yet; default None
            assert core.PLAN_OPTION_DEFAULTS.get(name) is None and default is None, name
        elif name != "plot":
            assert core.PLAN_OPTION_DEFAULTS[name] == default, name
    import inspect

    params = inspect.signature(ShardPlanJob.__init__).parameters
    for name, default in core.PLAN_OPTION_DEFAULTS.items():
        assert params[name].default == default, name


@needs_matplotlib
def test_the_job_derives_its_request_in_one_pure_function(work_dir, monkeypatch):
    """Sisyphus hashes the arguments, then runs __init__: each builds the request from the same arguments by one pure
    function (PlanRequest.from_options, the one constructor), as i6_core's jobs derive their hash, with no state
    kept between them; the job sizes its task and runs with its request, also after pickling as Sisyphus stores
    jobs."""
    import pickle

    from i6_shard.jobs import plan as plan_module

    real, calls = core.PlanRequest.from_options.__func__, []

    def counting(cls, **options):
        calls.append(options)
        return real(cls, **options)

    monkeypatch.setattr(core.PlanRequest, "from_options", classmethod(counting))
    sizes = tk.Path(_sizes_file(str(work_dir)))
    job = ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=3, seq_ordering="default", plot=False)
    assert len(calls) == 2 and calls[0] == calls[1]  # hash, then __init__, from the same arguments
    assert job.plan_request.settings.num_epochs == 4  # the training's 3 and the preloaded one
    run_job(job)
    assert len(calls) == 2
    stored = pickle.loads(pickle.dumps(job))
    assert stored.plan_request == job.plan_request and len(calls) == 2
    from i6_shard.jobs import util

    mutable = [
        n
        for n, v in vars(plan_module).items()
        if isinstance(v, (list, dict, set)) and n not in vars(util) and not n.startswith("__")
    ]
    assert not mutable, mutable  # no module-level memo between hash and __init__
    ShardPlanJob(sizes, num_shards=2, partition_epoch=2, num_epochs=5, plot=False)
    assert len(calls) == 4 and calls[2]["num_epochs"] == 5  # other options: another request


def test_several_archives_and_weights_plan_as_the_command_line_does(work_dir):
    paths = []
    for name, n, seed in (("A", 30, 1), ("B", 12, 2)):
        keys = [f"/data/{name}/part-{i:03d}.hdf" for i in range(n)]
        paths.append(str(work_dir / f"{name}.npz"))
        core.save_file_sizes(core.FileSizes(keys=keys, sizes=lognormal_sizes(n, seed=seed)), paths[-1])
    options = dict(num_shards=2, partition_epoch=3, num_epochs=6, distribution="balanced", plot=False)
    job = ShardPlanJob([tk.Path(p) for p in paths], weights=[1, 2.5], corpus_names=["A", "B"], **options)
    assert job.weights == ("1", "2.5") and job.corpus_names == ("A", "B")
    run_job(job)
    out = str(work_dir / "cli")
    args = ["plan", "--sizes", paths[0], "--sizes", paths[1], "--weights", "1,2.5", "--num-shards", "2"]
    assert (
        cli.main(
            args
            + ["--partition-epoch", "3", "--num-epochs", "6", "--distribution", "balanced", "--no-plot"]
            + ["-o", out]
        )
        == 0
    )  # the corpus names are the archives' stems
    for name, path in ((core.PLAN_FILE, job.out_plan), (core.SUMMARY_FILE, job.out_summary)):
        assert _read(path.get_path()) == _read(os.path.join(out, name)), name
    single = ShardPlanJob(tk.Path(paths[0]), **options)
    assert single._sis_id() == ShardPlanJob(tk.Path(paths[0]), weights=None, corpus_names=None, **options)._sis_id()
    assert job._sis_id() != ShardPlanJob([tk.Path(p) for p in paths], weights=[1, 2], **options)._sis_id()

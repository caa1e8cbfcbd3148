"""Command line `plan`, `report` and `demo`: same bytes as the core writer, readable
output, clear errors."""

import os

import pytest

from tests.deps import needs_matplotlib

from i6_shard import core
from i6_shard.core.io.demo import lognormal_sizes
from i6_shard.cli import main


@needs_matplotlib
def test_plan_writes_what_write_plan_outputs_writes(tmp_path, sizes_file, capsys):
    path, keys, sizes = sizes_file
    out = tmp_path / "out"
    assert (
        main(
            [
                "plan",
                "--sizes",
                path,
                "--num-shards",
                "2",
                "--partition-epoch",
                "3",
                "--num-epochs",
                "7",
                "--random-seed-offset",
                "4",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "i6_shard plan report" in printed and f"plan    -> {out / 'plan.npz'}" in printed
    ref = tmp_path / "ref"
    ref.mkdir()
    plan = core.ShardPlan(keys, sizes, core.PlanSettings(num_shards=2, partition_epoch=3, random_seed_offset=4))
    core.write_plan_outputs(
        plan.with_settings(num_epochs=8, preloaded_sub_epochs=1),
        plan_path=str(ref / "plan.npz"),
        summary_path=str(ref / "summary.json"),
        report_path=str(ref / "report.txt"),
        plot_path=str(ref / "plot.png"),
    )
    for name in ("plan.npz", "summary.json", "report.txt", "plot.png"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert (out / "report.txt").read_text() in printed


@needs_matplotlib
def test_report_reprints_and_verifies_a_plan_directory(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    out = tmp_path / "out"
    main(
        [
            "plan",
            "--sizes",
            path,
            "--num-shards",
            "3",
            "--partition-epoch",
            "2",
            "--num-epochs",
            "4",
            "--unsharded",
            "--no-plot",
            "-o",
            str(out),
        ]
    )
    assert not (out / "plot.png").exists()
    capsys.readouterr()
    assert main(["report", str(out), "--verify", "--plot", str(tmp_path / "p.png")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith((out / "report.txt").read_text())
    assert "verified" in printed and (tmp_path / "p.png").exists()


def test_errors_are_one_line_with_exit_code_2(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    rc = main(
        [
            "plan",
            "--sizes",
            path,
            "--num-shards",
            "8",
            "--partition-epoch",
            "10",
            "--num-epochs",
            "1",
            "-o",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "60 files cannot fill num_shards*partition_epoch=8*10=80 bins" in err
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "python -m i6_shard plan" in capsys.readouterr().err


@needs_matplotlib
@pytest.mark.slow
def test_demo_prints_the_report_and_writes_the_plot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--num-files", "60", "--num-shards", "2", "--partition-epoch", "3", "--num-epochs", "6"]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "i6_shard_demo"
    assert "i6_shard plan report" in printed and "Dropped data estimate" in printed
    for name in ("files.txt", "file_sizes.npz", "plan.npz", "summary.json", "report.txt", "plot.png"):
        assert (out / name).exists(), name
    assert f"all demo outputs are in {out}" in printed
    assert len(os.listdir(out / "data")) == 60


def run_error(argv, capsys):
    """Run the CLI, expect exit code 2 and one line on stderr; return that line."""
    assert main(argv) == 2, argv
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


def test_bad_output_paths_fail_before_anything_is_planned_or_written(tmp_path, sizes_file, capsys, monkeypatch):
    path, _, _ = sizes_file
    monkeypatch.chdir(tmp_path)

    def fail(*args, **kwargs):
        raise AssertionError("planned before checking the output")

    monkeypatch.setattr(core, "load_file_sizes", fail)
    monkeypatch.setattr(core, "read_plan_file", fail)
    (tmp_path / "afile").write_text("keep me\n")
    base = ["plan", "--sizes", path, "--num-shards", "2", "--partition-epoch", "3", "--num-epochs", "6"]
    err = run_error(base + ["-o", "afile"], capsys)
    assert "'afile': it exists and is not a directory" in err
    assert (tmp_path / "afile").read_text() == "keep me\n"
    (tmp_path / "out" / "plan.npz").mkdir(parents=True)
    assert "'out/plan.npz': it is a directory" in run_error(base + ["-o", "out"], capsys)
    (tmp_path / "p1").mkdir()
    assert "'p1': the plot is a PNG image" in run_error(["report", "p1", "--plot", "p1"], capsys)
    assert "'out.jpg': the plot is a PNG image; give a path ending in .png" in run_error(
        ["report", "p1", "--plot", "out.jpg"], capsys
    )
    (tmp_path / "dir.png").mkdir()
    assert "cannot write 'dir.png': it is a directory" in run_error(["report", "p1", "--plot", "dir.png"], capsys)
    assert "directory 'nodir' does not exist" in run_error(["report", "p1", "--plot", "nodir/p.png"], capsys)
    assert sorted(os.listdir(tmp_path)) == ["afile", "dir.png", "file_sizes.npz", "out", "p1"]
    assert os.listdir(tmp_path / "out") == ["plan.npz"]


@pytest.mark.parametrize(
    "option, message",
    [
        (["--num-epochs", "0"], "num_epochs=0 must be a positive int"),
        (
            ["--random-seed-offset", "-5"],
            "full epoch 0 (epochs 1..3) would shuffle with seed -4 (full_epoch_0idx + 1 + random_seed_offset=-5)",
        ),
        (
            ["--random-seed-offset", str(2**32 - 3), "--num-epochs", "8"],  # and 1 preloaded
            "full epoch 2 (epochs 7..9) would shuffle with seed 4294967296",
        ),
        (["--fixed-random-seed", "-1"], "fixed_random_seed=-1 is a shuffle seed"),
        (["--same-seed-on-all-ranks"], "same_seed_on_all_ranks=True models distrib_shard_files=False"),
        (
            ["--distribution", "flexible", "--max-sub-epoch-deviation", "1"],
            "max_sub_epoch_deviation=1.0 must be in [0, 1)",
        ),
        (["--max-sub-epoch-deviation", "nan"], "max_sub_epoch_deviation=nan must be in [0, 1)"),
    ],
)
def test_plan_checks_every_setting_before_creating_the_output(tmp_path, sizes_file, capsys, option, message):
    path, _, _ = sizes_file
    out = tmp_path / "out"
    argv = [
        "plan",
        "--sizes",
        path,
        "--num-shards",
        "2",
        "--partition-epoch",
        "3",
        "--num-epochs",
        "6",
        *option,
        "-o",
        str(out),
    ]
    err = run_error(argv, capsys)
    assert message in err
    if "shuffle" in message:  # names the range, not numpy's "Seed must be between 0 and 2**32 - 1"
        assert "takes seeds in [0, 2**32)" in err and "Seed must be" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "option, message",
    [
        (["--num-files", "3"], "3 files cannot fill num_shards*partition_epoch=4*4=16 bins"),
        (["--num-files", "-1"], "--num-files -1: generate at least one file"),
        (["--num-files", "0"], "--num-files 0: generate at least one file"),
        (["--seed", "-1"], "--seed -1: the generator takes seeds in [0, 2**32)"),
        (["--num-epochs", "0"], "num_epochs=0 must be a positive int"),
        (["--random-seed-offset", "-9"], "would shuffle with seed -8"),
        (
            ["--unsharded", "--num-shards", "64", "--random-seed-offset", str(2**32 - 63 * 16127)],
            "+ rank*16127 on rank 63",
        ),
    ],
)
def test_demo_checks_every_option_before_writing_anything(tmp_path, capsys, monkeypatch, option, message):
    monkeypatch.chdir(tmp_path)
    err = run_error(["demo", *option], capsys)
    assert message in err
    assert os.listdir(tmp_path) == []  # not even the output directory


def test_check_enough_files_hint_without_shards_to_drop(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = run_error(["demo", "--num-files", "3", "--num-shards", "1"], capsys)
    assert (
        "Lower partition_epoch to at most 3, or split the data into more files." in err
        and "shards" not in err.split("sub-epoch.")[1]
    )


def test_unsharded_same_seed_on_all_ranks_reports_the_overlap(tmp_path, sizes_file, capsys):
    path, keys, sizes = sizes_file
    out = tmp_path / "out"
    assert (
        main(
            [
                "plan",
                "--sizes",
                path,
                "--num-shards",
                "3",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "4",
                "--unsharded",
                "--same-seed-on-all-ranks",
                "--random-seed-offset",
                "7",
                "--no-plot",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "the same random_seed_offset on every rank" in printed
    assert "all 3 ranks read the same files in the same order" in printed
    plan = core.load_plan(out / "plan.npz", verify=True)
    assert plan.settings.same_seed_on_all_ranks and plan.settings.random_seed_offset == 7
    assert plan.files_for(epoch=3, shard_index=0) == plan.files_for(epoch=3, shard_index=2)


def test_plan_takes_the_flexible_bound(tmp_path, capsys):
    """--max-sub-epoch-deviation reaches the flexible cut: the stored plan has that bound and its bins,
    which differ from those of the default bound on files beyond a rank's share."""
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(24)]
    sizes = lognormal_sizes(24, seed=5, sigma=1.0)
    sizes[7] = int(sizes.sum()) // 4  # twice a rank's share of a sub-epoch (2 ranks, 2 sub-epochs)
    path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=sizes), path)
    plans = {}
    for bound in ("0.05", "0.5"):
        out = tmp_path / bound
        assert (
            main(
                [
                    "plan",
                    "--sizes",
                    path,
                    "--num-shards",
                    "2",
                    "--partition-epoch",
                    "2",
                    "--num-epochs",
                    "8",
                    "--distribution",
                    "flexible",
                    "--max-sub-epoch-deviation",
                    bound,
                    "--no-plot",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        plans[bound] = core.load_plan(str(out / "plan.npz"), verify=True)
        settings = core.PlanSettings(
            num_shards=2,
            partition_epoch=2,
            num_epochs=9,
            distribution="flexible",
            max_sub_epoch_deviation=float(bound),
            preloaded_sub_epochs=1,
        )
        assert plans[bound].settings == settings
        expected = core.ShardPlan(keys, sizes, settings)
        for k in range(4):
            got, want = plans[bound].layout(full_epoch_0idx=k), expected.layout(full_epoch_0idx=k)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    capsys.readouterr()
    layouts = [[p.layout(full_epoch_0idx=k)[1].tolist() for k in range(4)] for p in plans.values()]
    assert layouts[0] != layouts[1]


def test_a_bound_without_the_flexible_distribution_is_refused(tmp_path, capsys):
    from i6_shard.cli import main

    assert (
        main(
            [
                "plan",
                "--sizes",
                str(tmp_path / "missing.npz"),
                "--num-shards",
                "2",
                "--partition-epoch",
                "2",
                "--num-epochs",
                "2",
                "--max-sub-epoch-deviation",
                "0.1",
                "-o",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert (
        "max_sub_epoch_deviation=0.1 bounds the sub-epoch sizes of distribution='flexible' only, but "
        "distribution='returnn'" in capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()

"""``files``: what one rank reads in one sub-epoch, from the plan file, as the plan gives it; and the progress lines
that long commands print on stderr."""

import json

import pytest

from i6_shard import core
from i6_shard import cli
from i6_shard.cli import main
from i6_shard.core.io import progress

from tests.deps import needs_matplotlib

PLAN = ["--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4", "--no-plot"]


@pytest.mark.parametrize("unsharded", [False, True])
def test_files_prints_each_ranks_files_as_the_plan_gives_them(tmp_path, sizes_file, capsys, unsharded):
    out = str(tmp_path / "plan")
    assert main(["plan", "--sizes", sizes_file[0], *PLAN, "-o", out] + (["--unsharded"] if unsharded else [])) == 0
    capsys.readouterr()
    plan = core.load_plan(f"{out}/plan.npz")
    costs = dict(zip(sizes_file[1], sizes_file[2].tolist()))
    for epoch in range(1, 6):  # the 4 sub-epochs and the one RETURNN preloads after them
        for rank in range(3):
            want = plan.files_for(epoch=epoch, shard_index=rank)
            assert main(["files", out, "--rank", str(rank), "--epoch", str(epoch)]) == 0
            printed = capsys.readouterr()
            assert printed.out.splitlines() == want
            assert f"rank {rank}, sub-epoch {epoch} " in printed.err and f": {len(want)} files, " in printed.err
            assert main(["files", f"{out}/plan.npz", "--rank", str(rank), "--epoch", str(epoch), "--json"]) == 0
            got = json.loads(capsys.readouterr().out)
            assert got["keys"] == want and got["costs"] == [costs[k] for k in want]
            assert (got["epoch"], got["shard_index"], got["unit"]) == (epoch, rank, "bytes")
            assert got["total_cost"] == sum(got["costs"])
            assert got["bin_index"] == plan.bin_index(epoch=epoch, shard_index=rank)


@pytest.mark.parametrize(
    "option, message",
    [
        (["--rank", "3", "--epoch", "1"], "--rank 3: the plan has num_shards=3; use 0..2"),
        (["--rank", "0", "--epoch", "6"], "--epoch 6: the plan holds sub-epochs 1..5"),
        (["--rank", "0", "--epoch", "0"], "--epoch 0: the plan holds sub-epochs 1..5"),
    ],
)
def test_files_outside_the_plan_is_a_one_line_error(tmp_path, sizes_file, capsys, option, message):
    out = str(tmp_path / "plan")
    assert main(["plan", "--sizes", sizes_file[0], *PLAN, "-o", out]) == 0
    capsys.readouterr()
    assert main(["files", out, *option]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.startswith(f"error: {message}") and printed.err.count("\n") == 1


def test_files_of_a_file_that_is_no_plan_is_an_error(tmp_path, capsys):
    bad = tmp_path / "plan.npz"
    bad.write_text("not a plan")
    assert main(["files", str(bad), "--rank", "0", "--epoch", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def _progress_lines(err: str, label: str) -> list:
    return [line for line in err.splitlines() if line.startswith(f"{label}: ")]


def test_long_steps_print_progress_on_stderr(tmp_path, capsys, monkeypatch):
    """With the interval at 0 every step reports at once: each long step is wired to a progress line, on stderr only
    (the interval itself, 2 s, is the Progress tests' concern)."""
    pytest.importorskip("h5py", reason="make-data writes HDF files: pip install h5py")
    monkeypatch.setattr(progress, "DEFAULT_INTERVAL", 0.0)
    monkeypatch.setattr(cli, "PROGRESS_INTERVAL", 0.0)
    data = tmp_path / "data"
    assert main(["make-data", "-o", str(data), "--num-files", "24"]) == 0
    printed = capsys.readouterr()
    assert _progress_lines(printed.err, "hdf files")[-1].startswith("hdf files: 24/24 files (100.0%)")
    assert "hdf files" not in printed.out
    assert main(["sizes", str(data / "files.txt"), "-o", str(tmp_path / "sizes.npz")]) == 0
    assert _progress_lines(capsys.readouterr().err, "file sizes")[-1].startswith("file sizes: 24/24 files")
    costs = str(tmp_path / "costs.npz")
    assert main(["costs", str(data / "files.txt"), "-o", costs, "--procs", "1"]) == 0
    assert _progress_lines(capsys.readouterr().err, "file costs")[-1].startswith("file costs: 24/24 files")
    plan = ["--num-shards", "2", "--partition-epoch", "2", "--num-epochs", "4", "--no-plot"]
    assert main(["plan", "--sizes", costs, *plan, "--distribution", "flexible_auto", "-o", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert _progress_lines(err, "plan")[-1].startswith("plan: 3/3 full epochs")  # 2 trained, 1 preloaded
    assert _progress_lines(err, "moved files")[-1].startswith("moved files: 2/2 full epochs")
    # The plan compares the distributions offered (flexible_auto is not) with a progress line each.
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert isinstance(summary["distributions"]["balanced"], dict)
    assert _progress_lines(err, "compare balanced")[-1].startswith("compare balanced: 2/2 full epochs")


@needs_matplotlib
def test_sizes_and_costs_draw_the_distribution(tmp_path, capsys):
    pytest.importorskip("h5py", reason="make-data writes HDF files: pip install h5py")
    data = tmp_path / "data"
    assert main(["make-data", "-o", str(data), "--num-files", "24"]) == 0
    share = ["--num-shards", "2", "--partition-epoch", "4"]
    assert (
        main(["sizes", str(data / "files.txt"), "-o", str(tmp_path / "s.npz"), "--plot", str(tmp_path / "s.png")]) == 0
    )
    costs = ["costs", str(data / "files.txt"), "-o", str(tmp_path / "c.npz"), "--procs", "1"]
    assert main(costs + ["--plot", str(tmp_path / "c.png"), *share]) == 0
    assert f"plot -> {tmp_path / 'c.png'}" in capsys.readouterr().out
    for name in ("s.png", "c.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The share marks need both counts, and a plot to go on; checked before any file is read.
    for extra in (["--num-shards", "2"], share):
        assert main(["sizes", str(data / "files.txt"), "-o", str(tmp_path / "x.npz"), *extra]) == 2
    assert not (tmp_path / "x.npz").exists()

"""Command line `plan`, `report` and `demo`: same bytes as the core writer, readable
output, clear errors."""

import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.cli import main


@pytest.fixture
def sizes_file(tmp_path):
    keys = [f"/corpus/part-{i:03d}.hdf" for i in range(60)]
    sizes = np.random.RandomState(3).randint(1, 10**6, size=60)
    path = str(tmp_path / "file_sizes.npz")
    core.save_file_sizes(core.FileSizes(keys=keys, sizes=sizes.astype(np.int64)), path)
    return path, keys, sizes


def test_plan_writes_what_write_plan_outputs_writes(tmp_path, sizes_file, capsys):
    path, keys, sizes = sizes_file
    out = tmp_path / "out"
    assert main(["plan", "--sizes", path, "--num-shards", "2", "--partition-epoch", "3", "--num-epochs", "7",
                 "--random-seed-offset", "4", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "i6_shard plan report" in printed and f"plan    -> {out / 'plan.npz'}" in printed
    ref = tmp_path / "ref"
    ref.mkdir()
    plan = core.ShardPlan(keys, sizes, num_shards=2, partition_epoch=3, random_seed_offset=4)
    core.write_plan_outputs(plan, num_epochs=7, plan_path=str(ref / "plan.npz"), summary_path=str(ref / "summary.json"),
                            report_path=str(ref / "report.txt"), plot_path=str(ref / "plot.png"))
    for name in ("plan.npz", "summary.json", "report.txt", "plot.png"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert (out / "report.txt").read_text() in printed


def test_report_reprints_and_verifies_a_plan_directory(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    out = tmp_path / "out"
    main(["plan", "--sizes", path, "--num-shards", "3", "--partition-epoch", "2", "--num-epochs", "4", "--unsharded",
          "--no-plot", "-o", str(out)])
    assert not (out / "plot.png").exists()
    capsys.readouterr()
    assert main(["report", str(out), "--verify", "--plot", str(tmp_path / "p.png")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith((out / "report.txt").read_text())
    assert "verified" in printed and (tmp_path / "p.png").exists()


def test_errors_are_one_line_with_exit_code_2(tmp_path, sizes_file, capsys):
    path, _, _ = sizes_file
    rc = main(["plan", "--sizes", path, "--num-shards", "8", "--partition-epoch", "10", "--num-epochs", "1",
               "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "60 files cannot fill num_shards*partition_epoch=8*10=80 bins" in err
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "python -m i6_shard plan" in capsys.readouterr().err


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

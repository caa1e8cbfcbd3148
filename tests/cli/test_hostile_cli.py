"""The command line under hostile input: list files that are FIFOs or devices, empty lists,
entries that share RETURNN's key, huge names, wrong output extensions, settings whose plan would
not fit in memory, and plan directories rewritten over earlier ones. Each is one clear error line
(exit status 2) with nothing written, or a whole new output set."""

import os
import sys

import numpy as np
import pytest

from tests.blocking import run_to_end
from tests.deps import needs_matplotlib

from i6_shard import core
from i6_shard.cli import main
from i6_shard.core.io.stale_sizes import check_sample_unchanged
from i6_shard.core.io.hdf_corpus import hdf_corpus_seq_counts
from tests.cli.conftest import plan_argv


def run_cli(*args, cwd=None):
    return run_to_end([sys.executable, "-m", "i6_shard", *map(str, args)], cwd=cwd)


def one_error_line(res):
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, (
        res.stderr[-2000:]
    )
    return res.stderr


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    paths = []
    for i in range(8):
        p = d / f"f{i}.hdf"
        p.write_bytes(b"x" * (100 * (i + 1)))
        paths.append(str(p))
    return paths


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_sizes_refuses_a_list_file_that_is_a_fifo_or_a_device(tmp_path, kind):
    path = tmp_path / "files.txt"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: reading would block forever
    else:
        os.symlink("/dev/zero", path)  # reading would never end
    err = one_error_line(run_cli("sizes", path, "-o", tmp_path / "s.npz"))
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert f"file list {str(path)!r} is {what}, not a regular file" in err
    assert not (tmp_path / "s.npz").exists()


def test_sizes_refuses_leaves_that_are_directories(tmp_path, data):
    core.write_file_list(data + [str(tmp_path / "data")], tmp_path / "files.txt")
    res = run_cli("sizes", tmp_path / "files.txt", "-o", tmp_path / "s.npz")
    err = res.stderr
    assert res.returncode == 2 and err.startswith("error: 1 of 9 files are missing or unreadable")
    assert f"{str(tmp_path / 'data')!r}: is a directory, not a regular file" in err
    assert not (tmp_path / "s.npz").exists()


def test_sizes_refuses_an_empty_list_like_the_job(tmp_path):
    path = tmp_path / "files.txt"
    path.write_text("# only a comment\n\n   \n# and another\n")
    err = one_error_line(run_cli("sizes", path, "-o", tmp_path / "s.npz"))
    assert f"file list {str(path)!r} holds no entries (only blank or comment lines, or [])" in err
    assert not (tmp_path / "s.npz").exists()


def test_sizes_reports_entries_that_share_returnns_key(tmp_path):
    a_b, a = tmp_path / "a:b", tmp_path / "a"
    core.write_file_list([str(a_b), [str(a), "b"]], tmp_path / "files.json")  # no such files: refused before any stat
    err = one_error_line(run_cli("sizes", tmp_path / "files.json", "-o", tmp_path / "s.npz"))
    assert "has 1 RETURNN file key shared by entries with different files: entries 0" in err
    assert f"share key {str(a_b)!r}" in err and "Rename the files whose names hold ':'" in err
    assert not (tmp_path / "s.npz").exists()


def test_sizes_writes_zip_bytes_only_under_npz(tmp_path, data, monkeypatch, capsys):
    core.write_file_list(data, tmp_path / "files.txt")
    from i6_shard import core as core_mod

    monkeypatch.setattr(core_mod, "collect_file_sizes", lambda *a, **k: pytest.fail("stat-ed before the check"))
    for name in ("out.json", "out", "out.npz.json"):
        assert main(["sizes", str(tmp_path / "files.txt"), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert "a file sizes archive is a .npz file, but the name" in err and "give a name ending in .npz" in err
    assert sorted(os.listdir(tmp_path)) == ["data", "files.txt"]


@pytest.mark.slow
def test_huge_names_are_cut_in_the_error(tmp_path):
    names = [f"/nonexistent/{i}-" + "n" * 2_000_000 for i in range(20)]  # 40 MB of names
    (tmp_path / "files.txt").write_text("".join(n + "\n" for n in names))
    res = run_cli("sizes", tmp_path / "files.txt", "-o", tmp_path / "s.npz")
    assert res.returncode == 2 and res.stderr.startswith("error: 20 of 20 files are missing or unreadable")
    assert len(res.stderr) < 20_000, len(res.stderr)
    assert "chars]" in res.stderr
    assert not (tmp_path / "s.npz").exists()


@pytest.mark.slow
def test_a_plan_too_large_for_memory_is_refused_up_front_naming_the_size(tmp_path):
    core.save_file_sizes(core.FileSizes(keys=["/d/a"], sizes=np.array([5])), tmp_path / "s.npz")
    res = run_cli(
        "plan",
        "--sizes",
        tmp_path / "s.npz",
        "--num-shards",
        "1",
        "--partition-epoch",
        "1",
        "--num-epochs",
        "3999999999",
        "--no-plot",
        "-o",
        tmp_path / "out",
    )  # and 1 preloaded
    err = one_error_line(res)
    assert "num_epochs=4000000000 with 1 files needs 80,000,000,000 bytes (74.5 GiB) for the plan's arrays" in err
    assert "plan fewer sub-epochs" in err
    assert sorted(os.listdir(tmp_path)) == ["s.npz"]
    err = one_error_line(
        run_cli(
            "demo",
            "--num-files",
            "4",
            "--num-shards",
            "1",
            "--partition-epoch",
            "1",
            "--num-epochs",
            "3999999999",
            "-o",
            tmp_path / "demo",
        )
    )
    assert "num_epochs=4000000000 with 4 files needs" in err and not (tmp_path / "demo").exists()


@pytest.fixture
def sizes_file(tmp_path, data):
    path = tmp_path / "sizes.npz"
    core.save_file_sizes(core.collect_file_sizes(data), path)
    return path


@needs_matplotlib
def test_a_rerun_without_plot_leaves_no_older_plot(tmp_path, sizes_file, capsys):
    out = tmp_path / "out"
    assert main(plan_argv(sizes_file, out, "--num-epochs", "4")) == 0
    assert (out / "plot.png").exists()
    capsys.readouterr()
    assert main(plan_argv(sizes_file, out, "--num-epochs", "6", "--no-plot")) == 0
    assert sorted(os.listdir(out)) == [".i6_shard-set", "plan.npz", "report.txt", "summary.json"]
    assert core.load_plan(out / "plan.npz").settings.num_epochs == 7  # and the sub-epoch RETURNN preloads
    assert "plot    ->" not in capsys.readouterr().out


def test_plan_refuses_a_directory_with_other_files(tmp_path, sizes_file, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.log").write_text("keep\n")
    assert main(plan_argv(sizes_file, out, "--num-epochs", "4")) == 2
    err = capsys.readouterr().err
    assert "it holds 1 entry that is not part of it ('train.log')" in err and err.count("\n") == 1
    assert os.listdir(out) == ["train.log"]


@needs_matplotlib
def test_demo_reruns_into_its_own_directory_as_one_set(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [
        "demo",
        "--num-files",
        "12",
        "--num-shards",
        "2",
        "--partition-epoch",
        "2",
        "--num-epochs",
        "4",
        "--no-plot",
    ]
    assert main(argv) == 0
    assert main(argv[:-1] + ["--seed", "3"]) == 0  # with a plot now, other sizes
    out = tmp_path / "i6_shard_demo"
    assert sorted(os.listdir(out)) == [
        ".i6_shard-set",
        "data",
        "file_sizes.npz",
        "files.txt",
        "plan.npz",
        "plot.png",
        "report.txt",
        "summary.json",
    ]
    listed = core.read_file_list(out / "files.txt")
    assert listed == [os.path.join("i6_shard_demo", "data", f"part-{i:02d}.hdf") for i in range(12)]
    sizes = core.load_file_sizes(out / "file_sizes.npz")
    assert sizes.keys == listed and sizes.sizes.tolist() == [os.path.getsize(p) for p in listed]
    seqs = hdf_corpus_seq_counts(12, seed=3).tolist()  # real HDF files of that seed
    assert [_num_seqs(p) for p in listed] == seqs
    assert check_sample_unchanged(sizes, trees=listed, num_samples=12) == 12  # mtimes of the files there
    assert sorted(os.listdir(tmp_path)) == ["i6_shard_demo"]
    assert "all demo outputs are in" in capsys.readouterr().out


def _num_seqs(path):
    h5py = pytest.importorskip("h5py", reason="the demo writes HDF files with h5py: pip install h5py")
    with h5py.File(path, "r") as f:
        return int(f.attrs["numSeqs"])


@pytest.fixture(scope="module")
def hdf_costs(tmp_path_factory):
    """A small real HDF corpus, its list, and its frames costs archive."""
    pytest.importorskip("h5py", reason="make-data writes HDF files with h5py: pip install h5py")
    d = tmp_path_factory.mktemp("hostile_costs")
    assert main(["make-data", "-o", str(d / "data"), "--num-files", "8"]) == 0
    assert main(["costs", str(d / "data" / "files.txt"), "-o", str(d / "costs.npz")]) == 0
    return d


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["plan", "--num-shards", "1000000000000000000", "--partition-epoch", "1", "--num-epochs", "1"],
            "8 files cannot fill num_shards*partition_epoch=1000000000000000000*1",
        ),  # before the memory it would need
        (
            [
                "plan",
                "--num-shards",
                "2",
                "--partition-epoch",
                "1",
                "--num-epochs",
                "2",
                "--ranks-per-node",
                "1",
                "--cache-size",
                "1e308P",
            ],
            "cache size '1e308P' is more bytes than a cache can hold",
        ),
        (
            ["plan", "--num-shards", "2", "--partition-epoch", "1", "--num-epochs", "2", "--batch-size", str(10**30)],
            f"batch_size={10**30} is beyond any batch RETURNN makes",
        ),
        # RETURNN preloads a handful of sub-epochs; the plan holds them all, so a huge value ran for hours
        *[
            (
                [
                    "plan",
                    "--num-shards",
                    "2",
                    "--partition-epoch",
                    "1",
                    "--num-epochs",
                    "2",
                    "--preload-next-n-sub-epochs",
                    str(n),
                ],
                f"preload_next_n_sub_epochs={n} is more than 100: RETURNN would create that many sub-epoch datasets",
            )
            for n in (10**5, 10**9)
        ],
        (["costs", "LIST", "--frame-rate", "inf"], "frame_rate=inf (--frame-rate) is not a rate of frames per second"),
        (["costs", "LIST", "--unit", "steps", "--batch-size", str(10**30)], f"batch_size={10**30} is beyond any batch"),
    ],
)
def test_overflowing_options_are_one_line_naming_the_option(hdf_costs, tmp_path, capsys, argv, message):
    argv = [str(hdf_costs / "data" / "files.txt") if a == "LIST" else a for a in argv]
    argv += (
        ["--sizes", str(hdf_costs / "costs.npz"), "--no-plot", "-o", str(tmp_path / "out")]
        if argv[0] == "plan"
        else ["-o", str(tmp_path / "out.npz")]
    )
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("content", [b"", b"not an hdf file at all", b"\x89HDF\r\n\x1a\n" + b"\0" * 40])
def test_a_damaged_file_in_a_costs_pass_is_named(hdf_costs, tmp_path, capsys, content):
    """A truncated or non-HDF .hdf among good ones: one line naming that file, not h5py's bare message."""
    bad = tmp_path / "part-bad.hdf"
    bad.write_bytes(content)
    good = core.read_file_list(str(hdf_costs / "data" / "files.txt"))
    core.write_file_list(good[:3] + [str(bad)] + good[3:], str(tmp_path / "files.txt"))
    assert main(["costs", str(tmp_path / "files.txt"), "-o", str(tmp_path / "c.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "part-bad.hdf" in err and "cannot be read as a RETURNN HDF file" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "c.npz").exists()


@pytest.mark.parametrize("target, why", [("loop", "leads nowhere (a loop)"), ("nowhere", "its target is missing")])
@pytest.mark.parametrize("output", ["{link}", "{link}/sub"])
def test_an_output_under_a_link_that_leads_nowhere_is_named_with_the_fix(
    tmp_path, sizes_file, capsys, target, why, output
):
    """A symbolic link loop (or a dangling link) as the output directory, or on the way to it, is named as such:
    it said ``[Errno 17] File exists``, or that the link "exists and is not a directory"."""
    path = str(sizes_file)
    link = tmp_path / "loop"
    os.symlink(target, link)  # "loop" -> "loop" is a loop; "loop" -> "nowhere" dangles
    out = output.format(link=link)
    for argv in (
        [
            "plan",
            "--sizes",
            path,
            "--num-shards",
            "2",
            "--partition-epoch",
            "2",
            "--num-epochs",
            "2",
            "--no-plot",
            "-o",
            out,
        ],
        ["make-data", "--num-files", "4", "-o", out],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert "symbolic link that leads nowhere" in err and why.split("(")[-1].rstrip(")") in err, err
        assert "remove the link" in err and "Errno" not in err, err
    assert os.path.islink(link) and os.readlink(link) == target  # the link is left as it was

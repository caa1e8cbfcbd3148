"""`python -m i6_shard sizes` end to end in a subprocess: the sizes file holds what
RETURNN's DistributeFilesDataset computes from the same list file; on missing files
it fails and writes nothing."""

import os
import subprocess
import sys

import pytest

from i6_shard.core import load_file_sizes, write_file_list

distrib_files = pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")


def get_sub_epoch_dataset(files):
    return {"class": "HDFDataset", "files": files, "seq_ordering": "default"}


def returnn_file_sizes(list_path):
    ds = distrib_files.DistributeFilesDataset(
        files=list_path, get_sub_epoch_dataset=get_sub_epoch_dataset, use_worker_proc=False
    )
    ds._lazy_init_file_sizes()
    return ds._files, ds._file_sizes


def run_sizes(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "i6_shard", "sizes", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data é:x"
    d.mkdir()
    paths = []
    for idx in range(12):
        p = d / f"part {idx}.hdf"
        with open(p, "wb") as f:
            f.truncate(idx * 1000)
        paths.append(str(p))
    return paths


@pytest.mark.parametrize(
    "ext", [".txt", pytest.param(".json", marks=pytest.mark.slow), pytest.param(".py", marks=pytest.mark.slow)]
)
def test_sizes_file_equals_returnn_on_the_same_list(tmp_path, data, ext):
    trees = (
        data if ext == ".txt" else [(data[i], data[i + 1]) for i in range(0, 10, 2)] + [{"b": data[10], "a": data[0]}]
    )
    list_path = tmp_path / f"files{ext}"
    write_file_list(trees, list_path)
    out = tmp_path / "out" / "sizes.npz"
    out.parent.mkdir()
    res = run_sizes(list_path, "-o", out, "--threads", "3")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""  # quick work: no progress lines
    sizes = load_file_sizes(out)
    files, ref = returnn_file_sizes(str(list_path))
    assert sizes.keys == [distrib_files._get_key_for_file_tree(t) for t in files]
    assert sizes.as_dict() == ref
    assert f"{len(trees)} entries, {sum(ref.values()):,} bytes -> {out}" in res.stdout
    assert os.listdir(out.parent) == ["sizes.npz"]


def test_relative_names_resolve_in_the_working_directory(tmp_path, data):
    list_path = tmp_path / "rel.txt"
    write_file_list([os.path.relpath(p, tmp_path) for p in data], list_path)
    res = run_sizes("rel.txt", "-o", "s.npz", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert load_file_sizes(tmp_path / "s.npz").sizes.tolist() == [os.path.getsize(p) for p in data]


def test_missing_files_fail_listing_them_and_write_nothing(tmp_path, data):
    missing = [data[0] + ".gone", os.path.join(data[1], "x"), str(tmp_path / "nowhere.hdf")]
    list_path = tmp_path / "files.json"
    write_file_list(data + [(data[2], missing[0]), missing[1], {"k": missing[2]}], list_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    res = run_sizes(list_path, "-o", out_dir / "sizes.npz")
    assert res.returncode != 0
    assert res.stderr.startswith("error: 3 of 15 files are missing or unreadable")
    assert all(repr(m) in res.stderr for m in missing)
    assert os.listdir(out_dir) == []  # no output, no temp file left behind


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("files.csv", "a\n", "extension '.csv'"),
        ("nope.txt", None, "does not exist"),
        ("files.json", '{"a": "b"}', "needs a list"),
        ("files.py", "[('a', 'b')]", "RETURNN's .py parser fails"),
        ("files.json", '["a", null]', "entry 1 has a leaf of type NoneType"),
    ],
)
def test_bad_lists_give_one_clear_error(tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_text(content)
    res = run_sizes(tmp_path / name, "-o", tmp_path / "s.npz")
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "s.npz").exists()


def test_bad_thread_count(tmp_path, data):
    write_file_list(data, tmp_path / "f.txt")
    res = run_sizes(tmp_path / "f.txt", "-o", tmp_path / "s.npz", "--threads", "0")
    assert res.returncode == 2 and "num_threads=0" in res.stderr


def no_stat_calls(monkeypatch):
    """Make any stat work fail the test: errors about the output must come before it."""
    from i6_shard import core

    def fail(*args, **kwargs):
        raise AssertionError("stat-ed files before checking the output path")

    monkeypatch.setattr(core, "collect_file_sizes", fail)


def test_file_errors_are_one_line_and_come_before_any_stat(tmp_path, data, monkeypatch, capsys):
    from i6_shard.cli import main

    no_stat_calls(monkeypatch)
    write_file_list(data, tmp_path / "f.txt")
    (tmp_path / "d.txt").mkdir()
    (tmp_path / "outdir").mkdir()
    cases = [
        (["d.txt", "-o", "x.npz"], "file list 'd.txt' is a directory"),
        (["f.txt", "-o", "outdir"], "cannot write 'outdir': it is a directory; give a file path"),
        (["f.txt", "-o", "nodir/x.npz"], "cannot write 'nodir/x.npz': directory 'nodir' does not exist"),
        (["f.txt", "-o", "f.txt/x.npz"], "'f.txt' is not a directory"),
    ]
    monkeypatch.chdir(tmp_path)
    for argv, message in cases:
        assert main(["sizes", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err, (argv, err)
        assert ".tmp" not in err
    assert sorted(os.listdir(tmp_path)) == ["d.txt", "data é:x", "f.txt", "outdir"]


def test_unreadable_and_undecodable_lists_are_one_line_errors(tmp_path, data, monkeypatch, capsys):
    from i6_shard.cli import main
    from i6_shard.core.io import file_list

    (tmp_path / "latin1.txt").write_bytes("caf\u00e9.hdf\n".encode("latin-1"))
    assert main(["sizes", str(tmp_path / "latin1.txt"), "-o", str(tmp_path / "s.npz")]) == 2
    err = capsys.readouterr().err
    assert "latin1.txt' is not valid utf-8 text" in err and ".json" in err and err.count("\n") == 1

    write_file_list(data, tmp_path / "f.txt")

    def unreadable(path, *args, **kwargs):  # what open() raises on a file without read permission (not as root)
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(file_list, "open", unreadable, raising=False)
    assert main(["sizes", str(tmp_path / "f.txt"), "-o", str(tmp_path / "s.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: [Errno 13] Permission denied") and "f.txt" in err and err.count("\n") == 1
    assert not (tmp_path / "s.npz").exists()

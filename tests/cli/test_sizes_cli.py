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
    ds = distrib_files.DistributeFilesDataset(files=list_path, get_sub_epoch_dataset=get_sub_epoch_dataset,
                                              use_worker_proc=False)
    ds._lazy_init_file_sizes()
    return ds._files, ds._file_sizes


def run_sizes(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "i6_shard", "sizes", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)


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


@pytest.mark.parametrize("ext", [".txt", ".json", ".py"])
def test_sizes_file_equals_returnn_on_the_same_list(tmp_path, data, ext):
    trees = data if ext == ".txt" else [(data[i], data[i + 1]) for i in range(0, 10, 2)] + [{"b": data[10], "a": data[0]}]
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


@pytest.mark.parametrize("name,content,message", [
    ("files.csv", "a\n", "extension '.csv'"),
    ("nope.txt", None, "does not exist"),
    ("files.json", '{"a": "b"}', "needs a list"),
    ("files.py", "[('a', 'b')]", "RETURNN's .py parser fails"),
    ("files.json", '["a", null]', "entry 1 has a leaf of type NoneType"),
])
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

"""ComputeFileSizesJob with the real Sisyphus: outputs RETURNN can read, parallel parts that
merge to the same bytes as one task, hashes that ignore thread and task counts."""

import json
import os
import subprocess
import sys

import pytest

from tests.jobs.conftest import SISYPHUS_REASON, run_job

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

from sisyphus import tk  # noqa: E402

from i6_shard import core  # noqa: E402
from i6_shard.jobs import ComputeFileSizesJob  # noqa: E402


def _make_files(directory, sizes):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, size in enumerate(sizes):
        path = os.path.join(directory, f"f{i:02d}.hdf")
        with open(path, "wb") as f:
            f.write(b"x" * size)
        paths.append(path)
    return paths


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_inline_trees_with_paths(work_dir):
    paths = _make_files(str(work_dir / "data"), [3, 5, 7])
    files = [tk.Path(paths[0]), (paths[1], tk.Path(paths[2])), {"b": paths[0], "a": [paths[2]]}]
    job = ComputeFileSizesJob(files)
    assert [t.name() for t in job.tasks()] == ["run"] and list(job.tasks())[0].mini_task
    run_job(job)
    assert job.out_file_list.get_path().endswith("files.json")
    # RETURNN reads the list back as the same trees, with the same keys and sizes.
    from returnn.datasets.distrib_files import _get_key_for_file_tree

    trees = json.loads(_read_bytes(job.out_file_list.get_path()))
    assert trees == [paths[0], [paths[1], paths[2]], {"a": [paths[2]], "b": paths[0]}]
    sizes = core.load_file_sizes(job.out_file_sizes.get_path())
    assert sizes.keys == [_get_key_for_file_tree(t) for t in trees]
    assert sizes.sizes.tolist() == [3, 5 + 7, 7 + 3]


@pytest.mark.parametrize("ext", [".txt", ".json"])
def test_job_outputs_equal_cli_outputs(work_dir, ext):
    paths = _make_files(str(work_dir / "data"), [4, 0, 9, 4, 1])
    files = paths + [paths[0]] if ext == ".txt" else [paths[0], (paths[1], paths[2]), {"x": paths[3]}]
    list_path = str(work_dir / f"list{ext}")
    core.write_file_list(files, list_path)
    job = ComputeFileSizesJob(tk.Path(list_path))
    run_job(job)
    cli_out = str(work_dir / "cli_sizes.npz")
    subprocess.run([sys.executable, "-m", "i6_shard", "sizes", list_path, "-o", cli_out], check=True,
                   capture_output=True)
    assert _read_bytes(job.out_file_sizes.get_path()) == _read_bytes(cli_out)
    assert core.read_file_list(job.out_file_list.get_path()) == core.read_file_list(list_path)


def test_list_file_parallel_parts_equal_single_task(work_dir):
    paths = _make_files(str(work_dir / "data"), [1, 10, 100, 7, 0, 42, 5])
    list_path = str(work_dir / "list.txt")
    core.write_file_list(paths, list_path)
    single = ComputeFileSizesJob(tk.Path(list_path), num_parallel_tasks=1)
    run_job(single)
    # Same hash: thread and task counts do not change the result.
    parallel = ComputeFileSizesJob(tk.Path(list_path), num_threads=2, num_parallel_tasks=3)
    assert parallel._sis_id() == single._sis_id()
    assert parallel is single  # Sisyphus hands out one job per id; build a fresh one to see the parallel layout
    import sisyphus.job

    sisyphus.job.created_jobs.clear()
    parallel = ComputeFileSizesJob(tk.Path(list_path), num_threads=2, num_parallel_tasks=3)
    tasks = list(parallel.tasks())
    assert [(t.name(), len(t._args), t.mini_task) for t in tasks] == [("run", 3, False), ("merge", 1, True)]
    list_bytes, sizes_bytes = _read_bytes(single.out_file_list.get_path()), _read_bytes(single.out_file_sizes.get_path())
    os.unlink(single.out_file_list.get_path())
    os.unlink(single.out_file_sizes.get_path())
    parallel._sis_setup_directory()
    parallel.run(0)
    parallel.run(2)  # part 1 never ran (e.g. its task was killed): merge computes it
    assert not os.path.exists(parallel.out_file_sizes.get_path())
    parallel.merge()
    assert _read_bytes(parallel.out_file_list.get_path()) == list_bytes
    assert _read_bytes(parallel.out_file_sizes.get_path()) == sizes_bytes
    assert core.load_file_sizes(parallel.out_file_sizes.get_path()).sizes.tolist() == [1, 10, 100, 7, 0, 42, 5]
    assert core.read_file_list(parallel.out_file_list.get_path()) == paths
    parallel.merge()  # a rerun is idempotent
    assert _read_bytes(parallel.out_file_sizes.get_path()) == sizes_bytes


def test_large_lists_split_automatically(work_dir, monkeypatch):
    paths = _make_files(str(work_dir / "data"), [1] * 5)
    monkeypatch.setattr(ComputeFileSizesJob, "ENTRIES_PER_TASK", 2)
    job = ComputeFileSizesJob(paths)
    assert [(t.name(), len(t._args)) for t in job.tasks()] == [("run", 3), ("merge", 1)]
    run_job(job)
    assert job.out_file_list.get_path().endswith("files.txt")
    assert core.load_file_sizes(job.out_file_sizes.get_path()).sizes.tolist() == [1] * 5


def test_missing_files_leave_no_output(work_dir):
    paths = _make_files(str(work_dir / "data"), [1, 2])
    job = ComputeFileSizesJob(paths + [str(work_dir / "gone1.hdf"), str(work_dir / "gone2.hdf")])
    with pytest.raises(core.MissingFilesError, match="2 of 4 files are missing") as exc:
        run_job(job)
    assert "gone1.hdf" in str(exc.value) and "gone2.hdf" in str(exc.value)
    out_dir = os.path.dirname(job.out_file_sizes.get_path())
    assert os.listdir(out_dir) == []  # no output, no temporary file


def test_bad_input_fails_at_graph_construction(work_dir):
    with pytest.raises(TypeError, match="leaf of type int"):
        ComputeFileSizesJob(["a.hdf", ("b.hdf", 3)])
    with pytest.raises(ValueError, match="extension '.lst'"):
        ComputeFileSizesJob(tk.Path("/data/files.lst"))
    with pytest.raises(ValueError, match="num_parallel_tasks=0"):
        ComputeFileSizesJob(["/data/a.hdf"], num_parallel_tasks=0)
    # Entries .txt cannot hold go to .json.
    assert ComputeFileSizesJob(["/data/padded.hdf "]).out_file_list.get_path().endswith("files.json")
    assert ComputeFileSizesJob(["/data/\udcff.hdf"]).out_file_list.get_path().endswith("files.json")
    assert ComputeFileSizesJob(["/data/#1.hdf", "/data/ä.hdf"]).out_file_list.get_path().endswith("files.txt")
    assert ComputeFileSizesJob(tk.Path("/data/files.py")).out_file_list.get_path().endswith("files.json")


def test_pinned_ids(work_dir):
    assert ComputeFileSizesJob(tk.Path("/data/corpus/files.txt"))._sis_id() == \
        "i6_shard/jobs/sizes/ComputeFileSizesJob.v1KsfsLN7z2P"
    assert ComputeFileSizesJob(["/data/a.hdf", ("/data/b.hdf", "/data/c.hdf")], num_threads=4)._sis_id() == \
        "i6_shard/jobs/sizes/ComputeFileSizesJob.bpVqZkN5kPhE"


def test_empty_or_relative_inline_lists_fail_at_graph_construction(work_dir):
    with pytest.raises(ValueError, match=r"files=\[\] is empty: give the file trees of the dataset, or a tk.Path"):
        ComputeFileSizesJob([])
    # Sisyphus runs the task in the job's work dir: a relative str would be looked up there.
    with pytest.raises(ValueError, match=r"files holds 2 relative file names \(first 2: \['data/a.hdf', 'c.hdf'\]\)\. "
                                         r".*give an absolute path or a tk.Path"):
        ComputeFileSizesJob(["data/a.hdf", ("/data/b.hdf", "c.hdf")])
    with pytest.raises(TypeError, match="got str \\(wrap a list file's path in tk.Path\\)"):
        ComputeFileSizesJob("/data/files.txt")
    # A relative tk.Path is fine: Sisyphus resolves it against the setup dir.
    ComputeFileSizesJob([tk.Path("data/a.hdf")])


def test_relative_names_in_a_list_file_are_explained(work_dir, monkeypatch):
    paths = _make_files(str(work_dir / "data"), [1, 2])
    list_path = str(work_dir / "data" / "files.txt")
    core.write_file_list([paths[0], "f01.hdf", "sub/gone.hdf"], list_path)  # relative to the list's dir
    job = ComputeFileSizesJob(tk.Path(list_path))
    job._sis_setup_directory()
    monkeypatch.chdir(job._sis_path("work", abspath=True))  # where Sisyphus runs the task
    with pytest.raises(core.MissingFilesError) as exc:
        job.run()
    msg = str(exc.value)
    assert msg.startswith("2 of 3 files are missing or unreadable") and "'sub/gone.hdf'" in msg
    assert (f"2 of the missing names are relative in the list file {list_path}: they were looked up in "
            f"{job._sis_path('work', abspath=True)}, this job's work dir") in msg
    assert f"the list's directory {work_dir / 'data'}" in msg
    assert msg.endswith("Write absolute paths into the list file.")
    assert not os.path.exists(job.out_file_sizes.get_path())


def test_txt_lists_are_counted_without_being_read_as_trees(work_dir, monkeypatch):
    list_path = str(work_dir / "files.txt")
    with open(list_path, "w") as f:  # what RETURNN skips: blank lines, comments; it strips the rest
        f.write("# corpus\n/data/a.hdf\n\n  /data/b.hdf  \r\n   # indented comment\n\t\n/data/#c.hdf\n/data/d.hdf")
    monkeypatch.setattr(ComputeFileSizesJob, "ENTRIES_PER_TASK", 2)
    job = ComputeFileSizesJob(tk.Path(list_path))
    assert len(core.read_file_list(list_path)) == 4

    def no_read(path):
        raise AssertionError("tasks() read the whole list")

    monkeypatch.setattr(core, "read_file_list", no_read)
    assert [(t.name(), len(t._args)) for t in job.tasks()] == [("run", 2), ("merge", 1)]

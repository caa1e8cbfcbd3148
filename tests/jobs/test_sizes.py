"""ComputeFileSizesJob with the real Sisyphus: outputs RETURNN can read, parallel parts that
merge to the same bytes as one task, hashes that ignore thread and task counts."""

import json
import os
import subprocess
import sys

import pytest

from tests.blocking import returns_within, unblock_fifo
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
    subprocess.run(
        [sys.executable, "-m", "i6_shard", "sizes", list_path, "-o", cli_out], check=True, capture_output=True
    )
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
    list_bytes, sizes_bytes = (
        _read_bytes(single.out_file_list.get_path()),
        _read_bytes(single.out_file_sizes.get_path()),
    )
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
    assert (
        ComputeFileSizesJob(tk.Path("/data/corpus/files.txt"))._sis_id()
        == "i6_shard/jobs/sizes/ComputeFileSizesJob.v1KsfsLN7z2P"
    )
    assert (
        ComputeFileSizesJob(["/data/a.hdf", ("/data/b.hdf", "/data/c.hdf")], num_threads=4)._sis_id()
        == "i6_shard/jobs/sizes/ComputeFileSizesJob.bpVqZkN5kPhE"
    )


def test_empty_or_relative_inline_lists_fail_at_graph_construction(work_dir):
    with pytest.raises(ValueError, match=r"files=\[\] is empty: give the file trees of the dataset, or a tk.Path"):
        ComputeFileSizesJob([])
    # Sisyphus runs the task in the job's work dir: a relative str would be looked up there.
    with pytest.raises(
        ValueError,
        match=r"files holds 2 relative file names \(first 2: \['data/a.hdf', 'c.hdf'\]\)\. "
        r".*give an absolute path or a tk.Path",
    ):
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
    assert (
        f"2 of the missing names are relative in the list file {list_path}: they were looked up in "
        f"{job._sis_path('work', abspath=True)}, this job's work dir"
    ) in msg
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


# --- non-regular list files, list versions, split errors, key collisions, requests ---------------


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_list_file_that_is_no_regular_file_fails_in_the_task_naming_it(work_dir, kind):
    list_path = str(work_dir / "files.txt")
    unblock = None
    if kind == "fifo":
        os.mkfifo(list_path)

        unblock = unblock_fifo(list_path)
        what = "a FIFO \\(named pipe\\)"
    elif kind == "device":
        os.symlink("/dev/zero", list_path)  # would never end when read
        what = "a character device"
    else:
        os.mkdir(list_path)
        what = "a directory"
    job = ComputeFileSizesJob(tk.Path(list_path))
    # The manager calls tasks(): it must neither block nor raise (that would stop the manager and
    # every other job); one task runs, and fails naming the list.
    tasks = returns_within(lambda: list(job.tasks()), unblock=unblock)
    assert [(t.name(), len(t._args), t.mini_task) for t in tasks] == [("run", 1, True)]
    job._sis_setup_directory()
    with pytest.raises(ValueError, match=f"file list '{list_path}' is {what}, not a regular file"):
        returns_within(job.run, unblock=unblock)
    assert os.listdir(os.path.dirname(job.out_file_sizes.get_path())) == []


def test_an_empty_list_file_fails(work_dir):
    list_path = str(work_dir / "files.txt")
    with open(list_path, "w") as f:
        f.write("# only a comment\n\n")
    job = ComputeFileSizesJob(tk.Path(list_path))
    with pytest.raises(ValueError, match="file list '.*files.txt' holds no entries .*needs at least one file"):
        run_job(job)
    assert os.listdir(os.path.dirname(job.out_file_sizes.get_path())) == []


def test_merge_refuses_parts_of_another_version_of_the_list(work_dir):
    paths = _make_files(str(work_dir / "data"), [1, 2, 3, 4, 5, 6, 7, 8])
    list_path = str(work_dir / "list.txt")
    core.write_file_list(paths[:4], list_path)
    job = ComputeFileSizesJob(tk.Path(list_path), num_parallel_tasks=2)
    job._sis_setup_directory()
    job.run(0)
    job.run(1)
    # The list is rewritten while the job runs: as many entries (the counts add up), other files.
    core.write_file_list(paths[:2] + paths[6:], list_path)
    with pytest.raises(RuntimeError) as exc:
        job.merge()
    msg = str(exc.value)
    assert msg.startswith(
        f"2 of the 2 parts in {job._sis_path('work', abspath=True)} were computed from another "
        f"version of the file list {list_path}"
    )
    assert "part 0 (sizes.part-0000-of-0002." in msg and "part 1 (sizes.part-0001-of-0002." in msg
    assert "restore the list, or delete these part files" in msg
    assert not os.path.exists(job.out_file_sizes.get_path()) and not os.path.exists(job.out_file_list.get_path())
    # A part of the list as it is now is used; the stale ones are refused until deleted.
    job.run(0)
    with pytest.raises(RuntimeError, match="^1 of the 2 parts .*: part 1 "):
        job.merge()
    work = job._sis_path("work", abspath=True)
    names = sorted(os.listdir(work))
    assert len(names) == 3 and len({n.split(".")[2] for n in names}) == 2  # the digest is in the name
    for name in names:
        if name.startswith("sizes.part-0001-"):
            os.unlink(os.path.join(work, name))
    job.merge()  # computes the deleted part itself
    assert core.load_file_sizes(job.out_file_sizes.get_path()).sizes.tolist() == [1, 2, 7, 8]


def test_a_failing_part_names_its_entries_in_the_whole_list(work_dir):
    paths = _make_files(str(work_dir / "data"), [1] * 7)
    gone = str(work_dir / "data" / "gone.hdf")
    job = ComputeFileSizesJob(paths[:5] + [gone] + paths[5:], num_parallel_tasks=3)
    job._sis_setup_directory()
    job.run(0)
    job.run(1)  # entries 2..4: all there
    with pytest.raises(core.MissingFilesError) as exc:
        job.run(2)
    assert str(exc.value).startswith(
        "part 2 of 3 (task run.3, entries 5..7 of 8): 1 of 3 files are missing or unreadable"
    )
    assert "gone.hdf" in str(exc.value) and str(exc.value).endswith("nothing was written.")
    assert not any(".part-0002-" in n for n in os.listdir(job._sis_path("work", abspath=True)))
    with pytest.raises(core.MissingFilesError, match="^part 2 of 3 \\(task run.3, entries 5..7 of 8\\): 1 of 3 files"):
        job.merge()  # computes the missing part, and fails the same way
    assert os.listdir(os.path.dirname(job.out_file_sizes.get_path())) == []


def test_entries_sharing_returnns_key_are_refused(work_dir):
    with pytest.raises(
        ValueError,
        match="files has 1 RETURNN file key shared by entries with different files: "
        "entries 0 \\('/data/a:/b.hdf'\\) and 2 \\(\\('/data/a', '/b.hdf'\\)\\) "
        "share key '/data/a:/b.hdf'",
    ):
        ComputeFileSizesJob(["/data/a:/b.hdf", "/data/c.hdf", ("/data/a", "/b.hdf")])
    ComputeFileSizesJob(["/data/a:b.hdf", "/data/a:b.hdf", ("/data/a", "/data/b"), ["/data/a", "/data/b"]])
    # In a list file, the task finds them before it stats anything.
    d = str(work_dir / "data")
    list_path = str(work_dir / "list.json")
    core.write_file_list([f"{d}/a.hdf", f"{d}/x:", [f"{d}/x:", f"{d}/y"], [f"{d}/x", f":{d}/y"]], list_path)
    job = ComputeFileSizesJob(tk.Path(list_path))
    with pytest.raises(
        ValueError,
        match=f"file list '{list_path}' has 1 RETURNN file key shared .*: entries 2 "
        f"\\(\\['{d}/x:', '{d}/y'\\]\\) and 3 ",
    ):
        run_job(job)
    assert os.listdir(os.path.dirname(job.out_file_sizes.get_path())) == []


def test_numpy_counts_and_requests_are_plain_and_unhashed(work_dir):
    import numpy as np

    files = tk.Path("/data/corpus/files.txt")
    job = ComputeFileSizesJob(
        files,
        num_threads=np.int64(4),
        num_parallel_tasks=np.int32(2),
        time_rqmt=np.float64(2.5),
        mem_rqmt=np.int64(8),
        cpu_rqmt=np.int64(2),
    )
    assert job._sis_id() == "i6_shard/jobs/sizes/ComputeFileSizesJob.v1KsfsLN7z2P"  # the pinned id
    assert (job.num_threads, job.num_parallel_tasks) == (4, 2) and type(job.num_threads) is int
    assert job.given_rqmt == {"time": 2.5, "mem": 8, "cpu": 2}
    assert [type(v) for v in job.given_rqmt.values()] == [float, int, int]


@pytest.mark.parametrize(
    "name, value, error, match",
    [
        ("time_rqmt", 0, ValueError, "time_rqmt=0 must be a positive number \\(hours\\)"),
        ("mem_rqmt", "4G", TypeError, "mem_rqmt='4G' has type str; mem_rqmt must be a positive number \\(GB\\)"),
        ("mem_rqmt", float("nan"), ValueError, "mem_rqmt=nan must be a positive number"),
        ("cpu_rqmt", 1.5, TypeError, "cpu_rqmt=1.5 has type float; cpu_rqmt must be a positive int \\(CPUs\\)"),
        ("num_threads", True, TypeError, "num_threads=True has type bool"),
        ("num_parallel_tasks", 0, ValueError, "num_parallel_tasks=0 must be a positive int"),
    ],
)
def test_unhashed_arguments_are_checked_before_the_hash(work_dir, name, value, error, match):
    files = tk.Path("/data/corpus/files.txt")
    ComputeFileSizesJob(files)
    # Sisyphus hands out the job it already has for this id without calling __init__: only a check
    # in hash() sees the bad value.
    with pytest.raises(error, match=match):
        ComputeFileSizesJob(files, **{name: value})


def test_requests_are_sized_from_the_entries(work_dir, monkeypatch):
    from i6_shard.jobs.sizes import sizes_rqmt

    paths = _make_files(str(work_dir / "data"), [1] * 5)
    import sisyphus.job

    small = ComputeFileSizesJob(paths)
    (task,) = small.tasks()
    assert task.mini_task
    sisyphus.job.created_jobs.clear()  # requests are not hashed: the same id, another object
    given = ComputeFileSizesJob(paths, mem_rqmt=3)
    (task,) = given.tasks()  # a request given: a cluster task, the rest sized
    assert not task.mini_task and task.rqmt() == {"cpu": 1, "mem": 3.0, "time": 0.5}
    monkeypatch.setattr(ComputeFileSizesJob, "ENTRIES_PER_TASK", 2)
    trees = [(p, p) for p in paths]  # two files per entry
    run, merge = ComputeFileSizesJob(trees).tasks()
    assert len(run._args) == 3 and not run.mini_task and not merge.mini_task
    assert run.rqmt() == sizes_rqmt(num_entries=5, num_leaves=10, num_stat=4)
    assert merge.rqmt() == sizes_rqmt(num_entries=5, num_leaves=10, num_stat=10)
    # Memory grows with the whole list (every task reads it), time with the files a task stats.
    # Measured (see sizes_rqmt): 1390 bytes per two-file entry of a .json list; the request has room.
    big = sizes_rqmt(num_entries=10_000_000, num_leaves=20_000_000, num_stat=200_000)
    assert big["mem"] >= 1.5 * 10_000_000 * 1390 / 1e9
    assert sizes_rqmt(num_entries=10_000_000, num_leaves=20_000_000, num_stat=2_000_000)["time"] > big["time"] >= 0.5


def hdf_files_in(directory, pattern="*.hdf"):
    """A callable file list as RETURNN takes it: the files exist only when it is called."""
    import glob

    return sorted(glob.glob(os.path.join(directory, pattern)))


def test_a_callable_list_is_called_only_in_the_task(work_dir):
    import functools

    directory = str(work_dir / "later")
    files = functools.partial(hdf_files_in, tk.Path(directory))  # tk.Path arguments are resolved in the task
    job = ComputeFileSizesJob(files)
    # Hashed by function and arguments: another directory is another job, the same one the same job.
    assert ComputeFileSizesJob(functools.partial(hdf_files_in, tk.Path(directory))) is job
    assert ComputeFileSizesJob(functools.partial(hdf_files_in, tk.Path(directory), "*.h5")) is not job
    # The manager asks for the tasks before the files exist: it must not call the function.
    tasks = list(job.tasks())
    assert [t.name() for t in tasks] == ["run"] and not tasks[0].mini_task
    assert job.out_file_list.get_path().endswith("files.json")
    paths = _make_files(directory, [4, 9, 2])
    run_job(job)
    assert json.loads(_read_bytes(job.out_file_list.get_path())) == paths
    sizes = core.load_file_sizes(job.out_file_sizes.get_path())
    assert sizes.sizes.tolist() == [4, 9, 2]


def test_a_callable_list_is_checked(work_dir):
    import functools

    with pytest.raises(ValueError, match="files is .*<lambda>.*module-level function"):
        ComputeFileSizesJob(lambda: ["/data/a.hdf"])
    job = ComputeFileSizesJob(functools.partial(hdf_files_in, str(work_dir / "empty")))
    with pytest.raises(ValueError, match="returned an empty list; DistributeFilesDataset needs at least one file"):
        run_job(job)
    assert not os.path.exists(job.out_file_sizes.get_path())

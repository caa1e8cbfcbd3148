"""The costs pass under crafted files whose numbers, not their size, would drive memory: a seqLengths that
declares 10**11 sequences in a 2 KB HDF, one length of 2**40, lengths whose sum wraps int64, an OggZip
duration of 1e12 s or below 0, a manifest that inflates 1000-fold, and an arrow shard of a few hundred bytes
whose metadata claims 2**62 rows. Each is one line naming the file
and the fix (exit status 2), with the command's address space capped at 3 GB: memory follows the input's
size."""

import os
import resource
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tests.blocking import _cpu_ticks, run_to_end, wait_for_state

h5py = pytest.importorskip("h5py", reason="writes HDF files: pip install h5py")

#: The address space of the command under test: far below what any of the crafted numbers would allocate.
MEMORY_CAP = 3 << 30


def _hdf(path, lengths=None, *, shape=None):
    with h5py.File(path, "w") as f:
        if shape is not None:  # declared, never written: the file stays small
            f.create_dataset("seqLengths", shape=shape, dtype="int32", chunks=(1024, 2), fillvalue=5)
        else:
            f.create_dataset("seqLengths", data=np.array([[n, n] for n in lengths], dtype="int64"))
        f.create_dataset("inputs", shape=(0, 2), dtype="float32")


def _oggzip(path, durations, *, padding=0):
    name = os.path.splitext(os.path.basename(path))[0]
    entries = ",".join(
        f"{{'file': 'a{i}.ogg', 'seq_name': 's{i}', 'duration': {d!r}, 'text': ''}}" for i, d in enumerate(durations)
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{name}.txt", f"[{entries}]" + " " * padding)


def _arrow(path, lengths):
    pa = pytest.importorskip("pyarrow", reason="writes arrow shards: pip install pyarrow")

    table = pa.table({"length": pa.array(lengths, type=pa.int64())})
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def _arrow_rows(path, rows):
    """An arrow stream of one null column whose record batch claims ``rows`` rows: a few hundred bytes, since
    the row count is metadata (written for 123,457 rows, then that count rewritten)."""
    pa = pytest.importorskip("pyarrow", reason="writes arrow shards: pip install pyarrow")

    table = pa.table({"x": pa.nulls(123457)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    assert data.count(struct.pack("<q", 123457)) >= 1
    with open(path, "wb") as f:
        f.write(data.replace(struct.pack("<q", 123457), struct.pack("<q", rows)))


CASES = {
    "declared_shape": (
        lambda p: _hdf(p, shape=(10**11, 2)),
        ".hdf",
        "its seqLengths of shape [100000000000, 2] declares 800,000,000,000 bytes",
    ),
    "huge_length": (lambda p: _hdf(p, [2**40, 5]), ".hdf", "sequence 0 is 1,099,511,627,776 frames long"),
    "wrapping_sum": (lambda p: _hdf(p, [2**62] * 4), ".hdf", "sequence 0 is 4,611,686,018,427,387,904 frames long"),
    "huge_duration": (
        lambda p: _oggzip(p, [1.0, 1e12]),
        ".zip",
        "sequence 1 is 100,000,000,000,000 frames long, more than RETURNN's int32",
    ),
    "arrow_length": (lambda p: _arrow(p, [7, 2**40]), ".arrow", "sequence 1 is 1,099,511,627,776 frames long"),
    "arrow_rows": (
        lambda p: _arrow_rows(p, 2**62),
        ".arrow",
        "claims 4,611,686,018,427,387,904 sequences, more than 4,294,967,296 (2**32)",
    ),
    "negative_duration": (lambda p: _oggzip(p, [1.0, -2.5]), ".zip", "entry 1 of its manifest has duration -2.5"),
    "inflating_manifest": (
        lambda p: _oggzip(p, [1.0] * 10, padding=200 * 10**6),
        ".zip",
        "its manifest 'crafted.txt' declares 200,000,",
    ),
}


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


#: The memory cap proved in a child for every case in the full suite; the quick tier keeps the cheaper ones.
_SLOW_CASES = ("inflating_manifest", "arrow_rows", "wrapping_sum")


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in _SLOW_CASES else c for c in CASES])
def test_numbers_inside_a_file_do_not_drive_memory(tmp_path, case):
    write, ext, message = CASES[case]
    path = str(tmp_path / f"crafted{ext}")
    write(path)
    normal = str(tmp_path / "normal.hdf")
    _hdf(normal, [10, 20])
    (tmp_path / "files.txt").write_text(f"{normal}\n{path}\n")
    unit = ["--unit", "seqs"] if case == "arrow_rows" else ["--unit", "frames"]  # rows only: no length column
    column = ["--length-column", "length"] if ext == ".arrow" and case != "arrow_rows" else []
    res = run_to_end(
        [
            sys.executable,
            "-m",
            "i6_shard",
            "costs",
            str(tmp_path / "files.txt"),
            *unit,
            *column,
            "-o",
            str(tmp_path / "costs.npz"),
        ],
        preexec_fn=_cap_memory,
    )
    assert res.returncode == 2, (res.returncode, res.stderr[-1500:])
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr[-1500:]
    assert repr(path) in res.stderr and message in res.stderr, res.stderr
    assert "remove it from the list" in res.stderr or "a duration is a finite number" in res.stderr
    assert not (tmp_path / "costs.npz").exists()


def test_lengths_in_range_give_the_same_quantiles_as_a_bincount():
    """The pooled quantiles come from the sorted lengths (memory O(sequences)), equal to the bincount's."""
    from i6_shard.core.io.file_costs import length_quantiles, sorted_length_quantiles

    rng = np.random.RandomState(0)
    for n in (1, 2, 7, 300, 5000):
        lengths = rng.randint(0, 3000, size=n)
        assert sorted_length_quantiles(lengths).tolist() == length_quantiles(np.bincount(lengths)).tolist()


def test_a_crafted_archive_whose_frames_wrap_is_not_taken_for_arrow_shards():
    """Frames that sum to 0 in int64 (2**63 twice) are not 'no sequence lengths': that needs every entry 0."""
    from i6_shard.core.io.file_costs import FileCosts, prediction_batching
    from i6_shard.core.pure.batching import Batching

    costs = FileCosts(
        keys=["a", "b"],
        costs=np.array([1, 1]),
        unit="frames",
        num_seqs=np.array([1, 1]),
        num_frames=np.array([2**62, 2**62]) * 2,
        seq_length_quantiles=np.ones(257, dtype=np.int64),
        mtimes=None,
        batching=None,
    )
    assert int(costs.num_frames.sum()) == 0  # what the old check summed
    assert prediction_batching(costs, Batching(100, None)) == Batching(100, None)


_SLOW_COSTS = """
import os, sys, time
from i6_shard.core.io import cost_collector
cost_collector._SERIAL_MAX_FILES = 0  # helper processes for any list
_read_one = cost_collector._read_one
def _slow(item):  # a slow file system; spawned helpers import this module too, so they read slowly as well
    time.sleep(0.05)
    while os.path.exists(os.environ["HANG_WHILE"]):  # then it hangs: a read that never ends
        time.sleep(0.05)
    return _read_one(item)
cost_collector._read_one = _slow
if __name__ == "__main__":
    from i6_shard.cli import main
    sys.exit(main(sys.argv[1:]))
"""


def _session(sid):
    """Live processes of session ``sid`` (a command started with a new session: it and all it started)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(pid))
    return out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="looks for the helpers in /proc (Linux)")
def test_a_killed_costs_pass_leaves_no_helper_reading_on(tmp_path):
    """SIGKILL of `costs` while its helper processes read: none of them is left, although the file system hangs
    in every read from then on (before, they read on to the end of their chunk, 64 files). The verdict does not
    depend on the machine's load: helpers that read on would hang for good, using no CPU, so waiting until they end
    or stand still (no helper ending and none using CPU for 60 s) tells the two apart."""
    import signal
    import time

    from tests.hdf_data import write_tiny_hdf_files

    paths = write_tiny_hdf_files(str(tmp_path / "data"), num_files=200, seed=1, max_seqs=3, frames=(3, 9))
    (tmp_path / "files.txt").write_text("".join(p + "\n" for p in paths))
    (tmp_path / "slow_costs.py").write_text(_SLOW_COSTS)
    hang = tmp_path / "hang"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    env["HANG_WHILE"] = str(hang)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(tmp_path / "slow_costs.py"),
            "costs",
            str(tmp_path / "files.txt"),
            "--procs",
            "2",
            "-o",
            str(tmp_path / "costs.npz"),
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_for_state(  # the command, the resource tracker and two helpers
            lambda: (_session(proc.pid), _cpu_ticks(proc.pid)),
            done=lambda state: len(state[0]) >= 4 or proc.poll() is not None,
            what="the helpers starting",
            poll=0.02,
        )
        assert len(_session(proc.pid)) >= 4, "the helpers did not start"
        time.sleep(0.5)  # they read
        hang.touch()  # every read from now on hangs
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_for_state(  # they end within 0.2 s when idle; a helper reading on hangs with no CPU for good
            lambda: [(pid, _cpu_ticks(pid)) for pid in _session(proc.pid)],
            done=lambda helpers: not helpers,
            what="the helpers of the killed command ending",
            stall=60.0,
            poll=0.05,
        )
        assert _session(proc.pid) == []
        assert not (tmp_path / "costs.npz").exists()
    finally:
        for pid in _session(proc.pid):
            os.kill(pid, signal.SIGKILL)

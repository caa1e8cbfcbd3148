"""Crafted or corrupt archives are refused from their headers, before anything is inflated or
allocated; the sizes archive keeps loading its old format, records modification times in the new
one, and refuses negative sizes and names that are not .npz."""

import os
import struct
import sys
import textwrap
import tracemalloc
import zipfile

import numpy as np
import pytest

from i6_shard.core import FileSizes, PlanSettings, ShardPlan, load_file_sizes, load_plan, save_file_sizes, save_plan
from i6_shard.core.io.npz import load_npz, open_npz, save_npz

from tests.blocking import run_to_end


def write_member(zf, name, arr=None, *, header=None, data=None):
    """An .npy member: ``arr`` as numpy writes it, or a ``header`` dict with raw ``data`` after it."""
    with zf.open(name + ".npy", "w", force_zip64=True) as f:
        if arr is not None:
            np.lib.format.write_array(f, np.asarray(arr))
            return
        np.lib.format.write_array_header_1_0(f, header)
        if callable(data):
            data(f)
        else:
            f.write(data)


def zeros_writer(num_bytes):
    def write(f):
        chunk = bytes(1 << 22)
        for start in range(0, num_bytes, len(chunk)):
            f.write(chunk[: min(len(chunk), num_bytes - start)])

    return write


BOMB_BYTES = 256 << 20


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """A sizes archive of ~260 KB whose sizes member inflates to 256 MiB of zeros (deflate level 9)."""
    path = tmp_path_factory.mktemp("bomb") / "sizes.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        write_member(zf, "format_version", np.array(1, dtype=np.int64))
        write_member(zf, "keys_utf8", np.frombuffer(b"a\0b\0c", dtype=np.uint8))
        write_member(
            zf,
            "sizes",
            header={"descr": "<i8", "fortran_order": False, "shape": (BOMB_BYTES // 8,)},
            data=zeros_writer(BOMB_BYTES),
        )
    assert os.path.getsize(path) < BOMB_BYTES // 500
    return path


_MEASURE = """
    import resource, sys
    from i6_shard.core.io.npz import load_npz
    from i6_shard.core import load_file_sizes
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        {call}(sys.argv[1])
        print("loaded")
    except ValueError as exc:
        print("refused:", exc)
    print("grew_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def load_in_child(path, call):
    res = run_to_end([sys.executable, "-c", textwrap.dedent(_MEASURE.format(call=call)), str(path)])
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    return lines[0], int(lines[-1].split()[1]) * 1024


@pytest.mark.parametrize("call", [pytest.param("load_file_sizes", marks=pytest.mark.slow), "load_npz"])
def test_a_zip_bomb_is_refused_before_it_is_inflated(bomb, call):
    outcome, grew = load_in_child(bomb, call)
    assert outcome.startswith("refused: "), outcome
    # The member claims far more than deflate at i6_shard's level ever gives.
    assert "'sizes.npy' declares 268,435,584 bytes (256.0 MiB) from" in outcome and "more than 400 times" in outcome
    assert grew < 64 << 20, f"memory grew by {grew / 2**20:.0f} MiB while refusing the archive"


def test_an_npy_header_declaring_far_more_than_its_data_is_refused_without_allocating(tmp_path):
    path = tmp_path / "sizes.npz"
    with zipfile.ZipFile(path, "w") as zf:
        write_member(zf, "format_version", np.array(1, dtype=np.int64))
        write_member(zf, "keys_utf8", np.frombuffer(b"a", dtype=np.uint8))
        write_member(zf, "sizes", header={"descr": "<i8", "fortran_order": False, "shape": (10**12,)}, data=b"\0" * 8)
    for call in ("load_file_sizes", "load_npz"):
        outcome, grew = load_in_child(path, call)
        assert outcome == (
            f"refused: {str(path)!r} is corrupt or crafted: member 'sizes.npy' declares shape "
            "(1000000000000,) of int64 (8,000,000,000,000 bytes (7.3 TiB)) but holds 8 bytes; refused "
            "before allocating it"
        ), outcome
        assert grew < 64 << 20


def test_headers_that_do_not_fit_each_other_are_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "sizes.npz"
    save_npz(
        path,
        {
            "format_version": np.array(1),
            "keys_utf8": np.frombuffer(b"a\0b\0c", np.uint8),
            "sizes": np.zeros(1000, dtype=np.int64),
        },
    )
    reads = []
    real_read = np.lib.format.read_array
    monkeypatch.setattr(np.lib.format, "read_array", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    with pytest.raises(ValueError, match="corrupt: 5 bytes of keys cannot hold 1000 keys"):
        load_file_sizes(path)
    assert reads == []


def test_members_that_do_not_belong_are_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "sizes.npz"
    save_npz(
        path,
        {
            "format_version": np.array(1),
            "keys_utf8": np.frombuffer(b"a", np.uint8),
            "sizes": np.array([1]),
            "extra": np.zeros(1000),
        },
    )
    reads = []
    real_read = np.lib.format.read_array
    monkeypatch.setattr(np.lib.format, "read_array", lambda *a, **k: reads.append(1) or real_read(*a, **k))
    with pytest.raises(ValueError, match=r"is not a file sizes archive \(it holds arrays \['extra', "):
        load_file_sizes(path)
    assert reads == []  # nothing inflated


def test_a_plan_file_whose_arrays_do_not_fit_its_settings_is_refused_before_reading_them(tmp_path, monkeypatch):
    plan = ShardPlan(
        [f"f{i}" for i in range(6)], list(range(6)), PlanSettings(num_shards=2, partition_epoch=3, num_epochs=3)
    )
    good = tmp_path / "plan.npz"
    save_plan(plan, good)
    with np.load(good) as d:
        arrays = {name: d[name] for name in d.files}
    arrays["orders"] = np.zeros((1000, 1, 6), dtype=np.uint32)  # 1000 full epochs, the settings say 1
    save_npz(tmp_path / "bad.npz", arrays)
    reads = []
    real_read = np.lib.format.read_array
    monkeypatch.setattr(np.lib.format, "read_array", lambda f, *a, **k: reads.append(f.name) or real_read(f, *a, **k))
    with pytest.raises(
        ValueError,
        match=r"corrupt: orders uint32\(1000, 1, 6\) and bounds int64\(1, 1, 7\) do not "
        r"fit 1 full epochs of 6 files; nothing of them was read",
    ):
        load_plan(tmp_path / "bad.npz")
    assert "orders.npy" not in reads and "bounds.npy" not in reads


def test_load_file_sizes_refuses_negative_sizes_like_save(tmp_path):
    path = tmp_path / "neg.npz"
    save_npz(
        path,
        {
            "format_version": np.array(1),
            "keys_utf8": np.frombuffer(b"a\0b\0c", np.uint8),
            "sizes": np.array([5, -3, -1], dtype=np.int64),
        },
    )
    with pytest.raises(
        ValueError,
        match=r"sizes must be >= 0 \(bytes\), but entry 1 \('b'\) has -3 \(2 negative in "
        r"all\); compute the sizes again",
    ):
        load_file_sizes(path)


def test_format_1_archives_still_load_and_format_2_adds_modification_times(tmp_path):
    old = tmp_path / "v1.npz"  # exactly what the writer of format 1 wrote
    save_npz(
        old,
        {
            "format_version": np.array(1, dtype=np.int64),
            "keys_utf8": np.frombuffer(b"a\0b", np.uint8),
            "sizes": np.array([3, 4], dtype=np.int64),
        },
    )
    loaded = load_file_sizes(old)
    assert loaded.keys == ["a", "b"] and loaded.sizes.tolist() == [3, 4] and loaded.mtimes is None
    save_file_sizes(loaded, tmp_path / "again.npz")  # unknown mtimes: format 1, the same bytes
    assert (tmp_path / "again.npz").read_bytes() == old.read_bytes()

    fs = FileSizes(keys=["a", "b"], sizes=np.array([3, 4]), mtimes=np.array([10**18, -5]))
    save_file_sizes(fs, tmp_path / "v2.npz")
    with np.load(tmp_path / "v2.npz") as d:
        assert sorted(d.files) == ["format_version", "keys_utf8", "mtimes_ns", "sizes"]
        assert int(d["format_version"]) == 2 and d["mtimes_ns"].tolist() == [10**18, -5]
    back = load_file_sizes(tmp_path / "v2.npz")
    assert back.mtimes.tolist() == [10**18, -5] and back.sizes.tolist() == [3, 4]


def test_collected_sizes_record_each_entrys_latest_modification_time(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1")
    b.write_bytes(b"22")
    os.utime(a, ns=(0, 1_000_000_000))
    os.utime(b, ns=(0, 2_000_000_000))
    fs = __import__("i6_shard.core", fromlist=["x"]).collect_file_sizes([str(a), (str(a), str(b)), {"x": str(b)}])
    assert fs.mtimes.tolist() == [1_000_000_000, 2_000_000_000, 2_000_000_000]
    save_file_sizes(fs, tmp_path / "s.npz")
    assert load_file_sizes(tmp_path / "s.npz").mtimes.tolist() == fs.mtimes.tolist()


def test_version_and_arrays_must_agree(tmp_path):
    for version, arrays in ((2, {}), (1, {"mtimes_ns": np.array([1])}), (3, {"mtimes_ns": np.array([1])})):
        path = tmp_path / f"v{version}_{len(arrays)}.npz"
        save_npz(
            path,
            {
                "format_version": np.array(version),
                "keys_utf8": np.frombuffer(b"a", np.uint8),
                "sizes": np.array([1]),
                **arrays,
            },
        )
        with pytest.raises(ValueError, match=rf"has file sizes format {version} with arrays .*reads formats \[1, 2\]"):
            load_file_sizes(path)


def test_archives_are_written_only_under_their_extension(tmp_path):
    fs = FileSizes(keys=["a"], sizes=np.array([1]))
    for name in ("out.json", "out", "out.npz.tmp", ".npz"):
        with pytest.raises(
            ValueError,
            match=r"a file sizes archive is a \.npz file, but the name .*; give a name "
            r"ending in \.npz",
        ):
            save_file_sizes(fs, tmp_path / name)
    with pytest.raises(ValueError, match=r"out.json': a plan file is a \.npz file"):
        save_plan(
            ShardPlan(["a"], [1], PlanSettings(num_shards=1, partition_epoch=1, num_epochs=1)),
            str(tmp_path / "out.json"),
        )
    assert os.listdir(tmp_path) == []


def test_only_regular_files_are_opened_as_archives(tmp_path):
    fifo = tmp_path / "sizes.npz"
    os.mkfifo(fifo)
    code = (
        "import sys\nfrom i6_shard.core import load_file_sizes\ntry:\n    load_file_sizes(sys.argv[1])\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    res = run_to_end([sys.executable, "-c", code, str(fifo)])
    assert res.stdout.startswith(
        f"{str(fifo)!r} is not a file sizes archive: it is a FIFO (named pipe), not a regular file"
    ), res.stdout + res.stderr
    with pytest.raises(ValueError, match="it is a directory"):
        with open_npz(tmp_path, kind="plan file"):
            pass
    with pytest.raises(FileNotFoundError, match="plan file .* does not exist"):
        load_npz(tmp_path / "nope.npz", kind="plan file")


def lie_about_member_size(path, member, size):
    """Set the central directory's compressed and uncompressed size of ``member`` to ``size``."""
    raw = bytearray(path.read_bytes())
    pos = 0
    while True:
        pos = raw.index(b"PK\x01\x02", pos)
        name_len = struct.unpack_from("<H", raw, pos + 28)[0]
        if raw[pos + 46 : pos + 46 + name_len] == member.encode():
            break
        pos += 4
    struct.pack_into("<II", raw, pos + 20, size, size)
    path.write_bytes(bytes(raw))


def test_a_member_claiming_more_compressed_bytes_than_the_file_has_is_refused_before_allocating(tmp_path):
    """Stored; its declared sizes agree with its .npy header and with each other, only the file is too short
    (a sizes archive's keys would not fit such a count: load_npz, which plan files use too, is the target)."""
    path = tmp_path / "sizes.npz"
    num = 10**8
    with zipfile.ZipFile(path, "w") as zf:
        write_member(zf, "format_version", np.array(1, dtype=np.int64))
        write_member(zf, "sizes", header={"descr": "<i8", "fortran_order": False, "shape": (num,)}, data=bytes(8))
    header_bytes = 128  # numpy pads the .npy header to 64-byte blocks
    lie_about_member_size(path, "sizes.npy", header_bytes + 8 * num)
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError,
            match=r"member 'sizes\.npy' declares 800,000,128 bytes \(762\.9 MiB\) "
            r"compressed from byte [0-9,]+ on, but the file has [0-9,]+ bytes",
        ):
            load_npz(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak / 2**20:.0f} MiB allocated for a file of {os.path.getsize(path)} bytes"

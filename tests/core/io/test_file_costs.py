"""Costs per file read from RETURNN HDF files equal what RETURNN's HDFDataset delivers, and the costs
archive is taken wherever a sizes archive is."""

import json
import os

import numpy as np
import pytest

from i6_shard import core
from i6_shard.core.io.file_costs import cost_leaf, collect_file_costs, load_file_costs, save_file_costs
from tests.hdf_data import write_tiny_hdf_files
from tests.deps import H5PY_REASON, RETURNN_REASON

h5py = pytest.importorskip("h5py", reason=H5PY_REASON)
pytest.importorskip("returnn", reason=RETURNN_REASON)


def _returnn_counts(path, *, key="data"):
    """Sequences and frames of ``key`` that RETURNN's HDFDataset delivers from one file, going over every sequence."""
    from returnn.datasets.hdf import HDFDataset

    ds = HDFDataset(files=[path], seq_ordering="default")
    ds.initialize()
    ds.init_seq_order(epoch=1)
    seqs = frames = 0
    while ds.is_less_than_num_seqs(seqs):
        ds.load_seqs(seqs, seqs + 1)
        frames += int(ds.get_data(seqs, key).shape[0])
        seqs += 1
    return seqs, frames


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frames_and_seqs_equal_returnn_hdf_dataset(tmp_path, seed):
    rng = np.random.RandomState(seed)
    num_files = int(rng.randint(2, 6))
    paths = write_tiny_hdf_files(
        str(tmp_path),
        num_files=num_files,
        seed=seed,
        max_seqs=int(rng.randint(1, 9)),
        frames=(1, int(rng.randint(1, 40))),
    )
    frames = collect_file_costs(paths, unit="frames", num_procs=1)
    seqs = collect_file_costs(paths, unit="seqs", num_procs=1)
    expected = [_returnn_counts(p) for p in paths]
    assert seqs.costs.tolist() == [s for s, _ in expected]
    assert frames.costs.tolist() == [f for _, f in expected]
    assert frames.keys == paths == seqs.keys
    assert frames.num_seqs.tolist() == seqs.costs.tolist() and seqs.num_frames.tolist() == frames.costs.tolist()


def test_target_stream_and_multimodal_leaf(tmp_path):
    from returnn.datasets.hdf import SimpleHDFWriter

    path = str(tmp_path / "t.hdf")
    writer = SimpleHDFWriter(path, dim=2, ndim=2)
    for n in (3, 5):
        writer.insert_batch(
            np.zeros((1, n, 2), "float32"), seq_len=[n], seq_tag=[f"s{n}"], extra={"classes": np.zeros((1, n), "int32")}
        )
    writer.close()
    other = write_tiny_hdf_files(str(tmp_path / "o"), num_files=1, seqs_per_file=[7])[0]
    tree = {"audio": path, "other": other}
    costs = collect_file_costs([tree], unit="frames", leaf="audio", stream="classes", num_procs=1)
    assert costs.costs.tolist() == [_returnn_counts(path, key="classes")[1]] == [8]
    assert collect_file_costs([tree], unit="seqs", leaf="other", num_procs=1).costs.tolist() == [7]
    with pytest.raises(ValueError, match="no stream 'words'"):
        collect_file_costs([path], unit="frames", stream="words", num_procs=1)
    with pytest.raises(ValueError, match="name the one that defines the cost"):
        cost_leaf(tree)


def test_archive_round_trip_is_a_sizes_archive(tmp_path):
    paths = write_tiny_hdf_files(str(tmp_path), num_files=5, seed=3)
    costs = collect_file_costs(paths, unit="frames", num_procs=1)
    out = str(tmp_path / "costs.npz")
    save_file_costs(costs, out)
    loaded = load_file_costs(out)
    assert loaded.unit == "frames" and loaded.keys == costs.keys
    for name in ("costs", "num_seqs", "num_frames", "seq_length_quantiles", "mtimes"):
        assert getattr(loaded, name).tolist() == getattr(costs, name).tolist()
    as_sizes = core.load_file_sizes(out)
    assert as_sizes.unit == "frames" and as_sizes.sizes.tolist() == costs.costs.tolist()
    with open(out, "rb") as f:
        first = f.read()
    save_file_costs(costs, out)
    with open(out, "rb") as f:
        assert f.read() == first  # deterministic bytes
    sizes_path = str(tmp_path / "sizes.npz")
    core.save_file_sizes(core.collect_file_sizes(paths), sizes_path)
    assert core.load_file_sizes(sizes_path).unit == "bytes"
    with pytest.raises(ValueError, match="holds sizes in bytes"):
        load_file_costs(sizes_path)
    with pytest.raises(ValueError, match="records the unit"):
        core.save_file_sizes(_as_file_sizes(costs), str(tmp_path / "x.npz"))


def test_steps_archive_keeps_its_batching(tmp_path):
    from i6_shard.core.pure.batching import Batching, file_millisteps
    from i6_shard.core.io.file_costs import read_hdf_seq_lengths

    paths = write_tiny_hdf_files(str(tmp_path), num_files=4, seed=8, frames=(2, 80))
    batching = Batching(batch_size=None, max_seqs=3)
    costs = collect_file_costs(paths, unit="steps", batching=batching, num_procs=1)
    # no batch_size: a file of n sequences takes n / 3 steps of 3 sequences on average
    assert costs.costs.tolist() == [round(1000 * n / 3) for n in costs.num_seqs.tolist()]
    costs = collect_file_costs(paths, unit="steps", batching=Batching(batch_size=200, max_seqs=8), num_procs=1)
    assert (
        costs.costs.tolist()
        == file_millisteps([read_hdf_seq_lengths(p) for p in paths], Batching(batch_size=200, max_seqs=8)).tolist()
    )
    out = str(tmp_path / "steps.npz")
    save_file_costs(costs, out)
    loaded = load_file_costs(out)
    assert loaded.unit == "steps" and loaded.batching == Batching(batch_size=200, max_seqs=8)
    assert core.load_file_sizes(out).unit == "steps"
    with pytest.raises(ValueError, match="unit=.steps. needs batch_size and/or max_seqs"):
        collect_file_costs(paths, unit="steps", num_procs=1)
    with pytest.raises(ValueError, match="unit=.steps. needs batch_size and/or max_seqs"):
        collect_file_costs(paths, unit="frames", batching=batching, num_procs=1)


@pytest.mark.slow
def test_helper_processes_give_the_same_costs(tmp_path, monkeypatch):
    import i6_shard.core.io.cost_collector as fc

    paths = write_tiny_hdf_files(str(tmp_path), num_files=9, seed=4)
    serial = collect_file_costs(paths, unit="frames", num_procs=1)
    monkeypatch.setattr(fc, "_SERIAL_MAX_FILES", 2)
    monkeypatch.setattr(fc, "_CHUNK", 2)
    parallel = collect_file_costs(paths + paths[:2], unit="frames", num_procs=2)
    assert parallel.costs.tolist() == serial.costs.tolist() + serial.costs.tolist()[:2]


def _write_oggzip(path, durations, seed):
    """A text-only OggZipDataset zip: its manifest (RETURNN's form) and no audio."""
    import zipfile

    name = os.path.splitext(os.path.basename(path))[0]
    entries = [
        {"text": f"utt {i}", "duration": float(d), "seq_name": f"{name}/seq{i}"} for i, d in enumerate(durations)
    ]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}.txt", repr(entries))


@pytest.mark.parametrize("seed", [0, 1])
def test_oggzip_seqs_equal_returnn_and_frames_from_durations(tmp_path, seed):
    from returnn.datasets.audio import OggZipDataset

    rng = np.random.RandomState(seed)
    paths, all_durations = [], []
    for i in range(3):
        durations = np.round(rng.uniform(0.3, 9.0, size=rng.randint(1, 12)), 3)
        path = str(tmp_path / f"corpus{i}.zip")
        _write_oggzip(path, durations, seed)
        paths.append(path)
        all_durations.append(durations)
    seqs = collect_file_costs(paths, unit="seqs", num_procs=1)
    frames = collect_file_costs(paths, unit="frames", frame_rate=100.0, num_procs=1)
    for path, durations, n, f in zip(paths, all_durations, seqs.costs.tolist(), frames.costs.tolist()):
        ds = OggZipDataset(path=path, audio=None, targets=None)
        ds.initialize()
        ds.init_seq_order(epoch=1)
        assert n == ds.num_seqs == len(durations)
        assert f == int(np.rint(durations * 100).sum())
    with pytest.raises(ValueError, match="has no manifest"):
        import zipfile

        with zipfile.ZipFile(str(tmp_path / "other.zip"), "w") as zf:
            zf.writestr("x.txt", "[]")
        collect_file_costs([str(tmp_path / "other.zip")], unit="seqs", num_procs=1)


def test_corrupt_costs_archives_are_refused(tmp_path):
    from i6_shard.core.io.npz import load_npz, save_npz

    paths = write_tiny_hdf_files(str(tmp_path), num_files=3, seed=6)
    good = str(tmp_path / "good.npz")
    save_file_costs(collect_file_costs(paths, unit="seqs", num_procs=1), good)
    arrays = dict(load_npz(good))
    cases = {
        "unit": ({"unit_utf8": np.frombuffer(b"bytes", dtype=np.uint8)}, "its unit is 'bytes'"),
        "unit2": ({"unit_utf8": np.frombuffer(b"tokens", dtype=np.uint8)}, "its unit is 'tokens'"),
        "quantiles": ({"seq_length_quantiles": np.zeros(5, dtype=np.int64)}, "seq_length_quantiles"),
        "seqs": ({"num_seqs": np.zeros(2, dtype=np.int64)}, "num_seqs"),
        "negative": ({"num_frames": np.array([1, -1, 2], dtype=np.int64)}, "negative"),
        "missing": ({"num_frames": None}, "not a file sizes archive"),
        "steps_unit": ({"unit_utf8": np.frombuffer(b"steps", dtype=np.uint8)}, "if and only if its unit is steps"),
        "batching_not_steps": ({"steps_batching": np.array([100, 4], dtype=np.int64)}, "if and only if"),
        "batching_none": (
            {"unit_utf8": np.frombuffer(b"steps", dtype=np.uint8), "steps_batching": np.array([0, 0], dtype=np.int64)},
            "both None",
        ),
        "batching_shape": (
            {"unit_utf8": np.frombuffer(b"steps", dtype=np.uint8), "steps_batching": np.array([100], dtype=np.int64)},
            r"expected int64\[2\]",
        ),
    }
    for name, (change, message) in cases.items():
        bad = {k: v for k, v in {**arrays, **change}.items() if v is not None}
        path = str(tmp_path / f"{name}.npz")
        save_npz(path, bad)
        with pytest.raises(ValueError, match=message):
            load_file_costs(path)


def test_stale_check_of_a_costs_archive_looks_at_mtimes(tmp_path):
    paths = write_tiny_hdf_files(str(tmp_path), num_files=2, seed=7)
    costs = collect_file_costs(paths, unit="frames", num_procs=1)
    assert core.io.stale_sizes.check_sample_unchanged(_as_file_sizes(costs), trees=paths) == 2  # frames != bytes
    os.utime(paths[1], ns=(1, 1))
    with pytest.raises(core.io.stale_sizes.StaleFileSizesError, match="entry 1"):
        core.io.stale_sizes.check_sample_unchanged(_as_file_sizes(costs), trees=paths)


def _as_file_sizes(costs):
    """The costs as a sizes archive's FileSizes (with their unit)."""
    return core.FileSizes(keys=costs.keys, sizes=costs.costs, mtimes=costs.mtimes, unit=costs.unit)


def test_the_archive_keeps_every_sequence_length_as_returnn_delivers_it(tmp_path):
    """seq_lengths holds each entry's lengths (in entry order, what RETURNN's HDFDataset delivers per sequence),
    survives the archive, and pairs with num_seqs; an archive without them (written before) still loads."""
    from returnn.datasets.hdf import HDFDataset

    paths = write_tiny_hdf_files(str(tmp_path), num_files=4, seed=5, max_seqs=6, frames=(1, 50))
    costs = collect_file_costs(paths, unit="frames", num_procs=1)
    out = str(tmp_path / "costs.npz")
    save_file_costs(costs, out)
    loaded = load_file_costs(out)
    for path, lengths in zip(paths, loaded.engine_lengths()):
        ds = HDFDataset(files=[path], seq_ordering="default")
        ds.initialize()
        ds.init_seq_order(epoch=1)
        expected = []
        while ds.is_less_than_num_seqs(len(expected)):
            ds.load_seqs(len(expected), len(expected) + 1)
            expected.append(int(ds.get_data(len(expected), "data").shape[0]))
        assert lengths.tolist() == expected
    assert loaded.seq_lengths.dtype == np.int32 and len(loaded.seq_lengths) == int(loaded.num_seqs.sum())
    old = core.io.file_costs.FileCosts(**{**loaded.__dict__, "seq_lengths": None})
    save_file_costs(old, str(tmp_path / "old.npz"))
    assert load_file_costs(str(tmp_path / "old.npz")).engine_lengths() is None
    assert core.load_file_sizes(out).sizes.tolist() == loaded.costs.tolist()  # still a sizes archive


def test_a_costs_archive_whose_lengths_do_not_pair_with_its_counts_is_refused(tmp_path):
    from i6_shard.core.io.npz import load_npz, save_npz

    paths = write_tiny_hdf_files(str(tmp_path), num_files=3, seed=6)
    out = str(tmp_path / "costs.npz")
    save_file_costs(collect_file_costs(paths, unit="frames", num_procs=1), out)
    arrays = load_npz(out)
    arrays["seq_lengths"] = arrays["seq_lengths"][:-1]
    save_npz(out, arrays, kind="file costs archive")
    with pytest.raises(
        ValueError,
        match=r"is corrupt: seq_lengths is int32\[\d+\], expected int32\[\d+\] \(the sum "
        r"of num_seqs\)",
    ):
        load_file_costs(out)


def test_the_plan_predicts_from_each_files_own_lengths(tmp_path, capsys):
    """With the archive's lengths the plan's predicted loss is the model's with each file's own lengths (what a
    rank batches), and the report says so; an archive without them predicts from the pooled quantiles."""
    from i6_shard.cli import main
    from i6_shard.core.pure.batching import Batching, predict_plan_drop
    from i6_shard.core.pure.engine_sim import EngineSettings
    from i6_shard.core.pure.plan_sim import simulate_plan
    from tests.training.harness import hdf_seq_lengths

    paths = write_tiny_hdf_files(str(tmp_path / "d"), num_files=24, seed=7, max_seqs=30, frames=(3, 90))
    costs = collect_file_costs(paths, unit="frames", num_procs=1)
    archive = str(tmp_path / "costs.npz")
    save_file_costs(costs, archive)
    options = [
        "--num-shards",
        "2",
        "--partition-epoch",
        "3",
        "--num-epochs",
        "6",
        "--distribution",
        "balanced",
        "--batch-size",
        "300",
        "--max-seqs",
        "8",
        "--no-plot",
    ]
    assert main(["plan", "--sizes", archive, *options, "-o", str(tmp_path / "p")]) == 0
    assert "each file's own lengths" in capsys.readouterr().out
    import json

    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    plan = core.load_plan(str(tmp_path / "p" / "plan.npz"))
    model = predict_plan_drop(
        plan,
        num_epochs=6,
        num_seqs=costs.num_seqs,
        num_frames=costs.num_frames,
        batching=Batching(300, 8),
        file_lengths=[hdf_seq_lengths(p) for p in paths],
    )
    assert summary["batching"]["lengths"] == "per file"
    assert summary["batching"]["model_dropped_fraction"] == pytest.approx(float(model["dropped"].mean()), abs=1e-6)
    # with each file's lengths the ranks' batches are simulated exactly, and the prediction is the simulation's
    sims, reason = simulate_plan(
        plan,
        num_epochs=6,
        file_lengths=[hdf_seq_lengths(p) for p in paths],
        engine=EngineSettings(batch_size=300, max_seqs=8, torch_distributed={}),
    )
    assert reason is None and summary["batching"]["simulation"]["exact"]
    assert summary["steps_exact"] == [s.steps_exact for s in sims]
    assert summary["steps_taken"] == [[min(s.steps_exact)] * 2 for s in sims]
    want = float(np.mean([s.dropped_fraction for s in sims]))
    assert summary["dropped_fraction_predicted"] == pytest.approx(want, abs=1e-6)
    pooled = core.io.file_costs.FileCosts(**{**costs.__dict__, "seq_lengths": None})
    save_file_costs(pooled, str(tmp_path / "pooled.npz"))
    assert main(["plan", "--sizes", str(tmp_path / "pooled.npz"), *options, "-o", str(tmp_path / "q")]) == 0
    assert "pooled lengths" in capsys.readouterr().out
    pooled_summary = json.loads((tmp_path / "q" / "summary.json").read_text())
    assert pooled_summary["batching"]["lengths"] == "pooled"
    assert pooled_summary["steps_exact"] == [None] * 6 and not pooled_summary["batching"]["simulation"]["exact"]


def _classes_longer_archive(tmp_path, **fields):
    """A costs archive (frames of ``data``) of HDF files whose ``classes`` stream is longer for some sequences, with
    ``fields`` of its FileCosts replaced; its path and the FileCosts collected."""
    paths = write_tiny_hdf_files(
        str(tmp_path / "d"), num_files=6, seed=11, max_seqs=6, frames=(1, 30), classes_frames=(1, 45)
    )
    costs = collect_file_costs(paths, unit="frames", num_procs=1)
    out = str(tmp_path / "costs.npz")
    save_file_costs(core.io.file_costs.FileCosts(**{**costs.__dict__, **fields}), out)
    return out, costs


def test_the_archive_keeps_the_batching_lengths_only_where_a_stream_is_longer(tmp_path):
    """The longest HDF stream per sequence is kept beside the cost stream's lengths (seq_batch_lengths), named as
    every key an HDFDataset yields; files whose data is the longest keep none, only the name."""
    out, costs = _classes_longer_archive(tmp_path)
    with np.load(out) as npz:
        assert npz["batch_lengths_utf8"].tobytes() == b"hdf"
        batch, cost = npz["seq_batch_lengths"], npz["seq_lengths"]
    assert (batch >= cost).all() and (batch > cost).any()
    loaded = load_file_costs(out)
    assert loaded.batch_lengths == "hdf" and loaded.batching_assumes is None
    assert loaded.num_frames.tolist() == costs.num_frames.tolist()  # the costs stay the cost stream's
    plain = write_tiny_hdf_files(str(tmp_path / "p"), num_files=3, seed=6)
    save_file_costs(collect_file_costs(plain, unit="frames", num_procs=1), str(tmp_path / "plain.npz"))
    with np.load(str(tmp_path / "plain.npz")) as npz:
        assert "seq_batch_lengths" not in npz.files and npz["batch_lengths_utf8"].tobytes() == b"hdf"


def test_an_archive_without_the_batching_lengths_names_what_its_plan_assumes(tmp_path):
    """An archive written before the batching lengths were kept (no batch_lengths_utf8): its plan of HDF files with a
    longer classes stream says in the summary and the report that it is exact only if no key is longer."""
    from i6_shard.cli import main

    out, _ = _classes_longer_archive(tmp_path, seq_batch_lengths=None, batch_lengths="unknown")
    with np.load(out) as npz:
        assert "batch_lengths_utf8" not in npz.files and "seq_batch_lengths" not in npz.files
    plan_dir = tmp_path / "plan"
    assert (
        main(
            ["plan", "--sizes", out, "-o", str(plan_dir), "--num-shards", "2", "--partition-epoch", "2"]
            + ["--num-epochs", "4", "--batch-size", "60"]
        )
        == 0
    )
    sim = json.load(open(plan_dir / "summary.json"))["batching"]["simulation"]
    assert "written before the batching lengths were kept" in sim["lengths_assume"]
    assert sim["lengths_assume"] in sim["assumes"]
    assert "exact only if no data key is longer than the cost stream" in open(plan_dir / "report.txt").read()


@pytest.mark.parametrize(
    "change, message",
    [
        ("shorter", r"sequence \d+ of the archive batches by \d+ frames, fewer than its \d+"),
        ("shape", r"is corrupt: seq_batch_lengths is int32\[\d+\], expected int32\[\d+\]"),
        ("name", r"is corrupt: batch_lengths_utf8 is 'everything', none of"),
        ("alone", r"is corrupt: batch_lengths_utf8 is uint8\[3\] in an archive without seq_lengths"),
    ],
)
def test_a_crafted_archive_of_batching_lengths_is_refused_naming_it(tmp_path, change, message):
    from i6_shard.core.io.npz import load_npz, save_npz

    out, _ = _classes_longer_archive(tmp_path)
    arrays = load_npz(out)
    if change == "shorter":
        i = int(np.argmax(arrays["seq_lengths"]))
        arrays["seq_batch_lengths"][i] = arrays["seq_lengths"][i] - 1
    elif change == "shape":
        arrays["seq_batch_lengths"] = arrays["seq_batch_lengths"][:-1]
    elif change == "name":
        arrays["batch_lengths_utf8"] = np.frombuffer(b"everything", dtype=np.uint8)
    else:
        del arrays["seq_lengths"], arrays["seq_batch_lengths"]
    save_npz(out, arrays, kind="file costs archive")
    with pytest.raises(ValueError, match=message) as info:
        load_file_costs(out)
    assert "costs.npz" in str(info.value) and "\n" not in str(info.value)


def test_the_space_bound_of_a_costs_archive_covers_its_batching_lengths(tmp_path):
    """The full-disk message's bound (costs_bytes_bound) holds an archive whose batching lengths double its
    per-sequence arrays: 200,000 sequences, 800 kB each, far above the bound's 64 KiB of headers."""
    from i6_shard.core.io.enospc import costs_bytes_bound
    from i6_shard.core.pure.costs import NUM_LENGTH_QUANTILES, FileCosts

    rng = np.random.default_rng(3)
    num_seqs = np.full(4, 50_000, dtype=np.int64)
    lengths = rng.integers(1, 2**30, size=int(num_seqs.sum()), dtype=np.int64).astype(np.int32)  # no compression
    frames = np.add.reduceat(lengths.astype(np.int64), [0, 50_000, 100_000, 150_000])
    costs = FileCosts(
        keys=[f"/data/f{i}.hdf" for i in range(4)],
        costs=frames,
        unit="frames",
        num_seqs=num_seqs,
        num_frames=frames,
        seq_length_quantiles=np.quantile(lengths, np.linspace(0, 1, NUM_LENGTH_QUANTILES)).astype(np.int64),
        seq_lengths=lengths,
        seq_batch_lengths=lengths + rng.integers(0, 2, size=lengths.size, dtype=np.int32),
        batch_lengths="hdf",
    )
    out = str(tmp_path / "costs.npz")
    save_file_costs(costs, out)
    assert os.path.getsize(out) <= costs_bytes_bound(costs)

"""Re-chunking a RETURNN HDF corpus: RETURNN's own HDFDataset reads every key and tag of the output as it read the
input's (fuzzed); files of even size; nothing partial after a failure; file trees kept aligned by tag, or refused."""

import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py", reason="re-chunking reads and writes HDF files with h5py: pip install h5py")
pytest.importorskip(
    "returnn.datasets.hdf", reason="the parity test reads with RETURNN's HDFDataset: pip install returnn"
)

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from i6_shard.core import write_file_list  # noqa: E402
from i6_shard.core.io import rechunk_hdf_corpus  # noqa: E402
from i6_shard.core.io.rechunk_hdf import MISSING_H5PY_FOR_RECHUNK  # noqa: E402
from i6_shard.core.pure.rechunk import cut_even, rechunk_num_files  # noqa: E402


def _write(path, seqs, *, dim=3, extras=True):
    """One file by RETURNN's SimpleHDFWriter: per sequence a [frames, dim] float input, and (``extras``) a sparse
    ``classes`` stream of its own length, a ``sizes`` stream of two ints and an ``orth`` string stream."""
    from returnn.datasets.hdf import SimpleHDFWriter

    writer = SimpleHDFWriter(path, dim=dim, ndim=2)
    for tag, frames, seed in seqs:
        rng = np.random.RandomState(seed)
        extra = None
        if extras:
            extra = {
                "classes": rng.randint(0, 7, size=(1, 1 + seed % 4)).astype(np.int32),
                "sizes": np.array([[frames, seed % 5]], dtype=np.int32),
                "orth": np.array([[f"words of {tag} ü"]], dtype=object),
            }
        data = rng.rand(1, frames, dim).astype(np.float32)
        writer.insert_batch(data, seq_len=[frames], seq_tag=[tag], extra=extra)
    writer.close()
    return path


def _read(files):
    """``{tag: {key: data}}`` and the dataset's labels and dims, as RETURNN's HDFDataset reads ``files``."""
    from returnn.datasets.hdf import HDFDataset

    dataset = HDFDataset(files=list(files), use_cache_manager=False)
    dataset.initialize()
    dataset.init_seq_order(epoch=1)
    out = {}
    for idx in range(dataset.num_seqs):
        dataset.load_seqs(idx, idx + 1)
        out[dataset.get_tag(idx)] = {k: dataset.get_data(idx, k) for k in dataset.get_data_keys()}
    return out, dataset.labels, dataset.num_outputs


def _assert_same(a, b):
    seqs_a, labels_a, dims_a = a
    seqs_b, labels_b, dims_b = b
    assert list(seqs_a) == list(seqs_b)  # every tag, once, in the same order
    for tag, data in seqs_a.items():
        assert sorted(data) == sorted(seqs_b[tag])
        for key, value in data.items():
            assert value.dtype == seqs_b[tag][key].dtype and value.shape == seqs_b[tag][key].shape, (tag, key)
            np.testing.assert_array_equal(value, seqs_b[tag][key])
    assert labels_a == labels_b and dims_a == dims_b


def _corpus(directory, frames_per_file, *, extras=True):
    paths = []
    for i, frames in enumerate(frames_per_file):
        seqs = [(f"corpus/f{i}/s{j}", n, 1000 * i + j) for j, n in enumerate(frames)]
        paths.append(_write(os.path.join(directory, f"in-{i}.hdf"), seqs, extras=extras))
    return paths


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    frames=st.lists(st.lists(st.integers(1, 9), min_size=1, max_size=5), min_size=1, max_size=4),
    num_files=st.integers(1, 8),
    unit=st.sampled_from(["frames", "seqs"]),
    extras=st.booleans(),
)
@pytest.mark.slow
def test_returnn_reads_the_output_as_the_input(tmp_path_factory, frames, num_files, unit, extras):
    tmp = tmp_path_factory.mktemp("rechunk")
    paths = _corpus(str(tmp), frames, extras=extras)
    num_seqs = sum(map(len, frames))
    num_files = min(num_files, num_seqs)
    made = rechunk_hdf_corpus(paths, str(tmp / "out"), num_shards=1, partition_epoch=1, num_files=num_files, unit=unit)
    assert len(made.trees) == num_files and made.num_seqs == num_seqs
    with open(tmp / "out" / "files.txt") as f:
        assert [line.strip() for line in f] == made.trees
    _assert_same(_read(paths), _read(made.trees))


def test_files_are_even_and_the_rule_bounds_them(tmp_path):
    frames = [[50] * 40, [10, 90] * 3, [70] * 2]  # skewed files: 40, 6 and 2 sequences
    paths = _corpus(str(tmp_path), frames, extras=False)
    made = rechunk_hdf_corpus(paths, str(tmp_path / "out"), num_shards=2, partition_epoch=2)
    num_seqs = sum(map(len, frames))
    assert len(made.trees) == rechunk_num_files(num_shards=2, partition_epoch=2, num_seqs=num_seqs) == num_seqs
    made = rechunk_hdf_corpus(paths, str(tmp_path / "out"), num_shards=2, partition_epoch=2, num_files=8)
    total = sum(map(sum, frames))
    assert made.costs.sum() == total and abs(made.costs - total / 8).max() <= 90  # one sequence at most
    with h5py.File(made.trees[0], "r") as f:
        assert f.attrs["numSeqs"] == f["seqLengths"].shape[0] and f.attrs["numTimesteps"] == made.costs[0]


def test_cut_even_keeps_every_sequence_once_and_in_order():
    rng = np.random.RandomState(0)
    for _ in range(300):
        costs = rng.randint(0, 100, size=rng.randint(1, 40))
        num_files = rng.randint(1, len(costs) + 1)
        bounds = cut_even(costs, num_files=num_files)
        assert bounds[0] == 0 and bounds[-1] == len(costs) and (np.diff(bounds) > 0).all()
        sizes = np.add.reduceat(costs, bounds[:-1])
        assert np.abs(sizes - costs.sum() / num_files).max() <= 2 * costs.max()


def test_a_failed_run_leaves_nothing(tmp_path, monkeypatch):
    paths = _corpus(str(tmp_path), [[5, 6], [7]], extras=False)
    out = tmp_path / "out"
    rechunk_hdf_corpus(paths, str(out), num_shards=1, partition_epoch=1, num_files=3)
    before = {n: os.path.getmtime(out / "data" / n) for n in os.listdir(out / "data")}
    import i6_shard.core.io.rechunk_hdf as module

    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk gone")
        return original(*args, **kwargs)

    original = module._write_part
    monkeypatch.setattr(module, "_write_part", failing)
    with pytest.raises(OSError, match="disk gone"):
        rechunk_hdf_corpus(paths, str(out), num_shards=1, partition_epoch=1, num_files=2)
    assert {n: os.path.getmtime(out / "data" / n) for n in os.listdir(out / "data")} == before  # the earlier set
    assert sorted(os.listdir(tmp_path)) == sorted(["in-0.hdf", "in-1.hdf", "out"])  # no temporary left


def test_file_trees_are_cut_alike_by_tag(tmp_path):
    frames = [[4, 5, 6], [7, 8]]
    feats = _corpus(str(tmp_path / "a"), frames, extras=False) if os.makedirs(tmp_path / "a") is None else None
    os.makedirs(tmp_path / "b")
    other = _corpus(str(tmp_path / "b"), frames, extras=True)
    trees = [{"feat": f, "text": o} for f, o in zip(feats, other)]
    made = rechunk_hdf_corpus(trees, str(tmp_path / "out"), num_shards=1, partition_epoch=1, num_files=3)
    assert made.list_path.endswith("files.json") and sorted(made.trees[0]) == ["feat", "text"]
    _assert_same(_read(feats), _read([t["feat"] for t in made.trees]))
    _assert_same(_read(other), _read([t["text"] for t in made.trees]))
    for tree in made.trees:
        with h5py.File(tree["feat"], "r") as a, h5py.File(tree["text"], "r") as b:
            assert a["seqTags"][...].tolist() == b["seqTags"][...].tolist()


def test_misaligned_trees_and_mixed_files_are_refused(tmp_path):
    os.makedirs(tmp_path / "a")
    os.makedirs(tmp_path / "b")
    feats = _corpus(str(tmp_path / "a"), [[4, 5], [6]], extras=False)
    shuffled = [_write(str(tmp_path / "b" / "x.hdf"), [("corpus/f0/s1", 5, 1), ("corpus/f0/s0", 4, 0)])]
    with pytest.raises(ValueError, match="same sequence tags in the same order"):
        rechunk_hdf_corpus([{"a": feats[0], "b": shuffled[0]}], str(tmp_path / "o1"), num_shards=1, partition_epoch=1)
    mixed = [feats[0], _write(str(tmp_path / "b" / "y.hdf"), [("t", 3, 0)], dim=5)]
    with pytest.raises(ValueError, match="hold other streams"):
        rechunk_hdf_corpus(mixed, str(tmp_path / "o2"), num_shards=1, partition_epoch=1)
    assert not os.path.exists(tmp_path / "o1") and not os.path.exists(tmp_path / "o2")


def test_errors_name_the_value_and_the_fix(tmp_path):
    paths = _corpus(str(tmp_path), [[4, 5]], extras=False)
    with pytest.raises(ValueError, match=r"num_files=3: give 1 to 2"):
        rechunk_hdf_corpus(paths, str(tmp_path / "o"), num_shards=1, partition_epoch=1, num_files=3)
    with pytest.raises(ValueError, match="unit='bytes'"):
        rechunk_hdf_corpus(paths, str(tmp_path / "o"), num_shards=1, partition_epoch=1, unit="bytes")
    with pytest.raises(TypeError, match="num_shards=0.5"):
        rechunk_hdf_corpus(paths, str(tmp_path / "o"), num_shards=0.5, partition_epoch=1)
    write_file_list(paths, str(tmp_path / "list.txt"))
    with open(tmp_path / "not.hdf", "wb") as f:
        f.write(b"")
    with pytest.raises(OSError):
        rechunk_hdf_corpus([str(tmp_path / "not.hdf")], str(tmp_path / "o"), num_shards=1, partition_epoch=1)
    assert "pip install" in MISSING_H5PY_FOR_RECHUNK and "h5py" in MISSING_H5PY_FOR_RECHUNK


@pytest.mark.slow
def test_by_default_no_file_is_above_5_percent_of_a_rank_share(tmp_path):
    rng = np.random.RandomState(3)
    frames = [rng.randint(5, 16, size=n).tolist() for n in (150, 30, 220)]  # 400 sequences, skewed files
    paths = _corpus(str(tmp_path), frames, extras=False)
    made = rechunk_hdf_corpus(paths, str(tmp_path / "out"), num_shards=2, partition_epoch=2)
    assert made.max_share <= 0.05 and len(made.trees) >= rechunk_num_files(num_shards=2, partition_epoch=2)
    share = sum(map(sum, frames)) / 4
    assert made.costs.max() <= 0.05 * share

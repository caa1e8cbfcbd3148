"""The generated HDF corpus is real RETURNN HDF: RETURNN's own HDFDataset reads every sequence as written,
and i6_shard's costs pass counts the same frames."""

import os

import numpy as np
import pytest

from i6_shard.core.io.hdf_corpus import hdf_corpus_seq_counts, write_hdf_corpus

h5py = pytest.importorskip("h5py", reason="writing HDF files needs h5py: pip install h5py")


def _read_with_returnn(paths):
    """(tag, frames, feature dim) of every sequence, as RETURNN's HDFDataset delivers them in file order."""
    pytest.importorskip("returnn.datasets.hdf", reason="needs RETURNN: pip install returnn")
    from returnn.datasets.basic import init_dataset

    dataset = init_dataset({"class": "HDFDataset", "files": list(paths), "seq_ordering": "default"})
    dataset.init_seq_order(epoch=1)
    seqs, idx = [], 0
    while dataset.is_less_than_num_seqs(idx):
        dataset.load_seqs(idx, idx + 1)
        data = dataset.get_data(idx, "data")
        seqs.append((dataset.get_tag(idx), data.shape[0], data.shape[1]))
        idx += 1
    return seqs


def test_returnn_reads_every_sequence_of_the_corpus(tmp_path):
    paths = write_hdf_corpus(str(tmp_path / "data"), num_files=6, seed=4, feature_dim=5)
    assert [os.path.basename(p) for p in paths] == [f"part-{i}.hdf" for i in range(6)]
    seqs = _read_with_returnn(paths)
    counts = hdf_corpus_seq_counts(6, seed=4)
    expected_tags = [f"corpus/file{i}/seq{j}" for i, n in enumerate(counts.tolist()) for j in range(n)]
    assert [tag for tag, _, _ in seqs] == expected_tags
    assert all(dim == 5 and 20 <= frames <= 120 for _, frames, dim in seqs)
    with h5py.File(paths[0], "r") as f:  # the file's own lengths agree with what RETURNN delivered
        assert f["seqLengths"][:, 0].tolist() == [frames for tag, frames, _ in seqs if tag.startswith("corpus/file0/")]


def test_the_costs_pass_counts_the_frames_returnn_reads(tmp_path):
    from i6_shard.core.io.file_costs import collect_file_costs

    paths = write_hdf_corpus(str(tmp_path), num_files=4, seed=1)
    costs = collect_file_costs(paths, unit="frames")
    per_file = [0] * 4
    for tag, frames, _ in _read_with_returnn(paths):
        per_file[int(tag.split("/")[1][len("file") :])] += frames
    assert costs.costs.tolist() == per_file


def test_sizes_are_skewed_and_reproducible(tmp_path):
    counts = hdf_corpus_seq_counts(200, seed=0)
    assert counts.min() >= 1 and counts.max() > 4 * np.median(counts)
    a = write_hdf_corpus(str(tmp_path / "a"), num_files=3, seed=7)
    b = write_hdf_corpus(str(tmp_path / "b"), num_files=3, seed=7)
    for x, y in zip(a, b):
        with h5py.File(x, "r") as fx, h5py.File(y, "r") as fy:
            assert np.array_equal(fx["inputs"][...], fy["inputs"][...])
            assert list(fx["seqTags"][...]) == list(fy["seqTags"][...])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_files": 0}, "num_files=0: write at least one file"),
        ({"num_files": 2, "feature_dim": 0}, "feature_dim=0: give at least one feature per frame"),
        ({"num_files": 2, "median_seqs": 0}, "median_seqs=0: a file holds at least one sequence"),
        ({"num_files": 2, "seed": 2**32}, r"seed=4294967296: numpy's RandomState takes seeds in \[0, 2\*\*32\)"),
    ],
)
def test_bad_arguments_are_named_and_nothing_is_written(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        write_hdf_corpus(str(tmp_path / "out"), **kwargs)
    assert not (tmp_path / "out").exists()

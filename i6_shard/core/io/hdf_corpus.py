"""A small corpus of real RETURNN HDF files with skewed sizes, to try sharding on: the demo's data and
``python -m i6_shard make-data``. Written with h5py in the layout of RETURNN's ``SimpleHDFWriter``."""

from __future__ import annotations

import os
from typing import List, Optional

import numpy as np

from .atomic import atomic_path
from .progress import Progress

__all__ = ["write_hdf_corpus"]

MISSING_H5PY_FOR_DATA = (
    "h5py is not installed, so no HDF files can be written: pip install h5py (or pip install 'i6_shard[demo]')"
)
#: Frames of one sequence: uniform in this range.
SEQ_FRAMES = (20, 120)


def hdf_corpus_seq_counts(num_files: int, *, seed: int = 0, median_seqs: int = 8, sigma: float = 1.0) -> np.ndarray:
    """Sequences per file: lognormal around ``median_seqs`` (so a few files are much larger than the rest),
    each at least 1; the first draws of ``RandomState(seed)``.

    >>> hdf_corpus_seq_counts(4, seed=1, median_seqs=8).tolist()
    [40, 4, 4, 2]
    """
    return _seq_counts(_rng(seed), num_files=num_files, median_seqs=median_seqs, sigma=sigma)


def _rng(seed: int) -> np.random.RandomState:
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed={seed}: numpy's RandomState takes seeds in [0, 2**32); choose one in that range")
    return np.random.RandomState(seed)


def _seq_counts(rng: np.random.RandomState, *, num_files: int, median_seqs: int, sigma: float) -> np.ndarray:
    if num_files < 1:
        raise ValueError(f"num_files={num_files}: write at least one file")
    if median_seqs < 1:
        raise ValueError(f"median_seqs={median_seqs}: a file holds at least one sequence")
    counts = np.exp(rng.normal(np.log(median_seqs), sigma, size=num_files))
    return np.maximum(1, counts.astype(np.int64))


def _write_hdf(path: str, features: List[np.ndarray], tags: List[str]) -> None:
    """One file in RETURNN's HDF layout (what ``SimpleHDFWriter`` writes for dense float inputs and
    what ``HDFDataset`` reads as its ``data`` stream), atomically."""
    import h5py

    lengths = np.array([len(f) for f in features], dtype=np.int32)
    dim = int(features[0].shape[1])
    # Built in memory (the same bytes as on disk) and written by Python: a full device is then an OSError of the
    # write, never an HDF5 error inside h5py's own close (which left a file object that crashed the interpreter).
    f = h5py.File(f"{path}.mem", "w", driver="core", backing_store=False)
    try:
        f.attrs["numTimesteps"] = int(lengths.sum())
        f.attrs["inputPattSize"] = dim
        f.attrs["numDims"] = 1
        f.attrs["numLabels"] = dim
        f.attrs["numSeqs"] = len(features)
        f.create_dataset("labels", (0,), dtype="S5")
        seq_lengths = np.zeros((len(features), 2), dtype=np.int32)
        seq_lengths[:, 0] = lengths
        f.create_dataset("seqLengths", data=seq_lengths)
        f.create_dataset("seqTags", data=tags, dtype=h5py.special_dtype(vlen=str))
        f.create_dataset("inputs", data=np.concatenate(features).astype(np.float32))
        f.flush()
        image = f.id.get_file_image()
    finally:
        f.close()
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        out.write(image)


def write_hdf_corpus(
    directory: str,
    *,
    num_files: int = 32,
    seed: int = 0,
    feature_dim: int = 8,
    median_seqs: int = 8,
    sigma: float = 1.0,
    progress_interval: Optional[float] = None,
) -> List[str]:
    """Write ``num_files`` RETURNN HDF files ``part-<i>.hdf`` into ``directory`` and return their paths, in
    file order. File ``i`` holds :func:`hdf_corpus_seq_counts` sequences of 20..120 frames of ``feature_dim``
    random float32 features (the ``data`` stream of RETURNN's ``HDFDataset``), tagged ``corpus/file<i>/seq<j>``.
    The same arguments give the same files. Each file is written under a temporary name and renamed, so a
    killed run leaves no part file that could pass for a finished one.

    :param progress_interval: seconds between progress lines on stderr (none if done sooner; None: no lines)
    :raises ImportError: without h5py, with the install command
    :raises ValueError: for a count or dimension below 1, or a seed outside [0, 2**32)
    """
    if feature_dim < 1:
        raise ValueError(f"feature_dim={feature_dim}: give at least one feature per frame")
    rng = _rng(seed)  # the counts first, as hdf_corpus_seq_counts draws them, then the features
    counts = _seq_counts(rng, num_files=num_files, median_seqs=median_seqs, sigma=sigma)
    try:
        import h5py  # noqa: F401
    except ImportError:
        raise ImportError(MISSING_H5PY_FOR_DATA) from None
    os.makedirs(directory, exist_ok=True)
    width = len(str(num_files - 1))
    paths = []
    progress = None if progress_interval is None else Progress("hdf files", total=num_files, interval=progress_interval)
    for i, num_seqs in enumerate(counts.tolist()):
        frames = rng.randint(SEQ_FRAMES[0], SEQ_FRAMES[1] + 1, size=num_seqs)
        features = [rng.rand(int(n), feature_dim).astype(np.float32) for n in frames]
        path = os.path.join(directory, f"part-{i:0{width}d}.hdf")
        _write_hdf(path, features, [f"corpus/file{i}/seq{j}" for j in range(num_seqs)])
        paths.append(path)
        if progress is not None:
            progress.add(1)
    if progress is not None:
        progress.close()
    return paths

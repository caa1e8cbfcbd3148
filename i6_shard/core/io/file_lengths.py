"""Sequences and frames per file, for measuring what a training consumed: read from RETURNN HDF
files (``seqLengths``, with h5py, imported lazily) or from a small JSON file of ``{key: [seqs, frames]}``."""

from __future__ import annotations

import json
import os
from typing import Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from .atomic import atomic_write
from .progress import Progress

#: tree key -> (number of sequences, number of frames of the data stream)
FileLengths = Dict[str, Tuple[int, int]]
MISSING_H5PY = (
    "h5py is not installed, so the HDF files cannot be read for their sequence lengths: "
    "pip install h5py (into the Python that runs this), or give the lengths as a JSON file"
)


def hdf_file_lengths(path: str) -> Tuple[int, int]:
    """``(num_seqs, num_frames)`` of a RETURNN HDF file: the rows of ``seqLengths`` and the sum of
    its first column (the data stream, what HDFDataset gives as ``data``); the features are not read.

    :raises ImportError: without h5py
    :raises ValueError: if the file has no ``seqLengths``
    """
    try:
        import h5py
    except ImportError as exc:
        raise ImportError(MISSING_H5PY) from exc
    with h5py.File(path, "r") as f:
        if "seqLengths" not in f:
            raise ValueError(f"{path!r} has no seqLengths dataset; it is not a RETURNN HDF file")
        lengths = np.asarray(f["seqLengths"], dtype=np.int64)
    if lengths.ndim == 2:
        lengths = lengths[:, 0]
    return int(lengths.shape[0]), int(lengths.sum())


def read_hdf_lengths(keys: Iterable[str], *, base_dir: Optional[str] = None) -> FileLengths:
    """Lengths of every key that names a readable ``.hdf`` file (relative keys resolved against
    ``base_dir``, e.g. the training's working directory); other keys are left out."""
    out: FileLengths = {}
    todo = list(dict.fromkeys(keys))
    progress = Progress("hdf lengths", total=len(todo))
    for key in todo:
        path = key if os.path.isabs(key) or base_dir is None else os.path.join(base_dir, key)
        if key.endswith(".hdf") and os.path.isfile(path):
            out[key] = hdf_file_lengths(path)
        progress.add(1)
    progress.close()
    return out


def save_file_lengths(lengths: Mapping[str, Tuple[int, int]], path: str) -> None:
    """Write ``{key: [num_seqs, num_frames]}`` as JSON (sorted keys, atomically)."""
    data = {str(k): [int(v[0]), int(v[1])] for k, v in lengths.items()}
    with atomic_write(path, "wt", encoding="ascii", newline="\n") as f:
        f.write(json.dumps(data, sort_keys=True, indent=0, ensure_ascii=True) + "\n")


def load_file_lengths(path: str) -> FileLengths:
    """Read the JSON written by :func:`save_file_lengths` (or by hand: ``{"a.hdf": [12, 3400]}``).

    :raises ValueError: naming the first entry that is not a pair of non-negative ints
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path!r} is not JSON ({exc}); give {{file key: [num_seqs, num_frames]}}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path!r} holds a {type(data).__name__}; give {{file key: [num_seqs, num_frames]}}")
    out: FileLengths = {}
    for key, value in data.items():
        if not (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        ):
            raise ValueError(
                f"{path!r}: entry {key!r} is {value!r}; each value must be [num_seqs, num_frames], "
                "two non-negative ints"
            )
        out[key] = (value[0], value[1])
    return out

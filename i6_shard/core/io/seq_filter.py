"""What the torch engine's length filter (``max_seq_length``/``min_seq_length``, RETURNN's
``returnn.torch.data.pipeline.LenFilterDataPipe``) removes from each HDF file before the batches, from the
files' ``seqLengths``: per file the sequences and frames removed, for the training report to show apart."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

from ..pure.text import short_repr
from .file_lengths import MISSING_H5PY

__all__ = ["data_key_limit"]

SeqLimit = Union[int, float, Mapping[str, Any], None]


def data_key_limit(limit: SeqLimit, *, name: str) -> Optional[int]:
    """The bound on the ``data`` key of a ``max_seq_length``/``min_seq_length`` value (an int applies to every key,
    a dict per key); None where it sets none.

    >>> data_key_limit({"data": 40, "classes": 9}, name="max_seq_length"), data_key_limit(None, name="x")
    (40, None)
    >>> data_key_limit("40", name="max_seq_length")
    Traceback (most recent call last):
    ...
    TypeError: max_seq_length='40' must be an int or a dict {data key: int}, as in the training's config
    """
    if limit is None:
        return None
    if isinstance(limit, Mapping):
        value = limit.get("data")
    else:
        value = limit
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise TypeError(
            f"{name}={short_repr(limit)} must be an int or a dict {{data key: int}}, as in the training's config"
        )
    return int(value)


def filtered_counts(lengths: np.ndarray, *, max_len: Optional[int], min_len: Optional[int]) -> Tuple[int, int]:
    """``(sequences, frames)`` of ``lengths`` the filter removes: longer than ``max_len`` or shorter than ``min_len``.

    >>> filtered_counts(np.array([5, 50, 41, 40]), max_len=40, min_len=None)
    (2, 91)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    gone = np.zeros(lengths.shape, dtype=bool)
    if max_len is not None:
        gone |= lengths > max_len
    if min_len is not None:
        gone |= lengths < min_len
    return int(gone.sum()), int(lengths[gone].sum())


def filtered_hdf_lengths(
    keys: Iterable[str],
    *,
    max_seq_length: SeqLimit = None,
    min_seq_length: SeqLimit = None,
    base_dir: Optional[str] = None,
) -> Dict[str, Tuple[int, int]]:
    """Per key that names a readable ``.hdf`` file (relative keys against ``base_dir``): the sequences and frames of
    its data stream (``seqLengths``' first column, HDFDataset's ``data``) the length filter removes. Other keys
    are left out (their removals unknown).

    :raises ImportError: without h5py
    """
    max_len = data_key_limit(max_seq_length, name="max_seq_length")
    min_len = data_key_limit(min_seq_length, name="min_seq_length")
    try:
        import h5py
    except ImportError as exc:
        raise ImportError(MISSING_H5PY) from exc
    out: Dict[str, Tuple[int, int]] = {}
    for key in dict.fromkeys(keys):
        path = key if os.path.isabs(key) or base_dir is None else os.path.join(base_dir, key)
        if not (key.endswith(".hdf") and os.path.isfile(path)):
            continue
        with h5py.File(path, "r") as f:
            if "seqLengths" not in f:
                continue
            lengths = np.asarray(f["seqLengths"], dtype=np.int64)
        out[key] = filtered_counts(lengths[:, 0] if lengths.ndim == 2 else lengths, max_len=max_len, min_len=min_len)
    return out

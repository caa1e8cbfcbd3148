"""The costs archive: a sizes archive of format 3 (``file_sizes.py``) whose ``sizes`` hold costs in another unit, with
the sequences, frames, pooled length quantiles and (when kept) every sequence's length and the length it batches by;
written deterministically and atomically, and loaded with every check of the sizes archive."""

from __future__ import annotations

import os

import numpy as np

from ..pure.args import first_negative
from ..pure.batching import Batching
from ..pure.costs import BATCH_LENGTHS, NUM_LENGTH_QUANTILES, FileCosts
from .file_sizes import (
    BATCH_LENGTHS_ARRAY,
    COSTS_ARRAYS,
    FILE_COSTS_FORMAT_VERSION,
    SEQ_BATCH_LENGTHS_ARRAY,
    SEQ_LENGTHS_ARRAY,
    STEPS_BATCHING_ARRAY,
    FileSizes,
    read_sizes_archive,
)
from ..pure.costs_checks import check_costs_consistency
from .npz import encode_keys, open_npz, save_npz

__all__ = ["load_file_sizes"]


def save_file_costs(costs: FileCosts, path: str | os.PathLike) -> None:
    """Store costs as a deterministic ``.npz`` (atomically): a file sizes archive of format 3, whose
    ``sizes`` hold the costs, plus ``unit_utf8`` (the unit, UTF-8), ``num_seqs``, ``num_frames`` (int64
    per entry) and ``seq_length_quantiles`` (int64 [257]); in steps also ``steps_batching`` (int64
    [batch_size, max_seqs], 0: no limit); with every sequence's length ``seq_lengths`` (int32), what the lengths
    the torch engine batches by cover (``batch_lengths_utf8``, a key of ``BATCH_LENGTHS``) and, where they differ
    from ``seq_lengths``, those lengths (``seq_batch_lengths``, int32). ``load_file_sizes`` reads it as sizes in
    that unit, so everything that takes a sizes archive takes it.

    :raises ValueError: if ``path`` does not end in ``.npz`` or a cost is negative
    """
    arrays = {
        name: np.asarray(getattr(costs, name), dtype=np.int64)
        for name in ("num_seqs", "num_frames", "seq_length_quantiles")
    }
    values = np.asarray(costs.costs, dtype=np.int64)
    for name, arr in (("costs", values), *arrays.items()):
        bad = first_negative(arr)
        if bad is not None:
            raise ValueError(f"{name} must be >= 0, but entry {bad} is {int(arr[bad])}; nothing was written")
    mtimes = costs.mtimes if costs.mtimes is not None else np.zeros(len(costs), dtype=np.int64)
    arrays.update(
        {
            "format_version": np.array(FILE_COSTS_FORMAT_VERSION, dtype=np.int64),
            "keys_utf8": encode_keys(costs.keys),
            "sizes": values,
            "mtimes_ns": np.asarray(mtimes, dtype=np.int64),
            "unit_utf8": np.frombuffer(costs.unit.encode("utf-8"), dtype=np.uint8),
        }
    )
    if costs.batching is not None:
        arrays[STEPS_BATCHING_ARRAY] = np.array(
            [costs.batching.batch_size or 0, costs.batching.max_seqs or 0], dtype=np.int64
        )
    if costs.seq_lengths is not None:
        arrays[SEQ_LENGTHS_ARRAY] = np.asarray(costs.seq_lengths, dtype=np.int32)
        if costs.batch_lengths != "unknown":
            arrays[BATCH_LENGTHS_ARRAY] = np.frombuffer(costs.batch_lengths.encode("utf-8"), dtype=np.uint8)
        if costs.seq_batch_lengths is not None:
            arrays[SEQ_BATCH_LENGTHS_ARRAY] = np.asarray(costs.seq_batch_lengths, dtype=np.int32)
    save_npz(path, arrays, kind="file costs archive")


def load_file_costs(path: str | os.PathLike) -> FileCosts:
    """Load what :func:`save_file_costs` wrote.

    :raises ValueError: for a sizes archive in bytes (it has no lengths: compute costs with `costs`), or a
        corrupt archive
    """
    path = os.fspath(path)
    sizes = read_sizes_archive(path)  # every check of the common arrays
    if sizes.unit == "bytes":
        raise ValueError(
            f"{path!r} holds sizes in bytes, without sequence lengths; compute the costs with "
            "`python -m i6_shard costs` or ComputeFileCostsJob"
        )
    n = len(sizes)
    with open_npz(path, kind="file costs archive") as npz:
        headers = npz.headers
        for name in COSTS_ARRAYS[1:]:
            want = (NUM_LENGTH_QUANTILES,) if name == "seq_length_quantiles" else (n,)
            if headers[name].dtype != np.int64 or tuple(headers[name].shape) != want:
                raise ValueError(
                    f"{path!r} is corrupt: {name} is {headers[name].dtype}{list(headers[name].shape)}, "
                    f"expected int64{list(want)}"
                )
        extra = {name: npz.read(name) for name in COSTS_ARRAYS[1:]}
        batching = None
        if sizes.unit == "steps":
            h = headers[STEPS_BATCHING_ARRAY]
            if h.dtype != np.int64 or tuple(h.shape) != (2,):
                raise ValueError(
                    f"{path!r} is corrupt: {STEPS_BATCHING_ARRAY} is {h.dtype}{list(h.shape)}, expected int64[2]"
                )
            limits = [int(x) for x in npz.read(STEPS_BATCHING_ARRAY)]
            try:
                batching = Batching(batch_size=limits[0] or None, max_seqs=limits[1] or None)
            except ValueError as exc:
                raise ValueError(f"{path!r} is corrupt: {STEPS_BATCHING_ARRAY} {limits}: {exc}") from None
        extra[SEQ_LENGTHS_ARRAY] = (
            _read_seq_lengths(npz, path, num_seqs=extra["num_seqs"]) if SEQ_LENGTHS_ARRAY in headers else None
        )
        batch_lengths = _read_batch_lengths(npz, path, has_lengths=extra[SEQ_LENGTHS_ARRAY] is not None)
        extra[SEQ_BATCH_LENGTHS_ARRAY] = (
            _read_seq_lengths(npz, path, num_seqs=extra["num_seqs"], name=SEQ_BATCH_LENGTHS_ARRAY)
            if SEQ_BATCH_LENGTHS_ARRAY in headers
            else None
        )
    for name, arr in extra.items():
        if arr is not None and first_negative(arr) is not None:
            raise ValueError(f"{path!r} is corrupt: {name} has negative entries")
    if extra[SEQ_BATCH_LENGTHS_ARRAY] is not None and extra[SEQ_LENGTHS_ARRAY] is None:
        raise ValueError(
            f"{path!r} is corrupt: it holds {SEQ_BATCH_LENGTHS_ARRAY} without {SEQ_LENGTHS_ARRAY}; compute the costs "
            "again (`python -m i6_shard costs`, ComputeFileCostsJob)"
        )
    costs = FileCosts(
        keys=sizes.keys,
        costs=sizes.sizes,
        unit=sizes.unit,
        mtimes=sizes.mtimes,
        batching=batching,
        batch_lengths=batch_lengths,
        **extra,
    )
    check_costs_consistency(costs, path=path)
    return costs


def load_file_sizes(path: str | os.PathLike) -> FileSizes:
    """Load what ``save_file_sizes`` wrote (format 2, or 1 without modification times), or a costs archive as sizes
    in its unit; a costs archive is checked for consistency first (:func:`load_file_costs`), so every reader loads
    through one checked path.

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if the file is not a file-sizes archive of a known version, holds a negative size, or is a
        costs archive whose arrays contradict each other
    """
    sizes = read_sizes_archive(path)
    if sizes.unit != "bytes":
        load_file_costs(path)
    return sizes


def _read_seq_lengths(npz, path: str, *, num_seqs: np.ndarray, name: str = SEQ_LENGTHS_ARRAY) -> np.ndarray:
    """The archive's ``seq_lengths`` (or ``seq_batch_lengths``), checked against ``num_seqs`` before it is
    inflated."""
    h = npz.headers[name]
    expected = sum(int(x) for x in num_seqs)
    if h.dtype != np.int32 or tuple(h.shape) != (expected,):
        raise ValueError(
            f"{path!r} is corrupt: {name} is {h.dtype}{list(h.shape)}, expected int32[{expected}] (the sum of num_seqs)"
        )
    return npz.read(name)


def _read_batch_lengths(npz, path: str, *, has_lengths: bool) -> str:
    """What the archive's batching lengths cover (a key of ``BATCH_LENGTHS``): ``"unknown"`` in an archive written
    before they were kept."""
    if BATCH_LENGTHS_ARRAY not in npz.headers:
        return "unknown"
    h = npz.headers[BATCH_LENGTHS_ARRAY]
    if not has_lengths or h.dtype != np.uint8 or len(h.shape) != 1 or h.shape[0] > 64:
        raise ValueError(
            f"{path!r} is corrupt: {BATCH_LENGTHS_ARRAY} is {h.dtype}{list(h.shape)}"
            + ("" if has_lengths else f" in an archive without {SEQ_LENGTHS_ARRAY}")
            + "; compute the costs again (`python -m i6_shard costs`, ComputeFileCostsJob)"
        )
    value = npz.read(BATCH_LENGTHS_ARRAY).tobytes().decode("utf-8", "replace")
    if value not in BATCH_LENGTHS or value == "unknown":
        raise ValueError(
            f"{path!r} is corrupt: {BATCH_LENGTHS_ARRAY} is {value[:64]!r}, none of "
            f"{sorted(set(BATCH_LENGTHS) - {'unknown'})}; compute the costs again (`python -m i6_shard costs`, "
            "ComputeFileCostsJob)"
        )
    return value

"""File sizes as RETURNN's DistributeFilesDataset computes them (sum over a tree's leaves, keyed by the tree
key): the FileSizes type and its archive, stored compactly with the files' modification times. The stat engine
that computes them is core/io/stat_engine.py, the check that they still hold core/io/stale_sizes.py."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..pure.args import first_negative
from ..pure.settings import UNITS
from .npz import decode_keys, encode_keys, open_npz, save_npz
from ..pure.text import short_repr

__all__ = ["FileSizes", "save_file_sizes", "check_archive_path"]

#: Written when the modification times are known (format 2 adds ``mtimes_ns``); format 1 is still read.
FILE_SIZES_FORMAT_VERSION = 2
#: Format 3 is a costs archive (core/io/file_costs.py): costs in another unit than bytes, the unit named in
#: ``unit_utf8``, with the files' sequence counts, frames and sequence length quantiles.
FILE_COSTS_FORMAT_VERSION = 3
COSTS_ARRAYS = ("unit_utf8", "num_seqs", "num_frames", "seq_length_quantiles")
#: A costs archive in steps also holds the batching limits of its steps: int64 [batch_size, max_seqs], 0: no limit.
STEPS_BATCHING_ARRAY = "steps_batching"
#: A costs archive may also hold every sequence's length, int32 in entry order (``num_seqs`` per entry): the
#: predicted loss then batches each rank's own lengths. Archives without it predict from the pooled quantiles.
SEQ_LENGTHS_ARRAY = "seq_lengths"
#: With ``seq_lengths``, a costs archive names what its batching lengths cover (``BATCH_LENGTHS`` of
#: core/pure/costs.py, UTF-8): the length RETURNN's torch engine batches and length-filters each sequence by (the longest
#: of every data key the sub-epoch dataset yields). An archive without it was written before they were kept.
BATCH_LENGTHS_ARRAY = "batch_lengths_utf8"
#: The batching lengths, int32 like ``seq_lengths``, where some sequence's differs from its ``seq_lengths`` (a longer
#: stream than the cost stream); without it they are ``seq_lengths``.
SEQ_BATCH_LENGTHS_ARRAY = "seq_batch_lengths"
#: The members a costs archive may hold beyond those of its format, each checked by load_file_costs.
OPTIONAL_COSTS_ARRAYS = (SEQ_LENGTHS_ARRAY, BATCH_LENGTHS_ARRAY, SEQ_BATCH_LENGTHS_ARRAY)
_ARCHIVE_ARRAYS = {
    1: {"format_version", "keys_utf8", "sizes"},
    2: {"format_version", "keys_utf8", "sizes", "mtimes_ns"},
    3: {"format_version", "keys_utf8", "sizes", "mtimes_ns", *COSTS_ARRAYS},
}
_MAX_UNIT_BYTES = 64


def check_archive_path(path: str, *, name: str = "file_sizes") -> str:
    """A sizes or costs archive is a ``.npz`` (what ``sizes``/``costs`` and ComputeFileSizesJob /
    ComputeFileCostsJob write): the one check of the name where a job or a builder takes one, before any file
    is read (a file list given in its place would otherwise fail only where the archive is loaded).

    >>> check_archive_path("/data/files.txt")
    Traceback (most recent call last):
    ...
    ValueError: file_sizes='/data/files.txt' is not a .npz file: pass ComputeFileSizesJob(...).out_file_sizes (not its out_file_list), ComputeFileCostsJob(...).out_file_costs, or the .npz that `python -m i6_shard sizes -o` (or `costs -o`) wrote: run `sizes` or `costs` on the file list first
    """
    if os.path.splitext(path)[1] != ".npz":
        raise ValueError(
            f"{name}={path!r} is not a .npz file: pass ComputeFileSizesJob(...).out_file_sizes (not its "
            "out_file_list), ComputeFileCostsJob(...).out_file_costs, or the .npz that `python -m i6_shard sizes "
            "-o` (or `costs -o`) wrote: run `sizes` or `costs` on the file list first"
        )
    return path


@dataclass(frozen=True)
class FileSizes:
    """Sizes of the entries of a file list, in list order.

    :ivar keys: tree keys (RETURNN's ``_get_key_for_file_tree``), one per entry
    :ivar sizes: int64 bytes per entry, shape [num_files]
    :ivar mtimes: int64 modification time per entry in ns since the epoch (the latest of its leaves'),
        shape [num_files]; None where unknown (an archive of format 1)
    :ivar unit: what ``sizes`` counts: "bytes", or the unit of a costs archive ("frames", "seqs", ...)
    """

    keys: List[str]
    sizes: np.ndarray
    mtimes: Optional[np.ndarray] = None
    unit: str = "bytes"

    def __post_init__(self):
        if len(self.keys) != len(self.sizes):
            raise ValueError(f"{len(self.keys)} keys but {len(self.sizes)} sizes; they must pair up")
        if self.mtimes is not None and len(self.mtimes) != len(self.sizes):
            raise ValueError(f"{len(self.mtimes)} mtimes but {len(self.sizes)} sizes; they must pair up")

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def concatenate(cls, parts: Sequence["FileSizes"]) -> "FileSizes":
        """The parts one after the other (e.g. the parts of a split list); mtimes only if all parts have them.

        >>> a = FileSizes(["x"], np.array([1]), np.array([5])); b = FileSizes(["y"], np.array([2]), np.array([6]))
        >>> c = FileSizes.concatenate([a, b]); c.keys, c.sizes.tolist(), c.mtimes.tolist()
        (['x', 'y'], [1, 2], [5, 6])
        """
        keys = [k for p in parts for k in p.keys]
        sizes = np.concatenate([np.asarray(p.sizes, dtype=np.int64) for p in parts] or [np.zeros(0, np.int64)])
        known = parts and all(p.mtimes is not None for p in parts)
        mtimes = np.concatenate([np.asarray(p.mtimes, dtype=np.int64) for p in parts]) if known else None
        return cls(keys=keys, sizes=sizes, mtimes=mtimes)

    def as_dict(self) -> Dict[str, int]:
        """key -> size, the form of RETURNN's ``DistributeFilesDataset._file_sizes``."""
        return dict(zip(self.keys, self.sizes.tolist()))


def save_file_sizes(file_sizes: FileSizes, path: str | os.PathLike) -> None:
    """Store sizes as a deterministic ``.npz`` (written atomically) with these arrays:

    - ``keys_utf8``: uint8, the keys encoded as UTF-8 (``surrogatepass``), joined by NUL bytes
      (a NUL never occurs in a file name);
    - ``sizes``: int64, shape [num_files], in list order;
    - ``mtimes_ns``: int64, shape [num_files], each entry's modification time in ns since the epoch
      (the latest of its leaves'), when ``file_sizes.mtimes`` is known;
    - ``format_version``: int64 scalar: 2 with ``mtimes_ns``, else 1 (the format before it, same bytes).

    The zip members are deflated (level 1) and carry fixed timestamps, so equal sizes give
    equal bytes. Any numpy can read it:
    ``keys = d["keys_utf8"].tobytes().decode("utf-8", "surrogatepass").split("\\0")`` (no keys if
    ``sizes`` is empty).

    :raises ValueError: if ``path`` does not end in ``.npz``, a key holds a NUL byte, or the sizes are
        not integers in [0, 2**63)
    """
    if file_sizes.unit != "bytes":
        raise ValueError(
            f"these are costs in {file_sizes.unit}, not sizes in bytes; write them with "
            "core.io.file_costs.save_file_costs, which records the unit"
        )
    sizes = np.asarray(file_sizes.sizes)
    if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
        raise ValueError(f"sizes must be a vector of integers, got {sizes.dtype}{list(sizes.shape)}")
    _check_not_negative(sizes, file_sizes.keys, where="sizes must be >= 0 (bytes), but", fix="nothing was written")
    if sizes.size and sizes.dtype.kind == "u" and int(sizes.max()) >= 2**63:
        bad = int(np.argmax(sizes >= 2**63))
        raise ValueError(
            f"sizes must fit int64, but entry {bad} ({short_repr(file_sizes.keys[bad])}) has "
            f"{int(sizes[bad])}; nothing was written"
        )
    arrays = {
        "format_version": np.array(1, dtype=np.int64),
        "keys_utf8": encode_keys(file_sizes.keys),
        "sizes": sizes.astype(np.int64),
    }
    if file_sizes.mtimes is not None:
        mtimes = np.asarray(file_sizes.mtimes)
        if mtimes.shape != sizes.shape or (mtimes.size and mtimes.dtype.kind not in "iu"):
            raise ValueError(
                f"mtimes must be a vector of integers (ns) like sizes, got {mtimes.dtype}{list(mtimes.shape)}"
            )
        arrays["format_version"] = np.array(2, dtype=np.int64)
        arrays["mtimes_ns"] = mtimes.astype(np.int64)
    save_npz(path, arrays, kind="file sizes archive")


def _check_not_negative(sizes: np.ndarray, keys: Sequence[str], *, where: str, fix: str) -> None:
    bad = first_negative(sizes)
    if bad is not None:
        raise ValueError(
            f"{where} entry {bad} ({short_repr(keys[bad])}) has {int(sizes[bad])} "
            f"({int(np.count_nonzero(sizes < 0))} negative in all); {fix}"
        )


def read_sizes_archive(path: str | os.PathLike) -> FileSizes:
    """The sizes (or costs) of an archive written by :func:`save_file_sizes` (or ``save_file_costs``).

    The archive's member headers are checked against each other and against the members' sizes
    before any data is inflated, so a crafted or corrupt file costs no more memory than its
    real contents.

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if the file is not a file-sizes archive of a known version, or holds a negative size
    """
    path = os.fspath(path)
    kind = "file sizes archive"
    with open_npz(
        path,
        kind=kind,
        missing=f"file sizes {path!r} do not exist; compute them with "
        "ComputeFileSizesJob or `python -m i6_shard sizes`",
    ) as npz:
        names, has_batching, num = _check_headers(npz.headers, path=path)
        unit_h, mtimes_h = npz.headers.get("unit_utf8"), npz.headers.get("mtimes_ns")
        version = npz.read("format_version")
        if int(version) not in _ARCHIVE_ARRAYS or _ARCHIVE_ARRAYS[int(version)] != names:
            raise ValueError(
                f"{path!r} has file sizes format {int(version)} with arrays {sorted(names)}; this "
                f"i6_shard reads formats {sorted(set(_ARCHIVE_ARRAYS) - {FILE_COSTS_FORMAT_VERSION})} "
                f"({FILE_SIZES_FORMAT_VERSION}: with mtimes_ns) and costs archives (format "
                f"{FILE_COSTS_FORMAT_VERSION})"
            )
        sizes = npz.read("sizes")
        keys = decode_keys(npz.read("keys_utf8"), num_keys=num, path=path)
        mtimes = npz.read("mtimes_ns") if mtimes_h is not None else None
        unit = "bytes" if unit_h is None else _read_unit(npz.read("unit_utf8"), path=path)
    if has_batching != (unit == "steps"):
        raise ValueError(
            f"{path!r} is corrupt: a costs archive holds {STEPS_BATCHING_ARRAY} if and only if its unit "
            f"is steps (its unit is {unit!r})"
        )
    _check_not_negative(
        sizes,
        keys,
        where=f"{path!r} is corrupt: sizes must be >= 0 (bytes), but",
        fix="compute the sizes again (ComputeFileSizesJob or `python -m i6_shard sizes`)",
    )
    return FileSizes(keys=keys, sizes=sizes, mtimes=mtimes, unit=unit)


def _check_headers(headers: Mapping[str, Any], *, path: str) -> Tuple[set, bool, int]:
    """The member headers of a sizes (or costs) archive checked against each other, before any data is read.

    :return: the names of its members (without the optional ones of a costs archive), whether it holds
        ``steps_batching``, and the number of entries
    :raises ValueError: naming the archive and what is wrong
    """
    names = set(headers)
    has_batching = STEPS_BATCHING_ARRAY in names and "unit_utf8" in names
    if has_batching:
        names.discard(STEPS_BATCHING_ARRAY)  # checked with the unit, by load_file_sizes
    if "unit_utf8" in names:
        names.difference_update(OPTIONAL_COSTS_ARRAYS)  # optional; checked by load_file_costs, which reads them
    if names not in _ARCHIVE_ARRAYS.values():
        raise ValueError(
            f"{path!r} is not a file sizes archive (it holds arrays {sorted(names)[:10]}, expected "
            "format_version, keys_utf8, sizes and, from format 2 on, mtimes_ns; a costs archive "
            f"also {', '.join(COSTS_ARRAYS)})"
        )
    unit_h = headers.get("unit_utf8")
    if unit_h is not None and (
        unit_h.dtype != np.uint8 or len(unit_h.shape) != 1 or not 0 < unit_h.shape[0] <= _MAX_UNIT_BYTES
    ):
        raise ValueError(
            f"{path!r} is corrupt: unit_utf8 is {unit_h.dtype}{list(unit_h.shape)}, expected a "
            f"uint8 vector of 1..{_MAX_UNIT_BYTES} bytes"
        )
    version_h, keys_h, sizes_h = headers["format_version"], headers["keys_utf8"], headers["sizes"]
    if version_h.shape != () or version_h.dtype.kind not in "iu":
        raise ValueError(f"{path!r} is corrupt: format_version is {version_h.dtype}{list(version_h.shape)}")
    if sizes_h.dtype != np.int64 or len(sizes_h.shape) != 1:
        raise ValueError(f"{path!r} is corrupt: sizes {sizes_h.dtype}{list(sizes_h.shape)}; expected an int64 vector")
    num = sizes_h.shape[0]
    mtimes_h = headers.get("mtimes_ns")
    if mtimes_h is not None and (mtimes_h.dtype != np.int64 or mtimes_h.shape != (num,)):
        raise ValueError(
            f"{path!r} is corrupt: mtimes_ns {mtimes_h.dtype}{list(mtimes_h.shape)} for {num} "
            "sizes; expected an int64 vector like sizes"
        )
    if keys_h.dtype != np.uint8 or len(keys_h.shape) != 1:
        raise ValueError(
            f"{path!r} is corrupt: keys_utf8 is {keys_h.dtype}{list(keys_h.shape)}, expected a uint8 vector"
        )
    if (num == 0 and keys_h.shape[0]) or keys_h.shape[0] < num - 1:
        raise ValueError(f"{path!r} is corrupt: {keys_h.shape[0]} bytes of keys cannot hold {num} keys")
    return names, has_batching, num


def _read_unit(data: np.ndarray, *, path: str) -> str:
    """The unit of a costs archive, one of ``pure.settings.UNITS`` other than bytes."""
    unit = data.tobytes().decode("utf-8", "replace")
    if unit not in UNITS or unit == "bytes":
        raise ValueError(f"{path!r} is corrupt: its unit is {unit!r}; a costs archive counts one of {UNITS[1:]}")
    return unit

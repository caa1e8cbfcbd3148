"""A full device (ENOSPC, EDQUOT, EFBIG) under a command that writes data (``make-data``, ``sizes``, ``costs``,
``plan``): one line naming the output, the space it needs and the space free, whatever library wrote (h5py
reports it as a ``RuntimeError`` carrying ``errno = 28``)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from ..pure.text import short_repr
from .atomic import WRITTEN_PATH_ATTR, full_device_fix, full_device_reason
from .cost_archive import load_file_sizes
from .hdf_corpus import SEQ_FRAMES, hdf_corpus_seq_counts
from .plan_file import plan_arrays_nbytes

__all__ = [
    "reporting_full_device",
    "archive_bytes_bound",
    "corpus_bytes_bound",
    "costs_bytes_bound",
    "plan_dir_bytes_bound",
    "needing",
]

#: The attribute :func:`needing` puts on a full-device error: the bytes the whole output set needs.
NEEDED_BYTES_ATTR = "i6_shard_needed_bytes"

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: How HDF5 (h5py) words a failed write: "... errno = 28, error message = 'No space left on device' ...".
_HDF5_ERRNO = re.compile(r"errno = (\d+)")


def full_device_errno(exc: BaseException) -> Optional[int]:
    """The errno if ``exc`` says the device (or the quota) is full, else None; also for h5py's ``RuntimeError``.

    >>> full_device_errno(RuntimeError("Can't write data (file write failed: ..., errno = 28, error message = ..."))
    28
    >>> full_device_errno(OSError(errno.ENOENT, "No such file")) is None
    True
    """
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return exc.errno
    if isinstance(exc, (OSError, RuntimeError)):
        for m in _HDF5_ERRNO.finditer(str(exc)[:100_000]):
            if int(m[1]) in _FULL:
                return int(m[1])
    return None


def _free_bytes(path: str) -> Optional[int]:
    """Bytes free to this user on the device of ``path`` (its nearest existing ancestor), None if unknown."""
    path = os.path.abspath(path)
    while True:
        try:
            st = os.statvfs(path)
        except OSError:
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            continue
        return st.f_bavail * st.f_frsize


def _fmt(num: int) -> str:
    """
    >>> _fmt(1536), _fmt(5 * 10**9)
    ('1.5 KiB', '4.7 GiB')
    """
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@contextlib.contextmanager
def reporting_full_device(output: str, *, needed: Callable[[], int]) -> Iterator[None]:
    """Turn a full device met inside the block into one ``OSError`` (same errno) naming ``output``, the bytes it
    needs (``needed()``, called only then) and those free. Run it outside the atomic writer, whose clean-up has then
    left nothing of ``output``.

    >>> with reporting_full_device("/out/sizes.npz", needed=lambda: 3 << 20):  # doctest: +ELLIPSIS
    ...     raise OSError(errno.ENOSPC, "No space left on device")
    Traceback (most recent call last):
    ...
    OSError: cannot write '/out/sizes.npz': no space left on device; it needs about 3.0 MiB, ... free there: free some space or choose another output (nothing was written)
    """
    try:
        yield
    except BaseException as exc:
        code = full_device_errno(exc)
        if code is None:
            raise
        output = getattr(exc, WRITTEN_PATH_ATTR, None) or output  # the file it could not write, where known
        free = _free_bytes(os.path.dirname(os.path.abspath(output)) or ".")
        try:
            known = getattr(exc, NEEDED_BYTES_ATTR, None)
            need = f"about {_fmt(needed() if known is None else known)}"
        except (OSError, ValueError, TypeError, MemoryError):  # the estimate is a courtesy: never hide the real error
            need = "an unknown amount"
        reason = full_device_reason(code)
        if "ulimit -f" in reason:
            where = f"it needs {need}: {full_device_fix(code, reason)}"
        else:
            where = (
                f"it needs {need}, {'an unknown amount' if free is None else _fmt(free)} free there: free some space "
                "or choose another output"
            )
        new = OSError(f"cannot write {short_repr(output)}: {reason}; {where} (nothing was written)")
        new.errno = code  # set after: str(new) is the message alone, one line without "[Errno 28]"
        raise new from None


@contextlib.contextmanager
def needing(num_bytes: int) -> Iterator[None]:
    """Mark a full-device error met inside the block with ``num_bytes``, what the whole output set needs (known
    before its first byte is written), for :func:`reporting_full_device` to name instead of its estimate."""
    try:
        yield
    except BaseException as exc:
        if full_device_errno(exc) is not None and getattr(exc, NEEDED_BYTES_ATTR, None) is None:
            setattr(exc, NEEDED_BYTES_ATTR, int(num_bytes))
        raise


def archive_bytes_bound(keys: Sequence[str], *, int64_per_entry: int, extra_bytes: int = 0) -> int:
    """At most the bytes of an ``.npz`` archive of ``keys`` (UTF-8, NUL-joined) and ``int64_per_entry`` int64 arrays
    of one value per key, uncompressed, plus ``extra_bytes`` and 64 KiB of zip and ``.npy`` headers.

    >>> archive_bytes_bound(["a.hdf", "b.hdf"], int64_per_entry=2)
    65580
    """
    key_bytes = sum(len(k.encode("utf-8", "surrogatepass")) + 1 for k in keys)
    return key_bytes + 8 * int64_per_entry * len(keys) + extra_bytes + (64 << 10)


def hdf_corpus_bytes_bound(seq_counts: Sequence[int], *, feature_dim: int, max_frames: int) -> int:
    """At most the bytes of ``make-data``'s HDF files: every sequence ``max_frames`` long, float32 features, its
    length and tag, and 64 KiB of HDF5 metadata per file.

    >>> hdf_corpus_bytes_bound([2, 3], feature_dim=8, max_frames=120)
    150632
    """
    num_seqs = int(sum(int(c) for c in seq_counts))
    return num_seqs * (max_frames * feature_dim * 4 + 8 + 64) + len(seq_counts) * (64 << 10)


def corpus_bytes_bound(*, num_files: int, seed: int, feature_dim: int) -> int:
    """At most the bytes of ``make-data``'s output (:func:`~i6_shard.core.io.hdf_corpus.write_hdf_corpus`): the HDF
    files and the list."""
    counts = hdf_corpus_seq_counts(num_files, seed=seed)
    return hdf_corpus_bytes_bound(counts, feature_dim=feature_dim, max_frames=SEQ_FRAMES[1]) + num_files * 4096


def costs_bytes_bound(costs) -> int:
    """At most the bytes of a costs archive (:func:`~i6_shard.core.io.file_costs.save_file_costs`): five int64 per
    entry, the int32 length of every sequence and, where kept, its batching length, the quantiles."""
    num_lengths = sum(0 if a is None else int(np.asarray(a).size) for a in (costs.seq_lengths, costs.seq_batch_lengths))
    return archive_bytes_bound(costs.keys, int64_per_entry=5, extra_bytes=4 * num_lengths + 8 * 1024)


def plan_dir_bytes_bound(sizes_path: str, settings) -> int:
    """At most the bytes of a plan directory for the sizes archive at ``sizes_path``: the plan file's layouts
    (:func:`~i6_shard.core.io.plan_file.plan_arrays_nbytes`), keys and sizes, and 4 MiB for summary, report and plot."""
    sizes = load_file_sizes(sizes_path)
    layouts = plan_arrays_nbytes(settings, num_files=len(sizes))
    return layouts + archive_bytes_bound(sizes.keys, int64_per_entry=1, extra_bytes=4 << 20)

"""Byte-deterministic ``.npz`` files that ``numpy.load`` reads as usual: fixed
member order and timestamps, so equal inputs give equal bytes."""

from __future__ import annotations

import contextlib
import math
import os
import stat
import struct
import zipfile
import zlib
from typing import Collection, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..pure.text import short_repr
from .atomic import atomic_path, check_suffix

__all__ = ["encode_keys", "decode_keys"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_WRITE_CHUNK_BYTES = 16 << 20
#: Largest ratio of a member's size to its compressed size that is read (deflate can reach ~1030).
_MAX_RATIO = 400
#: Bytes any member may have beyond that ratio (headers of tiny members compress badly).
_RATIO_SLACK = 1 << 16
#: Most members an archive may have (i6_shard's have at most a few dozen).
_MAX_MEMBERS = 1000


def inflation_problem(declared: int, stored: int, *, stored_as: str = "compressed") -> Optional[str]:
    """Why ``declared`` bytes cannot come from ``stored`` bytes of a file (a zip member, an HDF dataset), or
    None: more than :data:`_MAX_RATIO` times as much (deflate reaches ~1030 only on crafted input), beyond a
    small slack. Memory then stays bounded by the input's size, not by the numbers inside it.

    >>> inflation_problem(10**9, 10**6), inflation_problem(10**6, 10**6)
    ('declares 1,000,000,000 bytes (953.7 MiB) from 1,000,000 bytes compressed, more than 400 times as much', None)
    """
    if declared > _MAX_RATIO * stored + _RATIO_SLACK:
        return f"declares {_nbytes(declared)} from {_nbytes(stored)} {stored_as}, more than {_MAX_RATIO} times as much"
    return None


def save_npz(
    path: str | os.PathLike,
    arrays: Mapping[str, np.ndarray],
    *,
    compress: bool = True,
    kind: str = "npz archive",
    uncompressed: Collection[str] = (),
) -> None:
    """Write ``arrays`` as an npz archive, atomically and with deterministic bytes.

    :param arrays: name -> array; no object arrays (they would need pickle to load)
    :param uncompressed: names of arrays stored without compression even with ``compress``, so that
        :meth:`NpzReader.read_row` reads one row of them without inflating the rows before it
    :param kind: what the file is, for the error about a name that does not end in ``.npz``
    :raises ValueError: if ``path`` does not end in ``.npz`` (an npz is a zip: no such bytes under ``.json``)
    """
    check_suffix(path, suffix=".npz", kind=kind)
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            for name in sorted(arrays):
                arr = np.asarray(arrays[name])
                if arr.dtype == object:
                    raise TypeError(f"array {name!r} has dtype object, which npz cannot store without pickle")
                info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
                deflate = compress and name not in uncompressed
                info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
                if deflate:
                    _set_compress_level(info, 1)
                info.external_attr = 0o644 << 16
                # Streamed member by member (numpy writes in buffered chunks): no in-memory copy
                # of a large array; zip64 headers always, so the bytes do not depend on the size.
                with zf.open(info, "w", force_zip64=True) as member:
                    _write_npy(member, arr)


def npz_bytes_bound(arrays: Mapping[str, np.ndarray]) -> int:
    """At most the bytes :func:`save_npz` writes for ``arrays``: their data (deflate adds at most 0.1% to bytes it
    cannot shrink), and 1 KiB of ``.npy`` header and zip64 entry per array, plus 1 KiB for the archive's end.

    >>> npz_bytes_bound({"a": np.zeros(1000, dtype=np.int64)})
    10056
    """
    data = sum(int(np.asarray(a).nbytes) for a in arrays.values())
    return data + data // 1000 + 1024 * (len(arrays) + 1)


def _write_npy(fp, arr: np.ndarray) -> None:
    """The bytes of ``np.save`` (format 1.0), written in slices: ``np.lib.format.write_array``
    makes a full in-memory copy of a contiguous array when the target is not a real file."""
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    np.lib.format.write_array_header_1_0(fp, np.lib.format.header_data_from_array_1_0(arr))
    flat = arr.reshape(-1)
    step = max(1, _WRITE_CHUNK_BYTES // max(arr.itemsize, 1))
    for start in range(0, flat.size, step):
        fp.write(flat[start : start + step].tobytes())


def _set_compress_level(info: zipfile.ZipInfo, level: int) -> None:
    if "compress_level" in dir(zipfile.ZipInfo):  # Python >= 3.13
        info.compress_level = level
    else:
        info._compresslevel = level


def read_npy_header(f) -> tuple:
    """``(shape, fortran_order, dtype)`` from the header of an ``.npy`` stream at its start, leaving
    ``f`` at the first data byte; only the header is read.

    :raises ValueError: for a format version other than 1.0 and 2.0, or a corrupt header
    """
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f".npy format version {version}, not 1.0 or 2.0")


class NpzReader:
    """An opened ``.npz`` archive whose members' ``.npy`` headers are read and checked, none of the
    data yet: callers check the declared shapes (:attr:`headers`) against each other before
    :meth:`read` inflates a member. Use :func:`open_npz`."""

    def __init__(self, zf: zipfile.ZipFile, *, path: str, kind: str, archive_bytes: int):
        self._zf, self.path, self.kind, self._archive_bytes = zf, path, kind, archive_bytes
        self._infos: Dict[str, zipfile.ZipInfo] = {}
        self._header_bytes: Dict[str, int] = {}
        self.headers: Dict[str, NpyHeader] = {}
        infos = zf.infolist()
        if len(infos) > _MAX_MEMBERS:
            raise ValueError(f"{path!r} is not a {kind}: it has {len(infos)} members")
        for info in infos:
            name = info.filename[:-4] if info.filename.endswith(".npy") else None
            if name is None or name in self._infos:
                raise ValueError(
                    f"{path!r} is not a {kind}: member {info.filename[:100]!r} is "
                    f"{'not an .npy array' if name is None else 'there twice'}"
                )
            self._infos[name] = info
            self.headers[name] = self._header(info, name)

    def _header(self, info: zipfile.ZipInfo, name: str) -> NpyHeader:
        where = f"{self.path!r} is corrupt or crafted: member {info.filename[:100]!r}"
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ValueError(
                f"{where} uses zip compression method {info.compress_type}; "
                f"a {self.kind} has only stored or deflated members"
            )
        if info.header_offset + info.compress_size > self._archive_bytes:
            raise ValueError(
                f"{where} declares {_nbytes(info.compress_size)} compressed from byte "
                f"{info.header_offset:,} on, but the file has {_nbytes(self._archive_bytes)}; it was "
                "refused before reading it"
            )
        if inflation_problem(info.file_size, info.compress_size):
            raise ValueError(
                f"{where} {inflation_problem(info.file_size, info.compress_size)}, which no i6_shard "
                "archive holds; it was refused before inflating it"
            )
        with self._zf.open(info) as f:
            try:
                shape, fortran_order, dtype = read_npy_header(f)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            header_bytes = f.tell()
        if dtype.hasobject:
            raise ValueError(f"{where} holds Python objects, which only pickle could load; refused")
        data_bytes = math.prod(shape) * dtype.itemsize
        if header_bytes + data_bytes != info.file_size:
            raise ValueError(
                f"{where} declares shape {shape} of {dtype} ({_nbytes(data_bytes)}) but holds "
                f"{_nbytes(info.file_size - header_bytes)}; refused before allocating it"
            )
        self._header_bytes[name] = header_bytes
        return NpyHeader(shape=tuple(int(n) for n in shape), dtype=dtype, fortran_order=bool(fortran_order))

    def read(self, name: str) -> np.ndarray:
        """The array of member ``name`` (its size was checked against its header on opening)."""
        try:
            with self._zf.open(self._infos[name]) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise ValueError(f"{self.path!r} is not a readable {self.kind}: {type(exc).__name__}: {exc}") from None

    def read_row(self, name: str, row: int) -> np.ndarray:
        """Row ``row`` of member ``name``, a C-order array of shape [..., n], its leading axes flattened:
        ``read(name).reshape(-1, n)[row]``, reading only that row's bytes when the member is stored
        uncompressed (``save_npz(..., uncompressed=...)``), else inflating the member up to that row in
        chunks; memory O(n) either way.

        >>> import tempfile; d = tempfile.mkdtemp()
        >>> for packed in ((), ("a",)):
        ...     save_npz(d + "/x.npz", {"a": np.arange(12).reshape(2, 2, 3)}, uncompressed=packed)
        ...     with open_npz(d + "/x.npz") as npz:
        ...         print(npz.read_row("a", 2).tolist())
        [6, 7, 8]
        [6, 7, 8]
        """
        header, info = self.headers[name], self._infos[name]
        if header.fortran_order or not header.shape:
            raise ValueError(f"{self.path!r}: member {name!r} is not a C-order array with rows")
        width = header.shape[-1]
        num_rows = math.prod(header.shape[:-1])
        if not 0 <= row < num_rows:
            raise IndexError(f"{self.path!r}: member {name!r} has {num_rows} rows, no row {row}")
        row_bytes = width * header.dtype.itemsize
        skip = self._header_bytes[name] + row * row_bytes
        try:
            if info.compress_type == zipfile.ZIP_STORED and self._zf.fp is not None:
                fp = self._zf.fp
                fp.seek(info.header_offset)
                local = fp.read(30)
                if len(local) != 30 or local[:4] != b"PK\x03\x04":
                    raise ValueError("bad local header")
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                fp.seek(info.header_offset + 30 + name_len + extra_len + skip)
                data = fp.read(row_bytes)
            else:
                with self._zf.open(info) as f:
                    while skip:
                        chunk = f.read(min(skip, _WRITE_CHUNK_BYTES))
                        if not chunk:
                            raise EOFError(f"member {name!r} ends before row {row}")
                        skip -= len(chunk)
                    data = f.read(row_bytes)
            if len(data) != row_bytes:
                raise EOFError(f"row {row} is truncated")
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise ValueError(f"{self.path!r} is not a readable {self.kind}: {type(exc).__name__}: {exc}") from None
        return np.frombuffer(data, dtype=header.dtype).copy()


class NpyHeader(NamedTuple):
    """What an ``.npy`` member declares: ``shape`` and ``dtype`` (checked against the member's size)."""

    shape: Tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool


def _nbytes(n: int) -> str:
    """A byte count for messages.

    >>> _nbytes(8), _nbytes(8 * 10**12)
    ('8 bytes', '8,000,000,000,000 bytes (7.3 TiB)')
    """
    if n < 1 << 20:
        return f"{n:,} bytes"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n:,} bytes ({n / (1 << shift):.1f} {unit})"
    raise AssertionError(n)  # unreachable


@contextlib.contextmanager
def open_npz(
    path: str | os.PathLike, *, kind: str = "npz archive", missing: Optional[str] = None
) -> Iterator[NpzReader]:
    """Open an npz archive for reading, its members' headers checked (see :class:`NpzReader`).

    Only a regular file is opened (a FIFO or device is refused without blocking). Every member must be an
    ``.npy`` array whose declared shape and dtype account for exactly its uncompressed size, which must be
    at most ``400`` times its compressed size (i6_shard's writer, deflate level 1, stays below 250), which
    must fit in the file: so a crafted header or a zip bomb is refused before anything is inflated or
    allocated.

    :param kind: what the file should be, for the error messages (e.g. "plan file")
    :param missing: the message if ``path`` does not exist (say how to make the file)
    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if it is not a regular file, not a zip, or a member's header does not fit its size
    """
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(missing or f"{kind} {path!r} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{path!r} is not a readable {kind}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"{path!r} is not a {kind}: it is {_file_type(mode)}, not a regular file")
    with open(fd, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise ValueError(f"{path!r} is not a {kind} (no zip header)")
        f.seek(0)
        try:
            zf = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise ValueError(f"{path!r} is not a readable {kind}: {type(exc).__name__}: {exc}") from None
        with zf:
            try:
                reader = NpzReader(zf, path=path, kind=kind, archive_bytes=st.st_size)
            except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                raise ValueError(f"{path!r} is not a readable {kind}: {type(exc).__name__}: {exc}") from None
            yield reader


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def load_npz(
    path: str | os.PathLike, *, kind: str = "npz archive", missing: Optional[str] = None
) -> Dict[str, np.ndarray]:
    """Load every array of an npz archive into memory (no pickle), each checked against its header
    first (see :func:`open_npz`); for archives whose members must also fit each other, use
    :func:`open_npz` and check :attr:`NpzReader.headers` before reading.

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if it cannot be read as an npz archive (a directory, not a zip,
        truncated, crafted, or holding pickles)
    """
    with open_npz(path, kind=kind, missing=missing) as npz:
        return {name: npz.read(name) for name in npz.headers}


def encode_keys(keys: Sequence[str]) -> np.ndarray:
    """Keys as one uint8 array: UTF-8 (``surrogatepass``, so undecodable file names survive),
    joined by NUL bytes, which no file name can hold.

    >>> decode_keys(encode_keys(["a", "b\\udc80"]), num_keys=2, path="x") == ["a", "b\\udc80"]
    True
    """
    joined = "\0".join(keys)
    if joined.count("\0") != max(len(keys) - 1, 0):
        idx = next(i for i, k in enumerate(keys) if "\0" in k)
        raise ValueError(f"key {idx} ({short_repr(keys[idx])}) contains a NUL byte, which no file name can hold")
    return np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def decode_keys(blob: np.ndarray, *, num_keys: int, path: str) -> List[str]:
    """Inverse of :func:`encode_keys`; ``num_keys`` tells an empty list from one empty key.

    :raises ValueError: naming ``path`` if the blob is not UTF-8 or holds another number of keys
    """
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise ValueError(f"{path!r} is corrupt: keys_utf8 is {blob.dtype}{list(blob.shape)}, expected a uint8 vector")
    try:
        text = blob.tobytes().decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path!r} is corrupt: keys are not UTF-8 ({exc})") from None
    keys = text.split("\0") if num_keys else []
    if len(keys) != num_keys or (not num_keys and text):
        raise ValueError(f"{path!r} is corrupt: {len(keys)} keys but {num_keys} sizes")
    return keys

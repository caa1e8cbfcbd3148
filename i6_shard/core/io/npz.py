"""Byte-deterministic ``.npz`` files that ``numpy.load`` reads as usual: fixed
member order and timestamps, so equal inputs give equal bytes."""

from __future__ import annotations

import os
import zipfile
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from .atomic import atomic_path

__all__ = ["save_npz", "load_npz", "encode_keys", "decode_keys"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_WRITE_CHUNK_BYTES = 16 << 20


def save_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], *, compress: bool = True) -> None:
    """Write ``arrays`` as an npz archive, atomically and with deterministic bytes.

    :param arrays: name -> array; no object arrays (they would need pickle to load)
    """
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            for name in sorted(arrays):
                arr = np.asarray(arrays[name])
                if arr.dtype == object:
                    raise TypeError(f"array {name!r} has dtype object, which npz cannot store without pickle")
                info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
                if compress:
                    _set_compress_level(info, 1)
                info.external_attr = 0o644 << 16
                # Streamed member by member (numpy writes in buffered chunks): no in-memory copy
                # of a large array; zip64 headers always, so the bytes do not depend on the size.
                with zf.open(info, "w", force_zip64=True) as member:
                    _write_npy(member, arr)


def _write_npy(fp, arr: np.ndarray) -> None:
    """The bytes of ``np.save`` (format 1.0), written in slices: ``np.lib.format.write_array``
    makes a full in-memory copy of a contiguous array when the target is not a real file."""
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    np.lib.format.write_array_header_1_0(fp, np.lib.format.header_data_from_array_1_0(arr))
    flat = arr.reshape(-1)
    step = max(1, _WRITE_CHUNK_BYTES // max(arr.itemsize, 1))
    for start in range(0, flat.size, step):
        fp.write(flat[start:start + step].tobytes())


def _set_compress_level(info: zipfile.ZipInfo, level: int) -> None:
    if "compress_level" in dir(zipfile.ZipInfo):  # Python >= 3.13
        info.compress_level = level
    else:
        info._compresslevel = level


def load_npz(path: str | os.PathLike, *, kind: str = "npz archive",
             missing: Optional[str] = None) -> Dict[str, np.ndarray]:
    """Load every array of an npz archive into memory (no pickle).

    :param kind: what the file should be, for the error messages (e.g. "plan file")
    :param missing: the message if ``path`` does not exist (say how to make the file)
    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if it cannot be read as an npz archive (a directory, not a zip,
        truncated, or holding pickles)
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise FileNotFoundError(missing or f"{kind} {path!r} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{path!r} is not a readable {kind}: {exc}") from None
    if magic != b"PK\x03\x04":
        raise ValueError(f"{path!r} is not a {kind} (no zip header)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a readable {kind}: {type(exc).__name__}: {exc}") from None


def encode_keys(keys: Sequence[str]) -> np.ndarray:
    """Keys as one uint8 array: UTF-8 (``surrogatepass``, so undecodable file names survive),
    joined by NUL bytes, which no file name can hold.

    >>> decode_keys(encode_keys(["a", "b\\udc80"]), num_keys=2, path="x") == ["a", "b\\udc80"]
    True
    """
    joined = "\0".join(keys)
    if joined.count("\0") != max(len(keys) - 1, 0):
        idx = next(i for i, k in enumerate(keys) if "\0" in k)
        raise ValueError(f"key {idx} ({keys[idx]!r}) contains a NUL byte, which no file name can hold")
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

"""Byte-deterministic ``.npz`` files that ``numpy.load`` reads as usual: fixed
member order and timestamps, so equal inputs give equal bytes."""

from __future__ import annotations

import io
import os
import zipfile
from typing import Dict, Mapping

import numpy as np

from .atomic import atomic_path

__all__ = ["save_npz", "load_npz"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


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
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arr, allow_pickle=False)
                info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue(), compresslevel=1 if compress else None)


def load_npz(path: str | os.PathLike) -> Dict[str, np.ndarray]:
    """Load every array of an npz archive into memory (no pickle).

    :raises FileNotFoundError: if ``path`` does not exist
    :raises ValueError: if it is not an npz archive (not a zip, truncated, or holding pickles)
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise ValueError(f"{path!r} is not an npz archive (no zip header)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path!r} is not a readable npz archive: {type(exc).__name__}: {exc}") from None

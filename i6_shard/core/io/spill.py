"""An append-only scratch file of numpy arrays, without a name: what a report would otherwise hold per record waits
there until it is read back a part at a time, and the file is gone when closed or when the process ends, killed too."""

from __future__ import annotations

import os
import tempfile
from typing import List, Optional, Sequence, Tuple

import numpy as np


class Spill:
    """Arrays appended to an unnamed temporary file (``tempfile.TemporaryFile`` in ``dir`` or ``TMPDIR``: unlinked
    as it is made, so no failure or kill leaves it behind) and read back by the place :meth:`append` gave.

    >>> s = Spill()
    >>> at = s.append([np.arange(3), np.array([0.5])])
    >>> [a.tolist() for a in s.read(at, [(np.int64, 3), (np.float64, 1)])]
    [[0, 1, 2], [0.5]]
    >>> s.close()
    """

    def __init__(self, dir: Optional[str] = None):
        self._file = tempfile.TemporaryFile(prefix="i6_shard.", dir=dir)
        self._fd = self._file.fileno()
        self.size = 0

    def append(self, arrays: Sequence[np.ndarray]) -> int:
        """Write ``arrays`` back to back; return where they begin."""
        at = self.size
        for a in arrays:
            data = memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B")
            done = 0
            while done < len(data):
                done += os.pwrite(self._fd, data[done:], self.size + done)
            self.size += len(data)
        return at

    def read(self, at: int, layout: Sequence[Tuple[type, int]]) -> List[np.ndarray]:
        """The arrays written at ``at``, given their dtypes and lengths (new writable arrays)."""
        out = []
        for dtype, n in layout:
            a = np.empty(n, dtype=dtype)
            view = memoryview(a).cast("B")
            done = 0
            while done < len(view):
                got = os.preadv(self._fd, [view[done:]], at + done)
                if got <= 0:
                    raise OSError(f"the scratch file ends at {at + done} of {at + len(view)} bytes")
                done += got
            at += len(view)
            out.append(a)
        return out

    def close(self) -> None:
        self._file.close()

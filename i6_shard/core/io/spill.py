"""An append-only scratch file of numpy arrays, without a name: what a report would otherwise hold per record waits
there until it is read back a part at a time, and the file is gone when closed or when the process ends, killed too."""

from __future__ import annotations

import os
import tempfile
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .atomic import FULL_DEVICE_ERRNOS, WRITTEN_PATH_ATTR, full_device_fix, full_device_reason


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
        self.dir = dir if dir is not None else tempfile.gettempdir()
        self._file = tempfile.TemporaryFile(prefix="i6_shard.", dir=dir)
        self._fd = self._file.fileno()
        self.size = 0

    def append(self, arrays: Sequence[np.ndarray]) -> int:
        """Write ``arrays`` back to back; return where they begin.

        :raises OSError: on a full device (or a file size limit), naming the scratch file, its directory (TMPDIR)
            and the fix, not an output the caller is writing
        """
        at = self.size
        for a in arrays:
            data = memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B")
            done = 0
            while done < len(data):
                try:
                    done += os.pwrite(self._fd, data[done:], self.size + done)
                except OSError as exc:
                    if exc.errno not in FULL_DEVICE_ERRNOS:
                        raise
                    raise self._full(exc) from None
            self.size += len(data)
        return at

    def _full(self, exc: OSError) -> OSError:
        reason = full_device_reason(exc.errno)
        where = f"{self.dir!r} (TMPDIR)" if os.environ.get("TMPDIR") else f"{self.dir!r} (the temporary directory)"
        fix = (
            full_device_fix(exc.errno, reason)
            if "ulimit -f" in reason
            else "free space there, or set TMPDIR to a directory with more room"
        )
        new = OSError(
            f"cannot write the scratch file 'i6_shard.*' in {where}, where the records wait until they are written: "
            f"{reason} after {self.size:,} bytes; {fix}"
        )
        new.errno = exc.errno
        setattr(new, WRITTEN_PATH_ATTR, os.path.join(self.dir, "i6_shard.*"))
        return new

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

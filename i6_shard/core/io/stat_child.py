"""The stat calls of the stat engine, and the script its helper processes run (``python -I -S <this file>
CHUNK``, which starts in ~20 ms since it imports nothing of site-packages): paths, NUL-separated on stdin; per
path ``(st_size or -1 where stat fails, st_mtime_ns, st_mode, st_uid, st_gid)`` as int64 on stdout, one block
per chunk so that the parent can report progress. Stdlib only, so that the script runs without the package."""

import os
import sys
from array import array
from typing import List, Sequence, Tuple

#: The record of a path whose stat failed.
FAILED_RECORD = (-1, 0, 0, 0, 0)
#: Ints per record.
RECORD_INTS = 5


def stat_records(paths: Sequence) -> List[Tuple[int, int, int, int, int]]:
    """``(st_size, st_mtime_ns, st_mode, st_uid, st_gid)`` per path (follows symlinks, like
    ``os.path.getsize``); :data:`FAILED_RECORD` where stat fails."""
    stat = os.stat
    try:
        return [(s.st_size, s.st_mtime_ns, s.st_mode, s.st_uid, s.st_gid) for s in map(stat, paths)]
    except (OSError, ValueError):
        pass
    records = []
    for p in paths:
        try:
            s = stat(p)
        except (OSError, ValueError):
            records.append(FAILED_RECORD)
        else:
            records.append((s.st_size, s.st_mtime_ns, s.st_mode, s.st_uid, s.st_gid))
    return records


def _main() -> None:
    chunk_size = int(sys.argv[1])
    data = sys.stdin.buffer.read()
    paths = data.split(b"\0") if data else []
    out = sys.stdout.buffer
    for i in range(0, len(paths), chunk_size):
        out.write(array("q", [v for r in stat_records(paths[i : i + chunk_size]) for v in r]).tobytes())
        out.flush()


if __name__ == "__main__":
    _main()

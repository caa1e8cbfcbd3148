"""The "using files" lines of one rank's log as int32 file ids (:class:`~i6_shard.core.pure.file_tree.FileCatalog`)
that wait in the scratch file with their lines, and the rule by which a restart's or another dataset instance's lines
decide a sub-epoch's files: memory holds the distinct files once, not a list per line."""

from __future__ import annotations

from array import array
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

#: Values a rank holds of a chunked column before they go to the scratch file (a torchrun stdout of thousands of ranks
#: holds this few per rank while it is read).
_CHUNK = 64


class Chunked:
    """Append-only int columns, held until :data:`_CHUNK` rows and then written to ``spill`` (all held without one).

    >>> c = Chunked(None, 2, "q")
    >>> c.append((1, 2)); c.append((3, 4)); c.read().tolist()
    [[1, 3], [2, 4]]
    """

    def __init__(self, spill: Any, num_columns: int, typecode: str):
        self.spill, self.typecode = spill, typecode
        self.columns = [array(typecode) for _ in range(num_columns)]
        self.chunks = array("q")  # (where in the spill, rows) of each chunk
        self.count = 0

    def append(self, values: Tuple[int, ...]) -> None:
        for c, v in zip(self.columns, values):
            c.append(v)
        self.count += 1
        if self.spill is not None and len(self.columns[0]) >= _CHUNK:
            self.flush()

    def extend(self, values: np.ndarray) -> None:
        """More rows of a one-column chunked array."""
        self.columns[0].frombytes(np.ascontiguousarray(values, dtype=self.typecode).tobytes())
        self.count += len(values)
        if self.spill is not None and len(self.columns[0]) >= _CHUNK:
            self.flush()

    def flush(self) -> None:
        n = len(self.columns[0])
        if self.spill is not None and n:
            self.chunks.extend((self.spill.append([np.frombuffer(c, dtype=self.typecode) for c in self.columns]), n))
            for c in self.columns:
                del c[:]

    def read(self) -> np.ndarray:
        """All rows: [columns, rows] of the column's dtype."""
        dtype = np.dtype(self.typecode)
        parts = [
            np.stack(self.spill.read(at, [(dtype, n)] * len(self.columns)))
            for at, n in zip(self.chunks[::2], self.chunks[1::2])
        ]
        parts.append(np.array([np.frombuffer(c, dtype=dtype) for c in self.columns], dtype=dtype))
        return np.concatenate(parts, axis=1)


#: The columns of a line: the epoch of the dataset, the run of RETURNN (restarts count up), the training's sub-epoch it
#: was logged in, where its ids begin in the rank's id stream, and how many (-1: a line too long to read).
_EPOCH, _RUN, _WINDOW, _START, _NUM = range(5)


class FileLines:
    """One rank's "using files" lines per dataset name, each as a row of :class:`Chunked` columns, and the files' ids of
    all of them back to back (:class:`Chunked`), both waiting in ``spill``."""

    def __init__(self, spill: Any):
        self.spill = spill
        self.ids = Chunked(spill, 1, "i")
        self.lines: Dict[str, Chunked] = {}

    def add(self, name: str, *, epoch: int, run: int, window: int, ids: Optional[np.ndarray]) -> None:
        """A line of dataset ``name`` (``ids`` None: its files were not read, which drops its epoch's lines before)."""
        start = self.ids.count
        if ids is not None:
            self.ids.extend(ids)
        lines = self.lines.get(name)
        if lines is None:
            lines = self.lines[name] = Chunked(self.spill, 5, "q")
        lines.append((epoch, run, window, start, -1 if ids is None else len(ids)))

    def datasets(self, ids_store: Any) -> Dict[str, "DatasetLines"]:
        """Per dataset name with a line that was read, its lines resolved (:func:`resolve_lines`); the id stream is
        written to ``ids_store`` once, where the resolved lines point."""
        self.ids.flush()
        out = {}
        ids = None
        for name, lines in self.lines.items():
            rows = lines.read()
            if not (rows[_NUM] >= 0).any():
                continue
            if ids is None:
                ids = self.ids.read()[0]
            out[name] = resolve_lines(rows, ids)
        if ids is not None and out:
            at = ids_store.append([ids])
            for d in out.values():
                d.store, d.ids_at, d.num_ids = ids_store, at, len(ids)
        return out


class DatasetLines:
    """One dataset's files per epoch of it, in one rank's log: the epochs (sorted), the sub-epoch of the training each
    was logged in, and the distinct lists of its dataset instances (``inst_begin[k]:inst_begin[k + 1]`` of the lists,
    each ``start`` and ``num`` in the rank's ids at ``ids_at`` of ``store``; none where the files were not read)."""

    def __init__(self, epoch, window, inst_begin, start, num):
        self.epoch, self.window, self.inst_begin, self.start, self.num = epoch, window, inst_begin, start, num
        self.store: Any = None
        self.ids_at, self.num_ids = 0, 0

    @property
    def num_instances(self) -> np.ndarray:
        return np.diff(self.inst_begin)

    def read_ids(self) -> np.ndarray:
        return self.store.read(self.ids_at, [(np.int32, self.num_ids)])[0]


def resolve_lines(rows: np.ndarray, ids: np.ndarray) -> DatasetLines:
    """Per epoch the files its lines give: those of the last run that logged it (a restart's lines replace the earlier
    run's), each distinct list once (the dataset's instances, e.g. DataLoader workers), none if a line too long to read
    came after them (its files are unknown); the window is that of the first of those lines.

    :param rows: int64 [5, lines] in the order read (epoch, run, window, start, num; num -1: not read)
    :param ids: int32, the rank's id stream the lines point into
    """
    order = np.lexsort((np.arange(rows.shape[1]), rows[_EPOCH]))
    rows = rows[:, order]
    bounds = np.flatnonzero(np.diff(rows[_EPOCH])) + 1
    first = np.concatenate([[0], bounds]).tolist()
    last = np.concatenate([bounds, [rows.shape[1]]]).tolist()
    epoch, window, begin, start, num = [], [], [0], [], []
    run, win, st, nm = rows[_RUN].tolist(), rows[_WINDOW].tolist(), rows[_START].tolist(), rows[_NUM].tolist()
    for a, b in zip(first, last):
        lists = _last_lists(run, nm, a, b)
        if lists is None:
            continue
        seg, read = lists
        epoch.append(int(rows[_EPOCH, a]))
        window.append(win[seg[0]])
        if read:
            distinct: Dict[bytes, Tuple[int, int]] = {}
            for j in seg:
                distinct.setdefault(ids[st[j] : st[j] + nm[j]].tobytes(), (st[j], nm[j]))
            for s, n in distinct.values():
                start.append(s)
                num.append(n)
        begin.append(len(start))
    return DatasetLines(*(np.array(x, dtype=np.int64) for x in (epoch, window, begin, start, num)))


def _last_lists(run: List[int], num: List[int], a: int, b: int) -> Optional[Tuple[List[int], bool]]:
    """Of one epoch's lines ``a:b`` (in the order read): the read lines of its last run (after the last line not
    read before them), and whether their files hold (no line not read after them); None without a read line.

    >>> _last_lists([0, 0, 1, 1], [2, 2, 2, -1], 0, 4), _last_lists([0, 0, 0], [2, -1, 2], 0, 3)
    (([2], False), ([2], True))
    """
    if b - a == 1:
        return ([a], True) if num[a] >= 0 else None
    read = [j for j in range(a, b) if num[j] >= 0]
    if not read:
        return None
    end = read[-1]
    seg = [end]
    for j in range(end - 1, a - 1, -1):
        if num[j] < 0 or run[j] != run[end]:
            break
        seg.append(j)
    seg.reverse()
    return seg, all(num[j] >= 0 for j in range(end + 1, b))


def row_files(
    lines: DatasetLines, table_epoch: np.ndarray, *, multi_epoch: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a rank's table (its sub-epochs, sorted): the files of the epochs ``(e - 1) * multi_epoch + 1 ..
    e * multi_epoch`` of the dataset, all instances' lists in order, as (the rank's ids in row order, int64 [rows]
    where each row's begin there (-1: none), how many, the most instances of one epoch)."""
    counts = lines.num_instances
    has = counts > 0
    group = (lines.epoch - 1) // multi_epoch + 1
    row = np.minimum(np.searchsorted(table_epoch, group), max(len(table_epoch) - 1, 0))
    has &= (len(table_epoch) > 0) & (table_epoch[row] == group) if len(table_epoch) else np.zeros_like(has)
    per_list = np.repeat(has, counts)
    start, num = lines.start[per_list], lines.num[per_list]
    cum = np.concatenate([[0], np.cumsum(lines.num)])
    epoch_ids = (cum[lines.inst_begin[1:]] - cum[lines.inst_begin[:-1]])[has]
    rows = row[has]
    files_n = np.zeros(len(table_epoch), dtype=np.int64)
    np.add.at(files_n, rows, epoch_ids)
    instances = np.zeros(len(table_epoch), dtype=np.int64)
    np.maximum.at(instances, rows, counts[has])
    files_at = np.concatenate([[0], np.cumsum(files_n)[:-1]]) if len(files_n) else files_n
    files_at = np.where(instances > 0, files_at, -1)
    offsets = np.concatenate([[0], np.cumsum(num)])
    gather = np.repeat(start - offsets[:-1], num) + np.arange(int(offsets[-1]))
    ids = lines.read_ids()[gather] if len(gather) else np.zeros(0, dtype=np.int32)
    return ids, files_at, files_n, instances

"""The (sub-epoch, rank) records of a training report, filled a rank at a time and read back a block of sub-epochs at
a time: each rank's column goes to a store (a scratch file, or memory), so that memory holds one rank's column or one
block of rows, never all the records."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

#: Records per block of rows read back at once (a block's arrays stay this small, however many records there are).
BLOCK_RECORDS = 1 << 14

#: The int fields of a record (``filtered_*`` only with a length filter), in the order of its dict.
FIELDS = (
    "consumed_seqs",
    "consumed_frames",
    "available_seqs",
    "available_frames",
    "offered_seqs",
    "filtered_seqs",
    "filtered_frames",
    "steps",
    "num_files",
)
#: The columns after the fields in a rank's stored column: where the record's file ids begin in the rank's ids and how
#: many (-1: the log shows none), which fields are unknown (a bit each), whether the record is in the logs, finished,
#: and files_match_plan (-1 None, 0 False, 1 True).
_FILES_AT, _FILES_N, _UNKNOWN, _PRESENT, _FINISHED, _MATCH = range(-6, 0)
_EXTRA = 6


class HeldStore:
    """A store of arrays in memory, with the interface of :class:`i6_shard.core.io.spill.Spill` (where no scratch
    file is given).

    >>> s = HeldStore()
    >>> at = s.append([np.arange(4)])
    >>> s.read(at + 8, [(np.int64, 2)])[0].tolist()
    [1, 2]
    """

    def __init__(self):
        self._data = bytearray()

    def append(self, arrays: Sequence[np.ndarray]) -> int:
        at = len(self._data)
        for a in arrays:
            self._data += np.ascontiguousarray(a).tobytes()
        return at

    def read(self, at: int, layout: Sequence[Tuple[type, int]]) -> List[np.ndarray]:
        out = []
        for dtype, n in layout:
            size = np.dtype(dtype).itemsize * n
            out.append(np.frombuffer(self._data, dtype=dtype, count=n, offset=at).copy())
            at += size
        return out


class RankColumns:
    """One rank's records over all sub-epochs while they are made: per field an int64 column [num_epochs] (-1 where
    unknown or missing) and whether it is unknown; whether each record is present and finished; files_match_plan;
    where its file ids are (``files_at``, ``files_n``: -1 where the log shows none)."""

    def __init__(self, num_epochs: int, fields: Sequence[str]):
        self.fields = tuple(fields)
        self.values = {n: np.full(num_epochs, -1, dtype=np.int64) for n in fields}
        self.unknown = {n: np.ones(num_epochs, dtype=bool) for n in fields if n != "steps"}  # (steps: always known)
        self.present = np.zeros(num_epochs, dtype=bool)
        self.finished = np.zeros(num_epochs, dtype=bool)
        self.match = np.full(num_epochs, -1, dtype=np.int8)
        self.files_at = np.full(num_epochs, -1, dtype=np.int64)
        self.files_n = np.full(num_epochs, -1, dtype=np.int64)

    def set_rows(self, rows: np.ndarray, columns: Dict[str, Tuple[np.ndarray, np.ndarray]], *, finished) -> None:
        """The records at sub-epochs ``rows``: per field its values and where they are known."""
        for n in self.fields:
            values, known = columns[n]
            self.values[n][rows] = np.where(known, values, -1)
            if n in self.unknown:
                self.unknown[n][rows] = ~known
        self.present[rows] = True
        self.finished[rows] = finished

    def put(self, i: int, name: str, value: Optional[int]) -> None:
        """One value of the record at sub-epoch ``i`` (None: unknown)."""
        self.values[name][i] = -1 if value is None else value
        if name in self.unknown:
            self.unknown[name][i] = value is None

    def known(self, i: int, name: str) -> bool:
        return bool(self.present[i]) and not (name in self.unknown and self.unknown[name][i])

    def packed(self) -> np.ndarray:
        """int64 [num_epochs, fields + 6]: the fields, then where the files are, the unknown bits, present, finished,
        match."""
        n = len(self.present)
        out = np.empty((n, len(self.fields) + _EXTRA), dtype=np.int64)
        bits = np.zeros(n, dtype=np.int64)
        for k, name in enumerate(self.fields):
            out[:, k] = self.values[name]
            if name in self.unknown:
                bits |= self.unknown[name].astype(np.int64) << k
        out[:, _FILES_AT], out[:, _FILES_N] = self.files_at, self.files_n
        out[:, _UNKNOWN], out[:, _PRESENT], out[:, _FINISHED], out[:, _MATCH] = (
            bits,
            self.present,
            self.finished,
            self.match,
        )
        return out


class RecordBlock:
    """The records of sub-epochs ``start .. start + num_rows - 1`` (indices into the report's sub-epochs), all
    ranks: per field an int64 grid [rows, rank] (-1 where unknown or missing) and a bool grid of where it is unknown;
    where each record is present and finished, and ``files_match_plan`` (int8); with ``ids`` (per rank its file ids
    from ``files_at`` [rows, rank] on, or None), each record's file ids (:meth:`file_ids`)."""

    def __init__(
        self,
        start: int,
        fields: Sequence[str],
        rank_ids: Sequence[int],
        packed: np.ndarray,
        ids: Optional[List[Optional[Tuple[int, np.ndarray]]]] = None,
    ):
        self.start, self.fields, self.rank_ids = start, tuple(fields), list(rank_ids)
        self.grids: Dict[str, np.ndarray] = {}
        self.unknown: Dict[str, np.ndarray] = {}
        bits = packed[:, :, _UNKNOWN]
        for k, name in enumerate(self.fields):
            self.grids[name] = np.ascontiguousarray(packed[:, :, k])
            if name != "steps":
                self.unknown[name] = ((bits >> k) & 1).astype(bool)
        self.present = packed[:, :, _PRESENT].astype(bool)
        self.finished = packed[:, :, _FINISHED].astype(bool)
        self.match = packed[:, :, _MATCH].astype(np.int8)
        self.files_at, self.files_n = packed[:, :, _FILES_AT], packed[:, :, _FILES_N]
        self.ids = ids

    def file_ids(self, i: int, r: int) -> Optional[np.ndarray]:
        """The file ids of the record of row ``i`` and rank ``r`` (of the keys, as the analysis stored them), or
        None where the log shows none."""
        n = int(self.files_n[i, r])
        if n < 0:
            return None
        base, ids = self.ids[r]
        at = int(self.files_at[i, r]) - base
        return ids[at : at + n]

    def flat_file_ids(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The file ids of all of the block's records with files, as ``(row, rank, id)`` int64 arrays sorted by row,
        then rank, then the order of the record's list."""
        rows, ranks, out = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for r in range(len(self.rank_ids)):
            num = self.files_n[:, r]
            has = num >= 0
            if not has.any():
                continue
            base, ids = self.ids[r]
            count = num[has]
            offsets = np.concatenate([[0], np.cumsum(count)])
            gather = np.repeat(self.files_at[has, r] - base - offsets[:-1], count) + np.arange(offsets[-1])
            rows.append(np.repeat(np.flatnonzero(has), count))
            ranks.append(np.full(int(offsets[-1]), r, dtype=np.int64))
            out.append(ids[gather].astype(np.int64))
        row, rank, key = (np.concatenate(x) for x in (rows, ranks, out))
        order = np.argsort(row, kind="stable")
        return row[order], rank[order], key[order]

    @property
    def num_rows(self) -> int:
        return int(self.present.shape[0])

    def add(self, name: str, grid: np.ndarray) -> None:
        """One more int field (listed after the others), known where ``grid`` is not negative."""
        self.fields += (name,)
        self.grids[name] = np.asarray(grid, dtype=np.int64)
        self.unknown[name] = self.grids[name] < 0

    def known(self, name: str) -> np.ndarray:
        """Where the field is known (records missing from the logs are not)."""
        return self.present & ~self.unknown[name] if name in self.unknown else self.present.copy()

    def rows(self, i: int) -> Iterator[Dict[str, Any]]:
        """Row ``i`` of the block's records as the summary lists them, in rank order."""
        cols = {n: self.grids[n][i].tolist() for n in self.fields}
        unknown = {n: self.unknown[n][i].tolist() for n in self.unknown}
        present, match = self.present[i].tolist(), self.match[i].tolist()
        for r, rank in enumerate(self.rank_ids):
            if not present[r]:
                yield {"rank": r, "missing": True}
                continue
            x: Dict[str, Any] = {"rank": rank}
            for n in self.fields:
                x[n] = None if n in unknown and unknown[n][r] else cols[n][r]
            x["files_match_plan"] = (None, False, True)[match[r] + 1]
            yield x


class TrainRecords:
    """The (sub-epoch, rank) records of a training, some 100 bytes each in ``store`` (a scratch file with ``append``
    and ``read``, or :class:`HeldStore`): a rank's column is written at once (:meth:`new_rank`, :meth:`set_rank`),
    and the records are read back a block of sub-epochs at a time (:meth:`blocks`; :meth:`rows` makes one
    sub-epoch's into the summary's dicts, reading its block once). Fields added whole (:meth:`add`: the planned
    steps, from the plan's own arrays) are held as given."""

    def __init__(self, num_epochs: int, rank_ids: Sequence[int], *, filtered: bool = False, store: Any = None):
        self.num_epochs = num_epochs
        self.rank_ids = list(rank_ids)
        self.fields = tuple(n for n in FIELDS if filtered or not n.startswith("filtered_"))
        self._stored_fields = self.fields
        self.store = HeldStore() if store is None else store
        self._at: List[Optional[int]] = [None] * len(self.rank_ids)
        self._ids_at: List[Optional[int]] = [None] * len(self.rank_ids)
        self._added: Dict[str, np.ndarray] = {}
        self._cached: Optional[RecordBlock] = None

    @property
    def count(self) -> int:
        """Records listed, those missing from the logs included."""
        return self.num_epochs * len(self.rank_ids)

    @property
    def shape(self) -> Tuple[int, int]:
        return self.num_epochs, len(self.rank_ids)

    @property
    def block_rows(self) -> int:
        """Sub-epochs per block: :data:`BLOCK_RECORDS` records, at least one sub-epoch."""
        return max(1, BLOCK_RECORDS // max(1, len(self.rank_ids)))

    def new_rank(self) -> RankColumns:
        return RankColumns(self.num_epochs, self._stored_fields)

    def set_rank(self, r: int, columns: RankColumns, file_ids: Optional[np.ndarray] = None) -> None:
        """Rank ``r``'s records, written to the store at once; with the int32 ids of their files (``columns.files_at``
        indexes them)."""
        self._at[r] = self.store.append([columns.packed()])
        if file_ids is not None:
            self._ids_at[r] = self.store.append([np.asarray(file_ids, dtype=np.int32)])
        self._cached = None

    def add(self, name: str, grid: np.ndarray) -> None:
        """One more int field (listed after the others), known where ``grid`` [sub-epoch, rank] is not negative."""
        self.fields += (name,)
        self._added[name] = np.asarray(grid, dtype=np.int64)
        self._cached = None

    def block(self, start: int, end: int, *, files: bool = False) -> RecordBlock:
        """The records of sub-epochs ``start:end``; with ``files`` their file ids too (one read per rank)."""
        width = len(self._stored_fields) + _EXTRA
        packed = np.zeros((end - start, len(self.rank_ids), width), dtype=np.int64)
        packed[:, :, _UNKNOWN] = -1  # (a rank without a column: every record missing, every field unknown)
        packed[:, :, _MATCH] = packed[:, :, _FILES_N] = packed[:, :, _FILES_AT] = -1
        packed[:, :, : len(self._stored_fields)] = -1
        for r, at in enumerate(self._at):
            if at is not None and end > start:
                column = self.store.read(at + start * width * 8, [(np.int64, (end - start) * width)])[0]
                packed[:, r, :] = column.reshape(end - start, width)
        ids = [self._block_ids(r, packed[:, r]) for r in range(len(self.rank_ids))] if files else None
        block = RecordBlock(start, self._stored_fields, self.rank_ids, packed, ids)
        for name, grid in self._added.items():
            block.add(name, grid[start:end])
        return block

    def _block_ids(self, r: int, packed: np.ndarray) -> Optional[Tuple[int, np.ndarray]]:
        """Rank ``r``'s file ids of the block's records (``packed``: its rows), read at once: where they begin in the
        rank's ids, and they."""
        has = packed[:, _FILES_N] >= 0
        if self._ids_at[r] is None or not has.any():
            return None
        lo = int(packed[has, _FILES_AT].min())
        hi = int((packed[has, _FILES_AT] + packed[has, _FILES_N]).max())
        return lo, self.store.read(self._ids_at[r] + 4 * lo, [(np.int32, hi - lo)])[0]

    def blocks(self, *, files: bool = False) -> Iterator[RecordBlock]:
        """The records, a block of :attr:`block_rows` sub-epochs at a time, in order (with ``files``, their ids)."""
        for start in range(0, self.num_epochs, self.block_rows):
            yield self.block(start, min(self.num_epochs, start + self.block_rows), files=files)

    def rows(self, i: int) -> Iterator[Dict[str, Any]]:
        """Sub-epoch ``i``'s records as the summary lists them, in rank order (its block read once, kept for the
        sub-epochs after it)."""
        b = self._cached
        if b is None or not b.start <= i < b.start + b.num_rows:
            start = i - i % self.block_rows
            b = self._cached = self.block(start, min(self.num_epochs, start + self.block_rows))
        return b.rows(i - b.start)

"""Reader of RETURNN's training logs: per rank and sub-epoch, the files DistributeFilesDataset
was given, the dataset's sequence count, and every train step's sequences and frames (with
``log_batch_size``); from per-rank log files or one torchrun stdout with ``[default<rank>]:`` prefixes. Logs are
read line by line, each line and each number bounded, so a damaged or crafted log is an error naming its line."""

from __future__ import annotations

import os
import re
from array import array
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import FileCatalog, FileTree, check_file_trees, tree_key
from ..pure.record_blocks import HeldStore
from ..pure.text import short_repr
from ..pure import training as _training
from ..pure.training import check_report_size
from . import log_files_line
from .log_files_line import read_files_of_line
from .log_file_lists import DatasetLines, FileLines, row_files
from .spill import Spill

#: Characters of a line read at most; the rest of a longer line is skipped (a 1 GiB line without a newline is
#: never held whole). RETURNN's longest lines, the files of a sub-epoch, stay far below.
MAX_LINE_CHARS = 1 << 24
#: Ranks a training may have (world size, torchrun local rank): more than any cluster runs; a larger number
#: is a damaged name or line, refused before anything is made per rank.
MAX_RANKS = 1 << 16
#: The highest sub-epoch a log may name (RETURNN counts them from 1; no training runs 2**31).
MAX_EPOCH = (1 << 31) - 1
#: The largest count a log line may give (sequences or frames of a step or sub-epoch, trained steps): sums over
#: every step of a log stay inside int64.
MAX_COUNT = (1 << 32) - 1
#: Steps one log may skip in all (a step line lost, or a log that starts inside a sub-epoch) before its step
#: numbers count as damaged: RETURNN logs every step, and each skipped step is kept as unknown.
MAX_LOST_STEPS = 1_000_000

# The lines below are RETURNN's (1.2026): returnn/__main__.py, returnn/datasets/distrib_files.py
# (DistributeFilesDataset.init_seq_order) and returnn/torch/engine.py (Engine.train_epoch, _print_process).
_STARTUP = re.compile(r"^RETURNN starting up, .*?, cwd (?P<cwd>.*?), Python ")
_FILES = re.compile(
    r"^<(?P<cls>\w+) '(?P<name>[^']*)' epoch=[^>]*>: using files for epoch (?P<epoch>\d+): "
    r"(?P<files>.*)$"
)
_START_EPOCH = re.compile(r"^start epoch (?P<epoch>\d+) global train step ")
_NUM_SEQS = re.compile(r"^ep (?P<epoch>\d+) train num_seqs: (?P<n>-?\d+)\s*$")
_STEP = re.compile(r"^ep (?P<epoch>\d+) train, step (?P<step>\d+), (?P<info>.*)$")
_STEP_SEQS = re.compile(r"(?:^|, )num_seqs (?P<n>\d+)(?:,|$)")
_STEP_SUM = re.compile(r"(?:^|, )sum_size:(?P<dim>\S+) (?P<n>\d+)(?=,|$)")
_STEP_COMPLETE = re.compile(r", complete (?P<pct>[0-9.]+)%")
_TRAINED = re.compile(r"^Epoch (?P<epoch>\d+): Trained (?P<steps>\d+) steps")
#: How the lines above start (a line starting otherwise is none of them).
_LINE_STARTS = ("ep ", "start epoch ", "Epoch ", "<", "RETURNN starting up, ")
#: torchrun --tee=3 (as i6_core's ReturnnTrainingJob runs it) prefixes each line with the role and local rank.
_TORCHRUN_PREFIX = re.compile(r"^\[(?P<role>[^\]\d]*)(?P<rank>\d+)\]:(?P<line>.*)$")
#: RETURNN's per-rank log names under torch distributed (returnn/log.py, Log.init_by_config); Horovod alike.
_RANK_FILE = re.compile(r"\.(?:torch-distrib|horovod)-(?P<rank>\d+)-(?P<size>\d+)(?:\.[^.]*)?$")


#: The step arrays of every sub-epoch without steps (read-only, shared).
_NO_STEPS = np.zeros(0, dtype=np.int64)
_NO_COMPLETE = np.zeros(0, dtype=np.float64)
_NO_STEPS.flags.writeable = _NO_COMPLETE.flags.writeable = False


def _with_slots(cls: type) -> type:
    """The dataclass ``cls`` made anew with ``__slots__`` of its fields, as ``dataclass(slots=True)`` makes it from
    Python 3.10: no ``__dict__`` per instance, about 50 bytes less each (a log may hold a million of them)."""
    names = tuple(f.name for f in fields(cls))
    body = {k: v for k, v in cls.__dict__.items() if k not in names + ("__dict__", "__weakref__")}
    body["__slots__"] = names
    return type(cls)(cls.__name__, cls.__bases__, body)


@_with_slots
@dataclass
class SubEpochLog:
    """What one rank's log says about one sub-epoch (``epoch``, 1-based).

    :ivar files: the file trees DistributeFilesDataset was given ("using files for epoch"), or None
    :ivar dataset_num_seqs: the sequences the dataset offered this sub-epoch ("train num_seqs"), or None
    :ivar step_seqs: int64 [num_steps], sequences of each step (-1 where the log does not say)
    :ivar step_frames: int64 [num_steps], frames of each step along the frames dim (-1 where unknown)
    :ivar step_complete: float64 [num_steps], the logged completed fraction (nan where not logged)
    :ivar trained_steps: from "Epoch E: Trained N steps"; None while the sub-epoch runs (or if it crashed)
    :ivar line: the line of the log file where this sub-epoch (its last run) began, for messages
    :ivar num_instances: the dataset instances that logged files for this sub-epoch (the most for one epoch of
        the dataset): more than 1 under DataLoader worker sharding, each instance with its own bins; ``files``
        is then the files of all of them
    """

    epoch: int
    files: Optional[List[FileTree]] = None
    dataset_num_seqs: Optional[int] = None
    step_seqs: np.ndarray = field(default_factory=lambda: _NO_STEPS)
    step_frames: np.ndarray = field(default_factory=lambda: _NO_STEPS)
    step_complete: np.ndarray = field(default_factory=lambda: _NO_COMPLETE)
    trained_steps: Optional[int] = None
    line: Optional[int] = None
    num_instances: int = 0

    @property
    def num_steps(self) -> int:
        return int(self.step_seqs.shape[0])

    @property
    def finished(self) -> bool:
        return self.trained_steps is not None

    @property
    def file_keys(self) -> Optional[List[str]]:
        return None if self.files is None else [tree_key(t) for t in self.files]


@dataclass(frozen=True)
class SubEpochTable:
    """One rank's sub-epochs as columns (no object per record: a log may hold a million), sorted by ``epoch``, the
    last run of each; the steps of all its sub-epochs back to back (a sub-epoch's are
    ``step_seqs[step_start[i]:step_end[i]]``). All arrays read-only.

    :ivar epoch: int64 [num_records], 1-based, ascending
    :ivar line: int64 [num_records], the line of the log where the record (its last run) began
    :ivar dataset_num_seqs: int64 [num_records], "train num_seqs" (-1 where not logged)
    :ivar trained_steps: int64 [num_records], "Trained N steps" (-1 while running, or if it crashed)
    :ivar step_start, step_end: int64 [num_records], the record's steps in the step arrays
    :ivar step_seqs, step_frames: int64 [steps of the log], per step (-1 where not logged)
    :ivar step_complete: float64 [steps of the log], the logged completed share (nan where not logged)
    """

    epoch: np.ndarray
    line: np.ndarray
    dataset_num_seqs: np.ndarray
    trained_steps: np.ndarray
    step_start: np.ndarray
    step_end: np.ndarray
    step_seqs: np.ndarray
    step_frames: np.ndarray
    step_complete: np.ndarray

    @property
    def num_steps(self) -> np.ndarray:
        """int64 [num_records]: the steps logged per record."""
        return self.step_end - self.step_start

    def index(self, epoch: Any) -> Optional[int]:
        """The row of ``epoch``, or None."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            return None
        i = int(np.searchsorted(self.epoch, epoch))
        return i if i < len(self.epoch) and self.epoch[i] == epoch else None

    def record(self, i: int, files: Optional[Tuple[List[FileTree], int]] = None) -> SubEpochLog:
        """Row ``i`` as a :class:`SubEpochLog` (made on request; its step arrays are views)."""
        s, e = int(self.step_start[i]), int(self.step_end[i])
        num_seqs, trained = int(self.dataset_num_seqs[i]), int(self.trained_steps[i])
        return SubEpochLog(
            epoch=int(self.epoch[i]),
            files=None if files is None else files[0],
            dataset_num_seqs=None if num_seqs < 0 else num_seqs,
            step_seqs=self.step_seqs[s:e] if e > s else _NO_STEPS,
            step_frames=self.step_frames[s:e] if e > s else _NO_STEPS,
            step_complete=self.step_complete[s:e] if e > s else _NO_COMPLETE,
            trained_steps=None if trained < 0 else trained,
            line=int(self.line[i]),
            num_instances=0 if files is None else files[1],
        )


class _SubEpochs(Mapping):
    """A rank's sub-epochs by epoch, each a :class:`SubEpochLog` made when asked for (read-only)."""

    def __init__(self, log: "RankLog"):
        self._log = log

    def __len__(self) -> int:
        return len(self._log.table.epoch)

    def __iter__(self) -> Iterator[int]:
        return iter(self._log.table.epoch.tolist())

    def __getitem__(self, epoch: Any) -> SubEpochLog:
        table = self._log.table
        i = table.index(epoch)
        if i is None:
            raise KeyError(epoch)
        return table.record(i, self._log.files_of(i))


@dataclass
class RankLog:
    """One rank's log: its sub-epochs (the last run of an epoch wins, as after a restart) as columns.

    :ivar source: where the lines came from, for messages: the file name, with ``[rank r]`` for an
        interleaved stdout (no directory, so reports name no machine's paths)
    :ivar rows: the sub-epochs' records as read; :attr:`table` gives them as a :class:`SubEpochTable` (read back from
        the scratch file each time where the rows were spilled there, so that one rank's are held at a time)
    :ivar catalog: the distinct files of the logs by id (shared by the ranks of a training)
    :ivar file_store: where the rows' file ids wait (the scratch file, or memory): :meth:`file_columns` and
        :meth:`file_ids` read them back
    :ivar path: the log file's path
    :ivar frames_dim: the dim whose ``sum_size`` counts the frames (None without ``log_batch_size``)
    :ivar cwd: the training's working directory (from RETURNN's start-up line), to resolve relative files
    :ivar num_starts: how often RETURNN started in this log (more than 1 after a restart)
    :ivar notes: what of the log was not read (the files of lines longer than ``MAX_FILES_LINE_CHARS``)
    :ivar file_lines: dataset name -> its lines per epoch (:class:`~i6_shard.core.io.log_file_lists.DatasetLines`),
        for the datasets other than the one the files were taken of (whose name is kept, without its lines: they are
        the rows' files)
    :ivar file_windows: dataset name -> its epoch -> the sub-epoch of the training it was logged in (not for the
        dataset the files were taken of)
    """

    rank: int
    source: str
    rows: "_Rows"
    catalog: FileCatalog = field(default_factory=FileCatalog)
    file_store: Any = field(default_factory=HeldStore)
    path: Optional[str] = None
    frames_dim: Optional[str] = None
    cwd: Optional[str] = None
    num_starts: int = 0
    notes: List[str] = field(default_factory=list)
    file_lines: Dict[str, Optional[DatasetLines]] = field(default_factory=dict)
    file_windows: Dict[str, Dict[int, int]] = field(default_factory=dict)
    _table: Optional[SubEpochTable] = field(default=None, repr=False)
    #: where the rows' file columns ([3, rows]: begin, count, instances) and their ids are in ``file_store``
    _files: Optional[Tuple[int, int, int, int]] = field(default=None, repr=False)

    @property
    def table(self) -> SubEpochTable:
        """The sub-epochs' records as read-only columns; where they were spilled, read back anew (not kept)."""
        if self.rows.spill is not None:
            return self.rows.table()
        if self._table is None:
            self._table, self.rows = self.rows.table(), _Rows()
        return self._table

    @property
    def sub_epochs(self) -> Mapping[int, SubEpochLog]:
        """The sub-epochs by epoch, sorted (each record made when asked for)."""
        return _SubEpochs(self)

    def set_files(self, ids: np.ndarray, begin: np.ndarray, num: np.ndarray, instances: np.ndarray) -> None:
        """The rows' files: the ids of all of them in row order, and per row where its own begin (-1: none), how
        many, and the dataset instances that logged them; written to ``file_store`` (nothing per row held)."""
        at = self.file_store.append([np.stack([begin, num, instances]).astype(np.int64)])
        self._files = (at, len(begin), self.file_store.append([ids.astype(np.int32)]), len(ids))

    def file_columns(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """int64 [rows] each: where a row's file ids begin in :meth:`file_ids` (-1: the log shows none), how many,
        and the dataset instances that logged them (0: none)."""
        if self._files is None:
            n = len(self.table.epoch)
            return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        at, n, _, _ = self._files
        begin, num, instances = self.file_store.read(at, [(np.int64, 3 * n)])[0].reshape(3, n)
        return begin, num, instances

    def file_ids(self) -> np.ndarray:
        """int32: the file ids (of :attr:`catalog`) of all rows with files, in row order."""
        if self._files is None:
            return np.zeros(0, dtype=np.int32)
        return self.file_store.read(self._files[2], [(np.int32, self._files[3])])[0]

    @property
    def num_instances(self) -> np.ndarray:
        """int64 per row of ``table``: the dataset instances that logged its files (0: none)."""
        return self.file_columns()[2]

    def files_of(self, i: int) -> Optional[Tuple[List[FileTree], int]]:
        """Row ``i``'s files and the dataset instances that logged them, or None."""
        begin, num, instances = self.file_columns()
        if i >= len(begin) or instances[i] == 0:
            return None
        ids = self.file_store.read(self._files[2] + 4 * int(begin[i]), [(np.int32, int(num[i]))])[0]
        return self.catalog.trees_of(ids), int(instances[i])

    def rows_with_files(self) -> Iterator[Tuple[int, np.ndarray, int]]:
        """``(row, file ids, instances)`` of each sub-epoch whose files the log shows, in epoch order (the rank's ids
        read back once)."""
        begin, num, instances = self.file_columns()
        ids = self.file_ids()
        for i in np.flatnonzero(instances > 0).tolist():
            yield i, ids[begin[i] : begin[i] + num[i]], int(instances[i])


@dataclass
class TrainingLog:
    """The logs of all ranks of one training, in rank order."""

    ranks: List[RankLog]
    #: whose "using files" lines the sub-epochs' files are (see :func:`resolve_dataset_files`)
    files_from: Dict[str, Any] = field(default_factory=dict)
    _epochs: Optional[List[int]] = field(default=None, repr=False)
    #: the scratch file the ranks' records wait in (unnamed: gone when closed, or when the process ends)
    spill: Optional[Spill] = field(default=None, repr=False)
    #: the distinct files of the logs by id (that of every rank)
    catalog: FileCatalog = field(default_factory=FileCatalog)

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def epochs(self) -> List[int]:
        """Sub-epochs any rank started, sorted (one list, made once: do not change it)."""
        if self._epochs is None:  # (a rank at a time: each rank's table may be read back from the spill)
            epochs: set = set()
            for r in self.ranks:
                epochs.update(r.table.epoch.tolist())
            self._epochs = sorted(epochs)
        return self._epochs

    def file_keys(self) -> Iterator[str]:
        """The keys of the files of every record, in rank and epoch order (repeated where records share files)."""
        key_of, keys = self.catalog.keys()
        for r in self.ranks:
            yield from (keys[k] for k in key_of[r.file_ids()].tolist())


#: Distinct files the logs' "using files" lines may name (held once each, some 500 bytes with its ids: at most about
#: 0.5 GB); the files of a line that names further ones are not read, and the report says so (TrainReportJob's
#: memory request holds then, whatever the logs).
MAX_CATALOG_FILES = 1 << 20

#: Closed rows and steps a rank holds while its log is read before they go to the scratch file (:class:`Spill`): with
#: thousands of ranks in one torchrun stdout, these few per rank are what memory holds of the records.
_SPILL_ROWS = 64
_SPILL_STEPS = 256
_ROW_COLUMNS = 6
_STEP_DTYPES = (np.int64, np.int64, np.float64)


class _Rows:
    """One rank's records while its lines come in: a row per run of a sub-epoch in compact columns, and the steps of
    all rows back to back (a log may hold a million records and millions of steps: no object per record). With a
    ``spill``, the rows and steps that can no longer change (all but the last row, the steps before it) go there a
    chunk at a time, and :meth:`table` reads them back; the step indices (``start``, ``end``) count them all."""

    def __init__(self, spill: Optional[Spill] = None):
        self.epoch, self.line, self.num_seqs, self.trained = array("q"), array("q"), array("q"), array("q")
        self.start, self.end = array("q"), array("q")
        self.seqs, self.frames, self.complete = array("q"), array("q"), array("d")
        self.spill = spill
        self.row_chunks = array("q")  # where in the spill, rows; of each chunk
        self.step_chunks = array("q")  # where in the spill, steps; of each chunk
        self.steps_out = 0  # steps in the spill (those held begin there)

    @property
    def num_steps(self) -> int:
        """The steps of all rows, those spilled included."""
        return self.steps_out + len(self.seqs)

    def _columns(self) -> Tuple[array, ...]:
        return self.epoch, self.line, self.num_seqs, self.trained, self.start, self.end

    def flush(self, *, last: bool = False) -> None:
        """Move the rows that can no longer change (all but the last; with ``last`` all) and all the steps to the
        spill, once there are enough of them (with ``last`` any); call only where the last row is closed (its steps
        are then final too)."""
        if self.spill is None:
            return
        n = len(self.epoch) - (0 if last else 1)
        if n > 0 and len(self.epoch) > (0 if last else _SPILL_ROWS):
            block = np.stack([np.frombuffer(c, dtype=np.int64)[:n] for c in self._columns()])
            self.row_chunks.extend((self.spill.append([block]), n))
            del block
            for c in self._columns():
                del c[:n]
        if len(self.seqs) >= (1 if last else _SPILL_STEPS):
            steps = [np.frombuffer(c, dtype=d) for c, d in zip(self._steps(), _STEP_DTYPES)]
            self.step_chunks.extend((self.spill.append(steps), len(self.seqs)))
            del steps
            self.steps_out += len(self.seqs)
            for c in self._steps():
                del c[:]

    def _read_rows(self, at: int, n: int) -> np.ndarray:
        return self.spill.read(at, [(np.int64, _ROW_COLUMNS * n)])[0].reshape(_ROW_COLUMNS, n)

    def _steps(self) -> Tuple[array, ...]:
        return self.seqs, self.frames, self.complete

    def table(self) -> SubEpochTable:
        """The last row of each epoch, sorted by epoch, as read-only numpy columns."""
        held = np.array(self._columns(), dtype=np.int64).reshape(_ROW_COLUMNS, len(self.epoch))
        blocks = [self._read_rows(at, n) for at, n in _pairs(self.row_chunks)]
        rows = np.concatenate(blocks + [held], axis=1) if blocks else held
        del blocks, held
        epoch = rows[0]
        order = np.lexsort((np.arange(len(epoch)), epoch))  # by epoch, then by run
        last = np.ones(len(order), dtype=bool)
        last[:-1] = epoch[order][1:] != epoch[order][:-1]
        keep = order[last]
        columns = [np.ascontiguousarray(rows[k][keep]) for k in range(_ROW_COLUMNS)]
        held_steps = [np.array(c, dtype=d) for c, d in zip(self._steps(), _STEP_DTYPES)]
        chunks = [self.spill.read(at, [(d, n) for d in _STEP_DTYPES]) for at, n in _pairs(self.step_chunks)]
        steps = [np.concatenate([c[k] for c in chunks] + [held_steps[k]]) for k in range(3)] if chunks else held_steps
        del chunks, held_steps
        arrays = [*columns, *steps]
        for x in arrays:
            x.flags.writeable = False
        return SubEpochTable(*arrays)


def _pairs(flat: array) -> Iterator[Tuple[int, int]]:
    return zip(flat[::2], flat[1::2])


def _pick_frames_dim(dims: Sequence[str]) -> Optional[str]:
    """The dim counting frames: the time dim of the data key ``data`` if logged, else the first one.

    >>> _pick_frames_dim(["time:var-unk:classes", "time:var-unk:data"])
    'time:var-unk:data'
    """
    for dim in dims:
        if dim.endswith(":data"):
            return dim
    return dims[0] if dims else None


def _bounded_int(digits: str, *, what: str, limit: int, where: str, fix: str) -> int:
    """The number a log line gives, if at most ``limit``; else a ValueError naming the line (``where``) and ``fix``.
    The digits are not converted unless they can be in range (Python refuses to convert 4300 digits or more).

    >>> _bounded_int("3000000000", what="step", limit=10**6, where="x.log:7", fix="remove the line")
    Traceback (most recent call last):
    ...
    ValueError: x.log:7: step 3000000000 is more than 1,000,000; remove the line
    """
    if len(digits.lstrip("-0")) <= len(str(limit)):
        value = int(digits)
        if value <= limit:
            return value
    shown = digits if len(digits) <= 40 else f"{digits[:20]}...({len(digits)} digits)"
    raise ValueError(f"{where}: {what} {shown} is more than {limit:,}; {fix}")


_DAMAGED = "the line is damaged: remove it, or give the log RETURNN wrote"


class _RankParser:
    """One rank's log, fed line by line (:func:`parse_rank_log`); holds only what the report needs."""

    def __init__(
        self,
        *,
        rank: int,
        source: str,
        dataset_name: str,
        frames_dim: Optional[str],
        records: Optional[List[int]] = None,
        spill: Optional[Spill] = None,
        catalog: Optional[FileCatalog] = None,
    ):
        self.rank, self.source, self.dataset_name, self.frames_dim = rank, source, dataset_name, frames_dim
        self.records = [0] if records is None else records  # (sub-epoch, rank) records of all logs read so far
        self.catalog = FileCatalog() if catalog is None else catalog  # one copy of each file of the logs
        self.files_not_read: List[str] = []  # where the files of a line were too long to read
        self.files_beyond_catalog: List[str] = []  # where they named files beyond MAX_CATALOG_FILES
        #: the "using files" lines of every dataset, their files as ids, waiting in the spill (nothing per line held)
        self.file_lines = FileLines(spill)
        self.file_store = HeldStore() if spill is None else spill
        self.last_trained = 0
        self.rows = _Rows(spill)
        self.cur = -1  # the row being read (-1: none)
        self.cur_epoch: Optional[int] = None  # its epoch
        self.cwd: Optional[str] = None
        self.num_starts = 0
        self.lost_steps = 0

    def _epoch(self, digits: str, where: str) -> int:
        return _bounded_int(
            digits, what="sub-epoch", limit=MAX_EPOCH, where=where, fix=f"no training runs that many; {_DAMAGED}"
        )

    def _count(self, digits: str, what: str, where: str) -> int:
        return _bounded_int(
            digits, what=what, limit=MAX_COUNT, where=where, fix=f"no step or sub-epoch has that many; {_DAMAGED}"
        )

    def _begin(self, epoch: int, lineno: int) -> int:
        if self.cur_epoch != epoch:
            self._start(epoch, lineno)
        return self.cur

    def _start(self, epoch: int, lineno: int) -> None:
        """Close the row being read and begin ``epoch`` afresh at line ``lineno``: a new row, or where the last row
        is of ``epoch`` (a restart inside it) that row anew. Of an epoch run twice, the last run counts."""
        self._close()
        rows = self.rows
        n = rows.steps_out + len(rows.seqs)  # (rows.num_steps, without a call per record)
        if rows.spill is not None and (len(rows.epoch) > _SPILL_ROWS or len(rows.seqs) >= _SPILL_STEPS):
            rows.flush()
        if rows.epoch and rows.epoch[-1] == epoch:
            i = len(rows.epoch) - 1
            rows.line[i], rows.num_seqs[i], rows.trained[i], rows.start[i], rows.end[i] = lineno, -1, -1, n, n
        else:
            self._count_record(epoch, lineno)
            for column, value in zip(
                (rows.epoch, rows.line, rows.num_seqs, rows.trained, rows.start, rows.end),
                (epoch, lineno, -1, -1, n, n),
            ):
                column.append(value)
        self.cur, self.cur_epoch = len(rows.epoch) - 1, epoch

    def _close(self) -> None:
        """End the row being read (a sub-epoch that did not finish stays as it is)."""
        if self.cur >= 0:
            rows = self.rows
            rows.end[self.cur] = rows.steps_out + len(rows.seqs)
        self.cur, self.cur_epoch = -1, None

    def _count_record(self, epoch: int, lineno: int) -> None:
        """Refuse, at its line, the row that takes the logs past the records a report holds (before it is made:
        memory stays bounded by that cap, however many records the logs hold). A sub-epoch run again after another
        one counts again (its row is held until the log is read)."""
        self.records[0] += 1
        if self.records[0] > _training.MAX_REPORT_RECORDS:
            raise ValueError(
                f"{self.source}:{lineno}: sub-epoch {epoch} of rank {self.rank} takes the logs past the "
                f"{_training.MAX_REPORT_RECORDS:,} (sub-epoch, rank) records a report holds; give the logs of one "
                "training, cut to the sub-epochs to report (a sub-epoch or rank far from the others is a damaged line)"
            )

    def feed(self, line: str, lineno: int) -> None:
        """Take one line (without its newline) of this rank's log; ``lineno`` is its line in the file."""
        if not line.startswith(_LINE_STARTS):  # most lines of a long log: one test instead of six patterns
            return
        where = f"{self.source}:{lineno}"
        m = _STEP.match(line)
        if m:
            self._begin(self._epoch(m["epoch"], where), lineno)
            self._step(m, where)
            return
        m = _START_EPOCH.match(line)
        if m:
            self._start(self._epoch(m["epoch"], where), lineno)
            return
        m = _NUM_SEQS.match(line)
        if m:
            i = self._begin(self._epoch(m["epoch"], where), lineno)
            n = m["n"]
            self.rows.num_seqs[i] = -1 if n.startswith("-") else self._count(n, "num_seqs", where)
            return
        m = _TRAINED.match(line)
        if m:
            epoch = self._epoch(m["epoch"], where)
            self.last_trained = epoch
            if self.cur_epoch == epoch:
                self.rows.trained[self.cur] = self._count(m["steps"], "trained steps", where)
                self._close()
            return
        m = _FILES.match(line)
        if m:
            self._files_line(m, line, where)
            return
        m = _STARTUP.match(line)
        if m:
            self.num_starts += 1  # (a restart: its lines replace the earlier run's, log_file_lists.resolve_lines)
            self.cwd = m["cwd"]
            self._close()  # (a previous run that ended inside a sub-epoch)

    def _files_line(self, m: "re.Match[str]", line: str, where: str) -> None:
        """One "using files" line of any DistributeFilesDataset: its files as ids, with its dataset name, epoch, run
        and the sub-epoch of the training it was logged in (its window); which lines give a sub-epoch's files (the
        distinct lists of the dataset's instances, the last run's) is decided when the log is read
        (:func:`~i6_shard.core.io.log_file_lists.resolve_lines`)."""
        epoch = self._epoch(m["epoch"], where)
        full = len(self.catalog) >= MAX_CATALOG_FILES  # new names would go past the memory bound: parsed aside
        files = read_files_of_line(
            m["files"],
            where=where,
            epoch=epoch,
            line=line,
            cut=len(line) >= MAX_LINE_CHARS,
            names={} if full else self.catalog.names,
        )
        window = self.cur_epoch if self.cur_epoch is not None else self.last_trained + 1
        add = self.file_lines.add
        if files is None:  # longer than MAX_FILES_LINE_CHARS: not read, and said so
            self.files_not_read.append(f"{where} (sub-epoch {epoch}, {len(m['files']):,} characters)")
            add(m["name"], epoch=epoch, run=self.num_starts, window=window, ids=None)
            return
        if full and isinstance(files, list) and not self.catalog.knows_all(files):
            self.files_beyond_catalog.append(f"{where} (sub-epoch {epoch})")
            add(m["name"], epoch=epoch, run=self.num_starts, window=window, ids=None)
            return
        if not isinstance(files, list):
            raise ValueError(f"{where}: expected a list of file trees, got {type(files).__name__}")
        try:
            check_file_trees(files)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: the files of epoch {epoch} are not file trees: {exc}; {_DAMAGED}") from None
        add(m["name"], epoch=epoch, run=self.num_starts, window=window, ids=self.catalog.ids_of(files))

    def _step(self, m: "re.Match[str]", where: str) -> None:
        """One step line of the row being read (its steps are the last of the step arrays): its sequences, frames
        and completed share; skipped steps stay unknown (-1, nan)."""
        rows = self.rows
        start = rows.start[self.cur]
        known = rows.num_steps - start
        limit = known + MAX_LOST_STEPS - self.lost_steps
        step = _bounded_int(
            m["step"],
            what="step",
            limit=limit,
            where=where,
            fix=(
                f"it would leave {MAX_LOST_STEPS:,} or more steps of this log without a line (its sub-epoch "
                f"{self.cur_epoch} has {known:,} so far), but RETURNN logs every step; {_DAMAGED}"
            ),
        )
        if step >= known:  # a lost line leaves its step unknown
            gap = step + 1 - known
            self.lost_steps += gap - 1
            rows.seqs.extend(array("q", [-1]) * gap)
            rows.frames.extend(array("q", [-1]) * gap)
            rows.complete.extend(array("d", [float("nan")]) * gap)
        info = m["info"]
        ms = _STEP_SEQS.search(info)
        at = start + step - rows.steps_out  # (the steps before this row's may be spilled)
        rows.seqs[at] = self._count(ms["n"], "num_seqs", where) if ms else -1
        sums = {mm["dim"]: mm["n"] for mm in _STEP_SUM.finditer(info)}
        if sums and self.frames_dim is None:
            self.frames_dim = _pick_frames_dim(list(sums))
        frames = sums.get(self.frames_dim) if self.frames_dim is not None else None
        rows.frames[at] = -1 if frames is None else self._count(frames, f"sum_size:{self.frames_dim}", where)
        mc = _STEP_COMPLETE.search(info)
        complete = float("nan")
        if mc:
            try:
                complete = float(mc["pct"]) / 100.0
            except ValueError:  # "1.2.3": not a number
                complete = float("nan")
            if not 0.0 <= complete <= 1.0:
                raise ValueError(
                    f"{where}: complete {short_repr(mc['pct'], limit=40)}% is not a share of the "
                    f"sub-epoch (0 to 100%); {_DAMAGED}"
                )
        rows.complete[at] = complete

    def result(self) -> RankLog:
        self._close()
        rows, self.rows = self.rows, _Rows()  # (the rows let go: held by the log, or in the spill)
        rows.flush(last=True)
        file_lines = self.file_lines.datasets(self.file_store)
        self.file_lines = FileLines(None)
        windows = {
            name: dict(zip(d.epoch.tolist(), d.window.tolist()))
            for name, d in file_lines.items()
            if name != self.dataset_name
        }
        log = RankLog(
            rank=self.rank,
            source=self.source,
            rows=rows,
            frames_dim=self.frames_dim,
            cwd=self.cwd,
            num_starts=self.num_starts,
            notes=_files_not_read_notes(self.files_not_read) + _beyond_catalog_notes(self.files_beyond_catalog),
            catalog=self.catalog,
            file_store=self.file_store,
            file_lines=file_lines,
            file_windows=windows,
        )
        del file_lines
        if self.dataset_name in log.file_lines:
            assign_files(log, self.dataset_name)
            log.file_lines[self.dataset_name] = None  # (its lines are now the sub-epochs' files: not held twice)
        return log


def _files_not_read_notes(where: List[str]) -> List[str]:
    """One note for the "using files" lines of a log whose files were too long to read (the first few named).

    >>> _files_not_read_notes(["x.log:3 (sub-epoch 1, 5,000,000 characters)"])
    ['the files of 1 "using files" lines are longer than 4,194,304 characters and were not read, so they are not compared: x.log:3 (sub-epoch 1, 5,000,000 characters)']
    """
    if not where:
        return []
    shown = "; ".join(where[:3]) + (f"; and {len(where) - 3:,} more" if len(where) > 3 else "")
    return [
        f'the files of {len(where):,} "using files" lines are longer than {log_files_line.MAX_FILES_LINE_CHARS:,} '
        "characters and "
        f"were not read, so they are not compared: {shown}"
    ]


def _beyond_catalog_notes(where: List[str]) -> List[str]:
    """One note for the "using files" lines of a log not read because the logs name too many distinct files.

    >>> _beyond_catalog_notes(["x.log:3 (sub-epoch 9)"])[0][:92]
    'the files of 1 "using files" lines were not read: the logs name more than 1,048,576 distinct'
    """
    if not where:
        return []
    shown = "; ".join(where[:3]) + (f"; and {len(where) - 3:,} more" if len(where) > 3 else "")
    return [
        f'the files of {len(where):,} "using files" lines were not read: the logs name more than '
        f"{MAX_CATALOG_FILES:,} distinct files (the report holds each, some 500 bytes, and no more, to stay in its "
        f"memory), and these lines name further ones, so they are not compared: {shown}"
    ]


def parse_rank_log(
    lines: Iterable[str], *, rank: int, source: str, dataset_name: str = "train", frames_dim: Optional[str] = None
) -> RankLog:
    """Parse one rank's RETURNN log lines (without torchrun prefixes), one at a time.

    :param dataset_name: the DistributeFilesDataset whose files are taken (RETURNN names it by its config key)
    :param frames_dim: the ``sum_size:<dim>`` counted as frames; default: the data key's time dim
    :raises ValueError: naming ``source`` and the line, if a "using files" line does not hold a Python literal
        list of file trees, or a number is out of bounds (:data:`MAX_EPOCH`, :data:`MAX_COUNT`,
        :data:`MAX_LOST_STEPS`)

    >>> log = parse_rank_log([
    ...     "<DistributeFilesDataset 'train' epoch=1>: using files for epoch 1: ['a.hdf', 'b.hdf']",
    ...     "start epoch 1 global train step 0 with effective learning rate 0.01 ...",
    ...     "ep 1 train num_seqs: 5",
    ...     "ep 1 train, step 0, mse 0.5, num_seqs 3, max_size:time:data 9, sum_size:time:data 20, complete 60.00%",
    ...     "Epoch 1: Trained 1 steps, 0:00:00 elapsed (1.0% computing time, data: 10.0% padding)"],
    ...     rank=0, source="<doc>")
    >>> e = log.sub_epochs[1]
    >>> e.file_keys, e.dataset_num_seqs, e.step_seqs.tolist(), e.step_frames.tolist(), e.trained_steps
    (['a.hdf', 'b.hdf'], 5, [3], [20], 1)
    """
    parser = _RankParser(rank=rank, source=source, dataset_name=dataset_name, frames_dim=frames_dim)
    for lineno, raw in enumerate(lines, start=1):
        parser.feed(raw.rstrip("\r\n"), lineno)
    return parser.result()


def rank_of_log_file(path: str) -> Optional[Tuple[int, int]]:
    """``(rank, size)`` from RETURNN's per-rank log name, or None for another name.

    :raises ValueError: naming the file if the size is more than :data:`MAX_RANKS` or the rank not below it

    >>> rank_of_log_file("work/returnn.torch-distrib-3-4.log")
    (3, 4)
    >>> rank_of_log_file("log.run.1") is None
    True
    >>> rank_of_log_file("returnn.torch-distrib-0-999999999999.log")
    Traceback (most recent call last):
    ...
    ValueError: returnn.torch-distrib-0-999999999999.log: world size 999999999999 is more than 65,536; the name is not one RETURNN gives (<name>.torch-distrib-<rank>-<size>.log): pass the logs under the names RETURNN wrote
    """
    name = os.path.basename(path)
    m = _RANK_FILE.search(name)
    if not m:
        return None
    fix = (
        "the name is not one RETURNN gives (<name>.torch-distrib-<rank>-<size>.log): pass the logs under the names "
        "RETURNN wrote"
    )
    size = _bounded_int(m["size"], what="world size", limit=MAX_RANKS, where=short_repr(name)[1:-1], fix=fix)
    rank = _bounded_int(m["rank"], what="rank", limit=MAX_RANKS - 1, where=short_repr(name)[1:-1], fix=fix)
    if not 0 <= rank < size:
        raise ValueError(
            f"{short_repr(name)}: rank {rank} is outside the world size {size} (ranks 0..{size - 1}); {fix}"
        )
    return rank, size


def _torchrun_rank(digits: str, where: str) -> int:
    return _bounded_int(
        digits,
        what="torchrun rank",
        limit=MAX_RANKS - 1,
        where=where,
        fix="no training runs that many ranks; the prefix is damaged: remove the line, or give "
        "the stdout torchrun wrote",
    )


def split_torchrun_stdout(lines: Iterable[str], *, source: str = "stdout") -> Dict[int, List[str]]:
    """The lines of an interleaved torchrun stdout (``--tee=3``), by local rank, prefixes removed;
    unprefixed lines (the launcher's own) are dropped.

    :raises ValueError: naming ``source`` and the line if a rank is :data:`MAX_RANKS` or more

    >>> split_torchrun_stdout(["[default1]:b", "launcher", "[default0]:a", "[default1]:c"])
    {1: ['b', 'c'], 0: ['a']}
    """
    out: Dict[int, List[str]] = {}
    for lineno, raw in enumerate(lines, start=1):
        m = _TORCHRUN_PREFIX.match(raw.rstrip("\r\n"))
        if m:
            out.setdefault(_torchrun_rank(m["rank"], f"{source}:{lineno}"), []).append(m["line"])
    return out


def _read_lines(path: str, *, max_line_chars: Optional[int] = None) -> Iterator[str]:
    """The lines of a log, without their newlines, one at a time; a line longer than ``max_line_chars``
    (default :data:`MAX_LINE_CHARS`) is given cut to that length and the rest of it is skipped unread into memory."""
    max_line_chars = MAX_LINE_CHARS if max_line_chars is None else max_line_chars
    with open(path, encoding="utf-8", errors="replace") as f:
        while True:
            line = f.readline(max_line_chars)
            if not line:
                return
            if line.endswith("\n"):
                yield line[:-1]
                continue
            rest = line
            while rest and not rest.endswith("\n"):  # the rest of an overlong line (or the last line's end)
                rest = f.readline(max_line_chars)
            yield line


def _parse_file(
    path: str,
    *,
    dataset_name: str,
    frames_dim: Optional[str],
    num_paths: int,
    records: Optional[List[int]] = None,
    spill: Optional[Spill] = None,
    catalog: Optional[FileCatalog] = None,
) -> List[RankLog]:
    """The rank logs of one file: a per-rank log (its rank from the name), a torchrun stdout (a rank per prefix),
    or the log of a one-process training (rank 0), read in one pass."""
    name = os.path.basename(path)
    named = rank_of_log_file(path)
    catalog = FileCatalog() if catalog is None else catalog
    if named is not None:
        parser = _RankParser(
            rank=named[0],
            source=name,
            dataset_name=dataset_name,
            frames_dim=frames_dim,
            records=records,
            spill=spill,
            catalog=catalog,
        )
        for lineno, line in enumerate(_read_lines(path), start=1):
            parser.feed(line, lineno)
        return [parser.result()]
    # (a log of one process is the only one read: it counts its own records, and a torchrun stdout's launcher
    # lines read before the first prefixed line count for nothing)
    plain: Optional[_RankParser] = _RankParser(
        rank=0, source=name, dataset_name=dataset_name, frames_dim=frames_dim, spill=spill, catalog=catalog
    )
    split: Dict[int, _RankParser] = {}
    for lineno, line in enumerate(_read_lines(path), start=1):
        m = _TORCHRUN_PREFIX.match(line)
        if m:
            plain = None  # a torchrun stdout: the unprefixed lines are the launcher's
            rank = _torchrun_rank(m["rank"], f"{name}:{lineno}")
            parser = split.get(rank)
            if parser is None:
                parser = split[rank] = _RankParser(
                    rank=rank,
                    source=f"{name} [rank {rank}]",
                    dataset_name=dataset_name,
                    frames_dim=frames_dim,
                    records=records,
                    spill=spill,
                    catalog=catalog,
                )
            parser.feed(m["line"], lineno)
        elif plain is not None:
            plain.feed(line, lineno)
    if split:
        return [split[rank].result() for rank in sorted(split)]
    if num_paths > 1:
        raise ValueError(
            f"{path!r} is neither a per-rank RETURNN log (<name>.torch-distrib-<rank>-<size>.log) "
            "nor a torchrun stdout with [default<rank>]: prefixes, so its lines cannot be given "
            "to a rank; pass the per-rank logs, or run torchrun with --tee=3"
        )
    return [plain.result()]


def _few(items: Sequence, n: int = 10) -> str:
    """The first ``n`` of ``items`` and how many there are.

    >>> _few(list(range(12)), 3)
    '[0, 1, 2, ...] (12 in all)'
    """
    return str(list(items)) if len(items) <= n else f"{str(list(items[:n]))[:-1]}, ...] ({len(items):,} in all)"


def read_training_logs(
    paths: Sequence[str],
    *,
    dataset_name: str = "train",
    frames_dim: Optional[str] = None,
    multi_epoch: Optional[int] = None,
) -> TrainingLog:
    """Read the logs of one training: RETURNN's per-rank files (``<name>.torch-distrib-<rank>-<size>.log``,
    what ``log = [...]`` gives under torch distributed; i6_core's ReturnnTrainingJob writes
    ``returnn.torch-distrib-<rank>-<size>.log`` in its work dir), or one interleaved torchrun stdout
    whose lines carry ``[default<rank>]:`` prefixes (``--tee=3``, i6_core's ``log.run.1``), or
    the single log of a one-process training. Each file is read once, line by line.

    :param multi_epoch: epochs of a wrapped DistributeFilesDataset per sub-epoch of the training (a
        MultiEpochDataset's ``multi_epoch``); default: inferred from the logs (:func:`resolve_dataset_files`)

    :raises FileNotFoundError: for a missing file (all named at once)
    :raises ValueError: for ranks given twice or missing, sizes that disagree, an interleaved
        stdout without rank prefixes, a line or name out of bounds (named), or more sub-epochs and ranks than a
        report holds (:func:`~i6_shard.core.pure.training.check_report_size`)
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError(
            "no log files given; pass RETURNN's per-rank logs (returnn.torch-distrib-<rank>-<size>.log) "
            "or the torchrun stdout of the training"
        )
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"{len(missing)} log files do not exist: {missing[:5]}")
    irregular = [p for p in paths if not os.path.isfile(p)]
    if irregular:
        raise ValueError(
            f"{len(irregular)} log files are not regular files (a directory, FIFO or device; reading "
            f"could block): {irregular[:5]}; give RETURNN's log files"
        )
    named = {p: rank_of_log_file(p) for p in paths}  # names checked before any file is read
    sizes = {n[1] for n in named.values() if n is not None}
    if len(sizes) > 1:
        raise ValueError(
            f"the log names give different world sizes {_few(sorted(sizes))}; pass the logs of one training"
        )
    spill = Spill()
    try:
        log = _read_logs(paths, sizes, spill=spill, dataset_name=dataset_name, frames_dim=frames_dim)
        resolve_dataset_files(log, dataset_name, multi_epoch=multi_epoch)
        check_report_size(num_epochs=len(log.epochs), num_ranks=log.num_ranks)
    except BaseException:
        spill.close()
        raise
    return log


def _read_logs(
    paths: Sequence[str], sizes: set, *, spill: Spill, dataset_name: str, frames_dim: Optional[str]
) -> TrainingLog:
    """The ranks' logs read (each file once), their records spilled, and checked to be those of one training."""
    ranks: Dict[int, RankLog] = {}
    records = [0]  # (sub-epoch, rank) records made so far, over all the logs
    catalog = FileCatalog()  # (each file once, however many ranks and lines name it)
    for path in paths:
        for log in _parse_file(
            path,
            dataset_name=dataset_name,
            frames_dim=frames_dim,
            num_paths=len(paths),
            records=records,
            spill=spill,
            catalog=catalog,
        ):
            _add(ranks, log, path)
    expected = sizes.pop() if sizes else max(ranks) + 1
    lacking = sorted(set(range(expected)) - set(ranks))
    if lacking:
        raise ValueError(f"logs of ranks {_few(lacking)} of {expected} are missing; pass the log of every rank")
    extra = sorted(set(ranks) - set(range(expected)))
    if extra:
        raise ValueError(f"ranks {_few(extra)} are outside the world size {expected}")
    empty = [r.source for r in ranks.values() if not r.num_starts and not len(r.table.epoch)]
    if empty:
        raise ValueError(
            f"{len(empty)} of the logs hold no line of a RETURNN training (no start-up line, no files "
            f"of a sub-epoch of {dataset_name!r}): {empty[:5]}; give RETURNN's own per-rank logs "
            "(returnn.torch-distrib-<rank>-<size>.log in the training's work dir) or its torchrun stdout"
        )
    dims = {r.frames_dim for r in ranks.values() if r.frames_dim is not None}
    if len(dims) > 1:
        raise ValueError(f"the ranks count frames along different dims {sorted(dims)}; pass frames_dim")
    return TrainingLog(ranks=[ranks[r] for r in range(expected)], spill=spill, catalog=catalog)


def _add(ranks: Dict[int, RankLog], log: RankLog, path: str) -> None:
    if log.rank in ranks:
        raise ValueError(
            f"rank {log.rank} is in two logs ({ranks[log.rank].path!r} and {path!r}); pass each rank's log once"
        )
    log.path = path
    ranks[log.rank] = log


# --- whose files: the named dataset, or a DistributeFilesDataset a wrapper renamed ------------------------------

#: RETURNN's name of a dataset made without one (Dataset.__init__: ``"dataset_id%s" % id(self)``), as a wrapper
#: (MultiEpochDataset, MultiProcDataset in its workers, ...) makes the DistributeFilesDataset it holds.
_UNNAMED = re.compile(r"^dataset_id\d+$")


def assign_files(log: RankLog, name: str, *, multi_epoch: int = 1) -> None:
    """Give each sub-epoch of ``log`` the files the dataset ``name`` logged for it: the lists of all of its
    instances (DataLoader worker sharding: each worker's copy logs its own), and under a wrapper whose sub-epoch
    holds ``multi_epoch`` epochs of the dataset (MultiEpochDataset), those of its epochs
    ``(e - 1) * multi_epoch + 1 .. e * multi_epoch``.

    >>> log = parse_rank_log(["start epoch 1 global train step 0", "<X 'train' epoch=1>: using files for epoch 1: "
    ...     "['a']", "<X 'train' epoch=1>: using files for epoch 1: ['b']"], rank=0, source="x")
    >>> log.sub_epochs[1].file_keys, log.sub_epochs[1].num_instances
    (['a', 'b'], 2)
    """
    lines = log.file_lines.get(name)
    if lines is not None:  # (the rank's ids and columns computed at once: no object per record)
        log.set_files(*row_files(lines, log.table.epoch, multi_epoch=multi_epoch))


def infer_multi_epoch(windows: Sequence[Mapping[int, int]]) -> Optional[int]:
    """How many epochs of a wrapped dataset one sub-epoch of the training holds (MultiEpochDataset's
    ``multi_epoch``), from the sub-epoch each of its epochs was first logged in, per rank: the smallest ``m`` for
    which every epoch ``k`` belongs to (``(k - 1) // m + 1``) the sub-epoch it was logged in or the next one (a
    preload), and the first epoch logged in each sub-epoch belongs to it. None unless two sub-epochs show it.

    >>> infer_multi_epoch([{1: 1, 2: 1, 3: 2, 4: 2}, {1: 1, 2: 1, 3: 2}])
    2
    >>> infer_multi_epoch([{1: 1, 2: 1}]) is None
    True
    """
    shown = {w for windows_ in windows for w in windows_.values()}
    if len(shown) < 2:
        return None
    top = max((k for windows_ in windows for k in windows_), default=0)
    for m in range(1, top + 1):
        ok = True
        for windows_ in windows:
            firsts: Dict[int, int] = {}
            for k, w in windows_.items():
                firsts[w] = min(firsts.get(w, k), k)
                ok &= (k - 1) // m + 1 in (w, w + 1)
            ok &= all((k - 1) // m + 1 == w for w, k in firsts.items())
        if ok:
            return m
    return None


def resolve_dataset_files(log: TrainingLog, dataset_name: str, *, multi_epoch: Optional[int] = None) -> None:
    """Where no rank logged files of ``dataset_name``: the DistributeFilesDataset a wrapper holds, logged under
    RETURNN's name of an unnamed dataset (``dataset_id<n>``, one per rank) or ``<dataset_name>_...``, its epochs
    mapped to the training's sub-epochs (``multi_epoch`` given, else :func:`infer_multi_epoch`). Sets
    ``log.files_from``: the name(s) the files came from, whether wrapped, ``multi_epoch`` and whether inferred,
    and the other names seen (for the report's notes and alarms)."""
    seen = sorted({name for r in log.ranks for name in r.file_lines})
    if any(dataset_name in r.file_lines for r in log.ranks):
        log.files_from = {"names": [dataset_name], "wrapped": False, "multi_epoch": 1, "seen": seen}
        return
    picked = []
    for r in log.ranks:
        names = [n for n in r.file_lines if _UNNAMED.match(n) or n.startswith(f"{dataset_name}_")]
        picked.append(names[0] if len(names) == 1 else None)
    info: Dict[str, Any] = {"names": None, "wrapped": True, "multi_epoch": None, "seen": seen}
    log.files_from = info
    if not seen or any(p is None for p in picked):
        return
    windows = [r.file_windows.get(p, {}) for r, p in zip(log.ranks, picked)]
    inferred = multi_epoch is None
    m = infer_multi_epoch(windows) if inferred else multi_epoch
    info.update(names=sorted(set(picked)), multi_epoch=m, multi_epoch_inferred=inferred)
    if m is None:
        return
    for r, p in zip(log.ranks, picked):
        assign_files(r, p, multi_epoch=m)

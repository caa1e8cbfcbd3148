"""Reader of RETURNN's training logs: per rank and sub-epoch, the files DistributeFilesDataset
was given, the dataset's sequence count, and every train step's sequences and frames (with
``log_batch_size``); from per-rank log files or one torchrun stdout with ``[default<rank>]:`` prefixes."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import FileTree, tree_key

__all__ = [
    "SubEpochLog",
    "RankLog",
    "TrainingLog",
    "parse_rank_log",
    "read_training_logs",
    "split_torchrun_stdout",
    "rank_of_log_file",
]

# The lines below are RETURNN's (1.2026): returnn/__main__.py, returnn/datasets/distrib_files.py
# (DistributeFilesDataset.init_seq_order) and returnn/torch/engine.py (Engine.train_epoch, _print_process).
_STARTUP = re.compile(r"^RETURNN starting up, .*?, cwd (?P<cwd>.*?), Python ")
_FILES = re.compile(r"^<(?P<cls>\w+) '(?P<name>[^']*)' epoch=[^>]*>: using files for epoch (?P<epoch>\d+): "
                    r"(?P<files>.*)$")
_START_EPOCH = re.compile(r"^start epoch (?P<epoch>\d+) global train step ")
_NUM_SEQS = re.compile(r"^ep (?P<epoch>\d+) train num_seqs: (?P<n>-?\d+)\s*$")
_STEP = re.compile(r"^ep (?P<epoch>\d+) train, step (?P<step>\d+), (?P<info>.*)$")
_STEP_SEQS = re.compile(r"(?:^|, )num_seqs (?P<n>\d+)(?:,|$)")
_STEP_SUM = re.compile(r"(?:^|, )sum_size:(?P<dim>\S+) (?P<n>\d+)(?=,|$)")
_STEP_COMPLETE = re.compile(r", complete (?P<pct>[0-9.]+)%")
_TRAINED = re.compile(r"^Epoch (?P<epoch>\d+): Trained (?P<steps>\d+) steps")
#: torchrun --tee=3 (as i6_core's ReturnnTrainingJob runs it) prefixes each line with the role and local rank.
_TORCHRUN_PREFIX = re.compile(r"^\[(?P<role>[^\]\d]*)(?P<rank>\d+)\]:(?P<line>.*)$")
#: RETURNN's per-rank log names under torch distributed (returnn/log.py, Log.init_by_config); Horovod alike.
_RANK_FILE = re.compile(r"\.(?:torch-distrib|horovod)-(?P<rank>\d+)-(?P<size>\d+)(?:\.[^.]*)?$")


@dataclass
class SubEpochLog:
    """What one rank's log says about one sub-epoch (``epoch``, 1-based).

    :ivar files: the file trees DistributeFilesDataset was given ("using files for epoch"), or None
    :ivar dataset_num_seqs: the sequences the dataset offered this sub-epoch ("train num_seqs"), or None
    :ivar step_seqs: int64 [num_steps], sequences of each step (-1 where the log does not say)
    :ivar step_frames: int64 [num_steps], frames of each step along the frames dim (-1 where unknown)
    :ivar step_complete: float64 [num_steps], the logged completed fraction (nan where not logged)
    :ivar trained_steps: from "Epoch E: Trained N steps"; None while the sub-epoch runs (or if it crashed)
    """

    epoch: int
    files: Optional[List[FileTree]] = None
    dataset_num_seqs: Optional[int] = None
    step_seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    step_complete: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    trained_steps: Optional[int] = None

    @property
    def num_steps(self) -> int:
        return int(self.step_seqs.shape[0])

    @property
    def finished(self) -> bool:
        return self.trained_steps is not None

    @property
    def file_keys(self) -> Optional[List[str]]:
        return None if self.files is None else [tree_key(t) for t in self.files]


@dataclass
class RankLog:
    """One rank's log: its sub-epochs by epoch (the last run of an epoch wins, as after a restart).

    :ivar source: where the lines came from, for messages: the file name, with ``[rank r]`` for an
        interleaved stdout (no directory, so reports name no machine's paths)
    :ivar path: the log file's path
    :ivar frames_dim: the dim whose ``sum_size`` counts the frames (None without ``log_batch_size``)
    :ivar cwd: the training's working directory (from RETURNN's start-up line), to resolve relative files
    :ivar num_starts: how often RETURNN started in this log (more than 1 after a restart)
    """

    rank: int
    source: str
    sub_epochs: Dict[int, SubEpochLog]
    path: Optional[str] = None
    frames_dim: Optional[str] = None
    cwd: Optional[str] = None
    num_starts: int = 0


@dataclass
class TrainingLog:
    """The logs of all ranks of one training, in rank order."""

    ranks: List[RankLog]

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)

    @property
    def epochs(self) -> List[int]:
        """Sub-epochs any rank started, sorted."""
        return sorted({e for r in self.ranks for e in r.sub_epochs})


class _Building:
    """Step lists of one sub-epoch while its lines come in."""

    def __init__(self, epoch: int):
        self.record = SubEpochLog(epoch=epoch)
        self.seqs: List[int] = []
        self.frames: List[int] = []
        self.complete: List[float] = []

    def finish(self) -> SubEpochLog:
        self.record.step_seqs = np.array(self.seqs, dtype=np.int64)
        self.record.step_frames = np.array(self.frames, dtype=np.int64)
        self.record.step_complete = np.array(self.complete, dtype=np.float64)
        return self.record


def _pick_frames_dim(dims: Sequence[str]) -> Optional[str]:
    """The dim counting frames: the time dim of the data key ``data`` if logged, else the first one.

    >>> _pick_frames_dim(["time:var-unk:classes", "time:var-unk:data"])
    'time:var-unk:data'
    """
    for dim in dims:
        if dim.endswith(":data"):
            return dim
    return dims[0] if dims else None


def parse_rank_log(lines: Iterable[str], *, rank: int, source: str, dataset_name: str = "train",
                   frames_dim: Optional[str] = None) -> RankLog:
    """Parse one rank's RETURNN log lines (without torchrun prefixes).

    :param dataset_name: the DistributeFilesDataset whose files are taken (RETURNN names it by its config key)
    :param frames_dim: the ``sum_size:<dim>`` counted as frames; default: the data key's time dim
    :raises ValueError: if a "using files" line does not hold a Python literal list of file trees

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
    files_by_epoch: Dict[int, List[FileTree]] = {}
    sub_epochs: Dict[int, SubEpochLog] = {}
    current: Optional[_Building] = None
    cwd = None
    num_starts = 0
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        m = _STEP.match(line)
        if m:
            epoch = int(m["epoch"])
            if current is None or current.record.epoch != epoch:
                current = _start(sub_epochs, current, epoch)
            step = int(m["step"])
            info = m["info"]
            while len(current.seqs) <= step:  # a lost line leaves its step unknown
                current.seqs.append(-1)
                current.frames.append(-1)
                current.complete.append(float("nan"))
            ms = _STEP_SEQS.search(info)
            current.seqs[step] = int(ms["n"]) if ms else -1
            sums = {mm["dim"]: int(mm["n"]) for mm in _STEP_SUM.finditer(info)}
            if sums and frames_dim is None:
                frames_dim = _pick_frames_dim(list(sums))
            current.frames[step] = sums.get(frames_dim, -1) if frames_dim is not None else -1
            mc = _STEP_COMPLETE.search(info)
            current.complete[step] = float(mc["pct"]) / 100.0 if mc else float("nan")
            continue
        m = _START_EPOCH.match(line)
        if m:
            current = _start(sub_epochs, current, int(m["epoch"]))
            continue
        m = _NUM_SEQS.match(line)
        if m:
            epoch = int(m["epoch"])
            if current is None or current.record.epoch != epoch:
                current = _start(sub_epochs, current, epoch)
            n = int(m["n"])
            current.record.dataset_num_seqs = n if n >= 0 else None
            continue
        m = _TRAINED.match(line)
        if m:
            epoch = int(m["epoch"])
            if current is not None and current.record.epoch == epoch:
                current.record.trained_steps = int(m["steps"])
                sub_epochs[epoch] = current.finish()
                current = None
            continue
        m = _FILES.match(line)
        if m:
            if m["name"] != dataset_name:
                continue
            try:
                files = ast.literal_eval(m["files"])
            except (ValueError, SyntaxError) as exc:
                raise ValueError(f"{source}:{lineno}: the files of epoch {m['epoch']} are not a Python literal "
                                 f"({exc}); is the line cut off? {line[:200]!r}") from None
            if not isinstance(files, list):
                raise ValueError(f"{source}:{lineno}: expected a list of file trees, got {type(files).__name__}")
            files_by_epoch[int(m["epoch"])] = files
            continue
        m = _STARTUP.match(line)
        if m:
            num_starts += 1
            cwd = m["cwd"]
            if current is not None:  # the previous run ended inside this sub-epoch
                sub_epochs[current.record.epoch] = current.finish()
                current = None
    if current is not None:
        sub_epochs[current.record.epoch] = current.finish()
    for epoch, record in sub_epochs.items():
        record.files = files_by_epoch.get(epoch)
    return RankLog(rank=rank, source=source, sub_epochs=dict(sorted(sub_epochs.items())), frames_dim=frames_dim,
                   cwd=cwd, num_starts=num_starts)


def _start(sub_epochs: Dict[int, SubEpochLog], current: Optional[_Building], epoch: int) -> _Building:
    """Close ``current`` (an unfinished sub-epoch stays as it is) and begin ``epoch`` afresh."""
    if current is not None:
        sub_epochs[current.record.epoch] = current.finish()
    sub_epochs.pop(epoch, None)  # a restart runs the epoch again; its last run counts
    return _Building(epoch)


def rank_of_log_file(path: str) -> Optional[Tuple[int, int]]:
    """``(rank, size)`` from RETURNN's per-rank log name, or None for another name.

    >>> rank_of_log_file("work/returnn.torch-distrib-3-4.log")
    (3, 4)
    >>> rank_of_log_file("log.run.1") is None
    True
    """
    m = _RANK_FILE.search(os.path.basename(path))
    return (int(m["rank"]), int(m["size"])) if m else None


def split_torchrun_stdout(lines: Iterable[str]) -> Dict[int, List[str]]:
    """The lines of an interleaved torchrun stdout (``--tee=3``), by local rank, prefixes removed;
    unprefixed lines (the launcher's own) are dropped.

    >>> split_torchrun_stdout(["[default1]:b", "launcher", "[default0]:a", "[default1]:c"])
    {1: ['b', 'c'], 0: ['a']}
    """
    out: Dict[int, List[str]] = {}
    for raw in lines:
        m = _TORCHRUN_PREFIX.match(raw.rstrip("\r\n"))
        if m:
            out.setdefault(int(m["rank"]), []).append(m["line"])
    return out


def _read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def read_training_logs(paths: Sequence[str], *, dataset_name: str = "train",
                       frames_dim: Optional[str] = None) -> TrainingLog:
    """Read the logs of one training: RETURNN's per-rank files (``<name>.torch-distrib-<rank>-<size>.log``,
    what ``log = [...]`` gives under torch distributed; i6_core's ReturnnTrainingJob writes
    ``returnn.torch-distrib-<rank>-<size>.log`` in its work dir), or one interleaved torchrun stdout
    whose lines carry ``[default<rank>]:`` prefixes (``--tee=3``, i6_core's ``log.run.1``), or
    the single log of a one-process training.

    :raises FileNotFoundError: for a missing file (all named at once)
    :raises ValueError: for ranks given twice or missing, sizes that disagree, or an interleaved
        stdout without rank prefixes
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("no log files given; pass RETURNN's per-rank logs (returnn.torch-distrib-<rank>-<size>.log) "
                         "or the torchrun stdout of the training")
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"{len(missing)} log files do not exist: {missing[:5]}")
    irregular = [p for p in paths if not os.path.isfile(p)]
    if irregular:
        raise ValueError(f"{len(irregular)} log files are not regular files (a directory, FIFO or device; reading "
                         f"could block): {irregular[:5]}; give RETURNN's log files")
    ranks: Dict[int, RankLog] = {}
    sizes = set()
    for path in paths:
        named = rank_of_log_file(path)
        lines = _read_lines(path)
        name = os.path.basename(path)
        if named is not None:
            rank, size = named
            sizes.add(size)
            _add(ranks, parse_rank_log(lines, rank=rank, source=name, dataset_name=dataset_name,
                                       frames_dim=frames_dim), path)
            continue
        split = split_torchrun_stdout(lines)
        if split:
            for rank, rank_lines in sorted(split.items()):
                _add(ranks, parse_rank_log(rank_lines, rank=rank, source=f"{name} [rank {rank}]",
                                           dataset_name=dataset_name, frames_dim=frames_dim), path)
            continue
        if len(paths) > 1:
            raise ValueError(f"{path!r} is neither a per-rank RETURNN log (<name>.torch-distrib-<rank>-<size>.log) "
                             "nor a torchrun stdout with [default<rank>]: prefixes, so its lines cannot be given "
                             "to a rank; pass the per-rank logs, or run torchrun with --tee=3")
        _add(ranks, parse_rank_log(lines, rank=0, source=name, dataset_name=dataset_name, frames_dim=frames_dim),
             path)
    if len(sizes) > 1:
        raise ValueError(f"the log names give different world sizes {sorted(sizes)}; pass the logs of one training")
    expected = sizes.pop() if sizes else max(ranks) + 1
    lacking = sorted(set(range(expected)) - set(ranks))
    if lacking:
        raise ValueError(f"logs of ranks {lacking} of {expected} are missing; pass the log of every rank")
    extra = sorted(set(ranks) - set(range(expected)))
    if extra:
        raise ValueError(f"ranks {extra} are outside the world size {expected}")
    empty = [r.source for r in ranks.values() if not r.sub_epochs and not r.num_starts]
    if empty:
        raise ValueError(f"{len(empty)} of the logs hold no line of a RETURNN training (no start-up line, no files "
                         f"of a sub-epoch of {dataset_name!r}): {empty[:5]}; give RETURNN's own per-rank logs "
                         "(returnn.torch-distrib-<rank>-<size>.log in the training's work dir) or its torchrun stdout")
    dims = {r.frames_dim for r in ranks.values() if r.frames_dim is not None}
    if len(dims) > 1:
        raise ValueError(f"the ranks count frames along different dims {sorted(dims)}; pass frames_dim")
    return TrainingLog(ranks=[ranks[r] for r in range(expected)])


def _add(ranks: Dict[int, RankLog], log: RankLog, path: str) -> None:
    if log.rank in ranks:
        raise ValueError(f"rank {log.rank} is in two logs ({ranks[log.rank].path!r} and {path!r}); "
                         "pass each rank's log once")
    log.path = path
    ranks[log.rank] = log

"""Costs per file in what the training counts (frames, sequences or expected steps) read from the files' metadata
(RETURNN HDF, OggZip manifests, HuggingFace/arrow shards), in
parallel with progress lines, and the costs archive that ``plan --sizes``, ShardPlanJob, the builder and
the RETURNN-side dataset accept in place of a sizes archive; bytes stay the fallback (file_sizes.py)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..pure.args import first_negative
from ..pure.batching import Batching, check_batching_for_unit, file_millisteps
from ..pure.file_tree import FileTree, flatten
from ..pure.settings import UNITS
from .file_sizes import (
    COSTS_ARRAYS,
    FILE_COSTS_FORMAT_VERSION,
    SEQ_LENGTHS_ARRAY,
    STEPS_BATCHING_ARRAY,
    _read_file_sizes,
)
from ..pure.costs_consistency import check_frame_rate
from .costs_checks import check_costs_consistency, check_useful_batching, check_useful_batching_of
from .stat_engine import _leaves_and_keys, collect_file_sizes, default_num_procs
from .npz import encode_keys, inflation_problem, open_npz, save_npz
from .preflight import short_repr
from .progress import Progress

__all__ = [
    "FileCosts",
    "COST_UNITS",
    "cost_leaf",
    "collect_file_costs",
    "save_file_costs",
    "load_file_costs",
    "prediction_batching",
    "MISSING_H5PY",
]

#: The units read from the files (bytes come from the stat engine, file_sizes.py).
COST_UNITS = tuple(u for u in UNITS if u != "bytes")
#: Points of the pooled sequence length distribution a costs archive keeps (quantiles 0, 1/256, ..., 1).
NUM_LENGTH_QUANTILES = 257
MISSING_H5PY = (
    "h5py is not installed, so RETURNN HDF files cannot be read for their sequence lengths: "
    "pip install h5py into the Python that runs this, or balance by bytes (`sizes`)"
)
MISSING_PYARROW = (
    "pyarrow is not installed, so arrow shards cannot be read for their rows: pip install pyarrow "
    "(or i6_shard[arrow]) into the Python that runs this, or balance by bytes (`sizes`)"
)
#: The first bytes of an Arrow IPC *file* (an IPC stream, as HuggingFace datasets writes ``.arrow``, has none).
_ARROW_FILE_MAGIC = b"ARROW1"
#: Files up to which the costs are read in this process: a read takes ~0.5 ms (warm), a helper process
#: ~1 s to start and import h5py, so below this helpers cost more than they save.
_SERIAL_MAX_FILES = 4000
#: Feature frames per second assumed for OggZip manifests' durations (RETURNN's default step_len 10 ms).
DEFAULT_FRAME_RATE = 100.0
_CHUNK = 64
_DEFAULT_MAX_PROCS = 8


@dataclass(frozen=True)
class FileCosts:
    """Costs of the entries of a file list, in list order (the order and keys of their sizes).

    :ivar keys: tree keys, one per entry
    :ivar costs: int64 cost per entry in ``unit``, shape [num_files]
    :ivar unit: one of :data:`COST_UNITS`
    :ivar num_seqs: int64 sequences per entry, shape [num_files]
    :ivar num_frames: int64 frames of the cost stream per entry, shape [num_files]
    :ivar seq_length_quantiles: int64, shape [NUM_LENGTH_QUANTILES]: quantiles 0, 1/256, ..., 1 of the
        sequence lengths (frames of the cost stream) pooled over all entries; the batching model
        (core/pure/batching.py) takes the shape of the length distribution from it
    :ivar mtimes: int64 modification time per entry in ns (the latest of its leaves'), shape [num_files]
    :ivar batching: unit "steps" only (and there required): the batching limits the costs count the expected
        steps under, in milli-steps (``core.pure.batching.file_millisteps``)
    :ivar seq_lengths: int32, every sequence's length in entry order (``num_seqs[i]`` of entry i), shape
        [num_seqs.sum()]; None where they are not known (an archive written before they were kept, or arrow
        shards read without a length column): the predicted loss then takes the pooled quantiles
    """

    keys: List[str]
    costs: np.ndarray
    unit: str
    num_seqs: np.ndarray
    num_frames: np.ndarray
    seq_length_quantiles: np.ndarray
    mtimes: Optional[np.ndarray] = None
    batching: Optional[Batching] = None
    seq_lengths: Optional[np.ndarray] = None

    def __post_init__(self):
        if self.unit not in COST_UNITS:
            raise ValueError(f"unit={self.unit!r}: a costs archive counts one of {COST_UNITS} (bytes: FileSizes)")
        check_batching_for_unit(self.unit, self.batching)
        n = len(self.keys)
        for name in ("costs", "num_seqs", "num_frames") + (("mtimes",) if self.mtimes is not None else ()):
            if np.shape(getattr(self, name)) != (n,):
                raise ValueError(f"{name} has shape {np.shape(getattr(self, name))} for {n} keys; they must pair up")
        if np.shape(self.seq_length_quantiles) != (NUM_LENGTH_QUANTILES,):
            raise ValueError(
                f"seq_length_quantiles has shape {np.shape(self.seq_length_quantiles)}, expected "
                f"({NUM_LENGTH_QUANTILES},)"
            )
        if self.seq_lengths is not None:
            expected = sum(int(x) for x in np.asarray(self.num_seqs))
            if np.shape(self.seq_lengths) != (expected,):
                raise ValueError(
                    f"seq_lengths has shape {np.shape(self.seq_lengths)}, but num_seqs sum to {expected:,}; "
                    "they must pair up"
                )

    def file_lengths(self) -> Optional[List[np.ndarray]]:
        """Each entry's sequence lengths (views into :attr:`seq_lengths`), or None where they are not kept."""
        if self.seq_lengths is None:
            return None
        return np.split(np.asarray(self.seq_lengths), np.cumsum(np.asarray(self.num_seqs, dtype=np.int64))[:-1])

    def __len__(self) -> int:
        return len(self.keys)


def prediction_batching(costs: FileCosts, batching: Optional[Batching]) -> Optional[Batching]:
    """The batching limits a plan of ``costs`` predicts its loss under: the given ones, or for costs in
    steps the limits they were counted under (a plan by steps always records them in its summary).

    :raises ValueError: if costs in steps were counted under other limits than the given ones
    """
    if batching is not None and not costs.num_frames.any() and costs.num_seqs.any():  # sums could wrap
        raise ValueError(
            "the costs archive knows no sequence lengths (arrow shards without a length column), so no "
            "loss can be predicted under batch_size / max_seqs: compute the costs with a length column "
            "(`costs --length-column NAME`, ComputeFileCostsJob(length_column=...))"
        )
    if costs.batching is None or batching is None or batching == costs.batching:
        chosen = batching if batching is not None else costs.batching
        check_useful_batching_of(costs, chosen)  # a prediction of 0 steps everywhere is none
        return chosen
    raise ValueError(
        f"the costs count steps under {costs.batching.as_dict()}, but the prediction was asked for "
        f"{batching.as_dict()}: give the same batch_size / max_seqs, or compute the costs again with "
        "these"
    )


def hdf_stream_names(h5file) -> List[str]:
    """Names of the columns of a RETURNN HDF file's ``seqLengths``, as RETURNN's ``HDFDataset.add_file``
    reads them: ``"data"`` if the file has ``inputs``, then the target keys, sorted (``"classes"`` stands
    for the dummy column of a file without ``targets``)."""
    names = ["data"] if "inputs" in h5file else []
    if "targets" in h5file:
        names += sorted(set(h5file["targets/data"].keys()) | set(h5file["targets/size"].attrs.keys()))
    else:
        names += ["classes"]
    return names


def read_hdf_seq_lengths(path: str, *, stream: str = "data") -> np.ndarray:
    """Frames of every sequence of a RETURNN HDF file in ``stream`` (a data key of HDFDataset: ``"data"``
    or a target key), from ``seqLengths`` alone: the features are not read.

    :return: int64, shape [num_seqs]
    :raises ImportError: without h5py
    :raises ValueError: if the file has no ``seqLengths`` or no such stream (naming the streams it has)
    """
    try:
        import h5py
    except ImportError as exc:
        raise ImportError(MISSING_H5PY) from exc
    with h5py.File(path, "r") as f:
        if "seqLengths" not in f:
            raise ValueError(
                f"{short_repr(path)} has no seqLengths dataset; it is not a RETURNN HDF file "
                "(balance by bytes for files without such metadata)"
            )
        dataset = f["seqLengths"]
        declared = math.prod(dataset.shape) * dataset.dtype.itemsize
        problem = inflation_problem(declared, os.path.getsize(path), stored_as="in the whole file")
        if problem:
            raise ValueError(
                f"{short_repr(path)}: its seqLengths of shape {list(dataset.shape)} {problem}: the file "
                "is crafted or damaged (refused before reading it); fix it, or remove it from the list"
            )
        lengths = dataset[...]
        if stream == "data" and lengths.ndim == 2 and "inputs" in f:  # the common case: column 0
            return lengths[:, 0].astype(np.int64)
        names = hdf_stream_names(f)
    lengths = lengths.astype(np.int64)
    if lengths.ndim == 1:  # old files: one column that every stream shares
        lengths = np.repeat(lengths[:, None], len(names), axis=1)
    if lengths.ndim != 2 or lengths.shape[1] != len(names):
        raise ValueError(f"{short_repr(path)}: seqLengths has shape {list(lengths.shape)} for the streams {names}")
    if stream not in names:
        raise ValueError(
            f"{short_repr(path)} has no stream {stream!r}; its streams are {names}: pass one of them as the cost stream"
        )
    return np.ascontiguousarray(lengths[:, names.index(stream)])


def read_oggzip_seq_lengths(path: str, *, frame_rate: float = DEFAULT_FRAME_RATE) -> np.ndarray:
    """Frames of every sequence of an ``OggZipDataset`` zip from its manifest alone (``<name>.txt`` in the
    zip, ``name`` the zip's base name, parsed as RETURNN parses it): ``round(duration * frame_rate)``.
    The manifest's durations need not match the audio (RETURNN uses them only to sort), so the frames
    are as good as they are; the number of sequences is exact.

    :param frame_rate: feature frames per second (RETURNN's audio default ``step_len=0.01``: 100)
    :return: int64, shape [num_seqs]
    :raises ValueError: if the zip has no manifest or an entry no ``duration``
    """
    import zipfile

    from .returnn_py import parse_returnn_py_literal

    name = os.path.splitext(os.path.basename(path))[0]
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(name + ".txt")
            problem = inflation_problem(info.file_size, info.compress_size)
            if problem:
                raise ValueError(
                    f"{short_repr(path)}: its manifest {info.filename!r} {problem}: the zip is crafted "
                    "or damaged (refused before inflating it); fix it, or remove it from the list"
                )
            text = zf.read(info)
    except KeyError:
        raise ValueError(
            f"{short_repr(path)} has no manifest {name + '.txt'!r}; it is not an OggZipDataset zip "
            "(balance by bytes for files without such metadata)"
        ) from None
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{short_repr(path)} is not a zip file ({exc})") from None
    try:
        entries = parse_returnn_py_literal(text)
    except ValueError as exc:
        raise ValueError(f"{short_repr(path)}: its manifest does not parse as RETURNN reads it ({exc})") from None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("duration"), (int, float)) for e in entries
    ):
        raise ValueError(f"{short_repr(path)}: the manifest must be a list of dicts with a float 'duration'")
    durations = np.array([float(e["duration"]) for e in entries], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(durations) | (durations < 0))
    if len(bad):
        raise ValueError(
            f"{short_repr(path)}: entry {int(bad[0])} of its manifest has duration "
            f"{float(durations[bad[0]])!r}; a duration is a finite number of seconds, at least 0"
        )
    return np.rint(durations * frame_rate).astype(np.int64)


#: Leaves whose costs can be read: RETURNN HDF, OggZip zips, arrow shards.
_COST_SUFFIXES = (".hdf", ".zip", ".arrow")


def cost_leaf(tree: FileTree, *, leaf: Union[None, int, str] = None) -> str:
    """The leaf of a file tree whose sequences define the entry's cost.

    :param leaf: None: the only leaf, or else the only ``.hdf`` (or ``.zip``, ``.arrow``) leaf; an int: that
        position in the tree's leaves (dm-tree order, as in its key); a str: the path of dict keys and list
        indices to it, joined by ``/`` (e.g. ``"audio"`` or ``"feats/0"``)
    :raises ValueError: naming the tree and what to pass

    >>> tree = {"audio": "a.hdf", "text": "t.hdf"}
    >>> cost_leaf(tree, leaf="audio"), cost_leaf(tree, leaf=1), cost_leaf("x.hdf")
    ('a.hdf', 't.hdf', 'x.hdf')
    >>> cost_leaf(tree)
    Traceback (most recent call last):
    ...
    ValueError: file tree {'audio': 'a.hdf', 'text': 't.hdf'} has 2 leaves whose costs can be read (.hdf, .zip, .arrow); name the one that defines the cost (leaf='audio' or another path of dict keys / list indices, or its position 0..1)
    """
    leaves = flatten(tree)
    if leaf is None:
        if len(leaves) == 1:
            return leaves[0]
        readable = [x for x in leaves if x.endswith(_COST_SUFFIXES)]
        if len(readable) == 1:
            return readable[0]
        example = next(iter(tree)) if isinstance(tree, dict) else 0
        raise ValueError(
            f"file tree {short_repr(tree)} has {len(readable)} leaves whose costs can be read "
            f"({', '.join(_COST_SUFFIXES)}); name the one that defines the "
            f"cost (leaf={example!r} or another path of dict keys / list indices, or its position "
            f"0..{len(leaves) - 1})"
        )
    if isinstance(leaf, int) and not isinstance(leaf, bool):
        if not 0 <= leaf < len(leaves):
            raise ValueError(f"leaf={leaf} is out of range for file tree {short_repr(tree)} with {len(leaves)} leaves")
        return leaves[leaf]
    if not isinstance(leaf, str):
        raise TypeError(f"leaf={leaf!r} must be None, an int (position among the leaves) or a str (path)")
    node = tree
    for part in leaf.split("/"):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ValueError(
                f"file tree {short_repr(tree)} has no leaf at {leaf!r} (stuck at {part!r}); give a "
                "path of dict keys / list indices joined by '/'"
            )
    if not isinstance(node, str):
        raise ValueError(f"{leaf!r} names a subtree of {short_repr(tree)}, not a file; go down to one leaf")
    return node


def read_arrow_seq_lengths(path: str, *, length_column: Optional[str] = None) -> Union[int, np.ndarray]:
    """Rows of an Arrow IPC stream (``.arrow`` as HuggingFace ``datasets`` writes it, e.g.
    ``data-00000-of-00001.arrow``) or IPC file, and with ``length_column`` each row's length.

    The file is memory-mapped: the row count is the sum of the record batches' lengths from their
    metadata, and of the data only the length column's buffers are touched (a list column's offsets).

    :param length_column: None: only the rows; the name of an integer column (each row's length) or of a
        list column (each row's list length, e.g. the frames of a list of feature vectors)
    :return: the number of rows (an int) without ``length_column``, else int64 lengths, shape [num_rows]
    :raises ImportError: without pyarrow
    :raises ValueError: if the file is no Arrow IPC stream/file, or the column is missing, of another type or
        has nulls (naming the columns it has)
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.ipc
    except ImportError as exc:
        raise ImportError(MISSING_PYARROW) from exc
    with open(path, "rb") as f:
        is_file = f.read(len(_ARROW_FILE_MAGIC)) == _ARROW_FILE_MAGIC
    try:
        with pa.memory_map(path, "r") as source:
            reader = pa.ipc.open_file(source) if is_file else pa.ipc.open_stream(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches)) if is_file else reader
            if length_column is None:
                return sum(b.num_rows for b in batches)
            idx = reader.schema.get_field_index(length_column)
            if idx < 0:
                raise ValueError(
                    f"{short_repr(path)} has no column {length_column!r}; its columns are "
                    f"{short_repr(reader.schema.names)}: name one of them as the length column"
                )
            kind = reader.schema.field(idx).type
            is_list = pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
            if not (is_list or pa.types.is_integer(kind)):
                raise ValueError(
                    f"{short_repr(path)}: column {length_column!r} is {kind}; the length column must "
                    "hold ints (each row's length) or lists (whose lengths count)"
                )
            parts = []
            for batch in batches:
                column = batch.column(idx)
                if column.null_count:
                    raise ValueError(
                        f"{short_repr(path)}: column {length_column!r} has {column.null_count} nulls; "
                        "every row needs a length"
                    )
                values = pc.list_value_length(column) if is_list else column
                parts.append(values.to_numpy(zero_copy_only=False).astype(np.int64))
    except pa.ArrowInvalid as exc:
        raise ValueError(
            f"{short_repr(path)} is not an Arrow IPC stream or file ({exc}); balance by bytes for "
            "files without such metadata"
        ) from None
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


#: The longest sequence a costs pass accepts, in frames: RETURNN stores sequence lengths as int32 (an HDF's
#: ``seqLengths``, the torch batching's lengths), so a longer one is not real data but a damaged or crafted
#: file; with :data:`MAX_SEQS_PER_FILE` it keeps every file's sum of lengths within int64.
MAX_SEQ_LENGTH = 2**31 - 1
#: The most sequences a costs pass accepts in one file: an arrow shard's row count comes from its metadata, so
#: a few hundred bytes can claim 2**62 rows; 2**32 rows is more than any shard holds (RETURNN indexes a
#: sub-dataset's sequences with int32).
MAX_SEQS_PER_FILE = 2**32
_INT64_MAX = 2**63 - 1


def _check_num_seqs(path: str, num_seqs: int) -> int:
    """``num_seqs`` if at most :data:`MAX_SEQS_PER_FILE`, else ValueError naming the file and the fix."""
    if num_seqs > MAX_SEQS_PER_FILE:
        raise ValueError(
            f"{short_repr(path)} claims {num_seqs:,} sequences, more than {MAX_SEQS_PER_FILE:,} (2**32), "
            "which no file holds; the file is damaged or crafted; fix it, or remove it from the list"
        )
    return num_seqs


def _check_lengths(path: str, lengths: np.ndarray, *, source: str = "") -> np.ndarray:
    """``lengths`` if every one is at most :data:`MAX_SEQ_LENGTH` and there are at most
    :data:`MAX_SEQS_PER_FILE` (so their sum fits int64), else ValueError naming the file, the sequence and the
    fix (before anything is allocated by the lengths' values)."""
    _check_num_seqs(path, len(lengths))
    if len(lengths):
        i = int(np.argmax(lengths))
        if int(lengths[i]) > MAX_SEQ_LENGTH:
            raise ValueError(
                f"{short_repr(path)}: sequence {i} is {int(lengths[i]):,} frames long, more than RETURNN's "
                f"int32 sequence lengths hold ({MAX_SEQ_LENGTH:,}){source}; the file is damaged or "
                "crafted; fix it, or remove it from the list"
            )
    return lengths


def _read_one(args: Tuple[str, str, float, Optional[str]]) -> Union[int, np.ndarray]:
    """The sequence lengths of one cost leaf, by its format (its name's extension); an arrow shard read
    without a length column gives only its number of rows (an int). A file that cannot be read is a
    ValueError naming it: in a list of 100k files, the library's own message would not say which."""
    path, stream, frame_rate, length_column = args
    try:
        if path.endswith(".arrow"):
            rows = read_arrow_seq_lengths(path, length_column=length_column)
            return _check_num_seqs(path, rows) if isinstance(rows, int) else _check_lengths(path, rows)
        if path.endswith(".zip"):
            return _check_lengths(
                path,
                read_oggzip_seq_lengths(path, frame_rate=frame_rate),
                source=f" (its manifest's duration times the frame rate {frame_rate:g})",
            )
        return _check_lengths(path, read_hdf_seq_lengths(path, stream=stream))
    except ImportError:
        raise
    except Exception as exc:  # noqa: BLE001 -- h5py, zipfile, pyarrow: whatever a damaged file raises
        if isinstance(exc, ValueError) and short_repr(path) in str(exc):
            raise  # names the file already
        kind = (
            "an arrow shard"
            if path.endswith(".arrow")
            else "an OggZip zip"
            if path.endswith(".zip")
            else "a RETURNN HDF file"
        )
        raise ValueError(
            f"{short_repr(path)} cannot be read as {kind} ({type(exc).__name__}: "
            f"{short_repr(str(exc), limit=200)}): it is damaged or of another format; fix it, or remove it "
            "from the list"
        ) from None


#: Seconds between a helper's looks at whether its parent still runs.
_PARENT_POLL_S = 0.2


def _check_total_frames(num_frames: np.ndarray, cost_paths: Sequence[str]) -> None:
    """ValueError naming the largest entry if the entries' frames sum beyond int64 (each is below it)."""
    if not len(num_frames) or int(num_frames.max()) <= _INT64_MAX // len(num_frames):
        return
    total = sum(int(x) for x in num_frames)
    if total > _INT64_MAX:
        largest = int(np.argmax(num_frames))
        raise ValueError(
            f"the {len(num_frames):,} entries sum to {total:,} frames, more than int64 holds; a file "
            f"holds lengths no corpus has (the largest entry: {short_repr(cost_paths[largest])}, "
            f"{int(num_frames[largest]):,} frames); fix it, or remove it from the list"
        )


def _exit_with_parent(parent_pid: int) -> None:
    """In a helper process: end it (``os._exit``) once its parent ``parent_pid`` is gone (it is then re-parented),
    from a daemon thread that looks every :data:`_PARENT_POLL_S` seconds, whatever the helper is reading."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _read_chunk(items: Sequence[Tuple[str, str, float, Optional[str]]]) -> List[Union[int, np.ndarray]]:
    return [_read_one(x) for x in items]


def sorted_length_quantiles(lengths: np.ndarray) -> np.ndarray:
    """:func:`length_quantiles` of the lengths themselves, in memory O(sequences) (a bincount would take
    memory O(the longest sequence)).

    >>> sorted_length_quantiles(np.array([3, 1, 3, 1]))[[0, 128, 129, 256]].tolist()
    [1, 1, 3, 3]
    >>> sorted_length_quantiles(np.array([2**31 - 1]))[[0, 256]].tolist()
    [2147483647, 2147483647]
    """
    lengths = np.sort(np.asarray(lengths, dtype=np.int64))
    n = len(lengths)
    if n == 0:
        return np.zeros(NUM_LENGTH_QUANTILES, dtype=np.int64)
    targets = np.maximum(1, np.ceil(np.linspace(0.0, 1.0, NUM_LENGTH_QUANTILES) * n)).astype(np.int64)
    return lengths[targets - 1]


def length_quantiles(counts: np.ndarray) -> np.ndarray:
    """Quantiles 0, 1/256, ..., 1 of a length distribution given as a bincount (``counts[l]``: sequences
    of length l): for each q the smallest length with at least ``q * n`` sequences at or below it.

    >>> length_quantiles(np.array([0, 2, 0, 2]))[[0, 128, 129, 256]].tolist()
    [1, 1, 3, 3]
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    if n == 0:
        return np.zeros(NUM_LENGTH_QUANTILES, dtype=np.int64)
    cum = np.cumsum(counts)
    targets = np.maximum(1, np.ceil(np.linspace(0.0, 1.0, NUM_LENGTH_QUANTILES) * n)).astype(np.int64)
    return np.searchsorted(cum, targets, side="left").astype(np.int64)


def collect_file_costs(
    trees: Sequence[FileTree],
    *,
    unit: str = "frames",
    leaf: Union[None, int, str] = None,
    stream: str = "data",
    frame_rate: float = DEFAULT_FRAME_RATE,
    num_procs: Optional[int] = None,
    progress_interval: float = 5.0,
    batching: Optional[Batching] = None,
    length_column: Optional[str] = None,
) -> FileCosts:
    """Frames, sequences or expected steps per entry of a file list, read from the ``seqLengths`` of its
    RETURNN HDF files (one read of a small dataset per file, no features), the manifests of its
    ``OggZipDataset`` zips (``.zip``: durations times ``frame_rate``) or its HuggingFace/arrow shards
    (``.arrow``: rows, and the length column's values; :func:`read_arrow_seq_lengths`), in list order with
    the entries' keys.

    Every leaf is stat-ed first with the stat engine (:func:`collect_file_sizes`: missing files are
    listed at once, and the entries' modification times recorded). Then the cost leaf of each entry
    (:func:`cost_leaf`) is read once, in ``num_procs`` helper processes for a list of more than 4000 files.

    :param unit: "frames" (of ``stream``), "seqs", or "steps": per file the expected steps of its sequences
        under ``batching`` in milli-steps (``core.pure.batching.file_millisteps``, from the file's own lengths)
    :param leaf: which leaf of a multimodal tree defines the cost (see :func:`cost_leaf`)
    :param stream: the HDF stream whose lengths count (``"data"``, or a target key such as ``"classes"``)
    :param frame_rate: OggZip only: feature frames per second of the manifest's durations
    :param num_procs: processes reading the files (default: usable CPUs, at most 8; 1: only this one)
    :param batching: unit "steps" only (and there required): RETURNN's batch_size (frames) and max_seqs
    :param length_column: arrow shards: the column holding each row's length (an int column, or a list
        column whose lengths count); needed for frames and steps. Without it a shard's sequences are its
        rows and its frames unknown (0 in the archive, and no loss can be predicted from it)
    :raises ValueError: for an unknown unit, arrow shards without a length column for frames or steps,
        batching without unit "steps" or the reverse, a tree without a cost leaf, or a file without the stream
    :raises MissingFilesError: as :func:`collect_file_sizes`
    """
    if unit not in COST_UNITS:
        raise ValueError(
            f"unit={unit!r} cannot be read from the files; use one of {COST_UNITS} (bytes: the "
            "sizes, `python -m i6_shard sizes` / ComputeFileSizesJob)"
        )
    if batching is not None and not isinstance(batching, Batching):
        raise TypeError(f"batching={batching!r} must be a core.pure.batching.Batching")
    check_batching_for_unit(unit, batching)
    if num_procs is not None and (not isinstance(num_procs, int) or isinstance(num_procs, bool) or num_procs < 1):
        raise ValueError(f"num_procs={num_procs!r} must be a positive int")
    # The options are checked before any file is stat-ed or read.
    check_frame_rate(frame_rate)
    if length_column is not None and (not isinstance(length_column, str) or not length_column):
        raise ValueError(f"length_column={length_column!r} must name a column of the arrow shards, or be None")
    _, keys = _leaves_and_keys(trees)
    cost_paths = [cost_leaf(t, leaf=leaf) for t in trees]
    unique = list(dict.fromkeys(cost_paths))
    if unit != "seqs" and length_column is None and any(p.endswith(".arrow") for p in unique):
        raise ValueError(
            f"unit={unit!r} needs each arrow shard's sequence lengths: name its length column "
            "(length_column=..., `costs --length-column NAME`: an int column or a list column), or "
            "balance by seqs (the rows)"
        )
    sizes = collect_file_sizes(trees, progress_interval=progress_interval)  # existence, readability, mtimes
    num_procs = default_num_procs(_DEFAULT_MAX_PROCS) if num_procs is None else num_procs
    progress = Progress("file costs", total=len(unique), interval=progress_interval)
    lengths: List[np.ndarray] = []
    items = [(p, stream, float(frame_rate), length_column) for p in unique]
    if num_procs == 1 or len(unique) <= _SERIAL_MAX_FILES:
        for item in items:
            lengths.append(_read_one(item))
            progress.add(1)
    else:
        chunks = [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]
        # spawned, so that this process is each helper's parent (a forkserver would be): a helper ends as soon as
        # it sees that parent gone, mid-chunk too, so a killed costs pass leaves no helper reading on
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=num_procs, mp_context=ctx, initializer=_exit_with_parent, initargs=(os.getpid(),)
        ) as pool:
            for part in pool.map(_read_chunk, chunks):
                lengths.extend(part)
                progress.add(len(part))
    progress.close()
    index = dict(zip(unique, range(len(unique))))
    per_file = [lengths[index[p]] for p in cost_paths]
    known = [x for x in lengths if not isinstance(x, int)]  # an int: the rows of an arrow shard, lengths unknown
    num_seqs = np.fromiter((x if isinstance(x, int) else len(x) for x in per_file), dtype=np.int64, count=len(per_file))
    num_frames = np.fromiter(
        (0 if isinstance(x, int) else int(x.sum()) for x in per_file), dtype=np.int64, count=len(per_file)
    )
    bad = next((p for p, x in zip(unique, lengths) if not isinstance(x, int) and len(x) and int(x.min()) < 0), None)
    if bad is not None:
        raise ValueError(
            f"{short_repr(bad)} has negative sequence lengths (seqLengths, or the length column); it is corrupt"
        )
    _check_total_frames(num_frames, cost_paths)  # sequences cannot wrap: at most 2**32 per file
    if unit == "steps":
        check_useful_batching(per_file, batching)
        costs = file_millisteps(per_file, batching)
    else:
        costs = (num_frames if unit == "frames" else num_seqs).copy()
    all_known = all(not isinstance(x, int) for x in per_file)
    seq_lengths = (
        (np.concatenate(per_file).astype(np.int32) if per_file else np.zeros(0, dtype=np.int32)) if all_known else None
    )
    return FileCosts(
        keys=keys,
        costs=costs,
        unit=unit,
        num_seqs=num_seqs,
        num_frames=num_frames,
        seq_lengths=seq_lengths,
        seq_length_quantiles=sorted_length_quantiles(np.concatenate(known) if known else np.zeros(0, dtype=np.int64)),
        mtimes=sizes.mtimes,
        batching=batching,
    )


def save_file_costs(costs: FileCosts, path: str | os.PathLike) -> None:
    """Store costs as a deterministic ``.npz`` (atomically): a file sizes archive of format 3, whose
    ``sizes`` hold the costs, plus ``unit_utf8`` (the unit, UTF-8), ``num_seqs``, ``num_frames`` (int64
    per entry) and ``seq_length_quantiles`` (int64 [257]); in steps also ``steps_batching`` (int64
    [batch_size, max_seqs], 0: no limit). ``load_file_sizes`` reads it as sizes in
    that unit, so everything that takes a sizes archive takes it.

    :raises ValueError: if ``path`` does not end in ``.npz`` or a cost is negative
    """
    arrays = {
        name: np.asarray(getattr(costs, name), dtype=np.int64)
        for name in ("num_seqs", "num_frames", "seq_length_quantiles")
    }
    values = np.asarray(costs.costs, dtype=np.int64)
    for name, arr in (("costs", values), *arrays.items()):
        bad = first_negative(arr)
        if bad is not None:
            raise ValueError(f"{name} must be >= 0, but entry {bad} is {int(arr[bad])}; nothing was written")
    mtimes = costs.mtimes if costs.mtimes is not None else np.zeros(len(costs), dtype=np.int64)
    arrays.update(
        {
            "format_version": np.array(FILE_COSTS_FORMAT_VERSION, dtype=np.int64),
            "keys_utf8": encode_keys(costs.keys),
            "sizes": values,
            "mtimes_ns": np.asarray(mtimes, dtype=np.int64),
            "unit_utf8": np.frombuffer(costs.unit.encode("utf-8"), dtype=np.uint8),
        }
    )
    if costs.batching is not None:
        arrays[STEPS_BATCHING_ARRAY] = np.array(
            [costs.batching.batch_size or 0, costs.batching.max_seqs or 0], dtype=np.int64
        )
    if costs.seq_lengths is not None:
        arrays[SEQ_LENGTHS_ARRAY] = np.asarray(costs.seq_lengths, dtype=np.int32)
    save_npz(path, arrays, kind="file costs archive")


def load_file_costs(path: str | os.PathLike) -> FileCosts:
    """Load what :func:`save_file_costs` wrote.

    :raises ValueError: for a sizes archive in bytes (it has no lengths: compute costs with `costs`), or a
        corrupt archive
    """
    path = os.fspath(path)
    sizes = _read_file_sizes(path)  # every check of the common arrays
    if sizes.unit == "bytes":
        raise ValueError(
            f"{path!r} holds sizes in bytes, without sequence lengths; compute the costs with "
            "`python -m i6_shard costs` or ComputeFileCostsJob"
        )
    n = len(sizes)
    with open_npz(path, kind="file costs archive") as npz:
        headers = npz.headers
        for name in COSTS_ARRAYS[1:]:
            want = (NUM_LENGTH_QUANTILES,) if name == "seq_length_quantiles" else (n,)
            if headers[name].dtype != np.int64 or tuple(headers[name].shape) != want:
                raise ValueError(
                    f"{path!r} is corrupt: {name} is {headers[name].dtype}{list(headers[name].shape)}, "
                    f"expected int64{list(want)}"
                )
        extra = {name: npz.read(name) for name in COSTS_ARRAYS[1:]}
        batching = None
        if sizes.unit == "steps":
            h = headers[STEPS_BATCHING_ARRAY]
            if h.dtype != np.int64 or tuple(h.shape) != (2,):
                raise ValueError(
                    f"{path!r} is corrupt: {STEPS_BATCHING_ARRAY} is {h.dtype}{list(h.shape)}, expected int64[2]"
                )
            limits = [int(x) for x in npz.read(STEPS_BATCHING_ARRAY)]
            try:
                batching = Batching(batch_size=limits[0] or None, max_seqs=limits[1] or None)
            except ValueError as exc:
                raise ValueError(f"{path!r} is corrupt: {STEPS_BATCHING_ARRAY} {limits}: {exc}") from None
        extra[SEQ_LENGTHS_ARRAY] = (
            _read_seq_lengths(npz, path, num_seqs=extra["num_seqs"]) if SEQ_LENGTHS_ARRAY in headers else None
        )
    for name, arr in extra.items():
        if arr is not None and first_negative(arr) is not None:
            raise ValueError(f"{path!r} is corrupt: {name} has negative entries")
    costs = FileCosts(
        keys=sizes.keys, costs=sizes.sizes, unit=sizes.unit, mtimes=sizes.mtimes, batching=batching, **extra
    )
    check_costs_consistency(costs, path=path)
    return costs


def _read_seq_lengths(npz, path: str, *, num_seqs: np.ndarray) -> np.ndarray:
    """The archive's ``seq_lengths``, checked against ``num_seqs`` before it is inflated."""
    h = npz.headers[SEQ_LENGTHS_ARRAY]
    expected = sum(int(x) for x in num_seqs)
    if h.dtype != np.int32 or tuple(h.shape) != (expected,):
        raise ValueError(
            f"{path!r} is corrupt: {SEQ_LENGTHS_ARRAY} is {h.dtype}{list(h.shape)}, expected "
            f"int32[{expected}] (the sum of num_seqs)"
        )
    return npz.read(SEQ_LENGTHS_ARRAY)

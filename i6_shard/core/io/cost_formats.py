"""The format readers of a costs pass: every sequence's length in frames from a RETURNN HDF file's
``seqLengths`` (as ``HDFDataset.add_file`` reads it), an ``OggZipDataset`` zip's manifest, or a
HuggingFace/arrow shard's metadata and length column, with no features read; which leaf of a file tree is
read (:func:`cost_leaf`); and the bounds a damaged or crafted file is refused by."""

from __future__ import annotations

import math
import os
from typing import List, Optional, Tuple, Union

import numpy as np

from ..pure.file_tree import FileTree, flatten
from ..pure.text import short_repr
from .npz import inflation_problem

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


#: Feature frames per second assumed for OggZip manifests' durations (RETURNN's default step_len 10 ms).
DEFAULT_FRAME_RATE = 100.0


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
    return read_hdf_lengths(path, stream=stream)[:, 0].copy()


def read_hdf_lengths(path: str, *, stream: str = "data") -> np.ndarray:
    """Every sequence's frames in ``stream`` and the length RETURNN's torch engine batches and length-filters it by:
    the longest of the data keys an ``HDFDataset`` of the file yields (``get_data_keys``: ``"data"`` if the file has
    ``inputs``, and its target keys if it has ``targets``; the dummy ``"classes"`` column of a file without
    ``targets`` is not yielded), from ``seqLengths`` alone.

    :return: int64, shape [num_seqs, 2]: column 0 ``stream``'s frames, column 1 the batching length (at least them)
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
        names = hdf_stream_names(f)
        yielded = [i for i, name in enumerate(names) if name != "classes" or "targets" in f]
    lengths = lengths.astype(np.int64)
    if lengths.ndim == 1:  # old files: one column that every stream shares
        lengths = np.repeat(lengths[:, None], len(names), axis=1)
    if lengths.ndim != 2 or lengths.shape[1] != len(names):
        raise ValueError(f"{short_repr(path)}: seqLengths has shape {list(lengths.shape)} for the streams {names}")
    if stream not in names:
        raise ValueError(
            f"{short_repr(path)} has no stream {stream!r}; its streams are {names}: pass one of them as the cost stream"
        )
    cost = lengths[:, names.index(stream)]
    return np.stack([cost, np.max(lengths[:, yielded + [names.index(stream)]], axis=1)], axis=1)


def read_oggzip_seq_lengths(path: str, *, frame_rate: float = DEFAULT_FRAME_RATE) -> np.ndarray:
    """Frames of every sequence of an ``OggZipDataset`` zip from its manifest alone (``<name>.txt`` in the
    zip, ``name`` the zip's base name, parsed as RETURNN parses it): ``round(duration * frame_rate)``.
    The manifest's durations need not match the audio (RETURNN uses them only to sort), so the frames
    are as good as they are; the number of sequences is exact.

    :param frame_rate: feature frames per second (RETURNN's audio default ``step_len=0.01``: 100)
    :return: int64, shape [num_seqs]
    :raises ValueError: if the zip has no manifest or an entry no ``duration``
    """
    return read_oggzip_lengths(path, frame_rate=frame_rate)[:, 0].copy()


def read_oggzip_lengths(path: str, *, frame_rate: float = DEFAULT_FRAME_RATE) -> np.ndarray:
    """:func:`read_oggzip_seq_lengths` beside the longer of them and each entry's ``text`` in UTF-8 bytes (the
    ``"orth"`` key ``OggZipDataset`` always yields): the batching length as far as the manifest knows it (the
    targets' ``"classes"`` depend on the vocabulary, the features' frames on the audio).

    :return: int64, shape [num_seqs, 2]
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
    frames = np.rint(durations * frame_rate).astype(np.int64)
    orth = np.fromiter(
        (len(e["text"].encode("utf-8")) if isinstance(e.get("text"), str) else 0 for e in entries),
        dtype=np.int64,
        count=len(entries),
    )
    return np.stack([frames, np.maximum(frames, orth)], axis=1)


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
        longest = lengths if lengths.ndim == 1 else lengths.max(axis=1)
        i = int(np.argmax(longest))
        if int(longest[i]) > MAX_SEQ_LENGTH:
            raise ValueError(
                f"{short_repr(path)}: sequence {i} is {int(longest[i]):,} frames long, more than RETURNN's "
                f"int32 sequence lengths hold ({MAX_SEQ_LENGTH:,}){source}; the file is damaged or "
                "crafted; fix it, or remove it from the list"
            )
    return lengths


def _read_one(args: Tuple[str, str, float, Optional[str]]) -> Union[int, np.ndarray]:
    """The sequence lengths of one cost leaf, by its format (its name's extension): an HDF file's and an OggZip
    manifest's as int64 [num_seqs, 2] (the cost stream's, the batching length: :func:`read_hdf_lengths`,
    :func:`read_oggzip_lengths`), an arrow shard's [num_seqs], or read without a length column its rows (an int). A file that cannot be read is a
    ValueError naming it: in a list of 100k files, the library's own message would not say which."""
    path, stream, frame_rate, length_column = args
    try:
        if path.endswith(".arrow"):
            rows = read_arrow_seq_lengths(path, length_column=length_column)
            return _check_num_seqs(path, rows) if isinstance(rows, int) else _check_lengths(path, rows)
        if path.endswith(".zip"):
            return _check_lengths(
                path,
                read_oggzip_lengths(path, frame_rate=frame_rate),
                source=f" (its manifest's duration times the frame rate {frame_rate:g}, or its text's bytes)",
            )
        return _check_lengths(path, read_hdf_lengths(path, stream=stream))
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

"""Re-chunk a RETURNN HDF corpus: stream its sequences, whole and in order, into files of even size (frames or
sequences), each with every stream RETURNN's ``HDFDataset`` reads; the set of files appears at once or not at all."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import flatten
from ..pure.rechunk import check_rechunk_args, cut_even, num_files_for
from .atomic import atomic_dir, check_output_dir
from .file_list import write_file_list
from .progress import Progress

__all__ = ["rechunk_hdf_corpus"]

MISSING_H5PY_FOR_RECHUNK = (
    "h5py is not installed, so no HDF files can be re-chunked: pip install h5py (or pip install 'i6_shard[demo]')"
)
#: What a re-chunk writes into its output directory, as one set: the list (``files.txt``, or ``files.json`` for
#: file trees) and the HDF files in ``data/``.
RECHUNK_OUTPUTS = ("files.txt", "files.json", "data/")
#: Datasets stored once per file (not per sequence): copied from the first file, and the same in every file.
_PER_SEQ = ("seqLengths", "seqTags", "inputs", "targets/data", "times")


@dataclass(frozen=True)
class RechunkResult:
    """What a re-chunk wrote: the file trees of the new list (in its order), the cost of each file (in the unit),
    the number of sequences, the list's path, and the largest file as a share of a rank's share of a sub-epoch."""

    trees: List[Any]
    costs: np.ndarray
    num_seqs: int
    list_path: str
    max_share: float


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError(MISSING_H5PY_FOR_RECHUNK) from None
    return h5py


def _streams(f: Any) -> List[Tuple[str, int]]:
    """The per-sequence streams of an open HDF file as ``HDFDataset.add_file`` reads them: ``(dataset name, column
    of seqLengths)``; ``inputs`` is column 0, ``targets/data/<key>`` follow in sorted key order (its target_keys)."""
    out = [("inputs", 0)] if "inputs" in f else []
    if "targets" in f:
        keys = sorted(set(f["targets/data"].keys()) | set(f["targets/size"].attrs.keys()))
        out += [(f"targets/data/{k}", len(out) + i) for i, k in enumerate(keys) if k in f["targets/data"]]
    return out


def _layout(f: Any, path: str) -> Tuple[Any, ...]:
    """What must agree between the files for their sequences to share an output file: each stream's name, column,
    dtype and shape after the time axis, and the width of seqLengths."""
    if "seqLengths" not in f or "seqTags" not in f:
        raise ValueError(f"{path!r} has no seqLengths or seqTags dataset; it is not a RETURNN HDF file")
    lengths = f["seqLengths"]
    width = lengths.shape[1] if lengths.ndim == 2 else 1
    return (width, tuple((n, c, str(f[n].dtype), tuple(f[n].shape[1:])) for n, c in _streams(f)))


@dataclass
class _Leaf:
    """One input file: its path, seqLengths as [num_seqs, width] and the start of each sequence in every column."""

    path: str
    lengths: np.ndarray
    starts: np.ndarray
    tags_dtype: Any


def _read_leaf(h5py: Any, path: str, *, want_tags: bool) -> Tuple[_Leaf, Tuple[Any, ...], Optional[np.ndarray]]:
    with h5py.File(path, "r") as f:
        layout = _layout(f, path)
        lengths = np.asarray(f["seqLengths"][...], dtype=np.int64)
        tags = f["seqTags"][...] if want_tags else None
        tags_dtype = f["seqTags"].dtype
    if lengths.ndim == 1:
        lengths = lengths[:, None]
    starts = np.zeros((lengths.shape[0] + 1, lengths.shape[1]), dtype=np.int64)
    np.cumsum(lengths, axis=0, out=starts[1:])
    return _Leaf(path, lengths, starts, tags_dtype), layout, tags


def _check_same_layout(layouts: List[Tuple[Any, ...]], paths: List[str], what: str) -> None:
    bad = [p for p, lay in zip(paths, layouts) if lay != layouts[0]]
    if bad:
        raise ValueError(
            f"{len(bad)} {what} file(s) hold other streams than {paths[0]!r} (first: {bad[0]!r}: "
            f"{layouts[paths.index(bad[0])]} against {layouts[0]}); re-chunk only files written alike, "
            "or re-chunk each kind on its own"
        )


def _read_leaves(h5py: Any, columns: List[List[str]], progress: Optional[Progress]) -> List[List[_Leaf]]:
    """Every leaf position's files (``columns[j][i]``: leaf j of tree i), checked: one layout per leaf position,
    and every leaf of a tree holding the same tags in the same order as its first leaf."""
    out = []
    first_tags: List[np.ndarray] = []
    for j, paths in enumerate(columns):
        leaves, layouts = [], []
        for i, path in enumerate(paths):
            leaf, layout, tags = _read_leaf(h5py, path, want_tags=len(columns) > 1)
            if tags is not None and j == 0:
                first_tags.append(tags)
            elif tags is not None and (tags.shape != first_tags[i].shape or not np.array_equal(tags, first_tags[i])):
                raise ValueError(
                    f"{path!r} does not hold the same sequence tags in the same order as {columns[0][i]!r}, the "
                    "first file of its file tree; re-chunk keeps a tree's files aligned by tag, so give trees whose "
                    "files hold the same sequences in the same order (or re-chunk each leaf's files on its own)"
                )
            leaves.append(leaf)
            layouts.append(layout)
            if progress is not None and j == 0:
                progress.add(1)
        _check_same_layout(layouts, paths, what=f"leaf {j}" if len(columns) > 1 else "input")
        out.append(leaves)
    return out


def _segments(leaves: List[_Leaf], lo: int, hi: int, file_starts: np.ndarray) -> List[Tuple[int, int, int]]:
    """``(input file, first seq, end seq)`` runs that make up global sequences ``lo:hi``."""
    out = []
    i = int(np.searchsorted(file_starts, lo, side="right")) - 1
    while lo < hi:
        while file_starts[i + 1] <= lo:
            i += 1
        end = min(hi, int(file_starts[i + 1]))
        out.append((i, lo - int(file_starts[i]), end - int(file_starts[i])))
        lo = end
    return out


def _tags_dtype(h5py: Any, leaves: List[_Leaf]) -> Any:
    """The inputs' dtype of ``seqTags`` where they share one, else variable-length str (no tag is cut short)."""
    dtypes = {leaf.tags_dtype for leaf in leaves}
    return dtypes.pop() if len(dtypes) == 1 else h5py.special_dtype(vlen=str)


class _OpenFiles:
    """The input files open for reading, at most ``keep`` at a time (they are read in order: the last few suffice)."""

    def __init__(self, h5py: Any, keep: int = 4):
        self._h5py = h5py
        self._keep = keep
        self._open: Dict[str, Any] = {}

    def get(self, path: str) -> Any:
        f = self._open.pop(path, None) or self._h5py.File(path, "r")
        self._open[path] = f  # the most recently used last
        while len(self._open) > self._keep:
            self._open.pop(next(iter(self._open))).close()
        return f

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()


def _write_part(
    h5py: Any, path: str, leaves: List[_Leaf], segments: List[Tuple[int, int, int]], tags_dtype, files: _OpenFiles
) -> None:
    """One output file: the header of the first input, then every stream's rows of ``segments`` in order. Built in
    memory (as :func:`~.hdf_corpus.write_hdf_corpus` does) and written by Python."""
    rows = np.concatenate([leaves[i].lengths[a:b] for i, a, b in segments])
    out = h5py.File(f"{path}.mem", "w", driver="core", backing_store=False)
    try:
        head = files.get(leaves[segments[0][0]].path)
        _copy_header(head, out)
        streams = [(n, c, head[n].dtype, head[n].shape[1:]) for n, c in _streams(head)]
        out.create_dataset("seqLengths", data=rows.astype(np.int32))
        tags = out.create_dataset("seqTags", (rows.shape[0],), dtype=tags_dtype)
        data = {n: out.create_dataset(n, (int(rows[:, c].sum()),) + tuple(s), dtype=d) for n, c, d, s in streams}
        _fill(files, leaves, segments, tags, data, [(n, c) for n, c, _, _ in streams])
        out.attrs["numSeqs"] = int(rows.shape[0])
        out.attrs["numTimesteps"] = int(rows[:, 0].sum())
        out.flush()
        image = out.id.get_file_image()
    finally:
        out.close()
    with open(path, "wb") as f:
        f.write(image)


def _copy_header(head: Any, out: Any) -> None:
    """Everything of ``head`` that is not per sequence: file attributes, ``labels``, ``targets/labels``,
    ``targets/size`` and its attributes (the dims), empty ``targets/data`` group."""
    for k, v in head.attrs.items():
        out.attrs[k] = v
    for name in head:
        if name not in _PER_SEQ and name != "targets":
            head.copy(head[name], out, name=name)
    if "targets" in head:
        group = out.create_group("targets")
        for k, v in head["targets"].attrs.items():
            group.attrs[k] = v
        for name in head["targets"]:
            if name != "data":
                head.copy(head["targets"][name], group, name=name)
        group.create_group("data")


def _fill(files: _OpenFiles, leaves: List[_Leaf], segments, tags, data: Dict[str, Any], streams) -> None:
    offsets = {n: 0 for n, _ in streams}
    seq_offset = 0
    for i, a, b in segments:
        leaf = leaves[i]
        f = files.get(leaf.path)
        tags[seq_offset : seq_offset + b - a] = f["seqTags"][a:b]
        for name, col in streams:
            lo, hi = int(leaf.starts[a, col]), int(leaf.starts[b, col])
            if hi > lo:
                data[name][offsets[name] : offsets[name] + hi - lo] = f[name][lo:hi]
            offsets[name] += hi - lo
        seq_offset += b - a


def _part_names(num_files: int, num_leaves: int) -> List[List[str]]:
    width = max(5, len(str(num_files - 1)))
    if num_leaves == 1:
        return [[f"part-{k:0{width}d}.hdf"] for k in range(num_files)]
    return [[f"part-{k:0{width}d}.leaf{j}.hdf" for j in range(num_leaves)] for k in range(num_files)]


def _list_name(trees: Sequence[Any], *, num_leaves: int, list_ext: Optional[str]) -> str:
    """``files.txt`` or ``files.json``: as ``list_ext`` asks, else ``.txt`` for a list of plain paths."""
    plain = num_leaves == 1 and all(isinstance(t, str) for t in trees)
    if list_ext not in (None, ".txt", ".json") or (list_ext == ".txt" and not plain):
        raise ValueError(f"list_ext={list_ext!r}: give '.json', '.txt' (a list of plain paths only) or None")
    return "files" + (list_ext or (".txt" if plain else ".json"))


def _write_parts(h5py: Any, tmp: str, columns: List[List[_Leaf]], *, bounds, file_starts, names, progress) -> None:
    """Every output file into ``tmp/data``: file k of leaf j holds global sequences ``bounds[k]:bounds[k+1]``."""
    os.mkdir(os.path.join(tmp, "data"))
    tags_dtypes = [_tags_dtype(h5py, leaves) for leaves in columns]
    files = _OpenFiles(h5py, keep=4 * len(columns))
    try:
        for k, row in enumerate(names):
            segments = _segments(columns[0], int(bounds[k]), int(bounds[k + 1]), file_starts)
            for j, name in enumerate(row):
                _write_part(h5py, os.path.join(tmp, "data", name), columns[j], segments, tags_dtypes[j], files)
            progress.add(int(bounds[k + 1] - bounds[k]))
    finally:
        files.close()


def _rebuild(tree: Any, leaves: List[str]) -> Any:
    """``tree`` with its leaves (in :func:`flatten` order, sorted dict keys) replaced by ``leaves``."""
    it = iter(leaves)

    def build(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: build(node[k]) for k in sorted(node)}
        if isinstance(node, (list, tuple)):
            return [build(x) for x in node]
        return next(it)

    return build(tree)


def rechunk_hdf_corpus(
    trees: Sequence[Any],
    out_dir: str,
    *,
    num_shards: int,
    partition_epoch: int,
    num_files: Optional[int] = None,
    unit: str = "frames",
    list_ext: Optional[str] = None,
    progress_interval: Optional[float] = None,
) -> RechunkResult:
    """Rewrite the HDF corpus ``trees`` (a file list: paths, or file trees of HDF files) into ``num_files`` files of
    even size in ``unit`` in ``out_dir`` (``data/part-NNNNN.hdf``, and ``files.txt``, or ``files.json`` for trees).

    The sequences keep their order (the list's, then each file's) and are cut into consecutive runs of even cost
    (:func:`~i6_shard.core.pure.rechunk.cut_even`), every sequence whole and once, with its tag, ``inputs``, every
    ``targets/data`` stream (sizes and strings too) and its ``seqLengths`` row; the header (attributes, labels,
    ``targets/size``) is the first input's. Trees of several files are cut alike by the first leaf's costs, and
    each leaf must hold the tags of its tree's first leaf in the same order. One output file is in memory at a
    time; the set is built in a temporary directory and swapped in whole (nothing partial after a failure).

    :param num_shards: the training's ranks and ``partition_epoch`` its sub-epochs per full epoch: a rank's share of a
        sub-epoch is ``total / (num_shards * partition_epoch)``
    :param num_files: the number of files; None: :func:`~i6_shard.core.pure.rechunk.num_files_for` (at least
        ``20 * num_shards * partition_epoch``, and enough that no file is above 5% of a rank's share, where the corpus
        has the sequences for it)
    :param list_ext: ".txt" or ".json", the list's format; None: ``files.txt`` for a list of paths, else ``.json``
    :param progress_interval: seconds between progress lines on stderr (None: the default interval)
    :raises ImportError: without h5py, with the install command
    :raises ValueError: for files that are not RETURNN HDF files, differ in their streams or misalign by tag, or
        for ``num_files`` outside ``1..num_seqs``
    """
    num_shards, partition_epoch, num_files, unit = check_rechunk_args(
        num_shards=num_shards, partition_epoch=partition_epoch, num_files=num_files, unit=unit
    )
    if not trees:
        raise ValueError("the file list is empty: give the HDF files to re-chunk")
    h5py = _h5py()
    check_output_dir(out_dir, names=RECHUNK_OUTPUTS, what="re-chunked corpus")  # before the work
    flat = [flatten(t) for t in trees]
    num_leaves = len(flat[0])
    if any(len(leaves) != num_leaves for leaves in flat):
        raise ValueError("the file trees have different numbers of files; re-chunk needs trees of one shape")
    list_name = _list_name(trees, num_leaves=num_leaves, list_ext=list_ext)
    reading = Progress("rechunk: read headers", total=len(trees), interval=progress_interval)
    columns = _read_leaves(h5py, [[leaves[j] for leaves in flat] for j in range(num_leaves)], reading)
    reading.close()
    first = columns[0]
    file_starts = np.concatenate([[0], np.cumsum([leaf.lengths.shape[0] for leaf in first])]).astype(np.int64)
    num_seqs = int(file_starts[-1])
    costs = np.concatenate([leaf.lengths[:, 0] for leaf in first]) if unit == "frames" else np.ones(num_seqs, np.int64)
    if num_files is None:
        num_files = num_files_for(costs, num_shards=num_shards, partition_epoch=partition_epoch)
    bounds = cut_even(costs, num_files=num_files)
    names = _part_names(num_files, num_leaves)
    final = os.path.realpath(out_dir)
    out_trees = [_rebuild(trees[0], [os.path.join(final, "data", n) for n in row]) for row in names]
    writing = Progress("rechunk: write", total=num_seqs, unit="seqs", interval=progress_interval)
    with atomic_dir(out_dir, names=RECHUNK_OUTPUTS, what="re-chunked corpus") as tmp:
        _write_parts(h5py, tmp, columns, bounds=bounds, file_starts=file_starts, names=names, progress=writing)
        write_file_list(out_trees, os.path.join(tmp, list_name))
    writing.close()
    file_costs = np.add.reduceat(costs, bounds[:-1]) if num_seqs else np.zeros(0, np.int64)
    share = max(1, int(costs.sum())) / (num_shards * partition_epoch)
    max_share = float(file_costs.max()) / share
    return RechunkResult(out_trees, file_costs.astype(np.int64), num_seqs, os.path.join(final, list_name), max_share)

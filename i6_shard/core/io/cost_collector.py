"""The costs pass: every cost leaf of a file list read once, in this process for a short list and in helper
processes (spawned, each ending as soon as its parent is gone) for a long one, with progress lines; the
result is a :class:`~i6_shard.core.pure.costs.FileCosts` in list order."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..pure.batching import Batching, check_batching_for_unit
from ..pure.costs import COST_UNITS, FileCosts, cost_arrays, sorted_length_quantiles
from ..pure.costs_consistency import check_frame_rate
from ..pure.file_tree import FileTree, flatten
from ..pure.text import short_repr
from .cost_formats import DEFAULT_FRAME_RATE, _read_one, cost_leaf
from .progress import Progress
from .stat_engine import _leaves_and_keys, collect_file_sizes, default_num_procs

#: Files up to which the costs are read in this process: a read takes ~0.5 ms (warm), a helper process
#: ~1 s to start and import h5py, so below this helpers cost more than they save.
_SERIAL_MAX_FILES = 4000


_CHUNK = 64


_DEFAULT_MAX_PROCS = 8


#: Seconds between a helper's looks at whether its parent still runs.
_PARENT_POLL_S = 0.2


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
    _check_options(
        unit=unit, batching=batching, num_procs=num_procs, frame_rate=frame_rate, length_column=length_column
    )
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
    items = [(p, stream, float(frame_rate), length_column) for p in unique]
    lengths = _read_leaves(items, num_procs=num_procs, progress_interval=progress_interval)
    bad = next((p for p, x in zip(unique, lengths) if not isinstance(x, int) and len(x) and int(x.min()) < 0), None)
    if bad is not None:
        raise ValueError(
            f"{short_repr(bad)} has negative sequence lengths (seqLengths, or the length column); it is corrupt"
        )
    index = dict(zip(unique, range(len(unique))))
    per_file = [lengths[index[p]] for p in cost_paths]
    # an int: the rows of an arrow shard, lengths unknown; else the cost stream's lengths in column 0
    known = [x if x.ndim == 1 else x[:, 0] for x in lengths if not isinstance(x, int)]
    return FileCosts(
        keys=keys,
        unit=unit,
        seq_length_quantiles=sorted_length_quantiles(np.concatenate(known) if known else np.zeros(0, dtype=np.int64)),
        mtimes=sizes.mtimes,
        batching=batching,
        batch_lengths=_batch_lengths_covered(trees, unique),
        **cost_arrays(per_file, unit=unit, batching=batching, names=cost_paths),
    )


def _batch_lengths_covered(trees: Sequence[FileTree], cost_paths: Sequence[str]) -> str:
    """What the batching lengths read from ``cost_paths`` cover (a key of ``BATCH_LENGTHS``): every data key of an
    HDFDataset over each entry's one HDF file (``"hdf"``); of its cost leaf only, where entries have other leaves
    (``"hdf_leaf"``); the manifests' durations and texts (``"oggzip"``); the arrow shards' length column
    (``"cost_stream"``). A list of several formats takes the least known."""
    if any(p.endswith(".arrow") for p in cost_paths):
        return "cost_stream"
    if any(p.endswith(".zip") for p in cost_paths):
        return "oggzip"
    return "hdf" if all(len(flatten(t)) == 1 for t in trees) else "hdf_leaf"


def _check_options(
    *,
    unit: str,
    batching: Optional[Batching],
    num_procs: Optional[int],
    frame_rate: float,
    length_column: Optional[str],
) -> None:
    """The options of :func:`collect_file_costs`, checked before any file is stat-ed or read."""
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
    check_frame_rate(frame_rate)
    if length_column is not None and (not isinstance(length_column, str) or not length_column):
        raise ValueError(f"length_column={length_column!r} must name a column of the arrow shards, or be None")


def _read_leaves(
    items: List[Tuple[str, str, float, Optional[str]]], *, num_procs: int, progress_interval: float
) -> List[Union[int, np.ndarray]]:
    """:func:`_read_one` of every item, in order: in this process, or in ``num_procs`` helper processes for more
    than :data:`_SERIAL_MAX_FILES` items, with progress lines."""
    progress = Progress("file costs", total=len(items), interval=progress_interval)
    lengths: List[Union[int, np.ndarray]] = []
    if num_procs == 1 or len(items) <= _SERIAL_MAX_FILES:
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
    return lengths

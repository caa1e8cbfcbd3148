"""Costs per file in what the training counts (frames, sequences or expected steps): :class:`FileCosts`, the
record a costs pass makes and the costs archive holds, and its maths: the pooled length quantiles, the frames
total, and the batching limits a prediction takes from costs in steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from .batching import Batching, batch_lengths_of, check_batching_for_unit, file_millisteps
from .costs_checks import check_useful_batching, check_useful_batching_of
from .settings import UNITS
from .text import short_repr

__all__ = ["COST_UNITS"]

#: The units read from the files (bytes come from the stat engine, file_sizes.py).
COST_UNITS = tuple(u for u in UNITS if u != "bytes")


#: Points of the pooled sequence length distribution a costs archive keeps (quantiles 0, 1/256, ..., 1).
NUM_LENGTH_QUANTILES = 257


_INT64_MAX = 2**63 - 1


#: What a costs archive knows of the length RETURNN's torch engine batches and length-filters each sequence by (the
#: longest of every data key the sub-epoch dataset yields: ``BatchingIterDataPipe``, ``LenFilterDataPipe``), by the
#: name ``FileCosts.batch_lengths`` holds: None where it knows that length, else what a simulation must assume.
BATCH_LENGTHS = {
    "hdf": None,
    "hdf_leaf": "the file trees' other leaves yield no data key longer than the cost leaf's longest HDF stream",
    "oggzip": (
        "the audio features ('data') have the manifest's duration times the frame rate frames and the targets "
        "('classes') are no longer than the longer of that and the text's UTF-8 bytes ('orth'), which the costs "
        "archive holds"
    ),
    "cost_stream": "no data key is longer than the cost stream (an arrow shard's: its length column)",
    "unknown": (
        "no data key is longer than the cost stream: the costs archive was written before the batching lengths "
        "were kept; compute the costs again to batch by the longest stream"
    ),
}


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
    :ivar seq_batch_lengths: int32, every sequence's length as the torch engine batches and length-filters it (the
        longest of the data keys the archive knows, :data:`BATCH_LENGTHS`), shape [num_seqs.sum()], each at least
        its ``seq_lengths``; None where equal to ``seq_lengths`` (kept only where some sequence differs)
    :ivar batch_lengths: what the batching lengths cover, a key of :data:`BATCH_LENGTHS`
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
    seq_batch_lengths: Optional[np.ndarray] = None
    batch_lengths: str = "unknown"

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
        if self.batch_lengths not in BATCH_LENGTHS:
            raise ValueError(f"batch_lengths={self.batch_lengths!r} is none of {sorted(BATCH_LENGTHS)}")
        if self.seq_batch_lengths is not None and np.shape(self.seq_batch_lengths) != np.shape(self.seq_lengths):
            raise ValueError(
                f"seq_batch_lengths has shape {np.shape(self.seq_batch_lengths)}, seq_lengths "
                f"{np.shape(self.seq_lengths)}; they must pair up"
            )

    def engine_lengths(self) -> Optional[List[np.ndarray]]:
        """Each entry's sequence lengths as the torch engine sees them, or None where they are not kept: the one
        accessor of the lengths that batch. Int64 shape [num_seqs] (the cost stream's) where the batching lengths
        equal them (not kept, or kept and equal), else [num_seqs, 2]: column 0 the cost stream's (frames counted,
        dropped, sorted by), column 1 the batching length (``seq_batch_lengths``); ``BatchingIterDataPipe`` and
        ``LenFilterDataPipe`` over these two keys do what they do over every data key, as the longest decides both.

        >>> c = FileCosts(keys=["a", "b"], costs=np.array([5, 2]), unit="frames", num_seqs=np.array([2, 1]),
        ...               num_frames=np.array([5, 2]), seq_length_quantiles=np.full(257, 2),
        ...               seq_lengths=np.array([3, 2, 2]), seq_batch_lengths=np.array([3, 4, 2]))
        >>> [x.tolist() for x in c.engine_lengths()]
        [[[3, 3], [2, 4]], [[2, 2]]]
        """
        if self.seq_lengths is None:
            return None
        x = np.asarray(self.seq_lengths, dtype=np.int64)
        # batching lengths stored though they equal the lengths batch as these: the same shape, so the same plan
        if self.seq_batch_lengths is not None and not np.array_equal(self.seq_batch_lengths, self.seq_lengths):
            x = np.stack([x, np.asarray(self.seq_batch_lengths, dtype=np.int64)], axis=1)
        return np.split(x, np.cumsum(np.asarray(self.num_seqs, dtype=np.int64))[:-1])

    @classmethod
    def concatenate(cls, parts: Sequence["FileCosts"], *, names: Sequence[str]) -> "FileCosts":
        """The costs of several archives (``names``, for the error) one after the other, as one list: the same unit,
        batching and batching lengths, each sequence's lengths where every part keeps them (the pooled quantiles then
        from them, else the parts' quantiles pooled as samples)."""
        first = parts[0]
        for part, name in zip(parts[1:], names[1:]):
            if (part.unit, part.batching, part.batch_lengths) != (first.unit, first.batching, first.batch_lengths):
                raise ValueError(
                    f"the costs archive {short_repr(name)} counts {part.unit!r} (batching {part.batching}, lengths "
                    f"{part.batch_lengths!r}), {short_repr(names[0])} {first.unit!r} ({first.batching}, "
                    f"{first.batch_lengths!r}): compute the corpora's costs alike"
                )
        known = all(p.seq_lengths is not None for p in parts)
        seq_lengths = np.concatenate([p.seq_lengths for p in parts]) if known else None
        batch = None
        if known and any(p.seq_batch_lengths is not None for p in parts):
            batch = np.concatenate(
                [p.seq_lengths if p.seq_batch_lengths is None else p.seq_batch_lengths for p in parts]
            )
        pooled = seq_lengths if known else np.concatenate([p.seq_length_quantiles for p in parts])
        mtimes = [p.mtimes for p in parts]
        return cls(
            keys=[k for p in parts for k in p.keys],
            costs=np.concatenate([p.costs for p in parts]),
            unit=first.unit,
            num_seqs=np.concatenate([p.num_seqs for p in parts]),
            num_frames=np.concatenate([p.num_frames for p in parts]),
            seq_length_quantiles=sorted_length_quantiles(pooled),
            mtimes=None if any(m is None for m in mtimes) else np.concatenate(mtimes),
            batching=first.batching,
            seq_lengths=seq_lengths,
            seq_batch_lengths=batch,
            batch_lengths=first.batch_lengths,
        )

    @property
    def batching_assumes(self) -> Optional[str]:
        """What a simulation from these lengths must assume of the data keys the archive does not know, or None."""
        return BATCH_LENGTHS[self.batch_lengths]

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


def cost_arrays(
    per_file: Sequence[Union[int, np.ndarray]], *, unit: str, batching: Optional[Batching], names: Sequence[str]
) -> Dict[str, Optional[np.ndarray]]:
    """The per-entry arrays of :class:`FileCosts` from each entry's sequence lengths (an int: only the number of
    its sequences is known, as for an arrow shard without a length column; shape [num_seqs, 2]: the cost stream's
    and the batching length of each, as :meth:`FileCosts.engine_lengths`): ``num_seqs``, ``num_frames`` (of the cost
    stream), ``costs`` in ``unit`` (steps: ``file_millisteps`` of the batching lengths under ``batching``),
    ``seq_lengths`` (int32, all entries' lengths in order; None unless every entry's are known) and
    ``seq_batch_lengths`` (int32, the batching lengths; None where they equal ``seq_lengths``).

    :param names: each entry's name, for the error
    :raises ValueError: if the frames sum beyond int64, naming the largest entry

    >>> {k: v.tolist() for k, v in cost_arrays([np.array([3, 4]), 2], unit="seqs", batching=None,
    ...                                        names=["a", "b"]).items() if v is not None}
    {'costs': [2, 2], 'num_seqs': [2, 2], 'num_frames': [7, 0]}
    >>> cost_arrays([np.array([[3, 5], [4, 4]])], unit="frames", batching=None, names=["a"])["seq_batch_lengths"]
    array([5, 4], dtype=int32)
    """
    cost = [x if isinstance(x, int) or x.ndim == 1 else x[:, 0] for x in per_file]
    num_seqs = np.fromiter((x if isinstance(x, int) else len(x) for x in cost), dtype=np.int64, count=len(per_file))
    num_frames = np.fromiter(
        (0 if isinstance(x, int) else int(x.sum()) for x in cost), dtype=np.int64, count=len(per_file)
    )
    _check_total_frames(num_frames, names)  # sequences cannot wrap: at most 2**32 per file
    batch = [x if isinstance(x, int) else batch_lengths_of(x) for x in per_file]
    if unit == "steps":
        check_useful_batching(batch, batching)
        costs = file_millisteps(batch, batching)
    else:
        costs = (num_frames if unit == "frames" else num_seqs).copy()
    out: Dict[str, Optional[np.ndarray]] = {"costs": costs, "num_seqs": num_seqs, "num_frames": num_frames}
    out["seq_lengths"] = out["seq_batch_lengths"] = None
    if all(not isinstance(x, int) for x in per_file):
        out["seq_lengths"] = np.concatenate(cost).astype(np.int32) if per_file else np.zeros(0, dtype=np.int32)
        if any(x.ndim == 2 and (x[:, 1] != x[:, 0]).any() for x in per_file):
            out["seq_batch_lengths"] = np.concatenate(batch).astype(np.int32)
    return out


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

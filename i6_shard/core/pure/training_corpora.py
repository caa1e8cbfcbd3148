"""What each corpus of a plan mixed by weight contributed to a training, from its logs: per sub-epoch the frames of
its files the ranks read (a file read several times per full epoch counts once per read), their share, and the share
the plan gave it; an alarm where they differ."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .fmt import json_float

#: Alarm where a corpus's share of a sub-epoch's frames differs from the plan's by more than this.
SHARE_TOLERANCE = 0.01


def expected_reads_by_key(plan: Any, *, full_epoch_0idx: int) -> Dict[str, int]:
    """How often the plan reads each file key in a full epoch (a plan of one list: once)."""
    return dict(zip(plan.keys, plan.reads(full_epoch_0idx=full_epoch_0idx).tolist()))


def corpora_contributions(
    plan: Any,
    *,
    epochs: Sequence[int],
    read_keys: Sequence[Sequence[Optional[Sequence[str]]]],
    consumed_frames: Sequence[Sequence[Optional[int]]],
    lengths: Mapping[str, Tuple[int, int]],
) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The train summary's ``corpora`` and its alarms.

    :param epochs: the report's sub-epochs (1-based)
    :param read_keys: ``[sub-epoch][rank]``: the file keys the rank was given (None where the log shows none)
    :param consumed_frames: ``[sub-epoch][rank]``: the frames it consumed (None where unknown)
    :param lengths: file key -> (sequences, frames)
    :return: per corpus ``name``, ``weight``, per sub-epoch ``frames_read`` (of the files given, once per read),
        ``share`` and ``planned_share`` (of the frames of all corpora given), ``consumed_frames`` (each rank's
        consumption split over the corpora by their share of the rank's files) and ``reads`` (file reads); and the
        alarms of shares off the plan by more than :data:`SHARE_TOLERANCE`
    """
    corpora = plan.corpora
    corpus_of = dict(zip(plan.keys, corpora.corpus_of().tolist()))
    n = corpora.num_corpora
    read = np.zeros((len(epochs), n), dtype=np.int64)
    planned = np.zeros((len(epochs), n), dtype=np.int64)
    consumed = np.zeros((len(epochs), n), dtype=np.float64)
    reads = np.zeros((len(epochs), n), dtype=np.int64)
    known = np.ones(len(epochs), dtype=bool)
    for i, epoch in enumerate(epochs):
        for r, keys in enumerate(read_keys[i]):
            if keys is None:
                known[i] = False
                continue
            frames = _corpus_frames(keys, corpus_of, lengths, n)
            read[i] += frames
            reads[i] += np.bincount([corpus_of.get(k, -1) for k in keys if k in corpus_of], minlength=n)
            done = consumed_frames[i][r] if r < len(consumed_frames[i]) else None
            if done is not None and frames.sum() > 0:
                consumed[i] += done * frames / frames.sum()
            if r < plan.num_shards:
                planned[i] += _corpus_frames(plan.files_for(epoch=epoch, shard_index=r), corpus_of, lengths, n)
    share, planned_share = _shares(read), _shares(planned)
    out = []
    for c, name in enumerate(corpora.names):
        out.append(
            {
                "name": name,
                "weight": str(corpora.record()["weights"][c]),
                "frames_read": [int(x) if k else None for x, k in zip(read[:, c].tolist(), known)],
                "reads": [int(x) if k else None for x, k in zip(reads[:, c].tolist(), known)],
                "consumed_frames": [int(round(x)) if k else None for x, k in zip(consumed[:, c].tolist(), known)],
                "share": [json_float(x) if k else None for x, k in zip(share[:, c].tolist(), known)],
                "planned_share": [json_float(x) for x in planned_share[:, c].tolist()],
            }
        )
    off = [
        (epochs[i], corpora.names[c], share[i, c], planned_share[i, c])
        for i in np.flatnonzero(known).tolist()
        for c in range(n)
        if abs(share[i, c] - planned_share[i, c]) > SHARE_TOLERANCE
    ]
    alarms = []
    if off:
        e, name, got, want = off[0]
        alarms.append(
            f"{len(off)} (sub-epoch, corpus) shares differ from the plan by more than {SHARE_TOLERANCE:.0%} (e.g. "
            f"sub-epoch {e}: corpus {name!r} {got:.1%} of the frames read, planned {want:.1%}): the training did not "
            "read the plan's files; give the dataset the plan (plan=) that was made from its corpora"
        )
    return out, alarms


def _corpus_frames(keys: Sequence[str], corpus_of: Mapping[str, int], lengths: Mapping[str, Tuple[int, int]], n: int):
    out = np.zeros(n, dtype=np.int64)
    for key in keys:
        c = corpus_of.get(key)
        if c is not None:
            out[c] += int(lengths.get(key, (0, 0))[1])
    return out


def _shares(frames: np.ndarray) -> np.ndarray:
    total = frames.sum(axis=1, keepdims=True)
    return np.divide(frames, total, out=np.zeros(frames.shape), where=total > 0)

"""Where a costs archive is made or loaded, its consistency (:mod:`~i6_shard.core.pure.costs_consistency`) is checked
and a failure names the archive, or the batching option, with the fix."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .batching import Batching, batch_lengths_of
from .costs_consistency import costs_consistency_problem, useful_batching_problem
from .text import short_repr


def check_costs_consistency(costs, *, path: str) -> None:
    """Refuse a loaded costs archive (a ``FileCosts``) whose arrays contradict each other, naming ``path``.

    :raises ValueError: with the first contradiction and the fix
    """
    problem = costs_consistency_problem(
        unit=costs.unit,
        costs=costs.costs,
        num_seqs=costs.num_seqs,
        num_frames=costs.num_frames,
        seq_lengths=costs.seq_lengths,
        seq_batch_lengths=costs.seq_batch_lengths,
        seq_length_quantiles=costs.seq_length_quantiles,
        batching=costs.batching,
        keys=costs.keys,
    )
    if problem is not None:
        raise ValueError(
            f"{short_repr(path)} contradicts itself: {problem}; it was changed, or written by an earlier version: compute the "
            "costs again (`python -m i6_shard costs`, ComputeFileCostsJob)"
        )


def check_useful_batching(per_file_lengths: Sequence[np.ndarray], batching: Batching) -> None:
    """Refuse batching limits under which the steps unit cannot count these files (see
    :func:`~i6_shard.core.pure.costs_consistency.useful_batching_problem`), naming the option and its largest useful
    value.

    :raises ValueError: e.g. for ``--batch-size 2**40`` on files of short sequences
    """
    problem = useful_batching_problem(per_file_lengths, batching)
    if problem is not None:
        raise ValueError(
            f"{problem} (the training's batching limits: --batch-size/--max-seqs, or batch_size/max_seqs of the "
            "job); give the training's own limits"
        )


def check_useful_batching_of(costs, batching) -> None:
    """:func:`check_useful_batching` for the files of a loaded costs archive (a ``FileCosts``), where it knows every
    sequence's length (the lengths they batch by); nothing to check without ``batching`` or lengths."""
    lengths = costs.engine_lengths()
    if batching is None or lengths is None:
        return
    check_useful_batching([batch_lengths_of(x) for x in lengths], batching)

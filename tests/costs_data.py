"""Costs archives in frames built from given per-sequence lengths, for tests that need exact lengths."""

import numpy as np

from i6_shard.core.io.file_costs import FileCosts
from i6_shard.core.pure.costs import sorted_length_quantiles


def frames_costs(keys, lengths) -> FileCosts:
    """A FileCosts in frames of the files ``keys``, whose sequences have ``lengths`` (one int array per file)."""
    num_seqs = np.array([len(x) for x in lengths], dtype=np.int64)
    frames = np.array([int(x.sum()) for x in lengths], dtype=np.int64)
    return FileCosts(
        keys=list(keys),
        costs=frames,
        unit="frames",
        num_seqs=num_seqs,
        num_frames=frames,
        seq_length_quantiles=sorted_length_quantiles(np.sort(np.concatenate(lengths))),
        seq_lengths=np.concatenate(lengths).astype(np.int32),
    )

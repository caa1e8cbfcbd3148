"""What distribution ``"equal_steps"`` (in the one table, :data:`~.cut.CUTS`) cuts with besides the costs: each
file's sequence lengths and the engine whose exact steps it equalizes, and the options of its cut for one full
epoch, the one rule a plan and the RETURNN-side dataset both take them from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

from .equal_steps import equalize_steps


@dataclass(frozen=True)
class EqualStepsInputs:
    """What ``"equal_steps"`` cuts with besides the costs: each file's sequence lengths (in the plan's key order)
    and the torch engine whose exact steps it equalizes (an :class:`~.engine_sim.EngineSettings`).

    :ivar progress: called with a line per sub-epoch equalized (the planning floor prints them), or None
    :ivar batching: the batching limits the engine was made of, as checked against the lengths (the planning floor
        takes them for the plan's outputs instead of checking them twice), or None
    """

    file_lengths: Sequence[np.ndarray]
    engine: Any
    progress: Optional[Callable[[str], None]] = None
    batching: Any = None


def equal_steps_options(
    inputs: EqualStepsInputs, *, order: np.ndarray, full_epoch_0idx: int, random_seed_offset: int
) -> Dict[str, Any]:
    """The options of ``"equal_steps"``'s cut (see :data:`CUTS`) for one full epoch whose files come in ``order``
    (indices into the key order of ``inputs.file_lengths``); ``random_seed_offset``: the sub-epoch datasets' (the
    DistributeFilesDataset's, the same on every rank of a sharded plan). The one rule the plan and the RETURNN-side
    dataset both take them from."""
    lengths = inputs.file_lengths
    return {
        "file_lengths": [lengths[i] for i in np.asarray(order).tolist()],
        "engine": inputs.engine,
        "full_epoch_0idx": int(full_epoch_0idx),
        "random_seed_offset": int(random_seed_offset),
        "progress": inputs.progress,
        "equalize": equalize_steps,
    }

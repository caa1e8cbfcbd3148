"""Costs per file in what the training counts (frames, sequences or expected steps) read from the files' metadata
(RETURNN HDF, OggZip manifests, HuggingFace/arrow shards), and the costs archive that ``plan --sizes``,
ShardPlanJob, the builder and the RETURNN-side dataset accept in place of a sizes archive; bytes stay the fallback
(file_sizes.py). One name for what lives in four modules: the record and its maths (``core/pure/costs.py``), the
format readers (``cost_formats.py``), the costs pass (``cost_collector.py``) and the archive (``cost_archive.py``).
"""

from ..pure.costs import (
    COST_UNITS,
    NUM_LENGTH_QUANTILES,  # noqa: F401 -- importable from here, as before
    FileCosts,
    length_quantiles,  # noqa: F401 -- importable from here, as before
    prediction_batching,
    sorted_length_quantiles,  # noqa: F401 -- importable from here, as before
)
from .cost_archive import load_file_costs, save_file_costs
from .cost_collector import collect_file_costs
from .cost_formats import (
    DEFAULT_FRAME_RATE,  # noqa: F401 -- importable from here, as before
    MAX_SEQ_LENGTH,  # noqa: F401 -- importable from here, as before
    MAX_SEQS_PER_FILE,  # noqa: F401 -- importable from here, as before
    MISSING_H5PY,
    MISSING_PYARROW,  # noqa: F401 -- importable from here, as before
    cost_leaf,
    hdf_stream_names,  # noqa: F401 -- importable from here, as before
    read_arrow_seq_lengths,  # noqa: F401 -- importable from here, as before
    read_hdf_seq_lengths,  # noqa: F401 -- importable from here, as before
    read_oggzip_seq_lengths,  # noqa: F401 -- importable from here, as before
)

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

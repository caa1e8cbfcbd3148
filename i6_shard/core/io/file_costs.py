"""Costs per file in what the training counts (frames, sequences or expected steps) read from the files' metadata
(RETURNN HDF, OggZip manifests, HuggingFace/arrow shards), and the costs archive that ``plan --sizes``,
ShardPlanJob, the builder and the RETURNN-side dataset accept in place of a sizes archive; bytes stay the fallback
(file_sizes.py). One name for what lives in four modules: the record and its maths (``core/pure/costs.py``), the
format readers (``cost_formats.py``), the costs pass (``cost_collector.py``) and the archive (``cost_archive.py``).
"""

from ..pure.costs import FileCosts, prediction_batching
from .cost_archive import load_file_costs, save_file_costs
from .cost_collector import collect_file_costs
from .cost_formats import cost_leaf

# Importable from here, as before:
from ..pure.costs import COST_UNITS, NUM_LENGTH_QUANTILES, length_quantiles, sorted_length_quantiles  # noqa: F401
from .cost_formats import DEFAULT_FRAME_RATE, MAX_SEQ_LENGTH, MAX_SEQS_PER_FILE, MISSING_H5PY, MISSING_PYARROW  # noqa: F401
from .cost_formats import hdf_stream_names, read_arrow_seq_lengths, read_hdf_seq_lengths  # noqa: F401
from .cost_formats import read_oggzip_seq_lengths  # noqa: F401

__all__ = ["cost_leaf", "collect_file_costs", "save_file_costs", "load_file_costs", "FileCosts", "prediction_batching"]

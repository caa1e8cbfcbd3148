"""The I/O part of the core: everything that touches files, processes or the terminal.

- file_sizes: the sizes archive; stat_engine: the stat engine (:func:`collect_file_sizes`); stat_child: its stat
  calls and helper script; stale_sizes: the start-up check that the sizes still hold;
- file_list: file lists read and written as RETURNN reads them (returnn_py: its ``.py`` parser);
- plan_file: the plan archive; npz: deterministic ``.npz``; atomic: atomic writes;
- progress: progress lines on stderr; demo: generated sparse files; hdf_corpus: a small real HDF corpus;
- returnn_log: RETURNN's training logs per rank; file_lengths: sequences and frames per file;
- file_costs: costs per file in frames or sequences and the costs archive.
"""

from .atomic import atomic_path, atomic_write, check_output_path
from .demo import lognormal_sizes, make_demo_files
from .hdf_corpus import write_hdf_corpus
from .file_list import FILE_LIST_EXTENSIONS, read_file_list, write_file_list
from .file_sizes import FileSizes, load_file_sizes, save_file_sizes
from .stat_engine import DEFAULT_NUM_THREADS, MissingFilesError, collect_file_sizes
from .stale_sizes import DEFAULT_CHECK_SAMPLES, StaleFileSizesError, check_sample_unchanged
from .plan_file import (
    PLAN_FORMAT_VERSION,
    PlanFile,
    PlanHead,
    load_plan,
    read_plan_file,
    read_plan_head,
    read_plan_layout,
    save_plan_arrays,
)
from .progress import Progress
from .file_costs import FileCosts, collect_file_costs, load_file_costs, save_file_costs
from .file_lengths import FileLengths, hdf_file_lengths, load_file_lengths, read_hdf_lengths, save_file_lengths
from .returnn_log import RankLog, SubEpochLog, TrainingLog, read_training_logs

__all__ = [
    "collect_file_sizes",
    "FileSizes",
    "MissingFilesError",
    "save_file_sizes",
    "load_file_sizes",
    "DEFAULT_NUM_THREADS",
    "check_sample_unchanged",
    "StaleFileSizesError",
    "DEFAULT_CHECK_SAMPLES",
    "read_file_list",
    "write_file_list",
    "FILE_LIST_EXTENSIONS",
    "save_plan_arrays",
    "load_plan",
    "read_plan_file",
    "PlanFile",
    "PLAN_FORMAT_VERSION",
    "PlanHead",
    "read_plan_head",
    "read_plan_layout",
    "atomic_write",
    "atomic_path",
    "check_output_path",
    "Progress",
    "lognormal_sizes",
    "make_demo_files",
    "write_hdf_corpus",
    "read_training_logs",
    "TrainingLog",
    "RankLog",
    "SubEpochLog",
    "FileCosts",
    "collect_file_costs",
    "load_file_costs",
    "save_file_costs",
    "FileLengths",
    "hdf_file_lengths",
    "read_hdf_lengths",
    "load_file_lengths",
    "save_file_lengths",
]

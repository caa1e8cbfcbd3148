"""The I/O part of the core: everything that touches files, processes or the terminal.

- file_sizes: the sizes archive; stat_engine: the stat engine (:func:`collect_file_sizes`); stat_child: its stat
  calls and helper script; stale_sizes: the start-up check that the sizes still hold;
- file_list: file lists read and written as RETURNN reads them (returnn_py: its ``.py`` parser);
- plan_file: the plan archive; npz: deterministic ``.npz``; atomic: atomic writes;
- progress: progress lines on stderr; demo: generated sparse files; hdf_corpus: a small real HDF corpus;
  rechunk_hdf: an HDF corpus rewritten into files of even size;
- returnn_log: RETURNN's training logs per rank; file_lengths: sequences and frames per file;
- file_costs: costs per file in frames or sequences and the costs archive.
"""

from .atomic import atomic_path, atomic_write, check_output_path
from .demo import lognormal_sizes
from .hdf_corpus import write_hdf_corpus
from .rechunk_hdf import rechunk_hdf_corpus
from .file_list import FILE_LIST_EXTENSIONS, read_file_list, write_file_list
from .file_sizes import FileSizes, save_file_sizes
from .cost_archive import load_file_sizes
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
from .progress import DEFAULT_INTERVAL as PROGRESS_INTERVAL, Progress
from .file_costs import FileCosts, collect_file_costs, load_file_costs, save_file_costs
from .file_lengths import FileLengths, hdf_file_lengths, load_file_lengths, read_hdf_lengths, save_file_lengths
from .returnn_log import RankLog, SubEpochLog, TrainingLog, read_training_logs

# What the layers above the core (jobs, returnn_config, returnn_ext, cli) use besides the names above.
from .atomic import atomic_dir, check_output_dir
from .dataset_files import files_kind, read_files
from .file_costs import cost_leaf
from .file_list import read_training_file_list
from .npz import decode_keys, encode_keys
from .plan_file import check_plan_fits_memory
from .preflight import archive_entry_count, check_key_collisions, check_regular_file, file_list_digest
from .stale_sizes import check_num_samples
from .file_sizes import check_archive_path
from .seq_filter import data_key_limit
from .enospc import (
    archive_bytes_bound,
    corpus_bytes_bound,
    costs_bytes_bound,
    plan_dir_bytes_bound,
    reporting_full_device,
)

__all__ = [
    "data_key_limit",
    "archive_bytes_bound",
    "corpus_bytes_bound",
    "costs_bytes_bound",
    "plan_dir_bytes_bound",
    "reporting_full_device",
    "check_archive_path",
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
    "PROGRESS_INTERVAL",
    "lognormal_sizes",
    "write_hdf_corpus",
    "rechunk_hdf_corpus",
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
    "atomic_dir",
    "check_output_dir",
    "files_kind",
    "read_files",
    "cost_leaf",
    "read_training_file_list",
    "decode_keys",
    "encode_keys",
    "check_plan_fits_memory",
    "archive_entry_count",
    "check_key_collisions",
    "check_regular_file",
    "file_list_digest",
    "check_num_samples",
]

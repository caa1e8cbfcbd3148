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

from .atomic import atomic_dir, atomic_write, check_output_dir
from .rechunk_hdf import rechunk_hdf_corpus
from .dataset_files import files_kind, read_files
from .enospc import (
    archive_bytes_bound,
    corpus_bytes_bound,
    costs_bytes_bound,
    plan_dir_bytes_bound,
    reporting_full_device,
)
from .file_costs import collect_file_costs, cost_leaf, load_file_costs, save_file_costs
from .file_list import read_training_file_list
from .file_sizes import check_archive_path
from .hdf_corpus import write_hdf_corpus
from .npz import decode_keys, encode_keys
from .plan_file import PlanHead, read_plan_head, read_plan_layout
from .preflight import archive_entry_count, check_key_collisions, check_regular_file, file_list_digest
from .progress import DEFAULT_INTERVAL as PROGRESS_INTERVAL
from .seq_filter import data_key_limit
from .stale_sizes import DEFAULT_CHECK_SAMPLES, check_num_samples, check_sample_unchanged
from .stat_engine import DEFAULT_NUM_THREADS

# What the layers above (and the docs' examples) use from this face (docs/architecture.md, "Faces"); nothing else.
__all__ = [
    "data_key_limit",
    "archive_bytes_bound",
    "corpus_bytes_bound",
    "costs_bytes_bound",
    "plan_dir_bytes_bound",
    "reporting_full_device",
    "check_archive_path",
    "DEFAULT_NUM_THREADS",
    "check_sample_unchanged",
    "DEFAULT_CHECK_SAMPLES",
    "PlanHead",
    "read_plan_head",
    "read_plan_layout",
    "atomic_write",
    "PROGRESS_INTERVAL",
    "write_hdf_corpus",
    "rechunk_hdf_corpus",
    "collect_file_costs",
    "load_file_costs",
    "save_file_costs",
    "atomic_dir",
    "check_output_dir",
    "files_kind",
    "read_files",
    "cost_leaf",
    "read_training_file_list",
    "decode_keys",
    "encode_keys",
    "archive_entry_count",
    "check_key_collisions",
    "check_regular_file",
    "file_list_digest",
    "check_num_samples",
]

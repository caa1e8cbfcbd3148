"""Pure core of i6_shard (stdlib + numpy): file trees, lists and sizes, RETURNN-exact
shuffle and bin distribution, and shard plans."""

from .atomic import atomic_path, atomic_write
from .balanced import assign_largest_first, distribute_balanced, group_bounds
from .demo import lognormal_sizes, make_demo_files
from .distribute import (
    UNSHARDED_RANK_SEED_STRIDE,
    check_enough_files,
    distribute_evenly_by_size,
    full_epoch_seed,
    shuffle_order,
)
from .file_list import FILE_LIST_EXTENSIONS, normalize_file_tree, read_file_list, write_file_list
from .file_sizes import (
    DEFAULT_NUM_THREADS,
    FileSizes,
    MissingFilesError,
    collect_file_sizes,
    load_file_sizes,
    save_file_sizes,
)
from .file_tree import FileTree, check_file_trees, flatten, tree_key
from .npz import load_npz, save_npz
from .plan import DISTRIBUTIONS, SEQ_ORDERINGS, ShardPlan
from .progress import Progress

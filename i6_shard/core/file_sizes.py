"""File sizes as RETURNN's DistributeFilesDataset computes them (sum over a tree's
leaves, keyed by the tree key), collected with a thread pool, stored compactly."""

from __future__ import annotations

import concurrent.futures
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .file_tree import FileTree, check_file_trees, flatten
from .npz import load_npz, save_npz
from .progress import Progress

__all__ = [
    "FileSizes",
    "MissingFilesError",
    "collect_file_sizes",
    "save_file_sizes",
    "load_file_sizes",
    "DEFAULT_NUM_THREADS",
    "FILE_SIZES_FORMAT_VERSION",
]

DEFAULT_NUM_THREADS = 32
FILE_SIZES_FORMAT_VERSION = 1
_MAX_LISTED_MISSING = 20


@dataclass(frozen=True)
class FileSizes:
    """Sizes of the entries of a file list, in list order.

    :ivar keys: tree keys (RETURNN's ``_get_key_for_file_tree``), one per entry
    :ivar sizes: int64 bytes per entry, shape [num_files]
    """

    keys: List[str]
    sizes: np.ndarray

    def __post_init__(self):
        if len(self.keys) != len(self.sizes):
            raise ValueError(f"{len(self.keys)} keys but {len(self.sizes)} sizes; they must pair up")

    def __len__(self) -> int:
        return len(self.keys)

    def as_dict(self) -> Dict[str, int]:
        """key -> size, the form of RETURNN's ``DistributeFilesDataset._file_sizes``."""
        return dict(zip(self.keys, self.sizes.tolist()))


class MissingFilesError(FileNotFoundError):
    """Some leaves of the file trees could not be stat-ed; ``missing`` lists (path, reason)."""

    def __init__(self, missing: List[Tuple[str, str]], num_leaves: int):
        self.missing = missing
        shown = "\n".join(f"  {p!r}: {why}" for p, why in missing[:_MAX_LISTED_MISSING])
        more = f"\n  ... and {len(missing) - _MAX_LISTED_MISSING} more" if len(missing) > _MAX_LISTED_MISSING else ""
        super().__init__(
            f"{len(missing)} of {num_leaves} files are missing or unreadable "
            f"(first {min(len(missing), _MAX_LISTED_MISSING)} listed):\n{shown}{more}\n"
            "Fix or remove these entries from the file list; nothing was written."
        )


def _stat_chunk(paths: Sequence[str]) -> Tuple[List[int], List[Tuple[int, str]]]:
    """Sizes for one chunk; ``os.stat`` follows symlinks like ``os.path.getsize``."""
    stat = os.stat
    try:
        return [stat(p).st_size for p in paths], []
    except OSError:
        pass
    sizes: List[int] = []
    errors: List[Tuple[int, str]] = []
    for i, p in enumerate(paths):
        try:
            sizes.append(stat(p).st_size)
        except OSError as exc:
            sizes.append(0)
            errors.append((i, exc.strerror or type(exc).__name__))
    return sizes, errors


def collect_file_sizes(
    trees: Sequence[FileTree],
    *,
    num_threads: Optional[int] = None,
    progress_interval: float = 5.0,
) -> FileSizes:
    """Size of every file tree: the sum of its leaves' sizes, keyed by tree key,
    as RETURNN's ``DistributeFilesDataset._lazy_init_file_sizes`` computes them.

    Each distinct leaf is stat-ed once, by ``num_threads`` threads (stat releases the
    GIL, which is what makes this fast on a network file system). The input order
    and duplicate entries are kept.

    :param trees: the ``files`` list of a DistributeFilesDataset
    :param num_threads: threads for stat calls (default 32; 1 runs in this thread)
    :param progress_interval: seconds between progress lines on stderr
    :raises MissingFilesError: if any leaf is missing or unreadable (all are listed at once)

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "a")
    >>> _ = open(p, "wb").write(b"123")
    >>> fs = collect_file_sizes([p, (p, p)])
    >>> fs.sizes.tolist(), fs.keys[1] == p + ":" + p
    ([3, 6], True)
    """
    check_file_trees(trees)
    if num_threads is None:
        num_threads = DEFAULT_NUM_THREADS
    if not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads={num_threads!r} must be a positive int")
    leaves_per_tree = [flatten(t) for t in trees]
    keys = [":".join(leaves) for leaves in leaves_per_tree]
    counts = np.fromiter((len(leaves) for leaves in leaves_per_tree), dtype=np.int64, count=len(trees))
    unique: Dict[str, int] = {}
    for leaves in leaves_per_tree:
        for leaf in leaves:
            unique.setdefault(leaf, len(unique))
    paths = list(unique)
    leaf_sizes = _stat_all(paths, num_threads=num_threads, progress_interval=progress_interval)
    if not trees:
        return FileSizes(keys=[], sizes=np.zeros(0, dtype=np.int64))
    if int(counts.max()) == 1 and len(paths) == len(trees):
        sizes = leaf_sizes  # one distinct leaf per entry, in order
    else:
        leaf_idx = np.fromiter((unique[leaf] for leaves in leaves_per_tree for leaf in leaves), dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sizes = np.add.reduceat(leaf_sizes[leaf_idx], starts)
    return FileSizes(keys=keys, sizes=np.ascontiguousarray(sizes, dtype=np.int64))


def _stat_all(paths: List[str], *, num_threads: int, progress_interval: float) -> np.ndarray:
    n = len(paths)
    out = np.zeros(n, dtype=np.int64)
    missing: List[Tuple[str, str]] = []
    progress = Progress("file sizes", total=n, interval=progress_interval)
    # Enough chunks to balance the threads and to report progress, few enough to keep overhead low.
    chunk = max(1, min(4096, n // (num_threads * 8) or 1))
    bounds = list(range(0, n, chunk))

    def work(start: int):
        res = _stat_chunk(paths[start:start + chunk])
        progress.add(len(res[0]))
        return res

    if num_threads == 1 or n <= chunk:
        results = map(work, bounds)
        _fill(out, bounds, results, paths, missing)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=num_threads) as pool:
            _fill(out, bounds, pool.map(work, bounds), paths, missing)
    progress.close()
    if missing:
        raise MissingFilesError(missing, n)
    return out


def _fill(out, bounds, results, paths, missing) -> None:
    for start, (sizes, errors) in zip(bounds, results):
        out[start:start + len(sizes)] = sizes
        missing.extend((paths[start + i], why) for i, why in errors)


def save_file_sizes(file_sizes: FileSizes, path: str | os.PathLike) -> None:
    """Store sizes as a deterministic ``.npz`` (written atomically) with three arrays:

    - ``keys_utf8``: uint8, the keys encoded as UTF-8 (``surrogatepass``), joined by NUL bytes
      (a NUL never occurs in a file name);
    - ``sizes``: int64, shape [num_files], in list order;
    - ``format_version``: int64 scalar, currently 1.

    Any numpy can read it: ``keys = bytes(d["keys_utf8"]).decode("utf-8", "surrogatepass").split("\\0")``.
    """
    for idx, k in enumerate(file_sizes.keys):
        if "\0" in k:
            raise ValueError(f"key {idx} ({k!r}) contains a NUL byte, which no file name can hold")
    blob = "\0".join(file_sizes.keys).encode("utf-8", "surrogatepass")
    save_npz(path, {
        "format_version": np.array(FILE_SIZES_FORMAT_VERSION, dtype=np.int64),
        "keys_utf8": np.frombuffer(blob, dtype=np.uint8),
        "sizes": np.asarray(file_sizes.sizes, dtype=np.int64),
    })


def load_file_sizes(path: str | os.PathLike) -> FileSizes:
    """Load what :func:`save_file_sizes` wrote.

    :raises ValueError: if the file is not a file-sizes archive of a known version
    """
    path = os.fspath(path)
    try:
        data = load_npz(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"file sizes {path!r} do not exist; compute them with ComputeFileSizesJob "
                                "or `python -m i6_shard sizes`") from None
    except (ValueError, OSError) as exc:
        raise ValueError(f"{path!r} is not a file sizes archive: {exc}") from None
    if set(data) != {"format_version", "keys_utf8", "sizes"}:
        raise ValueError(f"{path!r} is not a file sizes archive (arrays {sorted(data)})")
    version = int(data["format_version"])
    if version != FILE_SIZES_FORMAT_VERSION:
        raise ValueError(f"{path!r} has file sizes format {version}; this i6_shard reads {FILE_SIZES_FORMAT_VERSION}")
    sizes = data["sizes"].astype(np.int64, copy=False)
    blob = data["keys_utf8"].tobytes().decode("utf-8", "surrogatepass")
    keys = blob.split("\0") if len(sizes) else []
    if len(keys) != len(sizes):
        raise ValueError(f"{path!r} is corrupt: {len(keys)} keys but {len(sizes)} sizes")
    return FileSizes(keys=keys, sizes=sizes)

"""The staleness check of a sizes or costs archive: a sample of its entries stat-ed again where the sizes are
used (each rank at a training's start-up), so that files changed since the sizes were computed stop the
training before it reads a plan cut for other sizes."""

from __future__ import annotations

import datetime
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..pure.file_tree import FileTree, flatten
from .file_sizes import FileSizes
from .stat_engine import collect_file_sizes  # noqa: F401 (collect_file_sizes: its doctest)
from ..pure.text import short_repr

__all__ = ["check_sample_unchanged", "check_num_samples", "DEFAULT_CHECK_SAMPLES"]

#: Entries :func:`check_sample_unchanged` stats again by default (per rank, at a training's start-up).
DEFAULT_CHECK_SAMPLES = 16
_MAX_LISTED_STALE = 10


class StaleFileSizesError(ValueError):
    """Files changed since their sizes were computed (:func:`check_sample_unchanged`); ``changed``
    lists (entry index, what changed)."""

    def __init__(self, message: str, changed: Optional[List[Tuple[int, str]]] = None):
        super().__init__(message)
        # optional: pickling (a DataLoader worker re-raising it in the main process) rebuilds it from the message
        self.changed = list(changed or [])


def _sample_indices(num: int, k: int, seed: int) -> List[int]:
    """``k`` distinct indices in ``[0, num)``, drawn with ``k`` calls (Floyd's algorithm, no permutation of
    ``num``), sorted.

    >>> _sample_indices(10, 10, 0) == list(range(10)), len(set(_sample_indices(10**9, 5, 1)))
    (True, 5)
    """
    rng = np.random.RandomState(seed)
    chosen = set()
    for j in range(num - k, num):
        t = int(rng.randint(0, j + 1))
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


def _when(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def check_num_samples(num_samples: int, *, name: str = "num_samples") -> None:
    """Raise unless ``num_samples`` is an int >= 0 (numpy ints too).

    >>> check_num_samples(-1, name="file_sizes_check_samples")
    Traceback (most recent call last):
    ...
    ValueError: file_sizes_check_samples=-1 must be an int >= 0 (entries stat-ed again; 0: none)
    """
    if isinstance(num_samples, (bool, np.bool_)) or not isinstance(num_samples, (int, np.integer)) or num_samples < 0:
        raise ValueError(f"{name}={short_repr(num_samples)} must be an int >= 0 (entries stat-ed again; 0: none)")


def check_sample_unchanged(
    file_sizes: FileSizes,
    *,
    trees: Sequence[FileTree],
    num_samples: int = DEFAULT_CHECK_SAMPLES,
    seed: int = 0,
    source: str = "the file sizes archive",
) -> int:
    """Stat the leaves of ``num_samples`` random entries again and compare with ``file_sizes``: the size
    (the sum over the leaves) and, if recorded, the modification time (the latest leaf's). Costs one
    stat per leaf of the sample, whatever the length of the list: run it where the sizes are used (e.g.
    on each rank at start-up, with the rank as ``seed`` so that the ranks check different files).

    A sample cannot see every change: a changed file outside the sample, or one replaced by a file of
    equal size and modification time, goes unnoticed. A file that was only touched counts as changed.

    :param trees: the file trees the sizes belong to, in the same order (e.g. the dataset's ``files``)
    :param num_samples: entries to check (all if the list is shorter)
    :param seed: seed of the sample (``numpy.random.RandomState``)
    :param source: what the sizes came from, for the message (e.g. the archive's path)
    :return: the number of entries checked
    :raises StaleFileSizesError: naming every sampled entry that changed or is gone
    :raises ValueError: if ``trees`` does not fit ``file_sizes``

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "a.hdf"); _ = open(p, "wb").write(b"12")
    >>> fs = collect_file_sizes([p])
    >>> _ = open(p, "ab").write(b"3")
    >>> check_sample_unchanged(fs, trees=[p])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    i6_shard.core.io.stale_sizes.StaleFileSizesError: the file sizes archive is stale: 1 of 1 sampled entries changed ...
    """
    if len(trees) != len(file_sizes):
        raise ValueError(
            f"{len(trees)} file trees for {len(file_sizes)} sizes of {source}; give the trees the "
            "sizes were computed for, in the same order"
        )
    check_num_samples(num_samples)
    k = min(int(num_samples), len(trees))
    idxs = _sample_indices(len(trees), k, seed)
    mtimes = file_sizes.mtimes
    changed: List[Tuple[int, str]] = []
    for i in idxs:
        leaves = flatten(trees[i])
        if ":".join(leaves) != file_sizes.keys[i]:
            raise ValueError(
                f"entry {i} of the file trees ({short_repr(trees[i])}) has another key than {source} "
                f"there ({short_repr(file_sizes.keys[i])}); give the trees the sizes were computed for"
            )
        try:
            stats = [os.stat(leaf) for leaf in leaves]
        except OSError as exc:
            changed.append((i, f"{short_repr(exc.filename)} cannot be stat-ed now: {exc.strerror or exc}"))
            continue
        size, mtime = sum(st.st_size for st in stats), max(st.st_mtime_ns for st in stats)
        what = []
        if file_sizes.unit == "bytes" and size != int(file_sizes.sizes[i]):  # costs: the mtimes tell
            what.append(f"{int(file_sizes.sizes[i]):,} bytes then, {size:,} now")
        if mtimes is not None and mtime != int(mtimes[i]):
            what.append(f"modified {_when(int(mtimes[i]))} then, {_when(mtime)} now")
        if what:
            changed.append((i, f"{short_repr(file_sizes.keys[i])}: {', '.join(what)}"))
    if changed:
        shown = "; ".join(f"entry {i} {why}" for i, why in changed[:_MAX_LISTED_STALE])
        more = f"; ... and {len(changed) - _MAX_LISTED_STALE} more" if len(changed) > _MAX_LISTED_STALE else ""
        raise StaleFileSizesError(
            f"{source} is stale: {len(changed)} of {k} sampled entries changed since their sizes were computed "
            f"({shown}{more}). The bins would be balanced on the old sizes: compute the sizes again "
            "(ComputeFileSizesJob or `python -m i6_shard sizes`) from the files as they are now, and keep the "
            "files unchanged while a training uses them.",
            changed,
        )
    return k

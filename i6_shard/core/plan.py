"""ShardPlan: which files each rank reads in each sub-epoch, exactly as RETURNN's
DistributeFilesDataset decides at run time (sharded or unsharded mode)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .distribute import (
    UNSHARDED_RANK_SEED_STRIDE,
    check_enough_files,
    distribute_evenly_by_size,
    full_epoch_seed,
    shuffle_order,
)
from .file_tree import FileTree

__all__ = ["ShardPlan", "SEQ_ORDERINGS", "DISTRIBUTIONS", "SEED_LIMIT", "check_plan_settings"]

SEQ_ORDERINGS = ("random", "default")
#: "returnn": RETURNN's own greedy cut; "balanced": balanced per sub-epoch (core.balanced, returnn_ext).
DISTRIBUTIONS = ("returnn", "balanced")
#: numpy.random.RandomState, RETURNN's shuffle, takes seeds in [0, SEED_LIMIT).
SEED_LIMIT = 2**32
#: Layouts a sharded plan keeps (an unsharded one keeps at least one per rank).
_CACHE_SIZE = 4


def _check_int(name: str, value, *, minimum: Optional[int] = None, hint: str = "") -> int:
    """``value`` as a Python int; TypeError for anything but an int (bools and floats included),
    ValueError below ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}={value!r} must be an int{hint}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value!r} must be an int >= {minimum}{hint}")
    return int(value)


def check_plan_settings(*, num_files: int, num_shards: int, partition_epoch: int, seq_ordering: str = "random",
                        random_seed_offset: int = 0, fixed_random_seed: Optional[int] = None,
                        distrib_shard_files: bool = True, same_seed_on_all_ranks: bool = False,
                        distribution: str = "returnn", num_epochs: Optional[int] = None) -> None:
    """Raise ``TypeError``/``ValueError`` (naming the parameter and the fix) for settings that
    :class:`ShardPlan` cannot plan or RETURNN would fail on: the checks ShardPlan runs, for
    callers that want them before they produce the files.

    Seeds: RETURNN shuffles full epoch k with ``RandomState(fixed_random_seed)`` or
    ``RandomState(k + 1 + offset)`` (offset: ``random_seed_offset``, plus ``rank * 16127``
    unsharded unless ``same_seed_on_all_ranks``), which takes only seeds in [0, 2**32).
    Seeds grow with the full epoch: without ``num_epochs``, those of full epoch 0 are checked
    (on every rank); with it, also those of the last full epoch of sub-epochs ``1..num_epochs``.

    :param num_epochs: RETURNN's ``num_epochs`` (sub-epochs) to be planned, if known

    >>> check_plan_settings(num_files=10, num_shards=2, partition_epoch=5, random_seed_offset=-2)
    Traceback (most recent call last):
    ...
    ValueError: full epoch 0 (epochs 1..5) would shuffle with seed -1 (full_epoch_0idx + 1 + random_seed_offset=-2), but numpy's RandomState, RETURNN's shuffle, takes seeds in [0, 2**32): use random_seed_offset >= -1
    """
    num_shards = _check_int("num_shards", num_shards, minimum=1, hint=" (the number of ranks)")
    partition_epoch = _check_int("partition_epoch", partition_epoch, minimum=1, hint=" (sub-epochs per full epoch)")
    if not isinstance(seq_ordering, str) or seq_ordering not in SEQ_ORDERINGS:
        raise ValueError(f"seq_ordering={seq_ordering!r} is not supported by DistributeFilesDataset; "
                         f"use one of {SEQ_ORDERINGS}")
    if not isinstance(distribution, str) or distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution={distribution!r} is unknown; use one of {DISTRIBUTIONS}")
    for name, flag in (("distrib_shard_files", distrib_shard_files), ("same_seed_on_all_ranks", same_seed_on_all_ranks)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name}={flag!r} must be a bool")
    if same_seed_on_all_ranks and distrib_shard_files:
        raise ValueError("same_seed_on_all_ranks=True models distrib_shard_files=False with an explicit dataset "
                         "random_seed_offset; with distrib_shard_files=True all ranks share the seed anyway: "
                         "drop same_seed_on_all_ranks")
    offset = _check_int("random_seed_offset", random_seed_offset, hint=" (RETURNN's default is 0)")
    if fixed_random_seed is not None:
        fixed = _check_int("fixed_random_seed", fixed_random_seed, hint=" or None")
    last_full_epoch = 0
    if num_epochs is not None:
        if isinstance(num_epochs, (bool, np.bool_)) or not isinstance(num_epochs, (int, np.integer)) \
                or num_epochs < 1:
            raise ValueError(f"num_epochs={num_epochs!r} must be a positive int (RETURNN's num_epochs counts "
                             "sub-epochs)")
        last_full_epoch = (int(num_epochs) - 1) // partition_epoch
    if seq_ordering == "random":  # only then does RETURNN shuffle, i.e. use the seeds
        if fixed_random_seed is not None:
            if not 0 <= fixed < SEED_LIMIT:
                raise ValueError(f"fixed_random_seed={fixed} is a shuffle seed, but numpy's RandomState, RETURNN's "
                                 "shuffle, takes seeds in [0, 2**32): choose one in that range")
        else:
            per_rank = not distrib_shard_files and not same_seed_on_all_ranks
            top_rank = num_shards - 1 if per_rank else None
            for k, rank in ((0, None), (last_full_epoch, top_rank)):  # the smallest and the largest seed
                seed = full_epoch_seed(k, random_seed_offset=offset + (rank or 0) * UNSHARDED_RANK_SEED_STRIDE)
                if not 0 <= seed < SEED_LIMIT:
                    raise _seed_error(seed, full_epoch_0idx=k, partition_epoch=partition_epoch,
                                      random_seed_offset=offset, rank=rank)
    check_enough_files(num_files, num_shards=num_shards if distrib_shard_files else 1,
                       partition_epoch=partition_epoch)


def _seed_error(seed: int, *, full_epoch_0idx: int, partition_epoch: int, random_seed_offset: int,
                rank: Optional[int]) -> ValueError:
    """The error for a shuffle seed outside numpy's range, naming the full epoch and the option."""
    rank_term = f" + rank*{UNSHARDED_RANK_SEED_STRIDE} on rank {rank}" if rank is not None else ""
    fix = "use random_seed_offset >= -1" if seed < 0 else \
        "lower random_seed_offset" + (" or num_epochs" if full_epoch_0idx else "")
    return ValueError(
        f"full epoch {full_epoch_0idx} (epochs {full_epoch_0idx * partition_epoch + 1}.."
        f"{(full_epoch_0idx + 1) * partition_epoch}) would shuffle with seed {seed} (full_epoch_0idx + 1 + "
        f"random_seed_offset={random_seed_offset}{rank_term}), but numpy's RandomState, RETURNN's shuffle, takes "
        f"seeds in [0, 2**32): {fix}")


class ShardPlan:
    """The files of every (sub-epoch, shard) under RETURNN's DistributeFilesDataset.

    Sharded mode (``distrib_shard_files=True``, the default): at each full epoch all
    ranks shuffle the list with the same seed and cut it into ``num_shards *
    partition_epoch`` bins; rank r reads bin ``r*P + (epoch-1) % P`` in sub-epoch ``epoch``.

    Unsharded mode (``distrib_shard_files=False``): each rank shuffles the full list
    itself and cuts it into ``partition_epoch`` bins. By default each rank's seed offset is
    ``random_seed_offset + rank * 16127``, as RETURNN sets it under torch distributed when the
    dataset has no ``random_seed_offset`` of its own. An explicit dataset ``random_seed_offset``
    is used unchanged on every rank (``same_seed_on_all_ranks=True``): then every rank reads
    the same files in the same order, the pitfall the report warns about.

    :param keys: tree keys (str), shape [num_files], in list order
    :param sizes: int bytes (an integer dtype; no floats, bools or str), shape [num_files]
    :param random_seed_offset: sharded: the dataset's ``random_seed_offset``, or else the config's
        ``dataset_random_seed_offset`` (RETURNN's default 0), the same on all ranks. Unsharded:
        the base to which RETURNN adds ``rank * 16127``, i.e. the config's
        ``dataset_random_seed_offset``; with ``same_seed_on_all_ranks``, the dataset's own
        ``random_seed_offset``, used unchanged on every rank
    :param fixed_random_seed: the dataset's ``fixed_random_seed`` (the seed of every full epoch
        on every rank, offsets ignored, as in RETURNN)
    :param same_seed_on_all_ranks: unsharded only: model a ``random_seed_offset`` set explicitly
        in the dataset dict, which RETURNN does not vary per rank
    :param trees: optionally the original file trees (same order as keys)
    :raises TypeError, ValueError: for settings RETURNN would fail on or that cannot be planned,
        naming the parameter (see :func:`check_plan_settings`)

    >>> plan = ShardPlan(["a", "b", "c", "d"], [1, 1, 78, 120], num_shards=2, partition_epoch=2,
    ...                  seq_ordering="default")
    >>> [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in (1, 2)]
    [['a'], ['b'], ['c'], ['d']]
    >>> ShardPlan(["a", "b"], [1.5, 2], num_shards=1, partition_epoch=1)
    Traceback (most recent call last):
    ...
    TypeError: sizes must be integers (bytes), got dtype float64 (entry 0: 1.5); pass int sizes as collect_file_sizes gives them
    """

    def __init__(
        self,
        keys: Sequence[str],
        sizes: Sequence[int] | np.ndarray,
        *,
        num_shards: int,
        partition_epoch: int,
        seq_ordering: str = "random",
        random_seed_offset: int = 0,
        fixed_random_seed: Optional[int] = None,
        distrib_shard_files: bool = True,
        distribution: str = "returnn",
        trees: Optional[Sequence[FileTree]] = None,
        same_seed_on_all_ranks: bool = False,
    ):
        self.keys = list(keys)
        _check_keys(self.keys)
        self.sizes = _int64_sizes(sizes, keys=self.keys)
        if trees is not None and len(trees) != len(self.keys):
            raise ValueError(f"{len(trees)} trees but {len(self.keys)} keys; they must pair up")
        check_plan_settings(num_files=len(self.keys), num_shards=num_shards, partition_epoch=partition_epoch,
                            seq_ordering=seq_ordering, random_seed_offset=random_seed_offset,
                            fixed_random_seed=fixed_random_seed, distrib_shard_files=distrib_shard_files,
                            same_seed_on_all_ranks=same_seed_on_all_ranks, distribution=distribution)
        self.trees = list(trees) if trees is not None else None
        self.num_shards = int(num_shards)
        self.partition_epoch = int(partition_epoch)
        self.seq_ordering = seq_ordering
        self.random_seed_offset = int(random_seed_offset)
        self.fixed_random_seed = None if fixed_random_seed is None else int(fixed_random_seed)
        self.distrib_shard_files = distrib_shard_files
        self.same_seed_on_all_ranks = same_seed_on_all_ranks
        self.distribution = distribution
        # Unsharded, every rank has its own layout: keep one per rank, so that going over the ranks
        # sub-epoch by sub-epoch computes each (full epoch, rank) once.
        self._cache_size = _CACHE_SIZE if distrib_shard_files else max(_CACHE_SIZE, self.num_shards)
        self._cache: "OrderedDict[Tuple[int, int], Tuple[np.ndarray, np.ndarray]]" = OrderedDict()
        self._key_array: Optional[np.ndarray] = None  # keys as an object array, built on first files_for
        self._tree_array: Optional[np.ndarray] = None

    # --- shape of the plan ---------------------------------------------------------------

    @property
    def num_files(self) -> int:
        return len(self.keys)

    @property
    def num_bins(self) -> int:
        """Bins per full epoch in one layout: W*P sharded, P per rank unsharded."""
        return self.num_shards * self.partition_epoch if self.distrib_shard_files else self.partition_epoch

    @property
    def rank_seeds_differ(self) -> bool:
        """Whether ranks shuffle with different seeds (unsharded, per-rank offset, random order)."""
        return (not self.distrib_shard_files and not self.same_seed_on_all_ranks and self.seq_ordering == "random"
                and self.fixed_random_seed is None and self.num_shards > 1)

    def seed_for(self, *, full_epoch_0idx: int, shard_index: int = 0) -> int:
        """Shuffle seed of a full epoch on a rank (the same on every rank when sharded).

        :raises ValueError: if the seed is beyond what numpy's RandomState takes (2**32 - 1)
        """
        per_rank = not self.distrib_shard_files and not self.same_seed_on_all_ranks
        offset = self.random_seed_offset + (shard_index * UNSHARDED_RANK_SEED_STRIDE if per_rank else 0)
        seed = full_epoch_seed(full_epoch_0idx, random_seed_offset=offset, fixed_random_seed=self.fixed_random_seed)
        if not 0 <= seed < SEED_LIMIT:
            raise _seed_error(seed, full_epoch_0idx=full_epoch_0idx, partition_epoch=self.partition_epoch,
                              random_seed_offset=self.random_seed_offset, rank=shard_index if per_rank else None)
        return seed

    def check_num_epochs(self, num_epochs: int) -> None:
        """Raise ``ValueError`` unless ``num_epochs`` (RETURNN's, in sub-epochs) is a positive int whose
        full epochs all have valid shuffle seeds on every rank (check it before writing anything).

        >>> ShardPlan(["a"], [1], num_shards=1, partition_epoch=1, random_seed_offset=2**32 - 3).check_num_epochs(3)
        Traceback (most recent call last):
        ...
        ValueError: full epoch 2 (epochs 3..3) would shuffle with seed 4294967296 (full_epoch_0idx + 1 + random_seed_offset=4294967293), but numpy's RandomState, RETURNN's shuffle, takes seeds in [0, 2**32): lower random_seed_offset or num_epochs
        """
        check_plan_settings(num_files=self.num_files, num_shards=self.num_shards,
                            partition_epoch=self.partition_epoch, seq_ordering=self.seq_ordering,
                            random_seed_offset=self.random_seed_offset, fixed_random_seed=self.fixed_random_seed,
                            distrib_shard_files=self.distrib_shard_files,
                            same_seed_on_all_ranks=self.same_seed_on_all_ranks, distribution=self.distribution,
                            num_epochs=num_epochs)

    def layout(self, *, full_epoch_0idx: int, shard_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """The bins of one full epoch as seen by ``shard_index``.

        :return: ``(order, bounds)``: int64 file indices, shape [num_files], and int64
            boundaries, shape [num_bins + 1]; bin b is ``order[bounds[b]:bounds[b+1]]``.
            Sharded, the layout is the same on every rank and bin ``r*P + s`` is rank r's
            sub-epoch s; unsharded, each rank has its own layout of P bins.
        """
        _check_int("full_epoch_0idx", full_epoch_0idx, minimum=0)
        self._check_shard(shard_index)
        cache_key = (int(full_epoch_0idx), 0 if self.distrib_shard_files else int(shard_index))
        hit = self._cache.get(cache_key)
        if hit is not None:
            self._cache.move_to_end(cache_key)
            return hit
        if self.seq_ordering == "random":
            order = shuffle_order(self.num_files, seed=self.seed_for(full_epoch_0idx=full_epoch_0idx,
                                                                     shard_index=shard_index))
        else:
            order = np.arange(self.num_files, dtype=np.int64)
        order, bounds = self._cut(order)
        order.setflags(write=False)
        bounds.setflags(write=False)
        self._cache[cache_key] = (order, bounds)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return order, bounds

    def _cut(self, order: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Cut the shuffled order into bins with the configured distribution."""
        if self.distribution == "balanced":
            from .balanced import distribute_balanced

            positions, bounds = distribute_balanced(
                self.sizes[order], num_shards=self.num_bins // self.partition_epoch,
                partition_epoch=self.partition_epoch)
            return order[positions], bounds
        assert self.distribution == "returnn", self.distribution
        bounds = distribute_evenly_by_size(self.sizes[order], num_bins=self.num_bins)
        return order, bounds

    # --- queries -------------------------------------------------------------------------

    def bin_index(self, *, epoch: int, shard_index: int) -> int:
        """Index of the bin that ``shard_index`` reads in sub-epoch ``epoch`` (1-based)."""
        self._check_epoch(epoch)
        sub_epoch_idx = (epoch - 1) % self.partition_epoch
        if self.distrib_shard_files:
            return shard_index * self.partition_epoch + sub_epoch_idx
        return sub_epoch_idx

    def file_indices_for(self, *, epoch: int, shard_index: int) -> np.ndarray:
        """Indices into ``keys`` that ``shard_index`` reads in sub-epoch ``epoch``, in RETURNN's order."""
        self._check_epoch(epoch)
        self._check_shard(shard_index)
        order, bounds = self.layout(full_epoch_0idx=(epoch - 1) // self.partition_epoch, shard_index=shard_index)
        b = self.bin_index(epoch=epoch, shard_index=shard_index)
        return order[bounds[b]:bounds[b + 1]]

    def files_for(self, *, epoch: int, shard_index: int) -> List[str]:
        """Keys that ``shard_index`` reads in sub-epoch ``epoch``, in the order RETURNN passes
        them to ``get_sub_epoch_dataset``."""
        if self._key_array is None:
            self._key_array = np.empty(self.num_files, dtype=object)
            self._key_array[:] = self.keys  # keys are str, so no element is taken for a sequence
        # One gather over an object array touches each key twice; a list comprehension is ~2x slower.
        return self._key_array[self.file_indices_for(epoch=epoch, shard_index=shard_index)].tolist()

    def trees_for(self, *, epoch: int, shard_index: int) -> List[FileTree]:
        """Like :meth:`files_for`, but the original file trees (needs ``trees``)."""
        if self.trees is None:
            raise ValueError("this plan was built without trees; pass trees=... to ShardPlan")
        if self._tree_array is None:
            self._tree_array = _object_array(self.trees)
        return self._tree_array[self.file_indices_for(epoch=epoch, shard_index=shard_index)].tolist()

    def iter_epochs(self, *, first_epoch: int = 1, num_epochs: int) -> Iterator[Tuple[int, int, np.ndarray]]:
        """Yield ``(epoch, shard_index, file_indices)`` for ``num_epochs`` sub-epochs from ``first_epoch``."""
        for epoch in range(first_epoch, first_epoch + num_epochs):
            for shard_index in range(self.num_shards):
                yield epoch, shard_index, self.file_indices_for(epoch=epoch, shard_index=shard_index)

    def _check_epoch(self, epoch: int) -> None:
        _check_int("epoch", epoch, minimum=1, hint=" (RETURNN counts sub-epochs from 1)")

    def _check_shard(self, shard_index: int) -> None:
        _check_int("shard_index", shard_index, hint=f" in 0..{self.num_shards - 1}")
        if not 0 <= shard_index < self.num_shards:
            raise ValueError(f"shard_index={shard_index} is out of range for num_shards={self.num_shards}; "
                             f"use 0..{self.num_shards - 1}")

    def __repr__(self) -> str:
        return (f"ShardPlan(num_files={self.num_files}, num_shards={self.num_shards}, "
                f"partition_epoch={self.partition_epoch}, seq_ordering={self.seq_ordering!r}, "
                f"distrib_shard_files={self.distrib_shard_files}, distribution={self.distribution!r}"
                + (", same_seed_on_all_ranks=True" if self.same_seed_on_all_ranks else "") + ")")


def _check_keys(keys: List) -> None:
    """TypeError naming the first key that is not a str."""
    if set(map(type, keys)) <= {str}:  # fast path; subclasses of str are checked one by one below
        return
    for idx, key in enumerate(keys):
        if not isinstance(key, str):
            raise TypeError(f"keys[{idx}]={key!r} is a {type(key).__name__}; keys are tree keys (str), as in "
                            "FileSizes.keys or core.tree_key(tree)")


def _int64_sizes(sizes, *, keys: List[str]) -> np.ndarray:
    """``sizes`` as a contiguous int64 vector paired with ``keys``; TypeError unless integer, ValueError
    if negative, beyond int64 or not one per key."""
    arr = np.asarray(sizes)
    if arr.shape != (len(keys),):
        raise ValueError(f"{len(keys)} keys but sizes of shape {arr.shape}; they must pair up")
    if arr.size and arr.dtype.kind not in "iu":
        values = arr.tolist()
        bad = next((i for i, x in enumerate(values) if isinstance(x, bool) or not isinstance(x, int)), 0)
        raise TypeError(f"sizes must be integers (bytes), got dtype {arr.dtype} (entry {bad}: {values[bad]!r}); "
                        "pass int sizes as collect_file_sizes gives them")
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) >= 2**63:
        raise ValueError(f"sizes up to {int(arr.max())} do not fit int64; pass sizes in a coarser unit")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and int(arr.min()) < 0:
        bad = int(np.argmax(arr < 0))
        raise ValueError(f"sizes must be >= 0 (bytes), but entry {bad} ({keys[bad]!r}) has {int(arr[bad])}")
    return arr


def _object_array(items: Sequence) -> np.ndarray:
    """1-D object array holding ``items`` as they are (nested tuples/lists stay single elements)."""
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        arr[i] = x
    return arr

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

__all__ = ["ShardPlan", "SEQ_ORDERINGS", "DISTRIBUTIONS"]

SEQ_ORDERINGS = ("random", "default")
#: "returnn": RETURNN's own greedy cut; "balanced": balanced per sub-epoch (core.balanced, returnn_ext).
DISTRIBUTIONS = ("returnn", "balanced")
_CACHE_SIZE = 4


class ShardPlan:
    """The files of every (sub-epoch, shard) under RETURNN's DistributeFilesDataset.

    Sharded mode (``distrib_shard_files=True``, the default): at each full epoch all
    ranks shuffle the list with the same seed and cut it into ``num_shards *
    partition_epoch`` bins; rank r reads bin ``r*P + (epoch-1) % P`` in sub-epoch ``epoch``.

    Unsharded mode (``distrib_shard_files=False``): each rank shuffles the full list
    with its own seed offset (``random_seed_offset + rank * 16127``, as RETURNN does
    under torch distributed) and cuts it into ``partition_epoch`` bins.

    :param keys: tree keys, shape [num_files], in list order
    :param sizes: int64 bytes, shape [num_files]
    :param trees: optionally the original file trees (same order as keys)

    >>> plan = ShardPlan(["a", "b", "c", "d"], [1, 1, 78, 120], num_shards=2, partition_epoch=2,
    ...                  seq_ordering="default")
    >>> [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in (1, 2)]
    [['a'], ['b'], ['c'], ['d']]
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
    ):
        self.keys = list(keys)
        self.sizes = np.ascontiguousarray(sizes, dtype=np.int64)
        if self.sizes.shape != (len(self.keys),):
            raise ValueError(f"{len(self.keys)} keys but sizes of shape {self.sizes.shape}; they must pair up")
        if self.sizes.size and int(self.sizes.min()) < 0:
            raise ValueError(f"sizes must be >= 0, got {int(self.sizes.min())}")
        if trees is not None and len(trees) != len(self.keys):
            raise ValueError(f"{len(trees)} trees but {len(self.keys)} keys; they must pair up")
        self.trees = list(trees) if trees is not None else None
        if seq_ordering not in SEQ_ORDERINGS:
            raise ValueError(f"seq_ordering={seq_ordering!r} is not supported by DistributeFilesDataset; "
                             f"use one of {SEQ_ORDERINGS}")
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution={distribution!r} is unknown; use one of {DISTRIBUTIONS}")
        if not isinstance(distrib_shard_files, bool):
            raise TypeError(f"distrib_shard_files={distrib_shard_files!r} must be a bool")
        self.num_shards = int(num_shards)
        self.partition_epoch = int(partition_epoch)
        self.seq_ordering = seq_ordering
        self.random_seed_offset = int(random_seed_offset)
        self.fixed_random_seed = None if fixed_random_seed is None else int(fixed_random_seed)
        self.distrib_shard_files = distrib_shard_files
        self.distribution = distribution
        check_enough_files(len(self.keys), num_shards=num_shards if distrib_shard_files else 1,
                           partition_epoch=partition_epoch)
        if not isinstance(num_shards, (int, np.integer)) or num_shards < 1:
            raise ValueError(f"num_shards={num_shards!r} must be a positive int")
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

    def seed_for(self, *, full_epoch_0idx: int, shard_index: int = 0) -> int:
        """Shuffle seed of a full epoch on a rank (the same on every rank when sharded)."""
        offset = self.random_seed_offset
        if not self.distrib_shard_files:
            offset += shard_index * UNSHARDED_RANK_SEED_STRIDE
        return full_epoch_seed(full_epoch_0idx, random_seed_offset=offset, fixed_random_seed=self.fixed_random_seed)

    def layout(self, *, full_epoch_0idx: int, shard_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """The bins of one full epoch as seen by ``shard_index``.

        :return: ``(order, bounds)``: int64 file indices, shape [num_files], and int64
            boundaries, shape [num_bins + 1]; bin b is ``order[bounds[b]:bounds[b+1]]``.
            Sharded, the layout is the same on every rank and bin ``r*P + s`` is rank r's
            sub-epoch s; unsharded, each rank has its own layout of P bins.
        """
        if full_epoch_0idx < 0:
            raise ValueError(f"full_epoch_0idx={full_epoch_0idx} must be >= 0")
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
        if len(self._cache) > _CACHE_SIZE:
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
        if not isinstance(epoch, (int, np.integer)) or epoch < 1:
            raise ValueError(f"epoch={epoch!r} must be an int >= 1 (RETURNN counts sub-epochs from 1)")

    def _check_shard(self, shard_index: int) -> None:
        if not 0 <= shard_index < self.num_shards:
            raise ValueError(f"shard_index={shard_index} is out of range for num_shards={self.num_shards}")

    def __repr__(self) -> str:
        return (f"ShardPlan(num_files={self.num_files}, num_shards={self.num_shards}, "
                f"partition_epoch={self.partition_epoch}, seq_ordering={self.seq_ordering!r}, "
                f"distrib_shard_files={self.distrib_shard_files}, distribution={self.distribution!r})")


def _object_array(items: Sequence) -> np.ndarray:
    """1-D object array holding ``items`` as they are (nested tuples/lists stay single elements)."""
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        arr[i] = x
    return arr

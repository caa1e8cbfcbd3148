"""ShardPlan: which files each rank reads in each sub-epoch, exactly as RETURNN's
DistributeFilesDataset decides at run time (sharded or unsharded mode)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from .args import check_int, first_negative
from .corpora import Corpora, read_order, separate_repeats
from .cut import cut_full_epoch, cut_spec
from .equal_steps_cut import EqualStepsInputs, equal_steps_options
from .distribute import shuffle_order
from .returnn_features import returnn_version_key
from .settings import PlanSettings
from .text import short_repr

__all__ = ["ShardPlan"]

#: Layouts a sharded plan keeps (an unsharded one keeps at least one per rank).
_CACHE_SIZE = 4


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
    :param costs: int cost per file (bytes as collect_file_sizes gives them; an integer dtype, no
        floats, bools or str), shape [num_files]; the bins are balanced by them
    :param settings: the validated :class:`PlanSettings`; checked here against the number of files
    :param equal_steps: distribution ``"equal_steps"`` only: each file's sequence lengths and the engine whose steps
        it equalizes (:class:`~.cut.EqualStepsInputs`); without them such a plan cannot cut a full epoch (its
        stored bins are read, e.g. from its plan file)
    :param corpora: several corpora one after the other in ``keys``, each read by its weight
        (:class:`~.corpora.Corpora`): a full epoch then reads each file :meth:`reads` times, never twice in one
        sub-epoch; None: every file once per full epoch, as RETURNN reads them
    :param returnn_version: the RETURNN release whose own cut ``distribution="returnn"`` mirrors
        (:func:`~.cut.cut_for_release`); None: the newest's
    :raises TypeError, ValueError: for keys and costs that cannot be planned, or too few files

    >>> plan = ShardPlan(["a", "b", "c", "d"], [1, 1, 78, 120],
    ...                  PlanSettings(num_shards=2, partition_epoch=2, seq_ordering="default"))
    >>> [plan.files_for(epoch=e, shard_index=r) for r in range(2) for e in (1, 2)]
    [['a'], ['b'], ['c'], ['d']]
    >>> ShardPlan(["a", "b"], [1.5, 2], PlanSettings(num_shards=1, partition_epoch=1))
    Traceback (most recent call last):
    ...
    TypeError: costs must be integers (bytes), got dtype float64 (entry 0: 1.5); pass int sizes as collect_file_sizes gives them
    """

    def __init__(
        self,
        keys: Sequence[str],
        costs: Sequence[int] | np.ndarray,
        settings: PlanSettings,
        *,
        equal_steps: Optional[EqualStepsInputs] = None,
        corpora: Optional[Corpora] = None,
        returnn_version: Optional[str] = None,
    ):
        if not isinstance(settings, PlanSettings):
            raise TypeError(
                f"settings={settings!r} must be a PlanSettings, e.g. PlanSettings(num_shards=4, partition_epoch=20)"
            )
        self.keys = list(keys)
        _check_keys(self.keys)
        self.costs = _int64_costs(costs, keys=self.keys)
        settings.validate(num_files=len(self.keys))
        self.settings = settings
        if equal_steps is not None:
            if not isinstance(equal_steps, EqualStepsInputs):
                raise TypeError(f"equal_steps has type {type(equal_steps).__name__}; give an EqualStepsInputs")
            if len(equal_steps.file_lengths) != len(self.keys):
                raise ValueError(
                    f"equal_steps has the sequence lengths of {len(equal_steps.file_lengths)} files, the plan "
                    f"{len(self.keys)}: give each file's lengths in the plan's key order"
                )
        self.equal_steps = equal_steps
        if corpora is not None:
            if not isinstance(corpora, Corpora):
                raise TypeError(f"corpora has type {type(corpora).__name__}; give a Corpora")
            corpora.check(
                keys=self.keys,
                num_bins=settings.num_bins,
                partition_epoch=settings.partition_epoch,
                distrib_shard_files=settings.distrib_shard_files,
            )
        self.corpora = corpora
        # Unsharded, every rank has its own layout: keep one per rank, so that going over the ranks
        # sub-epoch by sub-epoch computes each (full epoch, rank) once.
        self._cache_size = max(_CACHE_SIZE, settings.num_layouts)
        self._cache: "OrderedDict[Tuple[int, int], Tuple[np.ndarray, np.ndarray]]" = OrderedDict()
        self._key_array: Optional[np.ndarray] = None  # keys as an object array, built on first files_for
        self._stored: Optional[Tuple[Callable[[int, int], Tuple[np.ndarray, np.ndarray]], int]] = None
        if returnn_version is not None:
            returnn_version_key(returnn_version)  # a ValueError names the form
        self.returnn_version = returnn_version  # whose cut (cut.cut_for_release); None: the newest's

    def serving_stored(
        self, layout: Callable[[int, int], Tuple[np.ndarray, np.ndarray]], num_full_epochs: int
    ) -> "ShardPlan":
        """This plan, whose first ``num_full_epochs`` full epochs are the stored bins ``layout(full_epoch_0idx,
        shard_index)`` gives (a plan file's: what a training given that file reads, whatever cut made them, e.g.
        ``"equal_steps"``, which needs the sequence lengths to cut again); later full epochs are cut as usual."""
        served = ShardPlan(
            self.keys,
            self.costs,
            self.settings,
            equal_steps=self.equal_steps,
            corpora=self.corpora,
            returnn_version=self.returnn_version,
        )
        served._stored = (layout, int(num_full_epochs))
        return served

    def for_returnn(self, returnn_version: Optional[str]) -> "ShardPlan":
        """This plan cut as RETURNN ``returnn_version`` cuts (:func:`~.cut.cut_for_release`: RETURNN's own cut
        changed in 1.20240705.144031); None: as the newest. Stored bins stay what they are."""
        served = ShardPlan(
            self.keys,
            self.costs,
            self.settings,
            equal_steps=self.equal_steps,
            corpora=self.corpora,
            returnn_version=returnn_version,
        )
        served._stored = self._stored
        return served

    def with_settings(self, **changes) -> "ShardPlan":
        """The same files and costs under other settings (``PlanSettings.replace``), e.g. to compare."""
        return ShardPlan(
            self.keys,
            self.costs,
            self.settings.replace(**changes),
            equal_steps=self.equal_steps,
            corpora=self.corpora,
            returnn_version=self.returnn_version,
        )

    # --- shape of the plan ---------------------------------------------------------------

    @property
    def num_files(self) -> int:
        return len(self.keys)

    @property
    def num_shards(self) -> int:
        return self.settings.num_shards

    @property
    def partition_epoch(self) -> int:
        return self.settings.partition_epoch

    def reads(self, *, full_epoch_0idx: int) -> np.ndarray:
        """int64 [num_files]: how often each file is read in a full epoch (all ones without corpora; with them
        :meth:`~.corpora.Corpora.planned_reads`)."""
        if self.corpora is None:
            return np.ones(self.num_files, dtype=np.int64)
        return self.corpora.planned_reads(self.settings, full_epoch_0idx=full_epoch_0idx)

    def layout(self, *, full_epoch_0idx: int, shard_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """The bins of one full epoch as seen by ``shard_index``.

        :return: ``(order, bounds)``: int64 file indices, shape [num_files] (with corpora: one per read, the
            full epoch's ``reads().sum()``), and int64
            boundaries, shape [num_bins + 1]; bin b is ``order[bounds[b]:bounds[b+1]]``.
            Sharded, the layout is the same on every rank and bin ``r*P + s`` is rank r's
            sub-epoch s; unsharded, each rank has its own layout of P bins.
        """
        check_int(full_epoch_0idx, name="full_epoch_0idx", minimum=0)
        self._check_shard(shard_index)
        if self._stored is not None and full_epoch_0idx < self._stored[1]:
            return self._stored[0](int(full_epoch_0idx), int(shard_index))
        s = self.settings
        cache_key = (int(full_epoch_0idx), 0 if s.distrib_shard_files else int(shard_index))
        hit = self._cache.get(cache_key)
        if hit is not None:
            self._cache.move_to_end(cache_key)
            return hit
        if self.corpora is not None:
            seed = s.seed_for(full_epoch_0idx=full_epoch_0idx) if s.seq_ordering == "random" else None
            order = read_order(self.reads(full_epoch_0idx=full_epoch_0idx), seed=seed)
        elif s.seq_ordering == "random":
            order = shuffle_order(
                self.num_files, seed=s.seed_for(full_epoch_0idx=full_epoch_0idx, shard_index=shard_index)
            )
        else:
            order = np.arange(self.num_files, dtype=np.int64)
        order, bounds = self._cut(order, full_epoch_0idx=int(full_epoch_0idx))
        order.setflags(write=False)
        bounds.setflags(write=False)
        self._cache[cache_key] = (order, bounds)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return order, bounds

    def _cut(self, order: np.ndarray, *, full_epoch_0idx: int) -> Tuple[np.ndarray, np.ndarray]:
        """Cut the shuffled order into bins with the configured distribution."""
        s = self.settings
        options = s.cut_options
        if cut_spec(s.distribution).cuts_with_inputs:
            if self.equal_steps is None:
                raise ValueError(
                    f"this distribution={s.distribution!r} plan has no sequence lengths and engine settings to cut "
                    f"full epoch {full_epoch_0idx} with: read its bins from its plan file, or plan it from a costs "
                    "archive with per-sequence lengths and batching (plan_archive / `python -m i6_shard plan`)"
                )
            options = {
                **options,
                **equal_steps_options(
                    self.equal_steps,
                    order=order,
                    full_epoch_0idx=full_epoch_0idx,
                    random_seed_offset=s.random_seed_offset,
                ),
            }
            if self.corpora is not None:  # the file of each read, whose repeats the steps' search keeps apart
                options["keep_apart"] = order
        costs = self.costs[order]
        separate = None
        if self.corpora is not None:

            def separate(positions: np.ndarray, bounds: np.ndarray) -> np.ndarray:
                perm = separate_repeats(
                    order[positions],
                    costs[positions],
                    bounds,
                    num_shards=s.num_bins // s.partition_epoch,
                    partition_epoch=s.partition_epoch,
                )
                return positions[perm]

        positions, bounds = cut_full_epoch(
            costs,
            num_shards=s.num_bins // s.partition_epoch,
            partition_epoch=s.partition_epoch,
            distribution=s.distribution,
            options=options,
            separate=separate,
            returnn_version=self.returnn_version,
        )
        return order[positions], bounds

    # --- queries -------------------------------------------------------------------------

    def bin_index(self, *, epoch: int, shard_index: int) -> int:
        """Index of the bin that ``shard_index`` reads in sub-epoch ``epoch`` (1-based)."""
        self._check_epoch(epoch)
        sub_epoch_idx = (epoch - 1) % self.partition_epoch
        if self.settings.distrib_shard_files:
            return shard_index * self.partition_epoch + sub_epoch_idx
        return sub_epoch_idx

    def file_indices_for(self, *, epoch: int, shard_index: int) -> np.ndarray:
        """Indices into ``keys`` that ``shard_index`` reads in sub-epoch ``epoch``, in RETURNN's order."""
        self._check_epoch(epoch)
        self._check_shard(shard_index)
        order, bounds = self.layout(full_epoch_0idx=(epoch - 1) // self.partition_epoch, shard_index=shard_index)
        b = self.bin_index(epoch=epoch, shard_index=shard_index)
        return order[bounds[b] : bounds[b + 1]]

    def files_for(self, *, epoch: int, shard_index: int) -> List[str]:
        """Keys that ``shard_index`` reads in sub-epoch ``epoch``, in the order RETURNN passes
        them to ``get_sub_epoch_dataset``."""
        if self._key_array is None:
            self._key_array = np.empty(self.num_files, dtype=object)
            self._key_array[:] = self.keys  # keys are str, so no element is taken for a sequence
        # One gather over an object array touches each key twice; a list comprehension is ~2x slower.
        return self._key_array[self.file_indices_for(epoch=epoch, shard_index=shard_index)].tolist()

    def non_contiguous_sub_epochs(
        self, *, full_epoch_0idx: int, layout: Optional[Tuple[np.ndarray, np.ndarray]] = None
    ) -> List[int]:
        """Sub-epochs (0-based, of one full epoch) whose files are not a contiguous part of that full epoch's
        shuffled order. With a distribution that moves files between sub-epochs (``"flexible_auto"`` and its later
        stages) these are the sub-epochs it moved files into; RETURNN's own cut spreads every sub-epoch over the
        order (bin ``r*P + s`` follows bin ``r*P + s - 1``). Sharded plans with a random ``seq_ordering`` only (else there is no one shuffled order
        of the full epoch): [] otherwise. ``layout``: that full epoch's ``(order, bounds)`` if computed already
        (e.g. stored in the plan file), else computed here.

        >>> plan = ShardPlan([f"f{i}" for i in range(13)], [4, 4, 2, 15, 2, 4, 3, 15, 5, 4, 2, 3, 4],
        ...                  PlanSettings(num_shards=3, partition_epoch=3, distribution="balanced"))
        >>> plan.non_contiguous_sub_epochs(full_epoch_0idx=0)
        []
        """
        s = self.settings
        if not s.distrib_shard_files or s.seq_ordering != "random" or self.corpora is not None:
            return []
        shuffled = shuffle_order(self.num_files, seed=s.seed_for(full_epoch_0idx=full_epoch_0idx, shard_index=0))
        position = np.empty(self.num_files, dtype=np.int64)
        position[shuffled] = np.arange(self.num_files, dtype=np.int64)
        order, bounds = self.layout(full_epoch_0idx=full_epoch_0idx) if layout is None else layout
        out = []
        for sub in range(s.partition_epoch):
            pos = np.concatenate(
                [
                    position[order[bounds[r * s.partition_epoch + sub] : bounds[r * s.partition_epoch + sub + 1]]]
                    for r in range(s.num_shards)
                ]
            )
            if int(pos.max()) - int(pos.min()) + 1 != len(pos):
                out.append(sub)
        return out

    def _check_epoch(self, epoch: int) -> None:
        check_int(epoch, name="epoch", minimum=1, hint="RETURNN counts sub-epochs from 1")

    def _check_shard(self, shard_index: int) -> None:
        check_int(shard_index, name="shard_index", hint=f"in 0..{self.num_shards - 1}")
        if not 0 <= shard_index < self.num_shards:
            raise ValueError(
                f"shard_index={shard_index} is out of range for num_shards={self.num_shards}; "
                f"use 0..{self.num_shards - 1}"
            )

    def __repr__(self) -> str:
        return f"ShardPlan(num_files={self.num_files}, {self.settings!r})"


def _check_keys(keys: List) -> None:
    """TypeError naming the first key that is not a str."""
    if set(map(type, keys)) <= {str}:  # fast path; subclasses of str are checked one by one below
        return
    for idx, key in enumerate(keys):
        if not isinstance(key, str):
            raise TypeError(
                f"keys[{idx}]={short_repr(key)} is a {type(key).__name__}; keys are tree keys (str), as in "
                "FileSizes.keys or core.tree_key(tree)"
            )


def _int64_costs(costs, *, keys: List[str]) -> np.ndarray:
    """``costs`` as a contiguous int64 vector paired with ``keys``; TypeError unless integer, ValueError
    if negative, beyond int64 or not one per key."""
    arr = np.asarray(costs)
    if arr.shape != (len(keys),):
        raise ValueError(f"{len(keys)} keys but costs of shape {arr.shape}; they must pair up")
    if arr.size and arr.dtype.kind not in "iu":
        values = arr.tolist()
        bad = next((i for i, x in enumerate(values) if isinstance(x, bool) or not isinstance(x, int)), 0)
        raise TypeError(
            f"costs must be integers (bytes), got dtype {arr.dtype} (entry {bad}: "
            f"{short_repr(values[bad])}); "
            "pass int sizes as collect_file_sizes gives them"
        )
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) >= 2**63:
        raise ValueError(f"costs up to {int(arr.max())} do not fit int64; pass them in a coarser unit")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    bad = first_negative(arr)
    if bad is not None:
        raise ValueError(f"costs must be >= 0 (bytes), but entry {bad} ({short_repr(keys[bad])}) has {int(arr[bad])}")
    return arr

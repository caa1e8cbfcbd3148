"""PlanSettings: every setting that shapes a shard plan, in one frozen object with one
``validate()``; the supported values (seq orderings, distributions, sharding modes) are defined here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from .args import check_bool, check_choice, check_int, check_optional_int
from .cut import CUTS, cut_options, cut_spec, offered_distributions
from .distribute import UNSHARDED_RANK_SEED_STRIDE, check_enough_files, full_epoch_seed
from .flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_max_sub_epoch_deviation

__all__ = [
    "PlanSettings",
    "SEQ_ORDERINGS",
    "DISTRIBUTIONS",
    "DEFAULT_DISTRIBUTION",
    "SEED_LIMIT",
    "check_seq_ordering",
    "check_distribution",
    "sharding_mode",
]

#: The ``seq_ordering`` values of DistributeFilesDataset (it shuffles the files only with "random").
SEQ_ORDERINGS = ("random", "default")
#: The names of the distributions, one row each of the one table ``CUTS`` (pure/cut.py), which says what each needs
#: and is: "returnn" (RETURNN's own greedy cut), "balanced" (balanced per sub-epoch) and "equal_steps" (the ranks of
#: each sub-epoch make equal simulated steps) are offered; "flexible" and "flexible_auto", its stages, still load.
DISTRIBUTIONS = tuple(CUTS)
#: The distributions offered to users (``CutSpec.offered``).
OFFERED_DISTRIBUTIONS = offered_distributions()
#: The distributions that cut from the costs alone (any sharding mode); the others also need each file's sequence
#: lengths and the training's engine settings.
COST_DISTRIBUTIONS = tuple(name for name, spec in CUTS.items() if not spec.cuts_with_inputs)
#: The defaults, each the first of its table: RETURNN's own shuffle of the files and its own greedy cut.
DEFAULT_SEQ_ORDERING, DEFAULT_DISTRIBUTION = SEQ_ORDERINGS[0], DISTRIBUTIONS[0]
#: How the ranks split the files, as ``(distrib_shard_files, same_seed_on_all_ranks)``:
#: "sharded": every rank shuffles with the same seed and reads its own bins (``distrib_shard_files=True``,
#: or ``torch_distributed`` with ``dataset_distribution="shard"``); "unsharded": every rank shuffles all
#: files with its own seed offset (``+ rank * 16127``); "unsharded_same_seed": every rank shuffles all
#: files with the same seed (a ``random_seed_offset`` set in the dataset dict), so all read the same.
SHARDING_MODES = {"sharded": (True, False), "unsharded": (False, False), "unsharded_same_seed": (False, True)}
#: numpy.random.RandomState, RETURNN's shuffle, takes seeds in [0, SEED_LIMIT).
SEED_LIMIT = 2**32
#: What a file's cost counts (see docs/units.md): "bytes" (RETURNN's own measure), "frames" and "seqs" (read
#: from the files' metadata, core/io/file_costs.py), "steps" (expected steps under a costs archive's batching
#: limits, in milli-steps: core/pure/batching.py file_millisteps).
UNITS = ("bytes", "frames", "seqs", "steps")


def sharding_mode(*, distrib_shard_files: bool, same_seed_on_all_ranks: bool) -> str:
    """The name of a sharding mode (a key of :data:`SHARDING_MODES`) from its two flags.

    >>> sharding_mode(distrib_shard_files=True, same_seed_on_all_ranks=True)
    Traceback (most recent call last):
    ...
    ValueError: same_seed_on_all_ranks=True models distrib_shard_files=False with an explicit dataset random_seed_offset; with distrib_shard_files=True all ranks share the seed anyway: drop same_seed_on_all_ranks
    """
    if same_seed_on_all_ranks and distrib_shard_files:
        raise ValueError(
            "same_seed_on_all_ranks=True models distrib_shard_files=False with an explicit dataset "
            "random_seed_offset; with distrib_shard_files=True all ranks share the seed anyway: "
            "drop same_seed_on_all_ranks"
        )
    return next(
        name
        for name, flags in SHARDING_MODES.items()
        if flags == (bool(distrib_shard_files), bool(same_seed_on_all_ranks))
    )


def check_seq_ordering(seq_ordering: Any) -> str:
    """``seq_ordering`` if DistributeFilesDataset supports it, else ``ValueError`` naming the choices.

    >>> check_seq_ordering("laplace:.1000")
    Traceback (most recent call last):
    ...
    ValueError: seq_ordering='laplace:.1000' is not supported by DistributeFilesDataset; use one of ('random', 'default')
    """
    return check_choice(
        seq_ordering, name="seq_ordering", choices=SEQ_ORDERINGS, problem="is not supported by DistributeFilesDataset"
    )


def check_distribution(distribution: Any) -> str:
    """``distribution`` if i6_shard can cut bins that way (a row of ``CUTS``), else ``ValueError`` naming the
    distributions offered.

    >>> check_distribution("even")
    Traceback (most recent call last):
    ...
    ValueError: distribution='even' is unknown; use one of ('returnn', 'balanced', 'equal_steps')
    """
    return cut_spec(distribution).name


def check_unit(unit: Any) -> str:
    """``unit`` if it is one of :data:`UNITS`, else ``ValueError`` naming the choices.

    >>> check_unit("tokens")
    Traceback (most recent call last):
    ...
    ValueError: unit='tokens' is unknown; use one of ('bytes', 'frames', 'seqs', 'steps')
    """
    return check_choice(unit, name="unit", choices=UNITS)


@dataclass(frozen=True)
class PlanSettings:
    """The settings of a shard plan. Construction validates every rule that does not depend on
    the file list (:meth:`validate` without ``num_files``) and turns numpy scalars into Python
    ints and bools, so a PlanSettings is always valid, hashable and JSON-able.

    :ivar num_shards: W, the number of ranks (distributed world size)
    :ivar partition_epoch: P, sub-epochs per full epoch
    :ivar num_epochs: RETURNN's ``num_epochs`` (sub-epochs) the plan covers; None: not fixed
    :ivar seq_ordering: the DistributeFilesDataset's ``seq_ordering``, one of :data:`SEQ_ORDERINGS`
    :ivar random_seed_offset: sharded: the dataset's ``random_seed_offset``, or else the config's
        ``dataset_random_seed_offset`` (RETURNN's default 0), the same on all ranks. Unsharded:
        the base to which RETURNN adds ``rank * 16127``; with ``same_seed_on_all_ranks``, the
        dataset's own ``random_seed_offset``, used unchanged on every rank
    :ivar fixed_random_seed: the dataset's ``fixed_random_seed`` (the seed of every full epoch on
        every rank; offsets are then ignored, as in RETURNN)
    :ivar distrib_shard_files: the files are sharded over the ranks (see :data:`SHARDING_MODES`)
    :ivar same_seed_on_all_ranks: unsharded only: a ``random_seed_offset`` set in the dataset dict,
        which RETURNN does not vary per rank
    :ivar distribution: how a full epoch is cut into bins, one of :data:`DISTRIBUTIONS`
    :ivar max_sub_epoch_deviation: only for a distribution whose ``CutSpec.sub_epoch_bound`` is "given": how far a
        sub-epoch's size (the sum of its costs) may be from the mean sub-epoch's, as a share of it, in [0, 1)
        (default 0.25: +-25%)
    :ivar unit: what the plan's costs count, one of :data:`UNITS` (default "bytes"); the bins are balanced
        by the costs, so this names the unit of every cost figure of the plan
    :ivar preloaded_sub_epochs: of ``num_epochs``, the last sub-epochs that RETURNN only loads ahead
        (``preload_next_n_sub_epochs`` after the training's last) and never trains on; the training's
        ``num_epochs`` is ``num_epochs - preloaded_sub_epochs`` (default 0)

    >>> PlanSettings(num_shards=2, partition_epoch=5, random_seed_offset=-2)
    Traceback (most recent call last):
    ...
    ValueError: full epoch 0 (epochs 1..5) would shuffle with seed -1 (full_epoch_0idx + 1 + random_seed_offset=-2), but numpy's RandomState, RETURNN's shuffle, takes seeds in [0, 2**32): use random_seed_offset >= -1
    >>> PlanSettings(num_shards=4, partition_epoch=3).validate(num_files=10)
    Traceback (most recent call last):
    ...
    ValueError: 10 files cannot fill num_shards*partition_epoch=4*3=12 bins: every rank needs at least one file per sub-epoch. Lower partition_epoch to at most 2, use fewer shards, or split the data into more files.
    """

    num_shards: int
    partition_epoch: int
    num_epochs: Optional[int] = None
    seq_ordering: str = DEFAULT_SEQ_ORDERING
    random_seed_offset: int = 0
    fixed_random_seed: Optional[int] = None
    distrib_shard_files: bool = True
    same_seed_on_all_ranks: bool = False
    distribution: str = DEFAULT_DISTRIBUTION
    max_sub_epoch_deviation: float = DEFAULT_MAX_SUB_EPOCH_DEVIATION
    unit: str = "bytes"
    preloaded_sub_epochs: int = 0

    def __post_init__(self):
        normalized = {
            "num_shards": check_int(self.num_shards, name="num_shards", minimum=1, hint="the number of ranks"),
            "partition_epoch": check_int(
                self.partition_epoch, name="partition_epoch", minimum=1, hint="sub-epochs per full epoch"
            ),
            "num_epochs": check_optional_int(
                self.num_epochs, name="num_epochs", minimum=1, hint="RETURNN's num_epochs counts sub-epochs"
            ),
            "random_seed_offset": check_int(
                self.random_seed_offset, name="random_seed_offset", hint="RETURNN's default is 0"
            ),
            "fixed_random_seed": check_optional_int(self.fixed_random_seed, name="fixed_random_seed", hint="or None"),
            "distrib_shard_files": check_bool(self.distrib_shard_files, name="distrib_shard_files"),
            "same_seed_on_all_ranks": check_bool(self.same_seed_on_all_ranks, name="same_seed_on_all_ranks"),
            "max_sub_epoch_deviation": check_max_sub_epoch_deviation(self.max_sub_epoch_deviation),
            "preloaded_sub_epochs": check_int(
                self.preloaded_sub_epochs,
                name="preloaded_sub_epochs",
                minimum=0,
                hint="RETURNN's preload_next_n_sub_epochs, 0 or more",
            ),
        }
        for name, value in normalized.items():
            object.__setattr__(self, name, value)
        self.validate()

    @classmethod
    def from_mode(cls, *, sharding: str = "sharded", **kwargs) -> "PlanSettings":
        """Settings with the sharding mode given by name (a key of :data:`SHARDING_MODES`).

        >>> PlanSettings.from_mode(sharding="unsharded", num_shards=2, partition_epoch=1).distrib_shard_files
        False
        """
        if sharding not in SHARDING_MODES:
            raise ValueError(f"sharding={sharding!r} is unknown; use one of {tuple(SHARDING_MODES)}")
        distrib_shard_files, same_seed = SHARDING_MODES[sharding]
        return cls(distrib_shard_files=distrib_shard_files, same_seed_on_all_ranks=same_seed, **kwargs)

    def validate(self, *, num_files: Optional[int] = None) -> None:
        """Raise ``TypeError``/``ValueError``, naming the setting and the fix, for settings that
        cannot be planned or that RETURNN would fail on; with ``num_files``, also for a file list
        too short to give every bin a file (RETURNN's bare ``assert all(files_per_bin)``).

        Seeds: RETURNN shuffles full epoch k with ``RandomState(fixed_random_seed)`` or
        ``RandomState(k + 1 + offset)`` (offset: ``random_seed_offset``, plus ``rank * 16127``
        unsharded unless ``same_seed_on_all_ranks``), which takes only seeds in [0, 2**32). The
        smallest seed (full epoch 0, rank 0) and, with ``num_epochs``, the largest are checked.
        """
        check_seq_ordering(self.seq_ordering)
        check_distribution(self.distribution)
        if cut_spec(self.distribution).sharded_only and not self.distrib_shard_files:
            raise ValueError(
                f"distribution={self.distribution!r} equalizes the steps of ranks that read their own files, but the "
                f"plan is {self.sharding!r} (every rank reads every file): plan sharded (distrib_shard_files=True, "
                "sharding='sharded') or choose another distribution"
            )
        check_max_sub_epoch_deviation(self.max_sub_epoch_deviation)
        check_unit(self.unit)
        if self.preloaded_sub_epochs and (self.num_epochs is None or self.preloaded_sub_epochs >= self.num_epochs):
            raise ValueError(
                f"num_epochs={self.num_epochs} with preloaded_sub_epochs={self.preloaded_sub_epochs} leaves "
                f"the training {self.training_num_epochs} sub-epochs: the training's num_epochs must be "
                "1 or more (the preloaded sub-epochs come after its last)"
            )
        sharding_mode(distrib_shard_files=self.distrib_shard_files, same_seed_on_all_ranks=self.same_seed_on_all_ranks)
        if self.seq_ordering == "random":  # only then does RETURNN shuffle, i.e. use the seeds
            if self.fixed_random_seed is not None:
                if not 0 <= self.fixed_random_seed < SEED_LIMIT:
                    raise ValueError(
                        f"fixed_random_seed={self.fixed_random_seed} is a shuffle seed, but numpy's "
                        "RandomState, RETURNN's shuffle, takes seeds in [0, 2**32): choose one in "
                        "that range"
                    )
            else:
                last_full_epoch = 0 if self.num_epochs is None else (self.num_epochs - 1) // self.partition_epoch
                top_rank = self.num_shards - 1 if self.per_rank_seed_offset else 0
                for k, rank in ((0, 0), (last_full_epoch, top_rank)):  # the smallest and the largest seed
                    self.seed_for(full_epoch_0idx=k, shard_index=rank)
        if num_files is not None:
            check_enough_files(
                num_files, num_shards=self.num_bins // self.partition_epoch, partition_epoch=self.partition_epoch
            )

    # --- what follows from the settings ------------------------------------------------------

    @property
    def sharding(self) -> str:
        """The sharding mode's name, a key of :data:`SHARDING_MODES`."""
        return sharding_mode(
            distrib_shard_files=self.distrib_shard_files, same_seed_on_all_ranks=self.same_seed_on_all_ranks
        )

    @property
    def num_bins(self) -> int:
        """Bins per full epoch in one layout: W*P sharded, P (per rank) unsharded."""
        return self.num_shards * self.partition_epoch if self.distrib_shard_files else self.partition_epoch

    @property
    def num_layouts(self) -> int:
        """Layouts per full epoch: one shared by all ranks when sharded, one per rank unsharded."""
        return 1 if self.distrib_shard_files else self.num_shards

    @property
    def cut_options(self) -> Dict[str, Any]:
        """Keyword options of the distribution's cut (see ``core.pure.cut.CUTS``), empty if it has none.

        >>> PlanSettings(num_shards=2, partition_epoch=2, distribution="flexible").cut_options
        {'max_sub_epoch_deviation': 0.25}
        """
        return cut_options(self.distribution, max_sub_epoch_deviation=self.max_sub_epoch_deviation)

    @property
    def per_rank_seed_offset(self) -> bool:
        """Whether RETURNN adds ``rank * 16127`` to the seed offset (unsharded, no dataset offset)."""
        return not self.distrib_shard_files and not self.same_seed_on_all_ranks

    @property
    def rank_seeds_differ(self) -> bool:
        """Whether ranks shuffle with different seeds (unsharded, per-rank offset, random order)."""
        return (
            self.per_rank_seed_offset
            and self.seq_ordering == "random"
            and self.fixed_random_seed is None
            and self.num_shards > 1
        )

    def seed_for(self, *, full_epoch_0idx: int, shard_index: int = 0) -> int:
        """Shuffle seed of a full epoch on a rank (the same on every rank when sharded).

        :raises ValueError: if the seed is outside what numpy's RandomState takes, naming the full epoch
        """
        per_rank = self.per_rank_seed_offset
        offset = self.random_seed_offset + (shard_index * UNSHARDED_RANK_SEED_STRIDE if per_rank else 0)
        seed = full_epoch_seed(full_epoch_0idx, random_seed_offset=offset, fixed_random_seed=self.fixed_random_seed)
        if not 0 <= seed < SEED_LIMIT:
            rank_term = (
                f" + rank*{UNSHARDED_RANK_SEED_STRIDE} on rank {shard_index}" if per_rank and shard_index else ""
            )
            fix = (
                "use random_seed_offset >= -1"
                if seed < 0
                else "lower random_seed_offset" + (" or num_epochs" if full_epoch_0idx else "")
            )
            raise ValueError(
                f"full epoch {full_epoch_0idx} (epochs {full_epoch_0idx * self.partition_epoch + 1}.."
                f"{(full_epoch_0idx + 1) * self.partition_epoch}) would shuffle with seed {seed} (full_epoch_0idx + "
                f"1 + random_seed_offset={self.random_seed_offset}{rank_term}), but numpy's RandomState, RETURNN's "
                f"shuffle, takes seeds in [0, 2**32): {fix}"
            )
        return seed

    @property
    def training_num_epochs(self) -> Optional[int]:
        """The training's ``num_epochs``: the planned sub-epochs without the preloaded ones (None if not fixed)."""
        return None if self.num_epochs is None else self.num_epochs - self.preloaded_sub_epochs

    def replace(self, **changes: Any) -> "PlanSettings":
        """A copy with ``changes`` (validated again), e.g. another distribution to compare with."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> Dict[str, Any]:
        """The settings as JSON types (``same_seed_on_all_ranks`` only when True, ``max_sub_epoch_deviation``,
        ``unit`` and ``preloaded_sub_epochs`` only when not the default, as plan files store them: plans
        without them keep their bytes)."""
        d = dataclasses.asdict(self)
        if not d["same_seed_on_all_ranks"]:
            del d["same_seed_on_all_ranks"]
        if d["max_sub_epoch_deviation"] == DEFAULT_MAX_SUB_EPOCH_DEVIATION:
            del d["max_sub_epoch_deviation"]
        if d["unit"] == "bytes":
            del d["unit"]
        if not d["preloaded_sub_epochs"]:
            del d["preloaded_sub_epochs"]
        return d

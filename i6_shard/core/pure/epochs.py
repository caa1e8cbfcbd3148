"""Epoch accounting for DistributeFilesDataset: RETURNN's ``num_epochs`` (which counts
sub-epochs) versus passes over the data, in the sharded and the unsharded mode."""

from __future__ import annotations

from fractions import Fraction
from numbers import Rational
from typing import Optional, Union

__all__ = ["num_epochs_for_passes", "passes_for_num_epochs", "plan_covers", "plan_coverage_problem"]

Number = Union[int, float, Fraction]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive int")
    return value


def passes_per_full_epoch(*, num_shards: int, distrib_shard_files: bool = True) -> int:
    """How many times the training as a whole reads the data set in one full epoch
    (``partition_epoch`` sub-epochs), as ``DistributeFilesDataset.init_seq_order`` hands out files.

    - Sharded (``distrib_shard_files=True``): all ranks cut the same shuffled list into
      ``num_shards * partition_epoch`` bins and each reads only its own ``partition_epoch``
      bins, so the ranks together read every file once: 1 pass.
    - Unsharded: every rank cuts the whole list into ``partition_epoch`` bins with its own
      seed and reads all of them, so ``num_shards`` ranks make ``num_shards`` passes.

    >>> passes_per_full_epoch(num_shards=8), passes_per_full_epoch(num_shards=8, distrib_shard_files=False)
    (1, 8)
    """
    _positive_int("num_shards", num_shards)
    if not isinstance(distrib_shard_files, bool):
        raise TypeError(f"distrib_shard_files={distrib_shard_files!r} must be a bool")
    return 1 if distrib_shard_files else num_shards


def _as_fraction(name: str, value: Number) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Rational)):
        raise TypeError(f"{name}={value!r} must be a number (int, float or fractions.Fraction)")
    frac = Fraction(value).limit_denominator(10**6) if isinstance(value, float) else Fraction(value)
    if frac <= 0:
        raise ValueError(f"{name}={value!r} must be > 0")
    return frac


def num_epochs_for_passes(
    passes: Number, *, partition_epoch: int, num_shards: int = 1, distrib_shard_files: bool = True
) -> int:
    """RETURNN's ``num_epochs`` (sub-epochs) for reading the data set ``passes`` times in total,
    summed over all ranks (see :func:`passes_per_full_epoch` for why the modes differ).

    Sharded: ``num_epochs = passes * partition_epoch``. Unsharded with W ranks:
    ``num_epochs = passes * partition_epoch / W``. Counts are exact only up to RETURNN
    dropping the rest of a sub-epoch on the other ranks when the first rank runs out.

    :raises ValueError: if no whole number of sub-epochs gives ``passes``; the message
        names the nearest pass counts that do

    >>> num_epochs_for_passes(3, partition_epoch=20, num_shards=4)
    60
    >>> num_epochs_for_passes(1, partition_epoch=10, num_shards=4, distrib_shard_files=False)
    Traceback (most recent call last):
    ...
    ValueError: passes=1 needs num_epochs=5/2 sub-epochs (partition_epoch=10, 4 passes per full epoch); use passes=4/5 (num_epochs=2) or passes=6/5 (num_epochs=3), or change partition_epoch
    """
    _positive_int("partition_epoch", partition_epoch)
    per_full = passes_per_full_epoch(num_shards=num_shards, distrib_shard_files=distrib_shard_files)
    frac = _as_fraction("passes", passes)
    num_epochs = frac * partition_epoch / per_full
    if num_epochs.denominator != 1:
        lo, hi = int(num_epochs), int(num_epochs) + 1
        options = [f"passes={Fraction(e * per_full, partition_epoch)} (num_epochs={e})" for e in (lo, hi) if e >= 1]
        raise ValueError(
            f"passes={passes!r} needs num_epochs={num_epochs} sub-epochs (partition_epoch={partition_epoch}, "
            f"{per_full} passes per full epoch); use {' or '.join(options)}, or change partition_epoch"
        )
    return int(num_epochs)


def passes_for_num_epochs(
    num_epochs: int, *, partition_epoch: int, num_shards: int = 1, distrib_shard_files: bool = True
) -> Fraction:
    """How many times ``num_epochs`` sub-epochs read the data set in total, summed over all ranks;
    the inverse of :func:`num_epochs_for_passes`.

    >>> passes_for_num_epochs(50, partition_epoch=20, num_shards=4)
    Fraction(5, 2)
    >>> passes_for_num_epochs(50, partition_epoch=20, num_shards=4, distrib_shard_files=False)
    Fraction(10, 1)
    """
    _positive_int("num_epochs", num_epochs)
    _positive_int("partition_epoch", partition_epoch)
    per_full = passes_per_full_epoch(num_shards=num_shards, distrib_shard_files=distrib_shard_files)
    return Fraction(num_epochs * per_full, partition_epoch)


def plan_covers(*, plan_full_epochs: int, partition_epoch: int, needed_epoch: int) -> bool:
    """Whether a plan of ``plan_full_epochs`` whole full epochs holds sub-epoch ``needed_epoch`` (1-based): the one
    rule of "the plan fits the training", which :func:`plan_coverage_problem` explains where it does not.

    >>> plan_covers(plan_full_epochs=2, partition_epoch=3, needed_epoch=6), plan_covers(
    ...     plan_full_epochs=2, partition_epoch=3, needed_epoch=7)
    (True, False)
    """
    return (needed_epoch - 1) // partition_epoch < plan_full_epochs


def plan_coverage_problem(
    *, plan_full_epochs: int, partition_epoch: int, needed_epoch: int, preload: int
) -> Optional[str]:
    """The one rule of whether a plan holds what a training reads: RETURNN reads sub-epochs up to the training's
    last plus the ``preload`` it loads after it (``needed_epoch``), and a plan holds whole full epochs. None if
    the plan's ``plan_full_epochs`` cover ``needed_epoch``, else what is missing and the fix, for the plan
    job, the command line and the RETURNN-side class alike.

    >>> plan_coverage_problem(plan_full_epochs=2, partition_epoch=3, needed_epoch=6, preload=1) is None
    True
    >>> print(plan_coverage_problem(plan_full_epochs=2, partition_epoch=3, needed_epoch=7, preload=1))
    the plan covers sub-epochs 1..6 (2 full epochs of partition_epoch=3), but sub-epoch 7 is read (RETURNN loads preload_next_n_sub_epochs=1 sub-epochs ahead, also past the last one): plan 3 full epochs, e.g. ShardPlanJob(..., num_epochs=6) or `python -m i6_shard plan --num-epochs 6` (the training's num_epochs: both plan the preloaded sub-epochs themselves)
    """
    p = partition_epoch
    if plan_covers(plan_full_epochs=plan_full_epochs, partition_epoch=p, needed_epoch=needed_epoch):
        return None
    return (
        f"the plan covers sub-epochs 1..{plan_full_epochs * p} ({plan_full_epochs} full epochs of "
        f"partition_epoch={p}), but sub-epoch {needed_epoch} is read (RETURNN loads "
        f"preload_next_n_sub_epochs={preload} sub-epochs ahead, also past the last one): plan "
        f"{(needed_epoch - 1) // p + 1} full epochs, e.g. ShardPlanJob(..., num_epochs={needed_epoch - preload}) "
        f"or `python -m i6_shard plan --num-epochs {needed_epoch - preload}` (the training's num_epochs: both "
        "plan the preloaded sub-epochs themselves)"
    )

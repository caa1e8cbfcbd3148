"""What a change of GPU count does to the data: a sharded training that resumes at some sub-epoch under
another plan (another ``num_shards``) reads files of the affected full epoch twice or never; which, on
which rank, and the full-epoch boundaries where resuming reads every file once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import numpy as np

from .args import check_int
from .plan import ShardPlan
from .settings import PlanSettings  # noqa: F401 (doctests)
from .text import first_difference


@dataclass(frozen=True)
class ResumeFullEpoch:
    """One full epoch that a resume cuts in two: sub-epochs ``first_epoch..resume_epoch-1`` were read under
    the old plan, ``resume_epoch..last_epoch`` are read under the new one. Arrays have shape [num_files]
    (one value per file entry of the plans), -1 where there is nothing.

    :ivar old_rank, old_epoch: the old rank and sub-epoch that read the entry before the resume
    :ivar new_rank, new_epoch: the new rank and sub-epoch that read it from the resume on
    :ivar planned_rank, planned_epoch: where the old plan would have read it from the resume on, had the
        training gone on unchanged (the entries that are then never read are lost from these ranks)
    """

    full_epoch_0idx: int
    first_epoch: int
    resume_epoch: int
    last_epoch: int
    old_rank: np.ndarray
    old_epoch: np.ndarray
    new_rank: np.ndarray
    new_epoch: np.ndarray
    planned_rank: np.ndarray
    planned_epoch: np.ndarray

    @property
    def reads(self) -> np.ndarray:
        """int64 [num_files]: how often each entry is read in this full epoch (0, 1 or 2)."""
        return (self.old_rank >= 0).astype(np.int64) + (self.new_rank >= 0)

    @property
    def read_twice(self) -> np.ndarray:
        """Sorted entry indices read both before and after the resume."""
        return np.flatnonzero(self.reads == 2)

    @property
    def never_read(self) -> np.ndarray:
        """Sorted entry indices no rank reads in this full epoch."""
        return np.flatnonzero(self.reads == 0)

    def read_twice_per_rank(self, num_ranks: int) -> np.ndarray:
        """int64 [num_ranks]: per new rank, the entries it reads from the resume on that were read before."""
        return np.bincount(self.new_rank[self.read_twice], minlength=num_ranks)[:num_ranks]

    def never_read_per_rank(self, num_ranks: int) -> np.ndarray:
        """int64 [num_ranks]: per old rank, the entries it would still have read that now no rank reads."""
        return np.bincount(self.planned_rank[self.never_read], minlength=num_ranks)[:num_ranks]


@dataclass(frozen=True)
class PlanChange:
    """The comparison of two plans for a training resumed at ``resume_epoch``.

    :ivar affected: the full epochs the resume cuts in two (none when it resumes at a full-epoch boundary)
    :ivar boundaries: the resume epochs at the full-epoch boundaries around ``resume_epoch`` (the one at or
        before it: redo the sub-epochs since from the checkpoint there; the one after: finish the full
        epoch on the old ranks), each with its own affected full epochs (always none)
    """

    old: ShardPlan
    new: ShardPlan
    resume_epoch: int
    affected: Tuple[ResumeFullEpoch, ...]
    boundaries: Tuple[Tuple[int, Tuple[ResumeFullEpoch, ...]], ...]

    @property
    def at_boundary(self) -> bool:
        return not self.affected


def _check_comparable(old: ShardPlan, new: ShardPlan) -> None:
    for name, plan in (("old", old), ("new", new)):
        if not isinstance(plan, ShardPlan):
            raise TypeError(f"{name}={plan!r} must be a ShardPlan (e.g. PlanFile.plan of a plan file)")
        if not plan.settings.distrib_shard_files:
            raise ValueError(
                f"the {name} plan is unsharded (distrib_shard_files=False): every rank shuffles all files "
                "with its own seed, which does not depend on num_shards, so there is no split to compare; "
                "compare sharded plans"
            )
    if old.partition_epoch != new.partition_epoch:
        raise ValueError(
            f"the plans have partition_epoch={old.partition_epoch} and {new.partition_epoch}, so their "
            "full epochs do not line up; plan the new num_shards with the same partition_epoch"
        )
    if old.keys != new.keys:
        diff = first_difference(old.keys, new.keys)
        raise ValueError(
            f"the plans are of different file lists ({old.num_files} and {new.num_files} entries, first "
            f"difference at entry {diff}); plan both from the same file sizes"
        )


#: A full epoch's ``(order, bounds)`` by its 0-based index: a plan file's stored bins, or ``ShardPlan.layout``.
Layout = Callable[[int], Tuple[np.ndarray, np.ndarray]]


def _reader(plan: ShardPlan, layout: Layout, *, full_epoch_0idx: int, epochs: range) -> Tuple[np.ndarray, np.ndarray]:
    """Rank and sub-epoch that reads each entry in ``epochs`` (within one full epoch), -1 for none."""
    rank = np.full(plan.num_files, -1, dtype=np.int64)
    epoch = np.full(plan.num_files, -1, dtype=np.int64)
    if len(epochs):
        order, bounds = layout(full_epoch_0idx)
        for e in epochs:
            for r in range(plan.num_shards):
                b = plan.bin_index(epoch=e, shard_index=r)
                entries = order[bounds[b] : bounds[b + 1]]
                rank[entries] = r
                epoch[entries] = e
    return rank, epoch


def _affected(
    old: ShardPlan, new: ShardPlan, resume_epoch: int, old_layout: Layout, new_layout: Layout
) -> Tuple[ResumeFullEpoch, ...]:
    part = new.partition_epoch
    k = (resume_epoch - 1) // part
    first, last = k * part + 1, (k + 1) * part
    if resume_epoch == first:
        return ()
    old_rank, old_epoch = _reader(old, old_layout, full_epoch_0idx=k, epochs=range(first, resume_epoch))
    new_rank, new_epoch = _reader(new, new_layout, full_epoch_0idx=k, epochs=range(resume_epoch, last + 1))
    planned_rank, planned_epoch = _reader(old, old_layout, full_epoch_0idx=k, epochs=range(resume_epoch, last + 1))
    return (
        ResumeFullEpoch(
            k, first, resume_epoch, last, old_rank, old_epoch, new_rank, new_epoch, planned_rank, planned_epoch
        ),
    )


def compare_plans(
    old: ShardPlan,
    new: ShardPlan,
    *,
    resume_epoch: int,
    old_layout: Optional[Layout] = None,
    new_layout: Optional[Layout] = None,
) -> PlanChange:
    """What the ranks read when a sharded training runs sub-epochs ``1..resume_epoch-1`` under ``old`` and
    resumes at ``resume_epoch`` under ``new`` (e.g. another ``num_shards``), as RETURNN's
    DistributeFilesDataset does it: a resumed training cuts the full epoch of ``resume_epoch`` anew for the
    new number of ranks (``init_seq_order``), so the part already read under the old cut is read again in
    part, and the rest of it in part never.

    Resuming at a full-epoch boundary (``(resume_epoch - 1) % partition_epoch == 0``) reads every file once.

    :param old_layout: the old plan's ``(order, bounds)`` of a full epoch by its 0-based index; None: computed
        (``old.layout``). A plan file's stored bins go here (``compare_plan_files``): what the training read.
    :param new_layout: likewise for the new plan
    :raises ValueError: for unsharded plans, plans of different file lists or partition_epoch values

    >>> keys, sizes = [f"f{i}" for i in range(12)], [1] * 12
    >>> old = ShardPlan(keys, sizes, PlanSettings(num_shards=4, partition_epoch=3))
    >>> change = compare_plans(old, old.with_settings(num_shards=3), resume_epoch=2)
    >>> [(int(a.read_twice.size), int(a.never_read.size)) for a in change.affected]  # 4 files read before
    [(2, 2)]
    >>> [(e, len(affected)) for e, affected in change.boundaries]
    [(1, 0), (4, 0)]
    """
    resume_epoch = check_int(
        resume_epoch,
        name="resume_epoch",
        minimum=1,
        hint="the first sub-epoch the resumed training runs, 1-based as RETURNN counts",
    )
    _check_comparable(old, new)
    for which, plan in (("old", old), ("new", new)):
        planned = plan.settings.num_epochs
        if planned is not None and resume_epoch > planned:
            raise ValueError(
                f"resume_epoch={resume_epoch}, but the {which} plan holds sub-epochs 1..{planned}: give "
                f"the first sub-epoch the resumed training runs, at most {planned}"
            )
    part = new.partition_epoch
    layouts = tuple(
        given or (lambda k, p=plan: p.layout(full_epoch_0idx=k))
        for given, plan in ((old_layout, old), (new_layout, new))
    )
    affected = _affected(old, new, resume_epoch, *layouts)
    k = (resume_epoch - 1) // part
    edges = [k * part + 1] + ([(k + 1) * part + 1] if affected else [])
    boundaries = tuple((e, _affected(old, new, e, *layouts)) for e in edges)
    return PlanChange(old=old, new=new, resume_epoch=resume_epoch, affected=affected, boundaries=boundaries)

"""What a training consumed, measured from RETURNN's own logs (read by :mod:`i6_shard.core.io.returnn_log`): per
sub-epoch and rank the files given (against the plan), the sequences and frames consumed out of those available,
the share dropped, the steps; per full epoch the passes made; the alarms. JSON types in, JSON types out; the
training report renders it."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .batching import SyncMode
from .consumption import dropped_share, expected_steps, infer_partition_epoch
from .fmt import json_float
from .plan import ShardPlan
from .training_corpora import corpora_contributions, expected_reads_by_key
from .reads import SubEpochRead, check_reads
from .record_blocks import RankColumns, RecordBlock, TrainRecords

#: The training's logs (:class:`i6_shard.core.io.returnn_log.TrainingLog`), read here by attribute only.
TrainingLog = Any
SubEpochLog = Any

TRAIN_SUMMARY_FORMAT_VERSION = 1
#: Alarm when the mean dropped share of the frames per sub-epoch exceeds this (the plan report's "high").
DEFAULT_MAX_DROPPED = 0.05
#: Alarm when a sub-epoch makes fewer than this share of the steps its data should give (RETURNN #1738).
DEFAULT_MIN_STEPS_RATIO = 0.75
#: Places named per alarm before "and N more".
_MAX_PLACES = 5
#: (sub-epoch, rank) records a report holds at most (each takes about 1 KB in summary.json, about 150 bytes in the
#: scratch file where the reader and :class:`TrainRecords` keep them):
#: 64 ranks over 16,384 sub-epochs. Logs of a few KB can name thousands of ranks and sub-epochs.
MAX_REPORT_RECORDS = 1 << 20


def check_report_size(*, num_epochs: int, num_ranks: int) -> None:
    """Refuse logs whose report would hold more than :data:`MAX_REPORT_RECORDS` (sub-epoch, rank) records,
    before any is made.

    >>> check_report_size(num_epochs=3000, num_ranks=3000)
    Traceback (most recent call last):
    ...
    ValueError: the logs name 3,000 sub-epochs of 3,000 ranks, 9,000,000 (sub-epoch, rank) records, more than the 1,048,576 a report holds; give the logs of one training, cut to the sub-epochs to report (a sub-epoch or rank far from the others is a damaged line)
    """
    if num_epochs * num_ranks > MAX_REPORT_RECORDS:
        raise ValueError(
            f"the logs name {num_epochs:,} sub-epochs of {num_ranks:,} ranks, {num_epochs * num_ranks:,} "
            f"(sub-epoch, rank) records, more than the {MAX_REPORT_RECORDS:,} a report holds; give the "
            "logs of one training, cut to the sub-epochs to report (a sub-epoch or rank far from the "
            "others is a damaged line)"
        )


def _places(items: Sequence[str], total: Optional[int] = None) -> str:
    """The first places of ``items`` and how many more (of ``total``, if only the first few are given)."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:_MAX_PLACES])
    return shown + (f" and {total - _MAX_PLACES} more" if total > _MAX_PLACES else "")


def _complete_is_mean(log: TrainingLog, epochs: Sequence[int]) -> bool:
    """Whether the logged ``complete`` is one value for all ranks (a mean, ``sync_complete_frac``,
    default from behavior_version 33): at every step all ranks log the same value although their
    datasets hold different numbers of sequences. Each rank's table is taken once per pass, one at a time (the
    tables may be read back from a scratch file): first the steps and counts per sub-epoch, then the values."""
    if log.num_ranks < 2:
        return False
    at = np.asarray(epochs, dtype=np.int64)
    present = np.zeros(len(at), dtype=np.int64)
    min_steps = np.full(len(at), np.iinfo(np.int64).max)
    first_seqs = np.zeros(len(at), dtype=np.int64)
    seqs_differ = np.zeros(len(at), dtype=bool)
    for r, rank_log in enumerate(log.ranks):
        t = rank_log.table
        i = np.searchsorted(at, t.epoch)
        present[i] += 1
        min_steps[i] = np.minimum(min_steps[i], t.num_steps)
        if r == 0:
            first_seqs[i] = t.dataset_num_seqs
        else:
            seqs_differ[i] |= t.dataset_num_seqs != first_seqs[i]
    compared = np.flatnonzero((present == log.num_ranks) & (min_steps > 0))
    first: Dict[int, np.ndarray] = {}
    for r, rank_log in enumerate(log.ranks):
        t = rank_log.table
        rows = np.searchsorted(t.epoch, at[compared])
        for i, row in zip(compared.tolist(), rows.tolist()):
            s = int(t.step_start[row])
            values = t.step_complete[s : s + int(min_steps[i])]
            if r == 0:
                first[i] = values.copy()
            elif not np.array_equal(first[i], values, equal_nan=True):
                return False
    return bool(seqs_differ[compared].any())


def _lengths_of(
    keys: Optional[Sequence[str]], lengths: Mapping[str, Tuple[int, int]]
) -> Tuple[Optional[int], Optional[int]]:
    if keys is None or any(k not in lengths for k in keys):
        return None, None
    return sum(lengths[k][0] for k in keys), sum(lengths[k][1] for k in keys)


def analyze_training(log: TrainingLog, **kwargs: Any) -> Dict[str, Any]:
    """The summary (JSON types) of a training from its logs, each sub-epoch's ``ranks`` listing its records (see
    :func:`analyze_training_records`, which takes the same arguments and keeps the records in compact grids)."""
    summary, records = analyze_training_records(log, **kwargs)
    for i, se in enumerate(summary["sub_epochs"]):
        se["ranks"] = list(records.rows(i))
    return summary


def analyze_training_records(
    log: TrainingLog,
    *,
    file_lengths: Optional[Mapping[str, Tuple[int, int]]] = None,
    plan: Optional[ShardPlan] = None,
    partition_epoch: Optional[int] = None,
    max_dropped: float = DEFAULT_MAX_DROPPED,
    min_steps_ratio: float = DEFAULT_MIN_STEPS_RATIO,
    sync: SyncMode = SyncMode(),
    filtered_lengths: Optional[Mapping[str, Tuple[int, int]]] = None,
) -> Tuple[Dict[str, Any], "TrainRecords"]:
    """The summary (JSON types) of a training from its logs, and its (sub-epoch, rank) records.

    The records are held as :class:`TrainRecords`: a rank's column at a time written to the log's scratch file
    (``log.spill``, where the reader's records wait; without one, memory) and read back a block of sub-epochs at a
    time, so that memory grows with the sub-epochs' summary, not with the records; each sub-epoch's ``ranks`` is None
    here, and ``records.rows(i)`` gives the dicts that :func:`analyze_training` lists there.

    Per sub-epoch (``sub_epochs``, sorted by ``epoch``) and rank (``ranks``, in rank order):
    ``consumed_seqs``/``consumed_frames`` (summed over the logged steps), ``available_seqs``/
    ``available_frames`` (what the rank's files hold, from ``file_lengths``; without them the
    sequences the dataset offered and no frames), ``offered_seqs`` (the dataset's count),
    ``steps``, ``num_files`` and ``files_match_plan`` (None without a plan). Per sub-epoch also
    ``dropped_fraction`` (of the frames: ``1 - sum consumed / sum available``) and
    ``expected_steps`` (the steps after which its first rank runs out at the training's mean
    frames per step, from the plan's files when a plan is given; under param sync, the steps the others
    run on to their next sync). Top level: ``dropped_fraction`` (mean over finished sub-epochs),
    ``full_epochs``, ``passes`` (made, promised), ``sync`` (the sync mode the expected steps assume),
    ``alarms`` and ``notes`` (lists of str). Values the logs do not give are None.

    :param file_lengths: tree key -> (sequences, frames) of every file, e.g. from the HDF files
    :param plan: the plan the training should follow (its num_shards must be the number of ranks)
    :param partition_epoch: sub-epochs per full epoch, if there is no plan (else inferred from the files)
    :param max_dropped: alarm above this mean dropped share
    :param min_steps_ratio: alarm where a sub-epoch's steps are below this share of the expected
    :param sync: how the ranks synced (``torch_distributed``'s ``reduce_type``, ``param_sync_step``)
    :param filtered_lengths: tree key -> (sequences, frames) of the file that the engine's length filter
        (``max_seq_length``/``min_seq_length``) removes before the batches: shown apart (``filtered_fraction``)
        and not counted as dropped (the available data is what passes the filter)
    """
    if not 0.0 <= max_dropped <= 1.0:
        raise ValueError(f"max_dropped={max_dropped!r} must be a share in [0, 1], e.g. 0.05")
    if not 0.0 < min_steps_ratio <= 1.0:
        raise ValueError(f"min_steps_ratio={min_steps_ratio!r} must be in (0, 1], e.g. 0.75")
    if not isinstance(sync, SyncMode):
        raise TypeError(f"sync has type {type(sync).__name__}; give a SyncMode, e.g. SyncMode('param', 100)")
    check_report_size(num_epochs=len(log.epochs), num_ranks=log.num_ranks)
    epochs = log.epochs
    a = _Analysis(log=log, lengths=dict(file_lengths or {}), epochs=epochs, num_ranks=log.num_ranks)
    a.filtered = dict(filtered_lengths) if filtered_lengths is not None else None
    files_found = _check_files_found(a, getattr(log, "files_from", None) or {})
    usable_plan, partition_epoch = _usable_plan(a, plan, partition_epoch)
    keys_plan = usable_plan
    usable_plan, partition_epoch = _plan_of_wrapped(a, usable_plan, partition_epoch, getattr(log, "files_from", None))
    complete_is_mean = _complete_is_mean(log, epochs)
    if not log.ranks[0].frames_dim:
        a.notes.append(
            "the logs have no per-step batch sizes: set log_batch_size=True and log_verbosity=5 "
            "to measure frames (the builders' training_job_kwargs do)"
        )
        if complete_is_mean:
            a.notes.append(
                "the logged 'complete' is the mean over the ranks (sync_complete_frac, the default from "
                "behavior_version 33), so it does not show one rank's consumption"
            )
    if usable_plan is not None:
        _check_plan_seeds(a, usable_plan)
    store = getattr(log, "spill", None)  # (the records go where the log's records wait: None, memory)
    a.rec = TrainRecords(len(epochs), [r.rank for r in log.ranks], filtered=a.filtered is not None, store=store)
    plan_check = _PlanCheck(a, usable_plan) if usable_plan is not None else None
    sources = _per_rank_records(a, complete_is_mean=complete_is_mean, plan_check=plan_check)
    a.notes.extend(note for rank_log in log.ranks for note in rank_log.notes)
    if plan_check is not None:
        plan_check.finish()
    partition_epoch, inferred = _partition_epoch(a, partition_epoch, files_found=files_found)
    sharded = _sharded(a, usable_plan, partition_epoch)
    m = _measures(a, usable_plan, sync_every=sync.sync_every)
    sub_epochs = _sub_epoch_entries(a, m, partition_epoch)
    _sub_epoch_alarms(a, sub_epochs, m, usable_plan=usable_plan, min_steps_ratio=min_steps_ratio)
    drops = [s["dropped_fraction"] for s in sub_epochs if s["finished"] and s["dropped_fraction"] is not None]
    mean_drop = json_float(float(np.mean(drops))) if drops else None
    if mean_drop is not None and mean_drop > max_dropped:
        a.alarms.append(_high_loss_alarm(sub_epochs, mean_drop=mean_drop, max_dropped=max_dropped))
    universe = (
        list(dict.fromkeys(keys_plan.keys))
        if keys_plan is not None
        else [a.keys[k] for k in np.flatnonzero(a.logged).tolist()]  # (the order counts for nothing: sums and sorts)
    )
    universe_seqs, universe_frames = _lengths_of(universe, a.lengths)
    expected_reads = 1 if sharded else a.num_ranks
    full_epochs = (
        []
        if partition_epoch is None
        else _full_epochs(
            a, m, partition_epoch=partition_epoch, universe=universe, expected_reads=expected_reads, plan=usable_plan
        )
    )
    made = None
    done = np.asarray(a.finished, dtype=bool)
    if universe_frames and a.num_ranks and done.any() and m["frames_known"][done].all():
        made = json_float(m["frames_sum"][done].sum() / universe_frames)
    promised = None if partition_epoch is None else json_float(sum(a.finished) / partition_epoch * expected_reads)
    running = [e for e, f in zip(a.epochs, a.finished) if not f]
    if running:
        a.notes.append(f"sub-epochs {running} have not finished (running, or stopped); they are not in the means")
    summary = {
        "format_version": TRAIN_SUMMARY_FORMAT_VERSION,
        "num_ranks": a.num_ranks,
        "logs": [r.source for r in log.ranks],
        "frames_dim": log.ranks[0].frames_dim,
        "consumed_seqs_from": sorted(sources - {"unknown"}) or None,
        "complete_is_mean": complete_is_mean,
        "partition_epoch": partition_epoch,
        "partition_epoch_inferred": inferred,
        "sharded": sharded,
        # a wrapper's dataset without its partition_epoch or a plan: whether the ranks split the files is not told
        **({"sharded_known": False} if files_found == "wrapped" and partition_epoch is None and plan is None else {}),
        "plan": None
        if plan is None
        else {
            "num_shards": plan.num_shards,
            "partition_epoch": plan.partition_epoch,
            "distribution": plan.settings.distribution,
            "num_files": plan.num_files,
        },
        "num_files": len(universe),
        "total_seqs": universe_seqs,
        "total_frames": universe_frames,
        "frames_per_step": json_float(m["frames_per_step"]),
        "sync": sync.as_dict(),
        "thresholds": {"max_dropped": json_float(max_dropped), "min_steps_ratio": json_float(min_steps_ratio)},
        "sub_epochs": sub_epochs,
        "full_epochs": full_epochs,
        "dropped_fraction": mean_drop,
        "dropped_fraction_max": json_float(max(drops)) if drops else None,
        "filtered_fraction": _mean_filtered(sub_epochs),
        "passes": {"made": made, "promised": promised},
        "alarms": a.alarms,
        "notes": a.notes,
    }
    if not plan_reads_once(usable_plan):  # corpora mixed by weight: what each contributed
        summary.update(_corpora_entries(a, usable_plan))
    return summary, a.rec


@dataclass
class _Analysis:
    """What the steps of :func:`analyze_training` share: the logs, and per (sub-epoch, rank) the records (compact
    grids) and file keys they build; the alarms and notes they add."""

    log: TrainingLog
    lengths: Dict[str, Tuple[int, int]]
    epochs: List[int]
    num_ranks: int
    rec: Any = None  # TrainRecords, each record's file keys as ids of ``keys`` beside it
    #: the distinct file keys of the logs by id, and whether a record names each
    keys: List[str] = field(default_factory=list)
    logged: Any = None
    finished: List[bool] = field(default_factory=list)
    #: bool [sub-epoch]: some rank has the sub-epoch in its log but not its files
    files_unseen: Any = None
    filtered: Optional[Dict[str, Tuple[int, int]]] = None
    alarms: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


#: What the "no DFD file lines" alarm says about its causes and fixes.
_NO_FILES_CAUSE = (
    "so which files each rank read, and which were read twice or never, is not checked. Causes: the log is "
    "below log_verbosity 4 (RETURNN logs a sub-epoch's files at 4), the dataset holds no DistributeFilesDataset, "
    "or it is logged under another name (a wrapper's inner dataset). Fix: train with log_verbosity=5 "
    "(training_job_kwargs sets it), or give the dataset's name (--dataset-name) or the wrapper's multi_epoch "
    "(--multi-epoch)"
)


def _check_files_found(a: _Analysis, files_from: Mapping[str, Any]) -> str:
    """Whether the sub-epochs have the files of a DistributeFilesDataset: "direct" (its name), "wrapped" (inside
    a wrapper that renames it) or "none", which is an alarm (nothing checked must not pass); the notes say
    whose files they are and how many dataset instances per rank logged them (DataLoader worker sharding)."""
    has_files = any(r.num_instances.any() for r in a.log.ranks)
    seen = list(files_from.get("seen") or [])
    if not has_files:
        other = f" (there are lines of {', '.join(repr(n) for n in seen[:5])})" if seen else ""
        wrapped = (
            "; the dataset is inside a wrapper whose multi_epoch the logs do not show (give --multi-epoch)"
            if files_from.get("wrapped") and files_from.get("names") and files_from.get("multi_epoch") is None
            else ""
        )
        a.alarms.append(
            "no DFD file lines found: no rank's log has a DistributeFilesDataset 'using files for epoch' line"
            f"{other}{wrapped}, {_NO_FILES_CAUSE}"
        )
        return "none"
    if files_from.get("wrapped"):
        m = files_from.get("multi_epoch")
        a.notes.append(
            f"the files are those of the DistributeFilesDataset logged as {', '.join(files_from['names'])} (inside a "
            f"wrapper, e.g. MultiEpochDataset), {m} of its epochs per sub-epoch"
            + (" (multi_epoch inferred from the logs)" if files_from.get("multi_epoch_inferred") else "")
        )
    most = max((int(r.num_instances.max()) for r in a.log.ranks if len(r.num_instances)), default=0)
    if most > 1:
        a.notes.append(
            f"{most} dataset instances per rank logged their files (DataLoader worker sharding, "
            "torch_dataloader_shard_workers, the default from behavior_version 37): each cuts its own bins "
            "(num_ranks * num_workers * partition_epoch), a rank's files are those of all its instances, and the "
            "logged 'train num_seqs' is one instance's"
        )
    return "wrapped" if files_from.get("wrapped") else "direct"


def _usable_plan(a: _Analysis, plan: Optional[ShardPlan], partition_epoch: Optional[int]) -> tuple:
    """The plan the files are compared with (None if it is for another number of ranks: an alarm), and the
    partition_epoch (the plan's, which a given one must equal)."""
    usable_plan = plan
    k = max((int(r.num_instances.max()) for r in a.log.ranks if len(r.num_instances)), default=1)
    if plan is not None and k > 1 and plan.num_shards == k * a.num_ranks:
        a.notes.append(
            f"the plan cuts num_shards={plan.num_shards} shards, one per DataLoader worker ({a.num_ranks} ranks x {k}"
            " workers that shard), as the training does: its files and steps are per worker, not per rank, and are "
            "not compared (the plan's simulation is not exact under several DataLoader workers)"
        )
        usable_plan = None
    elif plan is not None and plan.num_shards != a.num_ranks:
        a.alarms.append(
            f"the plan is for num_shards={plan.num_shards}, but the training ran {a.num_ranks} ranks: "
            "its files cannot be compared; plan with the training's number of ranks"
        )
        usable_plan = None
    if plan is not None:
        if partition_epoch is not None and partition_epoch != plan.partition_epoch:
            raise ValueError(
                f"partition_epoch={partition_epoch} but the plan has {plan.partition_epoch}; give only the plan"
            )
        partition_epoch = plan.partition_epoch
    return usable_plan, partition_epoch


def _plan_of_wrapped(
    a: _Analysis, plan: Optional[ShardPlan], partition_epoch: Optional[int], files_from: Optional[Mapping[str, Any]]
) -> tuple:
    """Where a wrapper's sub-epoch holds ``multi_epoch`` > 1 epochs of the DistributeFilesDataset, the plan's
    epochs are the dataset's, not the training's: its files are not compared per sub-epoch (a note says so), and
    the training's partition_epoch is the plan's / multi_epoch (unknown where that does not divide)."""
    m = (files_from or {}).get("multi_epoch") if (files_from or {}).get("wrapped") else None
    if plan is None or not m or m == 1:
        return plan, partition_epoch
    a.notes.append(
        f"the plan's sub-epochs are the DistributeFilesDataset's; each sub-epoch of the training holds {m} of them "
        "(a wrapper, e.g. MultiEpochDataset): the files are not compared with the plan per sub-epoch, only per "
        "full epoch (read twice or never)"
    )
    return None, plan.partition_epoch // m if plan.partition_epoch % m == 0 else None


def _check_plan_seeds(a: _Analysis, plan: ShardPlan) -> None:
    """Every logged sub-epoch can be looked up in the plan: RETURNN's shuffle seed of its full epoch is one numpy
    takes. Else the line of the log where that sub-epoch began is named (the seed grows with the sub-epoch, so each
    rank's last is checked)."""
    if plan.settings.seq_ordering != "random":
        return
    for rank_log in a.log.ranks:
        if not rank_log.sub_epochs:
            continue
        epoch = max(rank_log.sub_epochs)
        try:
            plan.settings.seed_for(full_epoch_0idx=(epoch - 1) // plan.partition_epoch, shard_index=rank_log.rank)
        except ValueError as exc:
            line = rank_log.sub_epochs[epoch].line
            raise ValueError(
                f"{rank_log.source}{'' if line is None else f':{line}'}: sub-epoch {epoch} cannot be "
                f"looked up in the plan ({exc}); give the plan of this training, or remove the "
                "damaged line"
            ) from None


def _per_rank_records(a: _Analysis, *, complete_is_mean: bool, plan_check: Optional["_PlanCheck"] = None) -> set:
    """Fill ``a.rec`` (with each record's file keys as ids), ``a.logged``, ``a.finished`` and ``a.files_unseen`` a rank
    at a time, from the columns of its table (no object per record; each rank's records are written to ``a.rec`` at
    once, and its files compared with the plan by ``plan_check`` then); return where the consumed sequences came
    from."""
    sources = set()
    key_of, a.keys = a.log.catalog.keys()
    a.logged = np.zeros(len(a.keys), dtype=bool)
    epochs = np.asarray(a.epochs, dtype=np.int64)
    finished = np.ones(len(epochs), dtype=bool)
    a.files_unseen = np.zeros(len(epochs), dtype=bool)
    for r, rank_log in enumerate(a.log.ranks):
        t = rank_log.table
        present = np.searchsorted(epochs, t.epoch)  # (its sub-epochs' places: its rows are sorted by epoch)
        idx = np.arange(len(t.epoch))
        num_steps, trained = t.num_steps[idx], t.trained_steps[idx]
        seqs, seqs_known = _step_sums(t.step_seqs, t.step_start[idx], t.step_end[idx])
        frames, frames_known = _step_sums(t.step_frames, t.step_start[idx], t.step_end[idx])
        # the sequences consumed: the steps' counts, else the last 'complete' times the dataset's (its own only)
        last = np.full(len(idx), np.nan)
        has = num_steps > 0
        last[has] = t.step_complete[t.step_end[idx][has] - 1]
        num_seqs = t.dataset_num_seqs[idx]
        del t  # (one rank's table at a time)
        by_complete = ~seqs_known & np.isfinite(last) & (num_seqs >= 0) & (not complete_is_mean)
        consumed_seqs = np.where(seqs_known, seqs, -1)
        consumed_seqs[by_complete] = np.round(last[by_complete] * num_seqs[by_complete]).astype(np.int64)
        sources.update(name for name, where in (("steps", seqs_known), ("complete", by_complete)) if where.any())
        if (~seqs_known & ~by_complete).any():
            sources.add("unknown")
        columns = {
            "consumed_seqs": (consumed_seqs, seqs_known | by_complete),
            "consumed_frames": (frames, frames_known),
            "available_seqs": (num_seqs, num_seqs >= 0),
            "available_frames": (np.full(len(idx), -1, dtype=np.int64), np.zeros(len(idx), dtype=bool)),
            "offered_seqs": (num_seqs, num_seqs >= 0),
            "steps": (np.where(trained >= 0, trained, num_steps), np.ones(len(idx), dtype=bool)),
            "num_files": (np.full(len(idx), -1, dtype=np.int64), np.zeros(len(idx), dtype=bool)),
        }
        if a.filtered is not None:
            unknown = (np.full(len(idx), -1, dtype=np.int64), np.zeros(len(idx), dtype=bool))
            columns.update(filtered_seqs=unknown, filtered_frames=unknown)
        cols = a.rec.new_rank()
        cols.set_rows(present, columns, finished=trained >= 0)
        del columns
        begin, num, instances = rank_log.file_columns()
        key_ids = key_of[rank_log.file_ids()]  # (the rank's file keys, all records', as ids: one array)
        seen = instances > 0
        for row in np.flatnonzero(seen).tolist():  # the records with files, one by one
            i, at = int(present[row]), int(begin[row])
            keys = [a.keys[k] for k in key_ids[at : at + num[row]].tolist()]
            _record_files(a, cols, i, keys, several=instances[row] > 1)
            if plan_check is not None:
                plan_check.add(i, r, keys, several=instances[row] > 1)
        a.logged[key_ids] = True
        cols.files_at[present[seen]], cols.files_n[present[seen]] = begin[seen], num[seen]
        unseen = present[~seen]
        a.files_unseen[unseen] = True
        if plan_check is not None:
            plan_check.end_rank(r, cols, unseen=unseen)
        a.rec.set_rank(r, cols, key_ids)
        finished &= cols.present & cols.finished
    a.finished = finished.tolist()
    return sources


def _step_sums(values: np.ndarray, start: np.ndarray, end: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Per record the sum of its steps' ``values[start:end]`` (0 without steps; unknown ones count 0), and whether
    all of them are known (not negative).

    >>> _step_sums(np.array([3, 4, -1, 5]), np.array([0, 2, 4]), np.array([2, 4, 4]))
    (array([7, 5, 0]), array([ True, False,  True]))
    """
    total = np.concatenate([[0], np.cumsum(np.maximum(values, 0))])
    lost = np.concatenate([[0], np.cumsum(values < 0)])
    return total[end] - total[start], lost[end] == lost[start]


def _record_files(a: _Analysis, cols: RankColumns, i: int, keys: Sequence[str], *, several: bool) -> None:
    """The counts of the rank's record at sub-epoch ``i`` that its files give: the sequences and frames they hold
    (less the length filter's), their number; the dataset's count is one instance's, so not the rank's, under several
    instances."""
    file_seqs, file_frames = _lengths_of(keys, a.lengths)
    offered = None if several or cols.unknown["offered_seqs"][i] else int(cols.values["offered_seqs"][i])
    if a.filtered is not None:
        gone_seqs, gone_frames = _lengths_of(keys, a.filtered)
        cols.put(i, "filtered_seqs", gone_seqs)
        cols.put(i, "filtered_frames", gone_frames)
        if file_seqs is not None and gone_seqs is not None:
            file_seqs, file_frames = file_seqs - gone_seqs, file_frames - gone_frames
        else:
            file_seqs = file_frames = None
        if offered is not None and gone_seqs is not None:
            offered -= gone_seqs  # the dataset offers them; the filter removes them
    cols.put(i, "offered_seqs", offered)
    cols.put(i, "available_seqs", file_seqs if file_seqs is not None else offered)
    cols.put(i, "available_frames", file_frames)
    cols.put(i, "num_files", len(keys))


class _FirstFew:
    """How many places there are, and the texts of the first :data:`_MAX_PLACES` by their keys (a million places
    give no million texts, in whatever order they come).

    >>> f = _FirstFew()
    >>> for key in [(3, 0), (1, 1), (2, 0), (1, 0), (9, 9), (0, 5), (5, 5)]:
    ...     f.add(key, str(key))
    >>> f.count, f.texts()
    (7, ['(0, 5)', '(1, 0)', '(1, 1)', '(2, 0)', '(3, 0)'])
    """

    def __init__(self):
        self.count = 0
        self._first: List[Tuple[Any, str]] = []

    def add(self, key: Any, text: str) -> None:
        self.count += 1
        if len(self._first) < _MAX_PLACES or key < self._first[-1][0]:
            self._first = sorted(self._first + [(key, text)], key=lambda kt: kt[0])[:_MAX_PLACES]

    def texts(self) -> List[str]:
        return [text for _, text in self._first]


class _PlanCheck:
    """Each record's ``files_match_plan`` (set in the rank's columns before they are written) and, at the end, the
    notes and alarms of files other than planned, a rank at a time (:func:`~i6_shard.core.pure.reads.check_reads`
    on its reads)."""

    def __init__(self, a: _Analysis, plan: ShardPlan):
        self.a, self.plan = a, plan
        self.reads: List[SubEpochRead] = []
        self.where: List[int] = []
        self.unseen, self.cut_otherwise, self.bad = _FirstFew(), _FirstFew(), _FirstFew()
        self.logged: set = set()

    def add(self, i: int, r: int, keys: Sequence[str], *, several: bool) -> None:
        epoch = self.a.epochs[i]
        if several:
            self.cut_otherwise.add((i, r), f"sub-epoch {epoch} rank {r}")
        else:
            self.reads.append(SubEpochRead(epoch, r, tuple(keys), ()))
            self.where.append(i)

    def end_rank(self, r: int, cols: RankColumns, *, unseen: np.ndarray) -> None:
        for i in unseen[:_MAX_PLACES].tolist():
            self.unseen.add((i, r), f"({self.a.epochs[i]}, {r})")
        self.unseen.count += max(0, len(unseen) - _MAX_PLACES)
        bad = {(v.epoch, v.shard_index): v for v in check_reads(self.reads, plan=self.plan) if v.kind == "files"}
        for i, read in zip(self.where, self.reads):
            cols.match[i] = (read.epoch, r) not in bad
        self.logged.update(k for read in self.reads for k in read.files)
        for v in bad.values():
            self.bad.add(v.sort_key(), v.message)
        self.reads, self.where = [], []

    def finish(self) -> None:
        a, plan = self.a, self.plan
        if self.unseen.count:  # one note, however many (a log of a million records gives no million notes)
            a.notes.append(
                f"the log does not show the files of (sub-epoch, rank) {_places(self.unseen.texts(), self.unseen.count)}"
            )
        if self.cut_otherwise.count:
            a.notes.append(
                f"the files of {_places(self.cut_otherwise.texts(), self.cut_otherwise.count)} are not compared with "
                "the plan: several dataset instances (DataLoader workers) each cut their own bins, not the plan's "
                "num_shards * partition_epoch; plan with num_shards = ranks * num_workers to review those bins"
            )
        logged = self.logged
        if logged and not logged & set(plan.keys):
            a.alarms.append(
                f"none of the {len(logged)} files in the logs is in the plan (e.g. log {min(logged)!r}, "
                f"plan {plan.keys[0]!r}): the plan was made from another file list, or names the "
                "files otherwise (relative vs absolute paths); plan with the training's own file list"
            )
        elif self.bad.count:
            n = self.bad.count
            a.alarms.append(
                f"{n} (sub-epoch, rank) read other files than planned: "
                + "; ".join(self.bad.texts())
                + (f"; and {n - _MAX_PLACES} more" if n > _MAX_PLACES else "")
            )


def _partition_epoch(
    a: _Analysis, partition_epoch: Optional[int], *, files_found: str = "direct"
) -> Tuple[Optional[int], bool]:
    """The partition_epoch given (or the plan's), else inferred from the logged files; and whether inferred.
    Not inferred for a wrapped dataset, whose lost or twice-read files make the inference unsure: an alarm, as
    the files read twice or never are then not checked."""
    if partition_epoch is not None:
        return partition_epoch, False
    if files_found == "none":
        return None, False
    if files_found == "wrapped":
        a.alarms.append(
            "the full epochs are not checked (files read twice or never): the DistributeFilesDataset is inside a "
            "wrapper, and the logs do not show its partition_epoch; give --partition-epoch (the training's "
            "sub-epochs per full epoch of the files: the dataset's partition_epoch / multi_epoch)"
        )
        return None, False
    epochs = a.epochs
    if epochs and epochs[0] == 1 and epochs == list(range(1, len(epochs) + 1)):
        partition_epoch = infer_partition_epoch(_SubEpochKeys(a))
    if partition_epoch is None:
        a.notes.append(
            "partition_epoch is unknown (no plan, and the logged files do not show a full epoch): "
            "full epochs and passes are not reported; give the plan or partition_epoch"
        )
        return None, False
    a.notes.append(f"partition_epoch={partition_epoch} inferred from the files (no plan given)")
    return partition_epoch, True


def _sharded(a: _Analysis, plan: Optional[ShardPlan], partition_epoch: Optional[int] = None) -> bool:
    """Whether the files were sharded: the plan says so; else, with partition_epoch, unless every rank was given
    every file in each full epoch (two ranks given one file in a sub-epoch is a sharding that went wrong, e.g.
    ranks that shuffle differently); without it, if no file went to two ranks in one sub-epoch."""
    if plan is not None:
        return plan.settings.distrib_shard_files
    if partition_epoch is not None:
        num_logged = int(a.logged.sum())  # (each rank's keys are of these: the same set if as many)
        for _, idx, lists, rank, key in _full_epoch_ids(a, partition_epoch):
            for r in np.flatnonzero(lists == partition_epoch).tolist() if len(idx) == partition_epoch else []:
                if len(np.unique(key[rank == r])) != num_logged:
                    return True
    num_keys, num_ranks = max(1, len(a.keys)), max(1, a.num_ranks)
    for b in a.rec.blocks(files=True):  # a key of two ranks in one sub-epoch: (sub-epoch, key) of two ranks
        row, rank, key = b.flat_file_ids()
        mine = np.unique((row * num_keys + key) * num_ranks + rank) // num_ranks
        if len(np.unique(mine)) < len(mine):
            return False
    return True


class _SubEpochKeys:
    """Per sub-epoch (of the report, in order) the file key ids of all ranks, or None where a rank's are not shown;
    read back a block at a time (a sequence for :func:`~i6_shard.core.pure.consumption.infer_partition_epoch`)."""

    def __init__(self, a: _Analysis):
        self.a = a

    def __len__(self) -> int:
        return len(self.a.epochs)

    def __iter__(self) -> Iterator[Optional[List[int]]]:
        for b in self.a.rec.blocks(files=True):
            row, _, key = b.flat_file_ids()
            bounds = np.searchsorted(row, np.arange(b.num_rows + 1)).tolist()
            shown = (b.files_n >= 0).all(axis=1).tolist()
            for i in range(b.num_rows):
                yield key[bounds[i] : bounds[i + 1]].tolist() if shown[i] else None


def _full_epoch_ids(a: _Analysis, partition_epoch: int) -> Iterator[Tuple[int, List[int], Any, Any, Any]]:
    """Per full epoch of the report's sub-epochs, in order: its index, its sub-epochs (indices into ``a.epochs``),
    per rank how many of their file lists are shown, and the file key ids of all of them as (rank, key id) arrays
    (one full epoch's at a time)."""
    full = [(e - 1) // partition_epoch for e in a.epochs]
    current: Optional[int] = None
    idx: List[int] = []
    parts: List[Tuple[Any, Any]] = []
    lists = np.zeros(a.num_ranks, dtype=np.int64)
    for b in a.rec.blocks(files=True):
        row, rank, key = b.flat_file_ids()
        ks = np.asarray(full[b.start : b.start + b.num_rows], dtype=np.int64)
        bounds = np.searchsorted(ks[row] if len(row) else row, ks).tolist()
        ends = np.searchsorted(ks[row] if len(row) else row, ks, side="right").tolist()
        for i in range(b.num_rows):
            if full[b.start + i] != current:
                if current is not None:
                    yield current, idx, lists, *_joined_parts(parts)
                current, idx, parts, lists = full[b.start + i], [], [], np.zeros(a.num_ranks, dtype=np.int64)
            idx.append(b.start + i)
            lists += b.files_n[i] >= 0
            if i == b.num_rows - 1 or full[b.start + i + 1] != current:
                parts.append((rank[bounds[i] : ends[i]], key[bounds[i] : ends[i]]))
    if current is not None:
        yield current, idx, lists, *_joined_parts(parts)


def _joined_parts(parts: List[Tuple[Any, Any]]) -> Tuple[Any, Any]:
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _measures(a: _Analysis, plan: Optional[ShardPlan], *, sync_every: int) -> Dict[str, Any]:
    """Per sub-epoch what the grids of consumed and available data give: the dropped shares, the steps and the
    expected steps (from the plan's files where a plan is given), the consumed sums; the training's frames per step;
    and the places of the alarms of :func:`_sub_epoch_alarms`. Two passes over the records, a block of sub-epochs at a
    time: the first finds what the expected steps are counted in (frames, where every count is known)."""
    n = len(a.epochs)
    m: Dict[str, Any] = {"drop_frames": np.full(n, np.nan), "drop_seqs": np.full(n, np.nan)}
    m["expected_steps"] = np.full(n, np.nan)
    m["steps"], m["filtered"], m["first_out"] = [None] * n, [None] * n, [None] * n
    for name in ("frames", "seqs"):
        m[f"{name}_sum"], m[f"{name}_known"] = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    m["double"], m["over"] = _FirstFew(), _FirstFew()
    frames_known = planned_known = True
    total_frames, total_steps, any_known = np.int64(0), np.int64(0), False
    for b in a.rec.blocks():
        rows = slice(b.start, b.start + b.num_rows)
        g = b.grids
        cf, cs, steps = g["consumed_frames"], g["consumed_seqs"], g["steps"]
        m["drop_frames"][rows] = dropped_share(cf, g["available_frames"])
        m["drop_seqs"][rows] = dropped_share(cs, g["available_seqs"])
        planned_seqs, planned_frames = _planned(a, plan, b)
        frames_known &= bool((cf >= 0).all())
        planned_known &= bool((planned_frames >= 0).all())
        known = (cf >= 0) & (steps > 0)
        # (the int64 sums of the known entries, without copying them out)
        total_frames, total_steps = total_frames + cf.sum(where=known), total_steps + steps.sum(where=known)
        any_known |= bool(known.any())
        for name, grid in (("frames", cf), ("seqs", cs)):
            m[f"{name}_sum"][rows], m[f"{name}_known"][rows] = grid.sum(axis=1), (grid >= 0).all(axis=1)
        for k in range(b.num_rows):
            i = b.start + k
            m["steps"][i] = int(steps[k].max()) if (steps[k] >= 0).any() else None
            m["filtered"][i] = _filtered_share(b, k) if a.filtered is not None else None
            m["first_out"][i] = _first_out_read_all(b, k)
        _alarm_places(a, b, m)
    by_frames = frames_known and planned_known
    step_rule = functools.partial(expected_steps, sync_every=sync_every)
    for b in a.rec.blocks():
        g = b.grids
        planned_seqs, planned_frames = _planned(a, plan, b)
        if by_frames:
            exp = step_rule(g["steps"], g["consumed_frames"], planned_frames)
        elif a.lengths:
            exp = step_rule(g["steps"], g["consumed_seqs"], planned_seqs)
        else:
            exp = step_rule(g["steps"], g["consumed_seqs"], np.full_like(g["steps"], -1))
        m["expected_steps"][b.start : b.start + b.num_rows] = exp
    m["frames_per_step"] = float(total_frames / total_steps) if any_known else None
    return m


def _planned(a: _Analysis, plan: Optional[ShardPlan], b: RecordBlock) -> Tuple[np.ndarray, np.ndarray]:
    """The sequences and frames [rows, rank] of the block's sub-epochs that each rank should have: of the plan's files
    where a plan is given (-1 where a length is unknown), else those available."""
    if plan is None:
        return b.grids["available_seqs"], b.grids["available_frames"]
    planned_seqs, planned_frames = (np.full(b.present.shape, -1, dtype=np.int64) for _ in range(2))
    for k in range(b.num_rows):
        for r in range(a.num_ranks):
            seqs, frames = _lengths_of(plan.files_for(epoch=a.epochs[b.start + k], shard_index=r), a.lengths)
            if seqs is not None:
                planned_seqs[k, r], planned_frames[k, r] = seqs, frames
    return planned_seqs, planned_frames


def _alarm_places(a: _Analysis, b: RecordBlock, m: Dict[str, Any]) -> None:
    """The block's places of the alarms of sequences never read (fewer offered than the files hold) and read twice
    (more consumed than available), in (sub-epoch, rank) order."""
    epochs, g = a.epochs, b.grids
    offered, available, consumed = g["offered_seqs"], g["available_seqs"], g["consumed_seqs"]
    both = b.known("offered_seqs") & b.known("available_seqs")
    for k, r in np.argwhere(both & (offered < available)).tolist():
        m["double"].add(
            (b.start + k, r),
            f"sub-epoch {epochs[b.start + k]} rank {b.rank_ids[r]}: {offered[k, r]} of {available[k, r]}",
        )
    both = b.known("consumed_seqs") & b.known("available_seqs")
    for k, r in np.argwhere(both & (consumed > available)).tolist():
        m["over"].add((b.start + k, r), f"sub-epoch {epochs[b.start + k]} rank {b.rank_ids[r]}")


def _sub_epoch_entries(a: _Analysis, m: Dict[str, Any], partition_epoch: Optional[int]) -> List[Dict[str, Any]]:
    """The summary's ``sub_epochs``: per sub-epoch its steps against the expected, the drops (its ranks' records
    are ``TrainRecords.rows(i)``)."""
    exp_steps = m["expected_steps"]
    sub_epochs = []
    for i, epoch in enumerate(a.epochs):
        actual = m["steps"][i]
        ratio = actual / exp_steps[i] if actual is not None and exp_steps[i] > 0 else None
        sub_epochs.append(
            {
                "epoch": epoch,
                "full_epoch_0idx": None if partition_epoch is None else (epoch - 1) // partition_epoch,
                "finished": a.finished[i],
                "ranks": None,  # the records: TrainRecords.rows(i)
                "steps": actual,
                "expected_steps": None if math.isnan(exp_steps[i]) else int(round(exp_steps[i])),
                "steps_ratio": json_float(ratio),
                "dropped_fraction": json_float(m["drop_frames"][i]),
                "dropped_fraction_seqs": json_float(m["drop_seqs"][i]),
                "filtered_fraction": m["filtered"][i],
                "first_out_read_all": m["first_out"][i],
            }
        )
    return sub_epochs


def _sub_epoch_alarms(
    a: _Analysis,
    sub_epochs: List[Dict[str, Any]],
    m: Dict[str, Any],
    *,
    usable_plan: Optional[ShardPlan],
    min_steps_ratio: float,
) -> None:
    """Double sharding (fewer sequences offered than the files hold, too few steps) and sequences read twice."""
    double, over = m["double"], m["over"]
    if double.count:
        a.alarms.append(
            f"sequences never read: the dataset offered fewer sequences than the rank's files hold "
            f"({_places(double.texts(), double.count)}); the sub-epoch dataset shards its files again (double "
            "sharding, RETURNN #1738): set sharding_fix=True in the DistributeFilesDataset"
        )
    if over.count:
        a.alarms.append(
            f"sequences read twice: more sequences consumed than available ({_places(over.texts(), over.count)})"
        )
    low = [
        f"sub-epoch {s['epoch']}: {s['steps']} steps, expected about {s['expected_steps']}"
        for s in sub_epochs
        if s["finished"] and s["steps_ratio"] is not None and s["steps_ratio"] < min_steps_ratio
    ]
    if low:
        a.alarms.append(
            f"steps far below what the {'plan' if usable_plan is not None else 'files'} should give "
            f"(under {min_steps_ratio:.0%}): {_places(low)}. This is the double-sharding signature "
            "(RETURNN #1738): check sharding_fix=True"
        )
    if any(s["expected_steps"] is None for s in sub_epochs):
        a.notes.append(
            "steps cannot be checked against the files for every sub-epoch: the files' lengths or the "
            "consumption are unknown (give the HDF files readable, or a lengths JSON, and log_batch_size)"
        )


def _filtered_share(b: RecordBlock, k: int) -> Optional[float]:
    """The share of the block's sub-epoch ``k``'s frames the length filter removed (None where a count is
    unknown)."""
    gone, kept = _known_pair(b, k, "filtered_frames", "available_frames")
    if gone is None:
        return None
    gone_sum, kept_sum = sum(gone.tolist()), sum(kept.tolist())  # (Python ints: the exact sums and quotient)
    if gone_sum + kept_sum == 0:
        return None
    return json_float(gone_sum / (gone_sum + kept_sum))


def _mean_filtered(sub_epochs: Sequence[Mapping[str, Any]]) -> Optional[float]:
    shares = [s["filtered_fraction"] for s in sub_epochs if s["finished"] and s["filtered_fraction"] is not None]
    return json_float(float(np.mean(shares))) if shares else None


def _first_out_read_all(b: RecordBlock, k: int) -> Optional[bool]:
    """Whether a rank consumed all the frames its files offered (the first rank out of data): then what the
    others held is lost to the balance of the bins. If none did, something removed sequences before the
    batches (a length filter, double sharding). None where the counts are unknown."""
    consumed, available = _known_pair(b, k, "consumed_frames", "available_frames")
    if consumed is None:
        return None
    return bool((consumed >= available).any())


def _known_pair(b: RecordBlock, k: int, first: str, second: str) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """The block's sub-epoch ``k``: its two grids ``first`` and ``second`` over its present ranks, or
    ``(None, None)`` where no rank is present or some count of either is unknown."""
    present = b.present[k]
    x, y = b.grids[first][k][present], b.grids[second][k][present]
    if not x.size or b.unknown[first][k][present].any() or b.unknown[second][k][present].any():
        return None, None
    return x, y


def _high_loss_alarm(sub_epochs: List[Dict[str, Any]], *, mean_drop: float, max_dropped: float) -> str:
    """The alarm of a high mean dropped share; its advice is to balance the bins only where the balance is the
    cause (the first rank out read all it had), else it names what removes sequences before the batches."""
    worst = sorted(
        (s for s in sub_epochs if s["finished"] and s["dropped_fraction"] is not None),
        key=lambda s: -s["dropped_fraction"],
    )[:3]
    text = (
        f"high data loss: on average {100 * mean_drop:.1f}% of each sub-epoch's frames were dropped "
        f"(above {100 * max_dropped:.1f}%; worst: "
        + ", ".join(f"sub-epoch {s['epoch']} {100 * s['dropped_fraction']:.1f}%" for s in worst)
        + ")"
    )
    unbalanced = [s for s in worst if s.get("first_out_read_all") is not False]
    if unbalanced:
        text += (
            "; balance the bins (distribution='balanced', planned with ShardPlanJob) or split the data into more, "
            "smaller files"
        )
    not_balance = [s["epoch"] for s in worst if s.get("first_out_read_all") is False]
    if not_balance:
        text += (
            f"; in sub-epochs {not_balance} no rank read all of its files' frames, so the balance is not the cause"
            " there: something removes sequences before the batches (a length filter such as max_seq_length: "
            "give it to the report with --max-seq-length to show its removals apart; or double sharding)"
        )
    return text


def plan_reads_once(plan: Optional[ShardPlan]) -> bool:
    """Whether a full epoch of ``plan`` reads each file once (no plan: as RETURNN reads a list)."""
    return plan is None or plan.corpora is None


def _expected_reads(a: _Analysis, plan: Optional[ShardPlan], *, full_epoch_0idx: int, default: int) -> np.ndarray:
    """int64 [key ids]: how often each logged key should be read in the full epoch."""
    expected = np.full(len(a.keys), default, dtype=np.int64)
    if not plan_reads_once(plan):
        for key, n in expected_reads_by_key(plan, full_epoch_0idx=full_epoch_0idx).items():
            j = a.log.catalog.key_id(key)
            if 0 <= j < len(expected):
                expected[j] = n
    return expected


def _corpora_entries(a: _Analysis, plan: ShardPlan) -> Dict[str, Any]:
    """The summary's ``corpora`` (:func:`~.training_corpora.corpora_contributions`) from the records' files."""
    read_keys: List[List[Optional[List[str]]]] = []
    consumed: List[List[Optional[int]]] = []
    for b in a.rec.blocks(files=True):
        for i in range(b.num_rows):
            ids = [b.file_ids(i, r) for r in range(len(b.rank_ids))]
            read_keys.append([None if x is None else [a.keys[j] for j in x.tolist()] for x in ids])
            consumed.append([row.get("consumed_frames") for row in b.rows(i)])
    entries, alarms = corpora_contributions(
        plan, epochs=a.epochs, read_keys=read_keys, consumed_frames=consumed, lengths=a.lengths
    )
    a.alarms.extend(alarms)
    return {"corpora": entries}


def _full_epochs(
    a: _Analysis,
    m: Dict[str, Any],
    *,
    partition_epoch: int,
    universe: List[str],
    expected_reads: int,
    plan: Optional[ShardPlan] = None,
) -> List[Dict[str, Any]]:
    """Per full epoch: what was consumed, the passes made, and the files read more often than planned or never
    (alarms); a plan of corpora by weight reads a file as often as its weight says."""
    universe_seqs, universe_frames = _lengths_of(universe, a.lengths)
    universe_ids = np.array([a.log.catalog.key_id(key) for key in universe], dtype=np.int64)
    full_epochs = []
    for k, idx, _, _, key in _full_epoch_ids(a, partition_epoch):
        complete = len(idx) == partition_epoch and all(a.finished[i] for i in idx)
        counts = np.bincount(key, minlength=len(a.keys))  # (read_counts, of key ids)
        files_known = not a.files_unseen[idx].any()
        expected = _expected_reads(a, plan, full_epoch_0idx=k, default=expected_reads)
        twice = sorted(a.keys[j] for j in np.flatnonzero(counts > expected).tolist())
        never = []
        if complete and files_known:
            count = np.where(universe_ids >= 0, counts[np.maximum(universe_ids, 0)], 0) if len(universe) else counts[:0]
            never = sorted(universe[j] for j in np.flatnonzero(count == 0).tolist())
        frames = int(m["frames_sum"][idx].sum()) if m["frames_known"][idx].all() else None
        seqs = int(m["seqs_sum"][idx].sum()) if m["seqs_known"][idx].all() else None
        entry = {
            "full_epoch_0idx": k,
            "complete": complete,
            "consumed_frames": frames,
            "consumed_seqs": seqs,
            "files_read_twice": len(twice) if files_known else None,
            "files_never_read": len(never) if files_known else None,
            "seqs_never_read": None,
            "passes": json_float(frames / universe_frames) if frames is not None and universe_frames else None,
        }
        if complete and seqs is not None and universe_seqs is not None and not twice and plan_reads_once(plan):
            entry["seqs_never_read"] = max(expected_reads * universe_seqs - seqs, 0)
        full_epochs.append(entry)
        if twice:
            a.alarms.append(
                f"full epoch {k}: {len(twice)} files were given to ranks more than "
                f"{'once' if expected_reads == 1 else f'{expected_reads} times'}, so their sequences "
                f"are read twice (e.g. {', '.join(repr(t) for t in twice[:3])})"
            )
        if never:
            a.alarms.append(
                f"full epoch {k}: {len(never)} of {len(universe)} files were given to no rank, so "
                f"their sequences are never read (e.g. {', '.join(repr(t) for t in never[:3])})"
            )
    return full_epochs

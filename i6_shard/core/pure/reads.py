"""Check what each rank really read against a ShardPlan: the files per (sub-epoch, rank),
the sequences of those files, and exactly-once reading of every sequence per full epoch."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .plan import ShardPlan
from .settings import PlanSettings  # noqa: F401 (doctests)

#: Violation kinds, in the order they are listed within one place.
VIOLATION_KINDS = ("settings", "files", "seqs", "duplicate", "missing", "unknown")
#: Dataset settings that every rank must share (RETURNN shuffles with them on each rank).
SETTINGS_CHECKED = ("partition_epoch", "seq_ordering", "random_seed_offset", "fixed_random_seed", "distribution")
_NUM_EXAMPLES = 3


@dataclass(frozen=True)
class SubEpochRead:
    """What one rank read in one sub-epoch.

    :ivar epoch: sub-epoch, 1-based as RETURNN counts
    :ivar shard_index: the rank
    :ivar files: tree keys of the files the dataset used, in its order
    :ivar seq_tags: the sequence tags read, in reading order
    """

    epoch: int
    shard_index: int
    files: Tuple[str, ...]
    seq_tags: Tuple[str, ...]


@dataclass(frozen=True)
class Violation:
    """One broken promise. ``epoch`` is None for a full-epoch or settings violation,
    ``shard_index`` None where no single rank is to blame, ``full_epoch_0idx`` -1 for settings."""

    kind: str
    full_epoch_0idx: int
    epoch: Optional[int]
    shard_index: Optional[int]
    message: str

    @classmethod
    def of_settings(cls, message: str, *, shard_index: Optional[int] = None) -> "Violation":
        """A settings violation: of no sub-epoch, and of ``shard_index`` where one rank is to blame."""
        return cls("settings", -1, None, shard_index, message)

    def sort_key(self) -> Tuple[int, int, int, int]:
        return (
            self.full_epoch_0idx,
            -1 if self.epoch is None else self.epoch,
            -1 if self.shard_index is None else self.shard_index,
            VIOLATION_KINDS.index(self.kind),
        )

    def __str__(self) -> str:
        return f"[{self.kind}] {self.message}"


def _examples(items: Iterable[Any], n: int = _NUM_EXAMPLES) -> str:
    items = list(items)
    shown = ", ".join(repr(x) for x in items[:n])
    return shown + (", ..." if len(items) > n else "")


def check_rank_settings(settings: Mapping[int, Mapping[str, Any]], *, num_shards: int) -> List[Violation]:
    """Check that every rank's dataset is sharded as rank r of ``num_shards`` and that all ranks
    shuffle alike (RETURNN's ``DistributeFilesDataset`` gets ``_num_shards``/``_shard_index``
    from the distributed rank and size only with ``distrib_shard_files=True``).

    :param settings: rank -> the dataset's ``num_shards``, ``shard_index`` and :data:`SETTINGS_CHECKED`
    :return: violations of kind ``"settings"``

    >>> ok = {"num_shards": 2, "partition_epoch": 2, "seq_ordering": "random"}
    >>> [str(v) for v in check_rank_settings({0: {**ok, "shard_index": 0}, 1: {**ok, "shard_index": 1}}, num_shards=2)]
    []
    >>> bad = {"num_shards": 1, "shard_index": 0, "partition_epoch": 2}
    >>> [str(v) for v in check_rank_settings({0: bad, 1: bad}, num_shards=2)][0]
    '[settings] rank 0: the dataset is not sharded (num_shards=1, shard_index=0 instead of 2, 0): every rank reads all files; set distrib_shard_files=True'
    """
    out: List[Violation] = []
    missing = sorted(set(range(num_shards)) - set(settings))
    if missing:
        out.append(Violation.of_settings(f"no record for ranks {missing} of num_shards={num_shards}"))
    for rank in sorted(settings):
        s = settings[rank]
        got = (s.get("num_shards"), s.get("shard_index"))
        if got == (num_shards, rank):
            continue
        if got[0] == 1:
            msg = (
                f"rank {rank}: the dataset is not sharded (num_shards=1, shard_index={got[1]} instead of "
                f"{num_shards}, {rank}): every rank reads all files; set distrib_shard_files=True"
            )
        else:
            msg = (
                f"rank {rank}: the dataset has num_shards={got[0]}, shard_index={got[1]} instead of "
                f"{num_shards}, {rank}: it took another rank or size than the one it ran as"
            )
        out.append(Violation.of_settings(msg, shard_index=rank))
    ranks = sorted(settings)
    for name in SETTINGS_CHECKED:
        values = {rank: settings[rank].get(name) for rank in ranks}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            out.append(
                Violation.of_settings(
                    f"ranks disagree on {name}: {values}; all ranks must shuffle and cut the files alike"
                )
            )
    return out


def check_reads(
    reads: Sequence[SubEpochRead],
    *,
    plan: ShardPlan,
    file_tags: Optional[Mapping[str, Sequence[str]]] = None,
) -> List[Violation]:
    """Compare what the ranks read with the plan. Every violation is listed, sorted by place
    (settings first, then per full epoch its own violations before those of its sub-epochs).

    - ``files``: a rank's files in a sub-epoch differ from ``plan.files_for`` (set or order);
    - ``seqs``: a rank's sequences in a sub-epoch differ from the sequences of its files
      (needs ``file_tags``; this is what double sharding inside the sub-epoch dataset breaks);
    - ``duplicate``: a sequence read more often in a full epoch than the file list holds it
      (once, without ``file_tags``);
    - ``missing``: a sequence of the file list not read in a full epoch (only for full epochs
      whose every sub-epoch and rank is in ``reads``; needs ``file_tags``);
    - ``unknown``: a sequence read that no file of the list holds (needs ``file_tags``).

    :param reads: one entry per (epoch, shard_index) that was read
    :param plan: the plan the ranks should follow (sharded mode)
    :param file_tags: tree key -> the tags of the sequences in that file (every key of the plan)
    :raises ValueError: on a (epoch, shard_index) given twice, a rank outside the plan,
        or ``file_tags`` lacking a key of the plan

    >>> plan = ShardPlan(["a", "b"], [1, 1], PlanSettings(num_shards=2, partition_epoch=1, seq_ordering="default"))
    >>> tags = {"a": ["a0", "a1"], "b": ["b0"]}
    >>> reads = [SubEpochRead(1, 0, ("a",), ("a0",)), SubEpochRead(1, 1, ("b",), ("b0",))]
    >>> [str(v) for v in check_reads(reads, plan=plan, file_tags=tags)]
    ["[missing] full epoch 0: 1 of 3 sequences were not read by any rank (e.g. 'a1')", "[seqs] sub-epoch 1, rank 0: read 1 of the 2 sequences of its 1 file: 1 not read (e.g. 'a1')"]
    """
    seen = set()
    for read in reads:
        if not 0 <= read.shard_index < plan.num_shards:
            raise ValueError(f"read of rank {read.shard_index} is outside num_shards={plan.num_shards}")
        if (read.epoch, read.shard_index) in seen:
            raise ValueError(f"sub-epoch {read.epoch} of rank {read.shard_index} is given twice; pass each once")
        seen.add((read.epoch, read.shard_index))
    if file_tags is not None:
        lacking = [k for k in dict.fromkeys(plan.keys) if k not in file_tags]
        if lacking:
            raise ValueError(
                f"file_tags lacks {len(lacking)} keys of the plan (e.g. {_examples(lacking)}); "
                "record the sequences of every file"
            )
    out: List[Violation] = []
    for read in reads:
        out.extend(_check_read(read, plan=plan, file_tags=file_tags))
    by_full: Dict[int, List[SubEpochRead]] = defaultdict(list)
    for read in reads:
        by_full[(read.epoch - 1) // plan.partition_epoch].append(read)
    universe = None if file_tags is None or plan.corpora is not None else _universe(plan, file_tags, full_epoch_0idx=0)
    for k, group in sorted(by_full.items()):
        if plan.corpora is not None:
            if file_tags is None:
                continue  # corpora by weight read files several times: which read a tag came from needs file_tags
            universe = _universe(plan, file_tags, full_epoch_0idx=k)
        out.extend(_check_full_epoch(k, group, plan=plan, universe=universe))
    return sorted(out, key=Violation.sort_key)


def _universe(plan: ShardPlan, file_tags: Mapping[str, Sequence[str]], *, full_epoch_0idx: int) -> Counter:
    """How often a full epoch of the plan reads each sequence tag: its file's reads (once, without corpora by
    weight), for every file of the plan."""
    universe: Counter = Counter()
    reads = plan.reads(full_epoch_0idx=full_epoch_0idx).tolist()
    for key, n in zip(plan.keys, reads):
        for _ in range(n):
            universe.update(file_tags[key])
    return universe


def _corpus_seqs_read(plan: ShardPlan, group: Sequence[SubEpochRead], file_tags: Mapping[str, Sequence[str]]):
    """Per corpus of a plan mixed by weight, the sequences a full epoch's reads read (a file's once per read)."""
    corpus_of_key = dict(zip(plan.keys, plan.corpora.corpus_of().tolist()))
    corpus_of_tag = {t: corpus_of_key[k] for k in plan.keys for t in file_tags.get(k, ())}
    counts = Counter(corpus_of_tag.get(t) for r in group for t in r.seq_tags)
    return {name: int(counts.get(c, 0)) for c, name in enumerate(plan.corpora.names)}


def _check_read(
    read: SubEpochRead, *, plan: ShardPlan, file_tags: Optional[Mapping[str, Sequence[str]]]
) -> List[Violation]:
    out = []
    k = (read.epoch - 1) // plan.partition_epoch
    where = f"sub-epoch {read.epoch}, rank {read.shard_index}"
    planned = plan.files_for(epoch=read.epoch, shard_index=read.shard_index)
    got = list(read.files)
    if got != planned:
        extra = sorted((Counter(got) - Counter(planned)).elements())
        lacking = sorted((Counter(planned) - Counter(got)).elements())
        if not extra and not lacking:
            msg = f"{where}: read the {len(got)} planned files in another order (read {_examples(got)})"
        else:
            parts = [f"read {len(got)} files, the plan has {len(planned)}"]
            if extra:
                parts.append(f"{len(extra)} not planned (e.g. {_examples(extra)})")
            if lacking:
                parts.append(f"{len(lacking)} planned but not read (e.g. {_examples(lacking)})")
            msg = f"{where}: " + "; ".join(parts)
        out.append(Violation("files", k, read.epoch, read.shard_index, msg))
    if file_tags is not None:
        expected = Counter()
        for key in got:
            expected.update(file_tags.get(key, ()))
        actual = Counter(read.seq_tags)
        if actual != expected:
            not_read = sorted((expected - actual).elements())
            extra = sorted((actual - expected).elements())
            files = f"{len(got)} file" + ("" if len(got) == 1 else "s")
            parts = [f"read {sum(actual.values())} of the {sum(expected.values())} sequences of its {files}"]
            if not_read:
                parts.append(f"{len(not_read)} not read (e.g. {_examples(not_read)})")
            if extra:
                parts.append(f"{len(extra)} not from its files or read too often (e.g. {_examples(extra)})")
            out.append(
                Violation(
                    "seqs",
                    k,
                    read.epoch,
                    read.shard_index,
                    f"{where}: " + ": ".join(parts[:2]) + "".join("; " + p for p in parts[2:]),
                )
            )
    return out


def _check_full_epoch(
    k: int, group: List[SubEpochRead], *, plan: ShardPlan, universe: Optional[Counter]
) -> List[Violation]:
    out = []
    counts: Counter = Counter()
    for read in group:
        counts.update(read.seq_tags)
    epochs = range(k * plan.partition_epoch + 1, (k + 1) * plan.partition_epoch + 1)
    complete = {(r.epoch, r.shard_index) for r in group} >= {(e, s) for e in epochs for s in range(plan.num_shards)}

    def where_read(tag: str) -> str:
        places = [
            f"sub-epoch {r.epoch} rank {r.shard_index}"
            for r in sorted(group, key=lambda r: (r.epoch, r.shard_index))
            for t in r.seq_tags
            if t == tag
        ]
        return f"{tag!r} by {', '.join(places)}"

    if universe is None:
        dup = [t for t, c in counts.items() if c > 1]
    else:
        dup = [t for t, c in counts.items() if c > universe.get(t, 0) > 0]
    if dup:
        dup.sort()
        shown = "; ".join(where_read(t) for t in dup[:_NUM_EXAMPLES]) + ("; ..." if len(dup) > _NUM_EXAMPLES else "")
        out.append(
            Violation(
                "duplicate", k, None, None, f"full epoch {k}: {len(dup)} sequences were read more than once ({shown})"
            )
        )
    if universe is not None:
        unknown = sorted(t for t in counts if t not in universe)
        if unknown:
            out.append(
                Violation(
                    "unknown",
                    k,
                    None,
                    None,
                    f"full epoch {k}: {len(unknown)} sequences read are in no file of the list "
                    f"(e.g. {_examples(unknown)})",
                )
            )
        if complete:
            missing = sorted((universe - counts).elements())
            if missing:
                out.append(
                    Violation(
                        "missing",
                        k,
                        None,
                        None,
                        f"full epoch {k}: {len(missing)} of {sum(universe.values())} sequences were not "
                        f"read by any rank (e.g. {_examples(missing)})",
                    )
                )
    return out


def summarize_reads(
    reads: Sequence[SubEpochRead], *, plan: ShardPlan, file_tags: Optional[Mapping[str, Sequence[str]]] = None
) -> Dict[str, Any]:
    """Counts for the report (JSON types): per sub-epoch the sequences per rank and the share
    of them a training loses when it stops at the shortest rank; per full epoch whether every
    (sub-epoch, rank) was read, and how many sequences were expected and read.

    >>> plan = ShardPlan(["a", "b"], [1, 1], PlanSettings(num_shards=2, partition_epoch=1, seq_ordering="default"))
    >>> s = summarize_reads([SubEpochRead(1, 0, ("a",), ("x", "y")), SubEpochRead(1, 1, ("b",), ("z",))], plan=plan)
    >>> s["sub_epochs"][0]["num_seqs"], s["sub_epochs"][0]["dropped_fraction"], s["full_epochs"][0]["complete"]
    ([2, 1], 0.333333, True)
    """
    epochs = sorted({r.epoch for r in reads})
    by_place = {(r.epoch, r.shard_index): r for r in reads}
    sub_epochs = []
    for e in epochs:
        nums = [len(by_place[(e, s)].seq_tags) if (e, s) in by_place else None for s in range(plan.num_shards)]
        known = [n for n in nums if n is not None]
        total = sum(known)
        dropped = None
        if len(known) == plan.num_shards and total:
            dropped = round(1.0 - plan.num_shards * min(known) / total, 6) + 0.0
        sub_epochs.append({"epoch": e, "num_seqs": nums, "dropped_fraction": dropped})
    full_epochs = []
    for k in sorted({(e - 1) // plan.partition_epoch for e in epochs}):
        group = [r for r in reads if (r.epoch - 1) // plan.partition_epoch == k]
        ep_range = range(k * plan.partition_epoch + 1, (k + 1) * plan.partition_epoch + 1)
        complete = all((e, s) in by_place for e in ep_range for s in range(plan.num_shards))
        tags = Counter(t for r in group for t in r.seq_tags)
        entry = {
            "full_epoch_0idx": k,
            "complete": complete,
            "num_seqs_expected": None
            if file_tags is None
            else sum(len(file_tags[key]) * n for key, n in zip(plan.keys, plan.reads(full_epoch_0idx=k).tolist())),
            "num_seqs_read": sum(tags.values()),
            "num_distinct_read": len(tags),
        }
        if plan.corpora is not None and file_tags is not None:  # corpora by weight: what each gave
            entry["corpora_seqs_read"] = _corpus_seqs_read(plan, group, file_tags)
        full_epochs.append(entry)
    return {
        "num_shards": plan.num_shards,
        "partition_epoch": plan.partition_epoch,
        "num_files": plan.num_files,
        "sub_epochs": sub_epochs,
        "full_epochs": full_epochs,
    }

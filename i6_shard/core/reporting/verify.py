"""The verification report of VerifyShardingJob: the ranks' records checked against the plan
computed from the files on disk, rendered as text."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..io.cost_archive import load_file_sizes
from ..io.stat_engine import collect_file_sizes
from ..io.plan_file import load_plan
from ..planning import make_plan
from ..pure.file_tree import tree_key
from ..pure.plan import ShardPlan
from ..pure.request import PlanRequest
from ..pure.reads import SubEpochRead, Violation, check_rank_settings, check_reads, summarize_reads

__all__ = ["verify_records"]


def render_verify_report(
    summary: Mapping[str, Any],
    violations: Sequence[Violation],
    *,
    settings: Optional[Mapping[str, Any]] = None,
    num_shards: Optional[int] = None,
    returnn_version: Optional[str] = None,
    max_listed: int = 50,
) -> str:
    """The text report: verdict, the RETURNN release the ranks read with, settings, full-epoch coverage,
    sequences per rank and sub-epoch, and the violations (the first ``max_listed``).

    :param num_shards: the ranks the job was given (the header's ``num_shards``), also where each rank's DataLoader
        workers read a shard each (None: the summary's)
    :param returnn_version: ``returnn.__version__`` as the ranks imported it (None: not named)
    """
    lines = [f"i6_shard sharding verification: {'OK' if not violations else 'FAILED'}", ""]
    if returnn_version is not None:
        lines.append(f"verified with RETURNN {returnn_version} (returnn.__version__ as the ranks imported it)")
    lines.append(
        f"num_shards={summary['num_shards'] if num_shards is None else num_shards}  "
        f"partition_epoch={summary['partition_epoch']}  files={summary['num_files']}"
        + _shards_note(summary, num_shards)
    )
    for name, value in sorted((settings or {}).items()):
        lines.append(f"  {name}: {value!r}")
    lines += ["", "Full epochs (sequences expected / read / distinct read):"]
    for fe in summary["full_epochs"]:
        exp = "?" if fe["num_seqs_expected"] is None else fe["num_seqs_expected"]
        note = "" if fe["complete"] else "  (partly read: checked per sub-epoch only)"
        lines.append(
            f"  full epoch {fe['full_epoch_0idx']}: {exp} / {fe['num_seqs_read']} / {fe['num_distinct_read']}{note}"
        )
        if "corpora_seqs_read" in fe:  # corpora by weight: a file's sequences count once per read
            lines.append("    per corpus: " + ", ".join(f"{n} {c}" for n, c in fe["corpora_seqs_read"].items()))
    lines += ["", "Sequences per rank and sub-epoch (dropped = lost when all ranks stop at the shortest):"]
    for se in summary["sub_epochs"]:
        nums = " ".join("-" if n is None else str(n) for n in se["num_seqs"])
        drop = "?" if se["dropped_fraction"] is None else f"{100 * se['dropped_fraction']:.1f}%"
        lines.append(f"  sub-epoch {se['epoch']}: {nums}  dropped {drop}")
    lines += ["", f"Violations: {len(violations)}"]
    for v in list(violations)[:max_listed]:
        lines.append(f"  {v}")
    if len(violations) > max_listed:
        lines.append(f"  ... and {len(violations) - max_listed} more")
    return "\n".join(lines) + "\n"


def _shards_note(summary: Mapping[str, Any], num_shards: Optional[int]) -> str:
    """How many shards the ranks' reading processes read, where it is not the ranks' number."""
    k = summary.get("shards_per_rank", 1)
    if k != 1:
        return f"  (each rank's {k} DataLoader workers read a shard each: {k * summary['num_shards']} shards)"
    if num_shards is not None and summary["num_shards"] != num_shards:
        return f"  (the reading processes read {summary['num_shards']} shards)"
    return ""


def _reference_plan(
    first: Mapping[str, Any], files: Sequence[Any], *, num_shards: int, num_threads: Optional[int]
) -> ShardPlan:
    """The plan the ranks must follow: the dataset's own plan file if it reads one; else the plan of its
    settings over its sizes archive (in the archive's unit) if it has one, or over the sizes on disk, cut as the
    RETURNN release the ranks ran cuts (``returnn_version`` of the record; older records: the newest's)."""
    if first.get("plan"):
        return load_plan(first["plan"])
    if first.get("file_sizes"):
        sizes = load_file_sizes(first["file_sizes"])
    else:
        sizes = collect_file_sizes(files, num_threads=num_threads)
    request = PlanRequest.from_options(
        num_shards=num_shards,
        partition_epoch=first["partition_epoch"],
        num_epochs=None,  # the sub-epochs the ranks read, cut as they are checked
        seq_ordering=first["seq_ordering"],
        random_seed_offset=first["random_seed_offset"],
        fixed_random_seed=first["fixed_random_seed"],
        distribution=first.get("distribution"),
        max_sub_epoch_deviation=first.get("max_sub_epoch_deviation"),
    )
    return make_plan(sizes, request).for_returnn(first.get("returnn_version"))  # its release's cut


def _per_rank(summary: Dict[str, Any], *, num_ranks: int) -> Dict[str, Any]:
    """The sequences per sub-epoch of each rank, where the plan's shards are its reading processes (DataLoader
    workers that shard: rank r's are shards ``r * k .. r * k + k - 1``, all of which its loader reads to the end),
    and the share lost when the ranks stop at the shortest rank."""
    k = summary["num_shards"] // num_ranks
    if k <= 1 or summary["num_shards"] != k * num_ranks:
        return summary
    # the job's ranks, each of whose k workers reads one of the plan's k * num_ranks shards
    summary.update(num_shards=num_ranks, shards_per_rank=k)
    for se in summary["sub_epochs"]:
        nums = se["num_seqs"]
        ranks = [
            None if None in nums[r * k : (r + 1) * k] else sum(nums[r * k : (r + 1) * k]) for r in range(num_ranks)
        ]
        known = [n for n in ranks if n is not None]
        total = sum(known)
        dropped = round(1.0 - num_ranks * min(known) / total, 6) + 0.0 if len(known) == num_ranks and total else None
        se.update(num_seqs=ranks, dropped_fraction=dropped)
    return summary


def _reads_of(
    ranks: Sequence[Mapping[str, Any]], *, num_shards: int
) -> Tuple[List[SubEpochRead], List[Violation], int]:
    """The reads to check: per reading process (``instances``, as the engine reads: a DataLoader worker that shards
    is shard ``rank * num_workers + worker`` of ``num_shards * num_workers``; a MultiEpochDataset's sub-epoch is
    several epochs of its DistributeFilesDataset) where the records have them, else per rank and sub-epoch; a
    violation where the reading processes disagree on the number of shards; and the shards the plan to check
    against is cut into."""
    reads: List[SubEpochRead] = []
    out: List[Violation] = []
    cuts, seen, twice = set(), set(), set()
    for rec in ranks:
        for se in rec["sub_epochs"]:
            instances = se.get("instances")
            if not instances:
                reads.append(
                    SubEpochRead(int(se["epoch"]), int(rec["rank"]), tuple(se["files"]), tuple(se["seq_tags"]))
                )
                continue
            for inst in instances:
                cuts.add(int(inst["num_shards"]))
                where = (int(inst["dataset_epoch"]), int(inst["shard_index"]))
                if where in seen:
                    twice.add((where[0], int(rec["rank"])))
                    continue
                seen.add(where)
                reads.append(
                    SubEpochRead(
                        int(inst["dataset_epoch"]),
                        int(inst["shard_index"]),
                        tuple(inst["files"]),
                        tuple(inst["seq_tags"]),
                    )
                )
    for epoch, rank in sorted(twice):
        out.append(
            Violation(
                "duplicate",
                -1,
                epoch,
                rank,
                f"sub-epoch {epoch}, rank {rank}: several reading processes (DataLoader workers) read the same "
                "shard, so every sequence of it is read more than once: the workers do not shard (set "
                "torch_dataloader_shard_workers=True, the default from behavior_version 37, or num_workers 1)",
            )
        )
    if len(cuts) > 1:
        out.append(
            Violation.of_settings(
                f"the reading processes cut the files into different numbers of shards {sorted(cuts)} (ranks "
                f"{num_shards}): some DataLoader workers shard and others do not",
            )
        )
    return reads, out, max(cuts) if cuts else num_shards


def verify_records(
    ranks: Sequence[Mapping[str, Any]],
    reference: Mapping[str, Any],
    *,
    num_shards: int,
    num_threads: Optional[int] = None,
) -> Tuple[List[Violation], str]:
    """Check the records of ``python -m i6_shard.returnn_ext.verify`` (one per rank, and the
    reference with the file list and each file's sequence tags) against the plan the dataset
    follows: its plan file, or the plan of its own settings (rank 0's) over its sizes archive or the
    files' sizes on disk.

    :param ranks: the rank records (``rank``, ``settings``, ``sub_epochs``)
    :param reference: ``files`` (as RETURNN loaded them) and ``file_tags`` (one list per file)
    :param num_threads: threads to stat the files (see :func:`collect_file_sizes`)
    :return: ``(violations, report_text)``
    """
    settings = {int(rec["rank"]): rec["settings"] for rec in ranks}
    violations = check_rank_settings(settings, num_shards=num_shards)
    files = reference["files"]
    if len(reference["file_tags"]) != len(files):
        raise ValueError(f"reference has {len(files)} files but {len(reference['file_tags'])} tag lists")
    first = settings[min(settings)]
    reads, cut, plan_shards = _reads_of(ranks, num_shards=num_shards)
    violations += cut
    plan = _reference_plan(first, files, num_shards=plan_shards, num_threads=num_threads)
    file_tags = {tree_key(t): list(tags) for t, tags in zip(files, reference["file_tags"])}
    violations += check_reads(reads, plan=plan, file_tags=file_tags)
    violations.sort(key=Violation.sort_key)
    shown = {k: v for k, v in first.items() if k not in ("num_shards", "shard_index", "returnn_version")}
    summary = _per_rank(summarize_reads(reads, plan=plan, file_tags=file_tags), num_ranks=num_shards)
    report = render_verify_report(
        summary, violations, settings=shown, num_shards=num_shards, returnn_version=first.get("returnn_version")
    )
    return violations, report

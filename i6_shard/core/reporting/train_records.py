"""The per-(sub-epoch, rank) records of a training report above a documented size: streamed to ``records.tsv`` one
line each, while ``summary.json``, ``report.txt`` and the plot keep the per-sub-epoch figures only."""

from __future__ import annotations

import json
import os
from typing import IO, Any, Dict, Iterable, Mapping, Optional

from ..io.atomic import atomic_write
from ..pure.training import TrainRecords

__all__ = ["TRAIN_RECORDS_FILE"]

#: (sub-epoch, rank) records that ``summary.json`` and ``report.txt`` list one by one (about 5 MB of JSON); above it
#: they hold the per-sub-epoch figures, and the records go to :data:`TRAIN_RECORDS_FILE`.
MAX_LISTED_RECORDS = 1 << 14
TRAIN_RECORDS_FILE = "records.tsv"
#: The columns of :data:`TRAIN_RECORDS_FILE` (a record's keys in ``summary.json``; empty: unknown, "missing": the
#: rank's log does not have the sub-epoch). ``planned_steps``/``planned_batches``: the plan's ``steps_taken`` and
#: ``steps_exact`` (empty without a plan simulated exactly), beside the logged ``steps``.
RECORD_COLUMNS = (
    "epoch",
    "rank",
    "consumed_frames",
    "available_frames",
    "consumed_seqs",
    "available_seqs",
    "offered_seqs",
    "steps",
    "num_files",
    "files_match_plan",
    "planned_steps",
    "planned_batches",
)


def num_records(summary: Mapping[str, Any]) -> int:
    return sum(len(se["ranks"] or ()) for se in summary["sub_epochs"])


def summarize_records(
    summary: Dict[str, Any], out_dir: str, records: Optional[TrainRecords] = None, *, always_file: bool = False
) -> Dict[str, Any]:
    """``summary`` with its records listed if there are at most :data:`MAX_LISTED_RECORDS`; else its records are
    written to ``out_dir``/:data:`TRAIN_RECORDS_FILE` (tab-separated, :data:`RECORD_COLUMNS`, one line per record,
    written as they are made), each sub-epoch's ``ranks`` set to None (in place: the records are let go) and a note
    added.

    :param records: the records of :func:`~i6_shard.core.pure.training.analyze_training_records` (whose summary
        lists none; their dicts are made one sub-epoch at a time as they are written); None: those the summary lists
    :param always_file: write :data:`TRAIN_RECORDS_FILE` also where the summary lists the records (as
        TrainReportJob does: its ``out_records`` is always there)
    :return: the summary (the same dict), with ``records_file`` naming the file where the records are not listed
    """
    count = num_records(summary) if records is None else records.count
    if count <= MAX_LISTED_RECORDS:
        if records is not None:
            for i, se in enumerate(summary["sub_epochs"]):
                se["ranks"] = list(records.rows(i))
        if always_file:
            with atomic_write(os.path.join(out_dir, TRAIN_RECORDS_FILE), "wt", encoding="utf-8", newline="\n") as f:
                f.write("\t".join(RECORD_COLUMNS) + "\n")
                for se in summary["sub_epochs"]:
                    _write_rows(f, se["epoch"], se["ranks"])
        return summary
    with atomic_write(os.path.join(out_dir, TRAIN_RECORDS_FILE), "wt", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(RECORD_COLUMNS) + "\n")
        for i, se in enumerate(summary["sub_epochs"]):
            _write_rows(f, se["epoch"], se["ranks"] if records is None else records.rows(i))
            se["ranks"] = None  # let the records go before the JSON is written
    summary["records_file"] = TRAIN_RECORDS_FILE
    summary["notes"].append(
        f"{count:,} (sub-epoch, rank) records, more than the {MAX_LISTED_RECORDS:,} this summary and report list: "
        f"they are in {TRAIN_RECORDS_FILE} (tab-separated, one line each); the figures per sub-epoch are complete"
    )
    return summary


def _write_rows(f: IO[str], epoch: int, ranks: Iterable[Mapping[str, Any]]) -> None:
    for x in ranks:
        if x.get("missing"):
            f.write(f"{epoch}\t{x['rank']}" + "\tmissing" * (len(RECORD_COLUMNS) - 2) + "\n")
            continue
        cells = [epoch] + [x.get(c) for c in RECORD_COLUMNS[1:]]
        f.write("\t".join("" if c is None else str(c).lower() if isinstance(c, bool) else str(c) for c in cells))
        f.write("\n")


def dump_summary(summary: Mapping[str, Any], f: IO[str]) -> None:
    """Write the summary as :func:`~i6_shard.core.reporting.train_report.train_summary_json` gives it (same bytes),
    in chunks: no copy of the whole text in memory."""
    json.dump(summary, f, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False)
    f.write("\n")

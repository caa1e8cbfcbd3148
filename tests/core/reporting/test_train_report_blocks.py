"""The training report reads its records back a block of sub-epochs at a time, and the log reader spills them a chunk
at a time: the summary and the records written are the same whatever the block and chunk sizes (one sub-epoch per
block, one record per chunk, or all at once), on the real logs, with and without a plan, lengths and a length filter,
and with the records listed or streamed to records.tsv."""

import json
import os

import pytest

from i6_shard.core.io import returnn_log
from i6_shard.core.io.returnn_log import read_training_logs
from i6_shard.core.pure import record_blocks
from i6_shard.core.reporting import train_records
from i6_shard.core.pure.training import analyze_training
from i6_shard.core.reporting.train_report import write_train_report

from .test_train_report import LOGS, lengths_of, logs_of, plan_of

CASES = sorted(n for n in os.listdir(LOGS) if os.path.isdir(os.path.join(LOGS, n)))


def _small_blocks(monkeypatch):
    monkeypatch.setattr(record_blocks, "BLOCK_RECORDS", 1)
    monkeypatch.setattr(returnn_log, "_SPILL_ROWS", 1)
    monkeypatch.setattr(returnn_log, "_SPILL_STEPS", 1)


def _summary(name, **kwargs):
    log = read_training_logs(logs_of(name))
    try:
        return json.dumps(analyze_training(log, file_lengths=lengths_of(name), **kwargs), sort_keys=True)
    finally:
        log.spill.close()


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("with_plan", [False, True])
def test_the_summary_does_not_depend_on_the_block_size(name, with_plan, monkeypatch):
    kwargs = {"plan": plan_of(name)} if with_plan else {}
    whole = _summary(name, **kwargs)
    _small_blocks(monkeypatch)
    assert _summary(name, **kwargs) == whole


def _outputs(name, out, **kwargs):
    write_train_report(logs_of(name), out, plot=False, read_hdf=False, records_file=True, **kwargs)
    return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


@pytest.mark.parametrize("name", ["w4_bv24", "w2_bv38_worker", "w2_nofix"])
@pytest.mark.parametrize("listed", [True, False])
def test_the_written_outputs_do_not_depend_on_the_block_size(name, listed, tmp_path, monkeypatch):
    if not listed:
        monkeypatch.setattr(train_records, "MAX_LISTED_RECORDS", 3)
    lengths = os.path.join(LOGS, name, "file_lengths.json")
    whole = _outputs(name, str(tmp_path / "whole"), file_lengths_path=lengths)
    _small_blocks(monkeypatch)
    assert _outputs(name, str(tmp_path / "blocks"), file_lengths_path=lengths) == whole
    assert ("records_file" in json.loads(whole["summary.json"])) is not listed

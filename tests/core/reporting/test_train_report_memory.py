"""The training report's memory does not grow with its (sub-epoch, rank) records, from the reading of the logs to the
writing of its outputs: the log reader spills each rank's records to a scratch file, the analysis reads them back a
block of sub-epochs at a time, and the records are streamed to records.tsv; what grows is the summary (its figures
per sub-epoch) and, for records with a "using files" line, their lists of files. Measured in bytes allocated
(tracemalloc's peak), never in time; the RSS of whole runs at 1,047,552 records is in
benchmarks/bench_train_report_memory.py."""

import os
import tracemalloc

import pytest

from i6_shard.core.pure import record_blocks
from i6_shard.core.reporting import train_records, train_report

#: Hundreds of thousands of records under tracemalloc (about 10 s of CPU together): the full suite's, not the quick
#: tier's.
pytestmark = pytest.mark.slow

RANKS = 64
#: What the peak may grow by from 32,768 to 131,072 records (512 to 2,048 sub-epochs of 64 ranks, all streamed to
#: records.tsv): the summary's figures of the further sub-epochs (about 400 bytes each) and the reader's list of its
#: spilled chunks (16 bytes per 64 records). Measured: 0.6 MB; 12 MB (125 bytes per further record) while the reader
#: held its columns and the analysis its grids for every record.
MAX_GROWTH_BYTES = 2 * 10**6


def _write_log(path, *, num_epochs):
    """A torchrun stdout in which each rank starts each sub-epoch (one line each)."""
    with open(path, "w") as f:
        for r in range(RANKS):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_epochs + 1):
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(RANKS)))


def _peak(tmp_path, name, *, num_epochs):
    path = str(tmp_path / f"{name}.log")
    _write_log(path, num_epochs=num_epochs)
    out = str(tmp_path / name)
    tracemalloc.start()
    try:
        summary = train_report.write_train_report([path], out, plot=False, read_hdf=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert summary["records_file"] == train_records.TRAIN_RECORDS_FILE
    with open(os.path.join(out, train_records.TRAIN_RECORDS_FILE)) as f:
        assert sum(1 for _ in f) == RANKS * num_epochs + 1  # every record written, one line each
    return peak


def test_four_times_the_records_take_no_more_memory_but_their_summary(tmp_path):
    _peak(tmp_path, "warm", num_epochs=300)  # (what is imported or cached on the first run counts for none)
    small = _peak(tmp_path, "small", num_epochs=512)
    large = _peak(tmp_path, "large", num_epochs=2048)
    assert large - small < MAX_GROWTH_BYTES, f"{(large - small) / 1e6:.2f} MB more for 4 times the records"


#: Bytes each further record with a "using files" line (two names) may add to the peak, from reading to writing: the
#: summary's figures of its sub-epoch (a 64th of them) and the chunks the reader spilled, as without files; its files
#: wait as ids in the scratch file, and the distinct names are held once. Measured: 128 while each record's list was
#: held (its ids now), 245 while the reader's columns and the analysis's grids were held for every record, 582 with the
#: reader's tuple, wrapper list and dict entry per record and the analysis's key tuple.
MAX_BYTES_PER_FILES_RECORD = 40


def _write_files_log(path, *, num_ranks, num_epochs):
    """A torchrun stdout in which each rank is given two files per sub-epoch (the same ones every 4 sub-epochs: the
    names, which a full epoch holds once, are not what grows) and starts it."""
    line = "[default{r}]:<DistributeFilesDataset 'train' epoch={e}>: using files for epoch {e}: ['/d/{s}_{r}_a.hdf', "
    line += "'/d/{s}_{r}_b.hdf']\n"
    with open(path, "w") as f:
        for r in range(num_ranks):
            f.write(f"[default{r}]:RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py\n")
        for e in range(1, num_epochs + 1):
            f.write("".join(line.format(r=r, e=e, s=e % 4) for r in range(num_ranks)))
            f.write("".join(f"[default{r}]:start epoch {e} global train step 0\n" for r in range(num_ranks)))


def _peak_bytes(tmp_path, name, *, num_records):
    path = str(tmp_path / f"{name}.log")
    _write_files_log(path, num_ranks=64, num_epochs=num_records // 64)
    tracemalloc.start()
    try:
        train_report.write_train_report([path], str(tmp_path / name), plot=False, read_hdf=False)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_record_with_its_files_adds_no_more_than_one_without_them(tmp_path, monkeypatch):
    """The slope between 4,096 and 16,384 records (both streamed to records.tsv), not the bytes per record: what is
    made once (imports, the per-sub-epoch summary) does not count, nor does the block of records read back at once
    (made smaller than these counts here)."""
    monkeypatch.setattr(train_records, "MAX_LISTED_RECORDS", 512)
    monkeypatch.setattr(record_blocks, "BLOCK_RECORDS", 1024)
    _peak_bytes(tmp_path, "warm", num_records=2**10)  # (what is imported or cached on the first run counts for none)
    small = _peak_bytes(tmp_path, "small", num_records=2**12)
    large = _peak_bytes(tmp_path, "large", num_records=2**14)
    slope = (large - small) / (2**14 - 2**12)
    assert slope < MAX_BYTES_PER_FILES_RECORD, f"{slope:.1f} bytes per further record"
    assert slope > 0  # (the measure sees the records: it can fail)

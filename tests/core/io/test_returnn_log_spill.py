"""The log reader spills each rank's closed records and steps to an unnamed scratch file a chunk at a time and reads
them back per rank: the tables it gives back are those it would hold in memory, whatever the chunk sizes, on the
recorded logs of real trainings and on logs with restarts, lost steps and sub-epochs run again."""

import glob
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.core.io import log_file_lists, returnn_log
from i6_shard.core.io.returnn_log import parse_rank_log, read_training_logs
from i6_shard.core.io.spill import Spill
from tests.strategies import examples

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "returnn_logs")
CASES = sorted(d for d in glob.glob(os.path.join(LOGS, "*")) if os.path.isdir(d))


def _tables_equal(a, b):
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name


def _parsed(lines, spill, monkeypatch, *, rows, steps):
    monkeypatch.setattr(returnn_log, "_SPILL_ROWS", rows)
    monkeypatch.setattr(returnn_log, "_SPILL_STEPS", steps)
    parser = returnn_log._RankParser(rank=0, source="x", dataset_name="train", frames_dim=None, spill=spill)
    for lineno, line in enumerate(lines, start=1):
        parser.feed(line, lineno)
    return parser.result()


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_spilled_tables_are_the_tables_held_in_memory(case, monkeypatch):
    paths = sorted(glob.glob(os.path.join(case, "*.log")))
    held = read_training_logs(paths)
    monkeypatch.setattr(returnn_log, "_SPILL_ROWS", 1)
    monkeypatch.setattr(returnn_log, "_SPILL_STEPS", 1)
    monkeypatch.setattr(log_file_lists, "_CHUNK", 1)
    spilled = read_training_logs(paths)
    assert spilled.spill.size > 0  # (the records went there)
    assert spilled.epochs == held.epochs
    for a, b in zip(held.ranks, spilled.ranks):
        _tables_equal(a.table, b.table)
        rows = range(len(a.table.epoch))
        assert [a.files_of(i) for i in rows] == [b.files_of(i) for i in rows]
        assert a.num_instances.tolist() == b.num_instances.tolist()


_LINE = st.one_of(
    st.builds("start epoch {} global train step 0".format, st.integers(1, 4)),
    st.builds("ep {} train num_seqs: {}".format, st.integers(1, 4), st.integers(-1, 9)),
    st.builds(
        "ep {} train, step {}, num_seqs {}, sum_size:time:data {}, complete {}%".format,
        st.integers(1, 4),
        st.integers(0, 6),
        st.integers(0, 9),
        st.integers(0, 99),
        st.sampled_from(["10.00", "50.00"]),
    ),
    st.builds("Epoch {}: Trained {} steps".format, st.integers(1, 4), st.integers(0, 9)),
    st.just("RETURNN starting up, version 1, date/time x, pid 1, cwd /tmp, Python /usr/bin/py"),
)


@settings(max_examples=examples(300), deadline=None)
@given(lines=st.lists(_LINE, max_size=60), rows=st.integers(0, 3), steps=st.integers(1, 4))
def test_any_chunk_sizes_give_the_same_table(lines, rows, steps):
    held = parse_rank_log(lines, rank=0, source="x")
    spill = Spill()
    try:
        with pytest.MonkeyPatch.context() as mp:
            spilled = _parsed(lines, spill, mp, rows=rows, steps=steps)
        _tables_equal(held.table, spilled.table)
    finally:
        spill.close()


def test_the_scratch_file_has_no_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    spill = Spill()
    spill.append([np.arange(10)])
    assert os.listdir(tmp_path) == []  # (nothing a failure or a kill could leave behind)
    spill.close()

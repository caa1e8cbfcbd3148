"""Job helpers: Sisyphus paths become plain strings for RETURNN, variables are written atomically
in the format tk.Variable reads, and subprocesses get the import roots of pickled functions."""

import builtins
import functools
import os

import pytest

from tests.jobs.conftest import SISYPHUS_REASON

pytest.importorskip("sisyphus.job", reason=SISYPHUS_REASON)

import numpy as np  # noqa: E402
from sisyphus import tk  # noqa: E402

from i6_shard.jobs.util import import_roots, instantiate, pythonpath_env, write_variable  # noqa: E402
from tests.hdf_data import hdf_sub_epoch_dataset  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_instantiate_replaces_paths_everywhere():
    p = tk.Path("/data/a.hdf")
    obj = {"files": [p, (p, {"k": p})], "f": functools.partial(hdf_sub_epoch_dataset, p, seq_ordering=p), "n": 3}
    out = instantiate(obj)
    assert out["files"] == ["/data/a.hdf", ("/data/a.hdf", {"k": "/data/a.hdf"})] and out["n"] == 3
    assert out["f"].func is hdf_sub_epoch_dataset
    assert out["f"].args == ("/data/a.hdf",) and out["f"].keywords == {"seq_ordering": "/data/a.hdf"}
    assert obj["files"][0] is p  # the input is left alone


def test_import_roots_skip_installed_packages():
    roots = import_roots({"a": functools.partial(hdf_sub_epoch_dataset), "b": [np.asarray, functools.partial]})
    assert roots == [REPO]  # i6_shard and tests.hdf_data live here; numpy and functools are installed
    env = pythonpath_env(["/x", REPO])
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == ["/x", REPO]


def test_write_variable_reads_back(work_dir):
    from sisyphus.job_path import Variable

    var = Variable(str(work_dir / "v"))
    write_variable(var, 0.25)
    assert var.get() == 0.25
    write_variable(var, False)
    assert var.get() is False
    assert os.listdir(work_dir) == ["v"]  # no temporary file left behind


class _DiesMidWrite:
    """A file that writes half of what it is given, then dies (as a killed task would)."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(data[:len(data) // 2])
        self._f.flush()
        raise KeyboardInterrupt("killed mid-write")

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._f.close()


@pytest.mark.parametrize("old_value", [None, 0.5])
def test_write_variable_killed_mid_write_leaves_nothing_that_looks_finished(work_dir, monkeypatch, old_value):
    from sisyphus.job_path import Variable

    var = Variable(str(work_dir / "v"))
    if old_value is not None:
        write_variable(var, old_value)
    real_open = builtins.open

    def dying_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return _DiesMidWrite(f) if "w" in mode else f

    with monkeypatch.context() as m:
        m.setattr(builtins, "open", dying_open)
        with pytest.raises(KeyboardInterrupt):
            write_variable(var, 0.25)  # half written: "0." would read back as 0.0
    if old_value is None:
        assert os.listdir(work_dir) == []
    else:
        assert var.get() == old_value and os.listdir(work_dir) == ["v"]

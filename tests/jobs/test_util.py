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
        self._f.write(data[: len(data) // 2])
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


def test_plain_numbers_converts_numpy_scalars_and_copies_nothing_else():
    from collections import OrderedDict

    from i6_shard.jobs.util import plain_numbers

    p = tk.Path("/data/a.hdf")
    obj = {
        "n": np.int64(4),
        "files": [p, (p, np.bool_(False))],
        "f": functools.partial(hdf_sub_epoch_dataset, p, k=np.int32(2)),
        "x": 1.5,
    }
    out = plain_numbers(obj)
    assert out["n"] == 4 and type(out["n"]) is int and type(out["files"][1][1]) is bool
    assert out["files"][0] is p and out["files"][1][0] is p and type(out["files"][1]) is tuple
    assert out["f"].keywords == {"k": 2} and type(out["f"].keywords["k"]) is int and out["f"].args == (p,)
    assert type(obj["n"]) is np.int64  # the input is left alone
    plain = {"a": [1, (p, "s")], "f": functools.partial(hdf_sub_epoch_dataset, 3), "o": OrderedDict(n=np.int64(1))}
    assert plain_numbers(plain) is plain  # nothing to convert: the very same object, so it hashes as before
    assert type(plain_numbers(np.float64(1.5))) is np.float64  # Sisyphus hashes it: left as it is


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, {}),
        ({"time_rqmt": 2, "mem_rqmt": 1.5, "cpu_rqmt": 4}, {"time": 2, "mem": 1.5, "cpu": 4}),
        ({"time_rqmt": np.float32(0.5), "cpu_rqmt": np.int64(2)}, {"time": 0.5, "cpu": 2}),
    ],
)
def test_check_rqmt_args_gives_plain_numbers(kwargs, expected):
    from i6_shard.jobs.util import check_rqmt_args

    given = check_rqmt_args(**kwargs)
    assert given == expected and all(type(v) in (int, float) for v in given.values())


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"time_rqmt": 0}, ValueError),
        ({"time_rqmt": -2.0}, ValueError),
        ({"mem_rqmt": float("inf")}, ValueError),
        ({"mem_rqmt": True}, TypeError),
        ({"mem_rqmt": "8G"}, TypeError),
        ({"cpu_rqmt": 2.0}, TypeError),
        ({"cpu_rqmt": 0}, ValueError),
    ],
)
def test_check_rqmt_args_rejects_what_an_engine_cannot_take(kwargs, error):
    from i6_shard.jobs.util import check_rqmt_args

    ((name, value),) = kwargs.items()
    with pytest.raises(error, match=f"^{name}="):
        check_rqmt_args(**kwargs)


def test_sized_task_is_a_mini_task_only_when_small_and_nothing_given():
    from i6_shard.jobs.util import round_up, sized_task

    sized = {"cpu": 1, "mem": 3, "time": 0.5}
    assert sized_task("run", given={}, sized=sized, mini=True).mini_task
    big = sized_task("run", given={}, sized=sized, mini=False)
    assert not big.mini_task and big.rqmt() == {"cpu": 1, "mem": 3.0, "time": 0.5}
    given = sized_task("run", given={"mem": 8}, sized=sized, mini=True, args=range(2))
    assert not given.mini_task and given.rqmt() == {"cpu": 1, "mem": 8.0, "time": 0.5} and len(given._args) == 2
    assert (round_up(0.5, step=0.25), round_up(0.5000001, step=0.25), round_up(2.2, step=1)) == (0.5, 0.75, 3)


def test_instantiate_gives_delayed_values_their_value():
    """Besides paths, a delayed value (a format of paths, a delayed op) becomes its value, in a partial too."""
    from sisyphus.delayed_ops import DelayedFormat

    p = tk.Path("/data/a.hdf")
    name = DelayedFormat("{}.{}", p, "cache")
    out = instantiate({"x": [name], "f": functools.partial(hdf_sub_epoch_dataset, name)})
    assert out["x"] == ["/data/a.hdf.cache"] and out["f"].args == ("/data/a.hdf.cache",)

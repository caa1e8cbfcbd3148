"""Names that are not plain ``str`` (``numpy.str_``, ``str`` subclasses with a hostile ``__repr__``,
``__str__`` or ``__format__``, ``os.PathLike`` objects) reach generated configs as plain literals on
every builder path: i6_shard's own writer and i6_core's classic and V2 configs; inline lists, list
files, templates, extra options, ``file_sizes``, ``files_key`` and the config key. RETURNN loads each
config to the plain values, and no text of a hostile method ever runs."""

import os
import pathlib

import numpy as np
import pytest

from i6_shard.returnn_config import sharded_files_dataset
from i6_shard.returnn_config.pycode import config_code
from i6_shard.returnn_config.pycode import write_returnn_config
from i6_shard.returnn_config.pycode import plain_str, plain_value

pytest.importorskip("returnn.config", reason="needs RETURNN: pip install returnn")

FLAVOURS = ["i6_shard", "classic", "v2"]


def hostile_str(marker: str):
    """A str subclass whose repr, str and format are code that creates ``marker`` when executed."""
    code = f"__import__('os').makedirs({marker!r}, exist_ok=True) or 'x'"

    class Hostile(str):
        def __repr__(self):
            return code

        def __str__(self):
            return code

        def __format__(self, spec):
            return code

    return Hostile


class PathObject:
    """An os.PathLike whose __fspath__ returns a given str (possibly of a hostile type)."""

    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return self.path


def write_and_load(flavour, dataset, path, *, key="train"):
    """Write ``dataset`` at ``key`` in a config of ``flavour``; load it with RETURNN's loader."""
    from returnn.config import Config

    if flavour == "i6_shard":
        write_returnn_config(path, {key: dataset})
    else:
        pytest.importorskip("sisyphus.job", reason="needs the real Sisyphus (pip install from its source repository)")
        pytest.importorskip("i6_core.returnn", reason="needs i6_core on PYTHONPATH (clone it into recipe/)")
        from i6_shard.returnn_config.i6core import sharded_returnn_config

        rc = sharded_returnn_config({"backend": "torch"}, dataset, key=key, v2=flavour == "v2", black_formatting=False)
        rc.write(str(path))
    config = Config()
    config.load_file(str(path))
    return config.typed_value(str.__str__(key))


def assert_plain(value):
    """Every str in ``value`` is a plain str (a subclass would keep its own methods)."""
    if isinstance(value, str):
        assert type(value) is str, type(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            assert_plain(k)
            assert_plain(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            assert_plain(v)


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("files_kind", ["inline", "list_file"])
def test_every_name_becomes_a_plain_literal(tmp_path, flavour, files_kind):
    marker = str(tmp_path / "executed")
    Hostile = hostile_str(marker)
    names = [
        np.str_("/data/a.hdf"),
        Hostile("/data/b'.hdf"),
        pathlib.PurePosixPath("/data/c.hdf"),
        PathObject(Hostile("/data/d.hdf")),
        "/data/e.hdf",
        np.str_("/data/f.hdf"),
    ]
    plain_names = ["/data/a.hdf", "/data/b'.hdf", "/data/c.hdf", "/data/d.hdf", "/data/e.hdf", "/data/f.hdf"]
    files = names if files_kind == "inline" else PathObject(Hostile(str(tmp_path / "files.json")))
    template = {
        "class": "HDFDataset",
        "seq_ordering": Hostile("random"),
        Hostile("note"): np.str_("n\u00e9"),
        "extra": [Hostile("x"), (np.str_("y"), np.int64(7), np.float32(0.5), np.bool_(True))],
    }
    dataset = sharded_files_dataset(
        files,
        sub_epoch_dataset=template,
        partition_epoch=np.int64(2),
        files_key=Hostile("files"),
        seq_ordering=Hostile("random"),
        file_sizes=PathObject(np.str_(str(tmp_path / "sizes.npz"))),
        extra_opts={Hostile("name"): Hostile("train set"), "cache": [np.str_("z"), pathlib.PurePath("/p")]},
    )
    loaded = write_and_load(flavour, dataset, tmp_path / "returnn.config", key=Hostile("train"))
    assert not os.path.exists(marker), "text of a hostile method was executed"
    expected_files = plain_names if files_kind == "inline" else str(tmp_path / "files.json")
    assert loaded["files"] == expected_files
    assert loaded["file_sizes"] == str(tmp_path / "sizes.npz")
    assert loaded["name"] == "train set" and loaded["cache"] == ["z", "/p"]
    assert loaded["seq_ordering"] == "random"
    sub = loaded["get_sub_epoch_dataset"](plain_names[:2])
    assert sub == {
        "class": "HDFDataset",
        "seq_ordering": "random",
        "note": "n\u00e9",
        "extra": ["x", ("y", 7, 0.5, True)],
        "files": plain_names[:2],
    }
    assert_plain({k: v for k, v in loaded.items() if k not in ("class", "get_sub_epoch_dataset")})
    assert_plain(sub)
    assert type(sub["extra"][1][1]) is int and type(sub["extra"][1][2]) is float and sub["extra"][1][3] is True


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_numpy_str_names_no_longer_need_numpy_in_the_config(tmp_path, flavour):
    """``np.loadtxt`` and pandas give ``numpy.str_``; their repr is ``np.str_('...')``."""
    names = list(np.array(["/data/x.hdf", "/data/y.hdf"]))
    assert type(names[0]) is np.str_
    dataset = sharded_files_dataset(
        names, sub_epoch_dataset={"class": "HDFDataset", "seq_ordering": "random"}, partition_epoch=1
    )
    loaded = write_and_load(flavour, dataset, tmp_path / "returnn.config")
    assert loaded["files"] == ["/data/x.hdf", "/data/y.hdf"]
    assert_plain(loaded["files"])


def test_config_code_keys_and_values_of_str_subclasses(tmp_path):
    marker = str(tmp_path / "executed")
    Hostile = hostile_str(marker)
    code = config_code({Hostile("learning_rate_file"): Hostile("lr.txt"), "n": [np.str_("a"), {Hostile("k"): 1}]})
    assert "learning_rate_file = 'lr.txt'\n" in code and "n = ['a', {'k': 1}]\n" in code
    assert "makedirs" not in code
    with pytest.raises(ValueError, match="config key 'not valid' is not an ASCII Python identifier"):
        config_code({Hostile("not valid"): 1})


def test_plain_value_runs_no_method_of_the_value():
    calls = []

    class Spy(str):
        def __repr__(self):
            calls.append("repr")
            return "x"

        def __str__(self):
            calls.append("str")
            return "x"

        def __format__(self, spec):
            calls.append("format")
            return "x"

        def __eq__(self, other):
            calls.append("eq")
            return False

        __hash__ = str.__hash__

    value = plain_value({Spy("k"): [Spy("v"), (Spy("w"),)]})
    assert value == {"k": ["v", ("w",)]} and calls == []
    assert type(plain_str(Spy("a"))) is str and calls == []

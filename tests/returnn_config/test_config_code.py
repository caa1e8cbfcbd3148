"""Generated config code round-trips any file name through RETURNN's own config loader and
never executes text from a file name."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.returnn_config import sharded_files_dataset
from i6_shard.returnn_config.pycode import config_code
from i6_shard.returnn_config.pycode import write_returnn_config
from i6_shard.returnn_config.sub_epoch import GET_SUB_EPOCH_DATASET

from ..strategies import file_names, file_trees

HDF = {"class": "HDFDataset", "seq_ordering": "random"}


def _load(path):
    from returnn.config import Config

    config = Config()
    config.load_file(str(path))
    return config


def _injections(marker):
    code = f"__import__('os').mkdir({marker!r})"
    return [
        f"x'); {code}; ('",
        f'x"); {code}; ("',
        f"x'''); {code}; ('''",
        f"x\\'); {code}; #",
        f"x\n{code}\n",
        f"x\\\n{code}",
        f"{{{code}}}",
        f"x\r{code}",
        f"x\u2028{code}",
        f"x' + {code} + '",
        f"\\x27); {code}; #",
    ]


def test_injection_attempts_round_trip_and_do_not_run(tmp_path):
    marker = str(tmp_path / "executed")
    names = _injections(marker) + [
        "with space.hdf",
        "trailing ",
        " leading",
        "tab\tname",
        "back\\slash",
        "ümlaut-日本",
        "#comment",
        "\U0001f600.hdf",
        "control \x7f\x1b\x0c odd",
    ]
    d = sharded_files_dataset(names, sub_epoch_dataset=HDF, partition_epoch=2)
    path = tmp_path / "returnn.config"
    write_returnn_config(path, {"train": d})
    path.read_bytes().decode("ascii")  # ASCII only: any locale reads it
    loaded = _load(path).typed_value("train")
    assert not os.path.exists(marker)
    assert loaded["files"] == names
    assert loaded["get_sub_epoch_dataset"](names)["files"] == names


@settings(max_examples=examples(60))
@given(names=st.lists(file_names, min_size=1, max_size=6), template_value=file_names, partition_epoch=st.integers(1, 3))
def test_any_file_names_round_trip(tmp_path_factory, names, template_value, partition_epoch):
    names = names * partition_epoch  # enough files for the bins
    template = {"class": "HDFDataset", "seq_ordering": "random", "extra": [template_value, (template_value,)]}
    d = sharded_files_dataset(names, sub_epoch_dataset=template, partition_epoch=partition_epoch)
    path = tmp_path_factory.mktemp("cfg") / "returnn.config"
    write_returnn_config(path, {"train": d, "__debug_dummy_distributed_rank_and_size": (1, 2)})
    config = _load(path)
    train = config.typed_value("train")
    assert train["files"] == names
    assert {k: v for k, v in train.items() if k != "get_sub_epoch_dataset"} == {
        k: v for k, v in d.items() if k != "get_sub_epoch_dataset"
    }
    partial = train["get_sub_epoch_dataset"]
    assert partial.func is GET_SUB_EPOCH_DATASET.resolve()  # the function itself, imported by the config
    assert partial.keywords == d["get_sub_epoch_dataset"].keywords
    assert config.typed_value("__debug_dummy_distributed_rank_and_size") == (1, 2)


@settings(max_examples=examples(40))
@given(trees=st.lists(file_trees(), min_size=1, max_size=4))
def test_file_trees_round_trip_with_tuples_and_dicts(tmp_path_factory, trees):
    path = tmp_path_factory.mktemp("cfg") / "returnn.config"
    write_returnn_config(path, {"files": trees})
    loaded = _load(path).typed_value("files")
    assert loaded == trees
    assert repr(loaded) == repr(trees)  # tuples stay tuples, lists stay lists


def test_code_shape_and_errors():
    code = config_code({"x": float("inf"), "y": [1.5, None, True, b"b"], "z": ()})
    assert "x = float('inf')\n" in code and "y = [1.5, None, True, b'b']\n" in code and "z = ()\n" in code
    assert "sys.path" not in code  # nothing from i6_shard needed
    import numpy as np
    from fractions import Fraction

    assert config_code({"n": np.int64(3), "f": np.float32(0.5)}).endswith("n = 3\nf = 0.5\n")
    with pytest.raises(TypeError, match="has no safe literal"):
        config_code({"q": Fraction(1, 3)})
    for key in ("not valid", "class", "\u00fc"):
        with pytest.raises(ValueError, match="not an ASCII Python identifier"):
            config_code({key: 1})
    with pytest.raises(TypeError, match=r"train\['f'\]: function .* has no safe literal|cannot go into a RETURNN"):
        config_code({"train": {"f": lambda x: x}})
    with pytest.raises(TypeError, match="has no safe literal"):
        config_code({"train": {"f": object()}})


def test_i6_shard_is_put_on_sys_path_first():
    import i6_shard.returnn_config.pycode as pycode

    d = sharded_files_dataset(["a"], sub_epoch_dataset=HDF, partition_epoch=1)
    code = config_code({"train": d})
    root = pycode.i6_shard_root()
    if pycode._in_site_packages(root):
        pytest.skip("i6_shard is installed in site-packages here; no sys.path entry is needed")
    assert code.index(f"sys.path.insert(0, {root!r})") < code.index("from i6_shard.")


def test_config_must_be_a_dict(tmp_path):
    for call in (lambda: config_code([("train", 1)]), lambda: write_returnn_config(tmp_path / "x", "train = 1")):
        with pytest.raises(TypeError, match=r"config has type (list|str); give a dict of RETURNN config keys"):
            call()
    assert not os.path.exists(tmp_path / "x")

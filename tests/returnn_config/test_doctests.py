"""The ``>>>`` examples of the config builders and of the RETURNN-side code run (setup.cfg collects doctests only
from i6_shard/core)."""

import contextlib
import doctest

import pytest

from i6_shard.returnn_config import checks, pycode, sub_epoch
from i6_shard.returnn_config.reader import classes, engine, sync, walk


@pytest.mark.parametrize("module", [checks, pycode, sub_epoch, classes, engine, sync, walk], ids=lambda m: m.__name__)
def test_doctests(module):
    with pytest.warns() if module is checks else contextlib.nullcontext():  # checks shows the unknown-version warning
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module.__name__} has no doctests: add one or drop it from this list"
    assert result.failed == 0


def test_returnn_ext_doctests():
    module = pytest.importorskip("i6_shard.returnn_ext.sub_epoch", reason="needs RETURNN: pip install returnn dm-tree")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

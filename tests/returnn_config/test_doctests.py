"""The ``>>>`` examples of the config builders run (setup.cfg collects doctests only from i6_shard/core)."""

import contextlib
import doctest

import pytest

from i6_shard.returnn_config import checks, pycode, reader, sub_epoch


@pytest.mark.parametrize("module", [checks, pycode, reader, sub_epoch], ids=lambda m: m.__name__)
def test_doctests(module):
    with pytest.warns() if module is checks else contextlib.nullcontext():  # checks shows the unknown-version warning
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module.__name__} has no doctests: add one or drop it from this list"
    assert result.failed == 0


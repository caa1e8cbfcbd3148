"""The ``>>>`` examples of the config builders run (setup.cfg collects doctests only from i6_shard/core)."""

import doctest

import pytest

from i6_shard.returnn_config import checks, pycode, sub_epoch


@pytest.mark.parametrize("module", [checks, pycode, sub_epoch], ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module.__name__} has no doctests: add one or drop it from this list"
    assert result.failed == 0

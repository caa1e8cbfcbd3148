"""The ``>>>`` examples of the config builders run (setup.cfg collects doctests only from i6_shard/core)."""

import doctest

import pytest

from i6_shard.returnn_config import _args, checks, dataset, pycode, sub_epoch


@pytest.mark.parametrize("module", [_args, checks, dataset, pycode, sub_epoch], ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if module is not dataset:
        assert result.attempted > 0

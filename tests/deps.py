"""Optional dependencies of tests, each skipped with how to install it."""

import importlib.util

import pytest


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ImportError:  # an import hook that refuses it
        return True


#: Tests that draw a plot (plan, training report) or compare outputs that include one.
needs_matplotlib = pytest.mark.skipif(
    _missing("matplotlib"),
    reason="draws a plot: pip install matplotlib (the plot extra: pip install 'i6_shard[plot]')")

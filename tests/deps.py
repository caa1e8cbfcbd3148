"""Optional dependencies of tests, each skipped with how to install it."""

import importlib.util

import pytest


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ImportError:  # an import hook that refuses it
        return True


#: How to get what the test extra holds (RETURNN, dm-tree, h5py, matplotlib, pyarrow, hypothesis, ruff).
TEST_EXTRA = "pip install -e '.[test]'"
RETURNN_REASON = f"needs RETURNN (in the test extra): {TEST_EXTRA}"
H5PY_REASON = f"writes or reads HDF files with h5py (in the test extra): {TEST_EXTRA}"
MATPLOTLIB_REASON = f"draws a plot with matplotlib (in the test extra): {TEST_EXTRA}"
#: Sisyphus is not on PyPI under its name: the PyPI package 'sisyphus' is another project.
SISYPHUS_REASON = (
    "needs the real Sisyphus: pip install it from its source repository "
    "(github.com/rwth-i6/sisyphus); the PyPI package 'sisyphus' is unrelated"
)

#: Tests that draw a plot (plan, training report) or compare outputs that include one.
needs_matplotlib = pytest.mark.skipif(
    _missing("matplotlib"), reason="draws a plot: pip install matplotlib (the plot extra: pip install 'i6_shard[plot]')"
)


#: How to get torch for the tests: the CPU build is all they need (a plain ``pip install torch`` pulls a CUDA build
#: of several GB on Linux).
TORCH_INSTALL = (
    "pip install torch==2.13.0 (the CPU build 2.13.0+cpu; where pip's index serves a CUDA build: "
    "pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu)"
)


def needs_torch(why: str):
    """``import torch``, or skip the test with ``why`` and how to install it."""
    return pytest.importorskip("torch", reason=f"{why}: {TORCH_INSTALL}")


def mount_unavailable(stderr: str) -> bool:
    """Whether ``unshare -rm sh -c 'mount -t tmpfs ...'`` failed in ``unshare`` or ``mount`` themselves (no user
    namespaces or no tmpfs here): the one failure of such a run that skips a test rather than failing it."""
    return any(line.startswith(("unshare: ", "mount: ", "sh: 1: mount: ")) for line in (stderr or "").splitlines())

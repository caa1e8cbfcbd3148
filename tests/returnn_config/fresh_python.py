"""A Python process like a separate RETURNN installation without i6_shard: no site processing
(``-S``, so no .pth file runs and an editable install of i6_shard is not importable) and only the
directories of RETURNN and its dependencies on ``PYTHONPATH``."""

import os
import subprocess
import sys

import pytest

from tests.blocking import run_to_end


def _env():
    import h5py
    import numpy
    import returnn
    import tree

    dirs = dict.fromkeys(
        os.path.dirname(os.path.dirname(os.path.abspath(m.__file__))) for m in (returnn, numpy, h5py, tree)
    )
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dirs)}


def run_without_i6_shard(args, *, cwd) -> subprocess.CompletedProcess:
    """Run ``python -S *args``; skip the test if i6_shard is importable there all the same
    (i6_shard installed into the same directory as RETURNN, not as an editable install)."""
    env = _env()
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import i6_shard"], env=env, cwd=str(cwd), capture_output=True, text=True
    )
    if probe.returncode == 0:
        pytest.skip("i6_shard is importable without site-packages processing here (not an editable install)")
    return run_to_end([sys.executable, "-S", *args], env=env, cwd=str(cwd))


def load_config_code(path: str, *, key: str = "train") -> str:
    """A script that loads a RETURNN config with RETURNN's loader and prints ``key``'s sub-epoch dataset."""
    return (
        "from returnn.config import Config\n"
        "config = Config()\n"
        f"config.load_file({path!r})\n"
        f"train = config.typed_value({key!r})\n"
        "print('SUB', train['get_sub_epoch_dataset'](['x.hdf']))\n"
        "import i6_shard\n"
        "print('FROM', i6_shard.__file__)\n"
    )

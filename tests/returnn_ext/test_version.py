"""The RETURNN version is checked by feature where RETURNN runs: the real RETURNN passes, and a RETURNN
without one of the features (simulated by removing it in a fresh Python) gets one error naming it and the
version to install, also when the dataset class is imported."""

import os
import subprocess
import sys

import pytest

from tests.blocking import run_to_end

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")

from i6_shard.core.pure.returnn_features import MIN_RETURNN_VERSION, RETURNN_FEATURES  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: feature key -> code that removes it from the imported RETURNN (as an older RETURNN lacks it)
REMOVE = {
    "sharding_fix": "import inspect\nfrom returnn.datasets.distrib_files import DistributeFilesDataset as D\n"
    "sig = inspect.signature(D.__init__)\n"
    "D.__init__.__signature__ = sig.replace(parameters=[p for n, p in sig.parameters.items() "
    "if n != 'sharding_fix'])\n",
    "use_worker_proc": "import inspect\nfrom returnn.datasets.distrib_files import DistributeFilesDataset as D\n"
    "sig = inspect.signature(D.__init__)\n"
    "D.__init__.__signature__ = sig.replace(parameters=[p for n, p in sig.parameters.items() "
    "if n != 'use_worker_proc'])\n",
    "get_default_kwargs_train": "from returnn.datasets import basic\ndel basic.Dataset.get_default_kwargs_train\n",
    # (after RETURNN's own distrib_files, which imports it in this RETURNN, has been imported)
    "get_distributed_rank_and_size": "import returnn.datasets.distrib_files\nfrom returnn.datasets import basic\n"
    "del basic._get_distributed_rank_and_size\n",
    "dataset_random_seed_offset": "from returnn.datasets import basic\n"
    "basic.Dataset._get_default_random_seed_offset = lambda self: 0\n",
}


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    return run_to_end([sys.executable, "-c", code], env=env, cwd=ROOT)


def test_every_feature_has_a_simulation():
    assert set(REMOVE) == {key for key, _, _ in RETURNN_FEATURES}


def test_the_installed_returnn_has_every_feature():
    from i6_shard.returnn_ext.version import missing_returnn_features, require_returnn_features

    assert missing_returnn_features() == []
    require_returnn_features()


@pytest.mark.parametrize("key", sorted(REMOVE))
def test_an_older_returnn_gets_one_clear_error_at_import(key):
    what = {k: w for k, w, _ in RETURNN_FEATURES}[key]
    proc = _run(REMOVE[key] + "from i6_shard.returnn_ext import ShardedDistributeFilesDataset\n")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: RETURNN "), proc.stderr[-2000:]
    assert what in last and f"Install RETURNN >= {MIN_RETURNN_VERSION}" in last
    others = [w for k, w, _ in RETURNN_FEATURES if k != key]
    assert not any(w in last for w in others), last  # names what is missing, nothing else


def test_the_real_returnn_imports_the_dataset():
    proc = _run("from i6_shard.returnn_ext import ShardedDistributeFilesDataset\nprint('ok')\n")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]

"""The RETURNN version is checked by feature where RETURNN runs: the real RETURNN has every feature; a RETURNN
without distrib_shard_files (simulated by removing it in a fresh Python) gets one error naming it and the version to
install when the dataset class is imported; without any other feature the class still imports (its fallback), and
a dataset that asks for one gets one error naming the release, the feature and the first release with it. The real
older releases: tests/returnn_versions."""

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
    "distrib_shard_files": "import inspect\nfrom returnn.datasets.distrib_files import DistributeFilesDataset as D\n"
    "sig = inspect.signature(D.__init__)\n"
    "D.__init__.__signature__ = sig.replace(parameters=[p for n, p in sig.parameters.items() "
    "if n != 'distrib_shard_files'])\n",
    "sharding_fix": "import inspect\nfrom returnn.datasets.distrib_files import DistributeFilesDataset as D\n"
    "sig = inspect.signature(D.__init__)\n"
    "D.__init__.__signature__ = sig.replace(parameters=[p for n, p in sig.parameters.items() "
    "if n != 'sharding_fix'])\n",
    "use_worker_proc": "import inspect\nfrom returnn.datasets.distrib_files import DistributeFilesDataset as D\n"
    "sig = inspect.signature(D.__init__)\n"
    "D.__init__.__signature__ = sig.replace(parameters=[p for n, p in sig.parameters.items() "
    "if n != 'use_worker_proc'])\n",
    "get_default_kwargs_train": "from returnn.datasets import basic\ndel basic.Dataset.get_default_kwargs_train\n",
    # (after RETURNN's own distrib_files, which imports it in this RETURNN, has been imported; as in a release
    # before it, DistributeFilesDataset's own _get_rank_and_size is there instead)
    "get_distributed_rank_and_size": "import returnn.datasets.distrib_files as df\nfrom returnn.datasets import basic\n"
    "df._get_rank_and_size = basic._get_distributed_rank_and_size\ndel basic._get_distributed_rank_and_size\n",
    "dataset_random_seed_offset": "from returnn.datasets import basic\n"
    "basic.Dataset._get_default_random_seed_offset = lambda self: 0\n",
}


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    return run_to_end([sys.executable, "-c", code], env=env, cwd=ROOT)


def test_the_installed_returnn_has_every_feature():
    from i6_shard.returnn_ext.version import has_feature, missing_returnn_features, require_returnn_features

    assert missing_returnn_features() == []
    require_returnn_features()
    assert [f.key for f in RETURNN_FEATURES if not has_feature(f.key)] == []


def test_without_distrib_shard_files_one_clear_error_at_import():
    proc = _run(REMOVE["distrib_shard_files"] + "from i6_shard.returnn_ext import ShardedDistributeFilesDataset\n")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: RETURNN "), proc.stderr[-2000:]
    assert "distrib_shard_files option" in last and f"Install RETURNN >= {MIN_RETURNN_VERSION}" in last


@pytest.mark.parametrize("key", sorted(set(REMOVE) - {"distrib_shard_files"}))
@pytest.mark.slow
def test_without_another_feature_the_class_imports_and_sees_it_missing(key):
    code = (
        REMOVE[key] + "from i6_shard.returnn_ext import ShardedDistributeFilesDataset\n"
        "from i6_shard.returnn_ext.version import has_feature\n"
        f"print('has', has_feature({key!r}))\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "has False"


def test_a_missing_feature_a_dataset_asks_for_is_refused_naming_release_feature_and_first_release(monkeypatch):
    import returnn

    from i6_shard.returnn_ext import version

    monkeypatch.setattr(version, "has_feature", lambda key: key != "use_worker_proc")
    with pytest.raises(ValueError) as info:
        version.refuse_missing("use_worker_proc", why="use_worker_proc=False needs")
    message = str(info.value)
    assert f"RETURNN {returnn.__version__}" in message or returnn.__version__ in message
    assert "DistributeFilesDataset's use_worker_proc option" in message and "1.20261022.211313" in message
    version.refuse_missing("sharding_fix", why="never raised")  # present: nothing


def test_the_real_returnn_imports_the_dataset():
    proc = _run("from i6_shard.returnn_ext import ShardedDistributeFilesDataset\nprint('ok')\n")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]

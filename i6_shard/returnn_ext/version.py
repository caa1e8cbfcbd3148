"""Checks the running RETURNN by feature (not by its version string) for what i6_shard needs, and fails
with one error naming what is missing and the version to install."""

from __future__ import annotations

import inspect
from typing import List

from i6_shard.core.pure import MIN_RETURNN_VERSION, RETURNN_FEATURES


def _has(key: str) -> bool:
    from returnn.datasets import basic

    if key in ("sharding_fix", "use_worker_proc"):
        from returnn.datasets.distrib_files import DistributeFilesDataset

        return key in inspect.signature(DistributeFilesDataset.__init__).parameters
    if key == "get_default_kwargs_train":
        return callable(getattr(basic.Dataset, "get_default_kwargs_train", None))
    if key == "get_distributed_rank_and_size":
        return callable(getattr(basic, "_get_distributed_rank_and_size", None))
    if key == "dataset_random_seed_offset":  # Dataset._get_default_random_seed_offset reads the config key
        code = getattr(getattr(basic.Dataset, "_get_default_random_seed_offset", None), "__code__", None)
        return code is not None and "dataset_random_seed_offset" in code.co_consts
    raise AssertionError(f"no lookup for the RETURNN feature {key!r}")


def missing_returnn_features() -> List[str]:
    """What the importable RETURNN lacks of ``RETURNN_FEATURES`` (empty if nothing); a module that
    cannot be imported is named with why."""
    try:
        import returnn.datasets.basic  # noqa: F401
    except ImportError as exc:
        return [f"returnn.datasets.basic ({exc})"]
    missing = []
    for key, what, _ in RETURNN_FEATURES:
        try:
            if not _has(key):
                missing.append(what)
        except ImportError as exc:
            missing.append(f"{what} (its module cannot be imported: {exc})")
    return missing


def require_returnn_features() -> None:
    """Raise ImportError naming every missing feature, the RETURNN found and the version to install.

    :raises ImportError: if the importable RETURNN lacks something i6_shard uses
    """
    missing = missing_returnn_features()
    if not missing:
        return
    try:
        import returnn

        found = (
            f"RETURNN {getattr(returnn, '__long_version__', getattr(returnn, '__version__', '?'))} at "
            f"{returnn.__file__}"
        )
    except ImportError:
        found = "no importable RETURNN"
    raise ImportError(
        f"{found} lacks what i6_shard needs: {'; '.join(missing)}. Install RETURNN >= "
        f"{MIN_RETURNN_VERSION} (pip install -U 'returnn>={MIN_RETURNN_VERSION}', or a git checkout "
        "of that date or later)"
    )

"""Checks of DistributeFilesDataset settings before a training job is queued: each problem
RETURNN would only hit at training time (or never notice) becomes an error naming the fix."""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from ..core.pure import check_enough_files, dfd_num_shards
from ..core.pure.args import check_optional_int
from .sub_epoch import is_sub_epoch_partial

__all__ = [
    "SHARDING_FIX_RETURNN_VERSION",
    "SHARDING_FIX_RETURNN_COMMIT",
    "ConfigCheckError",
    "check_sub_epoch_dataset",
    "check_dataset_dict",
    "check_returnn_config",
    "check_returnn_version",
    "parse_returnn_version",
    "returnn_version_of",
    "is_distribute_files_dataset",
]

#: First RETURNN with DistributeFilesDataset's ``sharding_fix`` option (commit
#: 7803cb188f22 "DistributeFilesDataset explicit sharding_fix option", 2026-06-11 01:45:31 +0200;
#: RETURNN versions are ``1.<commit date>.<commit time>``).
SHARDING_FIX_RETURNN_VERSION = "1.20260611.014531"
SHARDING_FIX_RETURNN_COMMIT = "7803cb188f22d7c23228a4bb013bc8f0bf5dff8c"

_SEQ_ORDER_KEYS = ("seq_ordering", "seq_order_control_dataset", "map_seq_stream")
_DFD_CLASS_NAMES = ("DistributeFilesDataset", "ShardedDistributeFilesDataset")


class ConfigCheckError(ValueError):
    """One or more problems in a RETURNN config or dataset dict; ``problems`` lists them."""

    def __init__(self, problems: List[str], *, where: str):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in {where}:\n{lines}")


def _raise_if(problems: List[str], *, where: str) -> None:
    if problems:
        raise ConfigCheckError(problems, where=where)


def _walk(value: Any, path: Tuple[Any, ...] = ()) -> Iterator[Tuple[Tuple[Any, ...], Any]]:
    """(key path, value) of every dict entry in nested dicts/lists/tuples, like RETURNN's
    ``tree.flatten_with_path`` over the sub-dataset dict."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield path + (k,), v
            yield from _walk(v, path + (k,))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, path + (i,))


def _sub_epoch_problems(template: Mapping[str, Any]) -> List[str]:
    problems = []
    entries = list(_walk(dict(template)))
    for path, v in entries:
        if path[-1] == "partition_epoch" and v != 1:
            problems.append(
                f"the sub-epoch dataset sets partition_epoch={v!r} at {'.'.join(map(str, path))}; RETURNN's "
                "DistributeFilesDataset rejects that: remove it there and set partition_epoch on the "
                "DistributeFilesDataset (sharded_files_dataset(partition_epoch=...))"
            )
    if not any(path[-1] in _SEQ_ORDER_KEYS for path, _ in entries):
        problems.append(
            "the sub-epoch dataset has no explicit seq_ordering (nor seq_order_control_dataset for a MetaDataset "
            "or map_seq_stream for a PostprocessingDataset); RETURNN's DistributeFilesDataset rejects that: "
            "add e.g. \"seq_ordering\": \"random\" to the sub-epoch dataset dict"
        )
    return problems


def check_sub_epoch_dataset(template: Mapping[str, Any]) -> None:
    """Check a sub-epoch dataset dict the way RETURNN's ``DistributeFilesDataset._get_sub_dataset_dict``
    would, but before the job is queued.

    >>> check_sub_epoch_dataset({"class": "HDFDataset", "partition_epoch": 2})
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 2 problem(s) in the sub-epoch dataset:
      - the sub-epoch dataset sets partition_epoch=2 at partition_epoch; RETURNN's DistributeFilesDataset rejects that: remove it there and set partition_epoch on the DistributeFilesDataset (sharded_files_dataset(partition_epoch=...))
      - the sub-epoch dataset has no explicit seq_ordering (nor seq_order_control_dataset for a MetaDataset or map_seq_stream for a PostprocessingDataset); RETURNN's DistributeFilesDataset rejects that: add e.g. "seq_ordering": "random" to the sub-epoch dataset dict
    """
    _raise_if(_sub_epoch_problems(template), where="the sub-epoch dataset")


def _class_name(cls: Any) -> Optional[str]:
    if isinstance(cls, str):
        return cls
    if isinstance(cls, type):
        return cls.__name__
    code = getattr(cls, "code", None)  # i6_core CodeWrapper
    if isinstance(code, str):
        return code.rsplit(".", 1)[-1]
    return None


def is_distribute_files_dataset(dataset: Any) -> bool:
    """Whether a dataset dict is a DistributeFilesDataset (or i6_shard's subclass of it)."""
    if not isinstance(dataset, Mapping):
        return False
    name = _class_name(dataset.get("class"))
    return bool(name) and (name.endswith(_DFD_CLASS_NAMES) or "get_sub_epoch_dataset" in dataset)


def _sub_epoch_partial(value: Any) -> Any:
    """The bound ``get_sub_epoch_dataset`` behind ``value`` (also inside i6_shard's delayed wrapper)."""
    if is_sub_epoch_partial(value):
        return value
    inner = getattr(value, "sub_epoch_partial", None)
    return inner if is_sub_epoch_partial(inner) else None


def _dataset_problems(dataset: Mapping[str, Any], *, name: str, num_ranks: Optional[int],
                      behavior_version: Optional[int]) -> List[str]:
    problems = []
    sharded = dataset.get("distrib_shard_files", False) is True
    sharding_fix = dataset.get("sharding_fix")
    if sharding_fix is False:
        problems.append(
            f"{name}: sharding_fix=False keeps RETURNN's legacy double sharding (each rank then reads only "
            "1/num_shards of its own files, silently); set sharding_fix=True"
        )
    elif sharding_fix is None and sharded and (behavior_version is None or behavior_version < 26):
        problems.append(
            f"{name}: distrib_shard_files=True without sharding_fix: below behavior_version 26 every rank reads "
            "only 1/num_shards of its own files; set sharding_fix=True"
        )
    if not sharded and num_ranks is not None and num_ranks > 1:
        for key in ("random_seed_offset", "fixed_random_seed"):
            if dataset.get(key) is not None:
                problems.append(
                    f"{name}: {key}={dataset[key]!r} is fixed in the dataset dict while the files are not sharded "
                    f"(distrib_shard_files=False) over {num_ranks} ranks: every rank then shuffles the same way "
                    f"and reads the same data; remove {key}, or set distrib_shard_files=True"
                )
    seq_ordering = dataset.get("seq_ordering", "default")
    if seq_ordering not in ("default", "random"):
        problems.append(f"{name}: seq_ordering={seq_ordering!r} is not supported by DistributeFilesDataset; "
                        "use 'random' (or 'default' for no shuffling)")
    partition_epoch = dataset.get("partition_epoch", 1)
    files = dataset.get("files")
    if isinstance(partition_epoch, int) and isinstance(files, (list, tuple)) and partition_epoch >= 1:
        num_shards = dfd_num_shards(distrib_shard_files=bool(sharded), num_ranks=num_ranks,
                                    explicit_num_shards=dataset.get("_num_shards"))
        try:
            check_enough_files(len(files), num_shards=num_shards, partition_epoch=partition_epoch)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    partial = _sub_epoch_partial(dataset.get("get_sub_epoch_dataset"))
    if partial is not None:
        problems += [f"{name}: {p}" for p in _sub_epoch_problems(partial.keywords["template"])]
    return problems


def check_dataset_dict(dataset: Mapping[str, Any], *, num_ranks: Optional[int] = None,
                       behavior_version: Optional[int] = None, name: str = "dataset") -> None:
    """Check a DistributeFilesDataset dict (from :func:`sharded_files_dataset` or written by hand).

    :param num_ranks: number of training processes, if known (enables the rank-dependent checks)
    :param behavior_version: the config's ``behavior_version``, if known

    >>> check_dataset_dict({"class": "DistributeFilesDataset", "files": ["a", "b"], "partition_epoch": 1,
    ...                     "fixed_random_seed": 1, "sharding_fix": True}, num_ranks=2, name="train")
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in train:
      - train: fixed_random_seed=1 is fixed in the dataset dict while the files are not sharded (distrib_shard_files=False) over 2 ranks: every rank then shuffles the same way and reads the same data; remove fixed_random_seed, or set distrib_shard_files=True
    """
    if not isinstance(dataset, Mapping):
        raise TypeError(f"dataset has type {type(dataset).__name__}; give a dataset dict, e.g. from "
                        "sharded_files_dataset")
    num_ranks = _check_num_ranks(num_ranks)
    behavior_version = check_optional_int(behavior_version, name="behavior_version", minimum=0,
                                          hint="the config's behavior_version, if known")
    _raise_if(_dataset_problems(dataset, name=name, num_ranks=num_ranks, behavior_version=behavior_version),
              where=name)


def _check_num_ranks(num_ranks: Any) -> Optional[int]:
    return check_optional_int(num_ranks, name="num_ranks", minimum=1,
                              hint="number of training processes, if known; else leave it out")


def parse_returnn_version(version: str) -> Tuple[int, int, int]:
    """``"1.YYYYMMDD.HHMMSS[+git...]"`` as a tuple that orders like the commit dates.

    >>> parse_returnn_version("1.20260611.014531+git.7803cb1")
    (1, 20260611, 14531)
    """
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)(?:[+-].*)?\s*", str(version))
    if not match:
        raise ValueError(f"RETURNN version {version!r} is not of the form 1.YYYYMMDD.HHMMSS "
                         "(see returnn.__version__)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _version_problems(returnn_version: Optional[str]) -> List[str]:
    if returnn_version is None:
        return []
    if not isinstance(returnn_version, str):
        raise TypeError(f"returnn_version={returnn_version!r} has type {type(returnn_version).__name__}; give "
                        "RETURNN's version string, e.g. '1.20260611.014531' (returnn.__version__), or None")
    if parse_returnn_version(returnn_version) < parse_returnn_version(SHARDING_FIX_RETURNN_VERSION):
        return [
            f"RETURNN {returnn_version} predates DistributeFilesDataset's sharding_fix option "
            f"(added in {SHARDING_FIX_RETURNN_VERSION}, commit {SHARDING_FIX_RETURNN_COMMIT[:12]}); "
            "the dataset would fail with an unexpected keyword argument: update RETURNN"
        ]
    return []


def check_returnn_version(returnn_version: Optional[str]) -> None:
    """Raise if a known RETURNN version is too old for ``sharding_fix``; ``None`` (unknown) passes.

    >>> check_returnn_version("1.20250101.000000")
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in the RETURNN version:
      - RETURNN 1.20250101.000000 predates DistributeFilesDataset's sharding_fix option (added in 1.20260611.014531, commit 7803cb188f22); the dataset would fail with an unexpected keyword argument: update RETURNN
    """
    _raise_if(_version_problems(returnn_version), where="the RETURNN version")


def returnn_version_of(returnn_root: Any) -> Optional[str]:
    """The version of a RETURNN checkout or installation at ``returnn_root`` (str, os.PathLike
    or a Sisyphus path), as RETURNN computes it; ``None`` if it cannot be told.

    Reads ``returnn/_setup_info_generated.py`` (installed packages) or asks git for the
    commit date of HEAD (checkouts).
    """
    if returnn_root is None:
        return None
    root = returnn_root.get_path() if hasattr(returnn_root, "get_path") else os.fspath(returnn_root)
    if root not in _VERSION_CACHE:
        version = _returnn_version_of_dir(root)
        if version is None:
            return None  # not cached: the checkout may appear later
        _VERSION_CACHE[root] = version
    return _VERSION_CACHE[root]


_VERSION_CACHE: Dict[str, str] = {}  # recipes create many jobs with the same returnn_root


def _returnn_version_of_dir(root: str) -> Optional[str]:
    infos = (os.path.join(root, "returnn", "_setup_info_generated.py"), os.path.join(root, "_setup_info_generated.py"))
    for info in infos:
        if os.path.isfile(info):
            with open(info, "rt", encoding="utf-8") as f:
                match = re.search(r"^version\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.MULTILINE)
            if match:
                return match.group(1)
    if not os.path.isfile(os.path.join(root, "returnn", "__init__.py")):
        return None  # not a RETURNN checkout; git would tell the version of some other repository
    try:
        out = subprocess.run(["git", "show", "-s", "--format=%ci", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) [+-]\d{4}", out)
    return f"1.{''.join(match.groups()[:3])}.{''.join(match.groups()[3:])}" if match else None


def _num_ranks_problems(config: Mapping[str, Any], *, num_ranks: Optional[int]) -> List[str]:
    backend = config.get("backend")
    use_torch = backend == "torch" or config.get("use_pytorch") is True
    if use_torch and num_ranks is not None and num_ranks > 1 and config.get("torch_distributed") is None:
        return [
            f"{num_ranks} training processes (horovod_num_processes) under backend='torch' without "
            "torch_distributed: i6_core then sets use_horovod=True, which RETURNN under torch cannot serve; "
            "set torch_distributed = {} in the config (training_job_kwargs(num_gpus=...) does it)"
        ]
    return []


def check_returnn_config(config: Mapping[str, Any], *, num_ranks: Optional[int] = None,
                         returnn_version: Optional[str] = None) -> None:
    """Check a whole RETURNN config dict (config and post_config merged): distributed settings,
    every DistributeFilesDataset in it, and the RETURNN version.

    :param num_ranks: number of training processes (i6_core's ``horovod_num_processes``)
    :param returnn_version: RETURNN's ``1.YYYYMMDD.HHMMSS`` version, if known

    >>> check_returnn_config({"backend": "torch"}, num_ranks=4)
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in the RETURNN config:
      - 4 training processes (horovod_num_processes) under backend='torch' without torch_distributed: i6_core then sets use_horovod=True, which RETURNN under torch cannot serve; set torch_distributed = {} in the config (training_job_kwargs(num_gpus=...) does it)
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config has type {type(config).__name__}; give a RETURNN config dict (config and "
                        "post_config merged)")
    num_ranks = _check_num_ranks(num_ranks)
    problems = _num_ranks_problems(config, num_ranks=num_ranks)
    behavior_version = config.get("behavior_version")
    behavior_version = behavior_version if isinstance(behavior_version, int) else None
    for key in sorted(k for k in config if isinstance(k, str)):
        value = config[key]
        if is_distribute_files_dataset(value):
            problems += _dataset_problems(value, name=key, num_ranks=num_ranks, behavior_version=behavior_version)
    problems += _version_problems(returnn_version)
    _raise_if(problems, where="the RETURNN config")

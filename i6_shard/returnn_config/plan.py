"""``plan_for_returnn_config``: the ShardPlan that the DistributeFilesDataset of a RETURNN config
follows, with the settings the reader finds in the config (sharding mode, seeds, partition_epoch, the training's
batching and sync); ``training_plan_options``: the options of a training's plan job, stated once, in its config."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .. import core
from ..core import make_plan
from ..core.io import check_archive_path
from ..core.pure import check_int, check_optional_int, first_difference
from .reader import (
    DistributeFilesDatasetInfo,
    engine_plan_options,
    find_distribute_files_datasets,
    read_files,
    read_sync_mode,
    warn_inexact,
)
from .reader.context import _Context
from .reader.engine import engine_reasons, interleaving
from .checks import returnn_version_info
from .pycode import resolve_paths

__all__ = ["plan_for_returnn_config", "named_plan_job", "training_plan_options"]


def find_dataset(
    config: Mapping[str, Any],
    *,
    num_ranks: Optional[int],
    key: Union[str, Tuple[Any, ...]] = "train",
    returnn_version: Optional[str] = None,
) -> DistributeFilesDatasetInfo:
    """The one DistributeFilesDataset of ``config`` at ``key`` (a config key, or a whole key path such
    as ``("train", "datasets", "asr")``), read as RETURNN ``returnn_version`` reads it (None: the newest); a dataset
    dict is searched as it is.

    :raises ValueError: if there is none or several there, naming what there is
    """
    records = find_distribute_files_datasets(config, num_ranks=num_ranks, returnn_version=returnn_version)
    if "class" in config:
        chosen = records
    else:
        path = (key,) if isinstance(key, str) else tuple(key)
        chosen = [r for r in records if r.key_path[: len(path)] == path]
    if len(chosen) == 1:
        return chosen[0]
    found = [r.name for r in records]
    if not chosen:
        raise ValueError(
            f"no DistributeFilesDataset at {key!r} in the config (found: {found or 'none'}); "
            "pass key= the config key or key path of the dataset to plan"
        )
    raise ValueError(
        f"{len(chosen)} DistributeFilesDatasets at {key!r}: {[r.name for r in chosen]}; pass key= "
        "the key path of one of them, e.g. key=" + repr(chosen[0].key_path)
    )


def named_plan_job(records: Sequence[DistributeFilesDatasetInfo]) -> Optional[Tuple[Any, int, Optional[int]]]:
    """``(job, num_ranks, num_epochs)`` of the ``ShardPlanJob`` the datasets of ``records`` read their bins from
    (``plan=job.out_plan``, as ``sharded_files_dataset(files, plan=job)`` sets it): its ``num_shards`` and the
    training's ``num_epochs`` it was planned for, so that a recipe states them once, to the plan job; None where none
    names a plan job.

    :raises ValueError: where the datasets name plan jobs of other ranks or epochs, naming both
    """
    found: Dict[Tuple[int, Optional[int]], Any] = {}
    for info in records:
        job = getattr(info.dataset.get("plan"), "creator", None)
        request = getattr(job, "plan_request", None)  # a ShardPlanJob's (duck-typed: the builders never import jobs)
        if isinstance(request, core.PlanRequest):  # (DataLoader workers that shard: ranks * workers shards)
            ranks = request.settings.num_shards // info.shards.loader_workers
            found.setdefault((ranks, request.settings.training_num_epochs), job)
    if len(found) > 1:
        (a, job_a), (b, job_b) = list(found.items())[:2]
        raise ValueError(
            f"the datasets read their bins from plan jobs of other ranks or epochs: {job_a} has num_shards={a[0]}, "
            f"num_epochs={a[1]}, {job_b} num_shards={b[0]}, num_epochs={b[1]}; plan them for the same training"
        )
    return next(((job, ranks, epochs) for (ranks, epochs), job in found.items()), None)


def _check_keys_match(info: DistributeFilesDatasetInfo, sizes: core.FileSizes) -> None:
    """The plan is made from the sizes archive's keys: they must be the dataset's files, in its order."""
    files = info.dataset.get("files")
    if info.files_kind == "list_file":
        path = files.get_path() if callable(getattr(files, "get_path", None)) else os.fspath(files)
        if not os.path.exists(path):
            return  # written by a job that has not run yet; RETURNN's i6_shard class checks again
    elif info.files_kind != "inline":
        return  # a callable: resolved only when the job runs
    keys = [core.tree_key(resolve_paths(t)) for t in read_files(files if info.files_kind == "inline" else path)]
    if keys != sizes.keys:
        first = first_difference(keys, sizes.keys)
        raise ValueError(
            f"{info.name}: the sizes archive lists {len(sizes.keys)} entries, the dataset {len(keys)} "
            f"files; they first differ at entry {first}. Compute the sizes from this dataset's files "
            "(ComputeFileSizesJob(files) or `python -m i6_shard sizes`)"
        )


def plan_for_returnn_config(
    config: Mapping[str, Any],
    *,
    file_sizes: Union[str, os.PathLike, core.FileSizes],
    num_ranks: int,
    num_epochs: int,
    key: Union[str, Tuple[Any, ...]] = "train",
    distribution: Optional[str] = None,
    returnn_version: Optional[str] = None,
) -> core.ShardPlan:
    """The :class:`~i6_shard.core.ShardPlan` that the DistributeFilesDataset at ``key`` of a RETURNN
    config follows on ``num_ranks`` ranks: files sharded or not (``distrib_shard_files``, or torch's
    ``dataset_distribution="shard"``), each rank's seed, ``partition_epoch``, ``seq_ordering`` and the
    distribution of i6_shard's class, all as the reader finds them.

    :param config: the RETURNN config dict (config and post_config merged), or a dataset dict
    :param file_sizes: the sizes of the dataset's files, in its order (a sizes archive path, or FileSizes)
    :param num_ranks: number of training processes
    :param num_epochs: the training's ``num_epochs`` (sub-epochs); the plan also holds the sub-epochs the dataset
        preloads after them (``preload_next_n_sub_epochs``, RETURNN's default 1), as ``ShardPlanJob`` plans them
    :param key: config key (or key path) of the dataset
    :param distribution: plan with this distribution instead of the dataset's own
    :param returnn_version: the RETURNN release the training runs: its own cut where it differs (``"returnn"``
        before 1.20240705.144031, :func:`~i6_shard.core.pure.cut.cut_for_release`); None: the newest's
    :raises ValueError: if the config has no plannable DistributeFilesDataset there, saying why
    """
    if isinstance(file_sizes, (str, os.PathLike)):
        sizes = core.load_file_sizes(check_archive_path(os.fspath(file_sizes), name="file_sizes"))
    elif isinstance(file_sizes, core.FileSizes):
        sizes = file_sizes
    else:
        raise TypeError(
            f"file_sizes={file_sizes!r} must be the path of a sizes archive (ComputeFileSizesJob."
            "out_file_sizes, `python -m i6_shard sizes`) or a core.FileSizes"
        )
    info = find_dataset(config, num_ranks=num_ranks, key=key, returnn_version=returnn_version)
    request = info.plan_request(num_epochs=num_epochs, distribution=distribution)
    _check_keys_match(info, sizes)
    return make_plan(sizes, request).for_returnn(returnn_version)  # the planning floor, cut as the release


def merged_config(config: Any) -> Dict[str, Any]:
    """A RETURNN config as RETURNN reads it: a dict as it is, or an i6_core ``ReturnnConfig``'s ``config`` and
    ``post_config`` merged (i6_core writes both into one file; ``post_config`` is only left out of the hash)."""
    if isinstance(config, Mapping):
        return dict(config)
    inner, post = getattr(config, "config", None), getattr(config, "post_config", None)
    if isinstance(inner, Mapping) and isinstance(post, Mapping):
        return {**inner, **post}
    raise TypeError(
        f"the training's config has type {type(config).__name__}; give an i6_core ReturnnConfig (or ReturnnConfigV2) "
        "or the RETURNN config dict"
    )


#: The plan options a training's config decides through its engine (set or not), as ``engine_plan_options`` names them.
ENGINE_PLAN_OPTIONS = tuple(name for name, o in core.PLAN_OPTIONS.items() if o.engine)
#: What an unset option means where it has a value besides None.
_UNSET_MEANS = {name: o.default if o.none_means is None else o.none_means for name, o in core.PLAN_OPTIONS.items()}


def _agree(stated: Dict[str, Any], given: Mapping[str, Any], *, where: str) -> Dict[str, Any]:
    """The options the config states (each of ``stated`` and every engine option: the config decides them, set or
    not), with those given besides; a given one the config decides must mean the same (None: not given)."""
    for name, value in given.items():
        if value is None or (name not in stated and name not in ENGINE_PLAN_OPTIONS):
            continue
        mine = stated.get(name)
        if (_UNSET_MEANS.get(name) if value is None else value) != (_UNSET_MEANS.get(name) if mine is None else mine):
            raise ValueError(
                f"{name}={value!r} is given, but {where} states {name}={mine!r}: state it once, in the training's "
                f"config (leave {name} out here), or change it there"
            )
    return {k: v for k, v in {**stated, **given}.items() if v is not None}


def training_plan_options(
    config: Any,
    *,
    num_ranks: int,
    num_epochs: Optional[int] = None,
    key: Union[str, Tuple[Any, ...]] = "train",
    returnn_root: Any = None,
    **given: Any,
) -> Dict[str, Any]:
    """The options of the plan job (``ShardPlanJob`` keyword arguments besides ``file_sizes``) of the training
    that ``config`` describes, so that a recipe states its settings once, in the training's config: its batching
    and sync as RETURNN's torch engine reads them (``batch_size``, ``max_seqs``, ``max_seq_length``,
    ``accum_grad_multiple_step``, ``torch_distributed``; see
    :func:`~i6_shard.returnn_config.reader.engine_plan_options`), and

    - with a DistributeFilesDataset at ``key``: its sharding mode, seeds, ``partition_epoch``, ``seq_ordering``,
      distribution and preloaded sub-epochs (:meth:`DistributeFilesDatasetInfo.plan_options`);
    - without one (the recipe builds the dataset from the plan job: ``sharded_files_dataset(plan=job)``): sharded,
      the config's ``dataset_random_seed_offset``, and ``partition_epoch`` (required), ``distribution`` and the
      other dataset options from ``given``.

    Warns (:class:`~i6_shard.returnn_config.reader.InexactPlanWarning`) naming each setting the plan cannot take
    exactly.

    :param config: the training's config: an i6_core ``ReturnnConfig`` or the config dict (config and
        post_config merged, as RETURNN reads them)
    :param num_ranks: the training's ranks (GPUs)
    :param num_epochs: the training's ``num_epochs`` (None: the config's ``num_epochs``)
    :param key: the config key (or key path) of the training's dataset
    :param returnn_root: the RETURNN the training runs (a checkout, an installed package, a ``CloneGitRepositoryJob``'s
        output): where ``returnn_version`` is not given, it is read from there where it can be known at graph time
        (:func:`~.checks.returnn_version_info`), so that ``distribution="returnn"`` cuts as that release does
    :param given: further plan job options (``distribution``, ``ranks_per_node``, ``lengths``, ``plot``, ...);
        one the config states must agree with it
    :raises ValueError: where a given option contradicts the config, or no plan describes its dataset
    """
    merged = merged_config(config)
    num_ranks = check_int(num_ranks, name="num_ranks", minimum=1, hint="the training's ranks (GPUs)")
    stated_epochs = merged.get("num_epochs")
    if None not in (num_epochs, stated_epochs) and num_epochs != stated_epochs:
        _agree({"num_epochs": stated_epochs}, {"num_epochs": num_epochs}, where="the config")  # raises, naming both
    num_epochs = check_optional_int(
        stated_epochs if num_epochs is None else num_epochs,
        name="num_epochs",
        minimum=1,
        hint="the training's sub-epochs",
    )
    if num_epochs is None:
        raise TypeError("give num_epochs (the training's num_epochs, in sub-epochs): the config has none")
    path = (key,) if isinstance(key, str) else tuple(key)
    notes = _release_of_root(given, returnn_root)  # the seeds and workers are read as that release has them
    release = {"num_ranks": num_ranks, "returnn_version": given.get("returnn_version")}
    records = [r for r in find_distribute_files_datasets(merged, **release) if r.key_path[: len(path)] == path]
    if records:
        info = find_dataset(merged, key=key, **release)  # exactly one, else it says which
        stated, dataset_notes = info.plan_options(num_epochs=num_epochs, distribution=given.pop("distribution", None))
        notes = dataset_notes + notes
        where = f"the config's {info.name}"
    else:
        context = _Context.of(merged, **release)
        duplicates = context.duplicate_workers.get("train")
        if duplicates:  # the reader's one rule, as the checks and the RETURNN-side dataset say it
            raise ValueError(f"the training's config: {duplicates}; fix the config before planning")
        if given.get("partition_epoch") is None:
            raise TypeError(
                f"the config has no DistributeFilesDataset at {key!r}, so the plan takes the dataset's settings from "
                "the arguments: give partition_epoch (and distribution); build the dataset from the plan job, "
                "sharded_files_dataset(files, plan=job, ...), which takes them from it"
            )
        engine, engine_notes = engine_plan_options(context.engine)
        notes = engine_notes + notes
        workers = context.loader_workers  # DataLoader workers that shard: each reads one of ranks * workers shards
        reasons = interleaving(context.engine, shard=workers > 1) + engine_reasons(context.engine)
        stated = {
            "num_shards": num_ranks * workers,
            "num_epochs": num_epochs,
            "random_seed_offset": context.base_offset or None,
            **engine,
            "engine_inexact": tuple(reasons) if reasons and ("batch_size" in engine or "max_seqs" in engine) else None,
        }
        where = "the training's config"
    if "torch_distributed" in stated:  # the request takes the whole dict: a given sync must agree with what it says
        mode = read_sync_mode(merged)
        implied = {"reduce_type": mode.reduce_type, "param_sync_step": mode.param_sync_step}
        _agree(implied, {k: v for k, v in given.items() if k in implied}, where=where)
        given = {k: v for k, v in given.items() if k not in implied}
    options = _agree(stated, given, where=where)
    warn_inexact(notes + _verdict_notes(options), where=where)
    return options


def _release_of_root(given: Dict[str, Any], returnn_root: Any) -> List[str]:
    """Set ``given["returnn_version"]`` from ``returnn_root`` where it is not given and can be known; the note where
    it cannot (the plan then cuts as the newest release, and the dataset refuses it on a release that cuts
    otherwise)."""
    if returnn_root is None or given.get("returnn_version") is not None:
        return []
    version, how = returnn_version_info(returnn_root)
    if version is not None:
        given["returnn_version"] = version
        return []
    return [
        f"the RETURNN version at returnn_root is unknown ({how}), so the plan cuts as the newest release does; give "
        "returnn_version= (the pinned commit's 1.YYYYMMDD.HHMMSS) where distribution='returnn' runs on an older one"
    ]


def _verdict_notes(options: Mapping[str, Any]) -> List[str]:
    """The plan's verdict of exactness said when the graph is built: why its simulation of the training will not be
    exact (:meth:`~i6_shard.core.pure.request.PlanRequest.inexact_reason`, e.g. a ``"node"`` sync level without
    ``ranks_per_node``), as one note; a plan its task would refuse (``equal_steps`` on an inexact engine) raises
    here, naming the fix."""
    names = set(core.PLAN_OPTION_DEFAULTS) | {"num_shards", "partition_epoch", "num_epochs"}
    reason = core.PlanRequest.from_options(**{k: v for k, v in options.items() if k in names}).inexact_reason()
    return [] if reason is None else [f"its simulation of the engine is not exact ({reason})"]

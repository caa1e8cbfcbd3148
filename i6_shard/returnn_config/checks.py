"""Checks of DistributeFilesDataset setups before a training job is queued: every dataset the reader
(:mod:`i6_shard.returnn_config.reader`) finds is checked, and each problem RETURNN would only hit at
training time, or never notice while it loses data, becomes an error naming the fix."""

from __future__ import annotations

import dataclasses

import os
import re
import subprocess
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..core.pure import (
    EngineSettings,
    engine_differences,
    engine_of_record,
    MIN_RETURNN_VERSION,
    SEQ_ORDERINGS,
    SyncMode,
    check_enough_files,
    check_optional_int,
    features_missing_before,
    has_node_level,
)
from .release import config_release_problems, release_problems, sub_epoch_fix
from .reader import (
    DistributeFilesDatasetInfo,
    _flatten_with_path,
    dataset_class_name,
    find_distribute_files_datasets,
    unknown_wrappers,
)

__all__ = [
    "ConfigCheckError",
    "ConfigCheckWarning",
    "check_dataset_dict",
    "check_returnn_config",
    "plan_engine_problems",
]

#: First RETURNN with DistributeFilesDataset's ``sharding_fix`` option (commit
#: 7803cb188f22 "DistributeFilesDataset explicit sharding_fix option", 2026-06-11 01:45:31 +0200;
#: RETURNN versions are ``1.<commit date>.<commit time>``).
SHARDING_FIX_RETURNN_VERSION = "1.20260611.014531"
SHARDING_FIX_RETURNN_COMMIT = "7803cb188f22d7c23228a4bb013bc8f0bf5dff8c"
#: What ``returnn.__version__`` is when RETURNN cannot tell its version (``returnn/__init__.py``'s
#: fallback ``"1.0.0+unknown"``, e.g. a copy without git metadata): unknown, not old.
UNKNOWN_RETURNN_VERSION = "1.0.0"

_SEQ_ORDER_KEYS = ("seq_ordering", "seq_order_control_dataset", "map_seq_stream")


class ConfigCheckError(ValueError):
    """One or more problems in a RETURNN config or dataset dict; ``problems`` lists them."""

    def __init__(self, problems: List[str], *, where: str):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in {where}:\n{lines}")


class ConfigCheckWarning(UserWarning):
    """Something a check could not look at (e.g. an unreadable RETURNN version); the check passed without it."""


@dataclass(frozen=True)
class CheckResult:
    """What a check looked at when it found no problem.

    :ivar datasets: the DistributeFilesDatasets found (see :func:`find_distribute_files_datasets`)
    :ivar warnings: what was not checked, and why
    """

    datasets: Tuple[DistributeFilesDatasetInfo, ...] = ()
    warnings: Tuple[str, ...] = field(default=())


def _raise_if(problems: List[str], *, where: str) -> None:
    if problems:
        raise ConfigCheckError(problems, where=where)


def _warn(messages: List[str], *, loud: List[str]) -> Tuple[str, ...]:
    for message in loud:
        warnings.warn(message, ConfigCheckWarning, stacklevel=3)
    return tuple(messages)


# --- the sub-epoch dataset (DistributeFilesDataset._get_sub_dataset_dict) ---------------------


def _sub_epoch_problems(template: Mapping[str, Any]) -> List[str]:
    problems = []
    entries = list(_flatten_with_path(dict(template)))
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
            'add e.g. "seq_ordering": "random" to the sub-epoch dataset dict'
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


# --- one DistributeFilesDataset ----------------------------------------------------------------


def _cause_of_sharding(info: DistributeFilesDatasetInfo) -> str:
    source = info.shards.source
    if source == "distrib_shard_files":
        return "distrib_shard_files=True"
    if source == "dataset_distribution shard":
        return "torch_distributed dataset_distribution='shard'"
    return f"_num_shards > 1 (from {source})"


def _double_sharding_problem(info: DistributeFilesDatasetInfo) -> Optional[str]:
    if info.sub_epoch_shards_again is not True:
        return None
    fix = "set sharding_fix=True (or '_num_shards': 1, '_shard_index': 0 in the sub-epoch dataset dict)"
    if info.sharding_fix is False:
        return (
            f"{info.name}: sharding_fix=False keeps RETURNN's legacy double sharding (each rank then reads only "
            f"1/num_shards of its own files, silently); {fix}"
        )
    if info.behavior_version >= 26:
        return (
            f"{info.name}: {_cause_of_sharding(info)} without sharding_fix: the dataset is read in the "
            f"{info.reading_process}, where behavior_version {info.behavior_version} does not apply "
            f"(BehaviorVersion.get() is {info.effective_behavior_version} there; RETURNN passes it to DataLoader "
            "and MultiProcDataset workers only from behavior_version 31 or with "
            "propagate_behavior_version_to_subprocs=True), so every rank reads only 1/num_shards of its own "
            f"files; {fix}"
        )
    return (
        f"{info.name}: {_cause_of_sharding(info)} without sharding_fix: below behavior_version 26 every rank "
        f"reads only 1/num_shards of its own files; {fix}"
    )


def _double_sharding_warning(info: DistributeFilesDatasetInfo) -> Optional[str]:
    """The sub-epoch dict could not be told: fine only if get_sub_epoch_dataset sets _num_shards itself."""
    if info.sub_epoch_shards_again is not None:
        return None
    return (
        f"{info.name}: {_cause_of_sharding(info)} without sharding_fix (in the {info.reading_process}, "
        f"behavior version {info.effective_behavior_version}): the sub-epoch dataset shards again unless "
        "get_sub_epoch_dataset sets '_num_shards'/'_shard_index' itself, which cannot be told before RETURNN "
        "runs; confirm with VerifyShardingJob, or set sharding_fix=True"
    )


def _unseen_sub_epoch_note(records) -> List[str]:
    """One note for every DistributeFilesDataset whose ``get_sub_epoch_dataset`` is a function of the config with a
    dict the reader could not get (files not inline, or the function failed on the first file): what that dict does
    to the data cannot be checked here. Not a warning: such a config is as likely right as wrong; said once, in the
    check's report (``CheckResult.warnings``)."""
    unseen = []
    for info in records:
        func = info.dataset.get("get_sub_epoch_dataset")
        if info.returnn_fails or info.sub_epoch_dataset is not None or not callable(func):
            continue
        if info.sub_epoch_shards_again is None:
            continue  # the double-sharding warning says it, with the fix
        why = (
            "its files are a list RETURNN reads when it runs"
            if info.files_kind != "inline"
            else "it failed on the first file"
        )
        unseen.append(f"{info.name} ({why})")
    if not unseen:
        return []
    return [
        f"not checked: the sub-epoch dataset that get_sub_epoch_dataset, a function of the config, returns for "
        f"{', '.join(unseen)}: the checks cannot see before RETURNN runs whether it shards again "
        "('_num_shards'/'_shard_index'), filters by epoch (an epoch_wise_filter sees full epochs, not the training's "
        "sub-epochs) or reads other files than the bin's; VerifyShardingJob reads the data as the training does"
    ]


def dataset_warnings(info: DistributeFilesDatasetInfo) -> List[str]:
    """What may lose data in one DistributeFilesDataset but cannot be told before RETURNN runs, or what
    changes what a rank reads without losing files, each saying how to confirm or change it."""
    if info.returnn_fails:
        return []
    out = [w for w in (_double_sharding_warning(info), _duplicate_workers(info, role="eval")) if w]
    if info.sub_epoch_epoch_wise_filter and info.partition_epoch != 1:
        out.append(
            f"{info.name}: the sub-epoch dataset has an epoch_wise_filter, which sees full epochs (RETURNN "
            f"inits it with epoch = full epoch, i.e. training epochs 1..{info.partition_epoch} are its "
            "epoch 1), not the training's sub-epochs; give its epoch ranges in full epochs"
        )
    return out


def _seed_problem(info: DistributeFilesDatasetInfo) -> Optional[str]:
    """Sharded files need one shuffle on all ranks; a wrapper passes its per-rank seed down."""
    if not info.sharded or info.same_seed_on_all_ranks:
        return None
    return (
        f"{info.name}: the files are sharded ({_cause_of_sharding(info)}), but every rank shuffles them with its "
        f"own seed: random_seed_offset = {info.seed.base} + rank*{info.seed.rank_stride}, which "
        f"{info.seed.source} passes down (RETURNN adds the rank term under torch_distributed's default "
        "dataset_distribution 'random_seed_offset'). The ranks cut different shuffles into the same bins, so "
        f"files are read twice or never. Set 'random_seed_offset': {info.seed.base} in this dataset dict, or use "
        "torch_distributed dataset_distribution='shard'"
    )


def _same_data_problem(info: DistributeFilesDatasetInfo) -> Optional[str]:
    """Unsharded training ranks that read the same files in the same order."""
    num_ranks = info.num_ranks
    if (
        info.role != "train"
        or info.sharded
        or info.distributed is None
        or info.batch_slicing
        or num_ranks is None
        or num_ranks < 2
        or not info.same_seed_on_all_ranks
    ):
        return None
    fix = "or set distrib_shard_files=True (or torch_distributed dataset_distribution='shard')"
    if not info.shuffles:
        return (
            f"{info.name}: seq_ordering={info.seq_ordering!r} while the files are not sharded over {num_ranks} "
            f"ranks: every rank reads the same files in the same order; use seq_ordering='random', {fix}"
        )
    if info.fixed_random_seed is not None:
        key, value, where = "fixed_random_seed", info.fixed_random_seed, "the dataset dict"
    elif info.seed.source == "dataset":
        key, value, where = "random_seed_offset", info.seed.base, "the dataset dict"
    else:
        key, value, where = "random_seed_offset", info.seed.base, info.seed.source
    return (
        f"{info.name}: {key}={value!r} is fixed in {where} while the files are not sharded "
        f"(distrib_shard_files=False) over {num_ranks} ranks: every rank then shuffles the same way and reads "
        f"the same data; remove {key}, {fix}"
    )


def _batch_slicing_problem(info: DistributeFilesDatasetInfo) -> Optional[str]:
    if not (info.batch_slicing and info.sharded):
        return None
    return (
        f"{info.name}: distrib_shard_files=True under horovod with horovod_dataset_distribution='shard' "
        "(RETURNN's default): the engine also gives each rank only every W-th batch, so every rank trains on "
        "1/W of its own files; set horovod_dataset_distribution='random_seed_offset'"
    )


def _eval_problem(info: DistributeFilesDatasetInfo) -> Optional[str]:
    if info.role != "eval" or not info.sharded or info.distributed != "torch":
        return None
    return (
        f"{info.name}: distrib_shard_files=True on an eval dataset: RETURNN's torch engine evaluates on rank 0 "
        "only, which reads only its 1/num_shards of the files; remove distrib_shard_files"
    )


def _duplicate_workers(info: DistributeFilesDatasetInfo, *, role: str) -> Optional[str]:
    """The DataLoader workers that each read all of a ``role`` dataset (``info.duplicate_workers``, the reader's one
    rule), named after it: a problem for the train dataset, a warning for an eval dataset."""
    if info.role != role or not info.duplicate_workers:
        return None
    return f"{info.name}: {info.duplicate_workers}"


def dataset_problems(info: DistributeFilesDatasetInfo) -> List[str]:
    """Every problem of one DistributeFilesDataset as the reader found it, each naming the fix."""
    name = info.name
    if info.returnn_fails:
        return [f"{name}: RETURNN would fail: {info.returnn_fails}"]
    problems = [
        p
        for p in (
            _double_sharding_problem(info),
            _seed_problem(info),
            _same_data_problem(info),
            _batch_slicing_problem(info),
            _eval_problem(info),
            _duplicate_workers(info, role="train"),
        )
        if p
    ]
    if info.seq_ordering not in SEQ_ORDERINGS:
        default = " (RETURNN's default for dev/eval datasets)" if "seq_ordering" not in info.dataset else ""
        problems.append(
            f"{name}: seq_ordering={info.seq_ordering!r}{default} is not supported by "
            "DistributeFilesDataset; set seq_ordering to 'random' (or 'default' for no shuffling)"
        )
    partition_epoch = info.partition_epoch
    if not isinstance(partition_epoch, int) or isinstance(partition_epoch, bool) or partition_epoch < 1:
        problems.append(f"{name}: partition_epoch={partition_epoch!r} must be a positive int")
    elif info.num_files is not None:
        ranks = info.num_ranks if info.num_ranks is not None and info.distributed else 1
        try:
            check_enough_files(
                info.num_files, num_shards=info.shards.num_shards(ranks), partition_epoch=partition_epoch
            )
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    if info.sub_epoch_dataset is not None:
        problems += [f"{name}: {p}" for p in _sub_epoch_problems(info.sub_epoch_dataset)]
    return problems


def plan_engine_problems(
    info: DistributeFilesDatasetInfo, request: Any, *, ranks_per_node: Optional[int] = None
) -> List[str]:
    """Where the training of ``info`` batches or syncs otherwise than the engine the plan of ``request`` (a
    ``ShardPlanJob``'s :class:`~i6_shard.core.pure.request.PlanRequest`) will record: the RETURNN-side dataset
    compares that record with the training's config (``engine_differences``) and refuses to start on every rank,
    so the graph refuses it first. A request without batching records none here (costs in steps record the limits
    they were counted under, which only the archive knows: the dataset checks those at start-up). The ranks per node
    of a ``"node"`` sync level are torchrun's ``--nproc-per-node``: compared where ``ranks_per_node`` gives them
    (i6_core's torchrun starts ``num_gpus`` per node), else only at start-up."""
    if request.batching is None:
        return []
    planned = engine_of_record(request.engine_record())  # as the plan file will record it
    if ranks_per_node is None:
        planned = dataclasses.replace(planned, ranks_per_node=None)
    return engine_differences(planned, info.engine(ranks_per_node=ranks_per_node))


def plan_prediction_gaps(
    info: DistributeFilesDatasetInfo,
    *,
    batch_size: Optional[int],
    max_seqs: Optional[int],
    sync: SyncMode,
    torch_distributed: Optional[Mapping[str, Any]] = None,
    max_seq_length: Any = None,
) -> List[str]:
    """Where a plan's predicted loss, made under ``batch_size``/``max_seqs`` and ``sync`` (a ``ShardPlanJob``'s
    options), assumes another engine than the training of ``info`` runs: other limits (read as
    ``get_batching_iterable_dataset_from_config`` reads ``batch_size_train``/``batch_size`` and ``max_seqs``),
    another sync mode (``DistributedContext``, :attr:`DistributeFilesDatasetInfo.sync_mode`), or batching the model does not know
    (:meth:`DistributeFilesDatasetInfo.prediction_gaps`). Empty without a prediction (no limits given).
    None of these loses data: the prediction is only not this training's. A plan that states the training's
    ``torch_distributed`` (sync levels included) or ``max_seq_length`` simulates them: they are compared as such.
    """
    if batch_size is None and max_seqs is None:
        return []
    out = []
    engine = info.config_engine
    limits = (engine.batch_size, engine.max_seqs)
    if (
        engine.batch_size_by_key is None
        and all(v is None or isinstance(v, int) for v in limits)
        and limits
        != (
            batch_size,
            max_seqs,
        )
    ):
        out.append(
            f"the plan predicts the loss under batch_size={batch_size}, max_seqs={max_seqs}, the training "
            f"batches with batch_size={engine.batch_size}, max_seqs={engine.max_seqs}"
        )
    training_sync = info.sync_mode
    accum = SyncMode.steps_per_update(engine.accum_grad_multiple_step)  # 0 updates every step, as 1
    int_accum = isinstance(accum, int) and not isinstance(accum, bool) and accum >= 1  # a plan can state an int
    if training_sync.reduce_type == "grad" and info.ranks_stop_together:
        # every rank syncs "has data" in every step: the accumulation changes no rank's steps or stop
        int_accum, accum = True, sync.accum_grad_multiple_step
    if int_accum:
        training_sync = dataclasses.replace(training_sync, accum_grad_multiple_step=accum)
    if torch_distributed is not None:  # the plan simulates the dict itself: compare it, and the accumulation
        configured = engine.torch_distributed
        out += engine_differences(
            EngineSettings(torch_distributed=dict(torch_distributed)), EngineSettings(torch_distributed=configured)
        )
        if training_sync.accum_grad_multiple_step != sync.accum_grad_multiple_step:
            out.append(
                f"the plan predicts the loss with accum_grad_multiple_step={sync.accum_grad_multiple_step}, the "
                f"training has {training_sync.accum_grad_multiple_step}"
            )
    elif training_sync != sync:
        out.append(
            f"the plan predicts the loss under {sync.describe()}, the training runs {training_sync.describe()} "
            f"(reduce_type={training_sync.reduce_type!r}, param_sync_step={training_sync.param_sync_step})"
        )
    gaps = info.prediction_gaps()
    if int_accum and accum == sync.accum_grad_multiple_step:  # stated in the plan: modelled
        gaps = [g for g in gaps if not g.startswith("accum_grad_multiple_step=")]
    stated = engine.stated_max_seq_length
    if max_seq_length is not None and max_seq_length == stated:  # stated in the plan: simulated
        gaps = [g for g in gaps if not g.startswith("max_seq_length=")]
    if gaps:
        out.append("the prediction does not model " + ", ".join(gaps))
    return out


def _check_num_ranks(num_ranks: Any) -> Optional[int]:
    return check_optional_int(
        num_ranks, name="num_ranks", minimum=1, hint="number of training processes, if known; else leave it out"
    )


def _reader_warnings(records) -> List[str]:
    unknown = unknown_wrappers(records)
    if not unknown:
        return []
    return [
        f"no rule for the wrapper dataset(s) {', '.join(unknown)}: read as plain parents (their datasets get "
        "their random_seed_offset and _num_shards/_shard_index, as init_dataset(parent_dataset=...) gives them)"
    ]


def check_dataset_dict(
    dataset: Mapping[str, Any],
    *,
    num_ranks: Optional[int] = None,
    behavior_version: Optional[int] = None,
    name: str = "dataset",
    config: Optional[Mapping[str, Any]] = None,
    returnn_version: Optional[str] = None,
) -> CheckResult:
    """Check a dataset dict: every DistributeFilesDataset in it (also inside wrapper datasets such as
    CombinedDataset or MultiProcDataset), read as the train dataset of ``config``, by the rules of RETURNN
    ``returnn_version`` (:func:`~.release.release_problems`; None: the newest's).

    :param num_ranks: number of training processes, if known (enables the rank-dependent checks)
    :param behavior_version: the config's ``behavior_version``, if known
    :param name: how the dataset is named in problems
    :param config: the rest of the RETURNN config (``torch_distributed`` ...; default: torch distributed
        training with RETURNN's default ``dataset_distribution``, see ``reader.DATASET_DICT_CONTEXT``)
    :raises ConfigCheckError: listing every problem, or saying that the dict holds no DistributeFilesDataset

    >>> check_dataset_dict({"class": "DistributeFilesDataset", "files": ["a", "b"], "partition_epoch": 1,
    ...                     "seq_ordering": "random", "fixed_random_seed": 1, "sharding_fix": True},
    ...                    num_ranks=2, name="train")
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in train:
      - train: fixed_random_seed=1 is fixed in the dataset dict while the files are not sharded (distrib_shard_files=False) over 2 ranks: every rank then shuffles the same way and reads the same data; remove fixed_random_seed, or set distrib_shard_files=True (or torch_distributed dataset_distribution='shard')
    """
    if not isinstance(dataset, Mapping):
        raise TypeError(
            f"dataset has type {type(dataset).__name__}; give a dataset dict, e.g. from sharded_files_dataset"
        )
    if not isinstance(name, str):
        raise TypeError(f"name={name!r} must be a str")
    num_ranks = _check_num_ranks(num_ranks)
    behavior_version = check_optional_int(
        behavior_version, name="behavior_version", minimum=0, hint="the config's behavior_version, if known"
    )
    context = dict(config) if config is not None else None
    if behavior_version is not None:
        from .reader import DATASET_DICT_CONTEXT

        context = {**(DATASET_DICT_CONTEXT if context is None else context), "behavior_version": behavior_version}
    records = [
        _renamed(r, name)
        for r in find_distribute_files_datasets(
            dataset, num_ranks=num_ranks, config=context, returnn_version=returnn_version
        )
    ]
    if not records:
        _raise_if(
            [
                f"{name}: no DistributeFilesDataset in this dataset dict (class "
                f"{dataset_class_name(dataset.get('class'))!r}, nor inside it); i6_shard checks "
                "DistributeFilesDataset setups only"
            ],
            where=name,
        )
    problems = [p for r in records for p in _problems_on_release(r, returnn_version)]
    _raise_if(problems, where=name)
    loud = _reader_warnings(records) + [w for r in records for w in dataset_warnings(r)]
    return CheckResult(datasets=tuple(records), warnings=_warn(loud + _unseen_sub_epoch_note(records), loud=loud))


def _problems_on_release(info: DistributeFilesDatasetInfo, version: Optional[str]) -> List[str]:
    """:func:`dataset_problems`, with the sub-epoch double sharding judged by release ``version``'s rules where it
    predates ``sharding_fix`` (and what it rejects added)."""
    problems = dataset_problems(info)
    if version is None:
        return problems
    double = _double_sharding_problem(info)
    if double is not None and sub_epoch_fix(version) != "sharding_fix":
        problems = [p for p in problems if p != double]
    return problems + release_problems(
        info.dataset,
        version=version,
        is_i6_shard=info.is_i6_shard,
        files_kind=info.files_kind,
        sub_epoch_dataset=info.sub_epoch_dataset,
        sharded=info.sharded,
        name=info.name,
        reading_process=info.reading_process,
    )


def _renamed(info: DistributeFilesDatasetInfo, name: str) -> DistributeFilesDatasetInfo:
    import dataclasses

    return dataclasses.replace(info, key_path=(name,) + tuple(info.key_path))


# --- the RETURNN version ------------------------------------------------------------------------


def parse_returnn_version(version: str) -> Tuple[int, int, int]:
    """``"1.YYYYMMDD.HHMMSS[+git...]"`` as a tuple that orders like the commit dates.

    >>> parse_returnn_version("1.20260611.014531+git.7803cb1")
    (1, 20260611, 14531)
    """
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)(?:[+-].*)?\s*", str(version))
    if not match:
        raise ValueError(f"RETURNN version {version!r} is not of the form 1.YYYYMMDD.HHMMSS (see returnn.__version__)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _version_check(returnn_version: Optional[str], *, reason: Optional[str] = None) -> Tuple[List[str], List[str]]:
    """``(problems, warnings)`` of the version check: RETURNN must have every feature of
    ``core.pure.returnn_features.RETURNN_FEATURES`` (the subclass checks them again by feature at import)."""
    if returnn_version is None:
        why = reason or "it was not given"
        return [], [
            f"the RETURNN version is unknown ({why}), so whether RETURNN has what i6_shard needs "
            f"(RETURNN >= {MIN_RETURNN_VERSION}) was not checked"
        ]
    if not isinstance(returnn_version, str):
        raise TypeError(
            f"returnn_version={returnn_version!r} has type {type(returnn_version).__name__}; give "
            "RETURNN's version string, e.g. '1.20260611.014531' (returnn.__version__), or None"
        )
    parsed = parse_returnn_version(returnn_version)
    if parsed == parse_returnn_version(UNKNOWN_RETURNN_VERSION):
        return [], [
            f"RETURNN reports version {returnn_version}, its fallback when it cannot tell its own version "
            "(no _setup_info_generated.py and no git metadata, e.g. an exported copy), so whether it has "
            f"what i6_shard needs (RETURNN >= {MIN_RETURNN_VERSION}) was not checked here; the dataset "
            "checks it by feature when RETURNN imports it"
        ]
    missing = features_missing_before(".".join(map(str, parsed)))
    if missing:
        return [
            f"RETURNN {returnn_version} predates what i6_shard needs: {'; '.join(missing)}; install RETURNN >= "
            f"{MIN_RETURNN_VERSION} (pip install -U 'returnn>={MIN_RETURNN_VERSION}', or a checkout of that date "
            "or later)"
        ], []
    return [], []


def check_returnn_version(returnn_version: Optional[str], *, reason: Optional[str] = None) -> CheckResult:
    """Raise if a known RETURNN version predates a feature i6_shard needs. An unknown version (None, or
    RETURNN's fallback ``"1.0.0"``) passes with a warning in the result saying that the check was
    skipped and why (``reason``: why it is None, e.g. from :func:`returnn_version_info`).

    >>> check_returnn_version("1.0.0").warnings[0][:60]
    'RETURNN reports version 1.0.0, its fallback when it cannot t'
    >>> check_returnn_version("1.20240619.0")
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in the RETURNN version:
      - RETURNN 1.20240619.0 predates what i6_shard needs: DistributeFilesDataset's distrib_shard_files option; install RETURNN >= 1.20240620.64807 (pip install -U 'returnn>=1.20240620.64807', or a checkout of that date or later)
    """
    problems, messages = _version_check(returnn_version, reason=reason)
    _raise_if(problems, where="the RETURNN version")
    return CheckResult(warnings=_warn(messages, loud=messages if (returnn_version or reason) else []))


def returnn_version_info(returnn_root: Any) -> Tuple[Optional[str], str]:
    """``(version, how it was found)``, or ``(None, why not)``, for a RETURNN at ``returnn_root``, following
    ``returnn.__setup__.get_version_str``: ``_setup_info_generated.py`` (installed packages), else
    the commit date of git's HEAD (checkouts). RETURNN's fallback ``"1.0.0"`` counts as unknown.

    >>> returnn_version_info(None)
    (None, 'no returnn_root was given')
    """
    if returnn_root is None:
        return None, "no returnn_root was given"
    root = returnn_root.get_path() if hasattr(returnn_root, "get_path") else os.fspath(returnn_root)
    if root in _VERSION_CACHE:
        return _VERSION_CACHE[root]
    version, how = _returnn_version_of_dir(root)
    if version is not None and parse_returnn_version(version) == parse_returnn_version(UNKNOWN_RETURNN_VERSION):
        version, how = None, f"{how} says {version}, RETURNN's fallback for an unknown version"
    if version is not None:
        _VERSION_CACHE[root] = (version, how)  # not cached when unknown: the checkout may appear later
    return version, how


_VERSION_CACHE: Dict[str, Tuple[str, str]] = {}  # recipes create many jobs with the same returnn_root


def _returnn_version_of_dir(root: str) -> Tuple[Optional[str], str]:
    infos = (os.path.join(root, "returnn", "_setup_info_generated.py"), os.path.join(root, "_setup_info_generated.py"))
    for info in infos:
        if os.path.isfile(info):
            with open(info, "rt", encoding="utf-8") as f:
                match = re.search(r"^version\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.MULTILINE)
            if match:
                return match.group(1), info
            return None, f"{info} has no version = '...' line"
    if not os.path.isdir(root):
        return None, f"returnn_root {root!r} does not exist (yet)"
    if not os.path.isfile(os.path.join(root, "returnn", "__init__.py")):
        return None, f"{root!r} holds no returnn/__init__.py, so it is no RETURNN root"
    try:
        proc = subprocess.run(
            ["git", "show", "-s", "--format=%ci", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{root!r} has no _setup_info_generated.py and git could not be run there ({exc})"
    out = proc.stdout.strip()
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) [+-]\d{4}", out)
    if proc.returncode != 0 or not match:
        return None, (
            f"{root!r} has no _setup_info_generated.py and no git metadata (git: "
            f"{(proc.stderr.strip() or out)[:200]!r})"
        )
    return f"1.{''.join(match.groups()[:3])}.{''.join(match.groups()[3:])}", f"git HEAD of {root}"


# --- the whole config -------------------------------------------------------------------------------


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


def _sync_level_warnings(config: Mapping[str, Any]) -> List[str]:
    """A ``"node"`` sync level groups the ranks of one host, which no key of the config states (torchrun's
    ``--nproc-per-node``): a plan of the training must be told them, or its task fails (``equal_steps``) or is not
    exact."""
    if not has_node_level(config.get("torch_distributed")):
        return []
    return [
        "torch_distributed has a 'node' sync level, whose groups are the ranks of one host (torchrun's "
        "--nproc-per-node), which the config does not state: give a plan of this training ranks_per_node= "
        "(ShardPlanJob.for_training(config, ..., ranks_per_node=N) or ShardPlanJob(..., ranks_per_node=N)); without "
        "it an equal_steps plan fails when it runs and any other plan's steps are not exact"
    ]


def check_returnn_config(
    config: Mapping[str, Any],
    *,
    num_ranks: Optional[int] = None,
    returnn_version: Optional[str] = None,
    returnn_root: Any = None,
) -> CheckResult:
    """Check a whole RETURNN config dict (config and post_config merged): distributed settings,
    every DistributeFilesDataset in it at any depth (train, dev, eval, eval_datasets and other keys
    holding datasets), and the RETURNN version.

    :param num_ranks: number of training processes (i6_core's ``horovod_num_processes``)
    :param returnn_version: RETURNN's ``1.YYYYMMDD.HHMMSS`` version, if known
    :param returnn_root: where RETURNN is, to find the version when ``returnn_version`` is not given
    :return: the datasets found and what was not checked (e.g. an unknown RETURNN version)

    >>> check_returnn_config({"backend": "torch"}, num_ranks=4)
    Traceback (most recent call last):
    ...
    i6_shard.returnn_config.checks.ConfigCheckError: 1 problem(s) in the RETURNN config:
      - 4 training processes (horovod_num_processes) under backend='torch' without torch_distributed: i6_core then sets use_horovod=True, which RETURNN under torch cannot serve; set torch_distributed = {} in the config (training_job_kwargs(num_gpus=...) does it)
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config has type {type(config).__name__}; give a RETURNN config dict (config and post_config merged)"
        )
    if "class" in config:
        raise TypeError(
            "config has a 'class' key, so it is a dataset dict, not a RETURNN config; use check_dataset_dict for it"
        )
    num_ranks = _check_num_ranks(num_ranks)
    problems = _num_ranks_problems(config, num_ranks=num_ranks)
    reason = None
    if returnn_version is None and returnn_root is not None:
        returnn_version, reason = returnn_version_info(returnn_root)
    known = returnn_version if isinstance(returnn_version, str) else None
    try:  # read as that release reads it (its seeds, DataLoader workers and dataset_distribution)
        records = find_distribute_files_datasets(config, num_ranks=num_ranks, returnn_version=known)
    except (TypeError, ValueError) as exc:
        _raise_if(problems + [str(exc)], where="the RETURNN config")
        raise
    for record in records:
        problems += _problems_on_release(record, known)
    problems += config_release_problems(config, version=known)
    version_problems, version_warnings = _version_check(returnn_version, reason=reason)
    _raise_if(problems + version_problems, where="the RETURNN config")
    dfd_warnings = [w for r in records for w in dataset_warnings(r)] + _sync_level_warnings(config)
    loud = _reader_warnings(records) + dfd_warnings + (version_warnings if returnn_root is not None else [])
    messages = _reader_warnings(records) + dfd_warnings + version_warnings + _unseen_sub_epoch_note(records)
    if not records:
        messages.append("no DistributeFilesDataset in the config (train, dev, eval, eval_datasets, or other keys)")
    return CheckResult(datasets=tuple(records), warnings=_warn(messages, loud=loud))

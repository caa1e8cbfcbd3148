"""Put ``sharded_files_dataset`` dicts into i6_core: a classic ``ReturnnConfig`` (code in the
prolog, ``CodeWrapper`` references in the dict), a ``ReturnnConfigV2`` (objects in the dict), and
``ReturnnTrainingJob`` settings for N GPUs under torchrun. Needs Sisyphus and i6_core."""

from __future__ import annotations

import copy
import functools
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from sisyphus.delayed_ops import DelayedBase
from sisyphus.hash import sis_hash_helper

from i6_core.returnn.config import CodeWrapper, ReturnnConfig, ReturnnConfigV2
from i6_core.returnn.training import ReturnnTrainingJob

from ..core.pure import (
    DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS,
    PlanRequest,
    check_bool,
    check_int,
    check_optional_int,
    check_optional_mapping,
    num_epochs_for_passes,
    plan_coverage_problem,
    short_repr,
)
from .checks import (
    ConfigCheckWarning,
    check_dataset_dict,
    check_returnn_config,
    plan_engine_problems,
    plan_prediction_gaps,
    returnn_version_info,
)
from .plan import find_dataset, named_plan_job
from .pycode import ImportRef, PyCode, i6_shard_import_code, plain_str, resolve_paths
from .reader import DistributeFilesDatasetInfo, InexactPlanWarning, files_kind, find_distribute_files_datasets
from .reader.engine import worker_shards_problem
from .sub_epoch import is_sub_epoch_partial

__all__ = ["sharded_returnn_config", "training_job_kwargs", "training_job"]


class DelayedFilesCallable(DelayedBase):
    """A callable ``files`` (module-level function or ``functools.partial`` of one) in a
    ``ReturnnConfigV2`` dict: hashes like the callable itself (by name and arguments), and turns
    Sisyphus paths in a partial's arguments into strings when the config is written."""

    def __init__(self, files: Any):
        super().__init__(None)
        if files_kind(files) != "callable":
            raise TypeError(f"{files!r} is not a callable file list")
        self.files = files

    def get(self) -> Any:
        return resolve_paths(self.files)

    def _sis_hash(self) -> bytes:
        return sis_hash_helper(self.files)


class DelayedSubEpochPartial(DelayedBase):
    """The bound ``get_sub_epoch_dataset`` in a ``ReturnnConfigV2`` dict: hashes exactly like the
    ``functools.partial`` it holds, and turns Sisyphus paths in its arguments into strings when
    the config is written (so RETURNN never needs Sisyphus)."""

    def __init__(self, sub_epoch_partial: functools.partial):
        super().__init__(None)
        if not is_sub_epoch_partial(sub_epoch_partial):
            raise TypeError(f"{sub_epoch_partial!r} is not a get_sub_epoch_dataset bound by i6_shard")
        self.sub_epoch_partial = sub_epoch_partial

    def get(self) -> functools.partial:
        return resolve_paths(self.sub_epoch_partial)

    def _sis_hash(self) -> bytes:
        return sis_hash_helper(self.sub_epoch_partial)


class I6ShardImportCode(DelayedBase):
    """Prolog code of a ``ReturnnConfigV2`` that lets RETURNN's Python import i6_shard
    (:func:`~i6_shard.returnn_config.pycode.i6_shard_import_code`). i6_core's serializer adds
    i6_shard's directory only when it is not on the writing Python's default ``sys.path``, which
    is not the question: RETURNN may run another Python. Not part of the config's hash
    (``add_sharded_dataset`` leaves ``python_prolog_hash`` alone)."""

    def __init__(self):
        super().__init__(None)

    def get(self) -> str:
        return i6_shard_import_code()

    def _sis_hash(self) -> bytes:
        return sis_hash_helper("i6_shard import code")


def _holds_import_code(prolog: Any) -> bool:
    if isinstance(prolog, I6ShardImportCode):
        return True
    if isinstance(prolog, (list, tuple)):
        return any(_holds_import_code(p) for p in prolog)
    if isinstance(prolog, dict):
        return any(_holds_import_code(p) for p in prolog.values())
    return False


class SubEpochDatasetCode(DelayedBase):
    """Prolog code for a classic ``ReturnnConfig``: imports i6_shard (after
    :func:`~i6_shard.returnn_config.pycode.i6_shard_import_code`) and defines ``function_name`` as the
    bound ``get_sub_epoch_dataset`` (and ``class_name`` as the dataset class, if it is not a str).
    The hash covers the names and the bound arguments, not where i6_shard is installed."""

    def __init__(
        self,
        *,
        function_name: str,
        sub_epoch_partial: functools.partial,
        class_name: Optional[str] = None,
        dataset_class: Any = None,
        files_name: Optional[str] = None,
        files_callable: Any = None,
    ):
        super().__init__(None)
        if not is_sub_epoch_partial(sub_epoch_partial):
            raise TypeError(f"{sub_epoch_partial!r} is not a get_sub_epoch_dataset bound by i6_shard")
        if (class_name is None) != (dataset_class is None):
            raise ValueError("give class_name and dataset_class together")
        self.function_name = function_name
        self.sub_epoch_partial = sub_epoch_partial
        self.class_name = class_name
        self.dataset_class = dataset_class
        if (files_name is None) != (files_callable is None):
            raise ValueError("give files_name and files_callable together")
        self.files_name = files_name
        self.files_callable = files_callable

    def get(self) -> str:
        code = PyCode()
        body = f"{self.function_name} = {code.expr(resolve_paths(self.sub_epoch_partial))}\n"
        if self.dataset_class is not None:
            body += f"{self.class_name} = {code.ref(self.dataset_class)}\n"
        if self.files_callable is not None:
            body += f"{self.files_name} = {code.expr(resolve_paths(self.files_callable), where='files')}\n"
        return code.prelude() + body

    def _sis_hash(self) -> bytes:
        h = {"function_name": self.function_name, "get_sub_epoch_dataset": self.sub_epoch_partial}
        if self.dataset_class is not None:
            h["class_name"] = self.class_name
            h["class"] = self.dataset_class
        if self.files_callable is not None:  # only then: older configs keep their hash
            h["files_name"] = self.files_name
            h["files"] = self.files_callable
        return sis_hash_helper(h)


def _join_code(mine: Any, other: Any) -> Any:
    """As ``ReturnnConfig.update`` joins prolog code."""
    if mine is None or mine == "":
        return other
    if isinstance(mine, list):
        return mine + [other]
    return [mine, other]


def add_sharded_dataset(returnn_config: ReturnnConfig, dataset: Mapping[str, Any], *, key: str = "train") -> None:
    """Put a :func:`~i6_shard.returnn_config.sharded_files_dataset` dict into ``returnn_config.config[key]``.

    - ``ReturnnConfigV2``: the dict goes in as it is (the serializer imports the function and
      class); the bound function is wrapped in :class:`DelayedSubEpochPartial` (a callable
      ``files`` in :class:`DelayedFilesCallable`), which hash the same and resolve paths when written;
      ``python_prolog`` gets :class:`I6ShardImportCode`
      (once, outside the hash) so that RETURNN's Python can import i6_shard.
    - classic ``ReturnnConfig``: the function (and a class object, and a callable ``files``) are defined by
      :class:`SubEpochDatasetCode` in ``python_prolog`` (the prolog runs before the config dict,
      the epilog after it) and the dict refers to them with ``CodeWrapper``.

    Sisyphus paths (``files``, ``file_sizes``, ``plan``) stay in the dict, so the training job depends on
    the jobs that write them; i6_core writes them as strings.
    """
    if not isinstance(returnn_config, ReturnnConfig):
        raise TypeError(
            f"returnn_config must be an i6_core ReturnnConfig or ReturnnConfigV2, got {type(returnn_config).__name__}"
        )
    key = plain_str(key) if isinstance(key, str) else key  # it goes into code: no str subclass's own methods
    if not isinstance(key, str) or not key.isascii() or not key.isidentifier():
        raise ValueError(f"key={key!r} must be an ASCII Python identifier (a RETURNN config key), e.g. 'train'")
    if key in returnn_config.config or key in returnn_config.post_config:
        raise ValueError(f"the config already has {key!r}; pass a config without it, or another key")
    if not isinstance(dataset, Mapping):
        raise TypeError(
            f"dataset has type {type(dataset).__name__}; give the dataset dict, build it with sharded_files_dataset"
        )
    partial = dataset.get("get_sub_epoch_dataset")
    if not is_sub_epoch_partial(partial):
        raise TypeError(
            f"dataset[{'get_sub_epoch_dataset'!r}] is {partial!r}, not i6_shard's bound "
            "get_sub_epoch_dataset; build the dict with sharded_files_dataset"
        )
    entry = dict(dataset)
    files_callable = entry["files"] if files_kind(entry.get("files")) == "callable" else None
    if isinstance(returnn_config, ReturnnConfigV2):
        entry["get_sub_epoch_dataset"] = DelayedSubEpochPartial(partial)
        if files_callable is not None:
            entry["files"] = DelayedFilesCallable(files_callable)
        returnn_config.config[key] = entry
        if not _holds_import_code(returnn_config.python_prolog):  # python_prolog_hash stays as it is
            returnn_config.python_prolog = _join_code(returnn_config.python_prolog, I6ShardImportCode())
        return
    if returnn_config.hash_full_python_code:
        raise ValueError(
            "a classic ReturnnConfig with hash_full_python_code=True cannot hold delayed prolog code; "
            "use ReturnnConfigV2, or hash_full_python_code=False"
        )
    function_name = f"_i6_shard_{key}_get_sub_epoch_dataset"
    dataset_class = entry["class"] if isinstance(entry["class"], (type, ImportRef)) else None
    class_name = f"_i6_shard_{key}_dataset_class" if dataset_class is not None else None
    files_name = f"_i6_shard_{key}_files" if files_callable is not None else None
    prolog = SubEpochDatasetCode(
        function_name=function_name,
        sub_epoch_partial=partial,
        class_name=class_name,
        dataset_class=dataset_class,
        files_name=files_name,
        files_callable=files_callable,
    )
    entry["get_sub_epoch_dataset"] = CodeWrapper(function_name)
    if files_callable is not None:
        entry["files"] = CodeWrapper(files_name)
    if dataset_class is not None:
        entry["class"] = CodeWrapper(class_name)
    returnn_config.config[key] = entry
    returnn_config.python_prolog = _join_code(returnn_config.python_prolog, prolog)
    returnn_config.python_prolog_hash = _join_code(returnn_config.python_prolog_hash, prolog)


def sharded_returnn_config(
    config: Mapping[str, Any],
    dataset: Mapping[str, Any],
    *,
    key: str = "train",
    post_config: Optional[Mapping[str, Any]] = None,
    v2: bool = True,
    returnn_version: Optional[str] = None,
    returnn_root: Any = None,
    **returnn_config_kwargs,
) -> ReturnnConfig:
    """A new ``ReturnnConfigV2`` (or classic ``ReturnnConfig`` with ``v2=False``) from ``config``
    with ``dataset`` at ``key``; further keyword arguments go to the config class. Given the RETURNN the training
    runs (``returnn_version``, or read from ``returnn_root``), the dataset is checked by that release's rules
    (``check_dataset_dict(..., returnn_version=...)``: what it rejects, and how it shards the sub-epoch dataset)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config has type {type(config).__name__}; give a dict of RETURNN config keys and values")
    check_optional_mapping(post_config, name="post_config", example="{'log_verbosity': 5}")
    if returnn_version is None and returnn_root is not None:
        returnn_version = returnn_version_info(returnn_root)[0]
    if returnn_version is not None:
        check_dataset_dict(dataset, name=key, config=config, returnn_version=returnn_version)
    cls = ReturnnConfigV2 if check_bool(v2, name="v2") else ReturnnConfig
    returnn_config = cls(dict(config), post_config=dict(post_config or {}), **returnn_config_kwargs)
    add_sharded_dataset(returnn_config, dataset, key=key)
    return returnn_config


def _check_training(
    merged: Mapping[str, Any], *, num_gpus: int, num_epochs: int, version: Optional[str], root: Any
) -> None:
    """The config by the rules of the training's RETURNN release (``version``, else read from ``root`` where it can
    be known), and the plan jobs its datasets read their bins from, with that release's seeds."""
    check_returnn_config(merged, num_ranks=num_gpus, returnn_version=version, returnn_root=None if version else root)
    if version is None and root is not None:
        version = returnn_version_info(root)[0]
    _check_plan_jobs(merged, num_ranks=num_gpus, num_epochs=num_epochs, returnn_version=version)


def _check_plan_jobs(
    config: Mapping[str, Any], *, num_ranks: int, num_epochs: int, returnn_version: Optional[str] = None
) -> None:
    """A DistributeFilesDataset that reads its bins from a ``ShardPlanJob``'s plan (``plan=job.out_plan``)
    must fit that job's settings: the same ``partition_epoch``, the training's ranks when sharded, and
    the training's ``num_epochs`` plus the sub-epochs RETURNN loads ahead, its seeds, and the batching and sync the
    plan simulates (:func:`~.checks.plan_engine_problems`). Checked when the graph is built, where the dataset would
    otherwise fail at start-up on every rank. The seeds are those of RETURNN ``returnn_version`` (None: the newest)."""
    for info in find_distribute_files_datasets(config, num_ranks=num_ranks, returnn_version=returnn_version):
        job = getattr(info.dataset.get("plan"), "creator", None)
        request = getattr(job, "plan_request", None)  # a ShardPlanJob's (duck-typed: the builders never import jobs)
        if not isinstance(request, PlanRequest):
            continue
        settings, problems = request.settings, []
        if isinstance(info.partition_epoch, int) and settings.partition_epoch != info.partition_epoch:
            problems.append(f"partition_epoch={info.partition_epoch}, but the plan job has {settings.partition_epoch}")
        workers = worker_shards_problem(
            settings.num_shards, num_ranks=num_ranks, loader_workers=info.shards.loader_workers
        )
        if workers is not None:
            problems.append(workers)
        elif info.sharded and settings.num_shards != num_ranks * info.shards.loader_workers:
            problems.append(f"{num_ranks} ranks train, but the plan job has num_shards={settings.num_shards}")
        preload = info.dataset.get("preload_next_n_sub_epochs", DEFAULT_PRELOAD_NEXT_N_SUB_EPOCHS)
        problem = (
            None
            if not isinstance(preload, int)
            else plan_coverage_problem(
                plan_full_epochs=-(-settings.num_epochs // settings.partition_epoch),
                partition_epoch=settings.partition_epoch,
                needed_epoch=num_epochs + preload,
                preload=preload,
            )
        )
        if problem:
            problems.append(
                f"the plan job has num_epochs={settings.training_num_epochs} and {settings.preloaded_sub_epochs} "
                f"preloaded, the training num_epochs={num_epochs}: {problem}"
            )
        problems += _seed_problems(info, settings)
        problems += plan_engine_problems(info, request, ranks_per_node=num_ranks if num_ranks > 1 else None)
        if problems:
            raise ValueError(
                f"{info.name} reads its bins from the plan of {job}, which does not fit the training: "
                + "; ".join(problems)
            )
        _warn_of_plan_job_gaps(info, job, request)


def _seed_problems(info: DistributeFilesDatasetInfo, settings: Any) -> List[str]:
    """Where the plan's sharding mode, seeds and file order are not those the reader finds for the dataset (which
    the dataset would refuse at start-up on every rank)."""
    try:
        mine, _ = info.plan_options()
    except ValueError:
        return []  # no plan describes the dataset: the config checks say why
    out = []
    for name, theirs in (
        ("sharding", settings.sharding),
        ("seq_ordering", settings.seq_ordering),
        ("random_seed_offset", settings.random_seed_offset),
        ("fixed_random_seed", settings.fixed_random_seed),
    ):
        value = mine.get(name)
        if (value or 0 if name == "random_seed_offset" else value) != theirs:
            out.append(f"the dataset has {name}={value!r}, but the plan job has {name}={theirs!r}")
    return out


def _warn_of_plan_job_gaps(info: DistributeFilesDatasetInfo, job: Any, request: PlanRequest) -> None:
    """Warn where the report of the plan job a dataset reads its bins from is not this training's: sub-epoch
    files its node cache does not count, or batching and sync it does not predict the loss under."""
    batching = request.batching
    gaps = plan_prediction_gaps(
        info,
        batch_size=None if batching is None else batching.batch_size,
        max_seqs=None if batching is None else batching.max_seqs,
        sync=request.sync,
        torch_distributed=request.torch_distributed,
        max_seq_length=request.max_seq_length,
    )
    # the plan's verdict, and what this training does that the plan was not told of (one verdict: the same reasons)
    unsaid = [r for r in info.engine_inexact() if r not in request.engine_inexact]
    reason = "; ".join([r for r in (request.inexact_reason(),) if r is not None] + unsaid) or None
    if reason is not None:
        warnings.warn(
            f"{info.name}: the plan of {job} is not exact for this training: its simulation of the engine is not exact "
            f"({reason})",
            InexactPlanWarning,
            stacklevel=4,
        )
    constant = info.sub_epoch_constant_files
    if constant and request.node_cache is not None and not request.node_cache.constant_bytes:
        warnings.warn(
            f"{info.name}: the sub-epoch dataset reads {len(constant)} file(s) in every sub-epoch besides "
            f"its bin's ({short_repr(list(constant))}), which the node cache footprint in the report of "
            f"{job} does not count: give ShardPlanJob(sub_epoch_constant_bytes=...) their total size",
            ConfigCheckWarning,
            stacklevel=4,
        )
    if gaps:
        warnings.warn(
            f"{info.name}: the predicted loss in the report of {job} is not this training's: "
            + "; ".join(gaps)
            + ". Give ShardPlanJob the training's batch_size, max_seqs, reduce_type and param_sync_step, or build it "
            "with ShardPlanJob.for_training(the training's config, ...), which takes them from it; what it does not "
            "model, its figures leave out",
            ConfigCheckWarning,
            stacklevel=4,
        )


def training_job_kwargs(
    returnn_config: ReturnnConfig,
    *,
    num_gpus: Optional[int] = None,
    num_epochs: Optional[int] = None,
    passes: Union[int, float, None] = None,
    torch_distributed: Optional[Mapping[str, Any]] = None,
    returnn_version: Optional[str] = None,
    train_key: str = "train",
    **job_kwargs,
) -> Dict[str, Any]:
    """Keyword arguments of i6_core's ``ReturnnTrainingJob`` for training on ``num_gpus`` GPUs,
    checked before anything is queued.

    With ``num_gpus > 1``: ``horovod_num_processes=num_gpus``, ``distributed_launch_cmd="torchrun"``
    and ``torch_distributed`` in the (copied) config -- i6_core sets ``use_horovod=True`` for
    ``horovod_num_processes``, which RETURNN under torch only serves with ``torch_distributed``.
    For ``python -m i6_shard train-report``, it also turns on ``log_batch_size`` (in ``post_config``)
    and ``log_verbosity=5`` unless given; neither is hashed.

    :param returnn_config: classic or V2 config with ``backend="torch"`` (not modified)
    :param num_gpus: training processes, one per GPU (None: the ``num_shards`` of the ``ShardPlanJob`` the
        ``train_key`` dataset reads its bins from, ``sharded_files_dataset(files, plan=job)``: stated once, there)
    :param num_epochs: RETURNN's ``num_epochs`` (sub-epochs); or give ``passes`` instead (neither: the training's
        ``num_epochs`` that plan job was planned for)
    :param passes: passes over the data; converted with :func:`i6_shard.core.num_epochs_for_passes`
        using the ``train_key`` dataset's ``partition_epoch`` and sharding mode
    :param torch_distributed: options for ``torch_distributed`` if the config has none (default ``{}``)
    :param returnn_version: the RETURNN release the training runs: the config is checked by its rules (what it
        rejects or reads wrongly, docs/returnn_versions.md); found from ``returnn_root`` when that is given and
        readable
    :param job_kwargs: further ``ReturnnTrainingJob`` arguments (``returnn_root``, ``time_rqmt``, ...)
    :raises TypeError, ValueError: for a wrong argument (e.g. ``num_epochs=2.5``), naming it and the fix
    :raises ConfigCheckError: for problems in the config, all at once
    """
    _check_job_arguments(returnn_config, train_key=train_key, job_kwargs=job_kwargs)
    num_gpus, num_epochs = _ranks_and_epochs(
        returnn_config, num_gpus=num_gpus, num_epochs=num_epochs, passes=passes, train_key=train_key
    )
    num_gpus = check_int(num_gpus, name="num_gpus", minimum=1, hint="training processes, one per GPU")
    num_epochs = check_optional_int(
        num_epochs,
        name="num_epochs",
        minimum=1,
        hint="RETURNN's num_epochs counts sub-epochs; for passes over the data, "
        "also fractional ones, give passes= instead",
    )
    check_optional_mapping(torch_distributed, name="torch_distributed", example="{} or {'reduce_type': 'param'}")
    rc = copy.deepcopy(returnn_config)
    merged = {**rc.config, **rc.post_config}
    if num_gpus > 1:
        if merged.get("backend") != "torch":
            raise ValueError(
                f"backend={merged.get('backend')!r}: training_job_kwargs sets up torch distributed "
                "training (torchrun); set backend='torch' in the config"
            )
        if merged.get("torch_distributed") is None:
            rc.config["torch_distributed"] = dict(torch_distributed or {})
        elif torch_distributed is not None and dict(torch_distributed) != merged["torch_distributed"]:
            raise ValueError(
                f"the config has torch_distributed={merged['torch_distributed']!r} but "
                f"torch_distributed={dict(torch_distributed)!r} was passed; give only one"
            )
        merged = {**rc.config, **rc.post_config}

    if (num_epochs is None) == (passes is None):
        raise ValueError("give exactly one of num_epochs (RETURNN sub-epochs) and passes (passes over the data)")
    if passes is not None:
        num_epochs = _num_epochs_of_passes(merged, passes=passes, num_gpus=num_gpus, train_key=train_key)

    _check_training(
        merged, num_gpus=num_gpus, num_epochs=num_epochs, version=returnn_version, root=job_kwargs.get("returnn_root")
    )

    # What `python -m i6_shard train-report` reads: the files per sub-epoch (log_verbosity >= 4) and each
    # step's sequences and frames (log_batch_size, printed at log_verbosity 5). Unhashed: post_config and
    # i6_core's log_verbosity, so no job id moves; i6_core's log = ["./returnn.log"] gives one file per rank.
    if "log_batch_size" not in merged:
        rc.post_config["log_batch_size"] = True
    job_kwargs.setdefault("log_verbosity", 5)
    kwargs: Dict[str, Any] = {"returnn_config": rc, "num_epochs": num_epochs}
    if num_gpus > 1:
        kwargs["horovod_num_processes"] = num_gpus
        kwargs["distributed_launch_cmd"] = "torchrun"
    kwargs.update(job_kwargs)
    return kwargs


def _ranks_and_epochs(
    returnn_config: ReturnnConfig, *, num_gpus: Any, num_epochs: Any, passes: Any, train_key: str
) -> Tuple[Any, Any]:
    """``num_gpus`` and ``num_epochs`` as given; where left out (``num_epochs`` without ``passes``), those of the
    ``ShardPlanJob`` the ``train_key`` dataset reads its bins from (:func:`~.plan.named_plan_job`)."""
    if num_gpus is not None and (num_epochs is not None or passes is not None):
        return num_gpus, num_epochs
    merged = {**returnn_config.config, **returnn_config.post_config}
    records = [r for r in find_distribute_files_datasets(merged) if r.key_path[:1] == (train_key,)]
    named = named_plan_job(records)
    if named is None:
        missing = [
            text
            for text, value in (
                ("num_gpus (training processes, one per GPU)", num_gpus),
                ("exactly one of num_epochs (RETURNN sub-epochs) and passes", passes if num_epochs is None else 1),
            )
            if value is None
        ]
        raise ValueError(
            f"give {' and '.join(missing)}: the {train_key!r} dataset reads its bins from no ShardPlanJob to take "
            "them from (sharded_files_dataset(files, plan=job) names one, planned with the training's ranks and "
            "num_epochs)"
        )
    _, plan_ranks, plan_epochs = named
    return (plan_ranks if num_gpus is None else num_gpus), (
        plan_epochs if num_epochs is None and passes is None else num_epochs
    )


def _check_job_arguments(returnn_config: Any, *, train_key: Any, job_kwargs: Mapping[str, Any]) -> None:
    """The arguments of :func:`training_job_kwargs` besides the numbers: an i6_core ``ReturnnConfig``, a str
    ``train_key``, and none of the job's arguments that it sets itself."""
    if not isinstance(train_key, str):
        raise TypeError(
            f"train_key={train_key!r} has type {type(train_key).__name__}; train_key must be a str, "
            "the config key of the training dataset, e.g. 'train'"
        )
    for name in ("horovod_num_processes", "distributed_launch_cmd", "returnn_config"):
        if name in job_kwargs:
            raise ValueError(f"{name} is set by training_job_kwargs from num_gpus; do not pass it")
    slots = job_kwargs.get("multi_node_slots")
    if slots not in (None, 1):
        # ReturnnTrainingJob._get_run_cmd: torchrun --nnodes=multi_node_slots --nproc-per-node=horovod_num_processes
        raise ValueError(
            f"multi_node_slots={slots!r}: i6_core's torchrun then starts horovod_num_processes (num_gpus) training "
            f"processes on each of the {slots!r} nodes, a world of num_gpus * multi_node_slots ranks, while it "
            "reserves num_gpus / multi_node_slots GPUs per node and the sharding is planned for num_gpus ranks; "
            "train on one node (leave multi_node_slots unset)"
        )
    if not isinstance(returnn_config, ReturnnConfig):
        raise TypeError(f"returnn_config must be an i6_core ReturnnConfig, got {type(returnn_config).__name__}")


def _num_epochs_of_passes(
    merged: Mapping[str, Any], *, passes: Union[int, float], num_gpus: int, train_key: str
) -> int:
    """RETURNN's ``num_epochs`` for ``passes`` over the data of the config's ``train_key`` DistributeFilesDataset
    (:func:`~i6_shard.core.pure.epochs.num_epochs_for_passes`, with its ``partition_epoch`` and sharding)."""
    try:
        info = find_dataset(merged, num_ranks=num_gpus, key=train_key)
    except ValueError as exc:
        raise ValueError(
            f"passes needs the {train_key!r} DistributeFilesDataset's partition_epoch: {exc}; or give "
            "num_epochs instead"
        ) from None
    if not isinstance(info.partition_epoch, int):
        raise ValueError(f"passes needs an int partition_epoch in {info.name}; give num_epochs instead")
    return num_epochs_for_passes(
        passes,
        partition_epoch=info.partition_epoch,
        num_shards=num_gpus,
        distrib_shard_files=info.sharded or num_gpus == 1,
    )


def training_job(returnn_config: ReturnnConfig, *, num_gpus: Optional[int] = None, **kwargs) -> ReturnnTrainingJob:
    """``ReturnnTrainingJob(**training_job_kwargs(returnn_config, num_gpus=num_gpus, **kwargs))``; without
    ``num_gpus`` and ``num_epochs``, those of the plan job the training dataset names."""
    return ReturnnTrainingJob(**training_job_kwargs(returnn_config, num_gpus=num_gpus, **kwargs))

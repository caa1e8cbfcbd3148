"""``sharded_files_dataset``: the DistributeFilesDataset dict for file-sharded training, with
every setting RETURNN needs for it and the checks that would otherwise fail at training time."""

from __future__ import annotations

import functools
import os
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ..core import FILE_LIST_EXTENSIONS
from ..core.io import check_archive_path, read_files
from ..core.pure import (
    PLAN_OPTION_DEFAULTS,
    PlanRequest,
    DEFAULT_MAX_SUB_EPOCH_DEVIATION,
    check_bool,
    check_bound_is_used,
    check_distribution,
    check_enough_files,
    check_file_trees,
    check_int,
    check_max_sub_epoch_deviation,
    check_optional_bool,
    check_optional_int,
    check_optional_mapping,
    cut_spec,
    release_cut_difference,
    release_has,
    returnn_feature,
    check_preload_next_n_sub_epochs,
    check_seq_ordering,
    dfd_num_shards,
)
from .checks import check_dataset_dict, check_sub_epoch_dataset, parse_returnn_version, returnn_version_info
from .pycode import ImportRef, PyCode, is_sisyphus_path, plain_value, resolve_paths
from .reader import files_kind
from .release import sub_epoch_fix, unpickling_fails
from .sub_epoch import FilesKey, bind_sub_epoch_dataset, normalize_cached_file, normalize_files_key

__all__ = ["sharded_files_dataset"]

#: Longer inline lists make configs (and Sisyphus hashing) slow; pass a file list path instead.
DEFAULT_MAX_INLINE_FILES = 10_000
#: The DFD subclass that implements ``distribution``, ``file_sizes`` and ``plan``, by reference: it runs inside
#: RETURNN, and the manager that builds the graph need not have RETURNN. Hashed as the class itself.
SHARDED_DFD_CLASS = ImportRef("i6_shard.returnn_ext.distrib_files", "ShardedDistributeFilesDataset", kind="class")

_RESERVED = (
    "class",
    "files",
    "get_sub_epoch_dataset",
    "partition_epoch",
    "seq_ordering",
    "distrib_shard_files",
    "sharding_fix",
    "distribution",
    "max_sub_epoch_deviation",
    "file_sizes",
    "plan",
    "buffer_size",
    "preload_next_n_sub_epochs",
    "use_worker_proc",
)


def _is_path_like(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike)) or callable(getattr(value, "get_path", None))


def _path_arg(value: Any, *, name: str) -> Any:
    """A path for the dict: Sisyphus paths stay (hashed by job, resolved when the config is
    written), other path-likes become str."""
    if is_sisyphus_path(value):
        return value
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if callable(getattr(value, "get_path", None)):
        return str(value.get_path())
    raise TypeError(f"{name}={value!r} must be a path (str, os.PathLike or tk.Path)")


def _path_str(value: Any) -> str:
    return value.get_path() if is_sisyphus_path(value) else value


def _check_inline_trees(files: Sequence[Any], norm_key: Any) -> None:
    """Validate inline file trees (Sisyphus paths count as file names) and their modalities."""
    shadow = [resolve_paths(t) for t in files]
    check_file_trees(shadow)
    if not isinstance(norm_key, dict):
        for idx, tree in enumerate(shadow):
            if not isinstance(tree, str):
                raise ValueError(
                    f"file list entry {idx} is a {type(tree).__name__} of several files ({tree!r}), but files_key "
                    f"places whole entries at {norm_key!r}; give one placement per modality, e.g. "
                    "files_key={0: ('datasets', 'align', 'files'), 1: ('datasets', 'feat', 'files')}"
                )
        return
    modalities = set(norm_key)
    for idx, tree in enumerate(shadow):
        if isinstance(tree, dict):
            parts = set(tree)
        elif isinstance(tree, (list, tuple)):
            parts = set(range(len(tree)))
        else:
            parts = set()
        if parts != modalities:
            raise ValueError(
                f"file list entry {idx} ({tree!r}) has parts {sorted(parts, key=repr)}, but files_key places "
                f"{sorted(modalities, key=repr)}; every entry must have exactly the placed modalities"
            )


def _check_files_callable(files: Any) -> None:
    """A callable file list must pickle by reference and hash by name and arguments: a module-level
    function, or a ``functools.partial`` of one with literal arguments (RETURNN calls it at run time)."""
    if isinstance(files, type):
        raise TypeError(f"files={files!r} is a class; give a function that returns the list of file trees")
    try:
        PyCode().expr(files, where="files")
    except TypeError as exc:
        raise TypeError(
            f"files={files!r} cannot go into a RETURNN config: {exc}. A callable file list must be a module-level "
            "function (or a functools.partial of one with plain arguments) that returns the list of file trees when "
            "RETURNN runs; no lambdas, closures or functions defined in __main__"
        ) from None


#: What a plan job decides that the dataset must agree with: (job attribute, builder argument, default).
_PLAN_JOB_SETTINGS = (
    ("partition_epoch", "partition_epoch", None),
    ("num_shards", "num_shards", None),
    ("distribution", "distribution", PLAN_OPTION_DEFAULTS["distribution"]),
    ("max_sub_epoch_deviation", "max_sub_epoch_deviation", DEFAULT_MAX_SUB_EPOCH_DEVIATION),
    ("seq_ordering", "seq_ordering", PLAN_OPTION_DEFAULTS["seq_ordering"]),
)


def _is_plan_job(value: Any) -> bool:
    """A ``ShardPlanJob`` (duck-typed: the builders never import the jobs): it has ``out_plan`` and the settings."""
    return hasattr(value, "out_plan") and all(hasattr(value, name) for name, _, _ in _PLAN_JOB_SETTINGS)


def _plan_and_its_settings(plan: Any) -> tuple:
    """The plan file (a plan job's ``out_plan``) and, for a plan job, its settings by builder argument."""
    if _is_plan_job(plan):
        if getattr(plan, "sharding", "sharded") != "sharded":
            raise ValueError(
                f"plan={plan} plans sharding={plan.sharding!r}, but sharded_files_dataset shards the "
                "files (distrib_shard_files=True); give the plan job sharding='sharded' (the default)"
            )
        return plan.out_plan, {arg: getattr(plan, name) for name, arg, _ in _PLAN_JOB_SETTINGS}
    return plain_value(plan), None


def _take_from_plan(settings_of_plan: Optional[Dict[str, Any]], **given: Any) -> tuple:
    """The settings the plan job decides, where not given; given values must agree with the job's. Without a plan
    job, the defaults of what is not given."""
    out = []
    for _, arg, default in _PLAN_JOB_SETTINGS:
        value = given[arg]
        if settings_of_plan is not None:
            planned = settings_of_plan[arg]
            if value is not None and plain_value(value) != planned:
                raise ValueError(
                    f"{arg}={value!r}, but the plan job has {arg}={planned!r}: the dataset reads that "
                    f"plan, so leave {arg} out (it is taken from the plan job) or plan with {arg}={value!r}"
                )
            value = planned
        out.append(default if value is None else value)
    return tuple(out)


def _checked_sizes_and_plan(file_sizes: Any, plan: Any) -> tuple:
    """``file_sizes`` and ``plan`` as paths for the dict (each None if not given); not both, and a plan is a
    ``.npz``."""
    if file_sizes is not None:
        file_sizes = _path_arg(file_sizes, name="file_sizes")
        check_archive_path(_path_str(file_sizes), name="file_sizes")
    if plan is not None:
        plan = _path_arg(plan, name="plan")
        if not _path_str(plan).endswith(".npz"):
            raise ValueError(
                f"plan={_path_str(plan)!r} is not a plan file (plan.npz); give ShardPlanJob(...).out_plan "
                "or the plan.npz that `python -m i6_shard plan` wrote"
            )
        if file_sizes is not None:
            raise ValueError(
                "give plan or file_sizes, not both: with a plan the ranks take the bins (and the sizes) "
                "from the plan file; drop file_sizes"
            )
    return file_sizes, plan


def _check_extra_opts(extra_opts: Any) -> None:
    check_optional_mapping(extra_opts, name="extra_opts", example="{'name': 'train'}")
    for key in extra_opts or {}:
        if not isinstance(key, str):
            raise TypeError(
                f"extra_opts key {key!r} has type {type(key).__name__}; dataset options are named by "
                "str keys, e.g. {'name': 'train'}"
            )


def _checked_files(files: Any, norm_key: Any, *, max_inline_files: int, num_files: Optional[int]) -> tuple:
    """``files`` as it goes into the dict (a list inline, a callable, or a list file's path), and the number of
    entries where it is known."""
    if isinstance(files, (list, tuple)):
        if len(files) > max_inline_files:
            raise ValueError(
                f"{len(files)} files inline exceed max_inline_files={max_inline_files}: the config would be huge "
                "and slow to hash; write them with i6_shard.core.write_file_list (or use "
                "ComputeFileSizesJob(...).out_file_list) and pass that path as files"
            )
        files_value: Any = list(files)
        _check_inline_trees(files_value, norm_key)
        if num_files is not None and num_files != len(files_value):
            raise ValueError(f"num_files={num_files} but {len(files_value)} files are given inline; drop num_files")
        num_files = len(files_value)
    elif files_kind(files) == "callable":
        _check_files_callable(files)
        files_value = files
    else:
        if not _is_path_like(files):
            raise TypeError(
                f"files has type {type(files).__name__} ({files!r}); give a list of file trees (inline) "
                "or the path of a file list (str, os.PathLike or tk.Path), or a module-level function "
                "returning the list"
            )
        files_value = _path_arg(files, name="files")
        ext = os.path.splitext(_path_str(files_value))[1]
        if ext not in FILE_LIST_EXTENSIONS:
            raise ValueError(
                f"file list {_path_str(files_value)!r} has extension {ext!r}; RETURNN reads only "
                f"{', '.join(FILE_LIST_EXTENSIONS)}: give a list of files, or a file list with one of these"
            )
    return files_value, num_files


def _options_not_at_returnns_defaults(
    *,
    seq_ordering: str,
    distrib_shard_files: bool,
    distribution: str,
    max_sub_epoch_deviation: float,
    file_sizes: Any,
    plan: Any,
    buffer_size: Optional[int],
    preload_next_n_sub_epochs: Optional[int],
    use_worker_proc: Optional[bool],
    fix: Optional[str],
) -> Dict[str, Any]:
    """The DFD options that differ from RETURNN's defaults (so that new options move no hash), with
    ``sharding_fix=True`` where the target RETURNN keeps the sub-epoch dataset from sharding again by it (``fix``,
    :func:`~.release.sub_epoch_fix`: always for an unknown one)."""
    dataset: Dict[str, Any] = {}
    if seq_ordering != "default":
        dataset["seq_ordering"] = seq_ordering
    if distrib_shard_files:
        dataset["distrib_shard_files"] = True
    if fix == "sharding_fix":
        dataset["sharding_fix"] = True
    if not cut_spec(distribution).returnns_own:  # the default of i6_shard's class, as of RETURNN's
        dataset["distribution"] = distribution
    if max_sub_epoch_deviation != DEFAULT_MAX_SUB_EPOCH_DEVIATION:
        dataset["max_sub_epoch_deviation"] = max_sub_epoch_deviation
    if file_sizes is not None:
        dataset["file_sizes"] = file_sizes
    if plan is not None:
        dataset["plan"] = plan
    if buffer_size is not None and buffer_size != 1:
        dataset["buffer_size"] = buffer_size
    worker_proc = use_worker_proc is not False  # RETURNN's default: True
    if preload_next_n_sub_epochs is not None and preload_next_n_sub_epochs != (1 if worker_proc else 0):
        dataset["preload_next_n_sub_epochs"] = preload_next_n_sub_epochs  # RETURNN's default depends on worker_proc
    if not worker_proc:
        dataset["use_worker_proc"] = False
    return dataset


def _checked_numbers(
    *,
    partition_epoch: Any,
    num_shards: Any,
    num_files: Any,
    buffer_size: Any,
    preload_next_n_sub_epochs: Any,
    use_worker_proc: Any,
    distrib_shard_files: Any,
    max_inline_files: Any,
) -> tuple:
    """The builder's numbers and flags as plain Python values, each checked with its meaning in the message."""
    if partition_epoch is None:
        raise TypeError(
            "sharded_files_dataset() needs partition_epoch (sub-epochs per full epoch), or plan= a "
            "ShardPlanJob to take it from"
        )
    check_bool(distrib_shard_files, name="distrib_shard_files")
    return (
        check_int(partition_epoch, name="partition_epoch", minimum=1, hint="sub-epochs per full epoch"),
        check_optional_int(
            num_shards, name="num_shards", minimum=1, hint="number of training ranks; leave it out if unknown"
        ),
        check_optional_int(
            num_files, name="num_files", minimum=1, hint="entries in the file list; leave it out if unknown"
        ),
        check_optional_int(
            buffer_size,
            name="buffer_size",
            minimum=1,
            hint="sequences each DFD worker process prefetches; RETURNN's default is 1",
        ),
        None if preload_next_n_sub_epochs is None else check_preload_next_n_sub_epochs(preload_next_n_sub_epochs),
        check_optional_bool(use_worker_proc, name="use_worker_proc"),
        check_int(max_inline_files, name="max_inline_files", minimum=1, hint="longest list of files given inline"),
    )


def _checked_distribution(distribution: Any, max_sub_epoch_deviation: Any, seq_ordering: Any) -> float:
    """Check the distribution, its bound and the seq order; the bound as a plain float."""
    check_distribution(distribution)
    max_sub_epoch_deviation = check_max_sub_epoch_deviation(max_sub_epoch_deviation)
    check_bound_is_used(max_sub_epoch_deviation, distribution=distribution)
    check_seq_ordering(seq_ordering)
    return max_sub_epoch_deviation


def _check_built(
    dataset: Dict[str, Any], *, num_files: Optional[int], num_shards: Optional[int], returnn_version: Optional[str]
) -> None:
    """The built dict, as RETURNN would read it: enough files for the bins (a list given by path and
    ``num_files``; inline lists are counted by the checks), and every check of :func:`check_dataset_dict`."""
    if num_files is not None and not isinstance(dataset["files"], list):
        cut_for = dfd_num_shards(
            distrib_shard_files=dataset.get("distrib_shard_files", False),
            num_ranks=num_shards,
            explicit_num_shards=dataset.get("_num_shards"),
        )
        check_enough_files(num_files, num_shards=cut_for, partition_epoch=dataset["partition_epoch"])
    check_dataset_dict(dataset, num_ranks=num_shards, name="sharded_files_dataset", returnn_version=returnn_version)


def sharded_files_dataset(
    files: Union[Sequence[Any], str, os.PathLike, Any],
    *,
    sub_epoch_dataset: Mapping[str, Any],
    partition_epoch: Optional[int] = None,
    files_key: FilesKey = "files",
    distribution: Optional[str] = None,
    file_sizes: Union[str, os.PathLike, Any, None] = None,
    max_sub_epoch_deviation: Optional[float] = None,
    plan: Union[str, os.PathLike, Any, None] = None,
    cached_file: Union[bool, Sequence[Union[int, str]]] = False,
    buffer_size: Optional[int] = None,
    preload_next_n_sub_epochs: Optional[int] = None,
    use_worker_proc: Optional[bool] = None,
    seq_ordering: Optional[str] = None,
    distrib_shard_files: bool = True,
    num_shards: Optional[int] = None,
    num_files: Optional[int] = None,
    extra_opts: Optional[Mapping[str, Any]] = None,
    max_inline_files: int = DEFAULT_MAX_INLINE_FILES,
    weights: Optional[Sequence[Any]] = None,
    returnn_version: Optional[str] = None,
    returnn_root: Any = None,
) -> Dict[str, Any]:
    """The dataset dict of RETURNN's ``DistributeFilesDataset`` for file-sharded training.

    It holds ``class``, ``files``, ``get_sub_epoch_dataset`` (``sub_epoch_dataset`` bound by
    :func:`~i6_shard.returnn_config.sub_epoch.bind_sub_epoch_dataset`), ``partition_epoch``,
    ``seq_ordering="random"``, ``distrib_shard_files=True`` and ``sharding_fix=True``; every
    other key only when it differs from RETURNN's default, so new options do not move hashes.
    The dict works in-process as it is (``init_dataset(d)``) when its paths are str, and goes
    into i6_core configs with :mod:`i6_shard.returnn_config.i6core` (Sisyphus paths stay
    Sisyphus paths here, for stable hashes, and become strings when the config is written).

    :param files: the file trees inline (a list; small lists), the path of a file list
        (.txt/.json/.py, e.g. ``ComputeFileSizesJob.out_file_list``; large lists), or a module-level
        function (or ``functools.partial`` of one) that returns the list when RETURNN runs (e.g. for shard
        directories that exist only then); it is hashed by name and arguments and never called here
    :param sub_epoch_dataset: the dataset dict each sub-epoch's files go into, e.g.
        ``{"class": "HDFDataset", "seq_ordering": "random"}``; needs an explicit seq order
    :param partition_epoch: sub-epochs per full epoch (required unless ``plan`` is a plan job)
    :param files_key: where the files go in ``sub_epoch_dataset``: a key or key path, or
        ``{modality: key path}`` to split multi-modal file trees (int parts of tuples, str keys of dicts)
    :param distribution: ``"returnn"`` (RETURNN's own bins, the default), ``"balanced"`` or ``"equal_steps"``
        (these, and ``"flexible"`` and ``"flexible_auto"``, the stages of ``"equal_steps"``, which are still taken,
        use i6_shard's ``ShardedDistributeFilesDataset``, named by reference: RETURNN imports it when it loads the
        config)
    :param file_sizes: path of precomputed sizes (``ComputeFileSizesJob.out_file_sizes``) or costs
        (``ComputeFileCostsJob.out_file_costs``: the bins are cut by its unit, frames or sequences); uses
        ``ShardedDistributeFilesDataset`` too, so no rank stats every file
    :param max_sub_epoch_deviation: ``"equal_steps"`` (and the earlier distributions that take one): how far a
        sub-epoch's size may be from the mean sub-epoch's, as a share of it, in [0, 1)
        (``PlanSettings.max_sub_epoch_deviation``, default 0.25); in the dict only when not the default
    :param plan: a ``ShardPlanJob``, whose settings (``num_shards``, ``partition_epoch``, ``distribution``,
        ``max_sub_epoch_deviation``, ``seq_ordering``) the dict then takes, so a recipe states them once
        (values given here must agree), or the path of a plan file (``ShardPlanJob.out_plan`` or what
        ``python -m i6_shard plan`` wrote,
        ``plan.npz``): every rank reads its bins from it instead of computing them, and checks at start-up
        that it fits (files, ``partition_epoch``, ranks, sharding, seeds, epochs); a ``tk.Path`` makes the
        training job depend on the job that writes the plan, so a plan that fails blocks the training.
        Plan ``num_epochs`` as the training's plus ``preload_next_n_sub_epochs`` (RETURNN loads ahead past
        the last sub-epoch). Uses ``ShardedDistributeFilesDataset``; not with ``file_sizes`` (the plan holds
        the sizes); ``distribution``, if given, must be the plan's
    :param cached_file: wrap every file name in RETURNN's ``CachedFile`` in the sub-epoch dataset (True),
        or only those of the named modalities of ``files_key`` (e.g. ``[0]`` for the arrow shards of
        ``(arrow, hdf)`` trees)
    :param buffer_size: DFD ``buffer_size`` (RETURNN default 1)
    :param preload_next_n_sub_epochs: DFD option (RETURNN default: 1 with worker process, else 0;
        a value equal to that default is left out of the dict)
    :param use_worker_proc: DFD option (RETURNN default True)
    :param seq_ordering: file shuffling of DFD: ``"random"`` (the default) or ``"default"``
    :param distrib_shard_files: shard the files over the ranks (False: every rank reads all files)
    :param num_shards: number of training ranks, if known: enables the too-few-files check
    :param num_files: number of entries in a file list given by path, if known (for the same check)
    :param extra_opts: further DFD/Dataset options, put into the dict as given
    :param max_inline_files: longest inline list accepted; write longer ones to a file list
    :param weights: corpora mixed by weight (docs/corpora.md): ``files`` is then one file list per weight (each
        inline or a list file's path), the dataset's ``files`` those lists one after the other (read where RETURNN
        runs, :func:`corpora_files`, where one is a path); the weights are the plan's, which the dataset reads, so
        ``plan`` is required (a ``ShardPlanJob`` over one archive per corpus with the same ``weights``)
    :param returnn_version: the RETURNN the training runs (``returnn.__version__``), or None: read from
        ``returnn_root`` where it can be (a checkout or sdist, or a ``CloneGitRepositoryJob``'s output once it
        exists). The dict then holds only what that release takes: ``sharding_fix=True`` where it has the option
        (from 1.20260611.014531), else ``"_num_shards": 1, "_shard_index": 0`` in the sub-epoch dict where its
        ``Dataset`` has them (from 1.20241015.225231), else neither (older releases never shard it again); an
        option it lacks (``use_worker_proc=False``, files as a list file or a callable) is refused naming the
        first release with it; 1.20241015.225231 .. 1.20250717.120243 get i6_shard's class, as RETURNN's own fails
        in a DataLoader worker there. Unknown: ``sharding_fix=True``, which i6_shard's class takes on every release,
        and RETURNN's own class only from 1.20260611.014531 (older ones reject it loudly; no dict of RETURNN's
        class works on all: the sub-epoch ``_num_shards`` is rejected before 1.20241015.225231 and needed after)
    :param returnn_root: where that RETURNN is, to read its version when ``returnn_version`` is None
    :raises ValueError, TypeError: naming the problem and its fix
    """
    # Every parameter, by name (the first statement, so locals() holds exactly them); all checks come first.
    given = dict(locals())
    given["files"] = _corpora_files_value(given.pop("weights"), files=files, plan=plan)
    a = _checked_arguments(**given)
    a.version = _target_returnn_version(a.returnn_version, a.returnn_root)
    _check_plan_release(plan, a.version)  # the plan job as given (a.plan: its plan file)
    use_ext = not cut_spec(a.distribution).returnns_own or a.file_sizes is not None or a.plan is not None
    use_ext = use_ext or (a.distrib_shard_files and unpickling_fails(a.version))  # RETURNN's own class would fail
    a.fix = sub_epoch_fix(a.version)
    template = _sub_epoch_template(a.sub_epoch_dataset, fix=a.fix, distrib_shard_files=a.distrib_shard_files)
    dataset: Dict[str, Any] = {
        "class": SHARDED_DFD_CLASS if use_ext else "DistributeFilesDataset",
        "files": a.files_value,
        "get_sub_epoch_dataset": bind_sub_epoch_dataset(template, files_key=a.norm_key, cached_file=a.cached_file),
        "partition_epoch": a.partition_epoch,
    }
    dataset.update(
        _options_not_at_returnns_defaults(
            seq_ordering=a.seq_ordering,
            distrib_shard_files=a.distrib_shard_files,
            distribution=a.distribution,
            max_sub_epoch_deviation=a.max_sub_epoch_deviation,
            file_sizes=a.file_sizes,
            plan=a.plan,
            buffer_size=a.buffer_size,
            preload_next_n_sub_epochs=a.preload_next_n_sub_epochs,
            use_worker_proc=a.use_worker_proc,
            fix=a.fix,
        )
    )
    for key, value in (a.extra_opts or {}).items():
        if key in _RESERVED:
            raise ValueError(f"extra_opts[{key!r}] is set by sharded_files_dataset; use its {key} argument instead")
        dataset[key] = value
    _check_built(dataset, num_files=a.num_files, num_shards=a.num_shards, returnn_version=a.version)
    return dataset


def corpora_files(lists: Sequence[Any]) -> List[Any]:
    """The files of several corpora one after the other, as the dataset of a plan of corpora by weight lists them:
    each an inline list or the path of a file list (read as RETURNN reads one). Called where RETURNN runs (bound with
    ``functools.partial`` by :func:`sharded_files_dataset`).

    >>> corpora_files([["a", "b"], ["c"]])
    ['a', 'b', 'c']
    """
    return [tree for files in lists for tree in read_files(files)]


def _corpora_files_value(weights: Optional[Sequence[Any]], *, files: Any, plan: Any) -> Any:
    """``files`` as the builder takes it: as given without weights; with them, the corpora's lists one after the
    other (inline where all are, else :func:`corpora_files` bound to them), checked against the weights and plan."""
    if weights is None:
        return files
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or not weights:
        raise TypeError(f"weights={weights!r}: give one weight per corpus, e.g. [1, 2.5]")
    if not isinstance(files, (list, tuple)) or len(files) != len(weights):
        raise ValueError(
            f"weights={list(weights)!r} weights {len(weights)} corpora, so files must be a list of {len(weights)} file "
            f"lists (each inline or a list file's path), one per corpus in the same order; got {type(files).__name__}"
        )
    if plan is None:
        raise ValueError(
            "weights mix corpora by a plan, which the dataset reads: give plan=ShardPlanJob([sizes_A, sizes_B, ...], "
            "weights=..., ...) (or its plan file), made from the same corpora in the same order"
        )
    if _is_plan_job(plan) and getattr(plan, "weights", None) != _plan_weights(weights):
        raise ValueError(
            f"weights={list(weights)!r}, but the plan job has weights={getattr(plan, 'weights', None)!r}: give the "
            "dataset the plan's weights (the dataset reads that plan)"
        )
    lists = [plain_value(f) for f in files]
    if all(isinstance(f, (list, tuple)) for f in lists):
        return [tree for f in lists for tree in f]
    return functools.partial(corpora_files, [list(f) if isinstance(f, tuple) else f for f in lists])


def _plan_weights(weights: Sequence[Any]) -> Any:
    """The weights as a plan job holds them (the plan option's check, through a request)."""
    return PlanRequest.from_options(num_shards=1, partition_epoch=1, num_epochs=1, weights=list(weights)).weights


def _sub_epoch_template(template: Dict[str, Any], *, fix: Optional[str], distrib_shard_files: bool) -> Dict[str, Any]:
    """The sub-epoch dataset's dict, kept from sharding again by the release's means where it needs the dict's own
    ``"_num_shards": 1, "_shard_index": 0`` (``fix == "sub_epoch_shards"``) and does not state them itself."""
    explicit = "_num_shards" in template or "_shard_index" in template
    if fix == "sub_epoch_shards" and distrib_shard_files and not explicit:
        return {**template, "_num_shards": 1, "_shard_index": 0}
    return template


def _check_plan_release(plan: Any, version: Optional[str]) -> None:
    """A plan job cut for another RETURNN release than the training runs, where the two cut its distribution
    otherwise (:func:`~i6_shard.core.pure.release_cut_difference`), refused naming both and the fix; the dataset
    refuses such a plan file when it starts."""
    if version is None or not _is_plan_job(plan):
        return
    planned = getattr(plan, "returnn_version", None)
    key = release_cut_difference(
        plan.distribution, planned, has_feature=lambda feature: release_has(version, feature) is not False
    )
    if key is not None:
        raise ValueError(
            f"the plan job cuts distribution={plan.distribution!r} as RETURNN {planned or '(the newest)'} does, but the "
            f"training runs RETURNN {version}, which cuts it otherwise ({returnn_feature(key).what} came with "
            f"{returnn_feature(key).first}): give the plan job returnn_version={version!r}"
        )


def _target_returnn_version(returnn_version: Any, returnn_root: Any) -> Optional[str]:
    """The version of the RETURNN the training runs: ``returnn_version`` as given (checked), else read from
    ``returnn_root`` where it can be (:func:`~.checks.returnn_version_info`), else None."""
    if returnn_version is None:
        return returnn_version_info(returnn_root)[0]
    if not isinstance(returnn_version, str):
        raise TypeError(
            f"returnn_version={returnn_version!r} has type {type(returnn_version).__name__}; give RETURNN's "
            "version string, e.g. '1.20250115.110555' (returnn.__version__), or None"
        )
    parse_returnn_version(returnn_version)
    return returnn_version


#: The arguments of :func:`sharded_files_dataset` that go into the dict as values (made plain first).
_PLAIN_ARGUMENTS = (
    "files sub_epoch_dataset files_key distribution file_sizes cached_file seq_ordering extra_opts".split()
)


def _checked_arguments(**given: Any) -> SimpleNamespace:
    """The arguments of :func:`sharded_files_dataset`, checked and normalized, with ``norm_key`` and ``files_value``."""
    a = SimpleNamespace(**given)
    # Plain Python values only (numpy.str_, str subclasses, path objects): configs are written with repr.
    for name in _PLAIN_ARGUMENTS:
        setattr(a, name, plain_value(getattr(a, name)))
    a.plan, settings_of_plan = _plan_and_its_settings(a.plan)
    a.partition_epoch, a.num_shards, a.distribution, a.max_sub_epoch_deviation, a.seq_ordering = _take_from_plan(
        settings_of_plan,
        partition_epoch=a.partition_epoch,
        num_shards=a.num_shards,
        distribution=a.distribution,
        max_sub_epoch_deviation=a.max_sub_epoch_deviation,
        seq_ordering=a.seq_ordering,
    )
    (
        a.partition_epoch,
        a.num_shards,
        a.num_files,
        a.buffer_size,
        a.preload_next_n_sub_epochs,
        a.use_worker_proc,
        a.max_inline_files,
    ) = _checked_numbers(
        partition_epoch=a.partition_epoch,
        num_shards=a.num_shards,
        num_files=a.num_files,
        buffer_size=a.buffer_size,
        preload_next_n_sub_epochs=a.preload_next_n_sub_epochs,
        use_worker_proc=a.use_worker_proc,
        distrib_shard_files=a.distrib_shard_files,
        max_inline_files=a.max_inline_files,
    )
    a.file_sizes, a.plan = _checked_sizes_and_plan(a.file_sizes, a.plan)
    _check_extra_opts(a.extra_opts)
    a.max_sub_epoch_deviation = _checked_distribution(a.distribution, a.max_sub_epoch_deviation, a.seq_ordering)
    if not isinstance(a.sub_epoch_dataset, Mapping):
        raise TypeError(f"sub_epoch_dataset must be a dataset dict, got {type(a.sub_epoch_dataset).__name__}")
    check_sub_epoch_dataset(a.sub_epoch_dataset)
    a.norm_key = normalize_files_key(a.files_key)
    a.cached_file = normalize_cached_file(a.cached_file, a.norm_key)
    a.files_value, a.num_files = _checked_files(
        a.files, a.norm_key, max_inline_files=a.max_inline_files, num_files=a.num_files
    )
    return a

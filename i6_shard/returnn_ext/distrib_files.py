"""ShardedDistributeFilesDataset: RETURNN's DistributeFilesDataset with a selectable
distribution (a row of ``i6_shard.core.pure.CUTS``), precomputed file sizes instead of a stat per file, or the bins
read from a plan file."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence as SequenceABC
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from i6_shard.returnn_ext.version import (
    distributed_rank_and_size,
    has_feature,
    refuse_missing,
    require_returnn_features,
    running_returnn,
)

require_returnn_features()  # one clear error for an older RETURNN, before the imports below fail bare

import returnn  # noqa: E402
from returnn.datasets import distrib_files as _returnn_distrib_files
from returnn.datasets.basic import Dataset
from returnn.datasets.distrib_files import DistributeFilesDataset, FileTree
from returnn.log import log

from i6_shard import core
from i6_shard.returnn_config.reader.engine import read_engine, sub_epoch_seq_ordering_of, worker_shards_problem
from i6_shard.returnn_config.reader.rules import duplicate_workers_problem
from i6_shard.core.io import (
    DEFAULT_CHECK_SAMPLES,
    check_num_samples,
    check_sample_unchanged,
    decode_keys,
    encode_keys,
    load_file_costs,
    read_plan_head,
    read_plan_layout,
)
from i6_shard.core.pure import (
    DEFAULT_DISTRIBUTION,
    cut_options,
    first_difference,
    plan_covers,
    DEFAULT_MAX_SUB_EPOCH_DEVIATION,
    PlanSettings,
    check_distribution,
    check_max_sub_epoch_deviation,
    cut_full_epoch,
    cut_spec,
    UNKNOWN_SEQ_ORDERING,
    engine_differences,
    engine_inexact_reason,
    engine_of_record,
    has_node_level,
    plan_coverage_problem,
    release_cut_difference,
    returnn_feature,
    short_repr,
)

__all__ = ["ShardedDistributeFilesDataset"]
_MAX_LISTED_KEYS = 5


def check_returnn_hooks() -> None:
    """Fail loudly if this RETURNN lacks what :class:`ShardedDistributeFilesDataset` overrides
    or relies on (names and signatures); runs when this module is imported.

    :raises ImportError: naming the RETURNN version, its path and every missing hook
    """
    problems: List[str] = []
    dfd = DistributeFilesDataset
    distribute = dfd.__dict__.get("_distribute_evenly_by_size")
    if not isinstance(distribute, staticmethod):
        problems.append("DistributeFilesDataset._distribute_evenly_by_size is not a staticmethod")
    else:
        params = inspect.signature(distribute.__func__).parameters
        if [(n, p.kind) for n, p in params.items()] != [
            (n, inspect.Parameter.KEYWORD_ONLY) for n in ("num_bins", "file_sizes", "files_order")
        ]:
            problems.append(
                f"DistributeFilesDataset._distribute_evenly_by_size has signature {list(params)}, "
                "expected (*, num_bins, file_sizes, files_order)"
            )
    lazy_sizes = dfd.__dict__.get("_lazy_init_file_sizes")
    if not callable(lazy_sizes) or list(inspect.signature(lazy_sizes).parameters) != ["self"]:
        problems.append("DistributeFilesDataset._lazy_init_file_sizes(self) is missing")
    init_seq_order = dfd.__dict__.get("init_seq_order")
    used = set(getattr(getattr(init_seq_order, "__code__", None), "co_names", ()))
    for name in (
        "_lazy_init_file_sizes",
        "_distribute_evenly_by_size",
        "_file_sizes",
        "_num_shards",
        "_shard_index",
        "partition_epoch",
        "_files_order_cache",
        "preload_next_n_sub_epochs",
    ):
        if name not in used:
            problems.append(f"DistributeFilesDataset.init_seq_order does not use {name}")
    init_params = inspect.signature(dfd.__init__).parameters
    for name in ("distribution", "file_sizes", "plan", "max_sub_epoch_deviation"):
        if name in init_params:
            problems.append(f"DistributeFilesDataset.__init__ has its own {name!r} argument")
    if "_meta_info_cache" not in init_params or "_file_sizes" not in dfd.__init__.__code__.co_names:
        problems.append("DistributeFilesDataset.__init__ does not restore _file_sizes from _meta_info_cache")
    if not isinstance(getattr(Dataset, "_getnewargs_remap", None), dict) or "__reduce__" not in Dataset.__dict__:
        problems.append("Dataset.__reduce__ / Dataset._getnewargs_remap (used for pickling) are missing")
    if not callable(getattr(Dataset, "_get_random_seed_for_epoch", None)):
        problems.append("Dataset._get_random_seed_for_epoch is missing")
    if not has_feature("get_distributed_rank_and_size") and not callable(
        getattr(_returnn_distrib_files, "_get_rank_and_size", None)
    ):
        problems.append(
            "neither returnn.datasets.basic._get_distributed_rank_and_size nor distrib_files._get_rank_and_size"
        )
    if not callable(getattr(_returnn_distrib_files, "_get_key_for_file_tree", None)):
        problems.append("returnn.datasets.distrib_files._get_key_for_file_tree is missing")
    if problems:
        raise ImportError(
            f"i6_shard.returnn_ext cannot extend RETURNN {getattr(returnn, '__version__', '?')} "
            f"at {os.path.dirname(returnn.__file__)}: "
            + "; ".join(problems)
            + ". Use a RETURNN version that has these hooks, or the plain DistributeFilesDataset."
        )


check_returnn_hooks()
_get_key_for_file_tree = _returnn_distrib_files._get_key_for_file_tree


class _StaticOnClassSelectedOnInstance:
    """``_distribute_evenly_by_size`` of the subclass. RETURNN declares it a staticmethod and calls it
    both ways: ``self._distribute_evenly_by_size(...)`` in ``init_seq_order`` (here: the dataset's
    selected distribution) and ``DistributeFilesDataset._distribute_evenly_by_size(...)`` on the class,
    as its own tests do (here: RETURNN's function, unchanged)."""

    def __init__(self, method_name: str):
        self.method_name = method_name

    def __get__(self, instance, owner=None):
        if instance is None:
            return DistributeFilesDataset._distribute_evenly_by_size
        return getattr(instance, self.method_name)


class ShardedDistributeFilesDataset(DistributeFilesDataset):
    """RETURNN's :class:`DistributeFilesDataset`, changed in these places only:

    - ``distribution``: ``"returnn"`` (default) cuts the bins exactly as RETURNN does;
      ``"balanced"`` cuts size-balanced sub-epoch groups and assigns each group's files to
      the ranks largest first (:func:`i6_shard.core.pure.balanced.distribute_balanced`), so that ranks
      finish their sub-epochs at nearly the same time and little data is dropped.
      ``"equal_steps"``: flexible_auto's cut, then files moved between the ranks of each sub-epoch until the
      simulated torch engine's ranks make equal steps (:func:`i6_shard.core.pure.equal_steps.equalize_steps`);
      without ``plan`` it needs ``file_sizes`` a costs archive with per-sequence lengths and takes the engine
      settings from RETURNN's config (``batch_size``, ``max_seqs``, ``max_seq_length``,
      ``accum_grad_multiple_step``, ``torch_distributed``), cutting on the planning floor as a plan does.
      ``ShardPlan(..., distribution=...)`` computes the same bins before training. Its stages are still taken,
      though no longer offered: ``"flexible"`` lets the sub-epochs differ in size by up to
      ``max_sub_epoch_deviation`` (default 0.25: +-25% of the mean;
      :func:`i6_shard.core.pure.flexible.distribute_flexible`), ``"flexible_auto"`` chooses that bound for each full
      epoch, up to 0.9 (:func:`i6_shard.core.pure.flexible.distribute_flexible_auto`).
    - ``file_sizes``: path to what ``save_file_sizes`` / ``ComputeFileSizesJob`` wrote; the
      sizes are loaded from there instead of ``os.path.getsize`` on every file on every
      rank. The stored keys must be exactly the keys of ``files``, in the same order. A costs
      archive (``save_file_costs`` / ``ComputeFileCostsJob``) is taken the same way: the bins are
      then cut by its frames or sequences. Each rank
      stats ``file_sizes_check_samples`` random entries again at start-up (another sample per
      rank) and fails if their size or modification time changed since the sizes were computed.
    - ``plan``: path to what ``ShardPlanJob`` / ``python -m i6_shard plan`` wrote (``plan.npz``): each
      rank reads its bins from there, one full epoch at a time, and neither stats a file nor cuts bins.
      When the dataset starts, it checks that the plan fits (file keys and their order,
      ``partition_epoch``, number of ranks, sharding mode, ``seq_ordering``, distribution, seeds, the engine
      settings the plan was simulated with against the config's ``batch_size``, ``max_seqs``, ``max_seq_length``,
      ``accum_grad_multiple_step`` and ``torch_distributed`` (a plan that records none logs that nothing is checked),
      and the config's ``num_epochs`` plus the preloaded sub-epochs) and raises ``ValueError`` naming every
      difference and its fix; it never falls back to computing bins.

    Use it as the ``"class"`` of a dataset dict (RETURNN accepts the class object there)::

        from i6_shard.returnn_ext import ShardedDistributeFilesDataset
        train = {"class": ShardedDistributeFilesDataset, "files": [...], "get_sub_epoch_dataset": ...,
                 "partition_epoch": 20, "distrib_shard_files": True, "sharding_fix": True,
                 "plan": "/path/to/plan.npz"}
    """

    # Dataset.__reduce__ passes each __init__ argument from the attribute "_" + name if there is one:
    # "file_sizes" would pick up DistributeFilesDataset._file_sizes (the dict), so point it at the path.
    _getnewargs_remap = {
        **DistributeFilesDataset._getnewargs_remap,
        "file_sizes": "file_sizes_path",
        "plan": "plan_path",
    }

    def __init__(
        self,
        *,
        distribution: Optional[str] = None,
        file_sizes: Optional[str | os.PathLike] = None,
        file_sizes_check_samples: int = DEFAULT_CHECK_SAMPLES,
        plan: Optional[str | os.PathLike] = None,
        max_sub_epoch_deviation: float = DEFAULT_MAX_SUB_EPOCH_DEVIATION,
        sharding_fix: Optional[bool] = None,
        **kwargs,
    ):
        """
        :param distribution: one of ``i6_shard.core.pure.settings.DISTRIBUTIONS`` (``"returnn"``, ``"balanced"`` or
            ``"equal_steps"``; ``"flexible"`` and ``"flexible_auto"``, its stages, are still taken); None:
            ``"returnn"``, or with ``plan``, the plan's (given with a plan, it must be the plan's)
        :param file_sizes: path of a file sizes archive (``i6_shard.core.save_file_sizes``), or None to
            stat every file as RETURNN does; not read with ``plan`` (the plan holds the sizes)
        :param file_sizes_check_samples: entries of ``file_sizes`` each rank stats again when it loads them
            (:func:`i6_shard.core.io.check_sample_unchanged`); 0: none
        :param plan: path of a plan file; None: compute the bins as the other options say
        :param max_sub_epoch_deviation: ``"flexible"`` only: how far a sub-epoch's size may be from the
            mean sub-epoch's, as a share of it, in [0, 1) (``PlanSettings.max_sub_epoch_deviation``)
        :param sharding_fix: RETURNN's option where it has it (from 1.20260611.014531); before that, True keeps the
            sub-epoch dataset from sharding again by ``"_num_shards": 1, "_shard_index": 0`` in its dict (where
            ``Dataset`` has them, from 1.20241015.225231; older releases never shard it again)
        :param kwargs: everything else goes to :class:`DistributeFilesDataset` unchanged, as far as this RETURNN
            takes it (:func:`_kwargs_for_this_returnn`)
        """
        if distribution is not None:
            check_distribution(distribution)
        max_sub_epoch_deviation = check_max_sub_epoch_deviation(max_sub_epoch_deviation)
        for name, value, what in (("file_sizes", file_sizes, "a file sizes archive"), ("plan", plan, "a plan file")):
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise TypeError(
                    f"{name}={value!r} must be the path (str) of {what} or None; convert a tk.Path with .get_path()"
                )
        check_num_samples(file_sizes_check_samples, name="file_sizes_check_samples")
        if has_feature("sharding_fix"):
            kwargs["sharding_fix"] = sharding_fix
        super().__init__(**_kwargs_for_this_returnn(kwargs))
        self.sharding_fix = sharding_fix
        if not hasattr(self, "distrib_shard_files"):  # RETURNN before 1.20240628 keeps only _num_shards
            self.distrib_shard_files = bool(kwargs.get("distrib_shard_files", False))
        if not has_feature("files_list_file"):  # RETURNN before 1.20250423 reads self.files (a list) itself
            self._files = self.files
        self.file_sizes_check_samples = int(file_sizes_check_samples)
        self.distribution = distribution if distribution is not None or plan is not None else DEFAULT_DISTRIBUTION
        self.max_sub_epoch_deviation = max_sub_epoch_deviation
        self.file_sizes_path: Optional[str] = None if file_sizes is None else os.fspath(file_sizes)
        self.plan_path: Optional[str] = None if plan is None else os.fspath(plan)
        self._plan_settings: Optional[PlanSettings] = None  # set once the plan was checked against the dataset
        self._plan_num_full_epochs = 0
        self._plan_layout_and_rank: Tuple[int, int] = (0, 0)
        self._equal_steps_plan: Optional[core.ShardPlan] = None  # "equal_steps" without a plan: built once
        self._worker_shard_given = False  # ReturnnDatasetIterDataPipe.reset gave this copy a DataLoader worker's shard
        self._workers_checked = False

    def _lazy_init_file_list(self):
        """RETURNN's, where it has it (from 1.20250423.155627); before, ``files`` is the list (checked in
        ``__init__``)."""
        if has_feature("files_list_file"):
            super()._lazy_init_file_list()

    def _get_sub_dataset_dict(self, files: List[FileTree]):
        """RETURNN's, and where this RETURNN has no ``sharding_fix`` but shards the sub-epoch dataset again (its
        dict inherits ``_num_shards``/``_shard_index``), ``sharding_fix=True`` done by ``"_num_shards": 1,
        "_shard_index": 0`` in the dict (a dict that set the parent's values itself gets them too)."""
        out = super()._get_sub_dataset_dict(files)  # before 1.20240628: (dict, exit hook of the file cache)
        dataset_dict = out[0] if isinstance(out, tuple) else out
        inherited = (dataset_dict.get("_num_shards"), dataset_dict.get("_shard_index")) == (
            self._num_shards,
            self._shard_index,
        )
        if self.sharding_fix and not has_feature("sharding_fix") and self._num_shards > 1 and inherited:
            dataset_dict["_num_shards"], dataset_dict["_shard_index"] = 1, 0
        return out

    def _lazy_init_file_sizes(self):
        """Sizes from ``plan`` or ``file_sizes`` if given (no stat call at all), else RETURNN's own."""
        if self._file_sizes:  # computed already, or restored from _meta_info_cache after pickling
            return
        if self.plan_path is not None:
            self._lazy_init_file_list()  # RETURNN needs no sizes then: the bins come from the plan
            if self._plan_settings is None:
                self._check_plan()
            return
        if self.file_sizes_path is None:
            super()._lazy_init_file_sizes()
            return
        self._lazy_init_file_list()
        self._file_sizes = load_sizes_for_files(
            self.file_sizes_path, self._files, num_samples=self.file_sizes_check_samples, seed=self._shard_index
        )

    def set_sharding(self, *, num_shards: int, shard_index: int):
        """RETURNN's (``ReturnnDatasetIterDataPipe.reset`` gives a DataLoader worker's copy its shard), remembered for
        the start-up check of the DataLoader workers (:meth:`_check_loader_workers`)."""
        super().set_sharding(num_shards=num_shards, shard_index=shard_index)
        self._worker_shard_given = True

    def init_seq_order(self, epoch: Optional[int] = None, seq_list=None, seq_order=None) -> bool:
        """RETURNN's, with the bins of this and the preloaded sub-epochs taken from ``plan`` if given:
        RETURNN computes only the full epochs not in its cache, and the plan's are put there first."""
        if epoch is not None and not self._workers_checked:  # (after set_sharding, where the workers shard)
            self._check_loader_workers()
        if epoch is not None and seq_list is None and seq_order is None:
            if self.plan_path is not None:
                self._fill_from_plan(epoch)
            elif cut_spec(self.distribution).cuts_with_inputs:  # cut on the planning floor
                self._fill_equal_steps(epoch)
        return super().init_seq_order(epoch=epoch, seq_list=seq_list, seq_order=seq_order)

    def _check_loader_workers(self) -> None:
        """At start-up in a DataLoader worker of several that gave this copy no shard of its own: the reader's one
        rule (``duplicate_workers_problem``) on the global config and this release, raised for the train dataset (every
        worker would train all of the rank's data) and logged for another (an eval dataset is read the same way)."""
        if _loader_workers() <= 1:
            return  # (not in a worker: a forked one inherits this copy's state, so it is not marked checked here)
        self._workers_checked = True
        if self._worker_shard_given:
            return
        from returnn.config import get_global_config

        config = get_global_config(raise_exception=False)
        train = getattr(self, "name", None) == "train"
        problem = duplicate_workers_problem(
            {} if config is None else _ConfigView(config),
            role="train" if train else "eval",
            returnn_version=has_feature,  # the running release's DataLoader, as its features say
            release_name=getattr(returnn, "__version__", None),
        )
        if problem is None:
            return
        if train:
            raise ValueError(f"{self}: {problem}")
        print(f"{self}: {problem}", file=log.v2)

    def _fill_from_plan(self, epoch: int) -> None:
        self._lazy_init_file_list()
        if self._plan_settings is None:
            self._check_plan()
        settings, (layout_idx, rank) = self._plan_settings, self._plan_layout_and_rank
        p = self.partition_epoch
        last_needed = epoch + self.preload_next_n_sub_epochs
        if not plan_covers(plan_full_epochs=self._plan_num_full_epochs, partition_epoch=p, needed_epoch=last_needed):
            raise ValueError(
                _too_few_epochs(
                    self.plan_path,
                    settings,
                    num_full_epochs=self._plan_num_full_epochs,
                    needed_epoch=last_needed,
                    preload=self.preload_next_n_sub_epochs,
                    where=f"at sub-epoch {epoch}",
                )
            )
        for full_epoch_0idx in range((epoch - 1) // p, (last_needed - 1) // p + 1):
            if full_epoch_0idx in self._files_order_cache:
                continue
            if self.seq_ordering == "random":
                planned = settings.seed_for(full_epoch_0idx=full_epoch_0idx, shard_index=rank)
                mine = self._get_random_seed_for_epoch(full_epoch_0idx * p + 1)
                if planned != mine:
                    raise ValueError(
                        f"plan {self.plan_path!r} does not fit {self}: it shuffles full epoch {full_epoch_0idx} "
                        f"with seed {planned}, this dataset on rank {rank} with seed {mine} (the plan's "
                        f"random_seed_offset={settings.random_seed_offset}, fixed_random_seed="
                        f"{settings.fixed_random_seed}, sharding {settings.sharding!r}); re-plan with the training's "
                        "seeds (dataset random_seed_offset or config dataset_random_seed_offset, fixed_random_seed), "
                        "or set them as planned"
                    )
            order, bounds = read_plan_layout(
                self.plan_path, full_epoch_0idx=full_epoch_0idx, layout_idx=layout_idx, num_files=len(self._files)
            )
            base = self._shard_index * p if settings.distrib_shard_files else 0
            self._files_order_cache[full_epoch_0idx] = _PlanBins(self._files, order, bounds[base : base + p + 1])

    def _fill_equal_steps(self, epoch: int) -> None:
        """The bins of distribution "equal_steps" without a plan file: cut here, on the planning floor, as a plan of
        the same costs archive and engine settings cuts them (RETURNN's cut does not know the full epoch it cuts)."""
        self._lazy_init_file_list()
        plan = self._equal_steps_plan
        if plan is None:
            plan = self._equal_steps_plan = self._make_equal_steps_plan()
        p = self.partition_epoch
        for k in range((epoch - 1) // p, (epoch + self.preload_next_n_sub_epochs - 1) // p + 1):
            if k not in self._files_order_cache:
                order, bounds = plan.layout(full_epoch_0idx=k)
                base = self._shard_index * p
                self._files_order_cache[k] = _PlanBins(self._files, order, bounds[base : base + p + 1])

    def _make_equal_steps_plan(self) -> core.ShardPlan:
        where = f"{self}: distribution={self.distribution!r} without plan="
        if self.file_sizes_path is None:
            raise ValueError(
                f"{where} cuts with every file's sequence lengths, but no file_sizes was given: give file_sizes= a "
                "costs archive (ComputeFileCostsJob, `python -m i6_shard costs`), or plan= a plan file"
            )
        if not (self.distrib_shard_files or self._num_shards > 1):
            raise ValueError(
                f"{where} equalizes the steps of ranks that read their own files, but the dataset is unsharded "
                f"(distrib_shard_files={self.distrib_shard_files}, num_shards={self._num_shards}): set "
                "distrib_shard_files=True, or choose another distribution"
            )
        self._lazy_init_file_sizes()  # checks the archive's keys against the files
        costs = load_file_costs(self.file_sizes_path)
        engine = _config_engine(self._sub_epoch_seq_ordering())
        accum = engine.accum_grad_multiple_step
        if accum is not None and not isinstance(accum, int):
            raise ValueError(
                f"{where} simulates the training's steps, but the config's accum_grad_multiple_step={accum!r} is not "
                "an int: give an int, or choose another distribution"
            )
        try:
            request = core.PlanRequest.from_options(
                num_shards=self._num_shards,
                partition_epoch=self.partition_epoch,
                num_epochs=None,
                seq_ordering=self.seq_ordering,
                random_seed_offset=self.random_seed_offset,
                fixed_random_seed=self.fixed_random_seed,
                distribution=self.distribution,
                batch_size=engine.stated_batch_size,
                max_seqs=engine.max_seqs,
                max_seq_length=engine.stated_max_seq_length,
                accum_grad_multiple_step=accum,
                torch_distributed=engine.torch_distributed,
                # a "node" sync level groups torchrun's ranks per host (other trainings need no node cache)
                ranks_per_node=engine.ranks_per_node if has_node_level(engine.torch_distributed) else None,
                # the order the sub-epoch dataset batches in, where it can be told (else the builders' random)
                sub_epoch_seq_ordering=None if engine.seq_ordering == UNKNOWN_SEQ_ORDERING else engine.seq_ordering,
            )
            return core.make_plan(core.load_file_sizes(self.file_sizes_path), request, lengths=costs)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{where} (the config's engine settings, file_sizes {self.file_sizes_path!r}): {exc}")

    def _check_plan(self) -> None:
        """Compare the plan with this dataset once; raise ``ValueError`` naming every difference."""
        head = read_plan_head(self.plan_path, decode_keys=False)
        settings = head.settings
        where = f"plan {self.plan_path!r} does not fit {self}"
        problems: List[str] = []
        if not self._files_match_plan_keys(head):
            keys = [_get_key_for_file_tree(t) for t in self._files]
            problems.append(
                _keys_difference(decode_keys(head.keys_utf8, num_keys=head.num_files, path=self.plan_path), keys)
            )
        if settings.partition_epoch != self.partition_epoch:
            problems.append(
                f"the plan has partition_epoch={settings.partition_epoch}, the dataset {self.partition_epoch}"
            )
        sharded = self.distrib_shard_files or self._num_shards > 1
        if settings.distrib_shard_files != sharded:
            problems.append(
                f"the plan is {settings.sharding!r}, the dataset {'sharded' if sharded else 'unsharded'} "
                f"(distrib_shard_files={self.distrib_shard_files}, num_shards={self._num_shards})"
            )
        rank, world = (self._shard_index, self._num_shards) if sharded else distributed_rank_and_size()
        if settings.num_shards != world:
            problems.append(_num_shards_problem(settings.num_shards, world=world))
        if settings.seq_ordering != self.seq_ordering:
            problems.append(f"the plan has seq_ordering={settings.seq_ordering!r}, the dataset {self.seq_ordering!r}")
        if self.distribution is not None and self.distribution != settings.distribution:
            problems.append(
                f"the plan was cut with distribution={settings.distribution!r}, the dataset asks for "
                f"{self.distribution!r}"
            )
        problems += self._engine_problems(head)
        problems += _release_cut_problems(head, self.plan_path)
        num_epochs = _config_num_epochs()
        if not problems and num_epochs:
            needed = num_epochs + self.preload_next_n_sub_epochs
            if not plan_covers(
                plan_full_epochs=head.num_full_epochs, partition_epoch=self.partition_epoch, needed_epoch=needed
            ):
                problems.append(
                    _too_few_epochs(
                        self.plan_path,
                        settings,
                        num_full_epochs=head.num_full_epochs,
                        needed_epoch=needed,
                        preload=self.preload_next_n_sub_epochs,
                        where=f"for the config's num_epochs={num_epochs}",
                    )
                )
        if problems:
            raise ValueError(
                f"{where}: " + "; ".join(problems) + ". Make the plan from this training's file list and settings "
                "(ShardPlanJob on the ComputeFileSizesJob of these files, num_shards = the number of ranks, the same "
                "partition_epoch, sharding, seq_ordering, distribution and seeds), or give the dataset the plan's "
                "settings."
            )
        self._plan_settings, self._plan_num_full_epochs = settings, head.num_full_epochs
        self._plan_layout_and_rank = (0 if settings.distrib_shard_files else rank, rank)

    def _engine_problems(self, head: core.io.PlanHead) -> List[str]:
        """How the config's engine settings differ from those the plan was simulated with (nothing is checked, and
        the log says so, for a plan that records none)."""
        if head.engine_settings is None:
            print(
                f"{self}: plan {self.plan_path!r} records no engine settings (made without batching, or before plans "
                "recorded them): the config's batch_size, max_seqs, max_seq_length, accum_grad_multiple_step and "
                "torch_distributed are not checked against it",
                file=log.v3,
            )
            return []
        planned = engine_of_record(head.engine_settings)
        problems = engine_differences(planned, _config_engine(self._sub_epoch_seq_ordering()))
        verdict = engine_inexact_reason(planned, num_ranks=head.settings.num_shards)
        if not problems and verdict is not None:  # the plan's one verdict, as its summary and report say it
            print(
                f"{self}: plan {self.plan_path!r}: its simulation of the engine is not exact ({verdict})", file=log.v3
            )
        return problems

    def _sub_epoch_seq_ordering(self) -> str:
        """The order of the sub-epoch dataset ``get_sub_epoch_dataset`` makes (of the first file), as the plan's
        simulation takes it (``sub_epoch_seq_ordering_of``: ``"unknown"`` where it cannot be told)."""
        try:
            files = self._files if self._files is not None else []
            sub = self.get_sub_epoch_dataset(list(files[:1])) if files else None
            return sub_epoch_seq_ordering_of(sub)
        except Exception:  # noqa: BLE001 (a user function on one file: whatever it raises, the order is not known)
            return UNKNOWN_SEQ_ORDERING

    def _files_match_plan_keys(self, head: core.io.PlanHead) -> bool:
        """Whether this dataset's files have exactly the plan's keys, in the plan's order."""
        try:
            blob = encode_keys(self._files)  # a list of str: each is its own key
        except TypeError:  # file trees
            blob = encode_keys([_get_key_for_file_tree(t) for t in self._files])
        return len(self._files) == head.num_files and np.array_equal(blob, head.keys_utf8)

    def _distribute_selected(
        self, *, num_bins: int, file_sizes: Dict[str, int], files_order: Sequence[FileTree]
    ) -> List[List[FileTree]]:
        """The bins of one full epoch; RETURNN gives rank r in sub-epoch s bin ``r*P + s``."""
        if self.plan_path is not None:
            raise RuntimeError(
                f"{self}: RETURNN asked to cut bins although they come from plan {self.plan_path!r}; "
                "this RETURNN version is not supported with plan="
            )
        if cut_spec(self.distribution).returnns_own:
            return DistributeFilesDataset._distribute_evenly_by_size(
                num_bins=num_bins, file_sizes=file_sizes, files_order=files_order
            )
        num_shards = self._num_shards
        if num_bins != num_shards * self.partition_epoch:
            raise RuntimeError(
                f"{self}: RETURNN asked for {num_bins} bins, expected num_shards*partition_epoch="
                f"{num_shards}*{self.partition_epoch}; this RETURNN version is not supported"
            )
        sizes = np.fromiter(
            (file_sizes[t if type(t) is str else _get_key_for_file_tree(t)] for t in files_order),
            dtype=np.int64,
            count=len(files_order),
        )  # a str is its own key
        order, bounds = cut_full_epoch(
            sizes,
            num_shards=num_shards,
            partition_epoch=self.partition_epoch,
            distribution=self.distribution,
            options=cut_options(self.distribution, max_sub_epoch_deviation=self.max_sub_epoch_deviation),
        )
        order_list, bounds_list = order.tolist(), bounds.tolist()
        return [[files_order[i] for i in order_list[bounds_list[b] : bounds_list[b + 1]]] for b in range(num_bins)]

    _distribute_evenly_by_size = _StaticOnClassSelectedOnInstance("_distribute_selected")


def _release_cut_problems(head: core.io.PlanHead, path: str) -> List[str]:
    """Where the plan's distribution is cut otherwise by the RETURNN release the plan was made for (its
    ``returnn_version``; None: the newest) than by the running one (detected by feature), and the plan's bins are not
    those this RETURNN cuts for the plan's files (:func:`_same_bins_here`): the plan is refused, naming both releases
    and the fix. Where both cuts give the same bins for these files, the plan is taken."""
    planned, distribution = head.returnn_version, head.settings.distribution
    key = release_cut_difference(distribution, planned, has_feature=has_feature)
    if key is None or _same_bins_here(head, path):
        return []
    version = getattr(returnn, "__version__", "?")
    feature = returnn_feature(key)
    made_for = f"RETURNN {planned}" if planned else "the newest RETURNN (no returnn_version given)"
    return [
        f"the plan was cut with distribution={distribution!r} as {made_for} cuts, but {running_returnn()} cuts it "
        f"otherwise ({feature.what} came with RETURNN {feature.first}), and its bins for these files differ; re-plan "
        f"it for this release with returnn_version={version!r} (ShardPlanJob(..., returnn_version=...), `python -m "
        f"i6_shard plan --returnn-version {version}`)"
    ]


def _same_bins_here(head: core.io.PlanHead, path: str) -> bool:
    """Whether every stored full epoch and layout of the plan holds the bins the running RETURNN's cut makes of the
    plan's files in the stored order (its features as detected here choose the cut). A plan that reads files more
    than once a full epoch (corpora by weight) is not re-cut: False."""
    settings = head.settings
    if head.corpora is not None:
        return False
    num_shards = settings.num_shards if settings.distrib_shard_files else 1
    options = cut_options(settings.distribution, max_sub_epoch_deviation=settings.max_sub_epoch_deviation)
    for k in range(head.num_full_epochs):
        for layout in range(1 if settings.distrib_shard_files else settings.num_shards):
            order, bounds = read_plan_layout(path, full_epoch_0idx=k, layout_idx=layout, num_files=head.num_files)
            try:
                positions, mine = cut_full_epoch(
                    head.costs[order],
                    num_shards=num_shards,
                    partition_epoch=settings.partition_epoch,
                    distribution=settings.distribution,
                    options=options,
                    returnn_version=has_feature,
                )
            except (ValueError, AssertionError):  # this release's cut fails on them (its assert)
                return False
            if not (np.array_equal(positions, np.arange(len(order))) and np.array_equal(mine, bounds)):
                return False
    return True


def _kwargs_for_this_returnn(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The DistributeFilesDataset options as this RETURNN takes them: ``use_worker_proc=True`` (what a release
    without the option always does) dropped there; what it cannot do refused by one error naming the release, the
    feature and the first release with it."""
    kwargs = dict(kwargs)
    if (
        kwargs.get("_distrib_info")
        and kwargs.get("distrib_shard_files")
        and not has_feature("distrib_info_with_shards")
    ):
        # RETURNN 1.20241015 .. 1.20250717 (fix 6850cd0e3): unpickled (e.g. in a DataLoader worker), the dataset gets
        # its _num_shards/_shard_index from Dataset.__reduce__ too and asserts them to be 1/0; _distrib_info sets them
        kwargs.pop("_num_shards", None)
        kwargs.pop("_shard_index", None)
    files = kwargs.get("files")
    if callable(files):
        refuse_missing("files_callable", why=f"files={short_repr(files)} needs (a callable); give the list of files")
    elif isinstance(files, (str, os.PathLike)):
        refuse_missing(
            "files_list_file", why=f"files={short_repr(files)} needs (a file list's path); give the list of files"
        )
    if "use_worker_proc" in kwargs and not has_feature("use_worker_proc"):
        if kwargs["use_worker_proc"] is False:
            refuse_missing(
                "use_worker_proc",
                why="use_worker_proc=False needs (the sub-epoch dataset in the training's process); drop it: "
                "this release runs every sub-epoch dataset in a worker process",
            )
        del kwargs["use_worker_proc"]
    return kwargs


class _PlanBins(SequenceABC):
    """One rank's bins of a full epoch from a plan, as RETURNN's ``_files_order_cache`` holds them
    (bin s = the files of sub-epoch s), built when RETURNN asks for a sub-epoch: memory O(files of the rank)."""

    def __init__(self, files: Sequence[FileTree], order: np.ndarray, bounds: np.ndarray):
        self._files = files
        self._order = order[bounds[0] : bounds[-1]].copy()  # only this rank's files
        self._bounds = (bounds - bounds[0]).tolist()

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return [self[i] for i in range(*idx.indices(len(self)))]
        if idx < 0:
            idx += len(self)
        if not 0 <= idx < len(self):
            raise IndexError(idx)
        files = self._files
        return [files[i] for i in self._order[self._bounds[idx] : self._bounds[idx + 1]].tolist()]

    def __eq__(self, other):
        return isinstance(other, SequenceABC) and list(self) == list(other)

    __hash__ = None


class _ConfigView:
    """RETURNN's global config as the config reader (``returnn_config.reader``) reads a config dict: ``get``."""

    def __init__(self, config: Any):
        self._config = config

    def get(self, key: str, default: Any = None) -> Any:
        return self._config.typed_value(key, default) if self._config.has(key) else default


def _config_engine(sub_epoch_seq_ordering: str = UNKNOWN_SEQ_ORDERING) -> core.pure.EngineSettings:
    """The training's engine as RETURNN's global config states it, read by the config reader's one function
    (``read_engine``: the torch engine's ``batch_size_train`` before ``batch_size``, ...), with the sub-epoch
    dataset's order and ``ranks_per_node``: torchrun's ``LOCAL_WORLD_SIZE`` (None outside torchrun), which a
    ``"node"`` sync level's groups are."""
    from returnn.config import get_global_config

    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    ranks_per_node = int(local) if local.isdigit() and int(local) > 0 else None
    config = get_global_config(raise_exception=False)
    return read_engine(
        {} if config is None else _ConfigView(config),
        seq_ordering=sub_epoch_seq_ordering,
        ranks_per_node=ranks_per_node,
        returnn_version=has_feature,  # the running release's DataLoader, as its features say
    )


def _num_shards_problem(plan_num_shards: int, *, world: int) -> str:
    """Why a plan of ``plan_num_shards`` does not fit a dataset of ``world`` shards: in the graph checks' words
    (``worker_shards_problem``) where the ranks' DataLoader workers shard (``world`` is then ranks * workers)."""
    workers, ranks = _loader_workers(), distributed_rank_and_size()[1]
    if workers > 1 and world == ranks * workers:  # the workers shard (set_sharding; else each has the rank's shard)
        problem = worker_shards_problem(plan_num_shards, num_ranks=ranks, loader_workers=workers)
        if problem is not None:
            return problem
    return f"the plan is for {plan_num_shards} ranks, the training has {world} (distributed world size)"


def _loader_workers() -> int:
    """The DataLoader workers of this process's rank where this is one of them (``torch.utils.data.get_worker_info``),
    else 1."""
    try:
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
    except ImportError:
        return 1
    return info.num_workers if info is not None else 1


def _config_num_epochs() -> int:
    """RETURNN's ``num_epochs`` from the global config, 0 if there is none."""
    from returnn.config import get_global_config

    config = get_global_config(raise_exception=False)
    return config.int("num_epochs", 0) if config else 0


def _too_few_epochs(
    path: str, settings: PlanSettings, *, num_full_epochs: int, needed_epoch: int, preload: int, where: str
) -> str:
    problem = plan_coverage_problem(
        plan_full_epochs=num_full_epochs,
        partition_epoch=settings.partition_epoch,
        needed_epoch=needed_epoch,
        preload=preload,
    )
    return f"plan {path!r} does not hold what the training reads {where}: {problem}"


def _keys_difference(planned: List[str], keys: List[str]) -> str:
    """The first difference of the plan's keys and the dataset's, for the error message."""
    if len(planned) != len(keys):
        what = f"the plan has {len(planned)} files, the dataset {len(keys)}"
    else:
        known = set(planned)
        missing = [k for k in keys if k not in known]
        what = (
            f"{len(missing)} of the dataset's {len(keys)} files are not in the plan (first "
            f"{min(len(missing), _MAX_LISTED_KEYS)}: {missing[:_MAX_LISTED_KEYS]})"
            if missing
            else "the plan has the dataset's files in another order"
        )
    first = first_difference(planned, keys)
    return f"{what}; first difference at entry {first}: {_at(planned, first)} in the plan, {_at(keys, first)} in files"


def load_sizes_for_files(
    path: str, files: Sequence[FileTree], *, num_samples: int = 0, seed: int = 0
) -> Dict[str, int]:
    """key -> size for ``files``, from a file sizes archive whose keys must be exactly the keys
    of ``files`` in the same order (then a plan made from the archive matches the dataset);
    ``num_samples`` random entries (drawn with ``seed``) are stat-ed again and must be unchanged.

    :raises ValueError: naming the first missing, extra or reordered keys
    :raises i6_shard.core.io.stale_sizes.StaleFileSizesError: naming the sampled files that changed
    """
    loaded = core.load_file_sizes(path)
    keys = [_get_key_for_file_tree(t) for t in files]
    if keys == loaded.keys:
        check_sample_unchanged(loaded, trees=files, num_samples=num_samples, seed=seed, source=f"file_sizes {path!r}")
        return loaded.as_dict()
    known = set(loaded.keys)
    missing = [k for k in keys if k not in known]
    hint = (
        "Recompute the sizes for this file list (ComputeFileSizesJob or `python -m i6_shard sizes`), "
        "or drop file_sizes to stat every file"
    )
    if missing:
        raise ValueError(
            f"file_sizes {path!r} has no size for {len(missing)} of the {len(keys)} files "
            f"(first {min(len(missing), _MAX_LISTED_KEYS)}: {_shown(missing)}). {hint}."
        )
    wanted = set(keys)
    extra = [k for k in loaded.keys if k not in wanted]
    if extra:
        raise ValueError(
            f"file_sizes {path!r} has {len(loaded.keys)} entries, {len(extra)} of them not in the "
            f"{len(keys)} files of the dataset (first {min(len(extra), _MAX_LISTED_KEYS)}: "
            f"{_shown(extra)}); it was made for another file list. {hint}."
        )
    first = first_difference(keys, loaded.keys)
    raise ValueError(
        f"file_sizes {path!r} lists the dataset's files in another order or with other duplicates "
        f"({len(loaded.keys)} entries for {len(keys)} files; first difference at entry {first}: "
        f"{_at(loaded.keys, first)} there, {_at(keys, first)} in files), so a plan made from it would "
        f"not match what the dataset reads. {hint}."
    )


def _at(keys: List[str], idx: int) -> Any:
    return short_repr(keys[idx]) if idx < len(keys) else "nothing"


def _shown(keys: List[str]) -> str:
    """The first few keys, each cut to a bounded length."""
    return "[" + ", ".join(map(short_repr, keys[:_MAX_LISTED_KEYS])) + "]"

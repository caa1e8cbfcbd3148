"""RETURNN's own DistributeFilesDataset as each rank of a ``torch_distributed`` training builds it:
RETURNN derives the rank's shard and seed offset itself; the tests only read which files it hands
its sub-epoch dataset. The parity reference for ShardPlan."""

import contextlib
import functools
import importlib
import os
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence
from unittest import mock

#: Modules that ``returnn.torch.distributed`` imports at module level; mocked, so torch need not be installed.
_TORCH_MODULES = ("torch", "torch.nn", "torch.nn.parallel", "torch.distributed")


class StubDistributedContext:
    """Stands in for returnn.torch.distributed.DistributedContext: only the rank and size."""

    def __init__(self, rank: int, size: int):
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size


@functools.lru_cache(maxsize=None)
def _returnn_torch_distributed():
    """RETURNN's ``returnn.torch.distributed``, imported once with torch mocked; afterwards
    sys.modules and the ``returnn.torch`` package are as before (the module is used via :func:`as_rank`)."""
    import returnn.torch

    names = _TORCH_MODULES + ("returnn.torch.distributed",)
    saved_modules = {name: sys.modules.get(name) for name in names}
    saved_attr = returnn.torch.__dict__.get("distributed")
    try:
        sys.modules.update({name: mock.MagicMock(name=name) for name in _TORCH_MODULES})
        sys.modules.pop("returnn.torch.distributed", None)
        return importlib.import_module("returnn.torch.distributed")
    finally:
        for name, module in saved_modules.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if saved_attr is None:
            returnn.torch.__dict__.pop("distributed", None)
        else:
            returnn.torch.distributed = saved_attr


@contextlib.contextmanager
def as_rank(
    rank: int,
    num_shards: int,
    *,
    dataset_random_seed_offset: int = 0,
    calls: Optional[List[int]] = None,
    extra_config: Optional[Dict[str, Any]] = None,
) -> Iterator[None]:
    """Run the body as rank ``rank`` of ``num_shards`` in a ``torch_distributed`` training.

    A global config has ``torch_distributed`` (RETURNN's default ``dataset_distribution``,
    "random_seed_offset") and ``dataset_random_seed_offset``. ``returnn.torch.distributed`` is
    RETURNN's module (``get_dataset_distribution`` included), except that ``get_ctx`` returns a
    stub context with the rank and size. So RETURNN's ``Dataset._get_default_random_seed_offset``
    and ``_get_distributed_rank_and_size`` see what they would see on that rank. ``calls``, if
    given, gets the rank each time RETURNN asks for the context. ``extra_config`` adds global config
    entries (e.g. ``num_epochs``).
    """
    import returnn.torch
    from returnn.config import Config, global_config_ctx

    distributed = _returnn_torch_distributed()

    def get_ctx(config=None):
        if calls is not None:
            calls.append(rank)
        return StubDistributedContext(rank, num_shards)

    config = Config(
        {"torch_distributed": {}, "dataset_random_seed_offset": dataset_random_seed_offset, **(extra_config or {})}
    )
    saved = sys.modules.get("returnn.torch.distributed")
    sys.modules["returnn.torch.distributed"] = distributed  # not mock.patch.dict: that drops modules imported inside
    try:
        with (
            mock.patch.object(returnn.torch, "distributed", distributed, create=True),
            mock.patch.object(distributed, "get_ctx", get_ctx),
            global_config_ctx(config),
        ):
            yield
    finally:
        if saved is None:
            del sys.modules["returnn.torch.distributed"]
        else:
            sys.modules["returnn.torch.distributed"] = saved


def new_dataset(files: Sequence[Any], *, get_sub_epoch_dataset, **opts):
    """RETURNN's DistributeFilesDataset through ``init_dataset``, with in-process sub-epoch datasets."""
    from returnn.datasets.basic import init_dataset

    return init_dataset(
        {
            "class": "DistributeFilesDataset",
            "files": list(files),
            "get_sub_epoch_dataset": get_sub_epoch_dataset,
            "use_worker_proc": False,
            **opts,
        }
    )


def dfd_files_per_epoch(dataset, *, num_epochs: int) -> List[List[Any]]:
    """The files the dataset hands its sub-epoch dataset in epochs 1..num_epochs (the dict of
    each sub-epoch's worker), checked against the dataset's per-full-epoch cache of its bins."""
    got = []
    for epoch in range(1, num_epochs + 1):
        dataset.init_seq_order(epoch=epoch)
        files = dataset._workers[epoch].dataset_dict["files"]
        full, sub = divmod(epoch - 1, dataset.partition_epoch)
        assert dataset._files_order_cache[full][sub] == files
        got.append(list(files))
    dataset.finish_epoch(free_resources=True)
    return got


@functools.lru_cache(maxsize=None)
def _placeholder_class():
    from returnn.datasets.generating import DummyDataset

    class PlaceholderDataset(DummyDataset):
        """One dummy sequence; takes the sub-epoch's ``files`` without opening them."""

        def __init__(self, files: List[Any], **kwargs):
            super().__init__(input_dim=1, output_dim=1, num_seqs=1, seq_len=1, **kwargs)
            self.files = files

    return PlaceholderDataset


def placeholder_sub_epoch_dataset(files: List[Any]) -> Dict[str, Any]:
    """A sub-epoch dataset that is handed its ``files`` but does not read them."""
    return {"class": _placeholder_class(), "files": list(files), "seq_ordering": "default"}


def returnn_files(keys: Sequence[str], sizes: Sequence[int], settings, *, num_epochs: int) -> List[List[List[str]]]:
    """``[rank][epoch - 1]``: the files RETURNN's DistributeFilesDataset gives each rank in epochs
    1..num_epochs, for a :class:`PlanSettings` with RETURNN's distribution.

    The keys become sparse files of the given sizes (in a scratch directory), so RETURNN stats
    them itself. The settings map onto RETURNN's options as PlanSettings documents them:
    ``random_seed_offset`` is the config's ``dataset_random_seed_offset``, or, with
    ``same_seed_on_all_ranks``, the dataset's own ``random_seed_offset``.
    """
    assert settings.distribution == "returnn", settings
    opts = {
        "partition_epoch": settings.partition_epoch,
        "seq_ordering": settings.seq_ordering,
        "distrib_shard_files": settings.distrib_shard_files,
    }
    if settings.distrib_shard_files:
        opts["sharding_fix"] = True
    if settings.fixed_random_seed is not None:
        opts["fixed_random_seed"] = settings.fixed_random_seed
    if settings.same_seed_on_all_ranks:
        opts["random_seed_offset"] = settings.random_seed_offset
    paths = _sized_files(sizes)
    key_of = dict(zip(paths, keys))
    per_rank = []
    for rank in range(settings.num_shards):
        with as_rank(rank, settings.num_shards, dataset_random_seed_offset=settings.random_seed_offset):
            dataset = new_dataset(paths, get_sub_epoch_dataset=placeholder_sub_epoch_dataset, **opts)
            got = dfd_files_per_epoch(dataset, num_epochs=num_epochs)
        assert (dataset._shard_index, dataset._num_shards) == (
            (rank, settings.num_shards) if settings.distrib_shard_files else (0, 1)
        )
        per_rank.append([[key_of[p] for p in files] for files in got])
    return per_rank


@functools.lru_cache(maxsize=None)
def _scratch_directory() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="i6_shard_sized_files_")  # removed when the process exits


def _sized_files(sizes: Sequence[int]) -> List[str]:
    """Paths of sparse files ``0``, ``1``, ... of the given sizes, in one scratch directory that
    later calls reuse (truncating a file is much cheaper than creating one)."""
    directory = _scratch_directory().name
    paths = []
    for i, size in enumerate(sizes):
        path = os.path.join(directory, str(i))
        try:
            os.truncate(path, int(size))
        except FileNotFoundError:
            with open(path, "wb") as f:
                f.truncate(int(size))
        paths.append(path)
    return paths

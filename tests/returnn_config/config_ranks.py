"""Builds a RETURNN config's train dataset with the real RETURNN as rank r of W, in this process (as
``__main__.load_data`` does, the rank simulated like the verify runner does), reads full epochs, and
holds module-level functions for the sub-epoch datasets (so that RETURNN's subprocesses import them)."""

import contextlib
import functools
import os
from typing import Any, Dict, List, Sequence

from i6_shard.returnn_config.sub_epoch import bind_sub_epoch_dataset

HDF = {"class": "HDFDataset", "seq_ordering": "random"}


def hdf_sub_epoch(files: Sequence[str], **extra) -> Dict[str, Any]:
    """A plain HDF sub-epoch dataset (module level, so it pickles by reference)."""
    return {"class": "HDFDataset", "files": list(files), "seq_ordering": "random", **extra}


def hdf_sub_epoch_explicit_shards(files: Sequence[str]) -> Dict[str, Any]:
    """RETURNN's documented fix of double sharding without sharding_fix."""
    return hdf_sub_epoch(files, _num_shards=1, _shard_index=0)


def identity_map_seq(data, **_kwargs):
    """PostprocessingDataset's map_seq: the data as it is."""
    return data


def file_pairs(*, feat_dir: str, align_dir: str) -> List[tuple]:
    """A callable ``files``: (features, alignment) pairs of the shard directories, listed at run time."""
    names = sorted(n for n in os.listdir(feat_dir) if n.endswith(".hdf"))
    return [(os.path.join(feat_dir, n), os.path.join(align_dir, n)) for n in names]


def meta_template() -> Dict[str, Any]:
    """A MetaDataset over features and alignments, the sub-epoch dataset of multimodal file trees."""
    return {
        "class": "MetaDataset",
        "seq_order_control_dataset": "feat",
        "data_map": {"data": ("feat", "data"), "classes": ("align", "data")},
        "datasets": {"feat": {"class": "HDFDataset", "seq_ordering": "random"}, "align": {"class": "HDFDataset"}},
    }


META_FILES_KEY = {0: ("datasets", "feat", "files"), 1: ("datasets", "align", "files")}


def multi_proc_template() -> Dict[str, Any]:
    return {"class": "MultiProcDataset", "num_workers": 2, "buffer_size": 2, "dataset": dict(HDF)}


def postprocessing_template() -> Dict[str, Any]:
    return {"class": "PostprocessingDataset", "dataset": dict(HDF), "map_seq": identity_map_seq}


def bound(template: Dict[str, Any], **kwargs) -> functools.partial:
    return bind_sub_epoch_dataset(template, **kwargs)


@contextlib.contextmanager
def returnn_process(monkeypatch, *, behavior_version=None, behavior_version_state=None):
    """Undo what building datasets as several ranks changes in this process: the environment the
    rank is simulated with, RETURNN's cached torch DistributedContext and its behavior version
    (``behavior_version_state``: ``(version, min_version)`` as :func:`engine_behavior_version` gives it)."""
    import returnn.torch.distributed as distributed
    from returnn.util.basic import BehaviorVersion

    from i6_shard.returnn_ext import verify

    for name in (verify._TORCH_INIT_INFO_ENV, "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(name, "0")
    monkeypatch.setattr(distributed, "_is_set_up", False)
    monkeypatch.setattr(distributed, "_ctx", None)
    monkeypatch.setattr(BehaviorVersion, "_behavior_version", behavior_version)
    monkeypatch.setattr(BehaviorVersion, "_min_behavior_version", 0)
    if behavior_version_state is not None:
        BehaviorVersion._behavior_version, BehaviorVersion._min_behavior_version = behavior_version_state
    yield


def build_train(config: Dict[str, Any], *, rank: int, num_ranks: int, key: str = "train"):
    """The dataset at ``key`` as RETURNN builds it on rank ``rank`` of ``num_ranks``; returns
    ``(dataset, returnn_config)`` (use the config as global config while reading). Without
    ``torch_distributed`` in the config, every process is on its own (RETURNN's rank 0 of 1)."""
    from returnn.config import Config, global_config_ctx

    from i6_shard.returnn_ext import verify

    returnn_config = Config()
    for k, v in config.items():
        returnn_config.set(k, v)
    if config.get("torch_distributed") is not None:
        verify.simulate_rank(returnn_config, rank=rank, num_shards=num_ranks)
    with global_config_ctx(returnn_config):
        return verify._load_dataset(config[key], returnn_config, config_key=key), returnn_config


def read_tags(dataset, epoch: int) -> List[str]:
    from tests.hdf_data import iterate_tags

    return iterate_tags(dataset, epoch)


def dfd_files(dataset, key_path: Sequence[Any], epoch: int) -> List[str]:
    """The file tree keys the DistributeFilesDataset at ``key_path`` (below the config key) chose for
    ``epoch`` (call after the dataset read that epoch)."""
    from returnn.datasets.distrib_files import _get_key_for_file_tree

    from i6_shard.returnn_ext.locate import locate_dataset

    dfd = locate_dataset(dataset, key_path)
    p = dfd.partition_epoch
    return [_get_key_for_file_tree(t) for t in dfd._files_order_cache[(epoch - 1) // p][(epoch - 1) % p]]


def write_corpus(directory: str, *, num_files: int, prefix: str, seed: int = 0) -> Dict[str, List[str]]:
    """``num_files`` small HDF files with 1..4 sequences each, tagged ``<prefix>/<file>/<seq>``
    (unique across corpora); returns file -> its tags."""
    import numpy as np

    from tests.hdf_data import write_hdf_file

    os.makedirs(directory, exist_ok=True)
    rng = np.random.RandomState(seed)
    out = {}
    for i in range(num_files):
        tags = [f"{prefix}/{i}/{j}" for j in range(int(rng.randint(1, 5)))]
        features = [rng.rand(int(rng.randint(1, 4)), 2) for _ in tags]
        out[write_hdf_file(os.path.join(directory, f"part{i:03d}.hdf"), features, tags=tags)] = tags
    return out


def engine_behavior_version(config: Dict[str, Any]):
    """The behavior version state (``BehaviorVersion._get_state()``, None: a fresh one) in the process where
    RETURNN's torch engine reads the datasets of ``config``, as RETURNN's own
    ``create_data_loader_from_batches`` sets up the DataLoader worker (its ``SubProcCopyGlobalConfigPreInitFunc``
    decides what is handed over); without a DataLoader worker, the main process's."""
    from returnn.config import Config, global_config_ctx
    from returnn.torch.data.pipeline import create_data_loader_from_batches
    from returnn.util.basic import BehaviorVersion

    state = (config.get("behavior_version"), 0)
    if config.get("backend") != "torch" and config.get("torch_distributed") is None:
        return state
    returnn_config = Config()
    for k, v in config.items():
        returnn_config.set(k, v)
    saved = BehaviorVersion._get_state()
    try:
        BehaviorVersion._reset(state)
        with global_config_ctx(returnn_config):
            loader = create_data_loader_from_batches(
                _NoBatches(), returnn_config.typed_value("torch_dataloader_opts") or {}
            )
    finally:
        BehaviorVersion._reset(saved)
    if not loader.num_workers:
        return state
    context = loader.multiprocessing_context
    init = getattr(context, "process_pre_init_func", None)
    if init is not None:
        return init.behavior_version_state
    return state if getattr(context, "get_start_method", lambda: None)() == "fork" else None


class _NoBatches:
    """An iterable dataset without batches: only the DataLoader's setup is looked at."""

    def __iter__(self):
        return iter(())

"""Runs inside a RETURNN Python for VerifyShardingJob: builds the train dataset as rank r of W, the way
RETURNN's ``__main__.load_data`` does (``__debug_dummy_distributed_rank_and_size``, and RETURNN's own
torch DistributedContext for rank r), reads the given sub-epochs of its DistributeFilesDataset (found by
the reader, also inside wrappers) the way the engine reads them (under the torch backend: through the
engine's DataLoader and its worker processes) and records per sub-epoch the files RETURNN chose and the
tags it delivered, as JSON."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pickle
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from i6_shard.returnn_ext.in_process import read_sub_epochs_in_process
from i6_shard.returnn_ext.locate import locate_dataset
from i6_shard.returnn_ext.version import has_feature
from i6_shard.core.io import atomic_write
from i6_shard.core.pure import DEFAULT_DISTRIBUTION, DEFAULT_MAX_SUB_EPOCH_DEVIATION, check_enough_files
from i6_shard.returnn_config.reader import DistributeFilesDatasetInfo, find_distribute_files_datasets, read_files

__all__ = ["main"]

RECORD_FORMAT_VERSION = 1
#: Config keys that would set up a real distributed context; the rank is simulated instead
#: (torch_distributed stays: RETURNN reads its dataset_distribution, see simulate_rank).
_DISTRIBUTED_KEYS = ("use_horovod",)
#: How RETURNN's DistributedContext takes rank and size without a process group (what it does in
#: subprocesses of a distributed training); LOCAL_RANK/LOCAL_WORLD_SIZE are what torchrun sets.
_TORCH_INIT_INFO_ENV = "_RETURNN_TORCH_DISTRIBUTED_INIT_INFO"
_USAGE = """example, once per rank r of W (rank 0 also writes the per-file reference):
  python -m i6_shard.returnn_ext.verify --dataset-pickle dataset.pkl --rank 0 --num-shards 2 \\
      --epochs 1,2,3,4 --output rank-0.json --reference reference.json"""


def load_dataset_dict(
    *,
    dataset_pickle: Optional[str] = None,
    config_path: Optional[str] = None,
    config_key: str = "train",
    config_json: Optional[str] = None,
):
    """The train dataset dict and the RETURNN config to run it under.

    :param config_json: JSON of further config keys for a pickled dict (e.g. ``torch_distributed``,
        ``behavior_version``, ``dataset_random_seed_offset``)
    :return: ``(dataset_dict, config)``; the config is the loaded RETURNN config (its
        ``behavior_version`` applied, as RETURNN's main does) or one with ``config_json`` only
    """
    from returnn.config import Config
    from returnn.util.basic import BehaviorVersion

    config = Config()
    if config_path is not None:
        config.load_file(config_path)
        dataset_dict = config.typed_value(config_key)
        if dataset_dict is None:
            raise ValueError(f"RETURNN config {config_path!r} has no {config_key!r} dataset; name the key to verify")
    else:
        with open(dataset_pickle, "rb") as f:
            dataset_dict = pickle.load(f)
    for key, value in (json.loads(config_json) if config_json else {}).items():
        config.set(key, value)
    BehaviorVersion.set(config.int("behavior_version", None))
    # No real Horovod context can be set up here; the reader models horovod's settings.
    for key in _DISTRIBUTED_KEYS:
        config.typed_dict.pop(key, None)
        config.dict.pop(key, None)
    if not isinstance(dataset_dict, dict):
        raise TypeError(f"the dataset to verify must be a dict, got {type(dataset_dict).__name__}")
    return dataset_dict, config


def _config_mapping(config, *, config_key: str, dataset_dict: Dict[str, Any]) -> Dict[str, Any]:
    return {**config.typed_dict, config_key: dataset_dict}


def find_dfd(
    dataset_dict: Dict[str, Any],
    config,
    *,
    config_key: str = "train",
    num_shards: Optional[int] = None,
    key_path: Optional[Sequence[Any]] = None,
) -> DistributeFilesDatasetInfo:
    """The DistributeFilesDataset to verify, as the reader sees it in the config on this RETURNN (its features as
    detected here: its seeds, DataLoader workers, ``dataset_distribution``): the one at ``key_path`` (e.g.
    ``["train", "datasets", "asr"]``), or the only one of the dataset.

    :raises ValueError: if there is none, or several and no key_path, naming them
    """
    records = find_distribute_files_datasets(
        _config_mapping(config, config_key=config_key, dataset_dict=dataset_dict),
        num_ranks=num_shards,
        returnn_version=has_feature,
    )
    records = [r for r in records if r.key_path[0] == config_key]
    if key_path is not None:
        records = [r for r in records if list(r.key_path) == list(key_path)]
    if len(records) != 1:
        found = [list(r.key_path) for r in records]
        raise ValueError(
            f"{len(records)} DistributeFilesDatasets in {config_key!r}"
            f"{'' if key_path is None else f' at {list(key_path)}'} ({found}); name the one to verify "
            'with --key-path (a JSON list, e.g. ["train", "datasets", "asr"])'
        )
    return records[0]


def check_dataset_files(
    dataset_dict: Dict[str, Any],
    *,
    num_shards: int,
    config=None,
    config_key: str = "train",
    key_path: Optional[Sequence[Any]] = None,
) -> None:
    """Before RETURNN runs: enough files (an inline list, or a list file read as RETURNN reads it)
    for every rank and sub-epoch, where RETURNN would fail with a bare assert. The files are sharded
    over ``num_shards`` ranks as the reader finds (``distrib_shard_files``, or torch's
    ``dataset_distribution="shard"`` in ``config``).

    :raises ValueError: naming the numbers and what to change
    """
    if config is None:
        from returnn.config import Config

        config = Config()
        config.set("torch_distributed", {})  # a bare dict: the reader's default context
    info = find_dfd(dataset_dict, config, config_key=config_key, num_shards=num_shards, key_path=key_path)
    if info.files_kind not in ("inline", "list_file"):
        return  # a callable: RETURNN's own checks apply
    files = read_files(info.dataset["files"])
    partition_epoch = info.partition_epoch if isinstance(info.partition_epoch, int) else 1
    check_enough_files(
        len(files),
        num_shards=info.shards.num_shards(num_shards if info.distributed else 1),
        partition_epoch=partition_epoch,
    )


def simulate_rank(config, *, rank: int, num_shards: int) -> None:
    """Make RETURNN see this process as rank ``rank`` of ``num_shards``: its
    ``_get_distributed_rank_and_size`` reads ``__debug_dummy_distributed_rank_and_size``; under
    ``torch_distributed``, its own ``DistributedContext`` takes rank and size from the environment
    it uses for subprocesses (no process group), so that the per-rank seed offset is RETURNN's.
    Call before any dataset is built.

    :raises RuntimeError: if this RETURNN's DistributedContext cannot take the rank that way
    """
    config.set("__debug_dummy_distributed_rank_and_size", (rank, num_shards))
    if config.typed_value("torch_distributed") is None:
        return
    import returnn.torch.distributed as distributed

    source = inspect.getsource(distributed.DistributedContext.__init__)
    if _TORCH_INIT_INFO_ENV not in source:  # RETURNN before 1.20250717: the global context, set up as this rank
        distributed._is_set_up, distributed._ctx = True, _RankContext(rank, num_shards)
        return
    os.environ[_TORCH_INIT_INFO_ENV] = repr({"rank": rank, "size": num_shards, "hostnames": None})
    os.environ["LOCAL_RANK"], os.environ["LOCAL_WORLD_SIZE"] = str(rank), str(num_shards)
    distributed._is_set_up, distributed._ctx = False, None  # a context of another rank must not be reused


def _returnn_version() -> str:
    import returnn

    return str(returnn.__version__)


class _RankContext:
    """RETURNN's torch ``DistributedContext`` as datasets ask it (rank and size), for a RETURNN whose context cannot
    take them from the environment: its ``get_ctx`` returns this one, set up already."""

    def __init__(self, rank: int, size: int):
        self._rank, self._size = rank, size

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def local_rank(self) -> int:
        return self._rank

    def local_size(self) -> int:
        return self._size


def _load_dataset(dataset_dict: Dict[str, Any], config, *, config_key: str):
    """The dataset as RETURNN's ``__main__.load_data`` builds it for ``config_key``."""
    from returnn.__main__ import load_data
    from returnn.datasets.basic import Dataset

    config.typed_dict[config_key] = dataset_dict
    if not has_feature("get_default_kwargs_train"):  # RETURNN before 1.20261022: load_data(config, 0, key) only
        defaults = {}
    elif config_key == "train":
        defaults = Dataset.get_default_kwargs_train(config=config)
    else:
        defaults = Dataset.get_default_kwargs_eval(config=config)
    dataset, _ = load_data(config, 0, config_key, **defaults)
    return dataset


def _init_dfd(dataset_dict: Dict[str, Any]):
    from returnn.datasets.basic import init_dataset
    from returnn.datasets.distrib_files import DistributeFilesDataset

    dataset = init_dataset(dict(dataset_dict))
    if not isinstance(dataset, DistributeFilesDataset):
        raise TypeError(
            f"{dataset} is a {type(dataset).__name__}, not a DistributeFilesDataset; "
            "VerifyShardingJob checks the file sharding of DistributeFilesDataset"
        )
    if not hasattr(dataset, "_files_order_cache"):
        raise RuntimeError(
            "this RETURNN's DistributeFilesDataset has no _files_order_cache; i6_shard's verifier needs a RETURNN with "
            "distrib_shard_files (1.20240620.64807 or newer)"
        )
    return dataset


def _dfd_files(dataset) -> List[Any]:
    """The file list as the DistributeFilesDataset loaded it (before 1.20250423: its ``files``, a list)."""
    if has_feature("files_list_file"):
        dataset._lazy_init_file_list()
        return list(dataset._files)
    return list(dataset.files)


def _read_tags(dataset) -> List[str]:
    tags = []
    idx = 0
    while dataset.is_less_than_num_seqs(idx):
        dataset.load_seqs(idx, idx + 1)
        tags.append(str(dataset.get_tag(idx)))
        idx += 1
    return tags


def _uses_torch_engine(config) -> bool:
    return config.value("backend", None) == "torch" or config.typed_value("torch_distributed") is not None


class _EngineReader:
    """Reads a dataset the way RETURNN's torch ``Engine._create_data_loader`` does, up to the batching:
    ``ReturnnDatasetIterDataPipe`` (with the config's ``torch_dataloader_shard_workers``: from behavior_version 37
    each of several DataLoader workers shards the data again) with the engine's
    ``ReturnnDatasetResetMpSharedEpochCallback`` (the epoch through a manager value), one sequence per batch, and
    ``create_data_loader_from_batches`` with the config's ``torch_dataloader_opts``: by default one persistent
    DataLoader worker process, started with what RETURNN hands it (the global config; the behavior version only
    from 31), where the dataset runs ``init_seq_order`` and its sub-epoch datasets. Each reading process records
    what its copy of the DistributeFilesDataset chose and delivered (:mod:`i6_shard.returnn_ext.recording`). Length
    filters and chunking are left out: they drop or split sequences the dataset delivered."""

    def __init__(self, dataset, config, *, key_path: Sequence[Any]):
        import sys as _sys

        import torch.multiprocessing
        from returnn.torch.data import pipeline, returnn_dataset_wrapper

        self._manager = torch.multiprocessing.Manager()
        self._epoch = self._manager.Value("i", 0)
        self._records = self._manager.list()
        from i6_shard.returnn_ext.recording import RecordingReset, RecordingTail

        reset = returnn_dataset_wrapper.ReturnnDatasetResetMpSharedEpochCallback(
            dataset=dataset, epoch_mp_shared=self._epoch
        )
        recording = RecordingReset(reset, dataset, key_path=key_path)
        shard = {}  # the DataLoader workers shard again only where RETURNN has the option
        if has_feature("dataloader_shard_workers"):
            shard["shard_workers"] = config.typed_value("torch_dataloader_shard_workers", None)
        wrapped = returnn_dataset_wrapper.ReturnnDatasetIterDataPipe(dataset, reset_callback=recording, **shard)
        wrapped = RecordingTail(wrapped, recording=recording, top=dataset, out=self._records)
        batches = pipeline.BatchingIterDataPipe(wrapped, batch_size=_sys.maxsize, max_seqs=1)
        self.loader = pipeline.create_data_loader_from_batches(
            batches, config.typed_value("torch_dataloader_opts") or {}
        )

    def read(self, epoch: int) -> Dict[str, Any]:
        """Sub-epoch ``epoch`` read through the DataLoader: the tags in the order the loader gave them, and per
        reading process (``worker``) what its DistributeFilesDataset initialized and delivered per epoch of it."""
        self._epoch.value = epoch
        del self._records[:]
        tags = []
        for batch in self.loader:
            tags.extend(str(t) for t in batch["seq_tag"].reshape(-1))
        records = sorted((dict(r) for r in self._records if r["epoch"] == epoch), key=lambda r: r["worker"])
        return {"seq_tags": tags, "instances": records}

    def close(self) -> None:
        try:
            from returnn.torch.data.pipeline import shutdown_data_loader
        except ImportError:  # RETURNN before it had one: end the persistent workers as torch does
            iterator = getattr(self.loader, "_iterator", None)
            if iterator is not None and hasattr(iterator, "_shutdown_workers"):
                iterator._shutdown_workers()
        else:
            shutdown_data_loader(self.loader)
        self._manager.shutdown()


def record_rank(
    dataset_dict: Dict[str, Any],
    config,
    *,
    rank: int,
    num_shards: int,
    epochs: Sequence[int],
    config_key: str = "train",
    key_path: Optional[Sequence[Any]] = None,
) -> Dict[str, Any]:
    """Read ``epochs`` as rank ``rank`` of ``num_shards``: the dataset is built as RETURNN builds its
    train dataset (wrappers included), and of its DistributeFilesDataset (see :func:`find_dfd`) per
    sub-epoch the tree keys of the files RETURNN chose (its ``_files_order_cache``) and the tags it
    delivered are recorded."""
    from returnn.config import global_config_ctx
    from returnn.datasets.distrib_files import DistributeFilesDataset

    info = find_dfd(dataset_dict, config, config_key=config_key, num_shards=num_shards, key_path=key_path)
    simulate_rank(config, rank=rank, num_shards=num_shards)
    with global_config_ctx(config):
        top = _load_dataset(dataset_dict, config, config_key=config_key)
        dataset = locate_dataset(top, info.key_path[1:])
        if not isinstance(dataset, DistributeFilesDataset):
            raise TypeError(
                f"{dataset} at {list(info.key_path)} is a {type(dataset).__name__}, not a DistributeFilesDataset"
            )
        settings = _rank_settings(dataset, key_path=info.key_path)
        # Under the torch backend the engine reads the data in its DataLoader worker(s): so do we. The files
        # come from this process's copy, which draws the same ones (the worker's copy has them in its process).
        engine = _EngineReader(top, config, key_path=info.key_path[1:]) if _uses_torch_engine(config) else None
        sub_epochs = []
        try:
            for epoch in epochs:
                start = time.monotonic()
                entry = _dataset_entry(epoch, dataset) if engine is None else _engine_entry(epoch, engine.read(epoch))
                sub_epochs.append(entry)
                print(
                    f"i6_shard verify: rank {rank}/{num_shards} sub-epoch {epoch}: {len(entry['files'])} files, "
                    f"{len(entry['seq_tags'])} seqs ({time.monotonic() - start:.1f}s, RETURNN "
                    f"{settings['returnn_version']})",
                    flush=True,
                )
        finally:
            if engine is not None:
                engine.close()
        top.finish_epoch(free_resources=True)
    return {
        "format_version": RECORD_FORMAT_VERSION,
        "rank": rank,
        "num_shards": num_shards,
        "read_by": "torch DataLoader" if engine is not None else "the dataset",
        "settings": settings,
        "sub_epochs": sub_epochs,
    }


def _rank_settings(dataset, *, key_path: Sequence[Any]) -> Dict[str, Any]:
    """What the rank's DistributeFilesDataset was built with, and the RETURNN release (as imported) that built it."""
    settings = {
        "dataset_class": type(dataset).__name__,
        "key_path": [str(k) for k in key_path],
        "num_shards": int(dataset._num_shards),
        "shard_index": int(dataset._shard_index),
        "partition_epoch": int(dataset.partition_epoch),
        "seq_ordering": dataset.seq_ordering,
        "random_seed_offset": int(dataset.random_seed_offset),
        "fixed_random_seed": dataset.fixed_random_seed,
        # (RETURNN before 1.20240628 keeps only _num_shards)
        "distrib_shard_files": bool(getattr(dataset, "distrib_shard_files", dataset._num_shards > 1)),
        "returnn_version": _returnn_version(),
        "sharding_fix": getattr(dataset, "sharding_fix", None),
        "distribution": getattr(dataset, "distribution", DEFAULT_DISTRIBUTION),
    }
    # What the dataset's bins come from besides its settings: the reference plan is built from the same.
    for name, attr in (("file_sizes", "file_sizes_path"), ("plan", "plan_path")):
        if getattr(dataset, attr, None) is not None:
            settings[name] = os.path.abspath(os.fspath(getattr(dataset, attr)))
    deviation = getattr(dataset, "max_sub_epoch_deviation", DEFAULT_MAX_SUB_EPOCH_DEVIATION)
    if deviation != DEFAULT_MAX_SUB_EPOCH_DEVIATION:  # as plan files: only when not the default
        settings["max_sub_epoch_deviation"] = float(deviation)
    return settings


def _dataset_entry(epoch: int, dataset) -> Dict[str, Any]:
    """Sub-epoch ``epoch`` read from the DistributeFilesDataset itself, in this process (no torch engine): the files
    it chose and the tags it delivered; its sub-epoch datasets read in this process where RETURNN's process for each
    would see the same (:func:`read_sub_epochs_in_process`)."""
    from returnn.datasets.distrib_files import _get_key_for_file_tree

    in_process = read_sub_epochs_in_process(dataset)
    dataset.init_seq_order(epoch=epoch)
    p = dataset.partition_epoch
    files = [_get_key_for_file_tree(t) for t in dataset._files_order_cache[(epoch - 1) // p][(epoch - 1) % p]]
    entry = {"epoch": int(epoch), "files": files, "seq_tags": _read_tags(dataset), "sub_epochs_in_process": in_process}
    dataset.finish_epoch()
    return entry


def _engine_entry(epoch: int, read: Dict[str, Any]) -> Dict[str, Any]:
    """A sub-epoch read through the engine: ``files`` and ``seq_tags`` of the rank (all of its reading processes;
    the tags in the loader's order), and ``instances``: per reading process and epoch of its DistributeFilesDataset
    (more than one per sub-epoch inside a MultiEpochDataset) the shard it was, the files it chose and the tags it
    delivered.

    :raises RuntimeError: if no reading process recorded its dataset (the DistributeFilesDataset is not reached)
    """
    instances = [
        {"worker": r["worker"], "dataset_epoch": int(k), **v}
        for r in read["instances"]
        for k, v in sorted(r["inits"].items())
    ]
    if not instances:
        raise RuntimeError(
            f"sub-epoch {epoch}: no DataLoader worker recorded the DistributeFilesDataset it read; "
            "it is not reached through the dataset's wrappers in the reading process"
        )
    files = [k for inst in instances for k in inst["files"]]
    return {"epoch": int(epoch), "files": files, "seq_tags": read["seq_tags"], "instances": instances}


def record_reference(
    dataset_dict: Dict[str, Any], config, *, config_key: str = "train", key_path: Optional[Sequence[Any]] = None
) -> Dict[str, Any]:
    """The file list as RETURNN loads it and, per file, the tags of its sequences: each file
    alone through ``get_sub_epoch_dataset``, unsharded, in the order it gives them."""
    from returnn.config import Config, global_config_ctx
    from returnn.datasets.basic import init_dataset

    info = find_dfd(dataset_dict, config, config_key=config_key, key_path=key_path)
    plain = Config()  # one process, no distributed context: the reference is the same on every rank
    plain.set("__debug_dummy_distributed_rank_and_size", (0, 1))
    with global_config_ctx(plain):
        dataset = _init_dfd(info.dataset)
        files = _dfd_files(dataset)
        file_tags = []
        for tree in files:
            sub = _in_process(dict(dataset.get_sub_epoch_dataset([tree])))
            if has_feature("dataset_shards"):  # else no Dataset shards again
                sub.setdefault("_num_shards", 1)
                sub.setdefault("_shard_index", 0)
            sub_dataset = init_dataset(sub)
            sub_dataset.init_seq_order(epoch=1)
            file_tags.append(_read_tags(sub_dataset))
    return {"format_version": RECORD_FORMAT_VERSION, "files": files, "file_tags": file_tags}


def _in_process(sub: Dict[str, Any]) -> Dict[str, Any]:
    """The dataset a sub-epoch dataset's sequences come from, read in this process: a ``MultiProcDataset`` gives the
    sequences of its dataset (``self.dataset``, its other options as defaults: ``MultiProcDataset.__init__``), split
    over its workers, so the reference reads that dataset itself instead of starting worker processes for every file.
    Its workers' reads are what the verification checks against this reference."""
    from returnn.datasets.multi_proc import MultiProcDataset

    while sub.get("class") == "MultiProcDataset":
        wrapper = MultiProcDataset(**{k: v for k, v in sub.items() if k != "class"})  # no worker before initialize()
        sub = dict(wrapper.dataset)
    return sub


def _write_json(obj: Any, path: str) -> None:
    with atomic_write(path, "wt", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True)
        f.write("\n")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m i6_shard.returnn_ext.verify",
        description=__doc__,
        epilog=_USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset-pickle", help="pickled DistributeFilesDataset dict")
    src.add_argument("--config", help="RETURNN config file holding the dataset")
    parser.add_argument("--config-key", default="train", help="dataset key in the config (default: train)")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--num-shards", type=int, required=True)
    parser.add_argument("--epochs", required=True, help="comma-separated sub-epochs (1-based)")
    parser.add_argument("--output", required=True, help="JSON record of this rank")
    parser.add_argument("--reference", help="also write the per-file sequence tags (JSON) here")
    parser.add_argument(
        "--key-path",
        help="JSON list: where the DistributeFilesDataset is, e.g. "
        '\'["train", "datasets", "asr"]\' (default: the only one)',
    )
    parser.add_argument(
        "--config-json",
        help="JSON of further RETURNN config keys for --dataset-pickle, e.g. "
        '\'{"torch_distributed": {"dataset_distribution": "shard"}}\'',
    )
    args = parser.parse_args(argv)
    epochs = [int(e) for e in args.epochs.split(",") if e]
    if not 0 <= args.rank < args.num_shards:
        parser.error(f"--rank {args.rank} is outside --num-shards {args.num_shards}")
    key_path = json.loads(args.key_path) if args.key_path else None
    dataset_dict, config = load_dataset_dict(
        dataset_pickle=args.dataset_pickle,
        config_path=args.config,
        config_key=args.config_key,
        config_json=args.config_json,
    )
    where = {"config_key": args.config_key, "key_path": key_path}
    config.set("__debug_dummy_distributed_rank_and_size", (args.rank, args.num_shards))
    check_dataset_files(dataset_dict, num_shards=args.num_shards, config=config, **where)
    if args.reference:
        _write_json(record_reference(dataset_dict, config, **where), args.reference)
    _write_json(
        record_rank(dataset_dict, config, rank=args.rank, num_shards=args.num_shards, epochs=epochs, **where),
        args.output,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

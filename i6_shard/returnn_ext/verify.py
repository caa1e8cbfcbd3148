"""Runs inside a RETURNN Python for VerifyShardingJob: builds a DistributeFilesDataset as rank r
(``__debug_dummy_distributed_rank_and_size``), reads the given sub-epochs and records per
sub-epoch the files RETURNN chose and the sequence tags it delivered, as JSON."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from i6_shard.core.io.atomic import atomic_write
from i6_shard.core.pure.distribute import check_enough_files, dfd_num_shards
from i6_shard.core.io.file_list import read_file_list

__all__ = ["RECORD_FORMAT_VERSION", "load_dataset_dict", "check_dataset_files", "record_rank", "record_reference",
           "main"]

RECORD_FORMAT_VERSION = 1
_DISTRIBUTED_KEYS = ("torch_distributed", "use_horovod")
_USAGE = """example, once per rank r of W (rank 0 also writes the per-file reference):
  python -m i6_shard.returnn_ext.verify --dataset-pickle dataset.pkl --rank 0 --num-shards 2 \\
      --epochs 1,2,3,4 --output rank-0.json --reference reference.json"""


def load_dataset_dict(*, dataset_pickle: Optional[str] = None, config_path: Optional[str] = None,
                      config_key: str = "train"):
    """The DistributeFilesDataset dict and the RETURNN config to run it under.

    :return: ``(dataset_dict, config)``; the config is the loaded RETURNN config (its
        ``behavior_version`` applied, as RETURNN's main does) or an empty one for a pickled dict
    """
    from returnn.config import Config
    from returnn.util.basic import BehaviorVersion

    config = Config()
    if config_path is not None:
        config.load_file(config_path)
        BehaviorVersion.set(config.int("behavior_version", None))
        # The rank and size come from __debug_dummy_distributed_rank_and_size; no real
        # torch.distributed or Horovod context may be set up here.
        for key in _DISTRIBUTED_KEYS:
            config.typed_dict.pop(key, None)
            config.dict.pop(key, None)
        dataset_dict = config.typed_value(config_key)
        if dataset_dict is None:
            raise ValueError(f"RETURNN config {config_path!r} has no {config_key!r} dataset; name the key to verify")
    else:
        with open(dataset_pickle, "rb") as f:
            dataset_dict = pickle.load(f)
    if not isinstance(dataset_dict, dict):
        raise TypeError(f"the dataset to verify must be a dict, got {type(dataset_dict).__name__}")
    return dataset_dict, config


def check_dataset_files(dataset_dict: Dict[str, Any], *, num_shards: int) -> None:
    """Before RETURNN runs: enough files (an inline list, or a list file read as RETURNN reads it)
    for every rank and sub-epoch, where RETURNN would fail with a bare assert. The files are
    sharded over ``num_shards`` ranks only with ``distrib_shard_files``.

    :raises ValueError: naming the numbers and what to change
    """
    files = dataset_dict.get("files")
    if isinstance(files, (str, os.PathLike)):
        files = read_file_list(files)
    if not isinstance(files, list):
        return  # a callable: RETURNN's own checks apply
    shards = dfd_num_shards(distrib_shard_files=bool(dataset_dict.get("distrib_shard_files")), num_ranks=num_shards,
                            explicit_num_shards=dataset_dict.get("_num_shards"))
    check_enough_files(len(files), num_shards=shards, partition_epoch=dataset_dict.get("partition_epoch") or 1)


def _init_dfd(dataset_dict: Dict[str, Any]):
    from returnn.datasets.basic import init_dataset
    from returnn.datasets.distrib_files import DistributeFilesDataset

    dataset = init_dataset(dict(dataset_dict))
    if not isinstance(dataset, DistributeFilesDataset):
        raise TypeError(f"{dataset} is a {type(dataset).__name__}, not a DistributeFilesDataset; "
                        "VerifyShardingJob checks the file sharding of DistributeFilesDataset")
    for attr in ("_lazy_init_file_list", "_files_order_cache"):
        if not hasattr(dataset, attr):
            raise RuntimeError(f"this RETURNN's DistributeFilesDataset has no {attr}; "
                               "i6_shard's verifier needs a RETURNN with distrib_shard_files (2024 or newer)")
    return dataset


def _read_tags(dataset) -> List[str]:
    tags = []
    idx = 0
    while dataset.is_less_than_num_seqs(idx):
        dataset.load_seqs(idx, idx + 1)
        tags.append(str(dataset.get_tag(idx)))
        idx += 1
    return tags


def record_rank(dataset_dict: Dict[str, Any], config, *, rank: int, num_shards: int,
                epochs: Sequence[int]) -> Dict[str, Any]:
    """Read ``epochs`` as rank ``rank`` of ``num_shards``: per sub-epoch the tree keys of the
    files RETURNN chose (its ``_files_order_cache``) and the sequence tags it delivered."""
    from returnn.config import global_config_ctx
    from returnn.datasets.distrib_files import _get_key_for_file_tree

    config.set("__debug_dummy_distributed_rank_and_size", (rank, num_shards))
    with global_config_ctx(config):
        dataset = _init_dfd(dataset_dict)
        settings = {
            "dataset_class": type(dataset).__name__,
            "num_shards": int(dataset._num_shards),
            "shard_index": int(dataset._shard_index),
            "partition_epoch": int(dataset.partition_epoch),
            "seq_ordering": dataset.seq_ordering,
            "random_seed_offset": int(dataset.random_seed_offset),
            "fixed_random_seed": dataset.fixed_random_seed,
            "distrib_shard_files": bool(getattr(dataset, "distrib_shard_files", False)),
            "sharding_fix": getattr(dataset, "sharding_fix", None),
            "distribution": getattr(dataset, "distribution", "returnn"),
        }
        sub_epochs = []
        for epoch in epochs:
            start = time.monotonic()
            dataset.init_seq_order(epoch=epoch)
            p = dataset.partition_epoch
            files = dataset._files_order_cache[(epoch - 1) // p][(epoch - 1) % p]
            tags = _read_tags(dataset)
            sub_epochs.append({"epoch": int(epoch), "files": [_get_key_for_file_tree(t) for t in files],
                               "seq_tags": tags})
            dataset.finish_epoch()
            print(f"i6_shard verify: rank {rank}/{num_shards} sub-epoch {epoch}: {len(files)} files, "
                  f"{len(tags)} seqs ({time.monotonic() - start:.1f}s)", flush=True)
    return {"format_version": RECORD_FORMAT_VERSION, "rank": rank, "num_shards": num_shards,
            "settings": settings, "sub_epochs": sub_epochs}


def record_reference(dataset_dict: Dict[str, Any], config) -> Dict[str, Any]:
    """The file list as RETURNN loads it and, per file, the tags of its sequences: each file
    alone through ``get_sub_epoch_dataset``, unsharded, in the order it gives them."""
    from returnn.config import global_config_ctx
    from returnn.datasets.basic import init_dataset

    config.set("__debug_dummy_distributed_rank_and_size", (0, 1))
    with global_config_ctx(config):
        dataset = _init_dfd(dataset_dict)
        dataset._lazy_init_file_list()
        files = list(dataset._files)
        file_tags = []
        for tree in files:
            sub = dict(dataset.get_sub_epoch_dataset([tree]))
            sub.setdefault("_num_shards", 1)
            sub.setdefault("_shard_index", 0)
            sub_dataset = init_dataset(sub)
            sub_dataset.init_seq_order(epoch=1)
            file_tags.append(_read_tags(sub_dataset))
    return {"format_version": RECORD_FORMAT_VERSION, "files": files, "file_tags": file_tags}


def _write_json(obj: Any, path: str) -> None:
    with atomic_write(path, "wt", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True)
        f.write("\n")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i6_shard.returnn_ext.verify", description=__doc__,
                                     epilog=_USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset-pickle", help="pickled DistributeFilesDataset dict")
    src.add_argument("--config", help="RETURNN config file holding the dataset")
    parser.add_argument("--config-key", default="train", help="dataset key in the config (default: train)")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--num-shards", type=int, required=True)
    parser.add_argument("--epochs", required=True, help="comma-separated sub-epochs (1-based)")
    parser.add_argument("--output", required=True, help="JSON record of this rank")
    parser.add_argument("--reference", help="also write the per-file sequence tags (JSON) here")
    args = parser.parse_args(argv)
    epochs = [int(e) for e in args.epochs.split(",") if e]
    if not 0 <= args.rank < args.num_shards:
        parser.error(f"--rank {args.rank} is outside --num-shards {args.num_shards}")
    dataset_dict, config = load_dataset_dict(dataset_pickle=args.dataset_pickle, config_path=args.config,
                                             config_key=args.config_key)
    check_dataset_files(dataset_dict, num_shards=args.num_shards)
    if args.reference:
        _write_json(record_reference(dataset_dict, config), args.reference)
    _write_json(record_rank(dataset_dict, config, rank=args.rank, num_shards=args.num_shards, epochs=epochs),
                args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

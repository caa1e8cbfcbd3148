"""Runs inside one RETURNN release (its directory first on sys.path), all checks in one process: the release's
features against the table, the builder's dicts constructed by the release's own DistributeFilesDataset, three
ranks reading a plan through i6_shard's class, and parity of the cut and the sequence order on fuzzed inputs.
Prints one JSON object; ``test_releases.py`` judges it.

    python -m tests.returnn_versions.release_checks VERSION WORKDIR
"""

import contextlib
import functools
import io
import json
import importlib.util
import os
import pickle
import sys
from typing import Any, Dict, List

import numpy as np

NUM_RANKS, PARTITION_EPOCH = 3, 2
SUB_EPOCH = {"class": "HDFDataset", "seq_ordering": "default"}


def _cli(*argv: str) -> str:
    from i6_shard.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    assert code in (0, None), (argv, code, out.getvalue())
    return out.getvalue()


def _features(version: str) -> Dict[str, Any]:
    """Each feature as detected in this release, and where the table disagrees."""
    from i6_shard.core.pure import RETURNN_FEATURES, release_has
    from i6_shard.returnn_ext.version import has_feature

    detected = {f.key: has_feature(f.key) for f in RETURNN_FEATURES}
    wrong = {k: v for k, v in detected.items() if release_has(version, k) not in (None, v)}
    return {"detected": detected, "table_disagrees": wrong}


def _builder_dicts(version: str, files: List[str], plan: str, sizes: str) -> Dict[str, str]:
    """Every builder variant, constructed by this release (init_dataset, no epoch read): variant -> "ok", the
    builder's refusal ("refused: ...") or the release's error ("FAILED: ..."). The ``*_version_unknown`` variants are
    built without the version; for i6_shard's class, the ``_num_shards`` its sub-epoch dict gets is appended."""
    from returnn.datasets.basic import init_dataset

    from i6_shard.returnn_config import sharded_files_dataset
    from i6_shard.returnn_config.pycode import resolve_refs
    from i6_shard.returnn_ext.version import has_feature

    from ..returnn_ranks import as_rank

    variants = {
        "plain": {},
        "plain_unsharded": {"distrib_shard_files": False},
        "plain_no_worker_proc": {"use_worker_proc": False},
        "plain_preload_2": {"preload_next_n_sub_epochs": 2, "buffer_size": 2},
        "balanced": {"distribution": "balanced"},
        "plan": {"plan": plan},
        "list_file": {"files": files[0] + ".list.txt"},
        "callable": {"files": functools.partial(json.loads, json.dumps(files))},
        "file_sizes": {"file_sizes": sizes},
        "cached_file": {"cached_file": True},
        "plan_version_unknown": {"plan": plan, "returnn_version": None},
        "plain_version_unknown": {"returnn_version": None},
    }
    with open(files[0] + ".list.txt", "w") as f:
        f.write("\n".join(files) + "\n")
    out = {}
    for name, opts in variants.items():
        opts = {"files": files, "partition_epoch": PARTITION_EPOCH, "num_shards": NUM_RANKS, **opts}
        try:
            d = sharded_files_dataset(sub_epoch_dataset=SUB_EPOCH, **{"returnn_version": version, **opts})
        except ValueError as exc:
            out[name] = f"refused: {exc}"
            continue
        try:
            with as_rank(1, NUM_RANKS):
                dataset = init_dataset(resolve_refs(d))
                out[name] = "ok"
                if name == "plan_version_unknown" and has_feature("dataset_shards"):  # the class's sharding_fix
                    out[name] += f" {dataset._get_sub_dataset_dict([files[0]]).get('_num_shards')}"
        except Exception as exc:  # noqa: BLE001 (the release's own error, reported)
            out[name] = f"FAILED: {type(exc).__name__}: {exc}"
    return out


def _ranks_read(version: str, files: List[str], plan_dir: str) -> Dict[str, Any]:
    """Three ranks read one full epoch through i6_shard's class with plan=, the dict from the builder told the
    release; per rank and sub-epoch: the files the sub-epoch dataset got, the tags it read, the CLI's files."""
    from returnn.datasets.basic import init_dataset

    from i6_shard.returnn_config import sharded_files_dataset
    from i6_shard.returnn_config.pycode import resolve_refs

    from ..hdf_data import iterate_tags
    from ..returnn_ranks import as_rank

    d = sharded_files_dataset(
        files,
        sub_epoch_dataset=SUB_EPOCH,
        partition_epoch=PARTITION_EPOCH,
        num_shards=NUM_RANKS,
        plan=os.path.join(plan_dir, "plan.npz"),
        returnn_version=version,
    )
    reads, unpickled = [], []
    for rank in range(NUM_RANKS):
        with as_rank(rank, NUM_RANKS):
            dataset = init_dataset(resolve_refs(d))
            copy = pickle.loads(pickle.dumps(dataset))  # as a DataLoader worker gets it
            unpickled.append([copy._shard_index, copy._num_shards])
            for epoch in range(1, PARTITION_EPOCH + 1):
                tags = iterate_tags(dataset, epoch)
                got = dataset._files_order_cache[0][epoch - 1]
                given = dataset._workers[epoch].dataset_dict["files"]
                planned = json.loads(_cli("files", plan_dir, "--rank", str(rank), "--epoch", str(epoch), "--json"))
                reads.append(
                    {
                        "rank": rank,
                        "epoch": epoch,
                        "files": list(got),
                        "given": [os.fspath(getattr(f, "filename", f)) for f in given],
                        "planned": planned["keys"],
                        "tags": tags,
                        "sub_epoch_shards": dataset._workers[epoch].dataset_dict.get("_num_shards"),
                    }
                )
            dataset.finish_epoch(free_resources=True)
    return {"dict": sorted(k for k in d if k != "files"), "reads": reads, "unpickled": unpickled}


def _cut_parity(version: str, *, num_cases: int = 300) -> Dict[str, Any]:
    """This release's _distribute_evenly_by_size against i6_shard's cut for the release: the mismatches."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from i6_shard.core.pure import cut_full_epoch

    rng = np.random.RandomState(43)
    mismatches: List[Any] = []
    newest_differs = 0  # cases where this release cuts otherwise than the newest: the variant is tested
    for case in range(num_cases):
        n = int(rng.randint(1, 25))
        num_bins = int(rng.randint(1, n + 1))
        kind = case % 3
        if kind == 0:
            sizes = rng.randint(1, 100, size=n)
        elif kind == 1:
            sizes = rng.randint(0, 4, size=n) * rng.randint(1, 1000, size=n)
        else:
            sizes = (rng.pareto(1.2, size=n) * 50).astype(np.int64) + 1
        keys = [f"f{i}" for i in range(n)]
        try:
            bins = DistributeFilesDataset._distribute_evenly_by_size(
                num_bins=num_bins, file_sizes=dict(zip(keys, sizes.tolist())), files_order=keys
            )
            theirs: Any = np.cumsum([0] + [len(b) for b in bins]).tolist()
        except AssertionError:
            theirs = "AssertionError"
        try:
            _, bounds = cut_full_epoch(
                sizes, num_shards=1, partition_epoch=num_bins, distribution="returnn", returnn_version=version
            )
            mine: Any = bounds.tolist()
        except ValueError:
            mine = "AssertionError"
        if theirs != mine:
            mismatches.append({"sizes": sizes.tolist(), "num_bins": num_bins, "returnn": theirs, "i6_shard": mine})
        newest = cut_full_epoch(sizes, num_shards=1, partition_epoch=num_bins, distribution="returnn")[1].tolist()
        newest_differs += theirs != newest
    return {"mismatches": mismatches, "newest_differs": newest_differs}


def _seq_order_parity(*, num_cases: int = 200) -> List[Any]:
    """This release's Dataset.get_seq_order_for_epoch against i6_shard's mirror: the mismatches."""
    from returnn.datasets.basic import Dataset

    from i6_shard.core.pure.engine_sim import seq_order_for_epoch

    orderings = ["default", "reverse", "sorted", "sorted_reverse", "random", "random:2", "laplace:3", "laplace:.4"]
    orderings += ["sort_bin_shuffle:3", "sort_bin_shuffle:.4:2", "sort_bin_shuffle_x2:2"]
    rng = np.random.RandomState(7)
    mismatches = []
    for case in range(num_cases):
        lens = rng.randint(1, 40, size=int(rng.randint(1, 50)))
        ordering = orderings[case % len(orderings)]
        epoch, offset = int(rng.randint(1, 12)), int(rng.choice([0, 5, 16127]))
        fixed = None if case % 4 else int(rng.randint(0, 99))
        dataset = Dataset(seq_ordering=ordering, random_seed_offset=offset, fixed_random_seed=fixed)
        theirs = [int(i) for i in dataset.get_seq_order_for_epoch(epoch, len(lens), get_seq_len=lambda i: int(lens[i]))]
        mine = seq_order_for_epoch(
            lens, seq_ordering=ordering, epoch=epoch, random_seed_offset=offset, fixed_random_seed=fixed
        ).tolist()
        if theirs != mine:
            mismatches.append({"lens": lens.tolist(), "ordering": ordering, "epoch": epoch, "returnn": theirs})
    return mismatches


def _seed_parity(version: str, files: List[str]) -> List[Any]:
    """The ``random_seed_offset`` this release's own DistributeFilesDataset has on each of 3 ranks (under
    ``torch_distributed`` and the config's ``dataset_random_seed_offset=5``) against the reader's for this release:
    the mismatches. Sharded by ``distrib_shard_files``, unsharded, and (where ``Dataset`` takes them) sharded by the
    dict's own ``_num_shards``/``_shard_index``."""
    from returnn.datasets.distrib_files import DistributeFilesDataset

    from i6_shard.returnn_config.reader import find_distribute_files_datasets
    from i6_shard.returnn_ext.version import has_feature

    from ..returnn_ranks import as_rank, placeholder_sub_epoch_dataset

    cases = {"distrib_shard_files": {"distrib_shard_files": True}, "unsharded": {}}
    if has_feature("dataset_shards"):
        cases["own_num_shards"] = {"_num_shards": NUM_RANKS}
    mismatches = []
    for name, opts in cases.items():
        for rank in range(NUM_RANKS):
            dataset = {
                "class": "DistributeFilesDataset",
                "files": files,
                "get_sub_epoch_dataset": placeholder_sub_epoch_dataset,
                "partition_epoch": PARTITION_EPOCH,
                "seq_ordering": "random",
                **opts,
                **({"_shard_index": rank} if "_num_shards" in opts else {}),
            }
            config = {"torch_distributed": {}, "dataset_random_seed_offset": 5, "train": dataset}
            (info,) = find_distribute_files_datasets(config, num_ranks=NUM_RANKS, returnn_version=version)
            with as_rank(rank, NUM_RANKS, dataset_random_seed_offset=5):  # constructed only: no sub-epoch is read
                theirs = int(
                    DistributeFilesDataset(**{k: v for k, v in dataset.items() if k != "class"}).random_seed_offset
                )
            if theirs != info.seed.offset_for(rank):
                mismatches.append({"case": name, "rank": rank, "returnn": theirs, "reader": info.seed.offset_for(rank)})
    return mismatches


def _loader_parity(version: str) -> Dict[str, Any]:
    """The torch engine's DataLoader as this release sets it up, against the reader's for this release: whether it
    reads in a worker process by default (``create_data_loader_from_batches`` with no ``torch_dataloader_opts``),
    the behavior version where it reads (a worker gets it from ``SubProcCopyGlobalConfigPreInitFunc`` with
    ``propagate_behavior_version_to_subprocs``, or not), and whether each of 2 workers reads its own shard
    (``ReturnnDatasetIterDataPipe.reset`` in worker 1 of 2, with ``torch_dataloader_shard_workers=True`` passed on
    as the engine passes it where the pipe takes it). Each as ``[returnn's, the reader's]``."""
    import inspect
    from types import SimpleNamespace
    from unittest import mock

    import torch.utils.data
    from returnn.config import Config, SubProcCopyGlobalConfigPreInitFunc, global_config_ctx
    from returnn.torch.data import pipeline, returnn_dataset_wrapper

    from i6_shard.returnn_config.reader import find_distribute_files_datasets
    from i6_shard.returnn_config.reader.rules import duplicate_workers_problem

    class _Shardable:
        _num_shards, _shard_index = 1, 0

        def supports_sharding(self) -> bool:
            return True

        def set_sharding(self, *, num_shards: int, shard_index: int) -> None:
            self._num_shards, self._shard_index = num_shards, shard_index

    config = {
        "backend": "torch",
        "torch_distributed": {},
        "behavior_version": 26,
        "propagate_behavior_version_to_subprocs": True,
        "torch_dataloader_shard_workers": True,
        "train": {"class": "DistributeFilesDataset", "files": ["a", "b", "c"], "get_sub_epoch_dataset": dict},
    }
    loader = pipeline.create_data_loader_from_batches([], {})
    with global_config_ctx(Config({k: v for k, v in config.items() if k != "train"})):
        passes_version = getattr(SubProcCopyGlobalConfigPreInitFunc(), "behavior_version_state", None) is not None
    shardable, taken = _Shardable(), inspect.signature(returnn_dataset_wrapper.ReturnnDatasetIterDataPipe).parameters
    pipe = returnn_dataset_wrapper.ReturnnDatasetIterDataPipe(
        shardable, reset_callback=lambda: None, **({"shard_workers": True} if "shard_workers" in taken else {})
    )
    with mock.patch.object(torch.utils.data, "get_worker_info", lambda: SimpleNamespace(num_workers=2, id=1)):
        pipe.reset()
    release = {"num_ranks": 1, "returnn_version": version}
    (default,) = find_distribute_files_datasets({**config, "torch_dataloader_opts": {}}, **release)
    (two,) = find_distribute_files_datasets({**config, "torch_dataloader_opts": {"num_workers": 2}}, **release)
    return {
        "default_worker": [loader.num_workers > 0, default.reading_process.startswith("torch DataLoader worker")],
        "reading_behavior_version": [
            26 if passes_version or loader.num_workers == 0 else 0,
            default.process_behavior_version,
        ],
        "workers_shard": [shardable._num_shards, two.shards.shards_per_rank],
        # each of the 2 workers reads all of the data where the release gives it no shard: the reader's one rule
        "duplicate_workers": [
            shardable._num_shards == 1,
            duplicate_workers_problem({**config, "torch_dataloader_opts": {"num_workers": 2}}, returnn_version=version)
            is not None,
        ],
    }


def _all_tags(files: List[str]) -> List[str]:
    """Every sequence tag the files hold (read with h5py, not through RETURNN)."""
    import h5py

    tags = []
    for path in files:
        with h5py.File(path, "r") as f:
            tags += [t.decode("utf8") if isinstance(t, bytes) else str(t) for t in f["seqTags"][...]]
    return tags


def main(version: str, workdir: str) -> Dict[str, Any]:
    import returnn

    from ..hdf_data import write_tiny_hdf_files

    files = write_tiny_hdf_files(os.path.join(workdir, "data"), num_files=14, seed=43, max_seqs=4)
    file_list = os.path.join(workdir, "files.txt")
    with open(file_list, "w") as f:
        f.write("\n".join(files) + "\n")
    sizes, plan_dir = os.path.join(workdir, "sizes.npz"), os.path.join(workdir, "plan")
    _cli("sizes", file_list, "-o", sizes)
    _cli(
        "plan", "--sizes", sizes, "--num-shards", str(NUM_RANKS), "--partition-epoch", str(PARTITION_EPOCH),
        "--num-epochs", str(2 * PARTITION_EPOCH), "--no-plot", "-o", plan_dir,
        "--returnn-version", returnn.__version__,  # cut as this release cuts (distribution returnn changed)
    )  # fmt: skip
    return {
        "returnn_version": returnn.__version__,
        "returnn_file": returnn.__file__,
        "features": _features(version),
        "builder": _builder_dicts(version, files, os.path.join(plan_dir, "plan.npz"), sizes),
        "ranks": _ranks_read(version, files, plan_dir),
        "cut": _cut_parity(version),
        "all_tags": _all_tags(files),
        "seq_order_mismatches": _seq_order_parity(),
        "seed_mismatches": _seed_parity(version, files),
        # the DataLoader is torch code: without torch (a data-only machine) its checks are left to the test to say
        "loader": _loader_parity(version) if importlib.util.find_spec("torch") else None,
    }


if __name__ == "__main__":
    result = main(*sys.argv[1:3])
    sys.stdout.flush()
    print("RESULT " + json.dumps(result))

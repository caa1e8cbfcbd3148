"""The checks flag exactly the setups that break training in the real RETURNN, on setups in the style of
public i6 recipes, each built with sharded_files_dataset: every rank builds the train dataset as RETURNN
does and reads a full epoch; a setup is "ok" when the ranks together read every sequence exactly once
(sharded) or each rank reads every sequence once from its own files (unsharded), "fails" when RETURNN
raises, and "broken" otherwise (sequences lost or read twice, or ranks that read the same files in
every sub-epoch). Where it is ok, each rank's files equal plan_for_returnn_config."""

import collections
import functools
import os
import traceback

import pytest

from tests.deps import needs_torch

pytest.importorskip("returnn.datasets.distrib_files", reason="needs RETURNN: pip install returnn")
needs_torch("RETURNN's torch DistributedContext gives each rank its seed")

from i6_shard import core  # noqa: E402
from i6_shard.returnn_config import (  # noqa: E402
    ConfigCheckError,
    check_returnn_config,
    plan_for_returnn_config,
    sharded_files_dataset,
)
from i6_shard.returnn_config.reader import find_distribute_files_datasets  # noqa: E402

from .config_ranks import (  # noqa: E402
    HDF,
    META_FILES_KEY,
    build_train,
    dfd_files,
    engine_behavior_version,
    file_pairs,
    meta_template,
    multi_proc_template,
    postprocessing_template,
    read_tags,
    returnn_process,
    write_corpus,
)

NUM_RANKS = 2
PARTITION_EPOCH = 2
TORCH = {"backend": "torch", "torch_distributed": {}}
TORCH_SHARD = {"backend": "torch", "torch_distributed": {"dataset_distribution": "shard"}}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    out = {
        name: write_corpus(str(root / name), num_files=8, prefix=prefix, seed=seed)
        for name, prefix, seed in (("a", "a", 0), ("b", "b", 1), ("feat", "m", 3), ("align", "m", 3))
    }
    out["dirs"] = {name: str(root / name) for name in ("a", "b", "feat", "align")}
    return out


def _dfd(files, template=HDF, *, sharding_fix=True, **kwargs):
    d = sharded_files_dataset(
        files, sub_epoch_dataset=template, partition_epoch=PARTITION_EPOCH, use_worker_proc=False, **kwargs
    )
    if not sharding_fix:
        del d["sharding_fix"]
    return d


def _combined(a, b, **extra):
    return {
        "class": "CombinedDataset",
        "seq_ordering": "interleave",
        "datasets": {"a": a, "b": b},
        "data_map": {("a", "data"): "data", ("b", "data"): "data_b"},
        **extra,
    }


def _pairs(c):
    return functools.partial(file_pairs, feat_dir=c["dirs"]["feat"], align_dir=c["dirs"]["align"])


# name -> (config from the corpora, the outcome observed with RETURNN 1.20261022)
SETUPS = {
    "sharded, sharding_fix, MetaDataset of (features, alignment) pairs": (
        lambda c: {**TORCH, "train": _dfd(_pairs(c)(), meta_template(), files_key=META_FILES_KEY)},
        "ok",
    ),
    "sharded without sharding_fix": (lambda c: {**TORCH, "train": _dfd(list(c["a"]), sharding_fix=False)}, "broken"),
    "sharded without sharding_fix, behavior_version 26": (
        lambda c: {**TORCH, "behavior_version": 26, "train": _dfd(list(c["a"]), sharding_fix=False)},
        "broken",
    ),  # the DataLoader worker does not get behavior_version 26
    "sharded without sharding_fix, behavior_version 31": (
        lambda c: {**TORCH, "behavior_version": 31, "train": _dfd(list(c["a"]), sharding_fix=False)},
        "ok",
    ),
    "sharded without sharding_fix, behavior_version 26, propagated": (
        lambda c: {
            **TORCH,
            "behavior_version": 26,
            "propagate_behavior_version_to_subprocs": True,
            "train": _dfd(list(c["a"]), sharding_fix=False),
        },
        "ok",
    ),
    "sharded without sharding_fix, behavior_version 26, no DataLoader worker": (
        lambda c: {
            **TORCH,
            "behavior_version": 26,
            "torch_dataloader_opts": {"num_workers": 0},
            "train": _dfd(list(c["a"]), sharding_fix=False),
        },
        "ok",
    ),
    "explicit _num_shards 1 in the sub-epoch dataset, no sharding_fix": (
        lambda c: {
            **TORCH,
            "train": _dfd(list(c["a"]), {**HDF, "_num_shards": 1, "_shard_index": 0}, sharding_fix=False),
        },
        "ok",
    ),
    "dataset_distribution shard, random_seed_offset in the dataset": (
        lambda c: {
            **TORCH_SHARD,
            "train": _dfd(list(c["a"]), distrib_shard_files=False, extra_opts={"random_seed_offset": 3}),
        },
        "ok",
    ),
    "dataset_distribution shard without sharding_fix": (
        lambda c: {**TORCH_SHARD, "train": _dfd(list(c["a"]), distrib_shard_files=False, sharding_fix=False)},
        "broken",
    ),
    "unsharded under torch_distributed": (
        lambda c: {**TORCH, "train": _dfd(list(c["a"]), distrib_shard_files=False)},
        "ok",
    ),
    "unsharded with a dataset random_seed_offset": (
        lambda c: {
            **TORCH,
            "train": _dfd(list(c["a"]), distrib_shard_files=False, extra_opts={"random_seed_offset": 3}),
        },
        "broken",
    ),
    "unsharded with seq_ordering default": (
        lambda c: {**TORCH, "train": _dfd(list(c["a"]), distrib_shard_files=False, seq_ordering="default")},
        "broken",
    ),
    "CombinedDataset of two sharded DFDs": (
        lambda c: {**TORCH, "train": _combined(_dfd(list(c["a"])), _dfd(list(c["b"])))},
        "broken",
    ),
    "CombinedDataset of two sharded DFDs with random_seed_offset": (
        lambda c: {
            **TORCH,
            "train": _combined(
                _dfd(list(c["a"]), extra_opts={"random_seed_offset": 0}),
                _dfd(list(c["b"]), extra_opts={"random_seed_offset": 0}),
            ),
        },
        "ok",
    ),
    "CombinedDataset under dataset_distribution shard": (
        lambda c: {
            **TORCH_SHARD,
            "train": _combined(
                _dfd(list(c["a"]), distrib_shard_files=False), _dfd(list(c["b"]), distrib_shard_files=False)
            ),
        },
        "fails",
    ),
    "MultiEpochDataset around a sharded DFD": (
        lambda c: {**TORCH, "train": {"class": "MultiEpochDataset", "multi_epoch": 1, "dataset": _dfd(list(c["a"]))}},
        "broken",
    ),
    "MultiEpochDataset around a sharded DFD with random_seed_offset": (
        lambda c: {
            **TORCH,
            "train": {
                "class": "MultiEpochDataset",
                "multi_epoch": 1,
                "random_seed_offset": 0,
                "dataset": _dfd(list(c["a"])),
            },
        },
        "ok",
    ),
    "PostprocessingDataset around a DFD": (
        lambda c: {
            **TORCH,
            "train": {
                "class": "PostprocessingDataset",
                "map_seq": postprocessing_template()["map_seq"],
                "dataset": _dfd(list(c["a"])),
            },
        },
        "fails",
    ),
    "MetaDataset around a DFD": (
        lambda c: {
            **TORCH,
            "train": {
                "class": "MetaDataset",
                "seq_order_control_dataset": "a",
                "data_map": {"data": ("a", "data")},
                "datasets": {"a": _dfd(list(c["a"]))},
            },
        },
        "fails",
    ),
    "PostprocessingDataset sub-epoch dataset": (
        lambda c: {**TORCH, "train": _dfd(list(c["a"]), postprocessing_template(), files_key=("dataset", "files"))},
        "ok",
    ),
    "PostprocessingDataset sub-epoch dataset without sharding_fix": (
        lambda c: {
            **TORCH,
            "train": _dfd(list(c["a"]), postprocessing_template(), files_key=("dataset", "files"), sharding_fix=False),
        },
        "broken",
    ),
    "callable files of (features, alignment) pairs under dataset_distribution shard": (
        lambda c: {
            **TORCH_SHARD,
            "train": _dfd(_pairs(c), meta_template(), files_key=META_FILES_KEY, distrib_shard_files=False),
        },
        "ok",
    ),
}
#: Spawns worker processes for every sub-epoch: slower, kept to one setup.
SLOW_SETUPS = {
    "MultiProcDataset sub-epoch dataset": (
        lambda c: {**TORCH, "train": _dfd(list(c["a"]), multi_proc_template(), files_key=("dataset", "files"))},
        "ok",
    ),
}


def _all_tags(corpora, config):
    files = set()
    for record in find_distribute_files_datasets(config, num_ranks=NUM_RANKS):
        entries = record.dataset["files"]
        entries = entries() if callable(entries) else entries
        files |= {e[0] if isinstance(e, tuple) else e for e in entries}
    return sorted(t for name in ("a", "b", "feat") for f, tags in corpora[name].items() if f in files for t in tags)


def _observe(config, corpora):
    """("ok" | "broken" | "fails", per rank the tags of the full epoch, per rank and DFD its files)."""
    from returnn.config import global_config_ctx

    records = find_distribute_files_datasets(config, num_ranks=NUM_RANKS)
    tags, files = [], []
    for rank in range(NUM_RANKS):
        try:
            dataset, returnn_config = build_train(config, rank=rank, num_ranks=NUM_RANKS)
            with global_config_ctx(returnn_config):
                rank_tags, rank_files = [], {r.key_path: [] for r in records}
                for epoch in range(1, PARTITION_EPOCH + 1):
                    rank_tags += read_tags(dataset, epoch)
                    for r in records:
                        rank_files[r.key_path].append(dfd_files(dataset, r.key_path[1:], epoch))
                dataset.finish_epoch(free_resources=True)
        except Exception as exc:  # noqa: BLE001 -- whatever RETURNN raises, but RETURNN's datasets must raise it
            frames = traceback.extract_tb(exc.__traceback__)
            assert any(f"returnn{os.sep}datasets" in frame.filename for frame in frames[1:]), exc
            return "fails", None, None
        tags.append(rank_tags)
        files.append(rank_files)
    expected = _all_tags(corpora, config)
    every_once = sorted(t for rank_tags in tags for t in rank_tags) == expected
    # Unsharded: every rank reads everything, and the ranks draw their own files per sub-epoch.
    own_files = all(len({repr(rank_files[key]) for rank_files in files}) == NUM_RANKS for key in files[0])
    own_orders = all(sorted(t) == expected for t in tags) and own_files
    return ("ok" if every_once or own_orders else "broken"), tags, files


def _predicted(config):
    try:
        check_returnn_config(config, num_ranks=NUM_RANKS)
    except ConfigCheckError as exc:
        return "fails" if all("RETURNN would fail" in p for p in exc.problems) else "broken"
    return "ok"


def _check_setup(name, make, observed_expected, corpora, monkeypatch):
    config = make(corpora)
    # RETURNN reads the data in the DataLoader worker, with the behavior version it hands over there
    with returnn_process(monkeypatch, behavior_version_state=engine_behavior_version(config)):
        observed, _, files = _observe(config, corpora)
    assert observed == observed_expected, f"RETURNN itself: {name} is {observed}"
    assert _predicted(config) == observed, name
    if observed != "ok":
        return
    for record in find_distribute_files_datasets(config, num_ranks=NUM_RANKS):
        entries = record.dataset["files"]
        sizes = core.collect_file_sizes(entries() if callable(entries) else entries, num_threads=1)
        plan = plan_for_returnn_config(
            config, file_sizes=sizes, num_ranks=NUM_RANKS, num_epochs=PARTITION_EPOCH, key=record.key_path
        )
        for rank in range(NUM_RANKS):
            assert files[rank][record.key_path] == [
                plan.files_for(epoch=e, shard_index=rank) for e in range(1, PARTITION_EPOCH + 1)
            ], (name, rank)


@pytest.mark.parametrize("name", list(SETUPS))
def test_checks_flag_exactly_what_breaks_in_returnn(name, corpora, monkeypatch):
    make, expected = SETUPS[name]
    _check_setup(name, make, expected, corpora, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_SETUPS))
def test_multi_proc_sub_epoch_dataset(name, corpora, monkeypatch):
    make, expected = SLOW_SETUPS[name]
    _check_setup(name, make, expected, corpora, monkeypatch)


def test_the_outcomes_are_all_there():
    """Not vacuous: each outcome occurs, so the test can tell them apart."""
    outcomes = collections.Counter(expected for _, expected in SETUPS.values())
    assert outcomes["ok"] >= 5 and outcomes["broken"] >= 5 and outcomes["fails"] >= 3

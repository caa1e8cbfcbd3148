"""The judges of a training's engine agree on fuzzed configs: the plan that ``ShardPlanJob.for_training`` makes
(``training_plan_options``), the graph checks (``check_returnn_config``, ``plan_engine_problems``), the RETURNN-side
dataset (its configured engine, compared by ``engine_differences``) and the plan file's record (what the dataset,
the verify and train-report read back) give the same verdict of exactness and accept the same plans: the plan made
for a config is one the checks and the dataset accept; a config RETURNN fails on is refused by both the checks and
the plan; what the plan's verdict says at graph time is what its record says."""

import dataclasses
import functools
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from i6_shard import core
from i6_shard.core.pure.engine_sim import inexact_reason
from i6_shard.core.pure.plan_sim import engine_differences, engine_of_record
from i6_shard.returnn_config import ConfigCheckError, check_returnn_config, sharded_files_dataset
from i6_shard.returnn_config.checks import plan_engine_problems
from i6_shard.returnn_config.plan import find_dataset, training_plan_options
from i6_shard.returnn_config.reader import InexactPlanWarning
from i6_shard.returnn_config.reader.engine import read_engine, sub_epoch_seq_ordering_of, worker_shards_problem
from tests.strategies import examples

NODE = {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 3}]}
SYNCS = [
    {},
    {"backend": "gloo"},
    {"reduce_type": "grad_explicit"},
    {"reduce_type": "param", "param_sync_step": 4},
    {"backend": "gloo", "reduce_type": "param", "param_sync_step": 4, "sync_complete_frac": True},
    {"sync": [{"group": "world", "type": "grad"}]},
    NODE,
]
#: The RETURNN the training runs: unknown (read as the newest), one before DataLoader worker sharding, the newest.
OLD = "1.20250115.110555"
RELEASES = [None, OLD, "1.20261022.211313"]
ORDERS = ["random", "default", "laplace:.20", "sorted_reverse", "sort_bin_shuffle:3", "random_sample", "laplace:x", "?"]


def shorten(data, **_kwargs):
    """A PostprocessingDataset's map_seq that changes a sequence's length."""
    return data


def sub_epoch(files, *, seq_ordering, wrapped, mapped=False):
    """A config's own get_sub_epoch_dataset (the reader calls it for the first file): an HDFDataset, or one inside a
    MetaDataset (whose order the simulation does not mirror unless random), or inside a PostprocessingDataset that
    maps its sequences (``mapped``: which the simulation does not mirror)."""
    hdf = {"class": "HDFDataset", "files": list(files), "seq_ordering": seq_ordering}
    if mapped:
        return {"class": "PostprocessingDataset", "dataset": hdf, "map_seq": shorten}
    if not wrapped:
        return hdf
    return {"class": "MetaDataset", "datasets": {"a": hdf}, "data_map": {}, "seq_order_control_dataset": "a"}


@st.composite
def trainings(draw):
    files = [f"/data/f{i}.hdf" for i in range(8)]
    template = {"class": "HDFDataset", "seq_ordering": "random"}
    release = draw(st.sampled_from(RELEASES))
    dataset = sharded_files_dataset(
        files, sub_epoch_dataset=template, partition_epoch=2, num_shards=2, returnn_version=release
    )
    order, wrapped, mapped = draw(st.sampled_from(ORDERS)), draw(st.booleans()), draw(st.booleans())
    if order != "random" or wrapped or mapped:
        dataset["get_sub_epoch_dataset"] = functools.partial(
            sub_epoch, seq_ordering=order, wrapped=wrapped, mapped=mapped
        )
    config = {"backend": "torch", "behavior_version": draw(st.sampled_from([24, 36, 37, 38])), "train": dataset}
    workers = draw(st.sampled_from([None, 0, 1, 2, 3]))
    if workers is not None:  # several workers interleave their batches, each its own shard from version 37
        config["torch_dataloader_opts"] = {"num_workers": workers}
    shard_workers = draw(st.sampled_from([None, True, False]))
    if shard_workers is not None:
        config["torch_dataloader_shard_workers"] = shard_workers
    config["torch_distributed"] = draw(st.sampled_from(SYNCS))
    for key, values in (
        ("batch_size", [None, 1000]),
        ("max_seqs", [-1, 8] if config.get("batch_size") is None else [None, -1, 8]),
        ("max_seq_length", [None, 500, {"data": 400}]),
        ("accum_grad_multiple_step", [None, 1, 2]),
        ("min_seq_length", [None, 0, 5]),
        ("chunking", [None, "100:50"]),
        ("online_shuffle_batches", [None, 100]),
    ):
        value = draw(st.sampled_from(values))
        if value is not None:
            config[key] = value
    if config.get("batch_size") is None and config.get("max_seqs", -1) == -1:
        config["max_seqs"] = 8
    return config, draw(st.sampled_from([None, 2])), release


def sharding_workers(config, release=None):
    """The DataLoader workers of a rank that each read a shard (RETURNN's ReturnnDatasetIterDataPipe.reset: num_workers
    > 1 with torch_dataloader_shard_workers, by default on from behavior_version 37; a release before the option has
    none), else 1; stated here as RETURNN's code reads, not taken from the reader."""
    workers = config.get("torch_dataloader_opts", {}).get("num_workers", 1)
    shard = config.get("torch_dataloader_shard_workers")
    shard = config["behavior_version"] >= 37 if shard is None else shard
    return workers if workers > 1 and shard and release != OLD else 1


def duplicating_workers(config, release=None):
    """Whether each of several DataLoader workers yields all of the rank's data (ReturnnDatasetIterDataPipe.__iter__
    without a worker shard), so that every sequence is trained that many times per epoch."""
    workers = config.get("torch_dataloader_opts", {}).get("num_workers", 1)
    return workers > 1 and sharding_workers(config, release) == 1


def the_duplicates_said_alike(config, release, checks_refuse, plan_refuses):
    """The checks and the plan refuse a training whose DataLoader workers each read all of the rank's data, in the
    words of the one rule, and neither says it of another training (nor of one RETURNN fails on first)."""
    said = "DataLoader workers of a rank reads all of the rank's data"
    duplicates = duplicating_workers(config, release) and "RETURNN would fail" not in (checks_refuse or "")
    assert duplicates == (said in (checks_refuse or "")), checks_refuse
    assert duplicates == (said in (plan_refuses or "")), plan_refuses
    if duplicates:
        message = plan_refuses.split("train: ", 1)[1].split("; fix the config before planning")[0]
        assert f"train: {message}" in checks_refuse and "trained" in message
        assert f"num_workers={config['torch_dataloader_opts']['num_workers']}" in message
        assert (f"RETURNN {release} has no DataLoader worker sharding" in message) == (release == OLD), message


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training=trainings())
def test_the_plan_the_checks_the_dataset_and_the_record_agree(training):
    config, ranks_per_node, release = training
    given_options = {} if ranks_per_node is None else {"ranks_per_node": ranks_per_node}
    try:
        check_returnn_config(config, num_ranks=2, returnn_version=release)
        checks_refuse = None
    except ConfigCheckError as exc:
        checks_refuse = str(exc)
    plan_refuses = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            options = training_plan_options(
                config, num_ranks=2, num_epochs=4, distribution="balanced", returnn_version=release, **given_options
            )
        except ValueError as exc:
            options, plan_refuses = None, str(exc)
    # the DataLoader workers that each read all of the rank's data: refused by both, in the one rule's words
    the_duplicates_said_alike(config, release, checks_refuse, plan_refuses)
    if release == OLD:
        return  # (what that release lacks besides, the checks refuse by its table: test_release.py)
    # a config RETURNN fails on (or whose workers each read all of the data) is refused by the checks and by the
    # plan, for one reason
    assert (checks_refuse is None) == (options is not None), (checks_refuse, options)
    if options is None:
        reason = plan_refuses.split("train: ", 1)[1].split("; fix the config before planning")[0]
        assert reason.split("RETURNN would fail: ")[-1] in checks_refuse
        return
    names = set(core.PLAN_OPTION_DEFAULTS) | {"num_shards", "partition_epoch", "num_epochs"}
    request = core.PlanRequest.from_options(**{k: v for k, v in options.items() if k in names})
    verdict = request.inexact_reason()
    # the verdict the graph warns of is the plan's
    said = [str(w.message) for w in caught if issubclass(w.category, InexactPlanWarning)]
    assert (verdict is None) == (not any("simulation of the engine is not exact" in m for m in said)), said
    # the plan file's record gives the same verdict where it is read back (dataset, verify, train-report)
    record = request.engine_record()
    assert inexact_reason(engine_of_record(record), num_ranks=2) == verdict
    # the graph checks and the RETURNN-side dataset accept the plan made for this training: cut into the shards its
    # reading processes are (DataLoader workers that shard are ranks * workers of them, as RETURNN's set_sharding)
    info = find_dataset(config, num_ranks=2)
    assert request.settings.num_shards == info.num_shards() == 2 * sharding_workers(config, release)
    workers = sharding_workers(config, release)
    assert worker_shards_problem(request.settings.num_shards, num_ranks=2, loader_workers=workers) is None
    assert plan_engine_problems(info, request, ranks_per_node=ranks_per_node) == []
    sub = info.sub_epoch_dataset
    # the RETURNN-side dataset reads the config with the one reader function, and compares with the one function
    configured = read_engine(config, seq_ordering=sub_epoch_seq_ordering_of(sub), ranks_per_node=ranks_per_node)
    assert engine_differences(engine_of_record(record), configured) == []
    # the description the checks compare is the one the class reads, with this dataset's verdict
    described = info.engine(ranks_per_node=ranks_per_node)
    assert dataclasses.replace(described, inexact=(), sharding=None) == configured
    assert inexact_reason(described, num_ranks=request.settings.num_shards) == verdict  # the one verdict
    # what is simulated is the training's order, or said to be unknown
    order = sub_epoch_seq_ordering_of(sub)
    assert request.engine().seq_ordering == order
    if order == core.pure.UNKNOWN_SEQ_ORDERING:
        assert verdict is not None and "seq_ordering is not known" in verdict
    # what the simulation does not mirror (interleaving DataLoader workers, a map of the sequences) is in the verdict
    reasons = info.engine_inexact()
    unsimulated = config.get("min_seq_length") or config.get("chunking") or config.get("online_shuffle_batches")
    assert bool(reasons) == bool(
        config.get("torch_dataloader_opts", {}).get("num_workers", 0) > 1 or "map_seq" in str(sub) or unsimulated
    ), reasons
    assert (sharding_workers(config, release) > 1) == any("each reads its own shard" in r for r in reasons), reasons
    for reason in reasons:
        assert reason in verdict and reason in inexact_reason(engine_of_record(record), num_ranks=2)

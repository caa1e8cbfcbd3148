"""The training's batching as plan options (``engine_plan_options``) is what RETURNN's torch engine batches with:
the limits RETURNN's own ``get_batching_iterable_dataset_from_config`` gives its ``BatchingIterDataPipe`` for fuzzed
configs (``batch_size``, ``batch_size_train``, ``max_seqs``, an int or a dict by data key); what the plan cannot take
is named, never dropped silently; and the reader's plan request holds the training's batching and sync."""

import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from i6_shard.returnn_config import plan_for_returnn_config  # noqa: F401 (the face the request goes through)
from i6_shard.returnn_config.reader import InexactPlanWarning, engine_plan_options, find_distribute_files_datasets
from i6_shard.returnn_config.reader.engine import read_engine
from tests.strategies import examples

limits = st.integers(1, 10**6)
batch_sizes = (
    st.none() | limits | st.just(-1) | st.dictionaries(st.sampled_from(["data", "classes"]), limits, min_size=1)
)


@st.composite
def batching_configs(draw):
    config = {}
    for key, values in (
        ("batch_size", batch_sizes),
        ("batch_size_train", st.none() | limits),
        ("max_seqs", st.none() | limits | st.just(-1)),
    ):
        value = draw(values)
        if value is not None:
            config[key] = value
    if config.get("batch_size", -1) == -1 and "batch_size_train" not in config:
        config["batch_size_train"] = draw(limits)  # RETURNN asserts one is there
    return config


@settings(max_examples=examples(200), deadline=None)
@given(config=batching_configs())
def test_the_limits_are_those_returnn_batches_with(config):
    pytest.importorskip("torch", reason="RETURNN's torch pipeline needs torch: pip install torch==2.13.0")
    from returnn.config import Config
    from returnn.torch.data.pipeline import get_batching_iterable_dataset_from_config
    from returnn.util.basic import NumbersDict
    import torch

    class Empty(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(())

    returnn_config = Config()
    returnn_config.update(config)
    pipe = get_batching_iterable_dataset_from_config(dataset=Empty(), config=returnn_config, train=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options, notes = engine_plan_options(read_engine(config))
    theirs = pipe._max_batch_size
    if "batch_size" in options:
        mine = options["batch_size"]
        if theirs.dict:  # a dict of one data key: its limit, named in a note
            assert len(theirs.dict) == 1 and theirs.dict == {k: mine for k in theirs.dict}
            assert any("limits data key" in n for n in notes)
        else:
            assert theirs == NumbersDict(mine)
    else:  # a dict of several data keys: not passed, and named
        assert len(theirs.dict) > 1 and any("is not passed to the plan" in n for n in notes)
    assert options.get("max_seqs", sys.maxsize) == pipe._max_seqs
    assert not caught  # the function names; the callers warn


def test_accumulation_sync_and_filters_are_passed_or_named():
    options, notes = engine_plan_options(
        read_engine(
            {"batch_size": 1000, "accum_grad_multiple_step": 4, "max_seq_length": {"data": 300}, "chunking": (50, 25)}
        )
    )
    assert options["accum_grad_multiple_step"] == 4
    from i6_shard import core

    if "max_seq_length" in core.PLAN_OPTION_DEFAULTS:
        assert options["max_seq_length"] == {"data": 300}
    else:
        assert any(n.startswith("max_seq_length={'data': 300} drops sequences") for n in notes)
    # chunking is not passed: the plan's verdict names it (the reader's reasons, engine_inexact)
    from i6_shard.returnn_config.reader.engine import engine_reasons

    assert not any("chunking" in n for n in notes)
    assert engine_reasons(read_engine({"chunking": (50, 25)})) == [
        "chunking=(50, 25) batches chunks instead of sequences, which the simulation does not mirror"
    ]


def test_the_readers_plan_request_holds_the_trainings_batching_and_sync():
    files = [f"/data/f{i}.hdf" for i in range(8)]
    config = {
        "torch_distributed": {"reduce_type": "param", "param_sync_step": 3},
        "batch_size_train": 4000,
        "batch_size": 1,
        "max_seqs": 20,
        "accum_grad_multiple_step": 2,
        "max_seq_length": 500,
        "train": {
            "class": "DistributeFilesDataset",
            "files": files,
            "get_sub_epoch_dataset": None,
            "partition_epoch": 2,
            "distrib_shard_files": True,
            "sharding_fix": True,
            "seq_ordering": "random",
        },
    }
    (info,) = find_distribute_files_datasets(config, num_ranks=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        request = info.plan_request(num_epochs=4)
    assert (request.batching.batch_size, request.batching.max_seqs) == (4000, 20)
    assert (request.sync.reduce_type, request.sync.param_sync_step, request.sync.accum_grad_multiple_step) == (
        "param",
        3,
        2,
    )
    from i6_shard import core

    if "max_seq_length" not in core.PLAN_OPTION_DEFAULTS:
        (warning,) = [w for w in caught if issubclass(w.category, InexactPlanWarning)]
        assert "max_seq_length=500 drops sequences" in str(warning.message)

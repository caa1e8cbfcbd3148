"""The one table of plan options: each row reads back from a request what it was given (so the job's attributes and
hash are the options' plain values), its default from a request of defaults (so old job ids stay), and its flags,
choices and checks are consistent."""

import pytest

from i6_shard.core import PLAN_OPTION_DEFAULTS, PLAN_OPTIONS, PlanRequest
from i6_shard.core.pure.settings import DISTRIBUTIONS

COUNTS = {"num_shards": 4, "partition_epoch": 2, "num_epochs": 6}
#: Requests that give every optional option a value besides its default (two, since some exclude others).
GIVEN = (
    {
        "seq_ordering": "default",
        "random_seed_offset": 5,
        "fixed_random_seed": 7,
        "sharding": "unsharded",
        "distribution": "balanced",
        "batch_size": 2000,
        "max_seqs": 10,
        "lengths": "/data/costs.npz",
        "reduce_type": "param",
        "param_sync_step": 3,
        "accum_grad_multiple_step": 2,
        "max_seq_length": {"data": 300},
        "sub_epoch_seq_ordering": "laplace:.20",
        "engine_inexact": ("torch_dataloader_opts num_workers=2: the batches interleave",),
        "ranks_per_node": 2,
        "preload_next_n_sub_epochs": 2,
        "cached_file": False,
        "cache_size": 10**9,
        "sub_epoch_constant_bytes": 100,
    },
    {
        "distribution": "flexible",
        "max_sub_epoch_deviation": 0.1,
        "torch_distributed": {"reduce_type": "param", "param_sync_step": 3},
        "weights": ("1", "2.5"),
        "corpus_names": ("A", "B"),
        "returnn_version": "1.20240620.64807",
    },
)


def test_every_optional_option_is_given_a_value_here():
    assert set().union(*GIVEN) == set(PLAN_OPTION_DEFAULTS)


@pytest.mark.parametrize("given", GIVEN)
def test_each_row_reads_back_what_it_was_given(given):
    request = PlanRequest.from_options(**COUNTS, **given)
    for name, value in given.items():
        assert PLAN_OPTIONS[name].read(request) == value, name
    assert PLAN_OPTIONS["num_epochs"].read(request) == COUNTS["num_epochs"]  # the training's, not the planned


def test_each_row_reads_its_default_from_a_request_of_defaults():
    """What keeps old job ids: an option not given reads back as its default, which its job hashes as absent."""
    request = PlanRequest.from_options(**COUNTS)
    for name, option in PLAN_OPTIONS.items():
        if option.required:
            assert option.read(request) == COUNTS[name], name
        elif not option.keeps_none:  # kept None where not given, as the job hashes it
            assert option.read(request) == option.default, name
    planned = PLAN_OPTIONS["num_epochs"].hash_read(request)
    assert planned == COUNTS["num_epochs"] + PLAN_OPTIONS["preload_next_n_sub_epochs"].read(request)


def test_the_rows_flags_choices_and_checks_agree():
    flags = [flag.flag for option in PLAN_OPTIONS.values() for flag in option.cli_flags]
    assert len(flags) == len(set(flags)), flags
    for name, option in PLAN_OPTIONS.items():
        assert option.name == name and option.help and option.commands, name
        if option.offered is not None:
            assert set(option.offered) < set(option.choices), name
        if option.choices is not None and not option.required:
            assert option.default in option.choices, name
    assert PLAN_OPTIONS["distribution"].choices == DISTRIBUTIONS
    assert PLAN_OPTIONS["distribution"].offered == ("returnn", "balanced", "equal_steps")
    with pytest.raises(ValueError, match="cache_size=0 must be"):
        PlanRequest.from_options(**COUNTS, ranks_per_node=2, cache_size=0)  # its row's check


@pytest.mark.parametrize(
    "name, text, value",
    [
        (
            "torch_distributed",
            "{'reduce_type': 'param', 'param_sync_step': 4}",
            {"reduce_type": "param", "param_sync_step": 4},
        ),
        ("max_seq_length", '{"data": 400}', {"data": 400}),
        ("max_seq_length", "2000", 2000),
    ],
)
def test_the_command_lines_reading_of_a_config_value(name, text, value):
    assert PLAN_OPTIONS[name].parse(text) == value


@pytest.mark.parametrize(
    "name, text", [("max_seq_length", "[1]"), ("max_seq_length", "True"), ("torch_distributed", "{oops")]
)
def test_a_config_value_that_cannot_be_read_names_the_fix(name, text):
    with pytest.raises(ValueError, match="is n"):
        PLAN_OPTIONS[name].parse(text)

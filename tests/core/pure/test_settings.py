"""PlanSettings: every invalid field is a TypeError/ValueError naming it, at construction and in
replace(); numpy scalars give the same settings as Python ints; the seed bounds are numpy's; the
settings come back unchanged from a plan file in every sharding mode."""

import json
import re
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core import PlanSettings, ShardPlan, read_plan_file, save_plan
from i6_shard.core.pure import SEED_LIMIT, SEQ_ORDERINGS
from i6_shard.core.pure.settings import DISTRIBUTIONS
from i6_shard.core.pure.settings import SHARDING_MODES

from ...strategies import plan_settings_kwargs

GOOD = dict(num_shards=2, partition_epoch=2)
INT_FIELDS = ("num_shards", "partition_epoch", "num_epochs", "random_seed_offset", "fixed_random_seed")
BOOL_FIELDS = ("distrib_shard_files", "same_seed_on_all_ranks")
INT_DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


# -- invalid values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("num_shards", None, TypeError),
        ("num_shards", True, TypeError),
        ("num_shards", 2.0, TypeError),
        ("num_shards", 0, ValueError),
        ("partition_epoch", None, TypeError),
        ("partition_epoch", 1.5, TypeError),
        ("partition_epoch", -1, ValueError),
        ("random_seed_offset", None, TypeError),
        ("random_seed_offset", 1.7, TypeError),
        ("random_seed_offset", True, TypeError),
        ("random_seed_offset", "3", TypeError),
        ("fixed_random_seed", 2.9, TypeError),
        ("fixed_random_seed", False, TypeError),
        ("distrib_shard_files", 1, TypeError),
        ("same_seed_on_all_ranks", 1, TypeError),
    ],
)
def test_settings_of_the_wrong_type_name_the_parameter(name, value, error):
    with pytest.raises(error, match=rf"^{re.escape(f'{name}={value!r}')} (has type \w+; {name} )?must be "):
        PlanSettings(**{**GOOD, name: value})


def test_unsupported_values_name_the_choices():
    with pytest.raises(ValueError, match=r"seq_ordering='sorted' is not supported .*\('random', 'default'\)"):
        PlanSettings(**GOOD, seq_ordering="sorted")
    with pytest.raises(
        ValueError,
        match=r"distribution='lpt' is unknown; use one of \('returnn', 'balanced', 'equal_steps'\)$",
    ):
        PlanSettings(**GOOD, distribution="lpt")
    with pytest.raises(ValueError, match="same_seed_on_all_ranks=True models distrib_shard_files=False"):
        PlanSettings(**GOOD, same_seed_on_all_ranks=True)
    with pytest.raises(ValueError, match="sharding='shard' is unknown; use one of"):
        PlanSettings.from_mode(sharding="shard", **GOOD)


not_an_int = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.builds(np.float64, st.floats(-10, 10)),
    st.just([1]),
    st.builds(np.bool_, st.booleans()),
)
not_a_bool = st.one_of(
    st.integers(-2, 2),
    st.none(),
    st.sampled_from(["yes", "no", "True", ""]),
    st.floats(allow_nan=False),
    st.builds(np.int64, st.integers(0, 1)),
)
not_a_choice = st.one_of(st.text(max_size=8), st.none(), st.integers(), st.just(["random"]))


@st.composite
def invalid_fields(draw):
    """(valid kwargs, field, invalid value, error type)."""
    kwargs = draw(plan_settings_kwargs())
    name = draw(st.sampled_from(INT_FIELDS + BOOL_FIELDS + ("seq_ordering", "distribution")))
    if name in BOOL_FIELDS:
        return kwargs, name, draw(not_a_bool), TypeError
    if name in ("seq_ordering", "distribution"):
        choices = SEQ_ORDERINGS if name == "seq_ordering" else DISTRIBUTIONS
        return kwargs, name, draw(not_a_choice.filter(lambda v: v not in choices)), ValueError
    if draw(st.booleans()):  # the wrong type (None is "not given" for the optional ones)
        optional = name in ("num_epochs", "fixed_random_seed")
        return kwargs, name, draw(not_an_int.filter(lambda v: not (optional and v is None))), TypeError
    if name in ("num_shards", "partition_epoch", "num_epochs"):
        return kwargs, name, draw(st.integers(max_value=0) | st.builds(np.int64, st.integers(-5, 0))), ValueError
    kwargs.update(seq_ordering="random", random_seed_offset=0)  # seeds are checked where RETURNN shuffles
    if name == "fixed_random_seed":
        return kwargs, name, draw(st.integers(max_value=-1) | st.integers(min_value=SEED_LIMIT)), ValueError
    kwargs.update(fixed_random_seed=None)
    return kwargs, name, draw(st.integers(max_value=-2) | st.integers(min_value=SEED_LIMIT)), ValueError


@settings(max_examples=examples(250))
@given(invalid_fields())
def test_every_invalid_field_is_an_error_naming_it_also_in_replace(case):
    kwargs, name, value, error = case
    with pytest.raises(error) as at_construction:
        PlanSettings(**{**kwargs, name: value})
    assert f"{name}={value!r}" in str(at_construction.value)
    valid = PlanSettings(**kwargs)
    with pytest.raises(error) as in_replace:  # replace() validates the copy again
        valid.replace(**{name: value})
    assert str(in_replace.value) == str(at_construction.value)


@settings(max_examples=examples(60))
@given(plan_settings_kwargs(), plan_settings_kwargs())
def test_replace_equals_building_the_settings_anew(kwargs, other):
    changes = {k: v for k, v in other.items() if k in ("num_shards", "partition_epoch", "distribution")}
    try:
        expected = PlanSettings(**{**kwargs, **changes})
    except ValueError as e:  # e.g. more ranks push an unsharded seed past numpy's limit
        with pytest.raises(ValueError, match=re.escape(str(e))):
            PlanSettings(**kwargs).replace(**changes)
        return
    assert PlanSettings(**kwargs).replace(**changes) == expected


def test_the_combined_rule_is_checked_in_replace_too():
    unsharded = PlanSettings.from_mode(sharding="unsharded_same_seed", **GOOD)
    with pytest.raises(ValueError, match="same_seed_on_all_ranks=True models distrib_shard_files=False"):
        unsharded.replace(distrib_shard_files=True)
    assert unsharded.replace(same_seed_on_all_ranks=False).sharding == "unsharded"


# -- numpy scalars ---------------------------------------------------------------------------------


@settings(max_examples=examples(100))
@given(plan_settings_kwargs(), st.data())
def test_numpy_scalars_give_the_same_settings_as_python_ints(kwargs, data):
    as_numpy = dict(kwargs)
    for name in INT_FIELDS:
        value = kwargs[name]
        if value is None:
            continue
        fits = [t for t in INT_DTYPES if np.iinfo(t).min <= value <= np.iinfo(t).max]
        as_numpy[name] = data.draw(st.sampled_from(fits))(value)
    for name in BOOL_FIELDS:
        as_numpy[name] = np.bool_(kwargs[name])
    expected, got = PlanSettings(**kwargs), PlanSettings(**as_numpy)
    assert got == expected and hash(got) == hash(expected)
    for name in INT_FIELDS + BOOL_FIELDS:  # Python types: they hash in Sisyphus and go into JSON
        assert type(getattr(got, name)) is type(kwargs[name]), name
    assert json.dumps(got.as_dict(), sort_keys=True) == json.dumps(expected.as_dict(), sort_keys=True)


# -- seeds ----------------------------------------------------------------------------------------


def test_seed_bounds_are_numpys_and_are_checked_before_numpy_sees_them():
    # numpy's own limits, which RETURNN's shuffle inherits:
    np.random.RandomState(0), np.random.RandomState(2**32 - 1)
    for bad in (-1, 2**32):
        with pytest.raises(ValueError):
            np.random.RandomState(bad)
    keys, sizes = list("abcd"), [1, 2, 3, 4]
    assert PlanSettings(random_seed_offset=-1, **GOOD).seed_for(full_epoch_0idx=0) == 0
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=-1, **GOOD)).layout(full_epoch_0idx=0)
    with pytest.raises(
        ValueError,
        match=r"full epoch 0 \(epochs 1..2\) would shuffle with seed -1 "
        r"\(full_epoch_0idx \+ 1 \+ random_seed_offset=-2\).*>= -1",
    ):
        PlanSettings(random_seed_offset=-2, **GOOD)
    PlanSettings(random_seed_offset=-5, seq_ordering="default", **GOOD)  # no shuffle: no seed
    for fixed in (-1, 2**32):
        with pytest.raises(ValueError, match=rf"fixed_random_seed={fixed} is a shuffle seed"):
            PlanSettings(fixed_random_seed=fixed, **GOOD)
    ShardPlan(keys, sizes, PlanSettings(fixed_random_seed=2**32 - 1, random_seed_offset=2**40, **GOOD)).layout(
        full_epoch_0idx=9
    )

    # Seeds grow with the full epoch: the last valid one is 2**32 - 1.
    plan = ShardPlan(keys, sizes, PlanSettings(random_seed_offset=2**32 - 3, **GOOD))
    assert plan.settings.seed_for(full_epoch_0idx=1) == 2**32 - 1
    plan.layout(full_epoch_0idx=1)
    plan.settings.replace(num_epochs=4)  # full epochs 0 and 1
    for call in (
        lambda: plan.layout(full_epoch_0idx=2),
        lambda: plan.files_for(epoch=5, shard_index=1),
        lambda: plan.settings.replace(num_epochs=5),
    ):
        with pytest.raises(
            ValueError,
            match=r"full epoch 2 \(epochs 5..6\) would shuffle with seed 4294967296 .*"
            r"random_seed_offset=4294967293.*lower random_seed_offset or num_epochs",
        ):
            call()
    with pytest.raises(ValueError, match="full epoch 0 .* with seed 4294967296 .*: lower random_seed_offset$"):
        PlanSettings(random_seed_offset=2**32 - 1, **GOOD)

    # Unsharded, RETURNN adds rank * 16127 (tests/core/pure/test_plan.py checks that against RETURNN):
    # the last rank's seed bounds the offset.
    top = 2**32 - 1 - 3 * 16127 - 1  # full epoch 0 on rank 3 gets seed 2**32 - 1
    unsharded = dict(num_shards=4, partition_epoch=1, distrib_shard_files=False)
    assert PlanSettings(random_seed_offset=top, **unsharded).seed_for(full_epoch_0idx=0, shard_index=3) == 2**32 - 1
    ShardPlan(keys, sizes, PlanSettings(random_seed_offset=top, **unsharded)).layout(full_epoch_0idx=0, shard_index=3)
    with pytest.raises(ValueError, match=r"full epoch 0 .*\+ rank\*16127 on rank 3\)"):
        PlanSettings(random_seed_offset=top + 1, **unsharded)
    settings_ = PlanSettings(random_seed_offset=top, **unsharded)
    with pytest.raises(ValueError, match=r"full epoch 1 .*\+ rank\*16127 on rank 3"):
        settings_.replace(num_epochs=2)
    PlanSettings(random_seed_offset=top + 1, same_seed_on_all_ranks=True, **unsharded)
    with pytest.raises(ValueError, match="num_epochs=0 must be a positive int"):
        settings_.replace(num_epochs=0)


# -- the plan file ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sharding", sorted(SHARDING_MODES))
@settings(max_examples=examples(20))
@given(data=st.data())
def test_settings_survive_the_plan_file_round_trip(sharding, data):
    kwargs = data.draw(
        plan_settings_kwargs(sharding=sharding, with_num_epochs=True, max_num_shards=3, max_partition_epoch=3)
    )
    written = PlanSettings(**kwargs)
    num_files = written.num_bins + data.draw(st.integers(0, 4))
    costs = data.draw(st.lists(st.integers(0, 10**6), min_size=num_files, max_size=num_files))
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/plan.npz"
        save_plan(ShardPlan([f"f{i}" for i in range(num_files)], costs, written), path)
        read = read_plan_file(path, verify=True).plan.settings
    assert read == written and read.sharding == sharding
    for name, value in kwargs.items():
        assert type(getattr(read, name)) is type(value), name

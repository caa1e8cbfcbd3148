"""PlanRequest: one validate() for the plan options of the command line, ShardPlanJob and the builders."""

import numpy as np
import pytest

from i6_shard.core import PLAN_OPTION_DEFAULTS, PlanRequest, PlanSettings
from i6_shard.core.pure.batching import Batching
from i6_shard.core.pure.cache import NodeCache

BASE = {"num_shards": 2, "partition_epoch": 3, "num_epochs": 6}


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"cache_size": 10**9}, ValueError, "cache_size describes the per-node cache: give ranks_per_node too"),
        ({"cached_file": False}, ValueError, "cached_file describes the per-node cache: give ranks_per_node too"),
        (
            {"max_sub_epoch_deviation": 0.1},
            ValueError,
            "max_sub_epoch_deviation=0.1 bounds the sub-epoch sizes of distribution='flexible' only",
        ),
        ({"preload_next_n_sub_epochs": -1}, ValueError, "preload_next_n_sub_epochs=-1 must be a non-negative int"),
        ({"num_epochs": 0}, ValueError, "num_epochs=0 must be a positive int"),
        ({"batch_size": 0}, ValueError, "batch_size=0 must be a positive int"),
        ({"sharding": "both"}, ValueError, "sharding='both' is unknown"),
        ({"ranks_per_node": 0}, ValueError, "ranks_per_node=0 must be a positive int"),
        ({"cache_size": "1G", "ranks_per_node": 2}, TypeError, "cache_size='1G' has type str"),
        ({"colour": "red"}, TypeError, "unknown plan options \\['colour'\\]"),
    ],
)
def test_every_rule_names_the_option(options, error, message):
    with pytest.raises(error, match=message):
        PlanRequest.from_options(**{**BASE, **options})


def test_the_options_become_the_plan_and_its_outputs():
    request = PlanRequest.from_options(
        **BASE,
        distribution="flexible",
        max_sub_epoch_deviation=np.float32(0.5),
        batch_size=np.int64(2000),
        ranks_per_node=4,
        cache_size=10**9,
        random_seed_offset=None,
    )
    s = request.settings
    # The training's 6 sub-epochs and the one RETURNN preloads after them (RETURNN's default).
    assert (s.num_epochs, s.preloaded_sub_epochs, s.training_num_epochs) == (7, 1, 6)
    assert (s.distribution, s.max_sub_epoch_deviation, s.random_seed_offset) == ("flexible", 0.5, 0)
    assert request.batching == Batching(batch_size=2000, max_seqs=None)
    assert request.node_cache == NodeCache(ranks_per_node=4, preload_next_n_sub_epochs=1, cached_file=True)
    assert request.cache_size == 10**9
    plain = PlanRequest.from_options(**BASE)
    assert plain.batching is None and plain.node_cache is None and plain.cache_size is None
    assert plain.settings == PlanSettings(num_shards=2, partition_epoch=3, num_epochs=7, preloaded_sub_epochs=1)
    # An option given as None is its default.
    assert PlanRequest.from_options(**BASE, **{name: None for name in PLAN_OPTION_DEFAULTS}) == plain


def test_a_request_built_directly_is_validated_too():
    settings = PlanSettings(num_shards=2, partition_epoch=3, num_epochs=6)
    with pytest.raises(ValueError, match="cache_size=5 needs node_cache"):
        PlanRequest(settings, cache_size=5)
    with pytest.raises(TypeError, match="settings has type dict"):
        PlanRequest({"num_shards": 2})

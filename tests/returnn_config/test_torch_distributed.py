"""The reader of ``torch_distributed`` refuses exactly what RETURNN's ``DistributedContext`` refuses: proved against
the real RETURNN on fuzzed values (its ``get_ctx`` is called with the rank and size handed in as to a subprocess,
so torch.distributed is never started), and checked where the graph is built."""

import os

import pytest
from hypothesis import HealthCheck, given, settings

from i6_shard.returnn_config.torch_distributed import check_torch_distributed
from tests.strategies import examples, torch_distributed_options

pytest.importorskip("torch", reason="RETURNN's torch.distributed reader needs torch: pip install torch")
rd = pytest.importorskip("returnn.torch.distributed", reason="needs RETURNN: pip install returnn")
from returnn.config import Config  # noqa: E402

NUM_RANKS, RANKS_PER_NODE = 4, 2


def returnn_accepts(opts) -> bool:
    """Whether RETURNN's ``get_ctx`` takes ``torch_distributed=opts`` on rank 0 of 4 (2 per host)."""
    hosts = [f"host{r // RANKS_PER_NODE}" for r in range(NUM_RANKS)]
    env = {
        "_RETURNN_TORCH_DISTRIBUTED_INIT_INFO": repr({"rank": 0, "size": NUM_RANKS, "hostnames": hosts}),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": str(RANKS_PER_NODE),
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    config = Config()
    config.typed_dict["torch_distributed"] = opts
    rd._is_set_up, rd._ctx = False, None
    try:
        rd.get_ctx(config)
    except (AssertionError, ValueError, TypeError, KeyError):
        return False
    finally:
        rd._is_set_up, rd._ctx = False, None
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return True


def ours_accepts(opts) -> bool:
    try:
        check_torch_distributed(opts, num_ranks=NUM_RANKS, ranks_per_node=RANKS_PER_NODE)
    except (ValueError, TypeError) as exc:
        assert str(exc).startswith("torch_distributed") and len(str(exc)) < 600, exc
        return False
    return True


ISSUE_CASES = [
    {"reduce_type": 0},
    {"reduce_type": ""},
    {"sync": [{"group": "world", "type": "junk"}]},
    "yes",
    [],
    5,
]


@pytest.mark.parametrize("opts", ISSUE_CASES, ids=repr)
def test_the_junk_returnn_refuses_is_refused(opts):
    assert not returnn_accepts(opts)
    assert not ours_accepts(opts)


@pytest.mark.parametrize(
    "opts",
    [
        None,
        {},
        {"reduce_type": "param", "param_sync_step": 100},
        {"reduce_type": "grad_explicit", "dataset_distribution": "shard"},
        {"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]},
        {"sync": [{"group": 2, "type": "param", "every": 2}, {"group": "world", "type": "param", "every": 6}]},
    ],
    ids=repr,
)
def test_what_returnn_takes_is_taken(opts):
    assert returnn_accepts(opts)
    assert ours_accepts(opts)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(opts=torch_distributed_options())
def test_refused_exactly_where_returnn_refuses(opts):
    assert ours_accepts(opts) == returnn_accepts(opts), opts

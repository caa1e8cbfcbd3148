"""The dropped share under param sync: the ranks with data run on to their next control sync after the
first rank runs out; checked against brute-force batching in random orders."""

import numpy as np
import pytest

from i6_shard.core.pure.batching import (
    Batching,
    order_variance,
    predict_dropped,
    rank_steps,
    simulate_num_batches,
    sync_stop,
)


def _lognormal(rng, n, median):
    return np.maximum(1, np.rint(rng.lognormal(np.log(median), 0.6, size=n))).astype(np.int64)


def _brute_drop(rank_lengths, batching, trials, rng, *, sync_every):
    """Mean dropped share over random orders: step by step as RETURNN's engine, the control sync in step 0
    and every step s with s % sync_every == sync_every - 1; the ranks stop at the first one where a rank
    has no batch."""
    drops = []
    for _ in range(trials):
        orders = [rng.permutation(x) for x in rank_lengths]
        batches = [simulate_num_batches(o, batching) for o in orders]
        num = [int(b[-1]) + 1 for b in batches]
        step = 0
        while True:
            if step == 0 or step % sync_every == sync_every - 1:
                if any(n <= step for n in num):
                    stop = step
                    break
            step += 1
        kept = sum(int(o[b < min(stop, n)].sum()) for o, b, n in zip(orders, batches, num))
        drops.append(1 - kept / sum(int(x.sum()) for x in rank_lengths))
    return float(np.mean(drops))


def test_sync_stop_is_the_next_control_sync():
    for every in (1, 2, 3, 7):
        for n in range(0, 30):
            expected = 0 if n == 0 else next(s for s in range(n, n + every + 1) if s % every == every - 1)
            assert sync_stop(np.array([n]), sync_every=every)[0] == expected, (n, every)


@pytest.mark.parametrize(
    "sync_every", [1, pytest.param(4, marks=pytest.mark.slow), pytest.param(16, marks=pytest.mark.slow)]
)
def test_param_sync_drop_matches_simulation(sync_every):
    rng = np.random.RandomState(3 + sync_every)
    errors = []
    for _ in range(6):
        num_ranks = int(rng.choice([2, 4]))
        batching = Batching(batch_size=int(rng.choice([300, 1000])), max_seqs=int(rng.choice([10, 20])))
        ranks = [_lognormal(rng, int(rng.randint(100, 600)), 20.0) for _ in range(num_ranks)]
        frames = np.array([[int(x.sum()) for x in ranks]])
        moments = [(rank_steps(len(x), x, batching)[0], len(x) * order_variance(x, batching)) for x in ranks]
        predicted = predict_dropped(
            frames, np.array([[m for m, _ in moments]]), np.array([[v for _, v in moments]]), sync_every=sync_every
        )
        errors.append(float(predicted[0]) - _brute_drop(ranks, batching, 300, rng, sync_every=sync_every))
    # Grad sync: within 1 point, as test_batching's own check. Param sync stops at whole sync periods, so the
    # tails of the step counts (estimated from a few orders, order_variance) weigh more: within 2 points.
    assert np.mean(np.abs(errors)) < (0.01 if sync_every == 1 else 0.02), errors


def test_param_sync_loses_less_than_grad_sync():
    frames, mean, var = np.array([[100, 200]]), np.array([[5.0, 10.0]]), np.zeros((1, 2))
    grad = predict_dropped(frames, mean, var)[0]
    assert round(float(grad), 6) == round(1 / 3, 6)
    assert predict_dropped(frames, mean, var, sync_every=4)[0] < grad  # the second rank runs on to step 7
    assert predict_dropped(frames, mean, var, sync_every=100)[0] == 0.0  # no sync before both are done

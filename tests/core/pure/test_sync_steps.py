"""The steps a sub-epoch should make under grad and param sync (train-report's expected steps), checked against a
step-by-step run of RETURNN's control sync, and the sync mode as the plan request and the config reader take it."""

import numpy as np
import pytest

from i6_shard.core.pure import PlanRequest, SyncMode
from i6_shard.core.pure.consumption import expected_steps


def _engine(batch_frames, sync_every):
    """Per rank the steps made and frames consumed: every rank steps while it has batches; the control sync runs
    in step 0 and in every step s with s % sync_every == sync_every - 1, and where a rank has no batch there, the
    others stop."""
    num = [len(b) for b in batch_frames]
    step = 0
    while not ((step == 0 or step % sync_every == sync_every - 1) and any(n <= step for n in num)):
        step += 1
    made = [min(n, step) for n in num]
    return made, [int(sum(b[:m])) for b, m in zip(batch_frames, made)]


@pytest.mark.parametrize("sync_every", [1, 2, 3, 7, 1000])
def test_expected_steps_are_the_steps_the_engine_makes(sync_every):
    rng = np.random.RandomState(sync_every)
    for _ in range(40):
        num_ranks = int(rng.randint(2, 5))
        batches = [rng.randint(50, 150, size=int(rng.randint(1, 30))) for _ in range(num_ranks)]
        made, consumed = _engine(batches, sync_every)
        available = [int(b.sum()) for b in batches]
        got = expected_steps(np.array([made]), np.array([consumed]), np.array([available]), sync_every=sync_every)
        assert got[0] == pytest.approx(max(made)), (made, [len(b) for b in batches])


def test_double_sharding_still_shows_too_few_steps_under_param_sync():
    # Each rank read half of its files (RETURNN #1738): 10 steps for 1000 of 2000 frames, 12 for 1200 of 2400.
    got = expected_steps(np.array([[10, 12]]), np.array([[1000, 1200]]), np.array([[2000, 2400]]), sync_every=4)
    assert got[0] == 23  # the first rank runs out after 20 steps; the next sync is step 23, so 23 steps (0..22)


def test_the_plan_request_takes_the_sync_mode():
    def request(**options):
        return PlanRequest.from_options(num_shards=2, partition_epoch=2, num_epochs=4, **options)

    assert request().sync == SyncMode() and request().sync.sync_every == 1
    assert request(reduce_type="param", param_sync_step=8).sync.sync_every == 8
    with pytest.raises(ValueError, match=r"^reduce_type='param' needs param_sync_step"):
        request(reduce_type="param")
    with pytest.raises(ValueError, match=r"^param_sync_step=8 is only used with reduce_type='param'"):
        request(param_sync_step=8)
    with pytest.raises(ValueError, match=r"^reduce_type='sync' is not a sync mode of the drop model; use one of"):
        request(reduce_type="sync")
    with pytest.raises(ValueError, match=r"^param_sync_step=0 must be a positive int"):
        request(reduce_type="param", param_sync_step=0)

"""The equal-steps search gives the same bins as when these digests were pinned, on fuzzed corpora under every kind of
engine it searches for (grad and param sync, accumulation, few and many long sequences, a bound on the sub-epochs,
repeats kept apart): a faster search must not change a plan. The digests were taken on the search before its
speed-ups, so they compare the search with that earlier version of itself."""

import hashlib

import numpy as np
import pytest

from i6_shard.core.pure.engine_sim import EngineSettings
from i6_shard.core.pure.equal_steps import equalize_steps
from i6_shard.core.pure.flexible import distribute_flexible_auto

FILES_PER_BIN = (4, 8, 16)
SYNCS = {
    "grad": {},
    "param3": {"reduce_type": "param", "param_sync_step": 3},
    "param4": {"reduce_type": "param", "param_sync_step": 4},
    "param25": {"reduce_type": "param", "param_sync_step": 25},
}
#: (corpus seed, num_shards, partition_epoch, sync (of SYNCS), accum, batch_size, max_seqs, bound, apart) -> digest
CASES = {
    (1, 2, 3, "grad", 1, 2000, 20, None, False): "859854b8ce56ecc53b7a4041",
    (2, 4, 4, "grad", 1, 2000, 20, None, False): "8e2437c89d0766d7e9998733",
    (3, 8, 3, "grad", 1, 1200, 8, None, False): "ceeff68d42b51406da2a84bd",
    (4, 3, 4, "param4", 1, 2000, 20, None, False): "2aed49a0f34c6b07ded9911d",
    (5, 4, 3, "param3", 2, 1500, 16, None, False): "7e077939b717dc695b3b3008",
    (6, 4, 4, "grad", 2, 2000, 20, 0.1, False): "dbe03513e56ee95a6bbc2440",
    (7, 8, 2, "grad", 1, 2400, 20, None, False): "c2547fc4a33cddcc92a2552f",
    (8, 2, 4, "grad", 1, 3000, 100, None, False): "dbe094ed59be410d90caffd9",
    (9, 4, 3, "grad", 1, 2000, 20, None, True): "c39f3fd2c3e32599fa4ca8b7",
    (10, 4, 5, "param25", 1, 2000, 20, 0.25, False): "11cb073710af7d9fd4a6e0b7",
}


def _corpus(seed: int, num_files: int):
    """Files of 1..300 sequences (skewed: some above a rank's share), speech-like lengths: median 100, about half
    above 100."""
    rng = np.random.RandomState(seed)
    counts = np.clip(np.round(rng.lognormal(np.log(8), 1.3, size=num_files)), 1, 300).astype(int)
    return [np.clip(np.round(rng.lognormal(np.log(100), 0.6, size=n)), 5, 900).astype(np.int64) for n in counts]


def _repeats(positions, bounds, *, num_shards: int, partition_epoch: int) -> np.ndarray:
    """The file of each position where three files are read twice: the first position of sub-epoch 1's bins is a
    repeat of the first of sub-epoch 0's (rank r's bins r*P and r*P + 1)."""
    out = np.arange(len(positions), dtype=np.int64)
    for r in range(3):
        first, second = bounds[r * partition_epoch], bounds[r * partition_epoch + 1]
        out[positions[second]] = out[positions[first]]
    return out


def _digest(case) -> str:
    seed, w, p, sync, accum, batch_size, max_seqs, bound, apart = case
    lengths = _corpus(seed, FILES_PER_BIN[seed % 3] * w * p)
    frames = np.array([int(x.sum()) for x in lengths], dtype=np.int64)
    positions, bounds = distribute_flexible_auto(frames, num_shards=w, partition_epoch=p)
    engine = EngineSettings(
        batch_size=batch_size, max_seqs=max_seqs, torch_distributed=SYNCS[sync], accum_grad_multiple_step=accum
    )
    keep_apart = _repeats(positions, bounds, num_shards=w, partition_epoch=p) if apart else None
    out = hashlib.sha256()
    for k in range(2):
        pos, b, info = equalize_steps(
            positions,
            bounds,
            file_lengths=[lengths[i] for i in range(len(lengths))],
            num_shards=w,
            partition_epoch=p,
            engine=engine,
            full_epoch_0idx=k,
            random_seed_offset=5,
            keep_apart=keep_apart,
            max_sub_epoch_deviation=bound,
        )
        out.update(np.asarray(pos, dtype=np.int64).tobytes() + np.asarray(b, dtype=np.int64).tobytes())
        out.update(repr(info).encode())
    return out.hexdigest()[:24]


#: the cases the quick tier keeps (the others cost 1-2 s of CPU each; the full suite runs them all)
QUICK_SEEDS = (1, 4, 9)


@pytest.mark.parametrize(
    "case",
    [c if c[0] in QUICK_SEEDS else pytest.param(c, marks=pytest.mark.slow) for c in CASES],
    ids=[f"seed{c[0]}" for c in CASES],
)
def test_equal_steps_bins_are_as_pinned(case):
    assert _digest(case) == CASES[case]

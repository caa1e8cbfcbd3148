"""The batching model against brute force: the port of RETURNN's batching equals the real
BatchingIterDataPipe, and the predicted steps and dropped share match simulations on random orders."""

import numpy as np
import pytest

from tests.deps import RETURNN_REASON, needs_torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import examples

from i6_shard.core.pure.batching import (
    Batching,
    file_millisteps,
    order_variance,
    predict_dropped,
    rank_steps,
    seqs_per_batch_moments,
    simulate_num_batches,
)


def _returnn_batches(lengths, batching):
    """Batch index per sequence from RETURNN's own BatchingIterDataPipe."""
    needs_torch("RETURNN's BatchingIterDataPipe is torch code")
    from returnn.torch.data.pipeline import BatchingIterDataPipe

    seqs = [{"data": np.zeros((n, 1), "float32"), "seq_idx": np.array(i)} for i, n in enumerate(lengths)]
    pipe = BatchingIterDataPipe(seqs, batch_size=batching.batch_size, max_seqs=batching.max_seqs)
    out = np.empty(len(lengths), dtype=np.int64)
    for b, batch in enumerate(pipe):
        for seq in batch:
            out[int(seq["seq_idx"])] = b
    return out


@pytest.mark.parametrize("seed", range(6))
def test_port_equals_returnn_batching(seed):
    pytest.importorskip("returnn", reason=RETURNN_REASON)
    rng = np.random.RandomState(seed)
    lengths = rng.randint(1, 120, size=rng.randint(1, 300)).tolist()
    batching = (
        Batching(
            batch_size=int(rng.choice([50, 300, 2000])) if seed % 3 else None,
            max_seqs=int(rng.choice([1, 5, 20])) if seed % 2 else None,
        )
        if seed
        else Batching(batch_size=100, max_seqs=None)
    )
    assert simulate_num_batches(lengths, batching).tolist() == _returnn_batches(lengths, batching).tolist()


def _lognormal(rng, n, median):
    return np.clip(np.round(rng.lognormal(np.log(median), 0.6, size=n)), 1, 150).astype(np.int64)


def _brute_drop(rank_lengths, batching, trials, rng):
    """Mean dropped share of the frames over random orders: every rank stops after the first rank's last batch."""
    drops = []
    for _ in range(trials):
        orders = [rng.permutation(x) for x in rank_lengths]
        batches = [simulate_num_batches(o, batching) for o in orders]
        n_min = min(int(b[-1]) + 1 for b in batches)
        kept = sum(int(o[b < n_min].sum()) for o, b in zip(orders, batches))
        drops.append(1 - kept / sum(int(x.sum()) for x in rank_lengths))
    return float(np.mean(drops))


def test_steps_match_simulation():
    rng = np.random.RandomState(0)
    for batch_size, max_seqs, median in ((2000, 20, 20), (2000, 20, 60), (1000, None, 50), (5000, 100, 40)):
        batching = Batching(batch_size=batch_size, max_seqs=max_seqs)
        lengths = _lognormal(rng, 600, median)
        sims = [simulate_num_batches(rng.permutation(lengths), batching)[-1] + 1 for _ in range(100)]
        work, _ = rank_steps(len(lengths), lengths, batching)
        mean = work + 0.5  # whole steps: the last batch is part-full
        assert abs(mean - np.mean(sims)) <= 0.05 * np.mean(sims) + 0.5, (batch_size, max_seqs, mean, np.mean(sims))


@pytest.mark.parametrize("balanced", [False, True])
def test_dropped_share_matches_simulation(balanced):
    """Random sub-epochs of 2 or 4 ranks, skewed or split evenly: the predicted share is within 1 point of
    the brute-force mean on average (the byte- or frame-based ``1 - W min / sum`` is not the reference)."""
    rng = np.random.RandomState(7 + balanced)
    errors = []
    for _ in range(8):
        num_ranks = int(rng.choice([2, 4]))
        batching = Batching(batch_size=int(rng.choice([300, 1000, 2000])), max_seqs=int(rng.choice([10, 20, 50])))
        median = float(rng.choice([15, 20, 40]))
        if balanced:
            n = int(rng.randint(200, 800))
            ranks = [_lognormal(rng, n + int(rng.randint(-n // 50, n // 50 + 1)), median) for _ in range(num_ranks)]
        else:
            ranks = [_lognormal(rng, int(rng.randint(100, 900)), median) for _ in range(num_ranks)]
        frames = np.array([[int(x.sum()) for x in ranks]])
        moments = [(rank_steps(len(x), x, batching)[0], len(x) * order_variance(x, batching)) for x in ranks]
        predicted = predict_dropped(frames, np.array([[m for m, _ in moments]]), np.array([[v for _, v in moments]]))
        errors.append(float(predicted[0]) - _brute_drop(ranks, batching, 60, rng))
    assert np.mean(np.abs(errors)) < 0.01, errors


def test_moments_edge_cases():
    assert seqs_per_batch_moments(np.array([500]), Batching(batch_size=100, max_seqs=None)) == (1.0, 0.0)
    assert seqs_per_batch_moments(np.array([1, 2, 3]), Batching(batch_size=None, max_seqs=4)) == (4.0, 0.0)
    with pytest.raises(ValueError, match="no sequence lengths"):
        seqs_per_batch_moments(np.array([], dtype=np.int64), Batching(batch_size=10, max_seqs=2))
    with pytest.raises(ValueError, match="batch_size"):
        Batching(batch_size=0, max_seqs=2)


def test_plan_prediction_matches_simulation_of_its_sub_epochs():
    """predict_plan_drop on a plan of skewed files, from the files' totals and pooled quantiles alone,
    against brute-force batching of every sub-epoch's ranks in random orders."""
    from i6_shard import core
    from i6_shard.core.io.file_costs import NUM_LENGTH_QUANTILES, length_quantiles
    from i6_shard.core.pure.batching import predict_plan_drop

    rng = np.random.RandomState(11)
    files = [_lognormal(rng, int(np.clip(rng.lognormal(np.log(40), 1.0), 1, 400)), 25) for _ in range(40)]
    keys = [f"f{i}" for i in range(len(files))]
    frames = np.array([int(x.sum()) for x in files])
    seqs = np.array([len(x) for x in files])
    plan = core.ShardPlan(
        keys,
        frames,
        core.PlanSettings(num_shards=4, partition_epoch=2, num_epochs=4, distribution="balanced", unit="frames"),
    )
    batching = Batching(batch_size=1500, max_seqs=20)
    quantiles = length_quantiles(np.bincount(np.concatenate(files)))
    assert quantiles.shape == (NUM_LENGTH_QUANTILES,)
    predicted = predict_plan_drop(
        plan, num_epochs=4, num_seqs=seqs, num_frames=frames, batching=batching, file_lengths=files
    )["dropped"]
    from_totals = predict_plan_drop(
        plan, num_epochs=4, num_seqs=seqs, num_frames=frames, batching=batching, seq_length_quantiles=quantiles
    )["dropped"]
    brute = np.array(
        [
            _brute_drop(
                [np.concatenate([files[i] for i in plan.file_indices_for(epoch=e, shard_index=r)]) for r in range(4)],
                batching,
                40,
                rng,
            )
            for e in range(1, 5)
        ]
    )
    assert abs(float(predicted.mean()) - float(brute.mean())) < 0.01, (predicted.tolist(), brute)
    assert float(np.mean(np.abs(predicted - brute))) < 0.02, (predicted.tolist(), brute)
    # From totals alone the model cannot see which rank drew the long sequences (more padding): coarser.
    assert abs(float(from_totals.mean()) - float(brute.mean())) < 0.025, (from_totals.tolist(), brute)


def _files(seed):
    """Files of few to many sequences whose lengths scale differently: frames, sequences and steps order them
    differently."""
    rng = np.random.RandomState(seed)
    return [
        np.clip(
            np.round(rng.lognormal(np.log(rng.choice([5, 20, 60, 150])), 0.7, size=int(rng.randint(1, 120)))), 1, 400
        ).astype(np.int64)
        for _ in range(8)
    ]


def _brute_steps(lengths, batching, rng, trials=30):
    """Mean number of batches of RETURNN's batching over random orders of the file's sequences."""
    return float(np.mean([simulate_num_batches(rng.permutation(lengths), batching)[-1] + 1 for _ in range(trials)]))


def _misordered(cost, brute, *, margin):
    """Pairs of files that brute force orders by more than ``margin`` (relative + 1 step) but ``cost`` not."""
    return [
        (i, j)
        for i in range(len(cost))
        for j in range(len(cost))
        if brute[i] > brute[j] + margin * max(brute[i], brute[j]) + 1.0 and not cost[i] > cost[j]
    ]


@settings(max_examples=examples(20), deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch_size=st.sampled_from([None, 300, 1000, 4000]),
    max_seqs=st.sampled_from([None, 4, 20, 100]),
)
def test_steps_cost_orders_files_like_brute_force_batching(seed, batch_size, max_seqs):
    if batch_size is None and max_seqs is None:
        max_seqs = 10
    batching = Batching(batch_size=batch_size, max_seqs=max_seqs)
    files = _files(seed)
    cost = file_millisteps(files, batching)
    brute = [_brute_steps(x, batching, np.random.RandomState(seed % 1000)) for x in files]
    assert cost.dtype == np.int64
    assert not _misordered(cost, brute, margin=0.1), (cost.tolist(), brute)


def test_steps_order_files_where_frames_and_seqs_do_not():
    """Not vacuous: on the same files, frames and sequences misorder pairs that the steps cost orders."""
    batching = Batching(batch_size=1000, max_seqs=20)
    wrong = {"frames": 0, "seqs": 0, "steps": 0}
    for seed in range(6):
        files = _files(seed)
        brute = [_brute_steps(x, batching, np.random.RandomState(seed)) for x in files]
        for name, cost in (
            ("frames", [int(x.sum()) for x in files]),
            ("seqs", [len(x) for x in files]),
            ("steps", file_millisteps(files, batching).tolist()),
        ):
            wrong[name] += len(_misordered(cost, brute, margin=0.1))
    assert wrong["steps"] == 0 and wrong["frames"] > 0 and wrong["seqs"] > 0, wrong

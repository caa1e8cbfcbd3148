"""The steps a rank makes in a sub-epoch under RETURNN's default batching (``batch_size`` in padded
frames, ``max_seqs``), and from them the share of the data dropped when the first rank runs out: the
model of docs/units.md, with a brute-force port of the batching to check it against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from .args import check_choice, check_int, check_optional_int
from .plan import ShardPlan
from .stats import compute_plan_stats

__all__ = ["Batching", "DEFAULT_REDUCE_TYPE", "SyncMode", "REDUCE_TYPES", "batching_of", "check_batching_for_unit"]

#: Draws of the step counts per sub-epoch in :func:`predict_dropped` (seeded: the result is fixed).
DEFAULT_NUM_DRAWS = 512
#: The ``steps`` unit counts milli-steps: a file's expected steps times this, rounded to an int (the split needs ints).
MILLISTEPS_PER_STEP = 1000
_NO_LIMIT = 2**62
_ORDER_SAMPLE = 512


#: The largest batching limit taken: far beyond any real batch, and small enough that counts stay in int64.
MAX_BATCHING_LIMIT = 2**40


@dataclass(frozen=True)
class Batching:
    """RETURNN's default batching limits (``BatchingIterDataPipe``): a batch of k sequences holds at most
    ``batch_size`` padded frames (``k * max length``) and at most ``max_seqs`` sequences; None: no limit.

    >>> Batching(batch_size=None, max_seqs=None)
    Traceback (most recent call last):
    ...
    ValueError: batch_size and max_seqs are both None: give at least one batching limit (RETURNN's batch_size in frames, max_seqs)
    """

    batch_size: Optional[int]
    max_seqs: Optional[int]

    def __post_init__(self):
        object.__setattr__(
            self,
            "batch_size",
            check_optional_int(
                self.batch_size, name="batch_size", minimum=1, hint="frames per batch, padding included"
            ),
        )
        object.__setattr__(
            self, "max_seqs", check_optional_int(self.max_seqs, name="max_seqs", minimum=1, hint="sequences per batch")
        )
        if self.batch_size is None and self.max_seqs is None:
            raise ValueError(
                "batch_size and max_seqs are both None: give at least one batching limit (RETURNN's "
                "batch_size in frames, max_seqs)"
            )
        for name in ("batch_size", "max_seqs"):
            value = getattr(self, name)
            if value is not None and value > MAX_BATCHING_LIMIT:
                raise ValueError(
                    f"{name}={value} is beyond any batch RETURNN makes (at most {MAX_BATCHING_LIMIT:,}); "
                    f"give the training's {name}, or leave it out for no limit"
                )

    @property
    def frames_limit(self) -> int:
        return _NO_LIMIT if self.batch_size is None else self.batch_size

    @property
    def seqs_limit(self) -> int:
        return _NO_LIMIT if self.max_seqs is None else self.max_seqs

    def as_dict(self) -> Dict[str, Optional[int]]:
        return {"batch_size": self.batch_size, "max_seqs": self.max_seqs}


def batching_of(batch_size: Optional[int], max_seqs: Optional[int]) -> Optional[Batching]:
    """The limits as a :class:`Batching`, or None where neither is given.

    >>> batching_of(None, None), batching_of(2000, None).batch_size
    (None, 2000)
    """
    return None if batch_size is None and max_seqs is None else Batching(batch_size=batch_size, max_seqs=max_seqs)


def check_batching_for_unit(unit: str, batching: Optional[Batching]) -> None:
    """Costs in steps are counted under batching limits, costs in other units under none.

    >>> check_batching_for_unit("frames", Batching(batch_size=2000, max_seqs=None))
    Traceback (most recent call last):
    ...
    ValueError: unit='frames' with batch_size=2000, max_seqs=None: unit='steps' needs batch_size and/or max_seqs (the limits its steps are counted under), the other units take neither
    """
    if (batching is not None) != (unit == "steps"):
        limits = batching.as_dict() if batching is not None else {"batch_size": None, "max_seqs": None}
        raise ValueError(
            f"unit={unit!r} with batch_size={limits['batch_size']!r}, max_seqs={limits['max_seqs']!r}: "
            "unit='steps' needs batch_size and/or max_seqs (the limits its steps are counted under), "
            "the other units take neither"
        )


def simulate_num_batches(lengths: Sequence[int] | np.ndarray, batching: Batching) -> np.ndarray:
    """Brute force: the batch of every sequence in the given order, exactly as RETURNN's
    ``BatchingIterDataPipe.__iter__`` cuts one data key (``batch_size`` on ``num_seqs * max length``,
    ``max_seqs``; a sequence longer than ``batch_size`` gets a batch of its own).

    :param lengths: frames per sequence in the order the dataset yields them, shape [num_seqs]
    :return: int64 batch index per sequence, shape [num_seqs]; the number of batches is ``last + 1``

    >>> simulate_num_batches([3, 3, 3, 9, 1], Batching(batch_size=8, max_seqs=2)).tolist()
    [0, 0, 1, 2, 3]
    """
    frames_limit, seqs_limit = batching.frames_limit, batching.seqs_limit
    out = np.empty(len(lengths), dtype=np.int64)
    batch, count, longest = 0, 0, 0
    for i, length in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        if count >= seqs_limit:
            batch, count, longest = batch + 1, 0, 0
        top = max(longest, length)
        if count and top * (count + 1) > frames_limit:
            batch, count, top = batch + 1, 0, length
        out[i] = batch
        count += 1
        longest = top
    return out


def seqs_per_batch_moments(lengths: np.ndarray, batching: Batching) -> Tuple[float, float]:
    """Mean and variance of the sequences per batch when sequences are drawn at random from
    ``lengths``: a batch holds at least k sequences if k <= max_seqs and its first k fit,
    ``k * max(l_1..l_k) <= batch_size``, which has probability ``F(batch_size // k) ** k`` (F: the CDF
    of the lengths; the first sequence always fits). ``E[K] = sum_k P(K >= k)``,
    ``E[K^2] = sum_k (2k - 1) P(K >= k)``.

    :param lengths: a sample of the sequence lengths (any order), shape [n], n >= 1

    >>> seqs_per_batch_moments(np.array([10, 10]), Batching(batch_size=35, max_seqs=None))
    (3.0, 0.0)
    """
    sample = np.sort(np.asarray(lengths, dtype=np.int64))
    if sample.size == 0:
        raise ValueError("no sequence lengths: give at least one")
    k_max = int(min(batching.seqs_limit, batching.frames_limit // max(int(sample[0]), 1), 10**7))
    if k_max <= 1:
        return 1.0, 0.0
    k = np.arange(2, k_max + 1, dtype=np.int64)
    cdf = np.searchsorted(sample, batching.frames_limit // k, side="right") / sample.size
    p = np.concatenate([[1.0], cdf**k])  # P(K >= k), k = 1..k_max
    kk = np.arange(1, k_max + 1, dtype=np.float64)
    mean = float(p.sum())
    second = float(((2 * kk - 1) * p).sum())
    return mean, max(0.0, second - mean * mean)


def rank_steps(num_seqs: int, lengths: np.ndarray, batching: Batching) -> Tuple[float, float]:
    """Mean and variance of the work of a rank holding ``num_seqs`` sequences with lengths distributed
    like ``lengths``, in random order, counted in batches of mean fill: renewal theory with the moments
    of :func:`seqs_per_batch_moments`, ``num_seqs / mu`` with variance ``num_seqs * var / mu**3``. The rank
    makes ``ceil`` of it in whole steps, the last one part-full.

    >>> rank_steps(40, np.array([10]), Batching(batch_size=None, max_seqs=8))
    (5.0, 0.0)
    """
    if num_seqs <= 0:
        return 0.0, 0.0
    mean, var = seqs_per_batch_moments(lengths, batching)
    return num_seqs / mean, num_seqs * var / mean**3


def batch_lengths_of(lengths: np.ndarray) -> np.ndarray:
    """The length each sequence batches by, of lengths of one data key (shape [num_seqs]) or several (shape
    [num_seqs, num_data_keys]): the longest of its keys, as ``BatchingIterDataPipe`` limits every key's padded frames
    by one ``batch_size`` (the longest key reaches it first) and ``LenFilterDataPipe`` every key by one
    ``max_seq_length``.

    >>> batch_lengths_of(np.array([[3, 5], [4, 1]])).tolist(), batch_lengths_of(np.array([2, 7])).tolist()
    ([5, 4], [2, 7])
    """
    lengths = np.asarray(lengths)
    return lengths if lengths.ndim == 1 else lengths.max(axis=1)


def file_millisteps(file_lengths: Sequence[np.ndarray], batching: Batching) -> np.ndarray:
    """The cost of the ``steps`` unit: per file, the expected steps its sequences take under
    ``batching`` in random order, ``num_seqs / E[K]`` of :func:`rank_steps` with the file's own lengths
    (batches of mean fill; a rank's ``ceil`` of its files' sum is its whole steps), in milli-steps.

    :param file_lengths: one int array of sequence lengths (frames) per file
    :return: int64 milli-steps (:data:`MILLISTEPS_PER_STEP` per step), shape [num_files]; 0 for a file
        without sequences

    >>> file_millisteps([np.array([10] * 40), np.array([], dtype=np.int64), np.array([1, 1, 9])],
    ...                 Batching(batch_size=None, max_seqs=8)).tolist()
    [5000, 0, 375]
    """
    out = np.zeros(len(file_lengths), dtype=np.int64)
    for i, lengths in enumerate(file_lengths):
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.size:
            out[i] = int(round(rank_steps(int(lengths.size), lengths, batching)[0] * MILLISTEPS_PER_STEP))
    return out


def order_variance(lengths: np.ndarray, batching: Batching, *, num_orders: int = 24, seed: int = 0) -> float:
    """Variance of the number of batches per sequence over random orders of the multiset ``lengths``
    (brute force on at most 512 of them, ``num_orders`` shuffles): how much a rank's step count varies
    with the order alone, its sequences being fixed. Times the rank's sequences, it is the variance of
    its steps (the iid renewal variance of :func:`rank_steps` also counts the spread of the lengths
    themselves, which a known rank does not have).

    >>> order_variance(np.array([10] * 40), Batching(batch_size=None, max_seqs=8))
    0.0
    """
    sample = np.asarray(lengths, dtype=np.int64)
    rng = np.random.RandomState(seed)
    if sample.size > _ORDER_SAMPLE:
        sample = sample[rng.choice(sample.size, _ORDER_SAMPLE, replace=False)]
    if sample.size < 2:
        return 0.0
    counts = [int(simulate_num_batches(rng.permutation(sample), batching)[-1]) + 1 for _ in range(num_orders)]
    return float(np.var(counts, ddof=1)) / sample.size


def sync_stop(n_min: np.ndarray, *, sync_every: int = 1) -> np.ndarray:
    """Steps after which the ranks that still have data stop, when the first rank out has ``n_min`` steps:
    RETURNN's control sync (``DistributedContext.control_sync_levels``) runs in step 0 and then in the
    steps ``s`` with ``s % sync_every == sync_every - 1`` (a param level's ``fires``; every step under grad
    sync, ``sync_every=1``); the rank out of data joins the next one, where the others stop.

    >>> sync_stop(np.array([0, 3, 5, 8]), sync_every=4).tolist(), sync_stop(np.array([5]), sync_every=1).tolist()
    ([0.0, 3.0, 7.0, 11.0], [5.0])
    """
    n_min = np.asarray(n_min, dtype=np.float64)
    return np.where(n_min <= 0, 0.0, np.ceil((n_min + 1) / sync_every) * sync_every - 1)


#: The sync modes the drop model takes, in RETURNN's ``torch_distributed`` ``reduce_type`` words ("grad_explicit"
#: stops the ranks as "grad" does).
REDUCE_TYPES = ("grad", "param")
#: torch_distributed's default ``reduce_type``, the first of the table: every rank stops in the step the first runs out.
DEFAULT_REDUCE_TYPE = REDUCE_TYPES[0]


@dataclass(frozen=True)
class SyncMode:
    """How the ranks of a torch training sync, as the step and drop model needs it: ``torch_distributed``'s
    ``reduce_type="grad"`` (the default: every rank stops in the step the first runs out) or ``"param"`` with
    ``param_sync_step`` (a rank that runs out stops, the others run on to their next sync, :func:`sync_stop`).

    >>> SyncMode("param").sync_every
    Traceback (most recent call last):
    ...
    ValueError: reduce_type='param' needs param_sync_step (torch_distributed's steps between param syncs, e.g. 100)
    >>> SyncMode("param", 100).describe(), SyncMode().sync_every
    ('param sync every 100 steps', 1)

    With ``accum_grad_multiple_step`` the params sync every ``param_sync_step`` optimizer updates, i.e. every
    ``param_sync_step * accum_grad_multiple_step`` steps (``DistributedContext.control_sync_levels``):

    >>> SyncMode("param", 10, accum_grad_multiple_step=2).sync_every
    20
    """

    reduce_type: str = DEFAULT_REDUCE_TYPE
    param_sync_step: Optional[int] = None
    accum_grad_multiple_step: int = 1

    def __post_init__(self):
        check_choice(
            self.reduce_type, name="reduce_type", choices=REDUCE_TYPES, problem="is not a sync mode of the drop model"
        )
        if self.reduce_type == "grad":
            if self.param_sync_step is not None:
                raise ValueError(
                    f"param_sync_step={self.param_sync_step!r} is only used with reduce_type='param'; "
                    "give reduce_type='param' too, or leave param_sync_step out"
                )
        elif self.param_sync_step is None:
            raise ValueError(
                "reduce_type='param' needs param_sync_step (torch_distributed's steps between param syncs, e.g. 100)"
            )
        else:
            object.__setattr__(
                self,
                "param_sync_step",
                check_int(self.param_sync_step, name="param_sync_step", minimum=1, hint="steps between param syncs"),
            )
        object.__setattr__(
            self,
            "accum_grad_multiple_step",
            check_int(
                self.steps_per_update(self.accum_grad_multiple_step),  # 0 updates every step, as 1 (RETURNN's meaning)
                name="accum_grad_multiple_step",
                minimum=1,
                hint="the config's accum_grad_multiple_step, steps per optimizer update; 0 is 1, as in RETURNN",
            ),
        )

    @staticmethod
    def steps_per_update(accum_grad_multiple_step: Any) -> Any:
        """A config's ``accum_grad_multiple_step`` as ``Engine.train_epoch`` acts on it: unset (``config.int``'s
        default 1) and 0 update every step, as 1 does (``cur_count_grad_accum += 1`` comes before the test
        ``cur_count_grad_accum >= accum_grad_multiple_step``); any other value is returned as it is.

        >>> [SyncMode.steps_per_update(v) for v in (None, 0, 1, 4)]
        [1, 1, 1, 4]
        """
        value = accum_grad_multiple_step
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == 0):
            return 1
        return value

    @property
    def sync_every(self) -> int:
        """Steps between the ranks' control syncs: 1 under grad sync, else ``param_sync_step`` updates."""
        return 1 if self.param_sync_step is None else self.param_sync_step * self.accum_grad_multiple_step

    def describe(self) -> str:
        accum = self.accum_grad_multiple_step
        tail = f" ({accum} steps per update)" if accum != 1 else ""
        return ("grad sync" if self.reduce_type == "grad" else f"param sync every {self.param_sync_step} steps") + tail

    def __repr__(self) -> str:
        accum = self.accum_grad_multiple_step
        tail = f", accum_grad_multiple_step={accum!r}" if accum != 1 else ""
        return f"SyncMode(reduce_type={self.reduce_type!r}, param_sync_step={self.param_sync_step!r}{tail})"

    def as_dict(self) -> Dict[str, Optional[object]]:
        out: Dict[str, Optional[object]] = {"reduce_type": self.reduce_type, "param_sync_step": self.param_sync_step}
        if self.accum_grad_multiple_step != 1:  # only then: summaries without accumulation keep their bytes
            out["accum_grad_multiple_step"] = self.accum_grad_multiple_step
        return out


def predict_dropped(
    frames: np.ndarray,
    steps_mean: np.ndarray,
    steps_var: np.ndarray,
    *,
    num_draws: int = DEFAULT_NUM_DRAWS,
    seed: int = 0,
    sync_every: int = 1,
) -> np.ndarray:
    """Per sub-epoch, the expected share of the frames dropped when every rank stops at the control
    sync after the first rank runs out. Rank r's work ``X_r`` (in batches of mean fill, see
    :func:`rank_steps`) is drawn normal around ``steps_mean`` with ``steps_var``; it makes
    ``N_r = ceil(X_r)`` whole steps, the last part-full. Under grad sync (``sync_every=1``) every rank stops
    after ``N_min = min_r N_r`` steps, so rank r keeps ``frames[r] * min(1, N_min / X_r)``: a rank one step
    longer than the first loses only its part-full last batch. Under param sync every ``sync_every``
    steps (``torch_distributed`` ``reduce_type="param"``, ``param_sync_step``, one optimizer update per
    step) the others run on to their next sync, :func:`sync_stop`.

    :param frames: shape [num_epochs, num_ranks]
    :param steps_mean: shape [num_epochs, num_ranks]
    :param steps_var: shape [num_epochs, num_ranks]
    :return: float64, shape [num_epochs]

    >>> round(float(predict_dropped(np.array([[100, 200]]), np.array([[5.0, 10.0]]), np.zeros((1, 2)))[0]), 6)
    0.333333
    >>> round(float(predict_dropped(np.array([[100, 110]]), np.array([[4.5, 4.95]]), np.zeros((1, 2)))[0]), 6)
    0.0
    """
    frames = np.asarray(frames, dtype=np.float64)
    mean = np.asarray(steps_mean, dtype=np.float64)
    sd = np.sqrt(np.maximum(np.asarray(steps_var, dtype=np.float64), 0.0))
    rng = np.random.RandomState(seed)
    z = rng.standard_normal((num_draws,) + frames.shape)
    work = np.maximum(1e-9, mean[None] + sd[None] * z)
    steps = np.where(frames[None] > 0, np.ceil(work), np.inf)  # a rank without data holds no steps back
    n_min = steps.min(axis=2, keepdims=True)
    n_min = np.where(np.isfinite(n_min), n_min, 0.0)
    if sync_every != 1:
        n_min = sync_stop(n_min, sync_every=sync_every)
    kept = (frames[None] * np.minimum(1.0, n_min / work)).sum(axis=2)
    total = frames.sum(axis=1)
    out = np.zeros(frames.shape[0])
    ok = total > 0
    out[ok] = 1.0 - kept.mean(axis=0)[ok] / total[ok]
    return out


def scaled_lengths(quantiles: np.ndarray, *, mean_length: float) -> np.ndarray:
    """The pooled length distribution (quantiles) scaled to a mean of ``mean_length``: the lengths
    of a rank known only by its frames and sequences.

    >>> scaled_lengths(np.array([10, 20, 30]), mean_length=40.0).tolist()
    [20, 40, 60]
    """
    q = np.asarray(quantiles, dtype=np.float64)
    mid = (q[1:] + q[:-1]) / 2 if q.size > 1 else q  # equal-mass cells between the quantiles
    pooled_mean = float(mid.mean())
    if pooled_mean <= 0:
        return np.maximum(1, np.rint(q)).astype(np.int64)
    return np.maximum(1, np.rint(q * mean_length / pooled_mean)).astype(np.int64)


def predict_plan_drop(
    plan: ShardPlan,
    *,
    num_epochs: int,
    num_seqs: np.ndarray,
    num_frames: np.ndarray,
    batching: Batching,
    seq_length_quantiles: Optional[np.ndarray] = None,
    file_lengths: Optional[Sequence[np.ndarray]] = None,
    layout: Optional[Callable[[int, int], Tuple[np.ndarray, np.ndarray]]] = None,
    num_draws: int = DEFAULT_NUM_DRAWS,
    sync_every: int = 1,
) -> Dict[str, np.ndarray]:
    """The predicted steps and dropped share of every sub-epoch of ``plan`` under ``batching``.

    A rank's sequences are taken in random order (the sub-epoch dataset's ``seq_ordering="random"``).
    Their lengths are the files' own (``file_lengths``, one array per file, shape [num_seqs] or [num_seqs, num_keys]:
    they batch by the longest key, :func:`batch_lengths_of`) or, without them, the pooled
    ``seq_length_quantiles`` scaled to the rank's mean length (frames / sequences).

    :param num_seqs: int, sequences per file, shape [num_files] (in the plan's key order)
    :param num_frames: int, frames per file, shape [num_files]
    :param sync_every: steps between the ranks' control syncs: 1 under grad sync, ``param_sync_step``
        under param sync (see :func:`predict_dropped`)
    :return: ``steps_mean``, ``steps_var``, ``frames`` (shape [num_epochs, num_shards]); ``dropped``
        (shape [num_epochs]); ``floor`` (shape [num_epochs]): the drop of the same sub-epoch split evenly,
        from whole steps and the spread of batching alone
    """
    if file_lengths is None and seq_length_quantiles is None:
        raise ValueError("give seq_length_quantiles (a costs archive has them) or file_lengths")
    if layout is None:

        def layout(k: int, r: int) -> Tuple[np.ndarray, np.ndarray]:
            return plan.layout(full_epoch_0idx=k, shard_index=r)

    seqs = compute_plan_stats(
        ShardPlan(plan.keys, num_seqs, plan.settings, corpora=plan.corpora),
        num_epochs=num_epochs,
        layout=layout,
        check=False,
    ).bytes
    frames = compute_plan_stats(
        ShardPlan(plan.keys, num_frames, plan.settings, corpora=plan.corpora),
        num_epochs=num_epochs,
        layout=layout,
        check=False,
    ).bytes
    mean = np.zeros(seqs.shape)
    var = np.zeros(seqs.shape)
    cache: Dict[int, Tuple[float, float]] = {}
    for e in range(seqs.shape[0]):
        for r in range(seqs.shape[1]):
            n = int(seqs[e, r])
            if n == 0:
                continue
            if file_lengths is not None:
                idx = _files_of(layout, e, r, plan)
                lengths = batch_lengths_of(np.concatenate([np.asarray(file_lengths[i], dtype=np.int64) for i in idx]))
                mu, _ = seqs_per_batch_moments(lengths, batching)
                v = order_variance(lengths, batching)
            else:
                # ranks whose mean lengths differ by < 0.5% share one computation
                key = int(round(np.log(frames[e, r] / n) * 200))
                if key not in cache:
                    lengths = scaled_lengths(seq_length_quantiles, mean_length=float(np.exp(key / 200)))
                    cache[key] = (seqs_per_batch_moments(lengths, batching)[0], order_variance(lengths, batching))
                mu, v = cache[key]
            mean[e, r], var[e, r] = n / mu, n * v
    dropped = predict_dropped(frames, mean, var, num_draws=num_draws, sync_every=sync_every)
    even = np.repeat(mean.mean(axis=1, keepdims=True), mean.shape[1], axis=1)
    even_var = np.repeat(var.mean(axis=1, keepdims=True), var.shape[1], axis=1)
    floor = predict_dropped(np.ones_like(frames), even, even_var, num_draws=num_draws, seed=1, sync_every=sync_every)
    return {"steps_mean": mean, "steps_var": var, "frames": frames, "dropped": dropped, "floor": floor}


def _files_of(layout, e: int, r: int, plan: ShardPlan) -> np.ndarray:
    part = plan.partition_epoch
    k, s = divmod(e, part)
    order, bounds = layout(k, r)
    b = r * part + s if plan.settings.distrib_shard_files else s
    return order[bounds[b] : bounds[b + 1]]

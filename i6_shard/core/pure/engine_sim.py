"""RETURNN's torch engine for one sub-epoch, simulated exactly: every rank's sequence order, length filter,
batches, gradient accumulation and control syncs, hence each rank's batches, the step it stops at and what it
consumes. Each function names the RETURNN code it mirrors; what cannot be simulated is said, never guessed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Generator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .distribute import UNSHARDED_RANK_SEED_STRIDE
from .settings import DEFAULT_SEQ_ORDERING

#: RETURNN's ``sys.maxsize`` stand-in for "no limit".
_NO_LIMIT = 2**62

#: ``seq_ordering`` values :func:`seq_order_for_epoch` mirrors (with their ``:`` options).
SEQ_ORDERING_PREFIXES = ("default", "reverse", "sorted", "sorted_reverse", "random", "laplace", "sort_bin_shuffle")
#: A sub-epoch dataset's ``seq_ordering`` where it cannot be told (a callable, a sub-epoch dataset the reader cannot
#: see, or an order mirrored for an HDFDataset only): a plan simulated with it says it is not exact.
UNKNOWN_SEQ_ORDERING = "unknown"
#: Each ``seq_ordering`` name ``Dataset.get_seq_order_for_epoch`` knows, and the ``:`` options it parses: how many, and
#: whether the first may be ``.chunk`` (``laplace``/``sort_bin_shuffle``: bins, or sequences per bin; it ignores any
#: options after the two it reads).
_SEQ_ORDERING_OPTIONS = {
    "default": (0, False),
    "default_every_n": (1, False),
    "reverse": (0, False),
    "sorted": (0, False),
    "sorted_reverse": (0, False),
    "random": (1, False),
    "random_sample": (1, False),
    "sort_bin_shuffle": (2, True),
    "sort_bin_shuffle_x2": (2, True),
    "laplace": (2, True),
}


def check_sub_epoch_seq_ordering(value: Any) -> str:
    """``value`` if ``Dataset.get_seq_order_for_epoch`` takes it as a ``seq_ordering`` (its name and its ``:`` options
    parsed as RETURNN parses them), or :data:`UNKNOWN_SEQ_ORDERING`; else a ``TypeError``/``ValueError`` naming the
    value and the fix (RETURNN would fail on it when the sub-epoch starts, with ``invalid literal for int()`` or
    ``invalid seq_ordering``).

    >>> check_sub_epoch_seq_ordering("laplace:.20")
    'laplace:.20'
    >>> check_sub_epoch_seq_ordering("laplace:x")
    Traceback (most recent call last):
    ...
    ValueError: seq_ordering='laplace:x': RETURNN reads 'x' as an int of at least 1 (bins) or '.N' (about N sequences per bin, N not 0) and fails on it; give e.g. 'laplace:.100' (bins of about 100 sequences) or 'laplace:8'
    """
    if not isinstance(value, str):
        raise TypeError(
            f"seq_ordering={value!r} has type {type(value).__name__}; give the sub-epoch dataset's seq_ordering as a "
            f"str, e.g. 'random' or 'laplace:.100' ({UNKNOWN_SEQ_ORDERING!r}: not known, the plan says inexact)"
        )
    if value == UNKNOWN_SEQ_ORDERING:
        return value
    name, *options = value.split(":")
    if name not in _SEQ_ORDERING_OPTIONS:
        raise ValueError(
            f"seq_ordering={value!r} is not one RETURNN's get_seq_order_for_epoch knows (it fails with 'invalid "
            f"seq_ordering'); use one of {sorted(_SEQ_ORDERING_OPTIONS)}, e.g. 'random' or 'laplace:.100'"
        )
    most, chunk = _SEQ_ORDERING_OPTIONS[name]
    if chunk:  # laplace, sort_bin_shuffle: RETURNN reads the first two and ignores any further
        options = options[:most]
    if len(options) > most or (name == "default_every_n" and not options):
        raise ValueError(
            f"seq_ordering={value!r}: {name!r} takes {most} ':' option(s) at most"
            + (" (and needs one)" if name == "default_every_n" else "")
            + f"; give e.g. {name + (':4' if most else '')!r}"
        )
    for i, option in enumerate(options):
        per_bin = chunk and i == 0 and option.startswith(".")
        try:
            number = int(option[1:] if per_bin else option)
        except ValueError:
            number = None
        # bins (and default_every_n's n) below 1, or 0 sequences per bin, leave RETURNN no order
        counts = (chunk and i == 0) or name == "default_every_n"
        if number is None or (counts and (number == 0 if per_bin else number < 1)):
            if chunk and i == 0:
                what = "an int of at least 1 (bins) or '.N' (about N sequences per bin, N not 0)"
            else:
                what = "an int of at least 1" if counts else "an int"
            example = f"'{name}:.100' (bins of about 100 sequences) or '{name}:8'" if chunk else f"'{name}:2'"
            raise ValueError(
                f"seq_ordering={value!r}: RETURNN reads {option!r} as {what} and fails on it; give e.g. {example}"
            )
    return value


GroupSpec = Union[str, int, Tuple[Tuple[int, ...], ...]]


def random_seed_for_epoch(
    *,
    epoch: Optional[int],
    partition_epoch: int = 1,
    num_epochs_fixed: int = 1,
    random_seed_offset: int = 0,
    fixed_random_seed: Optional[int] = None,
) -> int:
    """The seed of RETURNN's ``Dataset._get_random_seed_for_epoch``.

    >>> random_seed_for_epoch(epoch=7, num_epochs_fixed=3, random_seed_offset=10)
    13
    """
    if fixed_random_seed is not None:
        return int(fixed_random_seed)
    seed = epoch or 1
    if partition_epoch > 1:
        seed = (seed - 1) // partition_epoch + 1
    if num_epochs_fixed > 1:
        seed = (seed - 1) // num_epochs_fixed + 1
    return int(seed) + int(random_seed_offset)


def _bins_and_nth(options: List[str], num_seqs: int) -> Tuple[int, int]:
    """``laplace``/``sort_bin_shuffle`` options ``[bins or .chunk[, nth]]`` as RETURNN parses them."""
    if not options:
        bins = 2
    elif options[0].startswith("."):
        bins = max(num_seqs // int(options[0][1:]), 2)
    else:
        bins = int(options[0])
    nth = int(options[1]) if len(options) > 1 else 1
    return bins, nth


def seq_order_for_epoch(
    seq_lens: np.ndarray,
    *,
    seq_ordering: str,
    epoch: int,
    random_seed_offset: int = 0,
    fixed_random_seed: Optional[int] = None,
) -> np.ndarray:
    """The order of RETURNN's ``Dataset.get_seq_order_for_epoch`` for a dataset without ``partition_epoch``,
    sharding, ``repeat_epoch``, ``unique_seq_tags`` or a tag filter (a DistributeFilesDataset's sub-epoch dataset):
    ``default``, ``reverse``, ``sorted``, ``sorted_reverse``, ``random[:nth]``, ``laplace[:bins|.chunk[:nth]]``,
    ``sort_bin_shuffle[_x2][:bins|.chunk[:nth]]``, with ``numpy.random.RandomState`` seeded as RETURNN does.

    :param seq_lens: the length ``get_seq_len`` gives each sequence (an HDF's first data key), shape [num_seqs]
    :return: int64 indices into ``seq_lens`` in the order the dataset yields them, shape [num_seqs]

    >>> seq_order_for_epoch(np.array([5, 1, 3]), seq_ordering="sorted_reverse", epoch=1).tolist()
    [0, 2, 1]
    >>> seq_order_for_epoch(np.array([5, 1, 3]), seq_ordering="shuffle", epoch=1)
    Traceback (most recent call last):
    ...
    ValueError: seq_ordering='shuffle' is not one RETURNN's get_seq_order_for_epoch knows; use e.g. 'random' or 'laplace:.100'
    """
    seq_lens = np.asarray(seq_lens)
    num_seqs = int(seq_lens.shape[0])
    name, *options = str(seq_ordering).split(":")

    def seed(nth: int) -> int:
        return random_seed_for_epoch(
            epoch=epoch,
            num_epochs_fixed=nth,
            random_seed_offset=random_seed_offset,
            fixed_random_seed=fixed_random_seed,
        )

    if seq_ordering == "default":
        return np.arange(num_seqs, dtype=np.int64)
    if seq_ordering == "reverse":
        return np.arange(num_seqs - 1, -1, -1, dtype=np.int64)
    if seq_ordering in ("sorted", "sorted_reverse"):
        lens = -seq_lens if seq_ordering == "sorted_reverse" else seq_lens
        return np.argsort(lens, kind="stable").astype(np.int64)
    if name == "random" and len(options) <= 1:
        nth = int(options[0]) if options else 1
        return np.random.RandomState(seed(nth)).permutation(num_seqs).astype(np.int64)
    if name == "laplace":
        bins, nth = _bins_and_nth(options, num_seqs)
        seq_index = np.random.RandomState(seed(nth)).permutation(num_seqs)
        out = []
        for i in range(bins):
            part = seq_index[i * num_seqs // bins : (i + 1) * num_seqs // bins]
            lens = seq_lens[part]
            if i % 2 == 1:
                lens = -lens
            out.append(part[np.argsort(lens, kind="stable")])
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)
    if name in ("sort_bin_shuffle", "sort_bin_shuffle_x2"):
        bins, nth = _bins_and_nth(options, num_seqs)
        rng = np.random.RandomState(seed(nth))
        order = rng.permutation(num_seqs).tolist()
        order.sort(key=lambda i: seq_lens[i])  # Python's sort is stable, as RETURNN's list.sort
        out = []
        for i in rng.permutation(bins):
            stop = None if i == bins - 1 else (i + 1) * len(order) // bins
            part = order[i * len(order) // bins : stop][:]
            if name == "sort_bin_shuffle_x2":
                rng.shuffle(part)
            out.append(part)
        return np.concatenate(out).astype(np.int64)
    raise ValueError(
        f"seq_ordering={seq_ordering!r} is not one RETURNN's get_seq_order_for_epoch knows; "
        "use e.g. 'random' or 'laplace:.100'"
    )


def sub_epoch_seq_order(
    seq_lens: np.ndarray,
    *,
    seq_ordering: str,
    full_epoch_0idx: int,
    random_seed_offset: int,
    fixed_random_seed: Optional[int] = None,
) -> np.ndarray:
    """The order of a DistributeFilesDataset's sub-epoch dataset: ``_WorkerProcParent``/``_WorkerInProc`` give it the
    DFD's ``random_seed_offset`` and call ``init_seq_order(epoch=full_epoch_0idx + 1)``, which orders by
    :func:`seq_order_for_epoch` (``Dataset.get_seq_order_for_epoch``). All sub-epochs of a full epoch share the seed.

    :param seq_lens: lengths of the rank's sequences in its files' order (the order the dataset indexes them)

    >>> order = sub_epoch_seq_order(np.array([4, 4, 4]), seq_ordering="random", full_epoch_0idx=2, random_seed_offset=5)
    >>> order.tolist() == np.random.RandomState(2 + 1 + 5).permutation(3).tolist()
    True
    """
    return seq_order_for_epoch(
        seq_lens,
        seq_ordering=seq_ordering,
        epoch=full_epoch_0idx + 1,
        random_seed_offset=random_seed_offset,
        fixed_random_seed=fixed_random_seed,
    )


def _as_2d(lengths: np.ndarray) -> np.ndarray:
    lengths = np.asarray(lengths, dtype=np.int64)
    return lengths[:, None] if lengths.ndim == 1 else lengths


def length_filter(
    lengths: np.ndarray, *, min_seq_length: Optional[int] = None, max_seq_length: Optional[int] = None
) -> np.ndarray:
    """Which sequences RETURNN's ``LenFilterDataPipe`` keeps: none of its data keys shorter than ``min_seq_length``
    or longer than ``max_seq_length`` (one int for every key, as the torch engine passes the config's value).

    :param lengths: int lengths, shape [num_seqs] or [num_seqs, num_data_keys]
    :return: bool, shape [num_seqs]

    >>> length_filter(np.array([[3, 1], [9, 2], [5, 7]]), max_seq_length=6).tolist()
    [True, False, False]
    """
    x = _as_2d(lengths)
    keep = np.ones(x.shape[0], dtype=bool)
    if min_seq_length is not None:
        keep &= (x >= min_seq_length).all(axis=1)
    if max_seq_length is not None:
        keep &= (x <= max_seq_length).all(axis=1)
    return keep


def batch_bounds(lengths: np.ndarray, *, batch_size: Optional[int], max_seqs: Optional[int]) -> np.ndarray:
    """Batch boundaries of RETURNN's ``BatchingIterDataPipe.__iter__`` (the torch engine's default batching): a batch
    takes sequences in order while ``len(batch) < max_seqs`` and, for every data key, ``(len(batch) + 1) * max
    length <= batch_size`` (padding included); a sequence over ``batch_size`` alone still makes a batch.

    :param lengths: int lengths in the order the dataset yields them, shape [num_seqs] or [num_seqs, num_data_keys]
    :return: int64 boundaries, shape [num_batches + 1]; batch b is sequences ``bounds[b]:bounds[b+1]``

    >>> batch_bounds(np.array([3, 3, 3, 9, 1]), batch_size=8, max_seqs=2).tolist()
    [0, 2, 3, 4, 5]
    >>> batch_bounds(np.array([[2, 9], [2, 1]]), batch_size=10, max_seqs=None).tolist()
    [0, 1, 2]
    """
    x = _as_2d(lengths)
    frames_limit = _NO_LIMIT if batch_size is None else int(batch_size)
    seqs_limit = _NO_LIMIT if max_seqs is None or max_seqs == -1 else int(max_seqs)
    if x.shape[1] == 1:
        return _batch_bounds_1d(x[:, 0].tolist(), frames_limit=frames_limit, seqs_limit=seqs_limit)
    bounds = [0]
    count = 0
    longest = np.zeros(x.shape[1], dtype=np.int64)
    for i, row in enumerate(x):
        if count >= seqs_limit:
            bounds.append(i)
            count, longest = 0, np.zeros_like(longest)
        top = np.maximum(longest, row)
        if count and bool((top * (count + 1) > frames_limit).any()):
            bounds.append(i)
            count, top = 0, row
        count += 1
        longest = top
    if count:
        bounds.append(x.shape[0])
    return np.asarray(bounds, dtype=np.int64)


def _batch_bounds_1d(lengths: List[int], *, frames_limit: int, seqs_limit: int) -> np.ndarray:
    """:func:`batch_bounds` of one data key, on Python ints (the same rules, several times faster)."""
    bounds = [0]
    count = longest = 0
    for i, length in enumerate(lengths):
        if count >= seqs_limit:
            bounds.append(i)
            count = longest = 0
        top = longest if longest > length else length
        if count and top * (count + 1) > frames_limit:
            bounds.append(i)
            count, top = 0, length
        count += 1
        longest = top
    if count:
        bounds.append(len(lengths))
    return np.asarray(bounds, dtype=np.int64)


@dataclass(frozen=True)
class SyncLevel:
    """One level of ``torch_distributed``'s ``sync`` (RETURNN's ``_SyncLevel``): its ``group`` ("world", "node", an
    int block size or explicit rank lists), ``sync_type`` ("grad" or "param") and ``every`` (optimizer updates)."""

    group: GroupSpec
    sync_type: str
    every: int = 1

    def fires(self, epoch_update_step_idx: int) -> bool:
        """``_SyncLevel.fires``: whether the level syncs after this optimizer update."""
        return epoch_update_step_idx % self.every == self.every - 1


def sync_levels_of(torch_distributed: Optional[Dict[str, Any]]) -> Tuple[str, Tuple[SyncLevel, ...]]:
    """``reduce_type`` and sync levels as ``DistributedContext.__init__`` derives them from ``torch_distributed``:
    "grad" (DistributedDataParallel, no levels), "grad_explicit" (one world grad level), "param" (one world param
    level every ``param_sync_step``), or "sync" (the ``sync`` list).

    >>> sync_levels_of({"reduce_type": "param", "param_sync_step": 4})
    ('param', (SyncLevel(group='world', sync_type='param', every=4),))
    >>> sync_levels_of({"sync": [{"group": "node", "type": "grad"}, {"group": "world", "type": "param", "every": 8}]})[1][1]
    SyncLevel(group='world', sync_type='param', every=8)
    """
    opts = dict(torch_distributed or {})
    reduce_type = opts.get("reduce_type")
    spec = opts.get("sync")
    if spec is not None:
        if reduce_type is not None:
            raise ValueError(f"torch_distributed has both sync and reduce_type={reduce_type!r}: RETURNN takes one")
        levels = []
        for level in spec:
            group = level["group"]
            if isinstance(group, (list, tuple)):
                group = tuple(tuple(int(r) for r in ranks) for ranks in group)
            levels.append(SyncLevel(group=group, sync_type=level["type"], every=int(level.get("every", 1))))
        return "sync", tuple(levels)
    reduce_type = reduce_type or "grad"
    if reduce_type == "grad":
        return "grad", ()
    if reduce_type == "grad_explicit":
        return "grad_explicit", (SyncLevel("world", "grad"),)
    if reduce_type == "param":
        step = opts.get("param_sync_step")
        if not isinstance(step, int) or step <= 0:
            raise ValueError(f"reduce_type='param' needs param_sync_step, a positive int, got {step!r}")
        return "param", (SyncLevel("world", "param", step),)
    raise ValueError(f"torch_distributed reduce_type={reduce_type!r} is not one of grad, grad_explicit, param")


def ranks_stop_together(torch_distributed: Optional[Dict[str, Any]]) -> bool:
    """Whether every rank ends the epoch in the step in which the first runs out: RETURNN's control sync
    (``DistributedContext.control_sync_levels``) runs on the world in every step where ``reduce_type`` is ``"grad"``
    (DistributedDataParallel), or where a ``"world"`` grad level has only world levels outside it (grad levels fire in
    every step, and the control sync takes the group of the outermost level firing); otherwise a rank that runs out
    stops, and the others of another group go on to their next sync. Junk (RETURNN fails on it) is not together.

    >>> ranks_stop_together({}), ranks_stop_together({"reduce_type": "param", "param_sync_step": 4})
    (True, False)
    >>> ranks_stop_together({"sync": [{"group": "world", "type": "grad"}, {"group": "world", "type": "param", "every": 4}]})
    True
    >>> ranks_stop_together({"sync": [{"group": "node", "type": "grad"}]})  # each node stops on its own
    False
    """
    try:
        reduce_type, levels = sync_levels_of(torch_distributed)
    except (ValueError, KeyError, TypeError):
        return False
    grads = [i for i, lv in enumerate(levels) if lv.group == "world" and lv.sync_type == "grad"]
    return reduce_type == "grad" or bool(grads) and all(lv.group == "world" for lv in levels[grads[-1] :])


def _group_ranks(group: GroupSpec, *, num_ranks: int, ranks_per_node: Optional[int]) -> List[List[int]]:
    """RETURNN's ``_make_group_ranks``; "node": torchrun's contiguous blocks of ``ranks_per_node`` ranks per host."""
    if group == "world":
        return [list(range(num_ranks))]
    if group == "node":
        if ranks_per_node is None:
            raise ValueError(
                "a 'node' sync level's groups are the ranks of one host: give ranks_per_node= (torchrun's "
                "--nproc-per-node, the ranks per host)"
            )
        group = ranks_per_node
    if isinstance(group, int):
        if group <= 0 or num_ranks % group:
            raise ValueError(f"sync group size {group} does not divide the {num_ranks} ranks")
        return [list(range(s, s + group)) for s in range(0, num_ranks, group)]
    return [sorted(ranks) for ranks in group]


def _next_fire(levels: Sequence[SyncLevel], eupd: int) -> int:
    """The first optimizer update index from ``eupd`` on after which one of ``levels`` fires (``_SyncLevel.fires``),
    in closed form: a level every 10**12 updates costs what one every 2 does.

    >>> _next_fire([SyncLevel("world", "param", 4), SyncLevel("world", "param", 10**12)], 5)
    7
    """
    return min(eupd + (lv.every - 1 - eupd) % lv.every for lv in levels)


def _control_sync_levels(
    levels: Sequence[SyncLevel], *, reduce_type: str, eupd: int, update_step: bool, world: bool, no_data: bool
) -> List[Optional[int]]:
    """``DistributedContext.control_sync_levels`` with ``_control_sync_chain``: indices into ``levels`` of the control
    syncs of this step (None: the world level of the first step and DistributedDataParallel)."""
    if world or reduce_type == "grad":
        return [None]
    firing = [i for i, lv in enumerate(levels) if lv.sync_type == "grad" or (update_step and lv.fires(eupd))]
    if not firing:
        if not no_data:
            return []
        if update_step:
            eupd += 1
        eupd = _next_fire(levels, eupd)
        firing = [i for i, lv in enumerate(levels) if lv.fires(eupd)]
    idx = max(firing)
    chain: List[Optional[int]] = [idx]
    while idx < len(levels) - 1:
        eupd = _next_fire(levels[idx + 1 :], eupd)
        idx = max(i for i in range(idx + 1, len(levels)) if levels[i].fires(eupd))
        chain.append(idx)
    return chain


def _rank_loop(
    num_batches: int, *, levels: Sequence[SyncLevel], reduce_type: str, accum: Optional[int]
) -> Generator[Tuple[Optional[int], bool], bool, int]:
    """One rank in the torch engine's ``Engine.train_epoch`` loop: yields ``(level index, has data)`` for every
    control sync ``all_reduce`` (None: the world group), receives whether every rank of the group has data, and
    returns the steps it took. ``accum`` None: a callable ``accum_grad_multiple_step`` (world sync in every step)."""
    step_idx, zero_grad_next_step, cur_count, eupd = 0, True, 0, 0
    while True:
        no_data = step_idx >= num_batches
        update_step = (0 if zero_grad_next_step else cur_count) + 1 >= (accum or 1)
        chain = _control_sync_levels(
            levels,
            reduce_type=reduce_type,
            eupd=eupd,
            update_step=update_step,
            world=accum is None or step_idx == 0,
            no_data=no_data,
        )
        has_data = not no_data
        if chain:
            has_data = yield chain[0], has_data
        if not has_data:
            for idx in chain[1:]:
                yield idx, False
            return step_idx
        if zero_grad_next_step:
            cur_count = 0
        cur_count += 1
        perform_update = cur_count >= (accum or 1)
        if perform_update:
            eupd += 1
        zero_grad_next_step = perform_update
        step_idx += 1


def steps_taken(
    num_batches: Sequence[int],
    *,
    torch_distributed: Optional[Dict[str, Any]] = None,
    accum_grad_multiple_step: Optional[int] = 1,
    ranks_per_node: Optional[int] = None,
) -> List[int]:
    """The steps each rank takes in a sub-epoch before it leaves RETURNN's train loop (``Engine.train_epoch``), given
    each rank's number of batches: every rank runs the loop, and the control syncs (``control_sync_levels``,
    ``all_reduce`` of "has data" with MIN, the same with ``sync_complete_frac``'s SUM) are matched group by group as
    torch's collectives are. Under grad sync every rank stops with the first; under param sync the others run on to
    their next sync, after ``param_sync_step * accum_grad_multiple_step`` steps. ``sync_at_epoch_end`` syncs after the
    loop and does not change the steps.

    :param num_batches: batches per rank, shape [num_ranks]
    :param accum_grad_multiple_step: the config's int; None for a callable (RETURNN then syncs every step)
    :param ranks_per_node: torchrun's ranks per host, for a "node" sync group

    >>> steps_taken([5, 9, 12], torch_distributed={})
    [5, 5, 5]
    >>> steps_taken([5, 9, 12], torch_distributed={"reduce_type": "param", "param_sync_step": 2},
    ...             accum_grad_multiple_step=2)
    [5, 7, 7]
    """
    num_ranks = len(num_batches)
    reduce_type, levels = sync_levels_of(torch_distributed)
    groups = [
        {r: tuple(g) for g in _group_ranks(lv.group, num_ranks=num_ranks, ranks_per_node=ranks_per_node) for r in g}
        for lv in levels
    ]
    world = tuple(range(num_ranks))

    def key(level_idx: Optional[int], rank: int) -> Tuple[Any, ...]:
        # levels of group "world" use torch's default group, as the first step's control sync does
        if level_idx is None or levels[level_idx].group == "world":
            return ("world", world)
        return (level_idx, groups[level_idx][rank])

    loops = [
        _rank_loop(int(n), levels=levels, reduce_type=reduce_type, accum=accum_grad_multiple_step) for n in num_batches
    ]
    out: List[Optional[int]] = [None] * num_ranks
    pending: Dict[Tuple[Any, ...], Dict[int, bool]] = {}

    def advance(rank: int, value: Optional[bool]) -> None:
        try:
            level_idx, has = loops[rank].send(value)
        except StopIteration as stop:
            out[rank] = int(stop.value)
            return
        pending.setdefault(key(level_idx, rank), {})[rank] = has

    for r in range(num_ranks):
        advance(r, None)
    while pending:
        ready = [k for k, posted in pending.items() if len(posted) == len(k[1])]
        if not ready:
            raise RuntimeError(f"the simulated control syncs deadlock: {sorted(pending, key=str)}")  # invariant
        for k in ready:
            posted = pending.pop(k)
            result = min(posted.values())
            for r in sorted(posted):
                advance(r, result)
    return [int(x) for x in out]


@dataclass(frozen=True)
class EngineSettings:
    """What the torch engine does with a sub-epoch's sequences, as the training's config states it: the one
    description of a training's engine, which the plan simulates and records (``plan_sim.engine_record``), the
    config reader reads from a training's config (``returnn_config.reader.read_engine``), and the graph checks, the
    RETURNN-side dataset and the training report compare field by field (``plan_sim.engine_differences``), with one
    verdict of exactness (:func:`inexact_reason`).

    :ivar seq_ordering: the sub-epoch dataset's ``seq_ordering``
    :ivar fixed_random_seed: the sub-epoch dataset's ``fixed_random_seed``
    :ivar batch_size: ``batch_size`` (padded frames per batch, every data key), None: no limit
    :ivar max_seqs: ``max_seqs``, None: no limit
    :ivar min_seq_length: ``min_seq_length`` (LenFilterDataPipe), None: none
    :ivar max_seq_length: ``max_seq_length`` (LenFilterDataPipe), None: none
    :ivar accum_grad_multiple_step: int, or None for a callable
    :ivar torch_distributed: the config's ``torch_distributed`` (only the sync options matter)
    :ivar ranks_per_node: torchrun's ranks per host (for "node" sync groups)
    :ivar inexact: reasons why the training's order or batches cannot be simulated (a PostprocessingDataset that
        changes lengths, several DataLoader workers, custom batching, chunking, a sub-epoch dataset not seen...)
    :ivar batch_size_by_key: ``batch_size`` as a dict by data key (RETURNN's ``NumbersDict``), as stated; None: an int
    :ivar max_seq_length_by_key: ``max_seq_length`` as a dict by data key, as stated; None: an int or none
    :ivar other_batching: ``(key, value)`` of the batching options the simulation has none of (``packed_batch_size``,
        ``torch_batching``, ``chunking``, ``online_shuffle_batches``), where set
    :ivar num_workers: the torch DataLoader workers (``torch_dataloader_opts``; None: not stated, RETURNN's 1)
    :ivar shard_workers: whether several DataLoader workers each read a shard of their own
        (``torch_dataloader_shard_workers``, by default from behavior_version 37)
    :ivar sync_complete_frac: ``torch_distributed``'s option, or its default ``behavior_version >= 33`` (None: not
        torch distributed, or not read): a SUM of "has data" instead of a MIN, no rank's steps change
    :ivar sync_at_epoch_end: the option, or its default ``behavior_version >= 38`` (None as above)
    :ivar sharding: the sharding mode of the train dataset (``core.pure.settings.SHARDING_MODES``; None: not known)
    """

    seq_ordering: str = DEFAULT_SEQ_ORDERING
    fixed_random_seed: Optional[int] = None
    batch_size: Optional[int] = None
    max_seqs: Optional[int] = None
    min_seq_length: Optional[int] = None
    max_seq_length: Optional[int] = None
    accum_grad_multiple_step: Optional[int] = 1
    torch_distributed: Optional[Dict[str, Any]] = field(default=None, hash=False)
    ranks_per_node: Optional[int] = None
    inexact: Tuple[str, ...] = ()
    batch_size_by_key: Optional[Dict[str, Any]] = field(default=None, hash=False)
    max_seq_length_by_key: Optional[Dict[str, Any]] = field(default=None, hash=False)
    other_batching: Tuple[Tuple[str, Any], ...] = field(default=(), hash=False)
    num_workers: Optional[int] = None
    shard_workers: bool = False
    sync_complete_frac: Optional[bool] = None
    sync_at_epoch_end: Optional[bool] = None
    sharding: Optional[str] = None

    @property
    def stated_batch_size(self) -> Any:
        """``batch_size`` as the config states it: its dict by data key where it has one (a copy), else the int.

        >>> EngineSettings(batch_size_by_key={"data": 2000}).stated_batch_size
        {'data': 2000}
        """
        return self.batch_size if self.batch_size_by_key is None else dict(self.batch_size_by_key)

    @property
    def stated_max_seq_length(self) -> Any:
        """``max_seq_length`` as the config states it: its dict by data key where it has one (a copy), else the int."""
        return self.max_seq_length if self.max_seq_length_by_key is None else dict(self.max_seq_length_by_key)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "seq_ordering": self.seq_ordering,
            "fixed_random_seed": self.fixed_random_seed,
            "batch_size": self.batch_size,
            "max_seqs": self.max_seqs,
            "min_seq_length": self.min_seq_length,
            "max_seq_length": self.max_seq_length,
            "accum_grad_multiple_step": self.accum_grad_multiple_step,
            "torch_distributed": self.torch_distributed,
            "inexact": list(self.inexact),
        }


def inexact_reason(engine: EngineSettings, *, num_ranks: int) -> Optional[str]:
    """Why the sub-epochs of a training with ``engine`` cannot be simulated exactly, or None if they can.

    >>> inexact_reason(EngineSettings(seq_ordering="random_sample", max_seqs=8), num_ranks=2)
    "seq_ordering='random_sample' is not simulated (it draws with replacement)"
    """
    reasons = list(engine.inexact)  # every reason, the config reader's first
    if engine.batch_size is None and engine.max_seqs is None:
        reasons.append("no batch_size or max_seqs given: the batches are not known")
    name = engine.seq_ordering.split(":")[0]
    if engine.seq_ordering == UNKNOWN_SEQ_ORDERING:
        reasons.append(
            "the sub-epoch dataset's seq_ordering is not known to the plan (a callable, a sub-epoch dataset that "
            "cannot be seen, or a sorted/laplace order of a dataset other than HDFDataset): its order is not "
            "simulated; give the plan sub_epoch_seq_ordering= the order where it is an HDFDataset's"
        )
    elif name not in SEQ_ORDERING_PREFIXES and name != "sort_bin_shuffle_x2":
        what = " (it draws with replacement)" if name == "random_sample" else ""
        reasons.append(f"seq_ordering={engine.seq_ordering!r} is not simulated{what}")
    sync = sync_inexact_reason(engine.torch_distributed, num_ranks=num_ranks, ranks_per_node=engine.ranks_per_node)
    return "; ".join(reasons + ([] if sync is None else [sync])) or None


def sync_inexact_reason(torch_distributed: Any, *, num_ranks: int, ranks_per_node: Optional[int]) -> Optional[str]:
    """Why the sync levels of ``torch_distributed`` cannot be simulated (their groups are not known), or None.

    >>> sync_inexact_reason({"sync": [{"group": "node", "type": "grad"}]}, num_ranks=4, ranks_per_node=None)[-49:]
    "(torchrun's --nproc-per-node, the ranks per host)"
    """
    try:
        _, levels = sync_levels_of(torch_distributed)
        for lv in levels:
            _group_ranks(lv.group, num_ranks=num_ranks, ranks_per_node=ranks_per_node)
    except (ValueError, KeyError, TypeError) as exc:
        return f"the sync of torch_distributed={torch_distributed!r} is not simulated: {exc}"
    return None


@dataclass(frozen=True)
class SubEpochSim:
    """One sub-epoch of all ranks, simulated (:func:`simulate_sub_epoch`); all lists have one entry per rank.

    :ivar steps_exact: batches per rank (what the rank would make alone)
    :ivar steps_taken: steps per rank before it leaves the train loop under the sync mode
    :ivar frames_total: frames of the rank's sequences (first data key), all of them
    :ivar frames_consumed: frames of the sequences in its steps taken
    :ivar seqs_total: the rank's sequences
    :ivar seqs_consumed: sequences in its steps taken
    :ivar frames_kept: frames of the sequences the length filter keeps (``frames_total`` without a filter)
    """

    steps_exact: List[int]
    steps_taken: List[int]
    frames_total: List[int]
    frames_consumed: List[int]
    seqs_total: List[int]
    seqs_consumed: List[int]
    frames_kept: Optional[List[int]] = None

    @property
    def _kept(self) -> List[int]:
        return self.frames_total if self.frames_kept is None else self.frames_kept

    @property
    def dropped_fraction(self) -> float:
        """Share of the frames the length filter keeps that are not consumed (left when the rank stopped): what the
        sync drops, as the training report measures it (``1 - sum consumed / sum kept``); the filter's removal is
        :attr:`filtered_fraction`, apart.

        >>> SubEpochSim([1], [1], [10], [3], [2], [1], frames_kept=[4]).dropped_fraction
        0.25
        """
        kept = sum(self._kept)
        return 0.0 if kept == 0 else 1.0 - sum(self.frames_consumed) / kept

    @property
    def filtered_fraction(self) -> float:
        """Share of the sub-epoch's frames the length filter (``max_seq_length``/``min_seq_length``) removes.

        >>> SubEpochSim([1], [1], [10], [3], [2], [1], frames_kept=[4]).filtered_fraction
        0.6
        """
        total = sum(self.frames_total)
        return 0.0 if total == 0 else 1.0 - sum(self._kept) / total


def rank_batches(
    lengths: np.ndarray, *, engine: EngineSettings, full_epoch_0idx: int, random_seed_offset: int
) -> Tuple[np.ndarray, np.ndarray]:
    """One rank's sequences as its torch engine trains them in a sub-epoch: in the sub-epoch dataset's order
    (:func:`sub_epoch_seq_order` by the first data key), those ``LenFilterDataPipe`` keeps (:func:`length_filter`),
    cut into batches by ``BatchingIterDataPipe`` (:func:`batch_bounds`).

    :param lengths: the rank's sequence lengths in its files' order, shape [num_seqs] or [num_seqs, num_data_keys]
    :return: the kept lengths in training order, int64 shape [num_kept, num_data_keys], and the batch boundaries
        into them, int64 shape [num_batches + 1]

    >>> x, bounds = rank_batches(np.array([3, 9, 3]), engine=EngineSettings(batch_size=8, max_seq_length=5),
    ...                          full_epoch_0idx=0, random_seed_offset=0)
    >>> x[:, 0].tolist(), bounds.tolist()
    ([3, 3], [0, 2])
    """
    x = _as_2d(lengths)
    order = sub_epoch_seq_order(
        x[:, 0],
        seq_ordering=engine.seq_ordering,
        full_epoch_0idx=full_epoch_0idx,
        random_seed_offset=random_seed_offset,
        fixed_random_seed=engine.fixed_random_seed,
    )
    x = x[order]
    x = x[length_filter(x, min_seq_length=engine.min_seq_length, max_seq_length=engine.max_seq_length)]
    return x, batch_bounds(x, batch_size=engine.batch_size, max_seqs=engine.max_seqs)


def simulate_sub_epoch(
    rank_lengths: Sequence[np.ndarray],
    *,
    engine: EngineSettings,
    full_epoch_0idx: int,
    random_seed_offset: Union[int, Sequence[int]],
) -> SubEpochSim:
    """Every rank's batches, steps and consumption in one sub-epoch of RETURNN's torch engine: the sub-epoch dataset's
    order (:func:`sub_epoch_seq_order`), ``LenFilterDataPipe`` (:func:`length_filter`), ``BatchingIterDataPipe``
    (:func:`batch_bounds`) and the train loop's control syncs (:func:`steps_taken`). Check :func:`inexact_reason`
    first: this function simulates what the settings say.

    :param rank_lengths: per rank, the lengths of its sequences in its files' order (the sub-epoch dataset's index
        order), shape [num_seqs] or [num_seqs, num_data_keys] (the first key orders ``sorted``/``laplace``)
    :param random_seed_offset: the DistributeFilesDataset's ``random_seed_offset``, which its sub-epoch dataset gets
        (one for all ranks, or one per rank: unsharded, RETURNN adds ``rank * 16127``)

    >>> sim = simulate_sub_epoch([np.array([4, 4, 4, 4]), np.array([4, 4])],
    ...                          engine=EngineSettings(max_seqs=1), full_epoch_0idx=0, random_seed_offset=0)
    >>> sim.steps_exact, sim.steps_taken, sim.frames_consumed
    ([4, 2], [2, 2], [8, 8])
    """
    exact, frames_per_batch, seqs_per_batch, frames_total, seqs_total, kept = [], [], [], [], [], []
    offsets = (
        [int(random_seed_offset)] * len(rank_lengths)
        if isinstance(random_seed_offset, (int, np.integer))
        else [int(o) for o in random_seed_offset]
    )
    for lengths, offset in zip(rank_lengths, offsets):
        x = _as_2d(lengths)
        frames_total.append(int(x[:, 0].sum()))
        seqs_total.append(int(x.shape[0]))
        if x.shape[0] == 0:
            exact.append(0)
            kept.append(0)
            frames_per_batch.append(np.zeros(0, dtype=np.int64))
            seqs_per_batch.append(np.zeros(0, dtype=np.int64))
            continue
        x, bounds = rank_batches(x, engine=engine, full_epoch_0idx=full_epoch_0idx, random_seed_offset=offset)
        cum = np.concatenate([[0], np.cumsum(x[:, 0])])
        kept.append(int(cum[-1]))
        exact.append(len(bounds) - 1)
        frames_per_batch.append(np.diff(cum[bounds]))
        seqs_per_batch.append(np.diff(bounds))
    taken = steps_taken(
        exact,
        torch_distributed=engine.torch_distributed,
        accum_grad_multiple_step=engine.accum_grad_multiple_step,
        ranks_per_node=engine.ranks_per_node,
    )
    return SubEpochSim(
        steps_exact=exact,
        steps_taken=taken,
        frames_total=frames_total,
        frames_consumed=[int(f[:t].sum()) for f, t in zip(frames_per_batch, taken)],
        seqs_total=seqs_total,
        seqs_consumed=[int(s[:t].sum()) for s, t in zip(seqs_per_batch, taken)],
        frames_kept=kept,
    )


def sub_epoch_random_seed_offset(settings: Any, *, shard_index: int) -> int:
    """The ``random_seed_offset`` a rank's DistributeFilesDataset hands its sub-epoch datasets
    (``extend_dataset_dict_from_parent_dataset``): its own, ``Dataset._get_default_random_seed_offset`` --
    the config's ``dataset_random_seed_offset``, plus ``rank * 16127`` where unsharded without an offset in the
    dataset dict -- for a :class:`PlanSettings` ``settings``.

    >>> from i6_shard.core.pure.settings import PlanSettings
    >>> sub_epoch_random_seed_offset(PlanSettings(num_shards=4, partition_epoch=2, distrib_shard_files=False,
    ...                                           random_seed_offset=3), shard_index=2)
    32257
    """
    return int(settings.random_seed_offset) + (
        shard_index * UNSHARDED_RANK_SEED_STRIDE if settings.per_rank_seed_offset else 0
    )

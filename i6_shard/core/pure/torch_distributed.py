"""The reader of a config's ``torch_distributed`` that refuses what RETURNN refuses at start-up, when the graph is
built: ``returnn.torch.distributed.get_ctx``, ``DistributedContext.__init__`` and ``_parse_sync_levels``."""

from __future__ import annotations

from typing import Any, List, Optional

from .args import MAX_SETTING_DEPTH, nesting_depth
from .text import short_repr

__all__ = ["check_torch_distributed", "DATASET_DISTRIBUTIONS"]

#: Options ``DistributedContext`` reads whatever the reduce type (``_check_no_unknown_opts`` refuses others).
_ALWAYS_READ = frozenset(
    {
        "backend",
        "timeout_sec",
        "reduce_type",
        "param_sync_step",
        "sync",
        "sync_complete_frac",
        "sync_at_epoch_end",
        "dataset_distribution",
    }
)
#: Read only under a reduce type: ``sync_on_cpu``/``sync_optimizer_state`` for "param", ``class``/``options``
#: (DistributedDataParallel's) for "grad".
_READ_FOR = {"param": frozenset({"sync_on_cpu", "sync_optimizer_state"}), "grad": frozenset({"class", "options"})}
_REDUCE_TYPES = ("grad", "grad_explicit", "param")
_LEVEL_KEYS = frozenset({"group", "type", "every", "sync_on_cpu", "sync_optimizer_state"})


#: ``torch_distributed``'s ``dataset_distribution`` values, RETURNN's default first (``get_dataset_distribution``).
DATASET_DISTRIBUTIONS = ("random_seed_offset", "shard")


def _bad(what: str, value: Any, fix: str) -> str:
    return f"torch_distributed {what}={short_repr(value, limit=80)}: {fix}"


def check_torch_distributed(
    opts: Any, *, num_ranks: Optional[int] = None, ranks_per_node: Optional[int] = None
) -> None:
    """Refuse a ``torch_distributed`` that RETURNN's torch engine refuses when it starts: ``get_ctx`` (a dict),
    ``DistributedContext.__init__`` (``reduce_type``, ``param_sync_step``, ``sync`` exclusive with
    ``reduce_type``, ``_check_no_unknown_opts``), ``get_dataset_distribution`` and ``_parse_sync_levels``
    (each level's ``group``, ``type`` and ``every``; the groups against ``num_ranks`` when it is given, node groups
    as blocks of ``ranks_per_node`` as torchrun numbers them; without it node groups are not checked).
    ``None`` (no torch distributed) passes. RETURNN compares ``reduce_type`` with ``==``, so ``0`` or ``""`` is
    not the default "grad": it is refused, as RETURNN refuses it.

    :raises TypeError: for a ``torch_distributed`` or a ``sync`` level that is not a dict
    :raises ValueError: naming the option and the values RETURNN takes

    >>> check_torch_distributed({"reduce_type": "param", "param_sync_step": 100})
    >>> check_torch_distributed({"reduce_type": ""})
    Traceback (most recent call last):
    ...
    ValueError: torch_distributed reduce_type='': RETURNN refuses it at start-up (invalid reduce_type); give 'grad' (the default), 'grad_explicit' or 'param', or sync levels
    """
    if opts is None:
        return
    depth = nesting_depth(opts)
    if depth > MAX_SETTING_DEPTH:
        raise ValueError(
            f"torch_distributed nests dicts and lists more than {MAX_SETTING_DEPTH} levels deep (sync levels of rank "
            "lists need 5): give it as the config has it, e.g. {'reduce_type': 'param', 'param_sync_step': 100}"
        )
    if not isinstance(opts, dict):  # get_ctx: assert isinstance(opts, dict)
        raise TypeError(
            f"torch_distributed={short_repr(opts, limit=80)} ({type(opts).__name__}): RETURNN needs a dict (or None "
            "for no torch distributed); give e.g. {} or {'reduce_type': 'param', 'param_sync_step': 100}"
        )
    reduce_type, spec = opts.get("reduce_type"), opts.get("sync")
    if spec is not None:
        if reduce_type is not None:
            raise ValueError(_bad("reduce_type", reduce_type, "sync and reduce_type are exclusive; give one"))
        reduce_type = "sync"
    elif reduce_type is None:
        reduce_type = "grad"
    if reduce_type == "param":
        step = opts.get("param_sync_step")
        if not isinstance(step, int) or step <= 0:  # RETURNN takes True as the int 1, as isinstance does
            raise ValueError(
                _bad(
                    "param_sync_step",
                    step,
                    "reduce_type 'param' needs param_sync_step as a positive int (steps between param syncs)",
                )
            )
    elif reduce_type != "sync" and reduce_type not in _REDUCE_TYPES:
        raise ValueError(
            _bad(
                "reduce_type",
                reduce_type,
                "RETURNN refuses it at start-up (invalid reduce_type); give 'grad' (the default), "
                "'grad_explicit' or 'param', or sync levels",
            )
        )
    if reduce_type == "sync":
        _check_levels(spec, num_ranks=num_ranks, ranks_per_node=ranks_per_node)
    dist = opts.get("dataset_distribution", DATASET_DISTRIBUTIONS[0])
    if dist not in DATASET_DISTRIBUTIONS:
        raise ValueError(_bad("dataset_distribution", dist, "RETURNN takes 'random_seed_offset' or 'shard'"))
    known = _ALWAYS_READ | _READ_FOR.get(reduce_type, frozenset())
    unknown = [k for k in opts if k not in known]
    if unknown:
        raise ValueError(
            f"torch_distributed has options RETURNN does not read under reduce_type {reduce_type!r}: "
            f"{short_repr(unknown, limit=120)} (CollectionReadCheckCovered.assert_all_read fails at start-up); "
            f"remove them or fix their names ({', '.join(sorted(known))})"
        )


def _check_levels(spec: Any, *, num_ranks: Optional[int], ranks_per_node: Optional[int]) -> None:
    """``_parse_sync_levels`` as far as it does not need the hosts: dict levels with ``group`` and ``type``, no other
    keys, type "grad" (only first, every 1) or "param", ``every`` a positive int and a multiple of an inner param
    level's; with ``num_ranks``, an int group divides it, a list of groups is a partition of the ranks, and each
    group of a level lies inside one group of the next (node groups: blocks of ``ranks_per_node``, if given)."""
    if not isinstance(spec, (list, tuple)):
        raise TypeError(_bad("sync", spec, "give a list of levels, e.g. [{'group': 'world', 'type': 'grad'}]"))
    if not spec:
        raise ValueError(_bad("sync", spec, "RETURNN needs at least one level"))
    inner_param_every, inner_groups = None, None
    for idx, level in enumerate(spec):
        what = f"sync level {idx}"
        if not isinstance(level, dict):
            raise TypeError(_bad(what, level, "a level is a dict with group and type"))
        if "group" not in level or "type" not in level:
            raise ValueError(_bad(what, level, "group and type are required"))
        kind, every, group = level["type"], level.get("every", 1), level["group"]
        allowed = _LEVEL_KEYS if kind == "param" else _LEVEL_KEYS - {"sync_on_cpu", "sync_optimizer_state"}
        extra = [k for k in level if k not in allowed]
        if extra:
            raise ValueError(_bad(what, level, f"RETURNN does not read {short_repr(extra, limit=80)} in it"))
        if kind not in ("grad", "param"):
            raise ValueError(_bad(f"{what} type", kind, "RETURNN takes 'grad' or 'param'"))
        if not isinstance(every, int) or every <= 0:
            raise ValueError(_bad(f"{what} every", every, "give a positive int"))
        if kind == "grad" and (idx != 0 or every != 1):
            raise ValueError(_bad(what, level, "a grad level runs every step: only the first level, with every 1"))
        if kind == "param" and inner_param_every is not None and every % inner_param_every:
            raise ValueError(
                _bad(f"{what} every", every, f"must be a multiple of the inner level's {inner_param_every}")
            )
        inner_param_every = every if kind == "param" else inner_param_every
        groups = _group_ranks(group, what=what, num_ranks=num_ranks, ranks_per_node=ranks_per_node)
        if groups is not None and inner_groups is not None:
            for ranks in inner_groups:
                if not any(set(ranks) <= set(outer) for outer in groups):
                    raise ValueError(_bad(f"{what} group", group, f"the inner level's group {ranks} is not inside one"))
        inner_groups = groups


def _group_ranks(
    group: Any, *, what: str, num_ranks: Optional[int], ranks_per_node: Optional[int]
) -> Optional[List[List[int]]]:
    """``_make_group_ranks``: "world", "node", an int dividing the world size, or a partition of the ranks; the
    groups (None where ``num_ranks`` or, for "node", ``ranks_per_node`` is unknown)."""
    if group == "world":
        return None if num_ranks is None else [list(range(num_ranks))]
    if group == "node":
        if num_ranks is None or ranks_per_node is None:
            return None
        return [list(range(s, min(s + ranks_per_node, num_ranks))) for s in range(0, num_ranks, ranks_per_node)]
    if isinstance(group, int):
        if group <= 0 or (num_ranks is not None and num_ranks % group):
            raise ValueError(_bad(f"{what} group", group, f"a group size must be positive and divide {num_ranks}"))
        return None if num_ranks is None else [list(range(s, s + group)) for s in range(0, num_ranks, group)]
    if isinstance(group, (list, tuple)):
        if num_ranks is None:
            return None
        try:
            groups = [sorted(g) for g in group]
            ranks = sorted(sum(groups, []))
        except TypeError:
            ranks = None
        if ranks != list(range(num_ranks)):
            raise ValueError(_bad(f"{what} group", group, f"groups must be a partition of ranks 0..{num_ranks - 1}"))
        return groups
    raise TypeError(_bad(f"{what} group", group, "give 'world', 'node', a group size or a list of rank lists"))

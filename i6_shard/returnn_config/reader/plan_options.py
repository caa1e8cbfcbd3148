"""The training's batching and sync as plan options (``PlanRequest.from_options``' names), read the way RETURNN's
torch engine reads them, in one function (:func:`engine_plan_options`); what cannot be passed exactly is named."""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...core.pure import EngineSettings


class InexactPlanWarning(UserWarning):
    """A setting of the training's config that the plan cannot take exactly (it names the setting and what the plan
    assumes instead)."""


def warn_inexact(notes: Sequence[str], *, where: str, stacklevel: int = 3) -> None:
    """One :class:`InexactPlanWarning` naming every setting of ``notes`` (none without notes)."""
    if notes:
        warnings.warn(
            f"{where}: the plan is not exactly this training's: " + "; ".join(notes), InexactPlanWarning, stacklevel
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _limit(value: Any, *, name: str, notes: List[str], unset: Tuple[Any, ...] = (None,)) -> Optional[int]:
    """An int limit of the config as the plan takes it (``batch_size`` frames, ``max_seqs``), or None: unset (a
    value of ``unset``), or not passed exactly (then a note names it). A dict by data key (RETURNN's ``NumbersDict``)
    with one key gives that key's limit, which the plan applies to the lengths of its costs archive."""
    if any(value is u for u in unset) or (_is_int(value) and value in unset):
        return None
    if _is_int(value):
        return value
    if isinstance(value, Mapping) and len(value) == 1 and _is_int(next(iter(value.values()))):
        ((key, limit),) = value.items()
        notes.append(
            f"{name}={dict(value)!r} limits data key {key!r} only: the plan applies {limit} to the sequence lengths "
            f"of its costs archive, which must be those of {key!r}"
        )
        return limit
    notes.append(
        f"{name}={value!r} is not passed to the plan (it takes an int, or a dict of one data key): its prediction "
        f"assumes no {name}"
    )
    return None


def _accum(value: Any, notes: List[str]) -> Optional[int]:
    """``accum_grad_multiple_step`` as ``Engine.train_epoch`` reads it: an int (``typed_dict`` or ``config.int``,
    default 1), or a callable, which a plan cannot take."""
    if value is None or _is_int(value):
        return value
    notes.append(
        f"accum_grad_multiple_step={value!r} is not passed to the plan (it takes an int; a callable decides per "
        "step): its prediction assumes an update, and a sync count, in every step"
    )
    return None


def engine_plan_options(engine: EngineSettings) -> Tuple[Dict[str, Any], List[str]]:
    """The training's batching and sync as plan options, and a note for each setting the plan cannot take exactly.

    From the one description of the training's engine (:func:`~.engine.read_engine`, as RETURNN's torch engine reads
    the config): ``batch_size`` (an int, or a dict of one data key) and ``max_seqs`` (-1: no limit) as
    ``get_batching_iterable_dataset_from_config``; ``max_seq_length`` (and ``min_seq_length``) as ``Engine.__init__``
    (an int, or a dict by data key, for ``LenFilterDataPipe``); ``accum_grad_multiple_step`` as
    ``Engine.train_epoch``; ``torch_distributed`` as a whole (sync levels included). Settings the plan request has no
    option for (``min_seq_length``, ``chunking``, ...) are not passed: the plan's verdict names them
    (:func:`~.engine.engine_reasons`).

    :return: ``(options, notes)``

    >>> opts, notes = engine_plan_options(EngineSettings(batch_size=2000, accum_grad_multiple_step=2))
    >>> opts
    {'batch_size': 2000, 'accum_grad_multiple_step': 2}
    >>> engine_plan_options(EngineSettings(batch_size_by_key={"data": 2000, "classes": 50}))[1]
    ["batch_size={'data': 2000, 'classes': 50} is not passed to the plan (it takes an int, or a dict of one data key): its prediction assumes no batch_size"]
    """
    notes: List[str] = []
    batch_size = engine.stated_batch_size
    options: Dict[str, Any] = {
        "batch_size": _limit(batch_size, name="batch_size", notes=notes, unset=(None, -1)),
        "max_seqs": _limit(engine.max_seqs, name="max_seqs", notes=notes, unset=(None, -1)),
        "accum_grad_multiple_step": _accum(engine.accum_grad_multiple_step, notes),
    }
    max_seq_length = engine.stated_max_seq_length
    if max_seq_length:  # Engine.__init__: ``typed_value(...) or config.int(...)``, so 0 is no filter
        options["max_seq_length"] = dict(max_seq_length) if isinstance(max_seq_length, Mapping) else max_seq_length
    # (min_seq_length and the batching options the plan has none of are the verdict's: ``engine_reasons``)
    if engine.torch_distributed is not None:  # the whole dict: the request reads its sync levels
        options["torch_distributed"] = dict(engine.torch_distributed)
    return {k: v for k, v in options.items() if v is not None}, notes

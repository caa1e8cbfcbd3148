"""How the torch ranks synchronize, as ``returnn.torch.distributed.DistributedContext.__init__`` reads a
config's ``torch_distributed`` (``reduce_type``, ``param_sync_step``, ``sync`` levels) and the engine's
control sync (``Engine.train_epoch``) ends an epoch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

from ...core.pure import DEFAULT_REDUCE_TYPE, SyncMode, ranks_stop_together


@dataclass(frozen=True)
class _SyncRule:
    """How the torch ranks synchronize, as ``returnn.torch.distributed.DistributedContext.__init__`` reads
    ``torch_distributed``: ``reduce_type`` ``"grad"`` (DistributedDataParallel, the default),
    ``"grad_explicit"``, ``"param"`` (params averaged every ``param_sync_step`` steps) or ``sync`` levels.
    The engine's control sync (``Engine.train_epoch``, ``control_sync_levels``) ends the epoch of a group
    when one of its ranks runs out, at that group's syncs only: under grad sync in every step; under a
    param level a rank that runs out stops, and the others go on to their next sync
    (``DistributedContext.step_after_epoch`` then evens out the checkpoint state). A building step of the reader:
    the training's engine is one description (``read_engine``), whose sync this reads.

    :ivar reduce_type: ``"grad"``, ``"grad_explicit"``, ``"param"`` or ``"sync"`` (``sync`` levels given)
    :ivar levels: ``((group, type, every), ...)``, inner to outer, as ``_parse_sync_levels`` gets them
        (empty for ``"grad"``: DistributedDataParallel syncs every step)
    :ivar sync_complete_frac: the option, or its default ``behavior_version >= 33``
    :ivar sync_at_epoch_end: the option, or its default ``behavior_version >= 38``
    :ivar torch_distributed: the config's ``torch_distributed`` as written (not compared)
    """

    reduce_type: str = DEFAULT_REDUCE_TYPE
    levels: Tuple[Tuple[Any, str, int], ...] = ()
    sync_complete_frac: bool = False
    sync_at_epoch_end: bool = False
    torch_distributed: Optional[Mapping[str, Any]] = field(default=None, compare=False, repr=False)

    @property
    def ranks_stop_together(self) -> bool:
        """Whether every rank ends the epoch in the step in which the first runs out (core's
        ``ranks_stop_together``: a world grad sync in every step), rather than at its group's next param sync."""
        if self.torch_distributed is not None:
            return ranks_stop_together(self.torch_distributed)
        return self.reduce_type in ("grad", "grad_explicit") or any(
            g == "world" and t == "grad" for g, t, _ in self.levels
        )

    @property
    def param_sync_every(self) -> Optional[int]:
        """Steps between the outermost param syncs (None: no param level)."""
        every = [e for _, kind, e in self.levels if kind == "param"]
        return every[-1] if every else None

    @property
    def sync_mode(self) -> SyncMode:
        """The sync mode the step and drop model assumes: grad sync where the ranks stop together (or no param
        level says where they stop), else param sync every :attr:`param_sync_every` steps (``sync`` levels
        below it, e.g. a node grad level, are not modelled: they stop a node's ranks together).

        >>> _SyncRule("param", (("world", "param", 100),)).sync_mode
        SyncMode(reduce_type='param', param_sync_step=100)
        """
        every = self.param_sync_every
        return SyncMode() if self.ranks_stop_together or every is None else SyncMode("param", every)


def _sync_rule(opts: Any, *, behavior_version: int) -> Optional["_SyncRule"]:
    """``DistributedContext.__init__``'s reading of the sync options (None: no torch_distributed).

    >>> _sync_rule({"reduce_type": "param", "param_sync_step": 100}, behavior_version=24).levels
    (('world', 'param', 100),)
    """
    if not isinstance(opts, Mapping):
        return None
    reduce_type, spec = opts.get("reduce_type"), opts.get("sync")
    if spec is not None:
        if reduce_type is not None:
            raise ValueError(f"torch_distributed: sync and reduce_type={reduce_type!r} are exclusive; give one")
        if not isinstance(spec, (list, tuple)) or not spec or not all(isinstance(x, Mapping) for x in spec):
            raise TypeError(
                f"torch_distributed sync={spec!r} must be a non-empty list of level dicts, e.g. "
                "[{'group': 'node', 'type': 'grad'}, {'group': 'world', 'type': 'param', 'every': 100}]"
            )
        reduce_type = "sync"
        levels = tuple((x.get("group"), x.get("type"), x.get("every", 1)) for x in spec)
    else:
        reduce_type = reduce_type or "grad"
        if reduce_type == "param":
            step = opts.get("param_sync_step")
            if not isinstance(step, int) or isinstance(step, bool) or step < 1:
                raise ValueError(
                    f"torch_distributed reduce_type 'param' needs param_sync_step as a positive int, got {step!r}"
                )
            levels = (("world", "param", step),)
        elif reduce_type == "grad_explicit":
            levels = (("world", "grad", 1),)
        elif reduce_type == "grad":
            levels = ()
        else:
            raise ValueError(
                f"torch_distributed reduce_type={reduce_type!r}; RETURNN takes 'grad', 'grad_explicit' or 'param'"
            )
    complete, at_end = opts.get("sync_complete_frac"), opts.get("sync_at_epoch_end")
    return _SyncRule(
        reduce_type=reduce_type,
        levels=levels,
        sync_complete_frac=behavior_version >= 33 if complete is None else bool(complete),
        sync_at_epoch_end=behavior_version >= 38 if at_end is None else bool(at_end),
        torch_distributed=opts,
    )

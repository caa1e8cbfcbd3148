"""The plan file: a deterministic ``.npz`` with the settings, keys, sizes and, per full
epoch, the file order and bin boundaries; readable with numpy alone."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

import numpy as np

from .npz import decode_keys, encode_keys, load_npz, save_npz
from ..pure.plan import ShardPlan
from ..pure.settings import PlanSettings
from .progress import Progress
from ..pure.stats import num_full_epochs_for

__all__ = ["PLAN_FORMAT_VERSION", "PlanFile", "plan_arrays", "save_plan", "load_plan", "read_plan_file"]

PLAN_FORMAT_VERSION = 1

#: Scalar arrays of the plan file, one per PlanSettings field (texts as str scalars, fixed_random_seed as
#: shape [0] or [1]); same_seed_on_all_ranks is stored only when True, so that plans without it keep
#: their bytes and older files load unchanged.
_SETTINGS_ARRAYS = ("num_shards", "partition_epoch", "num_epochs", "random_seed_offset", "fixed_random_seed",
                    "distrib_shard_files", "seq_ordering", "distribution")
_ARRAYS = {"format_version", "keys_utf8", "sizes", "orders", "bounds", *_SETTINGS_ARRAYS}
_OPTIONAL_FLAGS = ("same_seed_on_all_ranks",)


def _settings_arrays(settings: PlanSettings) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for name, value in settings.as_dict().items():
        if name == "fixed_random_seed":
            out[name] = np.array([] if value is None else [value], dtype=np.int64)
        elif isinstance(value, bool):
            out[name] = np.array(value, dtype=bool)
        elif isinstance(value, int):
            out[name] = np.array(value, dtype=np.int64)
        else:
            out[name] = np.array(value)
    return out


def _settings_from_arrays(data: Mapping[str, np.ndarray]) -> PlanSettings:
    kwargs = {}
    for name in (f.name for f in dataclasses.fields(PlanSettings)):
        if name not in data:
            continue  # an optional flag that is False
        value = data[name]
        if name == "fixed_random_seed":
            kwargs[name] = int(value[0]) if value.shape == (1,) else None
        elif value.dtype == bool:
            kwargs[name] = bool(value)
        elif value.dtype.kind in "iu":
            kwargs[name] = int(value)
        else:
            kwargs[name] = str(value)
    return PlanSettings(**kwargs)


def plan_arrays(plan: ShardPlan) -> Dict[str, np.ndarray]:
    """The arrays of the plan file for sub-epochs ``1..plan.settings.num_epochs``.

    - ``orders``: shape [num_full_epochs, num_layouts, num_files], uint32 (int64 beyond 2**32 files):
      file entry indices in the order RETURNN cuts them; ``num_layouts`` is 1 when sharded (all ranks
      share it) and ``num_shards`` unsharded (one per rank);
    - ``bounds``: int64, shape [num_full_epochs, num_layouts, num_bins + 1]; bin b of full epoch k is
      ``orders[k, l, bounds[k, l, b]:bounds[k, l, b + 1]]``. Sharded, rank r reads bin
      ``r * partition_epoch + (epoch - 1) % partition_epoch`` in sub-epoch ``epoch``; unsharded, rank r
      reads bin ``(epoch - 1) % partition_epoch`` of layout r;
    - ``keys_utf8`` (NUL-joined UTF-8 keys), ``sizes`` (int64 costs), and the settings, one array each.

    >>> plan = ShardPlan(["a", "b", "c"], [1, 2, 3],
    ...                  PlanSettings(num_shards=1, partition_epoch=3, num_epochs=4, seq_ordering="default"))
    >>> arrs = plan_arrays(plan)
    >>> arrs["orders"].shape, arrs["bounds"][1, 0].tolist()
    ((2, 1, 3), [0, 1, 2, 3])
    """
    settings = plan.settings
    if settings.num_epochs is None:
        raise ValueError("the plan's settings have num_epochs=None; a plan file covers a fixed number of "
                         "sub-epochs: set num_epochs in PlanSettings")
    num_full = num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch)
    num_layouts = settings.num_layouts
    dtype = np.uint32 if plan.num_files < 2**32 else np.int64
    orders = np.empty((num_full, num_layouts, plan.num_files), dtype=dtype)
    bounds = np.empty((num_full, num_layouts, settings.num_bins + 1), dtype=np.int64)
    progress = Progress("plan", total=num_full * num_layouts,
                        unit="full epochs" if num_layouts == 1 else "full epochs x ranks")
    for k in range(num_full):
        for r in range(num_layouts):
            orders[k, r], bounds[k, r] = plan.layout(full_epoch_0idx=k, shard_index=r)
            progress.add(1)
    progress.close()
    return {
        **_settings_arrays(settings),
        "format_version": np.array(PLAN_FORMAT_VERSION, dtype=np.int64),
        "keys_utf8": encode_keys(plan.keys),
        "sizes": plan.costs,
        "orders": orders,
        "bounds": bounds,
    }


def save_plan(plan: ShardPlan, path: str | os.PathLike) -> None:
    """Write the plan file (atomically, deterministic bytes); see :func:`plan_arrays` for its arrays."""
    save_npz(path, plan_arrays(plan))


@dataclass(frozen=True)
class PlanFile:
    """A loaded plan file: the plan (its settings hold the ``num_epochs`` it was written for) and
    the stored layouts (see :func:`plan_arrays` for ``orders`` and ``bounds``)."""

    plan: ShardPlan
    orders: np.ndarray
    bounds: np.ndarray

    @property
    def num_epochs(self) -> int:
        return self.plan.settings.num_epochs

    def layout(self, full_epoch_0idx: int, shard_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """Stored ``(order, bounds)`` of a full epoch, like :meth:`ShardPlan.layout`."""
        r = 0 if self.plan.settings.distrib_shard_files else shard_index
        return self.orders[full_epoch_0idx, r], self.bounds[full_epoch_0idx, r]


def load_plan(path: str | os.PathLike, *, verify: bool = False) -> ShardPlan:
    """The :class:`ShardPlan` stored in a plan file.

    :param verify: recompute every stored full epoch and raise ``ValueError`` if it differs
        (e.g. a plan written by a different version)
    """
    return read_plan_file(path, verify=verify).plan


def read_plan_file(path: str | os.PathLike, *, verify: bool = False) -> PlanFile:
    """Load a plan file with its stored layouts; ``verify`` as in :func:`load_plan`."""
    path = os.fspath(path)
    data = load_npz(path, kind="plan file",
                    missing=f"plan file {path!r} does not exist; write it with ShardPlanJob "
                            "or `python -m i6_shard plan`")
    flags = set(data) - _ARRAYS
    if not _ARRAYS <= set(data) or not flags <= set(_OPTIONAL_FLAGS):
        raise ValueError(f"{path!r} is not a plan file (arrays {sorted(data)})")
    for name in flags:
        if data[name].shape != () or data[name].dtype != bool or not bool(data[name]):
            raise ValueError(f"{path!r} is corrupt: {name} is {data[name]!r}, expected a True scalar when present")
    version = int(data["format_version"])
    if version != PLAN_FORMAT_VERSION:
        raise ValueError(f"{path!r} has plan format {version}; this i6_shard reads {PLAN_FORMAT_VERSION}")
    sizes = data["sizes"].astype(np.int64, copy=False)
    keys = decode_keys(data["keys_utf8"], num_keys=len(sizes), path=path)
    plan = ShardPlan(keys, sizes, _settings_from_arrays(data))
    settings = plan.settings
    orders, bounds = data["orders"], data["bounds"]
    expected = (num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch),
                settings.num_layouts)
    if orders.shape != expected + (plan.num_files,) or bounds.shape != expected + (settings.num_bins + 1,):
        raise ValueError(f"{path!r} is corrupt: orders {orders.shape} and bounds {bounds.shape} do not fit "
                         f"{expected[0]} full epochs of {plan.num_files} files")
    if verify:
        for k in range(orders.shape[0]):
            for r in range(orders.shape[1]):
                order, bnd = plan.layout(full_epoch_0idx=k, shard_index=r)
                if not (np.array_equal(order, orders[k, r]) and np.array_equal(bnd, bounds[k, r])):
                    raise ValueError(f"{path!r}: full epoch {k} (layout {r}) differs from what this i6_shard "
                                     "computes for the stored settings; re-plan with this version")
    return PlanFile(plan=plan, orders=orders, bounds=bounds)

"""The plan file: a deterministic ``.npz`` with the settings, keys, sizes and, per full
epoch, the file order and bin boundaries; readable with numpy alone, one full epoch at a time."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .npz import _nbytes, decode_keys, encode_keys, open_npz, save_npz
from ..pure.args import MAX_SETTING_DEPTH, nesting_depth
from ..pure.corpora import Corpora
from ..pure.cut import cut_spec
from ..pure.plan import ShardPlan
from ..pure.returnn_features import returnn_version_key
from .plan_integrity import check_stored_layout
from ..pure.settings import PlanSettings
from ..pure.stats import num_full_epochs_for
from ..pure.text import short_repr

__all__ = ["PlanHead", "read_plan_head", "read_plan_layout"]

#: 2: adds ``algorithm_version`` (the ``version`` of the distribution's ``CutSpec`` that cut the bins) and stores
#: ``orders`` and ``bounds`` uncompressed, so that one full epoch is read without the others.
PLAN_FORMAT_VERSION = 2
#: Formats this i6_shard reads; a plan keeps the bins it was written with, whatever the version.
READABLE_PLAN_FORMATS = (1, 2)

#: Scalar arrays of the plan file, one per PlanSettings field (texts as str scalars, fixed_random_seed as
#: shape [0] or [1]); same_seed_on_all_ranks is stored only when True, so that plans without it keep
#: their bytes and older files load unchanged.
_SETTINGS_ARRAYS = (
    "num_shards",
    "partition_epoch",
    "num_epochs",
    "random_seed_offset",
    "fixed_random_seed",
    "distrib_shard_files",
    "seq_ordering",
    "distribution",
)
_ARRAYS = {"format_version", "keys_utf8", "sizes", "orders", "bounds", *_SETTINGS_ARRAYS}
#: Arrays a format adds to :data:`_ARRAYS`.
_FORMAT_ARRAYS = {1: set(), 2: {"algorithm_version"}}
_OPTIONAL_FLAGS = ("same_seed_on_all_ranks",)
#: Float settings stored only when not their default (PlanSettings.as_dict leaves them out then).
_OPTIONAL_FLOATS = ("max_sub_epoch_deviation",)
#: Text settings stored only when not their default ("bytes").
_OPTIONAL_TEXTS = ("unit",)
#: Int settings stored only when not their default (0).
_OPTIONAL_INTS = ("preloaded_sub_epochs",)
#: The engine settings a plan was simulated with (``core.pure.plan_sim.engine_record``), as one JSON text; stored only
#: for a plan made under batching, so that plans without them keep their bytes and older files load unchanged.
ENGINE_SETTINGS_ARRAY = "engine_settings"
#: The corpora of a plan mixed by weight (``Corpora.record()``), as one JSON text; stored only for such a plan, whose
#: ``orders`` then hold one entry per read (each full epoch's first ``bounds[..., -1]``, the rest padding), so that
#: single-corpus plans keep their bytes and older files load unchanged.
CORPORA_ARRAY = "corpora"
#: The RETURNN release whose own cut the plan mirrors (``ShardPlan.returnn_version``), as a text; stored only where
#: given, so that other plans keep their bytes and older files load as cut for the newest release.
RETURNN_VERSION_ARRAY = "returnn_version"
_RECORD_ARRAYS = (ENGINE_SETTINGS_ARRAY, CORPORA_ARRAY, RETURNN_VERSION_ARRAY)


def engine_settings_text(engine: Mapping[str, Any]) -> str:
    """The JSON text a plan file stores its engine settings as (keys sorted: deterministic bytes).

    >>> engine_settings_text({"max_seqs": 20, "batch_size": None})
    '{"batch_size": null, "max_seqs": 20}'
    """
    return json.dumps(dict(engine), sort_keys=True)


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
        elif value.dtype.kind == "f":
            kwargs[name] = float(value)
        else:
            kwargs[name] = str(value)
    return PlanSettings(**kwargs)


def plan_arrays_nbytes(settings: PlanSettings, *, num_files: int) -> int:
    """Bytes of the ``orders`` and ``bounds`` arrays that the plan's bins take for ``num_files``
    files with these settings (computed, nothing allocated).

    >>> plan_arrays_nbytes(PlanSettings(num_shards=1, partition_epoch=1, num_epochs=4_000_000_000), num_files=1)
    80000000000
    """
    if settings.num_epochs is None:
        raise ValueError(
            "the plan's settings have num_epochs=None; a plan file covers a fixed number of "
            "sub-epochs: set num_epochs in PlanSettings"
        )
    num_full = num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch)
    per_layout = num_files * (4 if num_files < 2**32 else 8) + (settings.num_bins + 1) * 8
    return num_full * settings.num_layouts * per_layout


def _physical_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not available on this system
        return None


def check_plan_fits_memory(settings: PlanSettings, *, num_files: int, memory_bytes: Optional[int] = None) -> int:
    """Refuse, before anything is allocated, settings whose plan arrays (:func:`plan_arrays_nbytes`) are
    larger than the machine's memory: the one rule, checked once at the entry of the planning floor
    (:mod:`i6_shard.core.planning`) on every path that makes a plan's arrays.

    :param memory_bytes: the limit (default: this machine's physical memory)
    :return: the bytes the arrays take
    :raises ValueError: naming the size, the settings and the fix

    >>> check_plan_fits_memory(PlanSettings(num_shards=1, partition_epoch=1, num_epochs=4_000_000_000),
    ...                        num_files=1, memory_bytes=2**34)
    Traceback (most recent call last):
    ...
    ValueError: num_epochs=4000000000 with 1 files needs 80,000,000,000 bytes (74.5 GiB) for the plan's arrays (4,000,000,000 full epochs x 1 layouts x (1 files + 2 bin bounds)), more than this machine's memory (17,179,869,184 bytes (16.0 GiB)); plan fewer sub-epochs (num_epochs): the balance of later full epochs is the same as that of the first few
    """
    need = plan_arrays_nbytes(settings, num_files=num_files)
    limit = _physical_memory() if memory_bytes is None else memory_bytes
    if limit is not None and need > limit:
        num_full = num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch)
        raise ValueError(
            f"num_epochs={settings.num_epochs} with {num_files:,} files needs {_nbytes(need)} for the plan's arrays "
            f"({num_full:,} full epochs x {settings.num_layouts} layouts x ({num_files:,} files + "
            f"{settings.num_bins + 1} bin bounds)), more than this machine's memory ({_nbytes(limit)}); plan fewer "
            "sub-epochs (num_epochs): the balance of later full epochs is the same as that of the first few"
        )
    return need


def plan_file_arrays(
    plan: ShardPlan, *, orders: np.ndarray, bounds: np.ndarray, engine: Optional[Mapping[str, Any]] = None
) -> Dict[str, np.ndarray]:
    """The arrays of the plan file, given the plan's bins (cut by the planning floor,
    :func:`i6_shard.core.planning.plan_bins`); nothing is computed here.

    - ``orders``: shape [num_full_epochs, num_layouts, num_files], uint32 (int64 beyond 2**32 files):
      file entry indices in the order RETURNN cuts them; ``num_layouts`` is 1 when sharded (all ranks
      share it) and ``num_shards`` unsharded (one per rank);
    - ``bounds``: int64, shape [num_full_epochs, num_layouts, num_bins + 1]; bin b of full epoch k is
      ``orders[k, l, bounds[k, l, b]:bounds[k, l, b + 1]]``. Sharded, rank r reads bin
      ``r * partition_epoch + (epoch - 1) % partition_epoch`` in sub-epoch ``epoch``; unsharded, rank r
      reads bin ``(epoch - 1) % partition_epoch`` of layout r;
    - ``keys_utf8`` (NUL-joined UTF-8 keys), ``sizes`` (int64 costs), and the settings, one array each;
    - ``engine_settings`` (only with ``engine``): the engine settings the plan was simulated with, a JSON text
      (:func:`engine_settings_text`), which the RETURNN-side dataset compares with the training's config;
    - ``returnn_version`` (only where the plan was cut for a given RETURNN release): that release, a text.
    """
    settings = plan.settings
    extra = {} if engine is None else {ENGINE_SETTINGS_ARRAY: np.array(engine_settings_text(engine))}
    if plan.corpora is not None:
        extra[CORPORA_ARRAY] = np.array(engine_settings_text(plan.corpora.record()))
    if plan.returnn_version is not None:
        extra[RETURNN_VERSION_ARRAY] = np.array(plan.returnn_version)
    return {
        **extra,
        **_settings_arrays(settings),
        "format_version": np.array(PLAN_FORMAT_VERSION, dtype=np.int64),
        "algorithm_version": np.array(cut_spec(settings.distribution).version, dtype=np.int64),
        "keys_utf8": encode_keys(plan.keys),
        "sizes": plan.costs,
        "orders": orders,
        "bounds": bounds,
    }


def save_plan_arrays(arrays: Mapping[str, np.ndarray], path: str | os.PathLike) -> None:
    """Write the plan file of :func:`plan_file_arrays` (atomically, deterministic bytes)."""
    save_npz(path, dict(arrays), kind="plan file", uncompressed=("orders", "bounds"))


@dataclass(frozen=True)
class PlanHead:
    """What a plan file holds besides its layouts: read with :func:`read_plan_head` in memory O(files).

    :ivar settings: the plan's settings (``num_epochs``: what it was written for)
    :ivar keys_utf8: the keys as stored (see :func:`~i6_shard.core.io.npz.encode_keys`)
    :ivar costs: int64 sizes, shape [num_files]
    :ivar format_version: the file's format (see :data:`PLAN_FORMAT_VERSION`)
    :ivar algorithm_version: ``cut_spec(distribution).version`` of the i6_shard that wrote it; None in format 1
    :ivar num_full_epochs: full epochs stored
    :ivar keys: the keys, if read with ``decode_keys=True``
    :ivar engine_settings: the engine settings the plan was simulated with (``core.pure.plan_sim.engine_record``);
        None for a plan made without batching, or written before plans recorded them
    """

    settings: PlanSettings
    keys_utf8: np.ndarray
    costs: np.ndarray
    format_version: int
    algorithm_version: Optional[int]
    num_full_epochs: int
    keys: Optional[List[str]] = None
    engine_settings: Optional[Dict[str, Any]] = None
    corpora: Optional[Corpora] = None
    #: the RETURNN release whose own cut the plan mirrors; None: the newest's (or a file written before plans
    #: recorded it)
    returnn_version: Optional[str] = None

    @property
    def num_files(self) -> int:
        return len(self.costs)

    @property
    def plan(self) -> ShardPlan:
        """The :class:`ShardPlan` (needs the keys decoded)."""
        if self.keys is None:
            raise ValueError("the plan head was read with decode_keys=False; read it with decode_keys=True")
        return ShardPlan(
            self.keys, self.costs, self.settings, corpora=self.corpora, returnn_version=self.returnn_version
        )

    def reads(self, full_epoch_0idx: int) -> Optional[np.ndarray]:
        """How often each file is read in a full epoch of a plan of corpora by weight, else None (once)."""
        if self.corpora is None:
            return None
        return self.corpora.planned_reads(self.settings, full_epoch_0idx=full_epoch_0idx)


@dataclass(frozen=True)
class PlanFile:
    """A loaded plan file: the plan (its settings hold the ``num_epochs`` it was written for) and
    the stored layouts (see :func:`plan_file_arrays` for ``orders`` and ``bounds``)."""

    plan: ShardPlan
    orders: np.ndarray
    bounds: np.ndarray
    format_version: int = PLAN_FORMAT_VERSION
    algorithm_version: Optional[int] = None
    #: the engine settings the plan was simulated with (:attr:`PlanHead.engine_settings`), or None
    engine_settings: Optional[Dict[str, Any]] = None

    @property
    def num_epochs(self) -> int:
        """The training's sub-epochs the plan was written for (those its report covers; the plan also holds the
        ``preloaded_sub_epochs`` after them)."""
        return self.plan.settings.training_num_epochs

    @property
    def served_plan(self) -> ShardPlan:
        """:attr:`plan` serving the stored bins of the full epochs the file holds (:meth:`ShardPlan.serving_stored`):
        what a reader of the training's files compares with; :attr:`plan` cuts them again."""
        return self.plan.serving_stored(self.layout, self.orders.shape[0])

    def layout(self, full_epoch_0idx: int, shard_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """Stored ``(order, bounds)`` of a full epoch, like :meth:`ShardPlan.layout` (without the padding of a
        plan of corpora by weight)."""
        r = 0 if self.plan.settings.distrib_shard_files else shard_index
        bounds = self.bounds[full_epoch_0idx, r]
        return self.orders[full_epoch_0idx, r, : int(bounds[-1])], bounds


def load_plan(path: str | os.PathLike) -> ShardPlan:
    """The :class:`ShardPlan` stored in a plan file (``i6_shard.core.load_plan(path, verify=True)``: with its
    stored bins checked against what this i6_shard cuts, on the planning floor)."""
    return read_plan_file(path).served_plan


def _open_plan(path: str):
    return open_npz(
        path,
        kind="plan file",
        missing=f"plan file {path!r} does not exist; write it with ShardPlanJob or `python -m i6_shard plan`",
    )


_BIG = ("keys_utf8", "sizes", "orders", "bounds")


def _read_format_version(npz, path: str) -> int:
    """The plan file's format version, checked to be one this i6_shard reads."""
    version_h = npz.headers.get("format_version")
    if version_h is None or version_h.shape != () or version_h.dtype.kind not in "iu":
        raise ValueError(f"{path!r} is not a plan file (arrays {sorted(npz.headers)[:20]})")
    version = int(npz.read("format_version"))
    if version not in READABLE_PLAN_FORMATS:
        raise ValueError(
            f"{path!r} has plan format {version}; this i6_shard reads formats {READABLE_PLAN_FORMATS}: "
            "use the i6_shard that wrote it, or re-plan with this one"
        )
    return version


def _read_head(npz, path: str, *, decode: bool = True) -> PlanHead:
    """Check every header against the others, then read the settings, keys and sizes (not the layouts)."""
    headers = npz.headers
    version = _read_format_version(npz, path)
    required = _ARRAYS | _FORMAT_ARRAYS[version]
    optional = {*_OPTIONAL_FLOATS, *_OPTIONAL_TEXTS, *_OPTIONAL_INTS, *_RECORD_ARRAYS}
    flags = set(headers) - required - optional
    if not required <= set(headers) or not flags <= set(_OPTIONAL_FLAGS):
        raise ValueError(f"{path!r} is not a plan file of format {version} (arrays {sorted(headers)[:20]})")
    for name, header in headers.items():  # the settings: scalars (fixed_random_seed: 0 or 1 values)
        if name not in _BIG and math.prod(header.shape) > 1:
            raise ValueError(f"{path!r} is corrupt: {name} has shape {header.shape}, expected a scalar")
    data = {name: npz.read(name) for name in headers if name not in _BIG}
    engine, corpora, returnn_version = _records(data, path)
    for name in flags:
        if data[name].shape != () or data[name].dtype != bool or not bool(data[name]):
            raise ValueError(f"{path!r} is corrupt: {name} is {data[name]!r}, expected a True scalar when present")
    try:
        settings = _settings_from_arrays(data)
    except (ValueError, TypeError) as exc:  # a setting no plan holds: the file is named first
        raise type(exc)(f"{short_repr(path)} holds settings no plan can have: {exc}") from None
    sizes_h, keys_h = headers["sizes"], headers["keys_utf8"]
    if len(sizes_h.shape) != 1 or sizes_h.dtype.kind not in "iu" or keys_h.dtype != np.uint8 or len(keys_h.shape) != 1:
        raise ValueError(
            f"{path!r} is corrupt: sizes {sizes_h.dtype}{list(sizes_h.shape)} and keys_utf8 "
            f"{keys_h.dtype}{list(keys_h.shape)}; expected integer and uint8 vectors"
        )
    num_files = sizes_h.shape[0]
    expected = (
        num_full_epochs_for(settings.num_epochs, partition_epoch=settings.partition_epoch),
        settings.num_layouts,
    )
    orders_h, bounds_h = headers["orders"], headers["bounds"]
    if (
        (orders_h.shape != expected + (num_files,) and corpora is None)
        or orders_h.shape[:2] != expected
        or bounds_h.shape != expected + (settings.num_bins + 1,)
        or orders_h.dtype.kind not in "iu"
        or bounds_h.dtype.kind not in "iu"
    ):
        raise ValueError(
            f"{path!r} is corrupt: orders {orders_h.dtype}{orders_h.shape} and bounds "
            f"{bounds_h.dtype}{bounds_h.shape} do not fit {expected[0]} full epochs of {num_files} "
            "files; nothing of them was read"
        )
    sizes = npz.read("sizes").astype(np.int64, copy=False)
    blob = npz.read("keys_utf8")
    keys = decode_keys(blob, num_keys=num_files, path=path) if decode else None
    algorithm = int(data["algorithm_version"]) if "algorithm_version" in data else None
    return PlanHead(
        settings=settings,
        keys_utf8=blob,
        costs=sizes,
        format_version=version,
        algorithm_version=algorithm,
        num_full_epochs=expected[0],
        keys=keys,
        engine_settings=engine,
        corpora=corpora,
        returnn_version=returnn_version,
    )


def _returnn_version(value: Optional[np.ndarray], path: str) -> Optional[str]:
    """The stored RETURNN release whose cut the plan mirrors, or None (the newest's)."""
    if value is None:
        return None
    text = str(value) if value.dtype.kind == "U" else ""
    try:
        returnn_version_key(text)
    except ValueError:
        raise ValueError(
            f"{path!r} is corrupt: returnn_version is {short_repr(value)}, expected a RETURNN version text such "
            "as '1.20240620.64807'; re-plan it"
        ) from None
    return text


def _records(data: Dict[str, np.ndarray], path: str) -> tuple:
    """The engine settings, corpora and RETURNN release a plan file records (each None where it records none),
    taken out of ``data``."""
    readers = (_engine_settings, _corpora, _returnn_version)
    return tuple(read(data.pop(name, None), path) for read, name in zip(readers, _RECORD_ARRAYS))


def _corpora(value: Optional[np.ndarray], path: str) -> Optional[Corpora]:
    """The stored corpora by weight (a JSON object text), or None for a single-corpus plan."""
    if value is None:
        return None
    try:
        return Corpora.from_record(json.loads(str(value)) if value.dtype.kind == "U" else None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path!r} is corrupt: {CORPORA_ARRAY} is {short_repr(value)} ({exc})") from None


def _engine_settings(value: Optional[np.ndarray], path: str) -> Optional[Dict[str, Any]]:
    """The stored engine settings (a JSON object text), or None where the plan stores none; settings that nest
    deeper than :data:`MAX_SETTING_DEPTH` are refused before anything walks them recursively."""
    if value is None:
        return None
    deep = f"nests dicts and lists more than {MAX_SETTING_DEPTH} levels deep (a plan stores at most 6)"
    try:
        engine = json.loads(str(value)) if value.dtype.kind == "U" else None
    except ValueError:
        engine = None
    except RecursionError:
        engine = deep
    if isinstance(engine, dict) and nesting_depth(engine) > MAX_SETTING_DEPTH:
        engine = deep
    if engine is deep or not isinstance(engine, dict):
        shown = short_repr(str(value) if value.dtype.kind == "U" else value)
        what = engine if engine is deep else f"is {' '.join(shown.split())}, expected a JSON object"
        raise ValueError(
            f"{path!r} is corrupt: {ENGINE_SETTINGS_ARRAY} {what}; make the plan anew with `plan` or ShardPlanJob"
        )
    return engine


def read_plan_head(path: str | os.PathLike, *, decode_keys: bool = True) -> PlanHead:
    """The settings, keys, sizes, versions and number of full epochs of a plan file, without its layouts
    (memory O(files)).

    :param decode_keys: also decode the keys into ``PlanHead.keys`` (1M keys take a few tenths of a second;
        to check a file list against the plan, compare ``encode_keys(keys)`` with ``keys_utf8`` instead)
    """
    path = os.fspath(path)
    with _open_plan(path) as npz:
        return _read_head(npz, path, decode=decode_keys)


def read_plan_layout(
    path: str | os.PathLike, *, full_epoch_0idx: int, layout_idx: int = 0, num_files: Optional[int] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)`` of one full epoch and layout of a plan file (see :func:`plan_file_arrays`), reading
    only those bytes (format 2; format 1 inflates the layouts before it, in chunks): memory O(files).

    :param layout_idx: 0 when sharded; the rank unsharded
    :param num_files: if given, the number of files the caller expects (checked against the file)
    :raises ValueError: if the file holds no such full epoch or layout, naming what it holds
    """
    path = os.fspath(path)
    with _open_plan(path) as npz:
        orders_h, bounds_h = npz.headers.get("orders"), npz.headers.get("bounds")
        if (
            orders_h is None
            or bounds_h is None
            or len(orders_h.shape) != 3
            or len(bounds_h.shape) != 3
            or orders_h.shape[:2] != bounds_h.shape[:2]
        ):
            raise ValueError(f"{path!r} is not a plan file: no orders/bounds of matching shape")
        num_full, num_layouts, width = orders_h.shape
        head = _read_head(npz, path, decode=False) if CORPORA_ARRAY in npz.headers else None
        planned = width if head is None else head.num_files
        if num_files is not None and planned != num_files:
            raise ValueError(f"{path!r} plans {planned} files, not {num_files}")
        if not 0 <= full_epoch_0idx < num_full or not 0 <= layout_idx < num_layouts:
            raise ValueError(
                f"{path!r} holds full epochs 0..{num_full - 1} of {num_layouts} layouts, not full "
                f"epoch {full_epoch_0idx} of layout {layout_idx}"
            )
        row = full_epoch_0idx * num_layouts + layout_idx
        order, bounds = npz.read_row("orders", row), npz.read_row("bounds", row)
    reads = None if head is None else head.reads(full_epoch_0idx)
    if reads is not None:
        order = order[: max(0, min(int(bounds[-1]), len(order)))]
    check_stored_layout(
        order,
        bounds,
        path=path,
        full_epoch_0idx=full_epoch_0idx,
        layout_idx=layout_idx,
        num_files=planned,
        reads=reads,
        partition_epoch=None if head is None else head.settings.partition_epoch,
    )
    return order.astype(np.int64, copy=False), bounds.astype(np.int64, copy=False)


def read_plan_file(path: str | os.PathLike) -> PlanFile:
    """Load a plan file with its stored layouts (``i6_shard.core.read_plan_file(path, verify=True)`` also checks
    them against what this i6_shard cuts, on the planning floor)."""
    path = os.fspath(path)
    with _open_plan(path) as npz:
        head = _read_head(npz, path)
        orders, bounds = npz.read("orders"), npz.read("bounds")
    for k, r in np.ndindex(*orders.shape[:2]):  # the stored bins, checked as every reader checks them
        reads = head.reads(k)
        check_stored_layout(
            orders[k, r] if reads is None else orders[k, r, : max(0, min(int(bounds[k, r, -1]), orders.shape[2]))],
            bounds[k, r],
            path=path,
            full_epoch_0idx=k,
            layout_idx=r,
            num_files=head.num_files,
            reads=reads,
            partition_epoch=head.settings.partition_epoch,
        )
    plan = head.plan
    return PlanFile(
        plan=plan,
        orders=orders,
        bounds=bounds,
        format_version=head.format_version,
        algorithm_version=head.algorithm_version,
        engine_settings=head.engine_settings,
    )

"""Each sub-epoch's size against its share, in plain view: the sizes, the files that spread them (named) and the
re-chunk that fixes it, as the plan's summary, report and warnings show them."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..pure.cut import cut_spec
from ..pure.flexible import AUTO_DEVIATIONS, DEFAULT_MAX_SUB_EPOCH_DEVIATION
from ..pure.fmt import json_float
from ..pure.plan import ShardPlan
from ..pure.rechunk import RECHUNK_BOUND, max_file_share, rechunk_num_files

__all__ = ["sub_epoch_sizes_summary", "render_sub_epoch_sizes"]

#: Files named in the summary and the report as the cause, the largest first.
_NAMED_FILES = 5
#: Full epochs whose sub-epoch sizes the report lists one row each (the summary holds them all).
_LISTED_FULL_EPOCHS = 6


def sub_epoch_size_ratios(bytes_per_shard: Any, *, partition_epoch: int) -> Optional[np.ndarray]:
    """The size of every sub-epoch of the complete full epochs (its ranks' sum) over the mean sub-epoch of its full
    epoch, shape [num_full_epochs * partition_epoch]; None without a complete full epoch or anything in it.

    >>> sub_epoch_size_ratios([[1, 1], [3, 3], [9, 9]], partition_epoch=2).tolist()
    [0.5, 1.5]
    """
    table = np.asarray(bytes_per_shard, dtype=np.float64).sum(axis=1)
    table = table[: len(table) // partition_epoch * partition_epoch].reshape(-1, partition_epoch)
    if table.size == 0 or not (table.sum(axis=1) > 0).all():
        return None
    return (table / table.mean(axis=1, keepdims=True)).ravel()


def sub_epoch_sizes_summary(plan: ShardPlan, summary: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """``summary["sub_epoch_sizes"]``: each sub-epoch's size over the mean sub-epoch of its full epoch
    (``per_sub_epoch``, ``min``, ``max``, ``spread``), how many are more than ``bound`` off (the 10% a re-chunked corpus
    is made for), the files above a rank's share of a sub-epoch (``share``, in the plan's unit; the cause, named, the
    largest first) and, where sub-epochs stray or drop while a file is above :func:`max_file_share`, the re-chunk
    that fixes it (``rechunk``: the number of files and the command). None for a plan without a complete full epoch.
    """
    p = plan.partition_epoch
    ratios = sub_epoch_size_ratios(summary["per_sub_epoch"]["bytes"], partition_epoch=p)
    if ratios is None or plan.num_files == 0:
        return None
    share = float(plan.costs.sum()) / (plan.num_shards * p)
    shares = plan.costs / share if share > 0 else np.zeros(plan.num_files)
    above = np.flatnonzero(shares > 1)
    above = above[np.argsort(-shares[above], kind="stable")]
    outside = int(np.count_nonzero(np.abs(ratios - 1) > RECHUNK_BOUND + 1e-9))
    out: Dict[str, Any] = {
        "of": "the mean sub-epoch of its full epoch",
        "per_sub_epoch": [json_float(r) for r in ratios],
        "min": json_float(ratios.min()),
        "max": json_float(ratios.max()),
        "spread": json_float(ratios.max() - ratios.min()),
        "bound": RECHUNK_BOUND,
        "outside_bound": outside,
        "share": json_float(share),
        "largest_file_share": json_float(shares.max()),
        "files_above_share": {
            "count": int(above.size),
            "keys": [plan.keys[i] for i in above[:_NAMED_FILES].tolist()],
            "shares": [json_float(shares[i]) for i in above[:_NAMED_FILES].tolist()],
        },
        "rechunk": None,
        "trade_off": _trade_off(plan, summary, ratios),
    }
    strays = outside > 0 or summary["dropped_fraction_max"] > 0
    num_files = rechunk_num_files(num_shards=plan.num_shards, partition_epoch=p)
    if strays and plan.settings.distrib_shard_files and shares.max() > max_file_share() and plan.num_files < num_files:
        out["rechunk"] = {
            "num_files": num_files,
            "max_file_share": max_file_share(),
            "command": f"python -m i6_shard rechunk FILE_LIST --num-shards {plan.num_shards} --partition-epoch {p} "
            "-o rechunked",
        }
    return out


def _trade_off(plan: ShardPlan, summary: Mapping[str, Any], ratios: np.ndarray) -> Optional[Dict[str, Any]]:
    """What a distribution that moves data between sub-epochs gave up where zero drop and even sub-epochs did not
    both hold: ``kept`` "the bound" (a bound given: ``dropped_max``, the worst sub-epoch's drop, exact where the
    batching was simulated) or "zero drop" (none given: ``off_max``, how far the farthest sub-epoch is off the mean);
    None where both hold or the distribution keeps sub-epochs about the mean."""
    settings = plan.settings
    kind = cut_spec(settings.distribution).sub_epoch_bound
    if kind is None:
        return None
    given = settings.max_sub_epoch_deviation
    bounded = kind == "given" or given != DEFAULT_MAX_SUB_EPOCH_DEVIATION
    bound = given if bounded else AUTO_DEVIATIONS[-1]
    dropped = summary.get("dropped_fraction_predicted_max", summary["dropped_fraction_max"])
    off = float(np.abs(ratios - 1).max())
    if dropped > 0 and bounded:
        return {"kept": "the bound", "bound": bound, "dropped_max": json_float(dropped), "off_max": json_float(off)}
    if off > RECHUNK_BOUND + 1e-9 and not bounded:
        return {"kept": "zero drop" if dropped == 0 else "neither", "bound": bound, "dropped_max": json_float(dropped),
                "off_max": json_float(off)}  # fmt: skip
    return None


def add_frame_sizes(summary: Dict[str, Any], simulation: Optional[Mapping[str, Any]], *, partition_epoch: int) -> None:
    """Where the plan balances another unit than frames (steps, sequences) and the training was simulated exactly:
    ``summary["sub_epoch_sizes"]["frames"]``, each sub-epoch's frames over the mean of its full epoch (``per_sub_epoch``,
    ``min``, ``max``, ``spread``, ``outside_bound``), the unit the bound of a re-chunked corpus is stated in."""
    sizes = summary.get("sub_epoch_sizes")
    frames = None if simulation is None else simulation.get("frames")
    if not sizes or frames is None or summary.get("unit") == "frames":
        return
    ratios = sub_epoch_size_ratios(np.asarray(frames)[:, None], partition_epoch=partition_epoch)
    if ratios is not None:
        sizes["frames"] = {
            "per_sub_epoch": [json_float(r) for r in ratios],
            "min": json_float(ratios.min()),
            "max": json_float(ratios.max()),
            "spread": json_float(ratios.max() - ratios.min()),
            "outside_bound": int(np.count_nonzero(np.abs(ratios - 1) > RECHUNK_BOUND + 1e-9)),
        }


def update_trade_off(plan: ShardPlan, summary: Dict[str, Any]) -> None:
    """``summary["sub_epoch_sizes"]["trade_off"]`` anew, once the summary holds the drop predicted under the batching
    (the exact simulation's where it ran), which :func:`_trade_off` then takes instead of the cost formula's."""
    sizes = summary.get("sub_epoch_sizes")
    if sizes:
        sizes["trade_off"] = _trade_off(plan, summary, np.asarray(sizes["per_sub_epoch"], dtype=np.float64))


def render_sub_epoch_sizes(summary: Mapping[str, Any]) -> List[str]:
    """The report's section of ``summary["sub_epoch_sizes"]`` (none without it)."""
    sizes = summary.get("sub_epoch_sizes")
    if not sizes:
        return []
    p = summary["settings"]["partition_epoch"]
    ratios = sizes["per_sub_epoch"]
    bound = f"{100 * sizes['bound']:g}%"
    lines = [
        "",
        f"Sub-epoch sizes (each sub-epoch's {summary.get('unit', 'bytes')} over {sizes['of']})",
        f"  min {sizes['min']:.3f}, max {sizes['max']:.3f}, spread {sizes['spread']:.3f}; "
        f"{sizes['outside_bound']} of {len(ratios)} sub-epochs more than {bound} off",
    ]
    frames = sizes.get("frames")
    if frames:
        lines.append(
            f"  in frames (simulated): min {frames['min']:.3f}, max {frames['max']:.3f}, spread {frames['spread']:.3f}; "
            f"{frames['outside_bound']} of {len(frames['per_sub_epoch'])} sub-epochs more than {bound} off"
        )
    for f in range(min(len(ratios) // p, _LISTED_FULL_EPOCHS)):
        row = " ".join(f"{r:.2f}" for r in ratios[f * p : (f + 1) * p])
        lines.append(f"  full epoch {f}: {row}")
    if len(ratios) // p > _LISTED_FULL_EPOCHS:
        lines.append(f"  ... ({len(ratios) // p - _LISTED_FULL_EPOCHS} more full epochs in summary.json)")
    return lines + _cause_and_fix(sizes)


def _cause_and_fix(sizes: Mapping[str, Any]) -> List[str]:
    above = sizes["files_above_share"]
    lines = []
    if above["count"]:
        named = ", ".join(f"{k} ({s:.2f}x)" for k, s in zip(above["keys"], above["shares"]))
        more = f" and {above['count'] - len(above['keys'])} more" if above["count"] > len(above["keys"]) else ""
        lines.append(f"  cause: {above['count']} files above a rank's share of a sub-epoch: {named}{more}")
    trade = sizes.get("trade_off")
    if trade and trade["kept"] == "the bound":
        lines.append(
            f"  kept the bound (max_sub_epoch_deviation={trade['bound']:g}) and gave up zero drop: the worst "
            f"sub-epoch drops {100 * trade['dropped_max']:.2f}%"
        )
    elif trade:
        lines.append(
            f"  gave up even sub-epochs{' for zero drop' if trade['kept'] == 'zero drop' else ''}: the farthest is "
            f"{100 * trade['off_max']:.1f}% off the mean; max_sub_epoch_deviation={RECHUNK_BOUND:g} keeps them "
            "within it (then it drops where it must)"
        )
    fix = sizes.get("rechunk")
    if fix:
        lines.append(
            f"  fix: re-chunk into {fix['num_files']} files of even size (none above "
            f"{100 * fix['max_file_share']:g}% of a rank's share; now the largest is "
            f"{sizes['largest_file_share']:.2f}x): {fix['command']}"
        )
    return lines


def sub_epoch_sizes_warning(sizes: Optional[Mapping[str, Any]]) -> Optional[str]:
    """A warning where sub-epochs lie outside the bound: how far, the cause and the fix (or None)."""
    if not sizes or not sizes["outside_bound"]:
        return None
    text = (
        f"uneven sub-epochs: {sizes['outside_bound']} of {len(sizes['per_sub_epoch'])} sub-epochs are more than "
        f"{100 * sizes['bound']:g}% off the mean sub-epoch ({sizes['min']:.2f}x to {sizes['max']:.2f}x); schedules, "
        "checkpoints and the time per sub-epoch count in sub-epochs."
    )
    fix = sizes.get("rechunk")
    if fix:
        text += (
            f" The files are too big for even sub-epochs (the largest {sizes['largest_file_share']:.2f}x a rank's "
            f"share): re-chunk into {fix['num_files']} files: {fix['command']}"
        )
    return text

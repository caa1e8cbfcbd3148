"""The JSON summary and the human-readable text report of a shard plan: settings,
totals, balance per shard, worst sub-epochs, dropped data, other distributions, warnings."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..pure.batching import MILLISTEPS_PER_STEP
from ..pure.cache import CacheFootprint
from ..pure.cut import cut_spec, offered_distributions
from ..planning import CACHE_FIT_FULL_EPOCHS, NOT_COMPUTED
from ..pure.flexible import AUTO_DEVIATIONS, DEFAULT_MAX_SUB_EPOCH_DEVIATION
from ..pure.plan import ShardPlan
from ..pure.stats import PlanStats, dropped_fraction, max_over_mean
from ..pure.unsharded import UnshardedStats
from .corpora import render_corpora
from .prediction import render_prediction
from .sub_epoch_sizes import render_sub_epoch_sizes, sub_epoch_size_ratios, sub_epoch_sizes_summary
from .sub_epoch_sizes import sub_epoch_sizes_warning
from ..pure.fmt import json_float, pct
from ..pure.settings import DEFAULT_DISTRIBUTION
from ..pure.training import DEFAULT_MAX_DROPPED

__all__ = ["render_report", "format_cost"]

SUMMARY_FORMAT_VERSION = 1
#: Warn when some (shard, sub-epoch) bin holds fewer files than this.
FEW_FILES_PER_BIN = 10
#: Warn when the mean expected dropped fraction exceeds this.
HIGH_DROPPED_FRACTION = DEFAULT_MAX_DROPPED  # the training report's alarm, one threshold
#: Warn when some sub-epoch's max/mean bytes across shards exceeds this.
HIGH_IMBALANCE = 1.25
#: Sub-epochs listed under "worst sub-epochs": those that drop the largest share (the headline's "worst").
NUM_WORST = 5


def format_bytes(num_bytes: int) -> str:
    """Bytes in binary units with two decimals.

    >>> format_bytes(0), format_bytes(1536), format_bytes(3 * 2**40)
    ('0 B', '1.50 KiB', '3.00 TiB')
    """
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_cost(value: int, unit: str) -> str:
    """A cost in its unit: bytes as :func:`format_bytes`, steps (stored in milli-steps) with three decimals,
    other units as a plain count.

    >>> format_cost(1536, "bytes"), format_cost(1536, "frames"), format_cost(1536, "steps")
    ('1.50 KiB', '1,536 frames', '1.536 steps')
    """
    if unit == "steps":
        return f"{int(value) / MILLISTEPS_PER_STEP:,.3f} steps"
    return format_bytes(value) if unit == "bytes" else f"{int(value):,} {unit}"


def _distribution_summary(bytes_per_shard: np.ndarray) -> Dict[str, float]:
    drop = dropped_fraction(bytes_per_shard)
    return {
        "dropped_fraction": json_float(drop.mean()),
        "dropped_fraction_max": json_float(drop.max()),
        "max_imbalance": json_float(max_over_mean(bytes_per_shard).max()),
    }


def _checked_compare_num_epochs(compare_num_epochs: Optional[int], stats: PlanStats) -> int:
    if compare_num_epochs is None:
        return stats.num_epochs
    if (
        isinstance(compare_num_epochs, bool)
        or not isinstance(compare_num_epochs, (int, np.integer))
        or not 1 <= compare_num_epochs <= stats.num_epochs
    ):
        raise ValueError(
            f"compare_num_epochs={compare_num_epochs!r} must be an int in 1..{stats.num_epochs} "
            "(the sub-epochs of stats)"
        )
    return compare_num_epochs


def _stats_summary(stats: PlanStats) -> Dict[str, Any]:
    """The summary's figures of the plan's own stats: the headline, per bin, per shard and per sub-epoch."""
    drop, ratio, files = stats.dropped_fraction, stats.max_over_mean, stats.files
    per_shard_bytes = stats.bytes.sum(axis=0)
    per_shard_files = files.sum(axis=0)
    mean_shard = per_shard_bytes.mean()
    dropped_bytes = stats.bytes.sum(axis=1) - stats.num_shards * stats.bytes.min(axis=1)
    worst = np.argsort(-drop, kind="stable")[:NUM_WORST]  # the headline's worst: the largest dropped share
    return {
        "max_imbalance": json_float(ratio.max()),
        "dropped_fraction": json_float(drop.mean()),
        "dropped_fraction_max": json_float(drop.max()),
        "dropped_bytes": int(dropped_bytes.sum()),
        "scheduled_bytes": int(stats.bytes.sum()),
        "files_per_bin": {"min": int(files.min()), "max": int(files.max()), "mean": json_float(files.mean())},
        "bytes_per_bin": {
            "min": int(stats.bytes.min()),
            "max": int(stats.bytes.max()),
            "mean": json_float(stats.bytes.mean()),
        },
        "passes": {
            "min": int(stats.passes.min()),
            "max": int(stats.passes.max()),
            "mean": json_float(stats.passes.mean()),
        },
        "coverage": json_float(stats.full_epoch_coverage),
        "overlap": {"max": int(stats.overlap.max()), "mean": json_float(stats.overlap.mean())},
        "per_shard": [
            {
                "shard_index": r,
                "files": int(per_shard_files[r]),
                "bytes": int(per_shard_bytes[r]),
                "bytes_over_mean": json_float(per_shard_bytes[r] / mean_shard if mean_shard > 0 else 1.0),
                "min_bytes": int(stats.bytes[:, r].min()),
                "max_bytes": int(stats.bytes[:, r].max()),
            }
            for r in range(stats.num_shards)
        ],
        "per_sub_epoch": {
            "bytes": stats.bytes.tolist(),
            "files": files.tolist(),
            "max_over_mean": [json_float(x) for x in ratio.tolist()],
            "dropped_fraction": [json_float(x) for x in drop.tolist()],
            "overlap": stats.overlap.tolist(),
            "coverage": [json_float(x) for x in stats.coverage.tolist()],
        },
        "worst_sub_epochs": [
            {
                "epoch": int(e) + 1,
                "max_over_mean": json_float(ratio[e]),
                "dropped_fraction": json_float(drop[e]),
                "min_bytes": int(stats.bytes[e].min()),
                "max_bytes": int(stats.bytes[e].max()),
            }
            for e in worst.tolist()
        ],
    }


def _distributions(
    plan: ShardPlan, stats: PlanStats, other_distributions: Optional[Mapping[str, Any]], compare_num_epochs: int
) -> Dict[str, Any]:
    """This plan's and every other distribution's drop over the compared sub-epochs (a str: why not)."""
    out: Dict[str, Any] = {plan.settings.distribution: _distribution_summary(stats.bytes[:compare_num_epochs])}
    for name, other in sorted((other_distributions or {}).items()):
        if not isinstance(other, str):
            _check_compared_epochs(f"other_distributions[{name!r}]", other, compare_num_epochs)
        out[name] = other if isinstance(other, str) else _distribution_summary(other.bytes)
    return out


def _other_mode_summary(
    plan: ShardPlan, other_mode: Union[PlanStats, UnshardedStats, str], compare_num_epochs: int
) -> Dict[str, Any]:
    """Plain RETURNN in the other sharding mode, over the compared sub-epochs (or why it cannot plan); where
    only a sample of ranks and sub-epochs was planned, ``sample`` names it."""
    head = {"distrib_shard_files": not plan.settings.distrib_shard_files, "distribution": DEFAULT_DISTRIBUTION}
    if isinstance(other_mode, str):
        return {**head, "not_applicable": other_mode}
    _check_compared_epochs("other_mode", other_mode, compare_num_epochs)
    out = {
        **head,
        **_distribution_summary(other_mode.bytes),
        "overlap_max": int(other_mode.overlap.max()),
        "coverage_mean": json_float(other_mode.coverage.mean()),
    }
    if isinstance(other_mode, UnshardedStats) and not other_mode.exact:
        out["sample"] = {
            "num_ranks": len(other_mode.ranks),
            "of_num_ranks": other_mode.num_shards,
            "ranks": other_mode.ranks.tolist(),
            "num_epochs": other_mode.num_epochs,
            "of_num_epochs": other_mode.asked_num_epochs,
        }
    return out


def summarize(
    plan: ShardPlan,
    stats: PlanStats,
    *,
    other_distributions: Optional[Mapping[str, Any]] = None,
    other_mode: Optional[Union[PlanStats, UnshardedStats, str]] = None,
    compare_num_epochs: Optional[int] = None,
    cache: Optional[Mapping[str, Any]] = None,
    non_contiguous: Optional[Tuple[int, int]] = None,
) -> Dict[str, Any]:
    """The JSON-able summary of ``plan`` over ``stats.num_epochs`` sub-epochs.

    Top-level floats ``max_imbalance`` (max over sub-epochs of max/mean bytes across shards) and
    ``dropped_fraction`` (mean over sub-epochs of ``1 - num_shards * min / sum``) are the headline.

    :param other_distributions: distribution name -> its :class:`PlanStats` on the same files and
        settings over sub-epochs ``1..compare_num_epochs``, or a str saying why it could not be planned
    :param other_mode: stats of RETURNN's own distribution with ``distrib_shard_files`` flipped, over
        the same sub-epochs as ``other_distributions`` (unsharded: possibly on a sample of them and of the
        ranks, which ``other_mode.sample`` then names), or a str saying why that mode cannot plan
    :param compare_num_epochs: sub-epochs the distributions are compared over (default: all)
    :param cache: the per-node cache footprint from :func:`cache_summary`, if asked for; it adds ``cache`` and
        ``cache_peak_bytes_per_node`` (without it, the summary is as before)
    :param non_contiguous: the sub-epochs that took files moved from others (a plan whose distribution counts them:
        ``CutSpec.counts_moved_files``), and the
        sub-epochs counted (from :meth:`~i6_shard.core.planning.PlanOutputs.non_contiguous`)
    """
    compare_num_epochs = _checked_compare_num_epochs(compare_num_epochs, stats)
    summary: Dict[str, Any] = {
        "format_version": SUMMARY_FORMAT_VERSION,
        "settings": {
            **plan.settings.as_dict(),
            "num_files": plan.num_files,
            "total_bytes": int(plan.costs.sum()),
            "num_epochs": stats.num_epochs,
            "num_full_epochs": stats.num_full_epochs,
            # the RETURNN release whose own cut the plan mirrors, where one was given (else the newest's)
            **({} if plan.returnn_version is None else {"returnn_version": plan.returnn_version}),
        },
        "unit": plan.settings.unit,
        **_stats_summary(stats),
        "distributions": _distributions(plan, stats, other_distributions, compare_num_epochs),
        "distributions_num_epochs": int(compare_num_epochs),
    }
    if non_contiguous is not None:
        summary["non_contiguous_sub_epochs"], summary["non_contiguous_of"] = non_contiguous
    if other_mode is not None:
        summary["other_mode"] = _other_mode_summary(plan, other_mode, compare_num_epochs)
    if cache is not None:
        if cache.get("num_epochs") != stats.num_epochs:
            raise ValueError(
                f"cache holds a footprint over {cache.get('num_epochs')} sub-epochs, but the stats are "
                f"over {stats.num_epochs}; compute both over the plan's num_epochs"
            )
        summary["cache"] = dict(cache)
        summary["cache_peak_bytes_per_node"] = int(cache["peak_bytes"])
    sizes = sub_epoch_sizes_summary(plan, summary)
    if sizes is not None:
        summary["sub_epoch_sizes"] = sizes
    summary["warnings"] = plan_warnings(plan, stats, summary)
    return summary


def cache_summary(
    plan: ShardPlan,
    footprint: CacheFootprint,
    *,
    cache_size: Optional[int] = None,
    partition_epoch_fits: Optional[List[Dict[str, Any]]] = None,
) -> Dict[str, Any]:
    """The per-node cache footprint as JSON types (``summary["cache"]``): the settings, the peak and where it
    is reached, per sub-epoch and node the bytes held, files held and bytes read from the shared file system;
    with ``cache_size`` (bytes per node), whether the plan fits and which ``partition_epoch`` values do (see
    :func:`~i6_shard.core.pure.cache.partition_epoch_fits`, computed by the planning floor over
    :data:`~i6_shard.core.planning.CACHE_FIT_FULL_EPOCHS` full epochs; only with ``cached_file``).
    """
    nc = footprint.node_cache
    held, shared = footprint.held_bytes, footprint.shared_fs_bytes
    epoch, node = footprint.peak_place
    out: Dict[str, Any] = {
        **nc.as_dict(),
        "num_nodes": footprint.num_nodes,
        "num_epochs": footprint.num_epochs,
        "peak_bytes": footprint.peak_bytes,
        "peak_epoch": epoch,
        "peak_node": node,
        "held_bytes_mean": json_float(held.mean()),
        "shared_fs_bytes_first": int(shared[0].max()),
        "shared_fs_bytes_mean": json_float(shared.mean()),
        "shared_fs_bytes_max": int(shared.max()),
        "shared_fs_bytes_total": int(shared.sum()),
        "per_sub_epoch": {
            "held_bytes": held.tolist(),
            "held_files": footprint.held_files.tolist(),
            "shared_fs_bytes": shared.tolist(),
        },
    }
    if cache_size is not None:
        out["cache_size"] = int(cache_size)
        out["fits"] = footprint.peak_bytes <= cache_size
        if partition_epoch_fits is not None:
            rows = partition_epoch_fits
            own = {"partition_epoch": plan.partition_epoch, "peak_bytes": footprint.peak_bytes, "fits": out["fits"]}
            out["partition_epochs"] = [own if r["partition_epoch"] == plan.partition_epoch else r for r in rows]
            out["partition_epochs_num_full_epochs"] = CACHE_FIT_FULL_EPOCHS
    return out


def _check_compared_epochs(name: str, other: Union[PlanStats, UnshardedStats], compare_num_epochs: int) -> None:
    asked = other.asked_num_epochs if isinstance(other, UnshardedStats) else getattr(other, "num_epochs", None)
    if not isinstance(other, (PlanStats, UnshardedStats)) or asked != compare_num_epochs:
        got = (
            f"stats over {asked} sub-epochs" if isinstance(other, (PlanStats, UnshardedStats)) else type(other).__name__
        )
        raise ValueError(
            f"{name} holds {got}, but the distributions are compared over compare_num_epochs="
            f"{compare_num_epochs}; compute them with num_epochs={compare_num_epochs} "
            "(or pass a str saying why they cannot be planned)"
        )


def summary_json(summary: Mapping[str, Any]) -> str:
    """The summary as JSON text with sorted keys (floats are already rounded by :func:`summarize`)."""
    return json.dumps(summary, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


def _large_file_warning(plan: ShardPlan, *, unit: str) -> Optional[str]:
    """Files above a rank's share of a sub-epoch (``total / (num_shards * partition_epoch)``): in a sub-epoch of
    about the mean size no split of whole files fills the other ranks up to such a file, and they drop the
    difference. A distribution whose sub-epochs may grow (``CutSpec.sub_epoch_bound``) holds a file of ``x`` shares
    from a deviation of ``x - 1`` (below 1: a file of 2 shares or more cannot be held by any setting): the warning
    names what lets it, or that nothing offered does."""
    settings = plan.settings
    if not settings.distrib_shard_files or plan.num_files == 0:
        return None
    total = int(plan.costs.sum())
    share = total / (plan.num_shards * plan.partition_epoch)
    if share <= 0 or int(plan.costs.max()) <= share:
        return None
    ratio = float(plan.costs.max()) / share
    count = int(np.count_nonzero(plan.costs > share))
    needed = math.ceil((ratio - 1) * 100 + 5) / 100  # 5 points of room: the others' files are whole too
    head = (
        f"{count} file entr{'y holds' if count == 1 else 'ies hold'} more than a rank's share of a sub-epoch "
        f"({format_cost(share, unit)}; the largest {ratio:.2f}x): no split of whole files into sub-epochs of "
        "about equal size fills the other ranks up to such a file, so they drop the difference"
    )
    if needed >= 1:
        return head + ". Split these files (no sub-epoch can grow to hold them), or lower partition_epoch."
    bound = cut_spec(settings.distribution).sub_epoch_bound
    if bound == "chosen":
        if needed <= AUTO_DEVIATIONS[-1]:
            return None
        return (
            head + f". Their sub-epochs would need to grow by {needed:g}, {settings.distribution} lets them grow by "
            f"{AUTO_DEVIATIONS[-1]:g} at most: split these files, or lower partition_epoch."
        )
    if bound is None:
        return head + _growing_distribution_hint(needed)
    if settings.max_sub_epoch_deviation < needed:
        return (
            head + f". Raise max_sub_epoch_deviation to {needed:g} or more (now "
            f"{settings.max_sub_epoch_deviation:g}) so that their sub-epochs can grow to hold them, or lower "
            "partition_epoch."
        )
    return None


def _growing_distribution_hint(needed: float) -> str:
    """The end of the large-file warning of a plan whose sub-epochs keep about the mean size: the offered
    distribution whose sub-epochs grow (``CutSpec.sub_epoch_bound``), where it can grow them by ``needed``."""
    growing = [cut_spec(n) for n in offered_distributions() if cut_spec(n).sub_epoch_bound == "chosen"]
    if not growing or needed > AUTO_DEVIATIONS[-1]:
        return (
            f". Their sub-epochs would need to grow by {needed:g}, more than any distribution offered lets them: "
            "split these files, or lower partition_epoch."
        )
    needs = " (from a costs archive with per-sequence lengths, and the batching)" if growing[0].cuts_with_inputs else ""
    return (
        f". distribution={growing[0].name!r}{needs} lets their sub-epochs grow by up to {AUTO_DEVIATIONS[-1]:g} to "
        "hold them (docs/flexible_split.md), or lower partition_epoch."
    )


def plan_warnings(plan: ShardPlan, stats: PlanStats, summary: Mapping[str, Any]) -> List[str]:
    """Plain-language warnings about a plan (empty if nothing stands out)."""
    out: List[str] = []
    unit = summary.get("unit", "bytes")
    balance = "the byte balance" if unit == "bytes" else f"the balance by {unit}"
    fpb = summary["files_per_bin"]
    if fpb["min"] < FEW_FILES_PER_BIN:
        out.append(
            f"few files per bin: as few as {fpb['min']} (mean {fpb['mean']:.1f}) file entries per "
            f"(shard, sub-epoch); with so few files {balance} is coarse and the shuffle weak. "
            f"Lower partition_epoch, use fewer shards or split the data into more, smaller files."
        )
    if summary["dropped_fraction"] > HIGH_DROPPED_FRACTION:
        out.append(
            f"high expected data loss: on average {100 * summary['dropped_fraction']:.1f}% of each "
            f"sub-epoch's {unit} lie beyond the shortest rank's share and are dropped when it finishes."
        )
    if summary["max_imbalance"] > HIGH_IMBALANCE:
        e = int(np.argmax(summary["per_sub_epoch"]["max_over_mean"])) + 1
        out.append(
            f"unbalanced sub-epochs: in epoch {e} one shard reads {summary['max_imbalance']:.2f}x "
            f"the mean {unit} of all shards."
        )
    large = _large_file_warning(plan, unit=unit)
    if large:
        out.append(large)
    uneven = sub_epoch_sizes_warning(summary.get("sub_epoch_sizes"))
    if uneven:
        out.append(uneven)
    if stats.num_epochs % plan.partition_epoch:
        out.append(
            f"num_epochs={stats.num_epochs} is not a multiple of partition_epoch={plan.partition_epoch}: "
            f"the last full epoch is cut short, so entries are scheduled between "
            f"{summary['passes']['min']} and {summary['passes']['max']} times."
        )
    num_zero = int(np.count_nonzero(plan.costs == 0))
    if num_zero:
        out.append(f"{num_zero} file entries have size 0; they count as empty when balancing.")
    num_dup = plan.num_files - len(set(plan.keys))
    if num_dup:
        out.append(f"{num_dup} file entries repeat an earlier key; each repeat is read as an entry of its own.")
    out += _shuffle_warnings(plan, summary)
    cache = _cache_warning(plan, summary)
    if cache:
        out.append(cache)
    return out


def _shuffle_warnings(plan: ShardPlan, summary: Mapping[str, Any]) -> List[str]:
    """Warnings about ranks that read the same files, or bins that repeat every full epoch."""
    out: List[str] = []
    if not plan.settings.distrib_shard_files and plan.num_shards > 1 and not plan.settings.rank_seeds_differ:
        if plan.settings.seq_ordering == "default":
            why, fix = "seq_ordering='default'", "use seq_ordering='random'"
        elif plan.settings.fixed_random_seed is not None:
            why, fix = "fixed_random_seed is set", "remove fixed_random_seed"
        else:
            why = "the dataset sets random_seed_offset itself, which RETURNN uses unchanged on every rank"
            fix = (
                "remove random_seed_offset from the dataset dict (RETURNN then adds rank*16127 to the config's "
                "dataset_random_seed_offset on each rank)"
            )
        out.append(
            f"unsharded with the same shuffle on every rank ({why}): all {plan.num_shards} ranks read the "
            f"same files in the same order in every sub-epoch, so they train on identical data "
            f"(up to {summary['overlap']['max']} entries read by more than one rank in a sub-epoch). "
            f"Set distrib_shard_files=True, or {fix}."
        )
    elif summary["overlap"]["max"]:
        out.append(
            f"unsharded: up to {summary['overlap']['max']} file entries are read by more than one rank "
            f"in the same sub-epoch; set distrib_shard_files=True to give each rank disjoint files."
        )
    if plan.settings.seq_ordering == "default" or plan.settings.fixed_random_seed is not None:
        why = "seq_ordering='default'" if plan.settings.seq_ordering == "default" else "fixed_random_seed is set"
        out.append(
            f"{why}: every full epoch has the same bins, so each rank reads the same files "
            f"in the same sub-epochs every full epoch."
        )
    return out


def _cache_warning(plan: ShardPlan, summary: Mapping[str, Any]) -> Optional[str]:
    """The warning that the per-node file cache is too small for the plan, or None."""
    cache = summary.get("cache")
    if cache is None or cache.get("fits") is not False:
        return None
    fitting = [r["partition_epoch"] for r in cache.get("partition_epochs", ()) if r.get("fits")]
    fix = (
        f"e.g. partition_epoch={min(p for p in fitting if p > plan.partition_epoch)} (the smallest of the "
        f"values checked that fits)"
        if any(p > plan.partition_epoch for p in fitting)
        else "use more nodes (fewer ranks per node), preload fewer sub-epochs or split the data into more files"
    )
    return (
        f"the per-node file cache needs up to {format_bytes(cache['peak_bytes'])} (sub-epoch "
        f"{cache['peak_epoch']}, node {cache['peak_node']}), more than the cache size "
        f"{format_bytes(cache['cache_size'])}: {fix}."
    )


def _sub_epoch_sizes(summary: Mapping[str, Any]) -> Optional[np.ndarray]:
    """Every sub-epoch's size over the mean sub-epoch of its full epoch (:func:`sub_epoch_size_ratios`)."""
    return sub_epoch_size_ratios(
        summary["per_sub_epoch"]["bytes"], partition_epoch=summary["settings"]["partition_epoch"]
    )


def _num_epochs_row(s: Dict[str, Any]) -> str:
    """The report's num_epochs: the training's sub-epochs (those the report covers) and full epochs, and the
    sub-epochs RETURNN only preloads after them, which the plan holds too."""
    text = f"{s['num_epochs']} sub-epochs = {s['num_full_epochs']} full epochs"
    text += "" if s["num_epochs"] % s["partition_epoch"] == 0 else " (last one partial)"
    preloaded = s.get("preloaded_sub_epochs", 0)
    return text + (f"; the plan also holds the {preloaded} after them that RETURNN preloads" if preloaded else "")


def render_report(summary: Mapping[str, Any]) -> str:
    """The text report of a summary from :func:`summarize` (deterministic, no paths, no times): one
    section per function below."""
    unit = summary.get("unit", "bytes")
    s = summary["settings"]
    lines = ["i6_shard plan report", "====================", ""]
    for section in (
        _settings_section,
        _totals_section,
        _balance_section,
        _worst_section,
        _dropped_section,
        _distributions_section,
    ):
        lines += section(summary, unit)
    lines += render_sub_epoch_sizes(summary)
    lines += render_prediction(summary)
    lines += render_corpora(summary)
    if "cache" in summary:
        lines += [""] + _render_cache(summary["cache"], partition_epoch=s["partition_epoch"])
    lines += ["", "Warnings"] + ([f"  - {w}" for w in summary["warnings"]] or ["  none"])
    return "\n".join(lines) + "\n"


def _rows(rows: List[tuple]) -> List[str]:
    return [f"  {k:<20} {v}" for k, v in rows]


def _settings_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    s = summary["settings"]
    mode = (
        "sharded (distrib_shard_files=True)"
        if s["distrib_shard_files"]
        else "unsharded (distrib_shard_files=False, the same random_seed_offset on every rank)"
        if s.get("same_seed_on_all_ranks")
        else "unsharded (distrib_shard_files=False, per-rank seed offset rank*16127)"
    )
    rows = [
        ("file entries", f"{s['num_files']:,}"),
        (
            "total size",
            f"{format_cost(s['total_bytes'], unit)} ({s['total_bytes']:,} bytes)"
            if unit == "bytes"
            else format_cost(s["total_bytes"], unit),
        ),
        ("num_shards", str(s["num_shards"])),
        ("partition_epoch", str(s["partition_epoch"])),
        ("num_epochs", _num_epochs_row(s)),
        ("mode", mode),
        ("seq_ordering", s["seq_ordering"]),
        ("random_seed_offset", str(s["random_seed_offset"])),
        ("fixed_random_seed", "none" if s["fixed_random_seed"] is None else str(s["fixed_random_seed"])),
        ("distribution", s["distribution"]),
    ]
    rows += [("RETURNN release", f"{s['returnn_version']} (its own cut)")] if s.get("returnn_version") else []
    rows += (
        [
            (
                "unit",
                f"{unit} (the costs the bins are balanced by"
                + ("; the plan and summary count milli-steps" if unit == "steps" else "")
                + ")",
            )
        ]
        if unit != "bytes"
        else []
    )
    return ["Settings"] + _rows(rows)


def _totals_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    s = summary["settings"]
    fpb, bpb, passes = summary["files_per_bin"], summary["bytes_per_bin"], summary["passes"]
    bins = s["num_shards"] * s["partition_epoch"] if s["distrib_shard_files"] else s["partition_epoch"]
    rows = [
        (
            "bins per full epoch",
            f"{bins}"
            + (
                f" ({s['num_shards']} shards x {s['partition_epoch']} sub-epochs)"
                if s["distrib_shard_files"]
                else " per rank"
            ),
        ),
        ("files per bin", f"min {fpb['min']:,}, mean {fpb['mean']:,.1f}, max {fpb['max']:,}"),
        (
            f"{unit} per bin",
            f"min {format_cost(bpb['min'], unit)}, mean {format_cost(round(bpb['mean']), unit)}, "
            f"max {format_cost(bpb['max'], unit)}",
        ),
        ("scheduled reads", f"{format_cost(summary['scheduled_bytes'], unit)} over all ranks and sub-epochs"),
        ("passes per entry", f"min {passes['min']}, mean {passes['mean']:.2f}, max {passes['max']}"),
        ("coverage", f"{pct(summary['coverage'])} of entries scheduled at least once"),
    ]
    if not s["distrib_shard_files"]:
        rows.append(
            (
                "overlap",
                f"up to {summary['overlap']['max']:,} entries (mean "
                f"{summary['overlap']['mean']:,.1f}) read by several ranks in one sub-epoch",
            )
        )
    return ["", "Totals"] + _rows(rows)


def _sub_epochs(num_epochs: int) -> str:
    """The range of sub-epochs a section covers, as RETURNN counts them.

    >>> _sub_epochs(1), _sub_epochs(200)
    ('sub-epoch 1', 'sub-epochs 1..200')
    """
    return "sub-epoch 1" if num_epochs == 1 else f"sub-epochs 1..{num_epochs}"


def _table(header: List[str], rows: List[List[str]], *, left: int = 0) -> List[str]:
    """Right-aligned columns (the first ``left`` ones left-aligned), each as wide as its widest cell, one space
    apart: numbers with units never run together."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]

    def line(cells: List[str]) -> str:
        return "  " + " ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header)] + [line(r) for r in rows]


def _balance_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    def fmt(value: int) -> str:
        return format_cost(value, unit)

    header = ["shard", "files", unit, "vs mean", "min/sub-epoch", "max/sub-epoch"]
    rows = [
        [
            str(row["shard_index"]),
            f"{row['files']:,}",
            fmt(row["bytes"]),
            f"{row['bytes_over_mean']:.3f}",
            fmt(row["min_bytes"]),
            fmt(row["max_bytes"]),
        ]
        for row in summary["per_shard"]
    ]
    title = f"Balance per shard ({unit} over {_sub_epochs(summary['settings']['num_epochs'])})"
    return ["", title] + _table(header, rows)


def _worst_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    p = summary["settings"]["partition_epoch"]
    header = ["epoch", "full epoch", "min " + unit, "max " + unit, "max/mean", "dropped"]
    rows = [
        [
            str(row["epoch"]),
            str((row["epoch"] - 1) // p),
            format_cost(row["min_bytes"], unit),
            format_cost(row["max_bytes"], unit),
            f"{row['max_over_mean']:.3f}",
            pct(row["dropped_fraction"]),
        ]
        for row in summary["worst_sub_epochs"]
    ]
    title = (
        f"Worst sub-epochs ({_sub_epochs(summary['settings']['num_epochs'])}, by the share dropped, as 'worst' "
        "everywhere in this report)"
    )
    return ["", title] + _table(header, rows)


def _dropped_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    s = summary["settings"]
    lines = [
        "",
        f"Dropped data estimate (a sub-epoch ends when its first rank runs out; {unit} stand in for length)",
        f"  over {_sub_epochs(s['num_epochs'])}: mean {pct(summary['dropped_fraction'])}, worst "
        f"{pct(summary['dropped_fraction_max'])}, in total about {format_cost(summary['dropped_bytes'], unit)} "
        f"of {format_cost(summary['scheduled_bytes'], unit)}",
    ]
    bound = cut_spec(s["distribution"]).sub_epoch_bound
    sizes = _sub_epoch_sizes(summary) if bound is not None else None
    if sizes is not None:
        given = s.get("max_sub_epoch_deviation", DEFAULT_MAX_SUB_EPOCH_DEVIATION)
        bound = (
            f"max_sub_epoch_deviation={given:g}"
            if bound == "given"
            else f"chosen per full epoch, up to {AUTO_DEVIATIONS[-1] if given == DEFAULT_MAX_SUB_EPOCH_DEVIATION else given:g}"
        )
        lines.append(
            f"  sub-epoch sizes over the mean sub-epoch of their full epoch: {sizes.min():.3f} to "
            f"{sizes.max():.3f} ({bound})"
        )
    if summary.get("non_contiguous_of"):
        lines.append(
            f"  sub-epochs that files were moved into from other sub-epochs (so not a contiguous part of "
            f"the shuffled order): {summary['non_contiguous_sub_epochs']} of {summary['non_contiguous_of']}"
        )
    return lines


def _distributions_section(summary: Mapping[str, Any], unit: str) -> List[str]:
    s = summary["settings"]
    cmp_epochs = summary["distributions_num_epochs"]
    window = _sub_epochs(cmp_epochs) + (
        ""
        if cmp_epochs == s["num_epochs"]
        else f" (the first {cmp_epochs // s['partition_epoch']} full epochs; the sections above cover "
        f"{_sub_epochs(s['num_epochs'])})"
    )
    lines = [
        "",
        f"Distributions on the same files and settings, over {window} (* = this plan)",
        f"  {'distribution':<22} {'dropped mean':>12} {'dropped worst':>13} {'max/mean worst':>14}",
    ]
    dists = summary["distributions"]
    for name in [s["distribution"]] + sorted(n for n in dists if n != s["distribution"]):
        row = dists[name]
        mark = "*" if name == s["distribution"] else " "
        if isinstance(row, str):
            lines.append(f"  {name:<20} {mark} {row if row.startswith(NOT_COMPUTED) else 'not applicable: ' + row}")
            continue
        lines.append(
            f"  {name:<20} {mark} {pct(row['dropped_fraction']):>12} "
            f"{pct(row['dropped_fraction_max']):>13} {row['max_imbalance']:>14.3f}"
        )
    return lines + _other_mode_rows(summary.get("other_mode"))


def _other_mode_rows(mode_row: Optional[Mapping[str, Any]]) -> List[str]:
    if mode_row is None:
        return []
    label = f"returnn, {'sharded' if mode_row['distrib_shard_files'] else 'unsharded'}"
    if "not_applicable" in mode_row:
        return [f"  {label:<20}   not applicable: {mode_row['not_applicable']}"]
    sample = mode_row.get("sample")
    lines = [
        f"  {label:<20} {'~' if sample else ' '} {pct(mode_row['dropped_fraction']):>12} "
        f"{pct(mode_row['dropped_fraction_max']):>13} {mode_row['max_imbalance']:>14.3f}"
    ]
    if mode_row["distrib_shard_files"]:
        lines.append(
            "    (sharded: each rank reads 1/num_shards of the files per full epoch, no file twice per sub-epoch)"
        )
    elif sample:
        ranks, of_ranks = sample["num_ranks"], sample["of_num_ranks"]
        who = f"all {of_ranks} ranks" if ranks == of_ranks else f"{ranks} evenly spaced ranks of {of_ranks}"
        alone = (
            ""
            if ranks == of_ranks
            else f"; the figures are those of these {ranks} ranks alone (with all {of_ranks}, the first runs out no later)"
        )
        lines.append(
            f"    (~ sampled: every rank reads every file once per full epoch, so {who} were planned exactly over "
            f"sub-epochs 1..{sample['num_epochs']} of 1..{sample['of_num_epochs']}{alone}; in a sub-epoch these "
            f"ranks together read {pct(mode_row['coverage_mean'])} of the entries, up to "
            f"{mode_row['overlap_max']:,} of them on more than one rank)"
        )
    else:
        lines.append(
            f"    (unsharded: every rank reads every file once per full epoch; in a sub-epoch the ranks "
            f"together read {pct(mode_row['coverage_mean'])} of the entries, up to "
            f"{mode_row['overlap_max']:,} of them on more than one rank)"
        )
    return lines


def _render_cache(c: Mapping[str, Any], *, partition_epoch: int) -> List[str]:
    """The report's section on the per-node file cache (see :func:`cache_summary`)."""
    rpn, nodes = c["ranks_per_node"], c["num_nodes"]
    how = (
        f"preload_next_n_sub_epochs={c['preload_next_n_sub_epochs']}, files through CachedFile"
        if c["cached_file"]
        else "without CachedFile: files read from the shared file system directly"
    )
    lines = [
        f"Per-node file cache ({rpn} rank{'s' if rpn != 1 else ''} per node, {nodes} node"
        f"{'s' if nodes != 1 else ''}; {how})"
    ]
    lines += [f"  {k:<20} {v}" for k, v in _cache_rows(c)]
    if c.get("partition_epochs"):
        lines.append(
            f"  partition_epoch values against the cache size (peak per node over the first "
            f"{c['partition_epochs_num_full_epochs']} full epochs; * = this plan, over all its sub-epochs)"
        )
        lines.append(f"    {'partition_epoch':>15} {'peak':>12} {'fits':>5}")
        for row in c["partition_epochs"]:
            mark = "*" if row["partition_epoch"] == partition_epoch else " "
            if "not_applicable" in row:
                lines.append(f"    {row['partition_epoch']:>14}{mark} {'-':>12} {'-':>5}  (too few files)")
            else:
                lines.append(
                    f"    {row['partition_epoch']:>14}{mark} {format_bytes(row['peak_bytes']):>12} "
                    f"{'yes' if row['fits'] else 'no':>5}"
                )
    return lines


def _cache_rows(c: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """The (name, text) rows of the cache section: what a node holds and reads, and whether it fits."""
    rows: List[Tuple[str, str]] = []
    if c["cached_file"]:
        rows.append(
            (
                "held at once",
                f"peak {format_bytes(c['peak_bytes'])} (sub-epoch {c['peak_epoch']}, node "
                f"{c['peak_node']}), mean {format_bytes(round(c['held_bytes_mean']))} per node "
                "and sub-epoch (the node's ranks' current and preloaded sub-epochs)",
            )
        )
        rows.append(
            (
                "from shared FS",
                f"per node: up to {format_bytes(c['shared_fs_bytes_first'])} in sub-epoch 1 "
                f"(with its preloads), then per sub-epoch mean "
                f"{format_bytes(round(c['shared_fs_bytes_mean']))}, max "
                f"{format_bytes(c['shared_fs_bytes_max'])} (files not held in the sub-epoch "
                "before)",
            )
        )
    else:
        rows.append(("held at once", "nothing: without CachedFile the node caches no files"))
        rows.append(
            (
                "from shared FS",
                f"per node and sub-epoch mean {format_bytes(round(c['shared_fs_bytes_mean']))}, "
                f"max {format_bytes(c['shared_fs_bytes_max'])} (each rank reads its own files)",
            )
        )
    if c.get("constant_bytes"):
        rows.append(
            (
                "every sub-epoch",
                f"{format_bytes(c['constant_bytes'])} of files the sub-epoch dataset reads "
                "besides its bin's, counted in every sub-epoch above",
            )
        )
    if "cache_size" in c:
        verdict = "fits" if c["fits"] else "does NOT fit"
        rows.append(("cache size", f"{format_bytes(c['cache_size'])} per node: this plan {verdict}"))
    return rows

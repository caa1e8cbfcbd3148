"""PNG picture of a plan: bytes per shard per sub-epoch as a heat map, and the expected
dropped fraction per sub-epoch. Needs matplotlib (the ``plot`` extra), imported lazily."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Tuple

import numpy as np

from ..io.atomic import atomic_path
from ..pure.cache import CacheFootprint
from ..pure.stats import PlanStats

__all__ = ["matplotlib_available", "require_matplotlib", "plot_plan", "MISSING_MATPLOTLIB"]

MISSING_MATPLOTLIB = (
    "matplotlib is not installed, so no plot can be drawn: pip install 'i6_shard[plot]' "
    "(into the Python that runs this), or turn the plot off"
)


def matplotlib_available() -> bool:
    """Whether :func:`plot_plan` can draw."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib() -> None:
    """Raise ``ImportError`` (saying how to install it) unless matplotlib is importable; call it
    before any other output is written, so that a missing plot fails the whole output set."""
    if not matplotlib_available():
        raise ImportError(MISSING_MATPLOTLIB)


def plot_plan(
    stats: PlanStats,
    path: str | os.PathLike,
    *,
    title: Optional[str] = None,
    cache: Optional[CacheFootprint] = None,
    cache_size: Optional[int] = None,
    prediction: Optional[Mapping[str, Any]] = None,
) -> None:
    """Draw ``stats`` into a PNG at ``path`` (atomically; same stats and matplotlib give the same bytes).
    With ``cache`` (over the same sub-epochs), a panel shows the bytes each node holds in its file
    cache per sub-epoch, and ``cache_size`` as a line. With ``prediction`` (the summary's ``batching``
    entry, see :func:`~i6_shard.core.reporting.prediction.prediction_summary`), a panel shows every rank's
    expected steps per sub-epoch, and the drop panel the predicted drop beside the cost formula's. Without
    either, the picture is the two panels alone.

    :raises ValueError: if ``path`` does not end in ``.png`` (the bytes are always PNG)
    :raises ImportError: if matplotlib is missing (see :func:`require_matplotlib`)
    """
    if not os.fspath(path).lower().endswith(".png"):
        raise ValueError(f"plot path {os.fspath(path)!r} must end in .png: the plot is written as PNG")
    num_epochs, num_shards = stats.bytes.shape
    if cache is not None and cache.held_bytes.shape[0] != num_epochs:
        raise ValueError(
            f"the cache footprint covers {cache.held_bytes.shape[0]} sub-epochs, the stats {num_epochs}; "
            "compute both over the same num_epochs"
        )
    require_matplotlib()
    from matplotlib.figure import Figure

    part = stats.partition_epoch
    mean = stats.bytes.mean(axis=1, keepdims=True)
    rel = np.divide(stats.bytes, mean, out=np.ones(stats.bytes.shape), where=mean > 0).T  # [shard, epoch]
    drop = 100.0 * stats.dropped_fraction
    epochs = np.arange(1, num_epochs + 1)

    width = float(np.clip(6 + num_epochs * 0.12, 8, 16))
    height_map = float(np.clip(1.2 + 0.28 * num_shards, 2.2, 6))
    steps = _prediction_steps(prediction, shape=(num_epochs, num_shards))
    ratios = [height_map, 2.2] + ([2.2] if steps is not None else []) + ([2.4] if cache is not None else [])
    fig = Figure(figsize=(width, height_map + 0.4 + sum(ratios[1:])), dpi=100, layout="constrained")
    panels = tuple(fig.subplots(len(ratios), 1, sharex=True, height_ratios=ratios))
    ax_map, ax_drop = panels[:2]
    ax_steps = panels[2] if steps is not None else None
    ax_cache = panels[-1] if cache is not None else None

    _draw_balance(fig, ax_map, rel, unit=getattr(stats, "unit", "bytes"))
    bar_label = "expected dropped" if steps is None else f"by the {getattr(stats, 'unit', 'bytes')} formula"
    if num_epochs <= 240:
        ax_drop.bar(epochs, drop, width=0.8, color="tab:orange", label=bar_label)
    else:
        ax_drop.fill_between(epochs, drop, step="mid", color="tab:orange", label=bar_label)
    ax_drop.axhline(float(drop.mean()), color="black", linestyle="--", linewidth=1, label=f"mean {drop.mean():.2f}%")
    ax_drop.set_ylabel("dropped %")
    if steps is not None:  # the y limit below covers the predicted drop too
        drop = np.maximum(drop, _draw_prediction(ax_drop, ax_steps, prediction, steps, epochs=epochs))
    panels[-1].set_xlabel("epoch (sub-epoch, 1-based as RETURNN counts)")
    ax_drop.set_ylim(0, max(float(drop.max()) * 1.15, 0.1))
    ax_drop.set_xlim(0.5, num_epochs + 0.5)
    ax_drop.legend(loc="upper right", fontsize=8, frameon=False)
    ax_drop.set_title(
        f"Data dropped when the first rank finishes: 1 - num_shards * min / sum ({getattr(stats, 'unit', 'bytes')})",
        fontsize=10,
        loc="left",
    )
    if num_epochs <= 40:
        ax_drop.set_xticks(epochs)
    if cache is not None:
        _draw_cache(ax_cache, cache, cache_size=cache_size, epochs=epochs)
    for boundary in range(part, num_epochs, part):
        for ax in panels:
            ax.axvline(boundary + 0.5, color="0.3", linewidth=0.8, linestyle=":")
    num_full = -(-num_epochs // part)
    if num_full <= 12:
        top = ax_map.secondary_xaxis("top")
        top.set_xticks(
            [(k * part + min((k + 1) * part, num_epochs)) / 2 + 0.5 for k in range(num_full)],
            [f"full epoch {k}" for k in range(num_full)],
            fontsize=8,
            color="0.3",
        )
        top.tick_params(length=0)
    if title:
        fig.suptitle(title, fontsize=11)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def _prediction_steps(prediction: Optional[Mapping[str, Any]], *, shape: Tuple[int, int]) -> Optional[np.ndarray]:
    """The expected steps ``[sub-epoch, rank]`` of a prediction, checked against the stats' ``shape``."""
    if prediction is None:
        return None
    steps = np.asarray(prediction["per_sub_epoch"]["steps"], dtype=np.float64)
    if steps.shape != shape:
        raise ValueError(
            f"the prediction has steps of shape {list(steps.shape)}, the stats {shape[0]} sub-epochs "
            f"of {shape[1]} shards; compute both over the same num_epochs"
        )
    return steps


def _draw_prediction(
    ax_drop, ax, prediction: Mapping[str, Any], steps: np.ndarray, *, epochs: np.ndarray
) -> np.ndarray:
    """The predicted drop per sub-epoch as a line on ``ax_drop`` (returned, in %), and on ``ax`` every rank's
    expected steps per sub-epoch (dots) with the shortest rank's (a line): a sub-epoch ends with the shortest
    rank, so what lies above the line is what the others drop."""
    predicted = 100.0 * np.asarray(prediction["per_sub_epoch"]["dropped_fraction"], dtype=np.float64)
    ax_drop.plot(
        epochs,
        predicted,
        color="tab:red",
        marker="o",
        markersize=3,
        linewidth=1,
        label=f"predicted under the batching (mean {predicted.mean():.2f}%)",
    )
    for r in range(steps.shape[1]):
        ax.plot(
            epochs,
            steps[:, r],
            linestyle="none",
            marker="o",
            markersize=3,
            color="tab:blue",
            alpha=0.5,
            label="a rank" if r == 0 else None,
        )
    ax.plot(epochs, steps.min(axis=1), color="black", linewidth=1, drawstyle="steps-mid", label="shortest rank")
    ax.set_ylabel("expected steps")
    ax.set_ylim(0, max(float(steps.max()) * 1.15, 1.0))
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.set_title(
        "Expected steps per rank under RETURNN's batching (the line: the shortest rank's)", fontsize=10, loc="left"
    )
    return predicted


def _draw_balance(fig, ax_map, rel: np.ndarray, *, unit: str) -> None:
    """The top panel: each shard's cost per sub-epoch relative to the mean over shards, as a heat map."""
    from matplotlib.colors import TwoSlopeNorm

    num_shards, num_epochs = rel.shape
    spread = max(float(np.max(np.abs(rel - 1.0))), 0.01)
    norm = TwoSlopeNorm(vmin=1.0 - spread, vcenter=1.0, vmax=1.0 + spread)
    image = ax_map.imshow(
        rel,
        aspect="auto",
        interpolation="nearest",
        origin="lower",
        cmap="RdBu_r",
        norm=norm,
        extent=(0.5, num_epochs + 0.5, -0.5, num_shards - 0.5),
    )
    cbar = fig.colorbar(image, ax=ax_map, pad=0.01, fraction=0.04)
    cbar.set_label(f"{unit} / mean of shards")
    ax_map.set_ylabel("shard_index")
    if num_shards <= 16:
        ax_map.set_yticks(range(num_shards))
    ax_map.set_title(
        f"{unit.capitalize()} each shard reads per sub-epoch, relative to the mean over shards (red: more, blue: less)",
        fontsize=10,
        loc="left",
    )


def _draw_cache(ax, cache: CacheFootprint, *, cache_size: Optional[int], epochs: np.ndarray) -> None:
    """The bytes each node holds per sub-epoch (one step line per node, up to 8; else the fullest and the
    mean node), in binary units, with the cache size as a dashed line."""
    peak = max(cache.peak_bytes, int(cache_size or 0), 1)
    unit, scale = next(
        (u, float(f))
        for u, f in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
        if peak >= f
    )
    held = cache.held_bytes / scale
    if not cache.node_cache.cached_file:
        ax.step(
            epochs,
            cache.shared_fs_bytes.max(axis=1) / scale,
            where="mid",
            color="tab:purple",
            label="read from shared FS, fullest node (no CachedFile: nothing held)",
        )
    elif cache.num_nodes <= 8:
        for n in range(cache.num_nodes):
            ax.step(epochs, held[:, n], where="mid", linewidth=1, label=f"node {n}")
    else:
        ax.step(epochs, held.max(axis=1), where="mid", color="tab:red", label="fullest node")
        ax.step(epochs, held.mean(axis=1), where="mid", color="tab:blue", label="mean over nodes")
    if cache_size:
        ax.axhline(
            cache_size / scale,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"cache size {cache_size / scale:.2f} {unit}",
        )
    ax.set_ylabel(unit)
    ax.set_ylim(
        0,
        max(
            float(np.max(held)) if held.size else 0.0,
            (cache_size or 0) / scale,
            float(cache.shared_fs_bytes.max()) / scale if not cache.node_cache.cached_file else 0.0,
        )
        * 1.15
        or 1.0,
    )
    ax.legend(loc="upper right", fontsize=8, frameon=False, ncol=min(4, max(1, cache.num_nodes)))
    nc = cache.node_cache
    ax.set_title(
        f"Bytes each node holds in its file cache ({nc.ranks_per_node} ranks per node, current + "
        f"{nc.preload_next_n_sub_epochs} preloaded sub-epochs)",
        fontsize=10,
        loc="left",
    )

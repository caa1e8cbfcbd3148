"""PNG picture of a plan: bytes per shard per sub-epoch as a heat map, and the expected
dropped fraction per sub-epoch. Needs matplotlib (the ``plot`` extra), imported lazily."""

from __future__ import annotations

import io
import os
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..io.atomic import atomic_path
from ..pure.cache import CacheFootprint
from ..pure.rechunk import RECHUNK_BOUND
from ..pure.stats import PlanStats
from .sub_epoch_sizes import sub_epoch_size_ratios

__all__ = ["matplotlib_available", "require_matplotlib", "plot_plan", "plot_cost_distribution", "MISSING_MATPLOTLIB"]

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
    corpora: Optional[Sequence[Mapping[str, Any]]] = None,
    sizes: Optional[Mapping[str, Any]] = None,
) -> None:
    """Draw ``stats`` into a PNG at ``path`` (atomically; same stats and matplotlib give the same bytes).
    With ``cache`` (over the same sub-epochs), a panel shows the bytes each node holds in its file
    cache per sub-epoch, and ``cache_size`` as a line. With ``prediction`` (the summary's ``batching``
    entry, see :func:`~i6_shard.core.reporting.prediction.prediction_summary`), a panel shows every rank's
    expected steps per sub-epoch, and the drop panel the predicted drop beside the cost formula's. With ``corpora``
    (the summary's entry of a plan of corpora by weight), a panel shows each corpus's share of every sub-epoch.
    A panel shows each sub-epoch's size over the mean; with ``sizes`` (the summary's ``sub_epoch_sizes``) it also
    names the cause of a spread and the re-chunk that fixes it. Without any, the picture is those three panels.

    :raises ValueError: if ``path`` does not end in ``.png`` (the bytes are always PNG)
    :raises ImportError: if matplotlib is missing (see :func:`require_matplotlib`)
    """
    _check_png(path)
    data = plan_png(
        stats, title=title, cache=cache, cache_size=cache_size, prediction=prediction, corpora=corpora, sizes=sizes
    )
    _write_png(data, path)


def plan_png(
    stats: PlanStats,
    *,
    title: Optional[str] = None,
    cache: Optional[CacheFootprint] = None,
    cache_size: Optional[int] = None,
    prediction: Optional[Mapping[str, Any]] = None,
    corpora: Optional[Sequence[Mapping[str, Any]]] = None,
    sizes: Optional[Mapping[str, Any]] = None,
) -> bytes:
    """The PNG bytes :func:`plot_plan` writes, rendered in memory (so their size is known before they are
    written)."""
    figure = plan_figure(
        stats, title=title, cache=cache, cache_size=cache_size, prediction=prediction, corpora=corpora, sizes=sizes
    )
    return png_bytes(figure)


def png_bytes(fig) -> bytes:
    """``fig`` as PNG bytes (no Software tag: the same figure and matplotlib give the same bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _check_png(path: str | os.PathLike) -> None:
    if not os.fspath(path).lower().endswith(".png"):
        raise ValueError(f"plot path {os.fspath(path)!r} must end in .png: the plot is written as PNG")


def _save(fig, path: str | os.PathLike) -> None:
    _write_png(png_bytes(fig), path)


def _write_png(data: bytes, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def _legend_beside(ax, **kwargs) -> None:
    """The panel's legend to the right of it, outside the axes: it covers no bar, also where the last ones are
    the tallest."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0, fontsize=8, frameon=False, **kwargs)


#: Panels with a legend are this much taller than their data: the legend, one row, sits in the room above it.
LEGEND_HEADROOM = 1.4


def _legend_row(ax) -> None:
    """The panel's legend in one row at its top right, in the room that :data:`LEGEND_HEADROOM` leaves above the
    data: it covers no bar, also where the last ones are the tallest."""
    ax.legend(loc="upper right", ncol=len(ax.get_legend_handles_labels()[0]), fontsize=8, frameon=False)


def plan_figure(
    stats: PlanStats,
    *,
    title: Optional[str] = None,
    cache: Optional[CacheFootprint] = None,
    cache_size: Optional[int] = None,
    prediction: Optional[Mapping[str, Any]] = None,
    corpora: Optional[Sequence[Mapping[str, Any]]] = None,
    sizes: Optional[Mapping[str, Any]] = None,
):
    """The matplotlib ``Figure`` that :func:`plot_plan` saves."""
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
    ratios = [height_map, 2.2, 2.0] + ([2.2] if steps is not None else []) + ([2.4] if cache is not None else [])
    ratios += [2.2] if corpora else []
    fig = Figure(figsize=(width, height_map + 0.4 + sum(ratios[1:])), dpi=100, layout="constrained")
    panels = tuple(fig.subplots(len(ratios), 1, sharex=True, height_ratios=ratios))
    ax_map, ax_drop, ax_sizes = panels[:3]
    ax_steps = panels[3] if steps is not None else None
    ax_cache = panels[len(ratios) - 1 - bool(corpora)] if cache is not None else None

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
    ax_drop.set_ylim(0, max(float(drop.max()) * LEGEND_HEADROOM, 0.1))
    ax_drop.set_xlim(0.5, num_epochs + 0.5)
    _legend_row(ax_drop)
    ax_drop.set_title(
        f"Data dropped when the first rank finishes: 1 - num_shards * min / sum ({getattr(stats, 'unit', 'bytes')})",
        fontsize=10,
        loc="left",
    )
    if num_epochs <= 40:
        ax_drop.set_xticks(epochs)
    _draw_sub_epoch_sizes(ax_sizes, stats, epochs=epochs, sizes=sizes)
    if cache is not None:
        _draw_cache(ax_cache, cache, cache_size=cache_size, epochs=epochs)
    if corpora:
        _draw_corpora(panels[-1], corpora, epochs=epochs)
    _mark_full_epochs(panels, ax_map, partition_epoch=part, num_epochs=num_epochs)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def _draw_corpora(ax, corpora: Sequence[Mapping[str, Any]], *, epochs: np.ndarray) -> None:
    """Each corpus's share of every sub-epoch's cost, stacked, and its share over all sub-epochs (dashed)."""
    bottom = np.zeros(len(epochs))
    planned = np.array([sum(c["cost_per_sub_epoch"]) for c in corpora], dtype=np.float64)
    planned = planned / max(planned.sum(), 1e-12)
    for idx, entry in enumerate(corpora):
        share = 100.0 * np.asarray(entry["share_per_sub_epoch"], dtype=np.float64)
        color = f"C{idx % 10}"
        ax.bar(
            epochs, share, bottom=bottom, width=0.8, color=color, label=f"{entry['name']} (weight {entry['weight']})"
        )
        bottom += share
        if idx < len(corpora) - 1:
            ax.axhline(100.0 * planned[: idx + 1].sum(), color="black", linestyle="--", linewidth=0.8)
    ax.set_ylim(0, 100 * LEGEND_HEADROOM)
    ax.set_ylabel("share %")
    _legend_row(ax)
    ax.set_title(
        "Each corpus's share of the sub-epoch's cost (dashed: its share over all sub-epochs)",
        fontsize=10,
        loc="left",
    )


def _draw_sub_epoch_sizes(ax, stats: PlanStats, *, epochs: np.ndarray, sizes: Optional[Mapping[str, Any]]) -> None:
    """Each sub-epoch's size (its ranks' sum) over the mean sub-epoch of its full epoch, and the band of
    ``RECHUNK_BOUND`` around 1 that a re-chunked corpus keeps them in; sub-epochs outside it in red."""
    unit = getattr(stats, "unit", "bytes")
    ratios = sub_epoch_size_ratios(stats.bytes, partition_epoch=stats.partition_epoch)
    if ratios is None:
        ax.set_title(f"Sub-epoch size: no complete full epoch ({unit})", fontsize=10, loc="left")
        return
    shown = epochs[: len(ratios)]
    outside = np.abs(ratios - 1) > RECHUNK_BOUND + 1e-9
    colors = np.where(outside, "tab:red", "tab:green")
    if len(shown) <= 240:
        ax.bar(shown, ratios, width=0.8, color=colors)
    else:
        ax.fill_between(shown, ratios, step="mid", color="tab:blue")
    ax.axhspan(1 - RECHUNK_BOUND, 1 + RECHUNK_BOUND, color="0.85", zorder=0, label=f"±{100 * RECHUNK_BOUND:g}%")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="mean")
    ax.set_ylim(0, max(float(ratios.max()), 1 + RECHUNK_BOUND) * LEGEND_HEADROOM)
    ax.set_ylabel("x mean")
    _legend_row(ax)
    note = _cause_and_fix_note(sizes)
    if note:
        ax.text(0.005, 0.97, note, transform=ax.transAxes, fontsize=8, va="top", ha="left")
    ax.set_title(
        f"Sub-epoch size over the mean sub-epoch of its full epoch ({unit}): {int(outside.sum())} of {len(ratios)} "
        f"more than {100 * RECHUNK_BOUND:g}% off, {ratios.min():.2f}x to {ratios.max():.2f}x",
        fontsize=10,
        loc="left",
    )


def _cause_and_fix_note(sizes: Optional[Mapping[str, Any]]) -> str:
    """The cause of a spread of sub-epoch sizes (the files above a rank's share) and its fix, for the sizes panel.

    >>> print(_cause_and_fix_note({"files_above_share": {"count": 2, "keys": ["/d/a.hdf"], "shares": [6.5]},
    ...     "rechunk": {"num_files": 800, "command": "python -m i6_shard rechunk ..."}}))
    cause: 2 files above a rank's share (largest 6.50x: a.hdf)
    fix: re-chunk into 800 files: python -m i6_shard rechunk ...
    """
    if not sizes:
        return ""
    lines = []
    above = sizes["files_above_share"]
    if above["count"]:
        name = os.path.basename(above["keys"][0])
        lines.append(f"cause: {above['count']} files above a rank's share (largest {above['shares'][0]:.2f}x: {name})")
    if sizes.get("rechunk"):
        lines.append(f"fix: re-chunk into {sizes['rechunk']['num_files']} files: {sizes['rechunk']['command']}")
    return "\n".join(lines)


def _mark_full_epochs(panels, ax_map, *, partition_epoch: int, num_epochs: int) -> None:
    """Dotted lines between full epochs on every panel, and the full epochs named above the map (up to 12)."""
    part = partition_epoch
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
        markersize=4,
        linewidth=1.2,
        zorder=3,  # above the bars and the axis: a predicted 0 lies on the x axis and stays visible
        clip_on=False,
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
    ax.set_ylim(0, max(float(steps.max()) * LEGEND_HEADROOM, 1.0))
    _legend_row(ax)
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
        * LEGEND_HEADROOM
        or 1.0,
    )
    _legend_row(ax)
    nc = cache.node_cache
    ax.set_title(
        f"Bytes each node holds in its file cache ({nc.ranks_per_node} ranks per node, current + "
        f"{nc.preload_next_n_sub_epochs} preloaded sub-epochs)",
        fontsize=10,
        loc="left",
    )


def plot_cost_distribution(
    costs: np.ndarray,
    path: str | os.PathLike,
    *,
    unit: str,
    num_shards: Optional[int] = None,
    partition_epoch: Optional[int] = None,
    title: Optional[str] = None,
) -> None:
    """Draw how the files' costs (bytes, frames, sequences or milli-steps) are distributed, as a histogram
    over log-spaced bins, into a PNG at ``path``. With ``num_shards`` and ``partition_epoch``, a line marks a
    rank's share of a sub-epoch (``total / (num_shards * partition_epoch)``) and the files above it are red:
    no split of whole files into sub-epochs of about equal size fills the other ranks up to such a file.

    :raises ValueError: for a path not ending in ``.png``, or only one of ``num_shards``/``partition_epoch``
    :raises ImportError: if matplotlib is missing
    """
    _check_png(path)
    if (num_shards is None) != (partition_epoch is None):
        raise ValueError("give both num_shards and partition_epoch (to mark a rank's share of a sub-epoch), or neither")
    require_matplotlib()
    from matplotlib.figure import Figure

    costs = np.asarray(costs, dtype=np.float64)
    shown = costs / 1000.0 if unit == "steps" else costs  # steps are stored in milli-steps
    positive = shown[shown > 0]
    fig = Figure(figsize=(9, 4.2), dpi=100, layout="constrained")
    ax = fig.subplots()
    share = None
    if num_shards is not None:
        share = float(shown.sum()) / (num_shards * partition_epoch)
    if positive.size:
        lo, hi = float(positive.min()), float(positive.max())
        edges = np.geomspace(lo, hi * 1.0001, 41) if hi > lo else np.array([lo * 0.9, lo * 1.1])
        below = positive if share is None else positive[positive <= share]
        ax.hist(below, bins=edges, color="tab:blue", label=f"files ({below.size:,})")
        if share is not None:
            above = positive[positive > share]
            ax.hist(above, bins=edges, color="tab:red", label=f"above a rank's share ({above.size:,})")
            ax.axvline(share, color="black", linestyle="--", linewidth=1, label=f"a rank's share: {share:,.0f}")
            if above.size:  # a marker per file at the top: a bar of one file is hard to see next to many
                _mark_files_above_share(ax, above, share=share)
        ax.set_xscale("log")
    num_zero = int(np.count_nonzero(shown <= 0))
    label = {"steps": "expected steps", "seqs": "sequences"}.get(unit, unit)
    ax.set_xlabel(f"{label} per file (log scale)" + (f"; {num_zero:,} empty files not shown" if num_zero else ""))
    ax.set_ylabel("files")
    head = f"{costs.size:,} files, {label} per file"
    if share is not None:
        head += (
            f"; a rank's share of a sub-epoch = total / (num_shards={num_shards} x partition_epoch={partition_epoch})"
        )
    ax.set_title(head, fontsize=10, loc="left")
    _legend_beside(ax)
    if title:
        fig.suptitle(title, fontsize=11)
    _save(fig, path)


def _mark_files_above_share(ax, above: np.ndarray, *, share: float) -> None:
    """A red marker at the top for every file above a rank's share, and a note on how many and how large."""
    from matplotlib.transforms import blended_transform_factory

    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room above the bars for the markers and the note

    top = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot(above, np.full(above.size, 0.97), "v", color="tab:red", markersize=7, transform=top)
    ax.text(
        share,
        0.96,
        f"{above.size:,} file{'s' if above.size != 1 else ''} above a rank's share, the largest "
        f"{float(above.max()) / share:.2f}x  ",
        transform=top,
        ha="right",
        va="top",
        fontsize=9,
        color="tab:red",
    )


def plot_plan_change(summary: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Draw what resuming under another plan does (the summary of
    :func:`~i6_shard.core.reporting.plan_change.change_summary`): per affected full epoch and rank, the files read
    before and after the resume and those read twice or never; and for each resume epoch at a full-epoch
    boundary nearby, that nothing is read twice or never there.

    :raises ValueError: for a path not ending in ``.png``
    :raises ImportError: if matplotlib is missing
    """
    _check_png(path)
    require_matplotlib()
    from matplotlib.figure import Figure

    old, new, e = summary["old"], summary["new"], summary["resume_epoch"]
    fulls = summary["full_epochs"]
    fig = Figure(figsize=(10, 1.5 + 3.2 * len(fulls) if fulls else 2.0), dpi=100, layout="constrained")
    axes = np.atleast_1d(fig.subplots(max(1, len(fulls)), 1))
    fig.suptitle(
        f"Resume at epoch {e} with num_shards {old['num_shards']} -> {new['num_shards']} "
        f"(partition_epoch={summary['partition_epoch']}, {summary['num_files']:,} files)",
        fontsize=11,
    )
    if not fulls:
        ax = axes[0]
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            f"Epoch {e} starts a full epoch: the new plan cuts it from its start,\n"
            "so every file is read exactly once per full epoch; nothing is read twice or never.",
            ha="center",
            va="center",
            fontsize=11,
        )
    for ax, full in zip(axes, fulls):
        rows = full["per_rank"]
        ranks = np.arange(len(rows))
        series = [
            ("files before the resume (old plan)", "files_before", "tab:gray", old["num_shards"], "old"),
            ("files after the resume (new plan)", "files_after", "tab:blue", new["num_shards"], "new"),
            ("read twice", "read_twice", "tab:red", new["num_shards"], "new"),
            ("never read", "never_read", "tab:orange", old["num_shards"], "old"),
        ]
        width = 0.2
        for i, (label, key, color, num_ranks, _) in enumerate(series):
            values = [row[key] if row["shard_index"] < num_ranks else 0 for row in rows]
            ax.bar(ranks + (i - 1.5) * width, values, width=width, color=color, label=label)
        ax.set_xticks(ranks)
        ax.set_xlabel("rank (shard_index)")
        ax.set_ylabel("files")
        (a, b), (c, d) = full["old_epochs"], full["new_epochs"]
        ax.set_title(
            f"Full epoch {full['full_epoch_0idx']}: epochs {a}..{b} on {old['num_shards']} ranks, {c}..{d} on "
            f"{new['num_shards']}: {full['read_twice']:,} of {full['num_files']:,} files read twice, "
            f"{full['never_read']:,} never",
            fontsize=10,
            loc="left",
        )
        _legend_beside(ax)
    bounds = ", ".join(str(row["resume_epoch"]) for row in summary["boundaries"])
    if fulls and bounds:
        fig.supxlabel(f"resuming at epoch {bounds} (a full-epoch boundary) reads every file once", fontsize=9)
    _save(fig, path)

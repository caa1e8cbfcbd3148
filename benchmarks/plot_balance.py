"""Draws the comparison of RETURNN's bin cut and the balanced distribution (docs/balanced_vs_returnn.png)
and that of the balanced and the flexible split (docs/flexible_split.png) from the inputs of bench_balance.py.

Run: ``python benchmarks/plot_balance.py [--out docs/balanced_vs_returnn.png]
[--flexible-out docs/flexible_split.png]`` (needs returnn, matplotlib).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from bench_balance import ROWS, compare, corpus, dropped, dropped_per_sub_epoch, sub_epoch_sizes
from i6_shard.core.pure.distribute import full_epoch_seed
from i6_shard.core.pure.flexible import DEFAULT_MAX_SUB_EPOCH_DEVIATION

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs", "balanced_vs_returnn.png")
DEFAULT_FLEXIBLE_OUT = os.path.join(os.path.dirname(DEFAULT_OUT), "flexible_split.png")
COLORS = {"returnn": "#d95f02", "balanced": "#1b9e77", "flexible": "#7570b3"}
#: Rows of the flexible picture's left panel: (corpus, files, W, P).
FLEXIBLE_ROWS = [
    ("hdf", 64, 4, 3),
    ("hdf", 400, 8, 5),
    ("big files", 1_000, 8, 10),
    ("big files", 10_000, 64, 20),
    ("lognormal", 1_000, 8, 10),
    ("lognormal", 10_000, 64, 20),
    ("lognormal", 100_000, 256, 20),
    ("lognormal2", 1_000, 8, 10),
]
FULL_EPOCHS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--flexible-out", default=DEFAULT_FLEXIBLE_OUT)
    args = parser.parse_args()
    plot_returnn_vs_balanced(args.out)
    plot_flexible(args.flexible_out)


def save(fig, out: str) -> None:
    """Write the figure atomically, without the matplotlib version in the metadata."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=110, metadata={"Software": None})
    os.replace(tmp, out)
    print(f"wrote {os.path.normpath(out)}")


def plot_returnn_vs_balanced(out: str) -> None:
    """Left: dropped per sub-epoch, RETURNN vs balanced, per row of bench_balance. Right: the ranks of
    one sub-epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [(row, compare(*row, with_lpt=False)) for row in ROWS]
    fig, (ax_rows, ax_ranks) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.3]})

    # Left: dropped fraction per benchmark row.
    labels = [f"{kind}\n{n:,} files\nW={w}, P={p}" for (kind, n, w, p), _ in results]
    x = np.arange(len(results))
    for offset, name in ((-0.2, "returnn"), (0.2, "balanced")):
        values = [100 * dropped(loads[name]) for _, loads in results]
        bars = ax_rows.bar(x + offset, values, width=0.38, color=COLORS[name], label=f'distribution="{name}"')
        ax_rows.bar_label(bars, labels=[f"{v:.1f}%" for v in values], fontsize=8, padding=2)
    ax_rows.set_xticks(x, labels, fontsize=8)
    ax_rows.set_ylabel("data dropped per sub-epoch (%)")
    ax_rows.set_title("Dropped when the first rank runs out\n(mean over the sub-epochs of one full epoch)", fontsize=10)
    ax_rows.legend(fontsize=8)
    ax_rows.margins(y=0.15)

    # Right: every rank's bytes in the first sub-epoch of the 10k-file row, relative to the mean.
    (kind, n, w, p), loads = next(r for r in results if r[0][1] == 10_000 and r[0][0] == "lognormal")
    ranks = np.arange(w)
    for name in ("returnn", "balanced"):
        rel = loads[name][0] / loads[name][0].mean()
        ax_ranks.plot(ranks, rel, marker="o", markersize=3, linewidth=1, color=COLORS[name], label=name)
        ax_ranks.axhline(rel.min(), color=COLORS[name], linestyle="--", linewidth=1)
    ax_ranks.set_xlabel("rank")
    ax_ranks.set_ylabel("bytes of the rank / mean over ranks")
    ax_ranks.set_title(
        f"Sub-epoch 1, {kind} sizes, {n:,} files, W={w}, P={p}: every rank stops\n"
        "at the dashed line (the smallest rank), the rest is dropped",
        fontsize=10,
    )
    ax_ranks.set_ylim(bottom=0)
    ax_ranks.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out)


def plot_flexible(out: str) -> None:
    """Left: dropped per sub-epoch, balanced vs flexible, per corpus (mean over 3 full epochs). Right: one
    full epoch of the big-file corpus, sub-epoch by sub-epoch: its size and what it drops."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(14, 5.2))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.1, 1])
    ax_rows = fig.add_subplot(grid[:, 0])
    ax_size, ax_drop = fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 1])
    names = ("balanced", "flexible")

    means = {name: [] for name in ("returnn",) + names}
    for row in FLEXIBLE_ROWS:
        per = [compare(*row, with_lpt=False, seed=full_epoch_seed(k)) for k in range(FULL_EPOCHS)]
        for name in means:
            means[name].append(100 * float(np.mean([dropped(loads[name]) for loads in per])))
    x = np.arange(len(FLEXIBLE_ROWS))
    for offset, name in ((-0.2, "balanced"), (0.2, "flexible")):
        bars = ax_rows.bar(x + offset, means[name], width=0.38, color=COLORS[name], label=f'distribution="{name}"')
        ax_rows.bar_label(
            bars, labels=[f"{v:.2f}" if v < 10 else f"{v:.1f}" for v in means[name]], fontsize=7, padding=2
        )
    ax_rows.set_xticks(x, [f"{kind}\n{n:,} files\nW={w}\nP={p}" for kind, n, w, p in FLEXIBLE_ROWS], fontsize=7)
    ax_rows.set_yscale("log")
    ax_rows.set_ylabel("data dropped per sub-epoch (%), log scale")
    ax_rows.set_title(
        f"Dropped when the first rank runs out, mean over {FULL_EPOCHS} full epochs\n"
        f"(RETURNN's own cut drops {min(means['returnn']):.0f}% to {max(means['returnn']):.0f}% "
        "on these corpora)",
        fontsize=10,
    )
    ax_rows.legend(fontsize=8)

    kind, n, w, p = "big files", 1_000, 8, 10
    loads = compare(kind, n, w, p, with_lpt=False)
    sizes, _ = corpus(kind, n, w, p)
    share = sizes.sum() / (w * p)
    s_idx = np.arange(1, p + 1)
    dev = DEFAULT_MAX_SUB_EPOCH_DEVIATION
    for offset, name in ((-0.2, "balanced"), (0.2, "flexible")):
        ax_size.bar(s_idx + offset, sub_epoch_sizes(loads[name]), width=0.38, color=COLORS[name], label=name)
        ax_drop.bar(s_idx + offset, 100 * dropped_per_sub_epoch(loads[name]), width=0.38, color=COLORS[name])
    ax_size.axhspan(1 - dev, 1 + dev, color="0.9", zorder=0, label=f"allowed: mean +-{dev:.0%}")
    ax_size.set_ylim(0.6, 1.4)
    ax_size.set_ylabel("size / mean")
    ax_size.set_title(
        f"{kind}, {n:,} files, W={w}, P={p}, first full epoch: {p} files of 1.05-1.5x a rank's "
        f"share ({share / 1e6:.1f} MB);\nthe sub-epochs holding them grow, so that the other "
        "ranks can be filled up to them",
        fontsize=9,
    )
    ax_size.legend(fontsize=7, ncol=3, loc="upper right")
    ax_drop.set_ylabel("dropped (%)")
    ax_drop.set_xlabel("sub-epoch")
    for ax in (ax_size, ax_drop):
        ax.set_xticks(s_idx)
    fig.tight_layout()
    save(fig, out)


if __name__ == "__main__":
    main()

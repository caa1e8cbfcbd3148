"""Draws the README's comparison of RETURNN's bin cut and the balanced distribution
(docs/balanced_vs_returnn.png) from the inputs of bench_balance.py.

Run: ``python benchmarks/plot_balance.py [--out docs/balanced_vs_returnn.png]`` (needs returnn, matplotlib).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from bench_balance import ROWS, compare, dropped

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs", "balanced_vs_returnn.png")
COLORS = {"returnn": "#d95f02", "balanced": "#1b9e77"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()

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
    ax_ranks.set_title(f"Sub-epoch 1, {kind} sizes, {n:,} files, W={w}, P={p}: every rank stops\n"
                       "at the dashed line (the smallest rank), the rest is dropped", fontsize=10)
    ax_ranks.set_ylim(bottom=0)
    ax_ranks.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110, metadata={"Software": None})
    os.replace(tmp, args.out)
    print(f"wrote {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()

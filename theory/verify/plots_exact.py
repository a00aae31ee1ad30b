"""Plot of the exact part of a report: per-term tightness of every bound (Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: ratios above this (a violated bound, ``inf`` where the exact value overflowed) are drawn
#: at it and labelled with their value
RATIO_CAP = 1e3


def plot_tightness(rows: Sequence[Mapping[str, Any]], directory: Path) -> list[str]:
    """One horizontal bar per (bound, term): the largest measured/bound where the term is at
    least half of the bound (log scale; the dashed line at 1 is where the bound would be
    violated; untested terms are marked at the left edge; ratios above :data:`RATIO_CAP`
    are drawn at it, labelled)."""
    rows = list(rows)
    h = max(2.2, 0.22 * len(rows) + 1.2)
    fig, ax = plt.subplots(figsize=(7.5, h))
    fig.subplots_adjust(left=0.5, right=0.97, top=1 - 0.5 / h, bottom=0.7 / h)
    if not rows:
        ax.text(0.5, 0.5, "no bound verified exactly", ha="center", va="center")
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        labels, vals, tested, capped = [], [], [], []
        for r in rows:
            term = r["term"] if len(r["term"]) <= 42 else r["term"][:39] + "..."
            labels.append(f"{r['bound']}: {term}")
            ok = r["status"] == "tested" and r["max_ratio"] is not None
            v = float(r["max_ratio"]) if ok else 1e-3
            capped.append(f"{v:.3g}" if v > RATIO_CAP else "")
            vals.append(min(v, RATIO_CAP))
            tested.append(ok)
        y = list(range(len(rows)))[::-1]
        colors = ["tab:blue" if t else "white" for t in tested]
        ax.barh(y, vals, color=colors, edgecolor="tab:blue")
        for yi, t, c in zip(y, tested, capped, strict=True):
            if not t:
                ax.text(1.2e-3, yi, "untested", va="center", fontsize=6)
            elif c:
                ax.text(RATIO_CAP, yi, f" {c}", va="center", fontsize=6)
        ax.axvline(1.0, color="k", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlim(1e-3, max(2.0, max(vals) * 1.5))
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xlabel("largest measured / bound where the term is >= half the bound (exact)")
    ax.set_title("per-term tightness (dashed: a ratio above 1 is a violation)", fontsize=9)
    fig.savefig(directory / "tightness.png", dpi=110)
    fig.savefig(directory / "tightness.pdf")
    plt.close(fig)
    return ["tightness.png", "tightness.pdf"]

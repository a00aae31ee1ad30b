"""Heatmaps of a map: the true cost ratio, the bound map's ratio beside it, per ``(zeta, eps,
budget)``, over the ``(H, eta)`` grid at each ``p``. Every figure is written as PNG and PDF
next to the CSV that holds its numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from theory.compare.records import CellResult, MapResult

__all__ = ["plot_map"]


def _grid(cells: list[CellResult], key) -> tuple[np.ndarray, list[int], list[float]]:
    Hs = sorted({c.H for c in cells})
    etas = sorted({c.eta for c in cells})
    out = np.full((len(Hs), len(etas)), np.nan)
    for c in cells:
        v = key(c)
        if v is not None:
            out[Hs.index(c.H), etas.index(c.eta)] = v
    return out, Hs, etas


def _panel(ax, grid, Hs, etas, title):
    with np.errstate(divide="ignore", invalid="ignore"):
        shown = np.clip(np.log2(grid), -4, 4)
    im = ax.imshow(shown, cmap="RdBu_r", vmin=-4, vmax=4, aspect="auto")
    ax.set_xticks(range(len(etas)), [f"{e:g}" for e in etas])
    ax.set_yticks(range(len(Hs)), [str(h) for h in Hs])
    ax.set_xlabel(r"pull rate $\eta$")
    ax.set_ylabel("H")
    ax.set_title(title, fontsize=9)
    for i in range(len(Hs)):
        for j in range(len(etas)):
            v = grid[i, j]
            txt = "n/a" if math.isnan(v) else ("inf" if math.isinf(v) else f"{v:.2g}")
            ax.text(j, i, txt, ha="center", va="center", fontsize=7)
    return im


def plot_map(result: MapResult, out_dir: str | Path) -> list[Path]:
    """One figure per ``(zeta, eps, budget, p)``: the true ratio (best PALSGD cost / best
    baseline cost; blue: the pull pays) and, when computed, the bound map's ratio. Returns
    the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    keys = sorted(
        {(c.zeta if c.zeta is not None else -1, c.eps, c.budget, c.p) for c in result.cells}
    )
    for z, eps, budget, p in keys:
        zeta = None if z == -1 else z
        cs = [c for c in result.cells if (c.zeta, c.eps, c.budget, c.p) == (zeta, eps, budget, p)]
        truth, Hs, etas = _grid(cs, lambda c: c.ratio)
        has_bounds = any("ratio" in c.bounds for c in cs)
        n = 2 if has_bounds else 1
        fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 3.8), squeeze=False)
        im = _panel(axes[0, 0], truth, Hs, etas, f"exact: PALSGD / best baseline ({budget})")
        if has_bounds:
            bound, _, _ = _grid(cs, lambda c: c.bounds.get("ratio"))
            _panel(axes[0, 1], bound, Hs, etas, "bound map: same ratio of guarantees")
        fig.colorbar(im, ax=axes[0, :].tolist(), label=r"$\log_2$ ratio (clipped to $\pm 4$)")
        ztxt = "own" if zeta is None else f"{zeta:g}"
        fig.suptitle(f"zeta = {ztxt}, eps = {eps:g}, p = {p:g}, budget {budget}", fontsize=10)
        stem = out_dir / f"ratio_zeta{ztxt}_eps{eps:g}_{budget}_p{p:g}"
        for ext in ("png", "pdf"):
            fig.savefig(f"{stem}.{ext}", dpi=110, bbox_inches="tight")
            written.append(Path(f"{stem}.{ext}"))
        plt.close(fig)
    return written

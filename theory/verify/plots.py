"""Plots of a verification report (:func:`theory.verify.run_verification`), Agg backend.

Each figure is written as PNG and PDF:

* ``measured_vs_bound``: measured ``(1/T) sum_t E||grad f(xbar_t)||^2`` (mean with its
  confidence bounds) against the bound's value, log-log, with the line ``y = x``; points
  above the line violate the bound. Colour: verdict; marker: bound.
* ``rates``: measured value and bound versus ``T`` (log-log) per bound, with the fitted slope.
* ``consensus_vs_H``: time-averaged consensus error versus ``H`` for Local SGD and PALSGD.
* ``exact_vs_mc``: exact expected curves (quadratic moment recursions) and the Monte-Carlo
  mean with a 2-standard-error band, per algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from theory.verify.plots_exact import plot_tightness  # noqa: E402
from theory.verify.report_types import VerifyReport  # noqa: E402

__all__ = [
    "plot_report",
    "plot_measured_vs_bound",
    "plot_rates",
    "plot_consensus",
    "plot_exact_vs_mc",
    "PLOT_NAMES",
]

PLOT_NAMES = ("measured_vs_bound", "rates", "consensus_vs_H", "exact_vs_mc")

_VERDICT_STYLE = {
    "holds": dict(color="tab:green"),
    "inconclusive": dict(color="tab:orange"),
    "violated": dict(color="tab:red"),
    "outside conditions": dict(color="tab:gray"),
}
_MARKERS = "osD^v<>PXh*"


def _num(x: Any) -> float:
    if x is None or x == "":
        return math.nan
    if isinstance(x, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(x, math.nan)
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _quiet_minor_ticks(fig: Any) -> None:
    """No labels on minor ticks: far fewer text layouts when drawing (much faster)."""
    for ax in fig.axes:
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())


def _grid(nrows: int, cols: int, w: float, h: float, left: float = 0.65) -> tuple[Any, np.ndarray]:
    """A grid of ``w x h`` inch panels with fixed margins in inches (no text measuring)."""
    right, bottom, top, gap_w, gap_h = 0.15, 0.55, 0.6, 0.6, 0.75
    W = left + right + cols * w + (cols - 1) * gap_w
    Hh = bottom + top + nrows * h + (nrows - 1) * gap_h
    fig, axes = plt.subplots(nrows, cols, figsize=(W, Hh), squeeze=False)
    fig.subplots_adjust(
        left=left / W,
        right=1 - right / W,
        bottom=bottom / Hh,
        top=1 - top / Hh,
        wspace=gap_w / w,
        hspace=gap_h / h,
    )
    return fig, axes


def _panels(
    n: int, max_cols: int, w: float, h: float, empty: str, left: float = 0.65
) -> tuple[Any, np.ndarray]:
    """A figure with one ``w x h`` panel per item, at most ``max_cols`` a row.

    Returns the figure and its first ``n`` axes; the unused panels are hidden, and with
    ``n = 0`` one panel shows the text ``empty``.
    """
    cols = min(max_cols, max(1, n))
    fig, axes = _grid(math.ceil(max(1, n) / cols), cols, w, h, left=left)
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    if n == 0:
        flat[0].set_visible(True)
        _empty(flat[0], empty)
    return fig, flat[:n]


def _save(fig: Any, directory: Path, name: str) -> list[str]:
    _quiet_minor_ticks(fig)
    fig.savefig(directory / f"{name}.png", dpi=110)
    fig.savefig(directory / f"{name}.pdf")
    plt.close(fig)
    return [f"{name}.png", f"{name}.pdf"]


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_measured_vs_bound(rows: Sequence[Mapping[str, Any]], directory: Path) -> list[str]:
    """Scatter of measured value vs bound value with the ``y = x`` line."""
    fig, axes = _grid(1, 1, 5.4, 4.4, left=0.95)
    ax = axes[0, 0]
    pts = [r for r in rows if r.get("verdict") in _VERDICT_STYLE]
    bounds = sorted({r["bound"] for r in pts})
    lo, hi = math.inf, 0.0
    groups: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    for r in pts:
        b, m = _num(r.get("bound_value")), _num(r.get("measured_mean"))
        if not (b > 0 and m > 0 and math.isfinite(b) and math.isfinite(m)):
            continue
        lcb, ucb = _num(r.get("lcb")), _num(r.get("ucb"))
        down = m - lcb if lcb > 0 and math.isfinite(lcb) else 0.0
        up = ucb - m if math.isfinite(ucb) else 0.0
        groups.setdefault((r["verdict"], r["bound"]), []).append(
            (b, m, max(down, 0.0), max(up, 0.0))
        )
        lo, hi = min(lo, b, m), max(hi, b, m)
    seen: set[str] = set()
    for (verdict, bname), vals in sorted(groups.items()):
        arr = np.array(vals)
        color = _VERDICT_STYLE[verdict]["color"]
        marker = _MARKERS[bounds.index(bname) % len(_MARKERS)]
        face = "none" if verdict == "outside conditions" else color
        ax.errorbar(
            arr[:, 0],
            arr[:, 1],
            yerr=arr[:, 2:].T,
            fmt=marker,
            mfc=face,
            mec=color,
            ecolor=color,
            ms=5,
            lw=0.8,
            alpha=0.85,
            label=verdict if verdict not in seen else None,
        )
        seen.add(verdict)
    if hi > 0:
        span = np.array([lo / 2, hi * 2])
        ax.plot(span, span, "k--", lw=1, label="measured = bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        for i, name in enumerate(bounds):
            ax.plot([], [], _MARKERS[i % len(_MARKERS)], color="k", mfc="none", label=name)
        ax.legend(fontsize=7, loc="upper left")
    else:
        _empty(ax, "no finite configurations")
    ax.set_xlabel("bound value")
    ax.set_ylabel(r"measured $(1/T)\sum_t \|\nabla f(\bar x_t)\|^2$ (mean, CI)")
    ax.set_title("Monte-Carlo measurement vs bound (below the line: bound holds)")
    return _save(fig, directory, "measured_vs_bound")


def plot_rates(rows: Sequence[Mapping[str, Any]], directory: Path) -> list[str]:
    """Measured value and bound vs ``T`` per bound, log-log, with the fitted slope."""
    names = list(dict.fromkeys(r["bound"] for r in rows))
    fig, panels = _panels(len(names), 3, 3.6, 2.6, "no rate checks", left=0.75)
    for ax, name in zip(panels, names, strict=True):
        rs = [r for r in rows if r["bound"] == name]
        T = np.array([_num(r["T"]) for r in rs])
        m = np.array([_num(r["measured_mean"]) for r in rs])
        se = np.array([_num(r["measured_se"]) for r in rs])
        b = np.array([_num(r["bound_value"]) for r in rs])
        slope = _num(rs[0].get("fitted_slope"))
        lead = _num(rs[0].get("bound_leading_exponent"))
        ax.errorbar(T, m, yerr=2 * se, fmt="o-", ms=4, label=f"measured (slope {slope:.2f})")
        ax.plot(T, b, "s--", ms=3, label=f"bound (leading exp. {lead:.2f})")
        ok = (m > 0) & np.isfinite(m)
        if ok.sum() >= 2 and math.isfinite(slope):
            c = np.exp(np.mean(np.log(m[ok]) - slope * np.log(T[ok])))
            ax.plot(T, c * T**slope, ":", color="tab:blue", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.2g}"))
        ax.set_xticks(T)
        ax.set_xticklabels([str(int(t)) for t in T], fontsize=7)
        ax.set_title(f"{name} ({rs[0].get('step_rule', '')})", fontsize=8)
        ax.set_xlabel("T")
        ax.set_ylabel(r"$(1/T)\sum_t \|\nabla f(\bar x_t)\|^2$", fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("Rate in T: measured vs bound", fontsize=10)
    return _save(fig, directory, "rates")


def plot_consensus(rows: Sequence[Mapping[str, Any]], directory: Path) -> list[str]:
    """Time-averaged consensus error vs ``H`` for Local SGD and PALSGD."""
    fig, axes = _grid(1, 1, 4.6, 3.3, left=0.95)
    ax = axes[0, 0]
    algos = list(dict.fromkeys(r["algorithm"] for r in rows))
    for a in algos:
        rs = sorted((r for r in rows if r["algorithm"] == a), key=lambda r: _num(r["H"]))
        H = np.array([_num(r["H"]) for r in rs])
        m = np.array([_num(r["consensus_mean"]) for r in rs])
        se = np.array([_num(r["consensus_se"]) for r in rs])
        extra = (
            f" (p={_num(rs[0]['p']):.2g}, eta={_num(rs[0]['eta']):.2g})"
            if any(_num(r["p"]) > 0 for r in rs)
            else ""
        )
        pos = m > 1e-12 * max(1.0, float(np.nanmax(m)))  # H = 1: no consensus error at all
        ax.errorbar(
            H[pos],
            m[pos],
            yerr=np.minimum(2 * se[pos], 0.99 * m[pos]),
            fmt="o-",
            ms=4,
            label=a + extra,
        )
    if algos:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        r0 = rows[0]
        ax.set_title(
            f"consensus error vs H ({r0['problem']}, K={r0['K']}, alpha={_num(r0['alpha']):.3g})",
            fontsize=9,
        )
    else:
        _empty(ax, "no consensus runs")
    ax.set_xlabel("H (local steps between syncs; H = 1 has zero consensus error)")
    ax.set_ylabel(r"$(1/T)\sum_t (1/K)\sum_k \|x_k - \bar x\|^2$")
    return _save(fig, directory, "consensus_vs_H")


def plot_exact_vs_mc(
    rows: Sequence[Mapping[str, Any]], directory: Path, metric: str = "grad_norm_sq"
) -> list[str]:
    """Exact expected curve vs Monte-Carlo mean (+- 2 se) of ``metric``, per algorithm."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, panels = _panels(len(labels), 4, 3.0, 2.1, "no exact-vs-Monte-Carlo comparison")
    for ax, lab in zip(panels, labels, strict=True):
        rs = [r for r in rows if r["label"] == lab and r["metric"] == metric]
        t = np.array([_num(r["step"]) for r in rs])
        e = np.array([_num(r["exact"]) for r in rs])
        m = np.array([_num(r["mc_mean"]) for r in rs])
        se = np.array([_num(r["mc_se"]) for r in rs])
        ax.fill_between(
            t, m - 2 * se, m + 2 * se, alpha=0.3, color="tab:orange", label="MC mean +- 2 se"
        )
        ax.plot(t, m, color="tab:orange", lw=0.8)
        ax.plot(t, e, "k-", lw=1.2, label="exact")
        ax.set_yscale("log")
        ax.set_title(lab, fontsize=8)
        ax.set_xlabel("step t")
        ax.legend(fontsize=6)
    fig.suptitle(f"exact expectation vs Monte Carlo: E {metric}", fontsize=10)
    return _save(fig, directory, "exact_vs_mc")


def plot_report(report: VerifyReport, directory: str | Path) -> list[str]:
    """Write every plot of ``report`` into ``directory``; returns the file names."""
    directory = Path(directory)
    files = []
    files += plot_tightness(report.tightness, directory)
    files += plot_measured_vs_bound(report.results, directory)
    files += plot_rates(report.rates, directory)
    files += plot_consensus(report.consensus, directory)
    files += plot_exact_vs_mc(report.exact_vs_mc, directory)
    return files

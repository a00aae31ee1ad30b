"""Figure ``time_to_target``: time to the target loss per method, the reduction against DDP,
and the paper's three reported PALSGD reductions alongside."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from core.errors import UserInputError
from paper_figures import style
from paper_figures.analysis import (
    PAPER_LABELS,
    PAPER_REDUCTIONS,
    PAPER_SOURCE,
    CostSetup,
    Curve,
    choose_target,
    reduction,
    time_to_target,
)
from paper_figures.figures import common as C
from theory.algorithm import lookup

__all__ = ["TTT_COLUMNS", "time_to_target_figure"]

TTT_COLUMNS = (
    "source",
    "task",
    "algorithm",
    "clock",
    "target_loss",
    "time_to_target",
    "step_at_target",
    "reduction_vs_ddp",
)
#: (bar offset sign, clock, hatch) of the two bars per method
_BARS = ((-1, "measured", None), (1, "modelled", "//"))


def _ttt_rows(task: str, curves: Mapping[str, Curve], target: float) -> list[dict[str, Any]]:
    rows = []
    for clock in ("measured", "modelled", "step"):
        base = time_to_target(curves["ddp"], target, clock)[0] if "ddp" in curves else math.nan
        for alg in C.ORDER:
            if alg not in curves:
                continue
            t, s = time_to_target(curves[alg], target, clock)
            rows.append(
                {
                    "source": "this run",
                    "task": task,
                    "algorithm": alg,
                    "clock": clock,
                    "target_loss": target,
                    "time_to_target": t,
                    "step_at_target": s,
                    "reduction_vs_ddp": reduction(base, t),
                }
            )
    return rows


def _paper_rows() -> list[dict[str, Any]]:
    return [
        {
            "source": "paper",
            "task": k,
            "algorithm": "palsgd",
            "clock": "paper",
            "target_loss": None,
            "time_to_target": None,
            "step_at_target": None,
            "reduction_vs_ddp": v,
        }
        for k, v in PAPER_REDUCTIONS.items()
    ]


def _faster(red: float) -> str:
    """``0.21 -> '21% faster'``, ``-0.07 -> '7% slower'``."""
    if not np.isfinite(red):
        return ""
    return f"{100 * red:.0f}% faster" if red >= 0 else f"{-100 * red:.0f}% slower"


def _method_bar(ax: Any, x: float, width: float, alg: str, r: Mapping, hatch: Any, top: float):
    t = r["time_to_target"]
    if not np.isfinite(t):
        ax.text(x, 0.02 * top, "not reached", ha="center", va="bottom", fontsize=6.5, rotation=90)
        return
    ax.bar(
        x,
        t,
        width,
        color=style.color(alg),
        alpha=0.95 if hatch is None else 0.5,
        hatch=hatch,
        edgecolor=style.color(alg),
    )
    red = r["reduction_vs_ddp"]
    if lookup(alg).local and np.isfinite(red):
        ax.text(
            x,
            t * 0.97,
            _faster(red),
            ha="center",
            va="top",
            rotation=90,
            fontsize=6.5,
            color="white" if hatch is None else "black",
        )


def _task_panel(ax: Any, trows: Sequence[Mapping], title: str, target: float) -> None:
    """Bars of one task: measured and modelled time to target per method."""
    algs = [a for a in C.ORDER if any(r["algorithm"] == a for r in trows)]
    width = 0.4
    finite = [
        r["time_to_target"]
        for r in trows
        if r["clock"] != "step" and np.isfinite(r["time_to_target"])
    ]
    top = max(finite + [1e-9])
    for k, alg in enumerate(algs):
        for sign, clock, hatch in _BARS:
            r = next(x for x in trows if x["algorithm"] == alg and x["clock"] == clock)
            _method_bar(ax, k + sign * width / 2, width, alg, r, hatch, top)
    ax.set_xticks(range(len(algs)), [style.label(a) for a in algs], fontsize=8)
    ax.set_ylabel("time to target loss (s)")
    ax.set_title(f"{title}\ntarget eval loss {target:.3f}", fontsize=9)


def _reduction_bars(rows: Sequence[Mapping], tasks: Sequence[str], short: Mapping) -> list:
    """(label, reduction, colour, hatch) per bar: the paper's, then PALSGD's of these runs."""
    bars: list[tuple[str, float, str, str | None]] = [
        (f"paper: {PAPER_LABELS[k]}", v, style.PAPER_COLOR, None)
        for k, v in PAPER_REDUCTIONS.items()
    ]
    for task in tasks:
        for _, clock, hatch in _BARS:
            r = next(
                (
                    x
                    for x in rows
                    if x["task"] == task and lookup(x["algorithm"]).pulls and x["clock"] == clock
                ),
                None,
            )
            if r is not None:
                label = f"these runs: {short.get(task, task)}, {clock}"
                bars.append((label, r["reduction_vs_ddp"], style.color("palsgd"), hatch))
    return bars


def _reduction_panel(ax: Any, bars: Sequence[tuple[str, float, str, str | None]]) -> None:
    """Horizontal bars of PALSGD's reduction against DDP (%)."""
    ys = np.arange(len(bars))[::-1]
    for y, (_name, v, col, hatch) in zip(ys, bars, strict=True):
        if not np.isfinite(v):
            ax.text(0, y, " n/a (target not reached)", va="center", fontsize=7.5)
            continue
        alpha = 0.95 if hatch is None else 0.5
        ax.barh(y, 100 * v, color=col, alpha=alpha, hatch=hatch, edgecolor=col, height=0.7)
        ax.text(
            100 * v,
            y,
            f" {100 * v:.1f}% " if v >= 0 else f" \u2212{-100 * v:.1f}% ",
            va="center",
            ha="left" if v >= 0 else "right",
            fontsize=7.5,
        )
    ax.axvline(0, color="#333333", lw=0.8)
    ax.set_yticks(ys, [b[0] for b in bars], fontsize=8)
    ax.set_xlabel("PALSGD time-to-target reduction against DDP (%; > 0: PALSGD is faster)")
    ax.set_title("PALSGD vs DDP: the paper's reported reductions and these runs", fontsize=9)
    vals = [100 * b[1] for b in bars if np.isfinite(b[1])]
    lo, hi = min([0.0] + vals), max([0.0] + vals)
    ax.set_xlim(lo - 0.15 * (hi - lo) - 1, hi + 0.45 * (hi - lo) + 3)
    ax.legend(
        [
            Patch(facecolor="#999999"),
            Patch(facecolor="#999999", alpha=0.5, hatch="//"),
            Patch(facecolor=style.PAPER_COLOR),
        ],
        ["measured wall-clock", "modelled wall-clock (cost model)", "reported in the paper"],
        loc="upper right",
        frameon=True,
        framealpha=0.9,
        fontsize=7.5,
    )


def time_to_target_figure(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
    short_labels: Mapping[str, str] | None = None,
) -> C.FigureOutput:
    """Figure 2: time to the target loss per method (measured, modelled), reductions vs DDP,
    and the paper's three reported PALSGD reductions."""
    out = Path(out)
    labels = dict(task_labels or {})
    short = dict(short_labels or {})
    res = C.FigureOutput("time_to_target")
    tasks = [t for t in main if any(C.usable(r) for r in main[t].values())]
    if not tasks:
        raise UserInputError("time_to_target: no finished runs of the compared methods")
    fig = style.plt.figure(figsize=(max(4.2 * len(tasks), 8.4), 7.0))
    gs = fig.add_gridspec(2, len(tasks), height_ratios=[1.25, 1.0], hspace=0.42, wspace=0.3)
    rows: list[dict[str, Any]] = []
    targets = {}
    for i, task in enumerate(tasks):
        ax = fig.add_subplot(gs[0, i])
        style.apply(ax)
        curves = C.curves_of(main[task], cost)
        targets[task] = choose_target(curves)
        trows = _ttt_rows(task, curves, targets[task])
        rows += trows
        _task_panel(ax, trows, labels.get(task, task), targets[task])
    ax = fig.add_subplot(gs[1, :])
    style.apply(ax)
    _reduction_panel(ax, _reduction_bars(rows, tasks, short))
    rows += _paper_rows()
    style.footnote(
        fig, f"Target: the lowest eval loss every method reaches. Paper: {PAPER_SOURCE}."
    )
    fig.suptitle(
        "Time to the target loss (bars: measured, hatched: modelled; labels: against DDP)",
        fontsize=10,
        y=0.96,
    )
    meta = {
        "targets": targets,
        "target_rule": C.TARGET_RULE,
        "time_to_target_rule": "clock value at the first evaluation with loss <= target",
        "reduction": "(T_ddp - T_method) / T_ddp",
        "paper": PAPER_REDUCTIONS,
        "paper_source": PAPER_SOURCE,
        "cost_model": C.cost_meta(cost),
    }
    C.finish(res, fig, out, rows, TTT_COLUMNS, meta, tight=False)
    res.summary = {
        "targets": targets,
        "palsgd_reduction_vs_ddp": {
            f"{r['task']}/{r['clock']}": r["reduction_vs_ddp"]
            for r in rows
            if lookup(r["algorithm"]).pulls and r["source"] == "this run" and r["clock"] != "step"
        },
        "paper": PAPER_REDUCTIONS,
    }
    return res

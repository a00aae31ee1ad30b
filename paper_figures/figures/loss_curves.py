"""Figure ``loss_vs_time``: evaluation loss against steps, measured and modelled wall-clock."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError
from paper_figures import style
from paper_figures.analysis import CostSetup, Curve, choose_target
from paper_figures.figures.common import (
    CLOCKS,
    ORDER,
    TARGET_RULE,
    FigureOutput,
    cost_meta,
    curves_of,
    finish,
    model_error,
    task_kind,
    usable,
    ylim_top,
)

__all__ = ["LOSS_COLUMNS", "loss_vs_time"]

LOSS_COLUMNS = ("task", "algorithm", "step", "eval_loss", "measured_s", "modelled_s")
_CLOCK_TITLES = {"step": "per step", "measured": "measured", "modelled": "modelled"}


def _mark_target(ax: Any, target: float) -> None:
    ax.axhline(target, color="#777777", ls=":", lw=1)
    ax.text(
        0.02,
        target,
        f"target {target:.3f}",
        transform=ax.get_yaxis_transform(),
        ha="left",
        va="top",
        fontsize=7,
        color="#555555",
    )


def _draw_panel(ax: Any, curves: Mapping[str, Curve], clock: str, handles: dict) -> bool:
    """The methods' loss curves against ``clock``; False when nothing could be drawn."""
    drawn = False
    for alg in ORDER:
        if alg not in curves:
            continue
        c = curves[alg]
        x = c.clock(clock)
        if not np.any(np.isfinite(x)):
            continue
        (h,) = ax.plot(
            x, c.loss, color=style.color(alg), lw=1.6, marker="o", ms=2.5, label=style.label(alg)
        )
        handles[alg] = h
        drawn = True
    return drawn


def _task_row(
    axes_row: Any, curves: Mapping[str, Curve], title: str, kind: str, handles: dict
) -> float:
    """One task: a panel per clock; returns the target loss."""
    target = choose_target(curves)
    top = ylim_top(curves)
    for j, clock in enumerate(CLOCKS):
        ax = axes_row[j]
        if not _draw_panel(ax, curves, clock, handles):
            style.empty_panel(ax, "no cost model calibrated" if clock == "modelled" else "no data")
            continue
        if np.isfinite(target):
            _mark_target(ax, target)
        if top is not None:
            ax.set_ylim(top=top)
        ax.set_xlabel(style.CLOCK_LABELS[clock])
        if j == 0:
            ax.set_ylabel(style.loss_label(kind))
        ax.set_title(f"{title}: {_CLOCK_TITLES[clock]}", fontsize=9)
    return target


def _run_meta(run: Any, c: Curve) -> dict[str, Any]:
    return {
        "directory": run.directory,
        "status": run.status,
        "final_loss": c.final_loss,
        "min_loss": c.min_loss,
        "measured_total_s": float(c.measured_s[-1]),
        "modelled_total_s": float(c.modelled_s[-1]),
        "model_error": model_error(c),
        "world_size": run.world_size,
    }


def _curve_rows(task: str, alg: str, c: Curve) -> list[dict[str, Any]]:
    return [
        {
            "task": task,
            "algorithm": alg,
            "step": int(c.step[k]),
            "eval_loss": c.loss[k],
            "measured_s": c.measured_s[k],
            "modelled_s": c.modelled_s[k],
        }
        for k in range(len(c.step))
    ]


def loss_vs_time(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
) -> FigureOutput:
    """Figure 1: loss against steps, measured and modelled wall-clock (rows: tasks)."""
    out = Path(out)
    labels = dict(task_labels or {})
    res = FigureOutput("loss_vs_time")
    tasks = [t for t in main if any(usable(r) for r in main[t].values())]
    if not tasks:
        raise UserInputError("loss_vs_time: no finished runs of the compared methods")
    fig, axes = style.figure(len(tasks), 3, width=4.0, height=3.0)
    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "clocks": {k: style.CLOCK_LABELS[k] for k in CLOCKS},
        "target_rule": TARGET_RULE,
        "cost_model": cost_meta(cost),
        "tasks": {},
    }
    handles: dict[str, Any] = {}
    for i, task in enumerate(tasks):
        curves = curves_of(main[task], cost)
        title = labels.get(task, task)
        target = _task_row(axes[i], curves, title, task_kind(main[task]), handles)
        tmeta: dict[str, Any] = {"label": title, "target_loss": target, "runs": {}}
        for alg, c in curves.items():
            tmeta["runs"][alg] = _run_meta(main[task][alg], c)
            rows += _curve_rows(task, alg, c)
        missing = [a for a in ORDER if a not in curves]
        if missing:
            tmeta["missing"] = missing
            res.notes.append(f"{task}: no finished run of {', '.join(missing)}")
        meta["tasks"][task] = tmeta
    order = [a for a in ORDER if a in handles]
    style.legend_below(fig, [handles[a] for a in order], [style.label(a) for a in order])
    fig.suptitle(
        "Evaluation loss against optimizer steps, measured wall-clock and modelled "
        "wall-clock (cost model)",
        fontsize=10,
        y=1.01,
    )
    if cost is not None:
        style.footnote(fig, f"Cost model: {cost.source}.", y=-0.045)
    finish(res, fig, out, rows, LOSS_COLUMNS, meta)
    res.summary = {
        t: {
            "target_loss": m["target_loss"],
            "model_error": {a: r["model_error"] for a, r in m["runs"].items()},
        }
        for t, m in meta["tasks"].items()
    }
    return res

"""Figure ``gain_attribution``: where the modelled time saving over DDP comes from.

The parts of :func:`empirical.cost.attribute_gain` (compute skipped on pull steps,
communication saved, fewer/more steps, the extra costs) for these runs and, at paper scale,
for the paper's three settings (:func:`empirical.cost.paper_scale_prediction`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from core.errors import UserInputError
from empirical import cost as costmodel
from paper_figures import style
from paper_figures.analysis import (
    PAPER_LABELS,
    PAPER_SOURCE,
    PARAM_BYTES,
    CostSetup,
    Curve,
    choose_target,
    cost_kwargs,
    time_to_target,
    truncate_records,
)
from paper_figures.figures.common import ORDER, FigureOutput, cost_meta, curves_of, finish

__all__ = ["ATTRIBUTION_COLUMNS", "gain_attribution"]

ATTRIBUTION_COLUMNS = (
    "scenario",
    "kind",
    "task",
    "method",
    "profile",
    "part",
    "seconds",
    "fraction_of_baseline",
    "total_saving_s",
    "time_baseline_s",
    "time_reduction",
    "measured_time_reduction",
    "paper_reduction",
)
#: a scenario: (title, kind, task, method, profile, attribution)
Scenario = tuple[str, str, str, str, str, dict[str, Any]]


def _attribution(
    task: str, ddp: Any, method: Any, curves: Mapping[str, Curve], target: float, cost: CostSetup
) -> dict[str, Any] | None:
    _, s_b = time_to_target(curves["ddp"], target, "step")
    _, s_m = time_to_target(curves[method.algorithm], target, "step")
    if not (np.isfinite(s_b) and np.isfinite(s_m)) or s_b <= 0 or s_m <= 0:
        return None
    tb, tm = truncate_records(ddp.train, s_b), truncate_records(method.train, s_m)
    if not tb or not tm or method.parameters is None:
        return None
    kw = cost_kwargs(method)
    name = kw.pop("algorithm")
    K = method.world_size
    link = (
        cost.link
        if (cost.link is not None and K > 1)
        else costmodel.LinkProfile("none", 0.0, 1.0, source="K = 1")
    )
    return costmodel.attribute_gain(
        tb,
        tm,
        compute=cost.compute[task],
        link=link,
        K=K,
        param_bytes=method.parameters * PARAM_BYTES,
        algorithm=name,
        **kw,
    )


def _run_scenarios(
    main: Mapping[str, Mapping[str, Any]], cost: CostSetup, labels: Mapping, res: FigureOutput
) -> list[Scenario]:
    """Each local method against DDP at the target loss, per task."""
    scenarios: list[Scenario] = []
    for task, runs in main.items():
        curves = curves_of(runs, cost)
        if "ddp" not in curves or task not in cost.compute:
            continue
        target = choose_target(curves)
        for alg in ORDER[1:]:
            if alg not in curves:
                continue
            g = _attribution(task, runs["ddp"], runs[alg], curves, target, cost)
            if g is None:
                res.notes.append(f"{task}/{alg}: target not reached, no attribution")
                continue
            title = f"{labels.get(task, task)}: {style.label(alg)} vs DDP"
            scenarios.append((title, "this run (modelled)", task, alg, "calibrated", g))
    return scenarios


def _prediction_scenario(p: Mapping[str, Any]) -> Scenario:
    return (
        f"{PAPER_LABELS.get(p['setting'], p['setting'])}, {p['inputs']['coins']} coins",
        "paper-scale prediction",
        p["setting"],
        p["method"],
        p["profile"],
        dict(p["attribution"], paper_reduction=p["paper_reported_time_reduction"]),
    )


def _part_row(s: Scenario, part: str, v: float, frac: float) -> dict[str, Any]:
    title, kind, task, alg, prof, g = s
    return {
        "scenario": title,
        "kind": kind,
        "task": task,
        "method": alg,
        "profile": prof,
        "part": part,
        "seconds": v,
        "fraction_of_baseline": frac,
        "total_saving_s": g["total_saving_s"],
        "time_baseline_s": g["time_baseline_s"],
        "time_reduction": g["time_reduction"],
        "measured_time_reduction": g.get("measured", {}).get("time_reduction"),
        "paper_reduction": g.get("paper_reduction"),
    }


def _scenario_bar(ax: Any, y: float, s: Scenario) -> list[dict[str, Any]]:
    """Stacked parts (savings right, costs left), the total, the measured and the paper's."""
    g = s[5]
    base = g["time_baseline_s"]
    pos, neg = 0.0, 0.0
    rows = []
    for part in style.PART_COLORS:
        v = g["parts_s"].get(part, 0.0)
        frac = v / base if base > 0 else 0.0
        left = pos if frac >= 0 else neg
        ax.barh(
            y,
            100 * frac,
            left=100 * left,
            color=style.PART_COLORS[part],
            height=0.6,
            edgecolor="white",
            lw=0.5,
        )
        if frac >= 0:
            pos += frac
        else:
            neg += frac
        rows.append(_part_row(s, part, v, frac))
    ax.plot(100 * g["time_reduction"], y, marker="D", color="black", ms=5, zorder=5)
    if g.get("paper_reduction") is not None:
        ax.plot(100 * g["paper_reduction"], y, marker="*", color=style.PAPER_COLOR, ms=9, zorder=6)
    mt = g.get("measured", {}).get("time_reduction")
    if mt is not None and np.isfinite(mt):
        ax.plot(100 * mt, y, marker="s", color=style.MEASURED_COLOR, ms=4.5, zorder=6, mfc="none")
    return rows


def _legend(fig: Any) -> None:
    parts = list(style.PART_COLORS)
    handles = [Patch(color=style.PART_COLORS[p]) for p in parts]
    names = [style.PART_LABELS[p] for p in parts]
    handles += [
        Line2D([], [], marker="D", color="black", ls=""),
        Line2D([], [], marker="s", color=style.MEASURED_COLOR, mfc="none", ls=""),
        Line2D([], [], marker="*", color=style.PAPER_COLOR, ms=9, ls=""),
    ]
    names += ["total modelled saving", "measured saving", "paper's reported reduction"]
    style.legend_below(fig, handles, names, ncol=3)


def gain_attribution(
    main: Mapping[str, Mapping[str, Any]],
    cost: CostSetup | None,
    out: str | Path,
    task_labels: Mapping[str, str] | None = None,
    predictions: Sequence[Mapping[str, Any]] | None = None,
) -> FigureOutput:
    """Figure: where the modelled time saving over DDP comes from.

    Left: for these runs, each local method against DDP at the target loss (each run's
    trace up to its first evaluation at or below the target). Right: the paper's three
    settings on one cluster profile (paper-scale prediction, equal step counts assumed).
    Bars are the parts of :func:`empirical.cost.attribute_gain` as a percentage of
    DDP's modelled time; positive parts save time, negative parts cost time; the diamond is
    the total (the parts add up to it).
    """
    out = Path(out)
    res = FigureOutput("gain_attribution")
    scenarios = _run_scenarios(main, cost, dict(task_labels or {}), res) if cost is not None else []
    scenarios += [_prediction_scenario(p) for p in predictions or []]
    if not scenarios:
        raise UserInputError(
            "gain_attribution: nothing to attribute (no calibrated cost model "
            "and no paper-scale predictions)"
        )
    kinds = list(dict.fromkeys(s[1] for s in scenarios))
    tallest = max(sum(1 for s in scenarios if s[1] == k) for k in kinds)
    fig, axes = style.figure(1, len(kinds), width=5.2, height=0.45 * tallest + 1.6)
    rows = []
    for ai, kind in enumerate(kinds):
        ax = axes[0][ai]
        sc = [s for s in scenarios if s[1] == kind]
        ys = np.arange(len(sc))[::-1]
        for y, s in zip(ys, sc, strict=True):
            rows += _scenario_bar(ax, y, s)
        ax.axvline(0, color="#333333", lw=0.8)
        ax.set_yticks(ys, [s[0] for s in sc], fontsize=7)
        ax.set_xlabel(
            "share of DDP's modelled time to target (%)\n(> 0 saves time, < 0 costs time)"
        )
        profs = sorted({s[4] for s in sc if s[4] != "calibrated"})
        ax.set_title(kind + (f" on {', '.join(profs)}" if profs else ""), fontsize=9)
    _legend(fig)
    fig.suptitle("Attribution of the time saving over DDP (cost model)", fontsize=10, y=1.02)
    keys = ("scenario", "kind", "task", "method", "profile", "attribution")
    meta = {
        "scenarios": [dict(zip(keys, s, strict=True)) for s in scenarios],
        "cost_model": cost_meta(cost),
        "paper_source": PAPER_SOURCE,
    }
    finish(res, fig, out, rows, ATTRIBUTION_COLUMNS, meta)
    res.summary = {
        s[0]: {
            "time_reduction": s[5]["time_reduction"],
            "parts_fraction": s[5].get("parts_fraction_of_baseline"),
        }
        for s in scenarios
    }
    return res

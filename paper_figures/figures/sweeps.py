"""Figure ``sensitivity``: PALSGD's final loss and time to target against ``H`` and ``p``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError
from paper_figures import style
from paper_figures.analysis import CostSetup, Curve, choose_target, curve_of, time_to_target
from paper_figures.figures.common import (
    FigureOutput,
    cost_meta,
    curves_of,
    finish,
    point_row,
    task_kind,
    usable,
)

__all__ = ["SENSITIVITY_COLUMNS", "sensitivity"]

SENSITIVITY_COLUMNS = (
    "parameter",
    "value",
    "is_default",
    "final_loss",
    "min_loss",
    "target_loss",
    "ttt_measured_s",
    "ttt_modelled_s",
    "step_at_target",
    "reached",
    "grad_steps",
    "pull_steps",
    "syncs",
    "status",
)
_CLOCK_COLORS = (("measured", style.MEASURED_COLOR), ("modelled", style.MODEL_COLOR))


def _param_label(key: str) -> str:
    return {
        "H": "H (local steps between syncs, log scale)",
        "p": "p (probability of a pull step)",
    }.get(key, key)


def _sweep_rows(key: str, pts: Sequence[Any], pcurves: Mapping, target: float, defaults):
    return [
        {
            "parameter": key,
            "value": float(run.x),
            "is_default": float(run.x) == float(defaults.get(key, math.nan)),
            **point_row(run, pcurves.get(str(run.x)), target),
        }
        for run in pts
    ]


def _final_panel(ax: Any, key: str, xs, finals, ddp: Curve | None, kind: str) -> None:
    ax.plot(xs, finals, color=style.color("palsgd"), marker="o", lw=1.6, label="PALSGD")
    if ddp is not None:
        ax.axhline(ddp.final_loss, color=style.color("ddp"), ls="--", lw=1, label="DDP")
    ax.set_xlabel(_param_label(key))
    ax.set_ylabel(f"final {style.loss_label(kind)}")
    ax.set_title(f"final loss against {key}", fontsize=9)
    ax.legend(frameon=False)


def _time_panel(ax: Any, key: str, xs, tms, tmods, ddp: Curve | None, target: float) -> None:
    for vals, (lab, col), mk in zip((tms, tmods), _CLOCK_COLORS, ("s", "o"), strict=True):
        v = np.asarray(vals, dtype=float)
        ax.plot(xs, v, color=col, marker=mk, lw=1.4, label=f"PALSGD, {lab}")
    finite = [v for v in tms + tmods if np.isfinite(v)]
    ymax = max(finite) if finite else 1.0
    for x, a, b in zip(xs, tms, tmods, strict=True):
        if not (np.isfinite(a) or np.isfinite(b)):
            ax.plot([x], [ymax * 1.08], marker="x", color="#aa0000", ms=7)
            ax.annotate(
                "not reached",
                (x, ymax * 1.08),
                fontsize=6.5,
                ha="center",
                va="bottom",
                xytext=(0, 3),
                textcoords="offset points",
            )
    if ddp is not None:
        for clock, col in _CLOCK_COLORS:
            t, _ = time_to_target(ddp, target, clock)
            if np.isfinite(t):
                ax.axhline(t, color=col, ls="--", lw=1, label=f"DDP, {clock}")
    ax.set_ylim(bottom=0, top=ymax * 1.25)
    ax.set_xlabel(_param_label(key))
    ax.set_ylabel(f"time to eval loss {target:.3f} (s)")
    ax.set_title(f"time to the lowest loss every {key} reaches", fontsize=9)
    ax.legend(frameon=False, fontsize=7)


def _mark_default(axes_row: Any, key: str, xs: Sequence[float], default: Any) -> None:
    for a in axes_row:
        if default is not None:
            a.axvline(float(default), color="#bbbbbb", lw=4, alpha=0.4, zorder=0)
        if key == "H":
            a.set_xscale("log", base=2)
            a.set_xticks(xs, [f"{int(x)}" for x in xs])


def sensitivity(
    main_runs: Mapping[str, Any],
    sweeps: Mapping[str, Sequence[Any]],
    cost: CostSetup | None,
    out: str | Path,
    *,
    defaults: Mapping[str, Any],
    task_label: str = "",
) -> FigureOutput:
    """Figure: PALSGD's final loss and time to target against ``H`` and against ``p``.

    ``sweeps``: ``{"H": runs, "p": runs}`` with ``run.x`` the value; the target of a row
    is the lowest loss every run of that sweep reaches (the rule of ``time_to_target``
    applied to the sweep); ``main_runs``: the four methods on the same task (DDP's final
    loss and time to that target are drawn for reference); ``defaults``: the task's own
    ``H`` and ``p`` (marked).
    """
    out = Path(out)
    res = FigureOutput("sensitivity")
    ddp = curves_of(main_runs, cost).get("ddp")
    targets: dict[str, float] = {}
    params = [k for k in ("H", "p") if sweeps.get(k)]
    if not params:
        raise UserInputError("sensitivity: no sweep runs")
    fig, axes = style.figure(len(params), 2, width=4.0, height=3.0)
    rows = []
    kind = task_kind(main_runs) if main_runs else "lm"
    for i, key in enumerate(params):
        pts = sorted(sweeps[key], key=lambda r: float(r.x))
        pcurves = {str(r.x): curve_of(r, cost) for r in pts if usable(r)}
        targets[key] = target = choose_target(pcurves)
        prows = _sweep_rows(key, pts, pcurves, target, defaults)
        rows += prows
        xs = [r["value"] for r in prows]
        tms = [r.get("ttt_measured_s", math.nan) for r in prows]
        tmods = [r.get("ttt_modelled_s", math.nan) for r in prows]
        finals = [r.get("final_loss", math.nan) for r in prows]
        _final_panel(axes[i][0], key, np.asarray(xs), finals, ddp, kind)
        _time_panel(axes[i][1], key, np.asarray(xs), tms, tmods, ddp, target)
        _mark_default(axes[i], key, xs, defaults.get(key))
    fig.suptitle(
        f"Sensitivity of PALSGD to H and p ({task_label}; grey band: the default)",
        fontsize=10,
        y=1.02,
    )
    meta = {
        "task": task_label,
        "target_loss": targets,
        "defaults": dict(defaults),
        "target_rule": "per swept parameter: max over its runs of each run's lowest eval loss",
        "cost_model": cost_meta(cost),
    }
    finish(res, fig, out, rows, SENSITIVITY_COLUMNS, meta)
    res.summary = {
        "target_loss": targets,
        "points": {f"{r['parameter']}={r['value']:g}": r.get("final_loss") for r in rows},
    }
    return res

"""Figure ``ablation``: each reference-faithful switch of the authors' code on its own, and
all together, against PALSGD as described."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError
from paper_figures import style
from paper_figures.analysis import CostSetup, Curve, choose_target, curve_of
from paper_figures.figures.common import (
    FigureOutput,
    cost_meta,
    finish,
    point_row,
    task_kind,
    usable,
    ylim_top,
)

__all__ = ["ABLATION_COLUMNS", "ablation"]

ABLATION_COLUMNS = (
    "variant",
    "switch",
    "label",
    "final_loss",
    "min_loss",
    "delta_final_loss_vs_base",
    "target_loss",
    "ttt_measured_s",
    "ttt_modelled_s",
    "step_at_target",
    "tokens",
    "grad_steps",
    "pull_steps",
    "allreduce_calls",
    "bytes_communicated",
    "status",
)
_CMAP = ["#222222", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]
#: the AlgorithmConfig switches recorded per variant in ablation.json
_SWITCH_FIELDS = (
    "coins",
    "pull_first_tensor_only",
    "discard_batch_on_pull",
    "outer_steps_per_sync",
    "sync_offset",
)
#: an entry: (label, switch, run, curve or None when the run is not usable)
Entry = tuple[str, str, Any, Curve | None]


def _curves_panel(ax: Any, entries: Sequence[Entry], target: float, kind: str) -> None:
    for k, (lab, _, _, c) in enumerate(entries):
        if c is not None:
            ax.plot(
                c.step, c.loss, color=_CMAP[k % len(_CMAP)], lw=2.2 if k == 0 else 1.2, label=lab
            )
    top = ylim_top({e[1]: e[3] for e in entries if e[3] is not None})
    if top is not None:
        ax.set_ylim(top=top)
    if np.isfinite(target):
        ax.axhline(target, color="#777777", ls=":", lw=1)
    ax.set_xlabel(style.CLOCK_LABELS["step"])
    ax.set_ylabel(style.loss_label(kind))
    ax.legend(frameon=False, fontsize=6.5)


def _final_panel(ax: Any, ys: Any, rows: Sequence[Mapping], base_final: float) -> None:
    for y, row, k in zip(ys, rows, range(len(rows)), strict=True):
        v = row.get("final_loss", math.nan)
        if np.isfinite(v):
            ax.barh(y, v, color=_CMAP[k % len(_CMAP)], height=0.6)
            ax.text(v, y, f" {v:.3f}", va="center", fontsize=7)
    ax.axvline(base_final, color="#222222", ls="--", lw=1)
    finals = [r.get("final_loss") for r in rows if np.isfinite(r.get("final_loss", math.nan))]
    if finals:
        lo, hi = min(finals), max(finals)
        ax.set_xlim(lo - 0.6 * (hi - lo) - 0.02, hi + 0.35 * (hi - lo) + 0.02)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
    ax.set_xlabel("final eval loss of the anchor (nats)")
    ax.set_title("final loss (dashed: as described)", fontsize=9)


def _time_panel(ax: Any, ys: Any, rows: Sequence[Mapping], target: float) -> None:
    h = 0.38
    for y, row in zip(ys, rows, strict=True):
        for off, key, col, lab in (
            (h / 2, "ttt_measured_s", style.MEASURED_COLOR, "measured"),
            (-h / 2, "ttt_modelled_s", style.MODEL_COLOR, "modelled"),
        ):
            v = row.get(key, math.nan)
            if v is not None and np.isfinite(v):
                ax.barh(y + off, v, height=h, color=col, label=lab if y == ys[0] else None)
            else:
                ax.text(0, y + off, " not reached", va="center", fontsize=6.5)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
    ax.set_xlabel("time to target loss (s)")
    ax.set_title(f"time to target (eval loss {target:.3f})", fontsize=9)
    ax.legend(frameon=False, fontsize=7)


def ablation(
    base: Any,
    variants: Sequence[Any],
    cost: CostSetup | None,
    out: str | Path,
    *,
    task_label: str = "",
) -> FigureOutput:
    """Figure: each reference-faithful switch of the authors' code on its own, and all on.

    ``base``: PALSGD as described; ``variants``: runs with ``run.x`` the switch name
    (``"all"`` for all switches). Left: loss curves per step; middle: final loss; right:
    time to the target (modelled and measured), the lowest loss every variant reaches.
    """
    out = Path(out)
    res = FigureOutput("ablation")
    if not usable(base):
        raise UserInputError("ablation: the PALSGD run without switches did not finish")
    base_curve = curve_of(base, cost)
    entries: list[Entry] = [("as described", "none", base, base_curve)]
    for run in variants:
        c = curve_of(run, cost) if usable(run) else None
        entries.append((run.label or str(run.x), str(run.x), run, c))
    target = choose_target({e[1]: e[3] for e in entries if e[3] is not None})
    rows = []
    for lab, sw, run, c in entries:
        row = {"variant": run.name, "switch": sw, "label": lab, **point_row(run, c, target)}
        if c is not None:
            row["delta_final_loss_vs_base"] = c.final_loss - base_curve.final_loss
        rows.append(row)
    fig, axes = style.figure(1, 3, width=4.2, height=3.4)
    ys = np.arange(len(entries))[::-1]
    _curves_panel(axes[0][0], entries, target, task_kind({"x": base}))
    _final_panel(axes[0][1], ys, rows, base_curve.final_loss)
    _time_panel(axes[0][2], ys, rows, target)
    fig.suptitle(
        f"Ablation of the reference-faithful switches of the authors' code ({task_label})",
        fontsize=10,
        y=1.02,
    )
    style.footnote(
        fig,
        "Q-numbers: the quirks of the authors' code as listed in "
        "docs/reference-implementation.md section 6 (AlgorithmConfig switches).",
    )
    meta = {
        "task": task_label,
        "target_loss": target,
        "base": base.name,
        "target_rule": "max over the variants of each variant's lowest eval loss",
        "switches": {r["switch"]: r["label"] for r in rows},
        "config": {
            r.name: {k: r.summary.get("algorithm", {}).get(k) for k in _SWITCH_FIELDS}
            for _, _, r, _ in entries
        },
        "cost_model": cost_meta(cost),
    }
    finish(res, fig, out, rows, ABLATION_COLUMNS, meta)
    res.summary = {r["switch"]: r.get("delta_final_loss_vs_base") for r in rows}
    return res

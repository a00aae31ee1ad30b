"""What every figure shares: the output record, the run helpers and the data writers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.io import atomic_write_json, write_csv
from paper_figures import style
from paper_figures.analysis import CostSetup, Curve, curve_of, time_to_target
from paper_figures.runs.specs import ALGORITHMS

__all__ = [
    "FigureOutput",
    "ORDER",
    "CLOCKS",
    "TARGET_RULE",
    "task_kind",
    "usable",
    "curves_of",
    "ylim_top",
    "model_error",
    "cost_meta",
    "point_row",
    "finish",
]

#: the compared methods, in plotting order
ORDER = ALGORITHMS
CLOCKS = ("step", "measured", "modelled")
TARGET_RULE = "max over methods of each method's lowest eval loss"


@dataclass
class FigureOutput:
    """What a figure function wrote (file names relative to the output directory)."""

    name: str
    files: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def task_kind(runs: Mapping[str, Any]) -> str:
    """``"lm"`` for a GPT-Neo task, ``"image"`` otherwise (from the first run's model)."""
    for r in runs.values():
        model = str(r.config.get("model", ""))
        return "lm" if model.startswith("gptneo") else "image"
    return "lm"


def usable(run: Any) -> bool:
    """A run that finished (or diverged) and has evaluations."""
    return run is not None and run.status in ("finished", "diverged") and bool(run.eval)


def curves_of(runs: Mapping[str, Any], cost: CostSetup | None) -> dict[str, Curve]:
    """The curve of every usable run, keyed as ``runs``."""
    return {alg: curve_of(run, cost) for alg, run in runs.items() if usable(run)}


def ylim_top(curves: Mapping[str, Curve]) -> float | None:
    """Upper y limit that keeps the initial loss (step 0) from flattening the curves."""
    seconds = [c.loss[1] for c in curves.values() if len(c.loss) > 1 and np.isfinite(c.loss[1])]
    firsts = [c.loss[0] for c in curves.values() if len(c.loss) and np.isfinite(c.loss[0])]
    if not seconds or not firsts:
        return None
    top = max(seconds)
    return (
        top + 0.15 * (top - min(c.min_loss for c in curves.values())) if max(firsts) > top else None
    )


def model_error(curve: Curve) -> float:
    """Relative error of the modelled total time against the measured one."""
    m, w = curve.modelled_s[-1], curve.measured_s[-1]
    return (m - w) / w if np.isfinite(m) and np.isfinite(w) and w > 0 else math.nan


def cost_meta(cost: CostSetup | None) -> dict[str, Any] | None:
    """The cost model as recorded in a figure's JSON."""
    return cost.to_dict() if cost is not None else None


def point_row(run: Any, curve: Curve | None, target: float) -> dict[str, Any]:
    """One sweep or ablation point: losses, times to ``target`` and the run's totals."""
    tot = run.summary.get("totals", {}) if run is not None else {}
    if curve is None:
        return {"status": run.status if run is not None else "missing"}
    tm, st = time_to_target(curve, target, "measured")
    tmod, _ = time_to_target(curve, target, "modelled")
    return {
        "final_loss": curve.final_loss,
        "min_loss": curve.min_loss,
        "target_loss": target,
        "ttt_measured_s": tm,
        "ttt_modelled_s": tmod,
        "step_at_target": st,
        "reached": bool(np.isfinite(st)),
        "grad_steps": tot.get("grad_steps"),
        "pull_steps": tot.get("pull_steps"),
        "syncs": tot.get("syncs"),
        "tokens": tot.get("tokens"),
        "allreduce_calls": tot.get("allreduce_calls"),
        "bytes_communicated": tot.get("bytes_communicated"),
        "status": run.status,
    }


def finish(
    res: FigureOutput,
    fig: Any,
    out: Path,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    meta: Any,
    *,
    tight: bool = True,
) -> FigureOutput:
    """Save ``fig`` as ``NAME.png``/``NAME.pdf`` and its data as ``NAME.csv`` (``rows``) and
    ``NAME.json`` (``meta``) into ``out``; record the files in ``res``."""
    if tight:
        fig.tight_layout()
    res.files += style.save(fig, out, res.name)
    res.data_files.append(write_csv(out / f"{res.name}.csv", rows, columns).name)
    res.data_files.append(atomic_write_json(out / f"{res.name}.json", meta).name)
    return res

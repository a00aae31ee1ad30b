"""One command per figure: the figure's inputs taken from the plan, the runs and the options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paper_figures import figures as F
from paper_figures import runs as R
from paper_figures.cli.options import DEFAULT_PROFILE
from theory import verify as V
from theory.verify.cli import QUICK

__all__ = ["Inputs", "FIGURE_COMMANDS", "draw"]


@dataclass
class Inputs:
    """What the figure commands draw from."""

    plan: R.Plan
    data: Mapping[str, R.RunData]
    cost: Any
    args: argparse.Namespace
    out: Path
    progress: bool

    @property
    def labels(self) -> dict[str, str]:
        return {k: t.label for k, t in self.plan.tasks.items()}

    @property
    def shorts(self) -> dict[str, str]:
        return {k: t.short or t.label for k, t in self.plan.tasks.items()}

    @property
    def sweep_task(self) -> str:
        return R.SWEEP_TASK[self.plan.scale]

    def main_runs(self) -> dict[str, dict[str, R.RunData]]:
        """task -> method -> run, of the loaded main runs."""
        out: dict[str, dict[str, R.RunData]] = {}
        for spec in self.plan.runs:
            if spec.group == "main" and spec.name in self.data:
                out.setdefault(spec.task, {})[spec.algorithm] = self.data[spec.name]
        return out


def _loss_vs_time(x: Inputs) -> F.FigureOutput:
    return F.loss_vs_time(x.main_runs(), x.cost, x.out, x.shorts)


def _time_to_target(x: Inputs) -> F.FigureOutput:
    return F.time_to_target_figure(x.main_runs(), x.cost, x.out, x.labels, x.shorts)


def _gain_attribution(x: Inputs) -> F.FigureOutput:
    preds = F.paper_predictions([x.args.profile or DEFAULT_PROFILE])
    return F.gain_attribution(x.main_runs(), x.cost, x.out, x.shorts, predictions=preds)


def _paper_scale(x: Inputs) -> F.FigureOutput:
    return F.paper_scale(x.out)


def _sensitivity(x: Inputs) -> F.FigureOutput:
    task = x.sweep_task
    sweeps = {
        k: [x.data[s.name] for s in x.plan.by_group(task, f"sweep_{k}") if s.name in x.data]
        for k in ("H", "p")
    }
    return F.sensitivity(
        x.main_runs().get(task, {}),
        sweeps,
        x.cost,
        x.out,
        defaults=dict(x.plan.tasks[task].local),
        task_label=x.labels[task],
    )


def _ablation(x: Inputs) -> F.FigureOutput:
    task = x.sweep_task
    specs = x.plan.by_group(task, "ablation")
    base = next((x.data.get(s.name) for s in specs if s.x == "none"), None)
    variants = [x.data[s.name] for s in specs if s.x != "none" and s.name in x.data]
    return F.ablation(base, variants, x.cost, x.out, task_label=x.labels[task])


def _theory_report(x: Inputs) -> Path:
    """``--verify-report``, or a fresh ``palsgd verify`` report in ``OUT/verify``."""
    if x.args.verify_report:
        return Path(x.args.verify_report)
    kw: dict[str, Any] = dict(QUICK, quick=True) if x.plan.scale == "quick" else {}
    settings = V.VerifySettings(seed=x.plan.seed, **kw).validated()
    target = x.out / "verify"
    V.write_report(V.run_verification(settings, progress=x.progress), target)
    return target


def _theory(x: Inputs) -> F.FigureOutput:
    return F.theory(_theory_report(x), x.out)


#: figure name -> its command (every name of :data:`paper_figures.runs.FIGURES`)
FIGURE_COMMANDS: dict[str, Callable[[Inputs], F.FigureOutput]] = {
    "loss_vs_time": _loss_vs_time,
    "time_to_target": _time_to_target,
    "gain_attribution": _gain_attribution,
    "paper_scale": _paper_scale,
    "sensitivity": _sensitivity,
    "ablation": _ablation,
    "theory": _theory,
}


def draw(name: str, inputs: Inputs) -> F.FigureOutput:
    """Draw the figure ``name`` (one of :data:`paper_figures.runs.FIGURES`)."""
    return FIGURE_COMMANDS[name](inputs)

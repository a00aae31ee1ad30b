"""Numbers behind the figures: loss curves on three clocks, target losses, time to target.

Clocks of a run (all in seconds except steps):

* ``step``: optimizer steps (pull steps count), the x-axis of the algorithm's efficiency;
* ``measured_s``: the trainer's ``wall_s`` (rank 0, cumulative training wall-clock with
  evaluation and checkpointing excluded; :mod:`empirical.metrics`);
* ``modelled_s``: :func:`empirical.cost.modelled_time` of the run's step trace (its
  ``train`` records: cumulative gradient steps, pull steps, syncs, all-reduce calls) with a
  compute profile and a link profile (:class:`CostSetup`).

The loss is the evaluation loss of the anchor (the global model at the last sync; for DDP
the model itself), as the trainer records it every ``eval_interval`` steps.

Time to target (the paper's headline metric: time for PALSGD and DDP to reach a target
validation loss; Naganuma et al., TMLR 2025, abstract): the first evaluation whose loss is
at or below the target; its clock value is the time to target (no interpolation between
evaluations, so it is exact for the recorded curve and resolves to one evaluation
interval). Target (:func:`choose_target`): the largest over the compared runs of each
run's lowest evaluation loss, i.e. the lowest loss that every compared run reaches.
Reduction against DDP: ``(T_ddp - T_method) / T_ddp`` (the "x% faster" of the paper).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from empirical import cost as costmodel
from theory.algorithm import lookup

__all__ = [
    "CostSetup",
    "Curve",
    "curve_of",
    "choose_target",
    "time_to_target",
    "reduction",
    "truncate_records",
    "cost_kwargs",
    "compute_from_runs",
    "PAPER_REDUCTIONS",
    "PAPER_SOURCE",
]

#: the paper's headline time-to-target reductions against DDP (Naganuma et al., "Pseudo-
#: Asynchronous Local SGD", TMLR 2025, arXiv 2504.18454, abstract), as fractions; the
#: numbers and setting labels are those of :mod:`empirical.cost`
PAPER_REDUCTIONS: dict[str, float] = dict(costmodel.PAPER_REPORTED)
PAPER_LABELS: dict[str, str] = {k: s["label"] for k, s in costmodel.SETTINGS.items()}
PAPER_SOURCE = (
    "Naganuma et al., Pseudo-Asynchronous Local SGD, TMLR 2025 (arXiv 2504.18454), abstract"
)

#: bytes per parameter of the communicated buffers (fp32 gradients and outer gradients)
PARAM_BYTES = 4


@dataclass(frozen=True)
class CostSetup:
    """What the cost model needs besides a run's trace.

    ``compute``: task name -> :class:`empirical.cost.ComputeProfile` (per worker);
    ``link``: :class:`empirical.cost.LinkProfile` (``None``: no communication, ``K = 1``);
    ``source``: how they were obtained (calibration, profile names).
    """

    compute: Mapping[str, Any]
    link: Any
    source: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The setup as recorded in the figures' JSON and the manifest."""
        return {
            "source": self.source,
            "link": self.link.to_dict() if self.link is not None else None,
            "compute": {k: v.to_dict() for k, v in self.compute.items()},
            "details": dict(self.details),
        }


@dataclass
class Curve:
    """One run's evaluation curve on the three clocks (arrays of equal length)."""

    step: np.ndarray
    loss: np.ndarray
    measured_s: np.ndarray
    modelled_s: np.ndarray

    def __post_init__(self) -> None:
        n = {len(self.step), len(self.loss), len(self.measured_s), len(self.modelled_s)}
        if len(n) != 1:
            raise ValueError("curve arrays must have equal lengths")

    def clock(self, name: str) -> np.ndarray:
        """``"step"``, ``"measured"`` or ``"modelled"``."""
        return {"step": self.step, "measured": self.measured_s, "modelled": self.modelled_s}[name]

    @property
    def final_loss(self) -> float:
        return float(self.loss[-1]) if len(self.loss) else math.nan

    @property
    def min_loss(self) -> float:
        finite = self.loss[np.isfinite(self.loss)]
        return float(finite.min()) if finite.size else math.nan


def _f(x: Any) -> float:
    return math.nan if x is None else float(x)


def cost_kwargs(run: Any) -> dict[str, Any]:
    """Keyword arguments of :func:`empirical.cost.modelled_time` from a run's summary
    (``algorithm``: the AlgorithmConfig dict the trainer recorded).

    The cost model's ``outer_steps_per_sync`` (all-reduces per sync) keeps its default 1
    whatever the run's ``outer_steps_per_sync``: this project's algorithms take the extra
    outer steps locally, so every sync of the run is one all-reduce (its train records'
    ``allreduce_calls`` count warm-up steps plus syncs)."""
    alg = dict(run.summary.get("algorithm") or {})
    name = alg.get("name") or run.config.get("algorithm") or run.algorithm
    kw: dict[str, Any] = {"algorithm": name}
    if lookup(name).local:
        kw["H"] = int(alg.get("H") or run.config.get("H") or 1)
        kw["p"] = float(alg.get("p") or 0.0)
        kw["coins"] = alg.get("coins") or "independent"
    return kw


def modelled_clock(run: Any, cost: CostSetup | None) -> np.ndarray:
    """Modelled seconds at each of the run's ``train`` records (NaN without a cost setup)."""
    n = len(run.train)
    if cost is None or run.task not in cost.compute or n == 0:
        return np.full(n, math.nan)
    K = int(run.world_size)
    params = run.parameters
    if params is None:
        return np.full(n, math.nan)
    link = cost.link
    if link is None or K <= 1:
        link = costmodel.LinkProfile("none", 0.0, 1.0, source="K = 1: no communication")
    return np.asarray(
        costmodel.modelled_time(
            run.train,
            compute=cost.compute[run.task],
            link=link,
            K=K,
            param_bytes=params * PARAM_BYTES,
            **cost_kwargs(run),
        ),
        dtype=float,
    )


def curve_of(run: Any, cost: CostSetup | None = None) -> Curve:
    """The run's evaluation curve with measured and modelled clocks.

    Step 0 (the evaluation before training) is at time 0 on both clocks. An evaluation at
    step ``s`` takes the modelled time of the ``train`` record at step ``s``; the trainer
    writes a train record at every evaluation step when ``log_interval`` divides
    ``eval_interval`` (the plans of :mod:`paper_figures.runs` do); otherwise the modelled
    time is interpolated linearly in the step.
    """
    evals = [r for r in run.eval if r.get("eval_loss") is not None]
    if not evals:
        raise UserInputError(f"run '{run.name}' has no evaluation records (eval_interval 0?)")
    step = np.asarray([int(r["step"]) for r in evals], dtype=float)
    loss = np.asarray([_f(r["eval_loss"]) for r in evals])
    measured = np.asarray([_f(r.get("wall_s")) for r in evals])
    mod_rows = modelled_clock(run, cost)
    if len(run.train):
        tr_step = np.asarray([0.0] + [float(r["step"]) for r in run.train])
        tr_mod = np.concatenate([[0.0], mod_rows])
        modelled = np.interp(step, tr_step, tr_mod, right=math.nan)
    else:
        modelled = np.full(len(step), math.nan)
    return Curve(step, loss, measured, modelled)


def choose_target(curves: Mapping[str, Curve]) -> float:
    """The lowest loss every curve reaches: ``max_runs min_evals loss`` (NaN if none)."""
    mins = [c.min_loss for c in curves.values() if np.isfinite(c.min_loss)]
    return float(max(mins)) if mins else math.nan


def time_to_target(curve: Curve, target: float, clock: str) -> tuple[float, float]:
    """``(time, step)`` of the first evaluation with ``loss <= target`` (NaN, NaN if never)."""
    if not np.isfinite(target):
        return math.nan, math.nan
    hit = np.nonzero(np.isfinite(curve.loss) & (curve.loss <= target))[0]
    if hit.size == 0:
        return math.nan, math.nan
    i = int(hit[0])
    return float(curve.clock(clock)[i]), float(curve.step[i])


def reduction(t_baseline: float, t_method: float) -> float:
    """``(t_baseline - t_method) / t_baseline`` (NaN when undefined)."""
    if not (np.isfinite(t_baseline) and np.isfinite(t_method)) or t_baseline <= 0:
        return math.nan
    return (t_baseline - t_method) / t_baseline


def truncate_records(records: Sequence[Mapping[str, Any]], step: float) -> list[dict[str, Any]]:
    """The train records up to and including ``step``."""
    return [dict(r) for r in records if float(r["step"]) <= step]


def compute_from_runs(runs: Sequence[Any], source_note: str = "") -> Any:
    """A :class:`empirical.cost.ComputeProfile` from the timers of finished runs.

    Per run (the trainer's ``summary.json`` totals of rank 0): the local work of a sync is
    ``time_sync_s - time_comm_s`` (the sync timer includes its all-reduce; runs without
    warm-up, where every all-reduce is a sync's), a gradient step is
    ``(time_compute_s - sync local work) / grad_steps`` (forward/backward, inner step and
    the trainer's step overhead), a pull step ``time_pull_s / pull_steps``, the inner step
    ``time_inner_step_s / grad_steps``. The profile takes the median over ``runs`` of each.
    DDP runs are skipped: their gradient all-reduce runs inside the backward pass and is
    counted as compute by the trainer.
    """
    grad, pull, inner, sync = [], [], [], []
    used = []
    for run in runs:
        t = run.summary.get("totals") or {}
        alg = (run.summary.get("algorithm") or {}).get("name") or run.config.get("algorithm")
        g = t.get("grad_steps") or 0
        if not lookup(alg).local or not g or t.get("time_compute_s") is None:
            continue
        syncs = t.get("syncs") or 0
        local_sync = max(
            float(t.get("time_sync_s") or 0.0) - float(t.get("time_comm_s") or 0.0), 0.0
        )
        grad.append((float(t["time_compute_s"]) - local_sync) / g)
        inner.append(float(t.get("time_inner_step_s") or 0.0) / g)
        if syncs:
            sync.append(local_sync / syncs)
        if t.get("pull_steps"):
            pull.append(float(t.get("time_pull_s") or 0.0) / t["pull_steps"])
        used.append(run.name)
    if not grad:
        raise UserInputError(
            "no finished run of a local method (Local SGD, DiLoCo, PALSGD) "
            "to calibrate the compute per step from"
        )
    med = float(np.median(grad))
    return costmodel.ComputeProfile(
        grad_step_s=med,
        pull_step_s=float(np.median(pull)) if pull else 0.0,
        inner_step_s=min(float(np.median(inner)), med),
        sync_local_s=float(np.median(sync)) if sync else 0.0,
        source=(
            "medians of the training runs' own timers (rank 0) over "
            f"{', '.join(used)}" + (f"; {source_note}" if source_note else "")
        ),
    )

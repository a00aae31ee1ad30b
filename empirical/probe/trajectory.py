"""Estimates along a trajectory (:func:`probe_points`), the constants they feed to the bound
(:func:`aggregate`) and the measured rate (:func:`measured_rate`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from core.errors import UserInputError
from empirical.data import rng_of
from empirical.probe.estimate import PointEstimate, estimate_point
from empirical.probe.problem import ProbeProblem, set_flat
from empirical.probe.settings import ProbeSettings, SamplingPlan, make_plan


@dataclass
class ProbeResult:
    """Estimates at every point and their aggregates (``to_dict()`` is JSON-ready)."""

    points: list[PointEstimate]
    plan: SamplingPlan
    settings: ProbeSettings
    estimates: dict[str, Any]
    rate: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": [asdict(p) for p in self.points],
            "plan": self.plan.to_dict(),
            "settings": asdict(self.settings),
            "estimates": self.estimates,
            "measured_rate": self.rate,
        }


#: columns of points.csv (scalar fields of PointEstimate)
POINT_FIELDS: tuple[str, ...] = (
    "step",
    "label",
    "loss",
    "loss_se",
    "grad_norm_sq",
    "grad_norm_sq_raw",
    "grad_norm_sq_noise",
    "L_power",
    "L_rayleigh",
    "L_residual",
    "L_iterations",
    "L_converged",
    "L_secant",
    "distance_to_previous",
    "sigma2_sample",
    "sigma2_step",
    "zeta2",
    "zeta2_raw",
    "zeta2_noise",
    "seconds",
)


def probe_points(
    problem: ProbeProblem,
    points: Sequence[tuple[int, str, torch.Tensor]],
    settings: ProbeSettings,
    *,
    iid: bool,
    plan: SamplingPlan | None = None,
    progress: bool = False,
) -> ProbeResult:
    """Estimate at every point ``(step, label, flat parameters)`` and aggregate.

    Aggregates (``estimates``): ``L`` = max over points of the power estimate and of the
    secants; ``sigma2`` = the point with the largest step noise; ``zeta2`` = max over
    points (fed to the bound only for non-i.i.d. shards); ``F0`` from the first point.
    """
    if not points:
        raise UserInputError("the probe needs at least one point")
    plan = plan or make_plan(problem.shards, settings, iid=iid)
    gen = torch.Generator().manual_seed(int(rng_of(settings.seed, 0x1A).integers(2**62)))
    out: list[PointEstimate] = []
    prev_x = prev_g = v = None
    bar = tqdm(points, desc="probe", unit="point", disable=not progress, leave=False)
    for step, label, x in bar:
        bar.set_postfix(step=step)
        set_flat(problem.model, x.to(problem.device))
        est, g, v = estimate_point(
            problem,
            plan,
            settings,
            step=step,
            label=label,
            generator=gen,
            v0=v if settings.hvp_warm_start else None,
        )
        xd = x.to(problem.device, torch.float64)
        if prev_x is not None:
            dist = float((xd - prev_x).norm())
            est.distance_to_previous = dist
            est.L_secant = float((g - prev_g).norm()) / dist if dist > 0 else None
        prev_x, prev_g = xd, g
        out.append(est)
    bar.close()
    return ProbeResult(out, plan, settings, aggregate(out, settings, iid=iid))


def aggregate(
    points: Sequence[PointEstimate], settings: ProbeSettings, *, iid: bool
) -> dict[str, Any]:
    """The constants fed to the bound, with how each was obtained (see :func:`probe_points`)."""
    p_max = max(points, key=lambda p: p.L_power)
    secants = [p.L_secant for p in points if p.L_secant is not None]
    L_sec = max(secants) if secants else None
    L = max(p_max.L_power, L_sec or 0.0)
    s_max = max(points, key=lambda p: p.sigma2_step)
    z_max = max(points, key=lambda p: p.zeta2)
    first = points[0]
    best = min(points, key=lambda p: p.loss)
    return {
        "L": {
            "value": L,
            "power_max": p_max.L_power,
            "power_max_step": p_max.step,
            "secant_max": L_sec,
            "note": "local lower estimate of the global L: largest ||Hv|| of power iteration "
            "on the Hessian of a fixed batch at the visited points, and secants "
            "||grad f(x_j) - grad f(x_j-1)||/||x_j - x_j-1|| along the trajectory",
        },
        "sigma2": {
            "value": s_max.sigma2_step,
            "ci": s_max.sigma2_step_ci,
            "per_sample": s_max.sigma2_sample,
            "per_sample_ci": s_max.sigma2_sample_ci,
            "step_batch": settings.step_batch,
            "at_step": s_max.step,
            "confidence": settings.confidence,
            "pooling": "pooled over shards around grad f (i.i.d. shards)"
            if iid
            else "largest shard value around grad f_k (non-i.i.d. shards)",
            "note": "variance of one step's gradient (step_batch samples without "
            "replacement), largest over the points",
        },
        "zeta2": {
            "value": 0.0 if iid else z_max.zeta2,
            "measured": z_max.zeta2,
            "raw": z_max.zeta2_raw,
            "noise": z_max.zeta2_noise,
            "at_step": z_max.step,
            "fed": "0 (i.i.d. shards: every epoch reshuffles, zeta = 0 by construction; the "
            "measured value is the epoch-0 shards' heterogeneity)"
            if iid
            else "measured (noise-corrected, largest over the points)",
        },
        "F0": {
            "f_x0": first.loss,
            "f_x0_se": first.loss_se,
            "f_lower": settings.f_lower,
            "lower_bound": first.loss - settings.f_lower,
            "best_loss": best.loss,
            "best_loss_step": best.step,
            "reference": first.loss - best.loss,
            "fed": "lower_bound",
            "note": "F0 = f(x0) - f_lower feeds the bound (f_lower <= f_star, so it does not "
            "underestimate the gap); f(x0) - best loss reached is reported only",
        },
    }


def measured_rate(points: Sequence[PointEstimate], T: int, T0: int = 0) -> dict[str, Any] | None:
    """``(1/T_loc) sum_{t in [T0, T)} ||grad f(xbar_t)||^2`` from the recorded points.

    Left Riemann sum: a point at step ``s_i`` stands for the steps up to the next recorded
    step (or ``T``). Points before ``T0`` or at/after ``T`` are not used; the covered range
    ``[s_first, T)`` is reported. ``None`` without a point in ``[T0, T)``.
    """
    steps = sorted({p.step: p for p in points if T0 <= p.step < T}.items())
    if not steps:
        return None
    total, used = 0.0, []
    for j, (s, p) in enumerate(steps):
        nxt = steps[j + 1][0] if j + 1 < len(steps) else T
        total += (nxt - s) * p.grad_norm_sq
        used.append({"step": s, "weight": nxt - s, "grad_norm_sq": p.grad_norm_sq})
    span = T - steps[0][0]
    return {
        "value": total / span,
        "T": T,
        "T0": T0,
        "covered": [steps[0][0], T],
        "points": used,
        "source": "replayed checkpoints: ||grad f||^2 over the probe set at the workers' "
        "average model, left Riemann sum over the recorded steps (the trainer does "
        "not record gradient norms)",
    }

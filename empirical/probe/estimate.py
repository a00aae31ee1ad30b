"""Every estimate at one trajectory point (:func:`estimate_point`): loss and its standard
error, sigma^2 with its confidence interval, zeta^2 and ||grad f||^2 noise-corrected, L by
power iteration (definitions in :mod:`empirical.probe`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import stdtrit

from empirical.probe.gradients import (
    PowerIteration,
    make_hvp,
    mean_loss_and_gradient,
    per_sample_gradients,
    power_iteration,
)
from empirical.probe.problem import ProbeProblem
from empirical.probe.settings import ProbeSettings, SamplingPlan


@dataclass
class PointEstimate:
    """Every estimate at one trajectory point (see the module docstring for definitions).

    Variances are of gradients (units: loss^2 / parameter^2); ``sigma2_sample`` is one
    sample's, ``sigma2_step`` that of a step's gradient (``step_batch`` samples).
    ``*_ci`` are ``[low, high]`` at the configured confidence.
    """

    step: int
    label: str
    loss: float
    loss_se: float
    grad_norm_sq: float
    grad_norm_sq_raw: float
    grad_norm_sq_noise: float
    L_power: float
    L_rayleigh: float
    L_residual: float
    L_iterations: int
    L_converged: bool
    L_secant: float | None
    distance_to_previous: float | None
    sigma2_sample: float
    sigma2_sample_ci: list[float]
    sigma2_step: float
    sigma2_step_ci: list[float]
    sigma2_shards: list[float]
    sigma2_shards_ci: list[list[float]]
    zeta2: float
    zeta2_raw: float
    zeta2_noise: float
    seconds: float


def _t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t quantile ``t_{df}^{-1}(1/2 + confidence/2)``."""
    return float(stdtrit(max(df, 1), 0.5 + confidence / 2))


def _subset_to_population(m: int, N: int) -> float:
    """``m/(m-1) * (N-1)/N``: population variance over ``m`` of ``N`` -> over ``N``."""
    if m >= N or m < 2:
        return 1.0
    return (m / (m - 1)) * ((N - 1) / N)


def _fpc(n: int, N: int) -> float:
    """``(N - n)/(N - 1)``: variance factor of a mean of ``n`` draws without replacement."""
    if N <= 1:
        return 0.0
    return max(N - n, 0) / (N - 1)


def step_noise_factor(step_batch: int, population: int) -> float:
    """``sigma_step^2 / sigma_1^2 = (1/b) (N - b)/(N - 1)`` (Cochran 1977, Theorem 2.2)."""
    return _fpc(step_batch, population) / step_batch


def _ci(est: float, se: float, q: float) -> list[float]:
    """``[max(est - q se, 0), est + q se]``: a variance's interval, clipped at 0."""
    return [max(est - q * se, 0.0), est + q * se]


def _shard_gradients(
    problem: ProbeProblem, plan: SamplingPlan, chunk_size: int
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Exact probe-set gradients ``(K, d)`` and per-sample losses of every shard."""
    grads, losses = [], []
    for pk in plan.probe:
        lv, g = mean_loss_and_gradient(problem, pk, chunk_size)
        grads.append(g)
        losses.append(lv)
    return torch.stack(grads), losses


def _loss_and_se(losses: list[torch.Tensor], shard_sizes: list[int]) -> tuple[float, float]:
    """``f_P`` and its standard error as an estimate of ``f`` (sampling ``P_k`` from ``S_k``)."""
    loss = float(np.mean([float(lv.mean()) for lv in losses]))
    var_loss = 0.0
    for lv, Nk in zip(losses, shard_sizes, strict=True):
        m = len(lv)
        if m > 1:
            s2 = float(lv.var(unbiased=False)) * _subset_to_population(m, Nk)
            var_loss += s2 / m * _fpc(m, Nk)
    return loss, math.sqrt(var_loss) / len(losses)


def _sample_deviations(
    problem: ProbeProblem, plan: SamplingPlan, G: torch.Tensor, chunk_size: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``||g_i - grad f_k||^2`` and ``||g_i - grad f||^2`` of the noise samples per shard."""
    g = G.mean(0)
    own: list[np.ndarray] = []
    glob: list[np.ndarray] = []
    for k, idx in enumerate(plan.noise):
        gs = per_sample_gradients(problem, idx, chunk_size)
        own.append((gs - G[k]).pow(2).sum(1).cpu().numpy())
        glob.append((gs - g).pow(2).sum(1).cpu().numpy())
    return own, glob


def _shard_variances(
    plan: SamplingPlan, d_own: list[np.ndarray], conf: float
) -> tuple[list[float], list[list[float]], list[float]]:
    """Per shard: variance around ``grad f_k`` scaled from ``P_k`` to ``S_k``, its CI, and
    the variance ``v_k`` of the probe-set gradient as an estimate of ``grad f_k``."""
    s2, s2_ci, v = [], [], []
    for k, dk in enumerate(d_own):
        m, Nk, n = len(plan.probe[k]), plan.shard_sizes[k], len(dk)
        c = _subset_to_population(m, Nk)
        est = c * float(dk.mean())
        se = c * float(dk.std(ddof=1)) / math.sqrt(n) * math.sqrt(_fpc(n, m)) if n > 1 else 0.0
        s2.append(est)
        s2_ci.append(_ci(est, se, _t_quantile(conf, n - 1)))
        v.append(est / m * _fpc(m, Nk))
    return s2, s2_ci, v


def _pooled_variance(
    plan: SamplingPlan, d_glob: list[np.ndarray], conf: float
) -> tuple[float, list[float]]:
    """i.i.d. shards: variance around ``grad f`` pooled over the shards (equal-weight
    strata), scaled from the probe set to the sharded data, with its CI."""
    K = len(d_glob)
    c = _subset_to_population(sum(plan.probe_sizes), sum(plan.shard_sizes))
    means = [float(d.mean()) for d in d_glob]
    ses2 = [
        float(d.std(ddof=1)) ** 2 / len(d) * _fpc(len(d), len(p)) if len(d) > 1 else 0.0
        for d, p in zip(d_glob, plan.probe, strict=True)
    ]
    est = c * float(np.mean(means))
    se = c * math.sqrt(sum(ses2)) / K
    return est, _ci(est, se, _t_quantile(conf, sum(len(d) for d in d_glob) - K))


def _noise_corrected(name: str, raw: float, noise: float) -> dict[str, float]:
    """``name`` = ``raw - noise`` clipped at 0, with ``name_raw`` and ``name_noise``."""
    return {name: max(raw - noise, 0.0), f"{name}_raw": raw, f"{name}_noise": noise}


def _power_fields(pw: PowerIteration) -> dict[str, Any]:
    """The ``L_*`` fields of a :class:`PointEstimate` from its power iteration."""
    return {
        "L_power": pw.norm,
        "L_rayleigh": pw.rayleigh,
        "L_residual": pw.residual,
        "L_iterations": pw.iterations,
        "L_converged": pw.converged,
    }


def estimate_point(
    problem: ProbeProblem,
    plan: SamplingPlan,
    settings: ProbeSettings,
    *,
    step: int,
    label: str = "",
    generator: torch.Generator | None = None,
    v0: torch.Tensor | None = None,
) -> tuple[PointEstimate, torch.Tensor, torch.Tensor]:
    """Estimates at the model's current parameters.

    Returns the :class:`PointEstimate`, the probe-set gradient ``grad f_P`` (float64) and
    the power-iteration vector (to warm-start the next point). ``L_secant`` and
    ``distance_to_previous`` are filled in by :func:`probe_points`.
    """
    t0 = time.perf_counter()
    K, conf = problem.K, settings.confidence
    G, shard_losses = _shard_gradients(problem, plan, settings.chunk_size)
    g = G.mean(0)
    loss, loss_se = _loss_and_se(shard_losses, plan.shard_sizes)
    d_own, d_glob = _sample_deviations(problem, plan, G, settings.chunk_size)
    s2_shard, s2_shard_ci, v_shard = _shard_variances(plan, d_own, conf)
    if plan.iid:
        s1, s1_ci = _pooled_variance(plan, d_glob, conf)
        population = sum(plan.shard_sizes)
    else:
        kmax = int(np.argmax(s2_shard))
        s1, s1_ci, population = s2_shard[kmax], s2_shard_ci[kmax], plan.shard_sizes[kmax]
    fac = step_noise_factor(settings.step_batch, population)
    # heterogeneity, the gradient norm, and the noise of the shard gradients in both
    raw = float((G - g).pow(2).sum(1).mean())
    zeta_noise = (1 - 1 / K) * float(np.mean(v_shard))
    gn_raw = float(g.pow(2).sum())
    gn_noise = float(np.sum(v_shard)) / K**2
    pw = power_iteration(
        make_hvp(problem, plan.hvp, settings.chunk_size),
        problem.dim,
        iters=settings.hvp_iters,
        tol=settings.hvp_tol,
        generator=generator,
        v0=v0,
        device=problem.device,
    )
    est = PointEstimate(
        step=int(step),
        label=label,
        loss=loss,
        loss_se=loss_se,
        **_noise_corrected("grad_norm_sq", gn_raw, gn_noise),
        **_power_fields(pw),
        L_secant=None,
        distance_to_previous=None,
        sigma2_sample=s1,
        sigma2_sample_ci=s1_ci,
        sigma2_step=s1 * fac,
        sigma2_step_ci=[s1_ci[0] * fac, s1_ci[1] * fac],
        sigma2_shards=s2_shard,
        sigma2_shards_ci=s2_shard_ci,
        **_noise_corrected("zeta2", raw, zeta_noise),
        seconds=time.perf_counter() - t0,
    )
    return est, g, pw.vector

"""Auxiliary checks: measured rate in T, speed-up in K (Monte Carlo)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

from theory.bound import Bound, param_name
from theory.verify.oracle_montecarlo import simulate_config
from theory.verify.records import RateRow, SpeedupRow
from theory.verify.sampling import (
    ProblemCache,
    _child_seed,
    _max_step,
    bound_spec,
    bound_values,
    problem_constants,
)
from theory.verify.settings import Config, VerifySettings
from theory.verify.stats import _mean_se, fit_power_law


def leading_exponent(
    bound: Bound,
    vals: Mapping[str, Any],
    step: str | float = "recommended",
    t_far: tuple[float, float] = (1e10, 1e12),
) -> float:
    """Exponent of ``T`` of the bound's dominant term as ``T -> infinity``.

    The bound is evaluated under the step rule (``"recommended"``: the bound's
    ``recommended_step`` at each ``T``; a number: that fixed ``alpha``) at two far horizons
    with the other parameters of ``vals``, and the log-log slope between them is returned,
    rounded to the nearest multiple of 1/12 when within 1e-3 of it. This is the exponent
    of the first term of :meth:`Bound.rate` (the tests check the two agree) without the
    symbolic simplification, which takes seconds for the PALSGD theorem.
    """
    logs = []
    for t in t_far:
        v = {**vals, "T": t}
        if "R" in v and "H" in v:
            v["R"] = t / float(v["H"])
        if step == "recommended":
            rec = bound.recommended_step_value(**v)
            if rec is None:
                return math.nan
            v[param_name(bound.step_symbol)] = float(rec)
        else:
            v[param_name(bound.step_symbol)] = float(step)
        with np.errstate(all="ignore"):
            b = float(bound.evaluate(**v))
        if not (b > 0 and math.isfinite(b)):
            return math.nan
        logs.append(math.log(b))
    slope = (logs[1] - logs[0]) / (math.log(t_far[1]) - math.log(t_far[0]))
    snapped = round(slope * 12) / 12
    return snapped if abs(slope - snapped) < 1e-3 else slope


def _base_config(
    bound: Bound, problem: Any, settings: VerifySettings, *, K: int, T: int, seed: int
) -> tuple[Config, dict[str, float]]:
    spec = bound_spec(bound)
    row = spec.definition
    c = problem_constants(problem)
    H = 4 if row.rounds else 1
    T = int(math.ceil(T / H) * H)
    p = 0.2 if row.pulls else 0.0
    eta = 0.5 * c["L"] if row.pulls else 0.0
    cfg = Config(
        bound=bound.name,
        problem=problem.name,
        algorithm=spec,
        K=K,
        T=T,
        alpha=1.0,
        H=H,
        p=p,
        eta=eta,
        gamma=1.0,
        seed=seed,
        backend=settings.backend,
        device=settings.device,
    )
    return cfg, c


def _rate_steps(
    bound: Bound, c: Mapping[str, float], Ts: list[int], vals: list[Any], amax: np.ndarray
) -> tuple[list[int], list[Any], list[float], str, Any]:
    """The step rule of :func:`rate_check`: ``(Ts, vals, alphas, rule, step_rule)``."""
    recs = [bound.recommended_step_value(**v) for v in vals]
    ok = [
        r is not None and bool(np.isfinite(r)) and float(r) > 0 and (float(r) <= a or math.isinf(a))
        for r, a in zip(recs, amax, strict=True)
    ]
    if sum(ok) >= 3:
        keep = [i for i, o in enumerate(ok) if o]
        Ts = [Ts[i] for i in keep]
        vals = [vals[i] for i in keep]
        alphas = [float(recs[i]) for i in keep]
        return Ts, vals, alphas, "recommended", "recommended"
    finite = amax[np.isfinite(amax)]
    a = 0.5 * float(finite.min()) if finite.size else 0.5 / c["L"]
    return Ts, vals, [a] * len(Ts), f"fixed alpha={a:.3g}", a


def _rate_verdict(fit: Any, lead: float) -> str:
    """The fitted exponent of ``T`` against the bound's leading exponent."""
    if fit is None:
        return "not fitted"
    elif fit.ci_high < lead:
        return "decays faster than the bound's leading term"
    elif fit.ci_low > lead:
        return "decays slower than the bound's leading term"
    else:
        return "consistent with the bound's leading exponent"


def rate_check(
    bound: Bound, problem: Any, settings: VerifySettings, *, seed: int, progress: Any = None
) -> list[RateRow]:
    """Measured exponent of ``T`` vs the bound's.

    Smallest ``K`` of the settings, ``H = 2`` for local methods. The step is the bound's
    recommended step at every ``T`` of the grid where it satisfies the conditions, when at
    least 3 such ``T`` exist (the other ``T`` are left out); otherwise a fixed ``alpha``
    (half the smallest ``alpha_max`` over the grid) at every ``T``. The bound's leading
    exponent is :meth:`Bound.rate` under the same step rule.
    """
    K = int(min(settings.K))
    base, c = _base_config(bound, problem, settings, K=K, T=1, seed=seed)
    H = 2 if base.algorithm.definition.rounds else 1
    base = dataclasses.replace(base, H=H)
    Ts = sorted({int(math.ceil(t / H) * H) for t in settings.rate_T})
    vals = [bound_values(bound, c, {**dataclasses.asdict(base), "T": t, "alpha": 1.0}) for t in Ts]
    amax = np.array([float(_max_step(bound, v)) for v in vals])
    Ts, vals, alphas, rule, step_rule = _rate_steps(bound, c, Ts, vals, amax)
    means, ses, bvals, inside = [], [], [], []
    for i, (t, a) in enumerate(zip(Ts, alphas, strict=True)):
        cfg = dataclasses.replace(base, T=t, alpha=a, seed=_child_seed(seed, 5, i))
        tr = simulate_config(problem, cfg, settings.rate_replicas)
        y = np.asarray(tr.mean_grad_norm_sq(), dtype=float)
        m, se = _mean_se(y)
        means.append(m)
        ses.append(se)
        bvals.append(float(bound.evaluate(**{**vals[i], "alpha": a})))
        inside.append(bool(bound.conditions_hold(**{**vals[i], "alpha": a})))
        if progress is not None:
            progress.update(1)
    finite = np.isfinite(means) & (np.asarray(means) > 0)
    fit = (
        fit_power_law(
            np.asarray(Ts)[finite],
            np.asarray(means)[finite],
            np.asarray(ses)[finite],
            settings.level,
        )
        if finite.sum() >= 3
        else None
    )
    bfit = fit_power_law(Ts, bvals) if all(v > 0 and math.isfinite(v) for v in bvals) else None
    lead = leading_exponent(bound, vals[-1], step_rule)
    verdict = _rate_verdict(fit, lead)
    rows = []
    for t, a, m, s, bv, ok in zip(Ts, alphas, means, ses, bvals, inside, strict=True):
        rows.append(
            RateRow(
                bound=bound.name,
                problem=problem.name,
                algorithm=base.kind,
                K=K,
                H=H,
                p=base.p,
                eta=base.eta,
                step_rule=rule,
                T=t,
                alpha=a,
                R=settings.rate_replicas,
                measured_mean=m,
                measured_se=s,
                bound_value=bv,
                fitted_slope=fit.slope if fit else math.nan,
                slope_ci_low=fit.ci_low if fit else math.nan,
                slope_ci_high=fit.ci_high if fit else math.nan,
                bound_slope=bfit.slope if bfit else math.nan,
                bound_leading_exponent=lead,
                rate_verdict=verdict,
                conditions_hold=ok,
            )
        )
    return rows


def speedup_check(
    bound: Bound,
    problem_name: str,
    problems: ProblemCache,
    settings: VerifySettings,
    *,
    seed: int,
    progress: Any = None,
) -> SpeedupRow:
    """Measured ``Y(K=1)/Y(K)`` (delta-method CI on the log) vs the bound's ``B(1)/B(K)``,
    on the i.i.d. version of the problem (``zeta = 0``, so that ``f`` is the same for every
    ``K``) at a common fixed step (half the smaller ``alpha_max``), ``K`` the largest of the
    settings, ``T`` the largest of ``rate_T``."""
    Kbig = int(max(settings.K))
    T = int(max(settings.rate_T))
    cfgs, probs, vals = [], [], []
    for K in (1, Kbig):
        prob = problems.get(problem_name, K, iid=True)
        cfg, c = _base_config(bound, prob, settings, K=K, T=T, seed=_child_seed(seed, 6, K))
        v = bound_values(bound, c, {**dataclasses.asdict(cfg), "alpha": 1.0})
        cfgs.append(cfg)
        probs.append(prob)
        vals.append(v)
    amax = [float(_max_step(bound, v)) for v in vals]
    finite = [a for a in amax if math.isfinite(a)]
    c1 = problem_constants(probs[0])
    alpha = 0.5 * min(finite) if finite else 0.5 / c1["L"]
    ms, ses, bs, inside = [], [], [], []
    for cfg, prob, v in zip(cfgs, probs, vals, strict=True):
        cfg = dataclasses.replace(cfg, alpha=alpha)
        y = np.asarray(simulate_config(prob, cfg, settings.rate_replicas).mean_grad_norm_sq())
        m, se = _mean_se(y)
        ms.append(m)
        ses.append(se)
        bs.append(float(bound.evaluate(**{**v, "alpha": alpha})))
        inside.append(bool(bound.conditions_hold(**{**v, "alpha": alpha})))
        if progress is not None:
            progress.update(1)
    ratio = ms[0] / ms[1] if ms[1] > 0 else math.inf
    lse = math.sqrt((ses[0] / ms[0]) ** 2 + (ses[1] / ms[1]) ** 2) if min(ms) > 0 else math.inf
    z = float(stats.norm.ppf(1 - settings.level / 2))
    return SpeedupRow(
        bound=bound.name,
        problem=problem_name,
        algorithm=cfgs[0].kind,
        K1=1,
        K=Kbig,
        H=cfgs[0].H,
        p=cfgs[0].p,
        eta=cfgs[0].eta,
        alpha=alpha,
        T=T,
        R=settings.rate_replicas,
        measured_K1=ms[0],
        measured_K=ms[1],
        measured_speedup=ratio,
        speedup_ci_low=ratio * math.exp(-z * lse),
        speedup_ci_high=ratio * math.exp(z * lse),
        bound_K1=bs[0],
        bound_K=bs[1],
        predicted_speedup=bs[0] / bs[1] if bs[1] > 0 else math.inf,
        linear_speedup=Kbig,
        conditions_hold=all(inside),
    )

"""Monte-Carlo verification of the encoded convergence bounds.

Every bound in :mod:`theory.bounds` states

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2  <=  B(L, sigma, zeta, F0, K, H, p, alpha, eta, T)

under its step-size conditions. This module checks such statements numerically on the
synthetic problems of :mod:`theory.problems`, whose constants ``L``, ``sigma^2``,
``zeta^2`` and ``f_star`` are known exactly, with the vectorised simulator
:mod:`theory.simulate`:

1. For a configuration (problem, algorithm, ``K, H, p, alpha, eta, T``) the simulator runs
   ``R`` independent replicas. Replica ``r`` gives one draw
   ``Y_r = (1/T) sum_t ||grad f(xbar_t)||^2``; the ``Y_r`` are i.i.d. with mean equal to the
   left-hand side of the bound.
2. Two tests of ``E Y`` against the bound value ``b`` (computed with the problem's exact
   constants ``L``, ``sigma = sqrt(sigma2)``, ``zeta = sqrt(zeta2)``, ``F0 = f(x0) - f_star``):
   Student's t and the studentised (bootstrap-t) bootstrap, which corrects for the skewness
   of these nonnegative draws (Efron and Tibshirani, *An Introduction to the Bootstrap*,
   1993, ch. 12.5). Each gives one-sided p-values for ``H0: E Y >= b`` (rejecting it means
   "holds") and ``H0: E Y <= b`` (rejecting it means "violated"); the verdicts use the
   larger (more conservative) p-value of the two methods, equivalently the wider of the
   two confidence bounds. Replicas that diverged (non-finite) are handled by a
   distribution-free test: by Markov's inequality ``P(Y >= c) <= b / c`` under
   ``E Y <= b``, so ``k`` of ``R`` replicas above ``c = 1e300`` give the binomial p-value
   ``P(Binom(R, b/c) >= k)``.
3. A configuration is decided on its two-sided p-value ``2 min(p_holds, p_violated)``
   with a family-wise correction over all tested configurations (Holm 1979 by default, or
   Bonferroni) at level ``level`` (default 0.05): "holds" (the upper confidence bound is
   below ``b``), "violated" (the lower confidence bound is above ``b``), else
   "inconclusive". Reported confidence bounds are one-sided at ``level_i / 2``, where
   ``level_i`` is the per-test level the correction used for that configuration, so a
   verdict can be read off the reported interval. Configurations outside the bound's
   conditions are simulated and reported as "outside conditions", never tested.
4. Auxiliary checks: the fitted exponent of ``T`` (log-log weighted least squares), the
   speed-up from ``K = 1`` to ``K`` workers, exact-vs-Monte-Carlo curves on quadratics
   (:mod:`theory.quadratic`), and the consensus error versus ``H``.

The main entry point is :func:`run_verification`; :func:`verify_configs` verifies a user's
own bound on given configurations; :func:`write_report` writes the report directory
atomically (temporary directory next to the target, renamed at the end).
"""

from __future__ import annotations

import csv
import dataclasses
import importlib
import json
import math
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sympy as sp
from scipy import stats

from theory import bounds as bound_registry
from theory.bound import Bound, param_name
from theory.check import jsonable
from theory.validation import UserInputError, validate_one

__all__ = [
    "VERDICTS",
    "CORRECTIONS",
    "RESULTS_COLUMNS",
    "RATES_COLUMNS",
    "EXACT_COLUMNS",
    "SPEEDUP_COLUMNS",
    "CONSENSUS_COLUMNS",
    "DEFAULT_PROBLEMS",
    "BootstrapPlan",
    "MeanTest",
    "mean_test",
    "Correction",
    "correct",
    "decide",
    "RateFit",
    "fit_power_law",
    "Config",
    "VerifySettings",
    "algorithm_for",
    "sample_configs",
    "verify_configs",
    "run_verification",
    "write_report",
    "format_table",
    "summary_of",
    "apply_declared_constants",
    "bound_values",
    "coins_for",
    "problem_constants",
    "leading_exponent",
    "ProblemCache",
    "AtomicDirectory",
    "rate_check",
    "speedup_check",
    "exact_vs_mc",
    "exact_specs",
    "consensus_vs_H",
    "write_report_files",
    "format_summary",
    "resolve_bounds",
    "resolve_problems",
]

#: verdict labels
HOLDS, VIOLATED, INCONCLUSIVE = "holds", "violated", "inconclusive"
OUTSIDE = "outside conditions"
NOT_VERIFIABLE = "not verifiable here"
VERDICTS = (HOLDS, VIOLATED, INCONCLUSIVE, OUTSIDE, NOT_VERIFIABLE)
CORRECTIONS = ("holm", "bonferroni")

#: the default problem set of ``palsgd verify``: a heterogeneous quadratic and nonconvex families
DEFAULT_PROBLEMS = ("quadratic", "cosine", "logistic")

#: value above which a replica counts as diverged in the distribution-free (Markov) test
DIVERGENCE_LEVEL = 1e300

#: columns of ``results.csv`` (one row per configuration)
RESULTS_COLUMNS = (
    "index",
    "bound",
    "problem",
    "algorithm",
    "outer",
    "coins",
    "K",
    "d",
    "noise",
    "H",
    "p",
    "eta",
    "gamma",
    "alpha",
    "alpha_role",
    "alpha_max",
    "T",
    "R",
    "seed",
    "L",
    "sigma2",
    "zeta2",
    "F0",
    "conditions_hold",
    "failed_conditions",
    "measured_mean",
    "measured_sd",
    "measured_se",
    "skewness",
    "diverged",
    "ci_level_one_sided",
    "t_lcb",
    "t_ucb",
    "boot_lcb",
    "boot_ucb",
    "lcb",
    "ucb",
    "bound_value",
    "ratio",
    "ratio_ucb",
    "p_holds",
    "p_violated",
    "p_value",
    "p_adjusted",
    "verdict",
    "consensus_mean",
    "note",
)
#: columns of ``rates.csv`` (one row per (bound, T) point; the fit is repeated on each row)
RATES_COLUMNS = (
    "bound",
    "problem",
    "algorithm",
    "K",
    "H",
    "p",
    "eta",
    "step_rule",
    "T",
    "alpha",
    "R",
    "measured_mean",
    "measured_se",
    "bound_value",
    "fitted_slope",
    "slope_ci_low",
    "slope_ci_high",
    "bound_slope",
    "bound_leading_exponent",
    "rate_verdict",
    "conditions_hold",
)
#: columns of ``exact_vs_mc.csv`` (one row per algorithm, metric and step)
EXACT_COLUMNS = (
    "algorithm",
    "label",
    "metric",
    "step",
    "exact",
    "mc_mean",
    "mc_se",
    "z",
)
#: columns of ``speedup.csv`` (one row per bound)
SPEEDUP_COLUMNS = (
    "bound",
    "problem",
    "algorithm",
    "K1",
    "K",
    "H",
    "p",
    "eta",
    "alpha",
    "T",
    "R",
    "measured_K1",
    "measured_K",
    "measured_speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "bound_K1",
    "bound_K",
    "predicted_speedup",
    "linear_speedup",
    "conditions_hold",
)
#: columns of ``consensus.csv`` (one row per algorithm and H)
CONSENSUS_COLUMNS = (
    "problem",
    "algorithm",
    "K",
    "H",
    "p",
    "eta",
    "alpha",
    "T",
    "R",
    "consensus_mean",
    "consensus_se",
    "grad_norm_sq_mean",
    "grad_norm_sq_se",
)


# =====================================================================================
# statistics
# =====================================================================================


class BootstrapPlan:
    """Multinomial resampling weights shared by every test on ``n`` replicas.

    ``counts[i, b]`` is how often replica ``i`` appears in bootstrap resample ``b``; a
    resample mean is then one vector-matrix product. Sharing the weights between
    configurations (same ``n``) makes the bootstrap cheap; each configuration's inference
    stays valid on its own, which is all the family-wise corrections need.
    """

    def __init__(self, n_resamples: int, seed: int = 0):
        if n_resamples < 99:
            raise UserInputError(f"bootstrap needs at least 99 resamples, got {n_resamples}")
        self.n_resamples = int(n_resamples)
        self.seed = int(seed)
        self._counts: dict[int, np.ndarray] = {}

    def counts(self, n: int) -> np.ndarray:
        """Resampling counts, shape ``(n, n_resamples)`` (column ``b`` is resample ``b``)."""
        if n not in self._counts:
            rng = np.random.default_rng([self.seed, n])
            c = rng.multinomial(n, np.full(n, 1.0 / n), size=self.n_resamples)
            self._counts[n] = np.ascontiguousarray(c.T, dtype=np.float64)
        return self._counts[n]

    @staticmethod
    def resamples_for(min_level: float, per_tail: int = 20) -> int:
        """Resamples giving about ``per_tail`` draws beyond the ``min_level`` quantile."""
        return int(min(400_000, max(1999, math.ceil(per_tail / min_level))))


@dataclass
class MeanTest:
    """Tests of ``E Y`` against a threshold ``b`` from i.i.d. draws ``Y_1..Y_n``.

    ``p_holds`` is the p-value of ``H0: E Y >= b`` and ``p_violated`` that of
    ``H0: E Y <= b`` (each the larger of the t and bootstrap-t p-values). ``p_value`` is the
    two-sided ``min(1, 2 min(p_holds, p_violated))`` and ``direction`` the verdict a
    rejection would give.
    """

    n: int
    mean: float
    sd: float
    se: float
    threshold: float
    n_diverged: int
    p_holds_t: float
    p_violated_t: float
    p_holds_boot: float
    p_violated_boot: float
    _t_star: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    skew: float = math.nan

    @property
    def p_holds(self) -> float:
        return max(self.p_holds_t, self.p_holds_boot)

    @property
    def p_violated(self) -> float:
        return max(self.p_violated_t, self.p_violated_boot)

    @property
    def p_value(self) -> float:
        return min(1.0, 2.0 * min(self.p_holds, self.p_violated))

    @property
    def direction(self) -> str:
        return HOLDS if self.p_holds <= self.p_violated else VIOLATED

    def confidence_bounds(self, level: float) -> dict[str, float]:
        """One-sided confidence bounds at error ``level`` each (t, bootstrap-t, conservative).

        ``ucb`` is the larger of the two upper bounds and ``lcb`` the smaller of the two
        lower bounds; ``b >= ucb`` is equivalent to ``p_holds <= level`` and ``b <= lcb`` to
        ``p_violated <= level`` (up to ties).
        """
        if not 0 < level < 0.5:
            raise UserInputError(f"one-sided confidence level must be in (0, 0.5), got {level}")
        if self.n_diverged:
            return {
                "t_lcb": math.inf,
                "t_ucb": math.inf,
                "boot_lcb": math.inf,
                "boot_ucb": math.inf,
                "lcb": math.inf,
                "ucb": math.inf,
            }
        m, se, n = self.mean, self.se, self.n
        if se == 0.0:
            return {k: m for k in ("t_lcb", "t_ucb", "boot_lcb", "boot_ucb", "lcb", "ucb")}
        if n < 2:
            inf = math.inf
            return {
                "t_lcb": -inf,
                "t_ucb": inf,
                "boot_lcb": -inf,
                "boot_ucb": inf,
                "lcb": -inf,
                "ucb": inf,
            }
        q = float(stats.t.ppf(1.0 - level, n - 1))
        t_lcb, t_ucb = m - q * se, m + q * se
        ts = self._t_star
        B = ts.size
        k = math.floor(level * (B + 1) - 1)  # p_boot <= level  <=>  count <= k
        if k < 0 or B == 0:
            boot_lcb, boot_ucb = -math.inf, math.inf
        else:
            # holds iff #{t* <= t_obs} <= k iff t_obs < t*_(k+1) iff b > m - t*_(k+1) se
            # (order statistics, 0-based k and B-1-k, by partial sorting)
            part = np.partition(ts, (k, B - 1 - k))
            boot_ucb = m - part[k] * se
            boot_lcb = m - part[B - 1 - k] * se
        return {
            "t_lcb": t_lcb,
            "t_ucb": t_ucb,
            "boot_lcb": float(boot_lcb),
            "boot_ucb": float(boot_ucb),
            "lcb": float(min(t_lcb, boot_lcb)),
            "ucb": float(max(t_ucb, boot_ucb)),
        }


def mean_test(
    values: Sequence[float] | np.ndarray, threshold: float, plan: BootstrapPlan | None = None
) -> MeanTest:
    """Test the mean of i.i.d. nonnegative draws ``values`` against ``threshold``.

    Student's t (``n - 1`` degrees of freedom) and the bootstrap-t with the resampling
    weights of ``plan`` (default: 9999 resamples, seed 0). Non-finite draws count as
    diverged (see the module docstring).
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    n = y.size
    if n == 0:
        raise UserInputError("mean_test needs at least one value")
    b = float(threshold)
    bad = ~np.isfinite(y) | (y >= DIVERGENCE_LEVEL)
    n_div = int(bad.sum())
    if n_div:
        # Markov: under E Y <= b, P(Y >= c) <= b/c, so #{Y_i >= c} <= Binom(n, b/c)
        q = min(1.0, max(b, 0.0) / DIVERGENCE_LEVEL)
        p_viol = float(stats.binom.sf(n_div - 1, n, q))
        return MeanTest(n, math.inf, math.inf, math.inf, b, n_div, 1.0, p_viol, 1.0, p_viol)
    m = float(y.mean())
    sd = float(y.std(ddof=1)) if n > 1 else 0.0
    se = sd / math.sqrt(n) if n > 1 else 0.0
    if n < 2 and sd == 0.0:
        return MeanTest(n, m, math.nan, math.nan, b, 0, 1.0, 1.0, 1.0, 1.0)
    if sd <= 1e-12 * abs(m):  # identical draws up to rounding: the mean is known exactly
        sd = se = 0.0
    if se == 0.0:
        ph = 0.0 if m < b else 1.0
        pv = 0.0 if m > b else 1.0
        return MeanTest(n, m, 0.0, 0.0, b, 0, ph, pv, ph, pv)
    t_obs = (m - b) / se
    ph_t = float(stats.t.cdf(t_obs, n - 1))
    pv_t = float(stats.t.sf(t_obs, n - 1))
    plan = plan or BootstrapPlan(9999)
    counts = plan.counts(n)
    yc = y - m
    mom = np.stack([yc, yc * yc]) @ counts / n  # both moments in one pass over the weights
    mc = mom[0]
    var = np.maximum(mom[1] - mc * mc, 0.0) * (n / (n - 1))
    se_star = np.sqrt(var / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = np.where(
            se_star > 0, mc / np.where(se_star > 0, se_star, 1.0), np.sign(mc) * np.inf
        )
    B = t_star.size
    ph_b = (1 + int(np.count_nonzero(t_star <= t_obs))) / (B + 1)
    pv_b = (1 + int(np.count_nonzero(t_star >= t_obs))) / (B + 1)
    skew = float(stats.skew(y, bias=False)) if n > 2 else math.nan
    return MeanTest(n, m, sd, se, b, 0, ph_t, pv_t, float(ph_b), float(pv_b), t_star, skew)


def _mean_se(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean of i.i.d. replica values and its standard error (0 for a single value)."""
    y = np.asarray(values, dtype=float).ravel()
    se = float(y.std(ddof=1) / math.sqrt(y.size)) if y.size > 1 else 0.0
    return float(y.mean()), se


@dataclass(frozen=True)
class Correction:
    """Result of a family-wise correction: rejections, adjusted p-values, per-test levels."""

    method: str
    level: float
    reject: np.ndarray
    adjusted: np.ndarray
    test_level: np.ndarray


def correct(
    pvalues: Sequence[float] | np.ndarray, level: float = 0.05, method: str = "holm"
) -> Correction:
    """Family-wise error control over ``len(pvalues)`` tests.

    ``bonferroni``: reject ``p_i <= level/m``. ``holm`` (Holm, Scand. J. Statist. 6, 1979):
    sort ascending, reject ``p_(j) <= level/(m - j)`` (0-based ``j``) while it holds.
    ``test_level[i]`` is the level the procedure applied to test ``i``: for Holm, the
    step's level for rejected tests and the stopping step's level for the others, so that
    ``reject[i] == (p_i <= test_level[i])``. ``adjusted`` are the adjusted p-values.
    """
    if method not in CORRECTIONS:
        raise UserInputError(f"unknown correction {method!r}; known: {list(CORRECTIONS)}")
    if not 0 < level < 1:
        raise UserInputError(f"family-wise level must be in (0, 1), got {level}")
    p = np.asarray(pvalues, dtype=float).ravel()
    m = p.size
    if m == 0:
        e = np.zeros(0)
        return Correction(method, level, e.astype(bool), e, e)
    if method == "bonferroni":
        tl = np.full(m, level / m)
        return Correction(method, level, p <= tl, np.minimum(1.0, p * m), tl)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    steps = level / (m - np.arange(m))
    ok = ps <= steps
    j0 = int(np.argmin(ok)) if not ok.all() else m
    reject_sorted = np.arange(m) < j0
    tl_sorted = level / (m - np.minimum(np.arange(m), j0 if j0 < m else m - 1))
    adj_sorted = np.minimum(1.0, np.maximum.accumulate(ps * (m - np.arange(m))))
    reject, adj, tl = np.empty(m, bool), np.empty(m), np.empty(m)
    reject[order], adj[order], tl[order] = reject_sorted, adj_sorted, tl_sorted
    return Correction(method, level, reject, adj, tl)


def decide(
    tests: Sequence[MeanTest], level: float = 0.05, method: str = "holm"
) -> tuple[list[str], Correction]:
    """Verdicts of a family of tests: "holds", "violated" or "inconclusive"."""
    corr = correct([t.p_value for t in tests], level, method)
    verdicts = [t.direction if r else INCONCLUSIVE for t, r in zip(tests, corr.reject, strict=True)]
    return verdicts, corr


@dataclass(frozen=True)
class RateFit:
    """Weighted least-squares fit ``log y = a + slope * log T``."""

    slope: float
    intercept: float
    slope_se: float
    ci_low: float
    ci_high: float
    level: float
    dof: int
    chi2: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def fit_power_law(
    T: Sequence[float],
    mean: Sequence[float],
    se: Sequence[float] | None = None,
    level: float = 0.05,
) -> RateFit:
    """Fit ``mean ~ c T^slope`` on log-log axes with a two-sided ``1 - level`` CI on the slope.

    Weights ``1/var(log mean)`` with the delta-method ``var(log mean) = (se/mean)^2``; the
    slope's standard error is scaled up by ``sqrt(chi2/dof)`` when the points scatter more
    than their standard errors allow (never scaled down), and the CI uses Student's t
    with ``n - 2`` degrees of freedom. Without ``se`` (or with zero ``se``) this is ordinary
    least squares with the residual standard error.
    """
    x = np.log(np.asarray(T, dtype=float))
    m = np.asarray(mean, dtype=float)
    if x.size != m.size or x.size < 3:
        raise UserInputError("a rate fit needs at least 3 points (T, mean)")
    if np.any(m <= 0) or not np.all(np.isfinite(m)):
        raise UserInputError("a rate fit needs positive finite means")
    y = np.log(m)
    if se is None or np.any(np.asarray(se, dtype=float) <= 0):
        w = np.ones_like(y)
        known = False
    else:
        w = 1.0 / (np.asarray(se, dtype=float) / m) ** 2
        known = True
    X = np.column_stack([np.ones_like(x), x])
    XtW = X.T * w
    cov = np.linalg.inv(XtW @ X)
    beta = cov @ (XtW @ y)
    resid = y - X @ beta
    dof = x.size - 2
    chi2 = float(np.sum(w * resid**2))
    scale = max(1.0, chi2 / dof) if known else chi2 / dof
    slope_se = float(math.sqrt(cov[1, 1] * scale))
    q = float(stats.t.ppf(1 - level / 2, dof))
    return RateFit(
        float(beta[1]),
        float(beta[0]),
        slope_se,
        float(beta[1] - q * slope_se),
        float(beta[1] + q * slope_se),
        level,
        dof,
        chi2,
    )


# =====================================================================================
# configurations
# =====================================================================================

#: bound algorithm name -> simulator kind, in order of preference
_KIND_OF = {
    "palsgd": "palsgd",
    "local_sgd": "local_sgd",
    "sgd": "sgd",
    "ddp": "sgd",
    "minibatch_sgd": "sgd",
    "easgd": "easgd",
    "diloco": "diloco",
    "post_local_sgd": "post_local_sgd",
}


def algorithm_for(bound: Bound) -> str:
    """Simulator kind of a bound: ``sgd``/``ddp`` -> ``sgd``, ``local_sgd``, ``palsgd``, ...

    A bound depending on ``p`` is a PALSGD bound even if it also lists ``local_sgd``; one
    free of ``p`` that lists ``local_sgd`` is simulated as Local SGD.
    Unknown algorithm names are returned as given (and then reported as not verifiable).
    """
    algos = [a.lower() for a in bound.algorithms]
    if not algos:
        raise UserInputError(f"bound {bound.name!r} names no algorithm; cannot simulate it")
    if "p" in bound.parameters and "palsgd" in algos:
        return "palsgd"
    if "p" not in bound.parameters and "local_sgd" in algos:
        return "local_sgd"  # a p-free statement listing Local SGD is its p = 0 case
    for a in algos:
        if a in _KIND_OF:
            return _KIND_OF[a]
    return algos[0]


def coins_for(bound: Bound) -> str:
    """``"shared"`` for a bound stated for shared coins (all workers pull on the same steps,
    as in the authors' code), else ``"independent"``.

    Recognised by the bound's name (``...shared...``) or an assumption that mentions shared
    coins; a bound assuming independent coins (``S3``) is ``"independent"``.
    """
    if any(a.key == "S3" for a in bound.assumptions):
        return "independent"
    texts = [bound.name] + [f"{a.key} {a.name} {a.statement}" for a in bound.assumptions]
    return "shared" if any("shared" in t.lower() for t in texts) else "independent"


def _simulator_kinds() -> tuple[str, ...]:
    """The algorithm kinds :mod:`theory.simulate` implements (its ``KINDS``)."""
    return tuple(importlib.import_module("theory.simulate").KINDS)


@dataclass(frozen=True)
class Config:
    """One configuration to simulate and test.

    ``alpha_role``: ``"recommended"`` (the bound's step, clipped to the largest feasible
    step), ``"fraction"`` (a fraction of the largest feasible step), ``"outside"`` (beyond
    it), or ``"given"`` (set by the user).
    """

    bound: str
    problem: str
    algorithm: str
    K: int
    T: int
    alpha: float
    H: int = 1
    p: float = 0.0
    eta: float = 0.0
    gamma: float = 1.0
    outer: str = "average"
    coins: str = "independent"
    alpha_role: str = "given"
    alpha_max: float = math.nan
    seed: int = 0
    problem_kwargs: tuple[tuple[str, Any], ...] = ()

    def spec_kwargs(self) -> dict[str, Any]:
        return dict(
            kind=self.algorithm,
            alpha=self.alpha,
            H=self.H,
            p=self.p,
            eta=self.eta,
            outer=self.outer,
            gamma=self.gamma,
            coins=self.coins,
            seed=self.seed,
        )

    def summary(self) -> str:
        parts = [f"K={self.K}"]
        if self.algorithm != "sgd":
            parts.append(f"H={self.H}")
        if self.algorithm == "palsgd":
            parts += [f"p={self.p:.2g}", f"eta={self.eta:.2g}"]
        if self.outer != "average":
            parts.append(f"gamma={self.gamma:.2g}")
        if self.coins != "independent" and self.algorithm == "palsgd":
            parts.append(f"coins={self.coins}")
        parts += [f"alpha={self.alpha:.3g}", f"T={self.T}"]
        return " ".join(parts)


@dataclass
class VerifySettings:
    """Settings of a verification run (every field is recorded in ``results.json``).

    ``configs`` configurations inside the conditions and ``outside`` beyond them are
    sampled per (bound, problem) pair; ``replicas`` Monte-Carlo replicas per configuration;
    ``T`` and ``K`` are the candidate horizons and worker counts; ``d``, ``noise``,
    ``sigma`` (``None``: the problem's default, 1 for additive noise, set by the data for
    finite sums of data problems), ``zeta`` parametrise the problems (``zeta`` is forced to 0 for bounds that
    assume i.i.d. data). ``declared`` maps a problem name (or ``"*"``) to constants the
    user declares (``L``, ``sigma2``, ``zeta2``, ``f_star``); they replace the problem's
    own and are checked by sampling first.
    """

    bounds: tuple[str, ...] | None = None
    problems: tuple[str, ...] = DEFAULT_PROBLEMS
    replicas: int = 64
    configs: int = 5
    outside: int = 1
    seed: int = 0
    T: tuple[int, ...] = (96, 192)
    K: tuple[int, ...] = (2, 4)
    d: int = 6
    noise: str = "gaussian"
    sigma: float | None = None
    zeta: float = 1.0
    level: float = 0.05
    correction: str = "holm"
    n_boot: int | None = None
    rates: bool = True
    rate_T: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)
    rate_replicas: int = 48
    speedup: bool = True
    exact: bool = True
    exact_T: int = 40
    exact_replicas: int = 3000
    consensus: bool = True
    consensus_H: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    consensus_T: int = 128
    declared: dict[str, dict[str, float]] = field(default_factory=dict)
    check_constants: bool = True
    quick: bool = False

    def validated(self) -> VerifySettings:
        """Check every field; raise :class:`UserInputError` naming the bad one."""
        validate_one("R", self.replicas)
        validate_one("R", self.rate_replicas)
        validate_one("R", self.exact_replicas)
        validate_one("d", self.d)
        for name, val in (("configs", self.configs), ("outside", self.outside)):
            if not isinstance(val, int | np.integer) or val < 0:
                raise UserInputError(f"'{name}' must be a nonnegative integer, got {val!r}")
        if not self.T:
            raise UserInputError("'T' needs at least one value")
        if not self.K:
            raise UserInputError("'K' needs at least one value")
        for t in (*self.T, *self.rate_T, self.exact_T, self.consensus_T):
            validate_one("T", t)
        for k in self.K:
            validate_one("K", k)
        for h in self.consensus_H:
            validate_one("H", h)
        if self.sigma is not None:
            validate_one("sigma", self.sigma)
        validate_one("zeta", self.zeta)
        if not 0 < self.level < 1:
            raise UserInputError(f"'level' must be in (0, 1), got {self.level}")
        if self.correction not in CORRECTIONS:
            raise UserInputError(
                f"unknown correction {self.correction!r}; known: {list(CORRECTIONS)}"
            )
        if self.n_boot is not None and self.n_boot < 99:
            raise UserInputError(f"'n_boot' must be >= 99, got {self.n_boot}")
        if int(self.seed) < 0:
            raise UserInputError(f"'seed' must be a nonnegative integer, got {self.seed}")
        return self


def _child_seed(seed: int, *key: int) -> int:
    """A 31-bit seed derived from ``seed`` and a key (independent streams per purpose)."""
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in key))
    return int(ss.generate_state(1, np.uint32)[0] >> 1)


def _stable_key(text: str) -> int:
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**31) + len(text)


# ------------------------------------------------------------------ problems


class ProblemCache:
    """Builds problems once per (name, K, zeta) and applies user-declared constants."""

    def __init__(self, settings: VerifySettings):
        self.settings = settings
        self._cache: dict[tuple, Any] = {}
        self.checks: list[dict[str, Any]] = []

    def get(self, name: str, K: int, *, iid: bool) -> Any:
        s = self.settings
        zeta = 0.0 if iid or int(K) == 1 else s.zeta  # one worker: no heterogeneity
        key = (name, int(K), zeta)
        if key not in self._cache:
            problems = importlib.import_module("theory.problems")
            prob = problems.make_problem(
                name,
                K=int(K),
                d=s.d,
                noise=s.noise,
                sigma=s.sigma,
                zeta=zeta,
                seed=_child_seed(s.seed, 1, _stable_key(name)),
            )
            declared = {**s.declared.get("*", {}), **s.declared.get(name, {})}
            if declared:
                prob = apply_declared_constants(prob, declared, seed=s.seed)
                self.checks.append(
                    {
                        "problem": name,
                        "K": int(K),
                        "declared": declared,
                        "result": "consistent with sampling",
                        "check": getattr(prob, "_declared_check", None),
                    }
                )
            self._cache[key] = prob
        return self._cache[key]


def apply_declared_constants(
    problem: Any, declared: Mapping[str, float], *, seed: int = 0, n: int = 256
) -> Any:
    """A copy of ``problem`` whose constants are replaced by the user's ``declared`` ones.

    The declared values are checked by :func:`theory.problems.check_constants` (sampling);
    a constant that sampling shows false raises :class:`UserInputError` saying which one and
    by how much. Allowed names: ``L``, ``sigma2``, ``zeta2``, ``f_star``.
    """
    allowed = ("L", "sigma2", "zeta2", "f_star")
    unknown = sorted(set(declared) - set(allowed))
    if unknown:
        raise UserInputError(f"cannot declare {unknown}: declarable constants are {list(allowed)}")
    for k, v in declared.items():
        v = float(v)
        if not math.isfinite(v) or (k != "f_star" and v < 0) or (k == "L" and v <= 0):
            raise UserInputError(
                f"declared constant {k} = {v} is invalid for problem "
                f"{getattr(problem, 'name', '?')!r}"
            )
    problems = importlib.import_module("theory.problems")
    prob = problems.with_declared(problem, **{k: float(v) for k, v in declared.items()})
    rep = problems.check_constants(
        prob, n=n, rng=np.random.default_rng(_child_seed(seed, 2)), raise_on_violation=False
    )
    if rep.violations:
        ratios = rep.ratios()
        parts = []
        for v in rep.violations:
            key = v.split(":", 1)[0]
            if key in ratios and math.isfinite(ratios[key]):
                v += f" (measured/declared = {ratios[key]:.3g})"
            elif key == "f_star":
                v += f" (by {prob.f_star - rep.f_min_found:.3g})"
            parts.append(v)
        raise UserInputError(
            f"problem {prob.name!r} (K={prob.K}, d={prob.d}): declared constants contradicted "
            "by sampling: " + "; ".join(parts)
        )
    prob._declared_check = rep.to_dict()
    return prob


def problem_constants(problem: Any) -> dict[str, float]:
    """``L, sigma2, zeta2, f_star, F0`` and the bound's ``sigma``/``zeta`` (square roots)."""
    x0 = np.asarray(problem.x0(), dtype=float)
    F0 = float(problem.f(x0)) - float(problem.f_star)
    if F0 < 0:
        raise UserInputError(
            f"problem {problem.name!r}: f(x0) - f_star = {F0:.3g} < 0, so f_star is not a lower "
            "bound of f"
        )
    return {
        "L": float(problem.L),
        "sigma2": float(problem.sigma2),
        "zeta2": float(problem.zeta2),
        "f_star": float(problem.f_star),
        "F0": F0,
        "sigma": math.sqrt(float(problem.sigma2)),
        "zeta": math.sqrt(float(problem.zeta2)),
    }


# ------------------------------------------------------------------ bound values

_FIXED_PARAMS = {"beta": 0.0, "mu": 0.0}


def bound_values(
    bound: Bound, consts: Mapping[str, float], cfg: Mapping[str, Any]
) -> dict[str, Any]:
    """The parameter values a bound needs, from the problem's constants and a configuration.

    ``beta`` (relative noise) is 0 for the additive noise models here; ``R`` (rounds) is
    ``T/H``. Raises :class:`UserInputError` for a parameter no configuration supplies.
    """
    pool = {
        "L": consts["L"],
        "sigma": consts["sigma"],
        "zeta": consts["zeta"],
        "F0": consts["F0"],
        **_FIXED_PARAMS,
    }
    pool.update({k: cfg[k] for k in ("K", "H", "T", "p", "eta", "gamma", "alpha") if k in cfg})
    if "T" in cfg and "H" in cfg:
        pool["R"] = np.asarray(cfg["T"]) / np.asarray(cfg["H"])
    missing = [n for n in bound.parameters if n not in pool]
    if missing:
        raise UserInputError(
            f"bound {bound.name!r} depends on {missing}, which a simulation does not determine"
        )
    return {n: pool[n] for n in bound.parameters}


def _max_step(bound: Bound, vals: Mapping[str, Any]) -> np.ndarray:
    """The bound's largest feasible step at ``vals`` (a given step is ignored)."""
    return np.asarray(bound.max_step(**vals), dtype=float)


def _needs_iid(bound: Bound) -> bool:
    return any(a.key == "A3iid" for a in bound.assumptions)


def sample_configs(
    bound: Bound, problem_name: str, problems: ProblemCache, settings: VerifySettings, seed: int
) -> list[Config]:
    """Seeded random configurations of ``bound`` on one problem.

    ``K`` and ``T`` come from the settings' lists; ``H`` from {2, 4, 8, 16} (1 for SGD; ``T``
    is rounded up to a multiple of ``H``); ``p ~ U[0.1, 0.5]`` and ``eta = L * u`` with
    ``log u ~ U[log 0.1, log 1]`` for PALSGD; ``gamma ~ U[0.5, 1.5]`` when the bound depends
    on it (outer SGD). The step: about half of the inside configurations use the bound's
    recommended step (clipped to the largest feasible step ``alpha_max``), the others
    ``alpha_max * u`` with ``log u ~ U[log 0.05, 0]``; outside configurations use
    ``alpha_max * u`` with ``u ~ U[1.2, 1.8]``.
    """
    rng = np.random.default_rng(seed)
    algo = algorithm_for(bound)
    n_in, n_out = settings.configs, settings.outside
    n = n_in + n_out
    if n == 0:
        return []
    Ks = rng.choice(np.asarray(settings.K), size=n)
    Ts = rng.choice(np.asarray(settings.T), size=n)
    uses = set(bound.parameters)
    local = algo != "sgd"
    Hs = rng.choice([2, 4, 8, 16], size=n) if local else np.ones(n, dtype=int)
    Ts = (np.ceil(Ts / Hs) * Hs).astype(int)
    ps = rng.uniform(0.1, 0.5, size=n) if algo == "palsgd" else np.zeros(n)
    eta_u = np.exp(rng.uniform(np.log(0.1), 0.0, size=n))
    gammas = rng.uniform(0.5, 1.5, size=n) if "gamma" in uses else np.ones(n)
    outer = "sgd" if "gamma" in uses else "average"
    frac_in = np.exp(rng.uniform(np.log(0.05), 0.0, size=n))
    frac_out = rng.uniform(1.2, 1.8, size=n)
    use_rec = rng.random(size=n) < 0.5
    iid = _needs_iid(bound)
    out: list[Config] = []
    for i in range(n):
        K = int(Ks[i])
        prob = problems.get(problem_name, K, iid=iid)
        c = problem_constants(prob)
        eta = float(c["L"] * eta_u[i]) if algo == "palsgd" else 0.0
        cfg = {
            "K": K,
            "H": int(Hs[i]),
            "T": int(Ts[i]),
            "p": float(ps[i]),
            "eta": eta,
            "gamma": float(gammas[i]),
        }
        vals = bound_values(bound, c, {**cfg, "alpha": 1.0})
        amax = float(_max_step(bound, vals))
        for _ in range(20 if algo == "palsgd" and i < n_in else 0):
            if not math.isnan(amax):
                break
            # no feasible step at this (p, eta): redraw them (seeded) for an inside configuration
            cfg["p"] = float(rng.uniform(0.1, 0.5))
            eta = cfg["eta"] = float(c["L"] * np.exp(rng.uniform(np.log(0.1), 0.0)))
            vals = bound_values(bound, c, {**cfg, "alpha": 1.0})
            amax = float(_max_step(bound, vals))
        ps[i] = cfg["p"]
        top = amax if math.isfinite(amax) else 1.0 / c["L"]
        if i >= n_in:
            role = "outside"
            alpha = top * float(frac_out[i])
            if not math.isfinite(amax):
                role = "outside" if math.isnan(amax) else "fraction"
        else:
            rec = bound.recommended_step_value(**vals)
            if use_rec[i] and rec is not None and np.isfinite(rec).all() and float(rec) > 0:
                alpha, role = min(float(rec), top), "recommended"
            else:
                alpha, role = top * float(frac_in[i]), "fraction"
            if math.isnan(amax):  # no step satisfies the conditions here
                role = "outside"
        out.append(
            Config(
                bound=bound.name,
                problem=problem_name,
                algorithm=algo,
                K=K,
                T=int(Ts[i]),
                alpha=alpha,
                H=int(Hs[i]),
                p=float(ps[i]),
                eta=eta,
                gamma=float(gammas[i]),
                outer=outer,
                coins=coins_for(bound),
                alpha_role=role,
                alpha_max=amax,
                seed=_child_seed(seed, 3, i),
                problem_kwargs=(("zeta", 0.0 if iid or K == 1 else settings.zeta),),
            )
        )
    return out


# =====================================================================================
# simulation and testing
# =====================================================================================


def simulate_config(problem: Any, cfg: Config, R: int, **extra: Any) -> Any:
    """Run the simulator on one configuration; returns its ``Trace``."""
    sim = importlib.import_module("theory.simulate")
    if int(problem.K) != int(cfg.K):
        raise UserInputError(
            f"inconsistent dimensions: problem {cfg.problem!r} has K = "
            f"{problem.K} workers but the configuration has K = {cfg.K}"
        )
    spec = sim.AlgorithmSpec(**{**cfg.spec_kwargs(), **extra})
    with np.errstate(all="ignore"):
        return sim.simulate(problem, spec, T=cfg.T, R=R, seed=cfg.seed)


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float | np.floating):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def _evaluate_config(
    bound: Bound, problem: Any, cfg: Config, R: int, plan: BootstrapPlan
) -> dict[str, Any]:
    consts = problem_constants(problem)
    vals = bound_values(bound, consts, dataclasses.asdict(cfg))
    value = float(bound.evaluate(**vals))
    report = bound.condition_report(**vals)
    failed = [r.name for r in report if not bool(np.all(r.holds))]
    inside = not failed
    trace = simulate_config(problem, cfg, R)
    y = np.asarray(trace.mean_grad_norm_sq(), dtype=float)
    test = mean_test(y, value, plan)
    cons = np.asarray(trace.consensus, dtype=float)
    row = {
        "bound": bound.name,
        "problem": cfg.problem,
        "algorithm": cfg.algorithm,
        "outer": cfg.outer,
        "coins": cfg.coins,
        "K": cfg.K,
        "d": int(getattr(problem, "d", 0)),
        "noise": getattr(problem, "noise_model", getattr(problem, "noise", "")),
        "H": cfg.H,
        "p": cfg.p,
        "eta": cfg.eta,
        "gamma": cfg.gamma,
        "alpha": cfg.alpha,
        "alpha_role": cfg.alpha_role,
        "alpha_max": cfg.alpha_max,
        "T": cfg.T,
        "R": R,
        "seed": cfg.seed,
        "L": consts["L"],
        "sigma2": consts["sigma2"],
        "zeta2": consts["zeta2"],
        "F0": consts["F0"],
        "conditions_hold": inside,
        "failed_conditions": ";".join(failed),
        "measured_mean": test.mean,
        "measured_sd": test.sd,
        "measured_se": test.se,
        "skewness": test.skew,
        "diverged": test.n_diverged,
        "bound_value": value,
        "ratio": test.mean / value if value > 0 else math.inf,
        "consensus_mean": float(np.nanmean(cons.mean(axis=-1))) if cons.size else math.nan,
        "summary": cfg.summary(),
        "note": "",
    }
    if not isinstance(row["noise"], str):
        row["noise"] = str(row["noise"])
    return {"row": row, "test": test, "inside": inside, "values": y}


def verify_configs(
    bound: Bound,
    problems: Mapping[str, Any] | Callable[[Config], Any],
    configs: Iterable[Config],
    *,
    R: int,
    level: float = 0.05,
    correction: str = "holm",
    n_boot: int | None = None,
    seed: int = 0,
    progress: Any = None,
) -> list[dict[str, Any]]:
    """Simulate and test ``configs`` of one bound; returns one result row per configuration.

    ``problems`` maps a problem name to a :class:`theory.problems.Problem` (or is a function
    of the configuration returning one). Configurations outside the bound's conditions are
    reported with verdict "outside conditions" and excluded from the family-wise correction.
    """
    validate_one("R", R)
    entries = []
    for cfg in configs:
        prob = problems(cfg) if callable(problems) else problems[cfg.problem]
        entries.append((cfg, prob))
    return _test_family(
        [(bound, prob, cfg) for cfg, prob in entries],
        R=R,
        level=level,
        correction=correction,
        n_boot=n_boot,
        seed=seed,
        progress=progress,
    )


def _family_resamples(n_boot: int | None, level: float, n_tests: int) -> int:
    """Bootstrap resamples for a family of ``n_tests``: ``n_boot`` if given, else enough for
    the smallest per-test level (Bonferroni's ``level / n_tests``), two-sided."""
    return n_boot or BootstrapPlan.resamples_for(level / (2 * max(1, n_tests)))


def _test_family(
    items: Sequence[tuple[Bound, Any, Config]],
    *,
    R: int,
    level: float,
    correction: str,
    n_boot: int | None,
    seed: int,
    progress: Any = None,
    not_verifiable: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    plan = BootstrapPlan(_family_resamples(n_boot, level, len(items)), seed=_child_seed(seed, 4))
    evaluated = []
    for bound, prob, cfg in items:
        evaluated.append(_evaluate_config(bound, prob, cfg, R, plan))
        if progress is not None:
            progress.update(1)
    tested = [e for e in evaluated if e["inside"]]
    verdicts, corr = decide([e["test"] for e in tested], level, correction)
    for e, v, adj, tl in zip(tested, verdicts, corr.adjusted, corr.test_level, strict=True):
        ci = e["test"].confidence_bounds(float(tl) / 2)
        e["row"].update(verdict=v, p_adjusted=float(adj), ci_level_one_sided=float(tl) / 2, **ci)
    for e in evaluated:
        t: MeanTest = e["test"]
        e["row"].update(p_holds=t.p_holds, p_violated=t.p_violated, p_value=t.p_value)
        if not e["inside"]:
            ci = t.confidence_bounds(level / 2) if t.n > 1 else {}
            e["row"].update(
                verdict=OUTSIDE,
                p_adjusted=math.nan,
                ci_level_one_sided=level / 2,
                note=f"not tested: condition(s) {e['row']['failed_conditions']} fail",
                **ci,
            )
        if t.n_diverged:
            e["row"]["note"] = (
                e["row"]["note"] + "; " if e["row"]["note"] else ""
            ) + f"{t.n_diverged}/{t.n} replicas diverged"
        bv = e["row"]["bound_value"]
        ucb = e["row"].get("ucb", math.nan)
        e["row"]["ratio_ucb"] = ucb / bv if bv > 0 else math.inf
    rows = [e["row"] for e in evaluated] + [dict(r) for r in not_verifiable]
    for i, r in enumerate(rows):
        r["index"] = i
    return rows


# =====================================================================================
# auxiliary checks: rates, speed-up, exact vs Monte Carlo, consensus
# =====================================================================================


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
    algo = algorithm_for(bound)
    c = problem_constants(problem)
    H = 4 if algo != "sgd" else 1
    T = int(math.ceil(T / H) * H)
    p = 0.2 if algo == "palsgd" else 0.0
    eta = 0.5 * c["L"] if algo == "palsgd" else 0.0
    outer = "sgd" if "gamma" in bound.parameters else "average"
    cfg = Config(
        bound=bound.name,
        problem=problem.name,
        algorithm=algo,
        K=K,
        T=T,
        alpha=1.0,
        H=H,
        p=p,
        eta=eta,
        gamma=1.0,
        outer=outer,
        coins=coins_for(bound),
        seed=seed,
    )
    return cfg, c


def rate_check(
    bound: Bound, problem: Any, settings: VerifySettings, *, seed: int, progress: Any = None
) -> list[dict[str, Any]]:
    """Measured exponent of ``T`` vs the bound's.

    Smallest ``K`` of the settings, ``H = 2`` for local methods. The step is the bound's
    recommended step at every ``T`` of the grid where it satisfies the conditions, when at
    least 3 such ``T`` exist (the other ``T`` are left out); otherwise a fixed ``alpha``
    (half the smallest ``alpha_max`` over the grid) at every ``T``. The bound's leading
    exponent is :meth:`Bound.rate` under the same step rule.
    """
    K = int(min(settings.K))
    base, c = _base_config(bound, problem, settings, K=K, T=1, seed=seed)
    H = 2 if base.algorithm != "sgd" else 1
    base = dataclasses.replace(base, H=H)
    Ts = sorted({int(math.ceil(t / H) * H) for t in settings.rate_T})
    vals = [bound_values(bound, c, {**dataclasses.asdict(base), "T": t, "alpha": 1.0}) for t in Ts]
    amax = np.array([float(_max_step(bound, v)) for v in vals])
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
        rule, step_rule = "recommended", "recommended"
    else:
        finite = amax[np.isfinite(amax)]
        a = 0.5 * float(finite.min()) if finite.size else 0.5 / c["L"]
        alphas = [a] * len(Ts)
        rule, step_rule = f"fixed alpha={a:.3g}", a
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
    if fit is None:
        verdict = "not fitted"
    elif fit.ci_high < lead:
        verdict = "decays faster than the bound's leading term"
    elif fit.ci_low > lead:
        verdict = "decays slower than the bound's leading term"
    else:
        verdict = "consistent with the bound's leading exponent"
    rows = []
    for t, a, m, s, bv, ok in zip(Ts, alphas, means, ses, bvals, inside, strict=True):
        rows.append(
            {
                "bound": bound.name,
                "problem": problem.name,
                "algorithm": base.algorithm,
                "K": K,
                "H": H,
                "p": base.p,
                "eta": base.eta,
                "step_rule": rule,
                "T": t,
                "alpha": a,
                "R": settings.rate_replicas,
                "measured_mean": m,
                "measured_se": s,
                "bound_value": bv,
                "fitted_slope": fit.slope if fit else math.nan,
                "slope_ci_low": fit.ci_low if fit else math.nan,
                "slope_ci_high": fit.ci_high if fit else math.nan,
                "bound_slope": bfit.slope if bfit else math.nan,
                "bound_leading_exponent": lead,
                "rate_verdict": verdict,
                "conditions_hold": ok,
            }
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
) -> dict[str, Any]:
    """Measured ``Y(K=1)/Y(K)`` (delta-method CI on the log) vs the bound's ``B(1)/B(K)``,
    on the i.i.d. version of the problem (``zeta = 0``, so that ``f`` is the same for every
    ``K``) at a common fixed step (half the smaller ``alpha_max``), ``K`` the largest of the
    settings, ``T`` the largest of ``rate_T``."""
    Kbig = int(max(settings.K))
    T = int(max(settings.rate_T))
    res: dict[str, Any] = {}
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
    res.update(
        {
            "bound": bound.name,
            "problem": problem_name,
            "algorithm": cfgs[0].algorithm,
            "K1": 1,
            "K": Kbig,
            "H": cfgs[0].H,
            "p": cfgs[0].p,
            "eta": cfgs[0].eta,
            "alpha": alpha,
            "T": T,
            "R": settings.rate_replicas,
            "measured_K1": ms[0],
            "measured_K": ms[1],
            "measured_speedup": ratio,
            "speedup_ci_low": ratio * math.exp(-z * lse),
            "speedup_ci_high": ratio * math.exp(z * lse),
            "bound_K1": bs[0],
            "bound_K": bs[1],
            "predicted_speedup": bs[0] / bs[1] if bs[1] > 0 else math.inf,
            "linear_speedup": Kbig,
            "conditions_hold": all(inside),
        }
    )
    return res


def exact_specs(H: int = 4) -> list[tuple[str, dict[str, Any]]]:
    """The algorithms compared exactly vs Monte Carlo: (label, AlgorithmSpec kwargs)."""
    return [
        ("sgd", dict(kind="sgd", alpha=0.2)),
        ("local_sgd", dict(kind="local_sgd", alpha=0.2, H=H)),
        ("post_local_sgd", dict(kind="post_local_sgd", alpha=0.2, H=H, T0=8)),
        ("diloco", dict(kind="diloco", alpha=0.2, H=H, outer="nesterov", gamma=0.7, mu=0.9)),
        ("palsgd", dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5)),
        (
            "palsgd_shared_coins",
            dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, coins="shared"),
        ),
        (
            "palsgd_outer_sgd",
            dict(kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, outer="sgd", gamma=0.8),
        ),
        (
            "palsgd_nesterov",
            dict(
                kind="palsgd", alpha=0.2, H=H, p=0.3, eta=0.5, outer="nesterov", gamma=0.7, mu=0.9
            ),
        ),
    ]


def exact_vs_mc(
    settings: VerifySettings, *, seed: int, progress: Any = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Exact expected curves (:func:`theory.quadratic.exact_moments`) vs the simulator's mean.

    On the heterogeneous quadratic; for every algorithm of :func:`exact_specs`, the
    standardised deviation ``z = (MC mean - exact)/se`` at every step and metric; the
    largest ``|z|`` is compared with the Bonferroni threshold over all steps, metrics and
    algorithms at the run's level. Returns (per-step rows, per-algorithm summaries).
    """
    quad = importlib.import_module("theory.quadratic")
    sim = importlib.import_module("theory.simulate")
    problems = importlib.import_module("theory.problems")
    prob = problems.make_problem(
        "quadratic",
        K=4,
        d=4,
        noise="gaussian",
        sigma=settings.sigma if settings.sigma is not None else 1.0,
        zeta=settings.zeta,
        seed=_child_seed(seed, 7),
    )
    L = float(prob.L)
    specs = exact_specs()
    metrics = ("grad_norm_sq", "loss_gap", "consensus")
    T, R = settings.exact_T, settings.exact_replicas
    n_tests = len(specs) * len(metrics) * T
    thr = float(stats.norm.ppf(1 - settings.level / (2 * n_tests)))
    rows, summaries = [], []
    for i, (label, kw) in enumerate(specs):
        kw = dict(kw)
        kw["alpha"] = kw["alpha"] / L
        if "eta" in kw:
            kw["eta"] = kw["eta"] * L
        spec = sim.AlgorithmSpec(**kw, seed=_child_seed(seed, 8, i))
        try:
            ex = quad.exact_moments(prob, spec, T=T)
        except UserInputError as exc:
            summaries.append({"algorithm": label, "status": f"no exact recursion: {exc}"})
            if progress is not None:
                progress.update(1)
            continue
        with np.errstate(all="ignore"):
            tr = sim.simulate(prob, spec, T=T, R=R, seed=_child_seed(seed, 9, i))
        zmax = 0.0
        steps = np.asarray(tr.steps)
        for metric in metrics:
            e = np.asarray(getattr(ex, metric), dtype=float)[:T]
            mc = np.asarray(getattr(tr, metric), dtype=float)
            mean, se = mc.mean(axis=0), mc.std(axis=0, ddof=1) / math.sqrt(mc.shape[0])
            # floating-point rounding of deterministic steps (e.g. t = 0) is not Monte-Carlo error
            z = (mean - e) / np.sqrt(se**2 + (1e-10 * (1 + np.abs(e))) ** 2)
            zmax = max(zmax, float(np.max(np.abs(z))))
            for t in range(T):
                rows.append(
                    {
                        "algorithm": spec.kind,
                        "label": label,
                        "metric": metric,
                        "step": int(steps[t]),
                        "exact": float(e[t]),
                        "mc_mean": float(mean[t]),
                        "mc_se": float(se[t]),
                        "z": float(z[t]),
                    }
                )
        summaries.append(
            {
                "algorithm": label,
                "spec": {k: _finite_or_none(v) for k, v in dataclasses.asdict(spec).items()},
                "T": T,
                "R": R,
                "max_abs_z": zmax,
                "threshold": thr,
                "status": "agrees" if zmax <= thr else "DISAGREES",
            }
        )
        if progress is not None:
            progress.update(1)
    return rows, summaries


def consensus_vs_H(
    settings: VerifySettings,
    problem_name: str,
    problems: ProblemCache,
    *,
    seed: int,
    progress: Any = None,
) -> list[dict[str, Any]]:
    """Time-averaged consensus error ``(1/K) sum_k ||x_k - xbar||^2`` vs ``H`` for Local SGD
    and PALSGD (``p = 0.2``, ``eta = 0.5 L``) with common random numbers (same seed)."""
    K = int(max(settings.K))
    prob = problems.get(problem_name, K, iid=False)
    c = problem_constants(prob)
    alpha = 0.25 / c["L"]
    rows = []
    for j, H in enumerate(settings.consensus_H):
        T = int(math.ceil(settings.consensus_T / H) * H)
        for algo, p, eta in (("local_sgd", 0.0, 0.0), ("palsgd", 0.2, 0.5 * c["L"])):
            cfg = Config(
                bound="",
                problem=problem_name,
                algorithm=algo,
                K=K,
                T=T,
                alpha=alpha,
                H=int(H),
                p=p,
                eta=eta,
                seed=_child_seed(seed, 10, j),
            )
            tr = simulate_config(prob, cfg, settings.rate_replicas)
            cons = np.asarray(tr.consensus, dtype=float).mean(axis=1)
            cons_mean, cons_se = _mean_se(cons)
            g_mean, g_se = _mean_se(tr.mean_grad_norm_sq())
            rows.append(
                {
                    "problem": problem_name,
                    "algorithm": algo,
                    "K": K,
                    "H": int(H),
                    "p": p,
                    "eta": eta,
                    "alpha": alpha,
                    "T": T,
                    "R": settings.rate_replicas,
                    "consensus_mean": cons_mean,
                    "consensus_se": cons_se,
                    "grad_norm_sq_mean": g_mean,
                    "grad_norm_sq_se": g_se,
                }
            )
            if progress is not None:
                progress.update(1)
    return rows


# =====================================================================================
# the main job
# =====================================================================================


def _versions() -> dict[str, Any]:
    import matplotlib
    import scipy

    import theory

    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "sympy": sp.__version__,
        "matplotlib": matplotlib.__version__,
        "theory": getattr(theory, "__version__", "?"),
        "platform": platform.platform(),
    }
    try:
        root = Path(__file__).resolve().parent.parent
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def resolve_bounds(names: Sequence[str] | None) -> list[Bound]:
    """The registered bounds called ``names`` (all of them for ``None``)."""
    if not names:
        return bound_registry.all_bounds()
    return [bound_registry.get(n) for n in names]


def resolve_problems(names: Sequence[str]) -> list[str]:
    """Check problem names against :data:`theory.problems.PROBLEMS` (error lists the known)."""
    problems = importlib.import_module("theory.problems")
    known = sorted(problems.PROBLEMS)
    if not names:
        raise UserInputError(f"no problem selected; known problems: {known}")
    bad = [n for n in names if n not in problems.PROBLEMS]
    if bad:
        raise UserInputError(f"unknown problem(s) {bad}; known problems: {known}")
    return list(dict.fromkeys(names))


def run_verification(settings: VerifySettings, *, progress: bool = True) -> dict[str, Any]:
    """The main job: every selected bound on every selected problem; returns the report dict.

    The report holds ``settings``, ``versions``, ``statistics`` (methods, correction, level),
    ``results`` (one row per configuration, :data:`RESULTS_COLUMNS`), ``rates``,
    ``speedup``, ``exact_vs_mc`` (+ ``exact_vs_mc_summary``), ``consensus``,
    ``constant_checks`` and ``summary`` (verdict counts, the violated configurations).
    """
    settings.validated()
    t_start = time.perf_counter()
    bounds = resolve_bounds(settings.bounds)
    pnames = resolve_problems(settings.problems)
    cache = ProblemCache(settings)
    kinds = set(_simulator_kinds())

    items: list[tuple[Bound, Any, Config]] = []
    skipped: list[dict[str, Any]] = []
    verifiable: list[Bound] = []
    for bi, bound in enumerate(bounds):
        algo = algorithm_for(bound)
        reason = None
        if algo not in kinds:
            reason = f"{NOT_VERIFIABLE}: simulator lacks {algo}"
        else:
            consts = [
                problem_constants(cache.get(pn, min(settings.K), iid=_needs_iid(bound)))
                for pn in pnames
            ]  # a problem that cannot be built is bad input
            try:
                for c in consts:
                    bound_values(
                        bound,
                        c,
                        {"K": 1, "H": 1, "T": 1, "p": 0.1, "eta": 0.0, "gamma": 1.0, "alpha": 1.0},
                    )
            except UserInputError as exc:
                reason = f"{NOT_VERIFIABLE}: {exc}"
        if reason:
            skipped.append(
                {
                    "bound": bound.name,
                    "problem": "",
                    "algorithm": algo,
                    "verdict": NOT_VERIFIABLE,
                    "note": reason,
                }
            )
            continue
        verifiable.append(bound)
        for pi, pn in enumerate(pnames):
            cfgs = sample_configs(
                bound, pn, cache, settings, seed=_child_seed(settings.seed, 0, bi, pi)
            )
            for cfg in cfgs:
                items.append((bound, cache.get(pn, cfg.K, iid=_needs_iid(bound)), cfg))

    n_rate = len(verifiable) * len(settings.rate_T) if settings.rates else 0
    n_speed = 2 * len(verifiable) if settings.speedup else 0
    n_exact = len(exact_specs()) if settings.exact else 0
    n_cons = 2 * len(settings.consensus_H) if settings.consensus else 0
    total = len(items) + n_rate + n_speed + n_exact + n_cons
    bar = _progress_bar(total, progress)
    try:
        rows = _test_family(
            items,
            R=settings.replicas,
            level=settings.level,
            correction=settings.correction,
            n_boot=settings.n_boot,
            seed=settings.seed,
            progress=bar,
            not_verifiable=skipped,
        )
        rates: list[dict[str, Any]] = []
        speed: list[dict[str, Any]] = []
        if settings.rates:
            for bi, bound in enumerate(verifiable):
                prob = cache.get(pnames[0], int(min(settings.K)), iid=_needs_iid(bound))
                rates += rate_check(
                    bound, prob, settings, seed=_child_seed(settings.seed, 11, bi), progress=bar
                )
        if settings.speedup:
            for bi, bound in enumerate(verifiable):
                speed.append(
                    speedup_check(
                        bound,
                        pnames[0],
                        cache,
                        settings,
                        seed=_child_seed(settings.seed, 12, bi),
                        progress=bar,
                    )
                )
        exact_rows, exact_sum = ([], [])
        if settings.exact:
            try:
                exact_rows, exact_sum = exact_vs_mc(
                    settings, seed=_child_seed(settings.seed, 13), progress=bar
                )
            except ModuleNotFoundError as exc:
                exact_sum = [{"algorithm": "*", "status": f"skipped: {exc}"}]
        cons = []
        if settings.consensus:
            cons = consensus_vs_H(
                settings, pnames[0], cache, seed=_child_seed(settings.seed, 14), progress=bar
            )
    finally:
        if bar is not None:
            bar.close()
    n_tested = sum(1 for r in rows if r.get("verdict") in (HOLDS, VIOLATED, INCONCLUSIVE))
    report = {
        "tool": "palsgd verify",
        "settings": jsonable(dataclasses.asdict(settings)),
        "versions": _versions(),
        "statistics": {
            "measured": "(1/T) sum_{t<T} ||grad f(xbar_t)||^2 per replica; replicas i.i.d.",
            "tests": "one-sided Student t and bootstrap-t (studentised bootstrap) p-values; "
            "verdicts use the larger p-value (the wider confidence bound); diverged "
            "replicas by a Markov-inequality binomial test",
            "p_value": "two-sided 2*min(p_holds, p_violated)",
            "correction": settings.correction,
            "family_wise_level": settings.level,
            "family_size": n_tested,
            "bootstrap_resamples": _family_resamples(settings.n_boot, settings.level, len(items)),
            "confidence_bounds": "one-sided at level_i/2, level_i the per-test level of the "
            "correction; 'holds' iff ucb < bound, 'violated' iff lcb > bound",
        },
        "constant_checks": cache.checks,
        "results": jsonable(rows),
        "rates": jsonable(rates),
        "speedup": jsonable(speed),
        "exact_vs_mc": jsonable(exact_rows),
        "exact_vs_mc_summary": jsonable(exact_sum),
        "consensus": jsonable(cons),
        "bounds": [b.describe() for b in bounds],
        "elapsed_s": time.perf_counter() - t_start,
    }
    report["summary"] = summary_of(report)
    return report


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="palsgd verify", unit="sim", leave=False, dynamic_ncols=True)


def summary_of(report: Mapping[str, Any]) -> dict[str, Any]:
    """Verdict counts, the violated configurations, exact-vs-MC disagreements, exit code."""
    rows = report["results"]
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        counts[r.get("verdict", INCONCLUSIVE)] = counts.get(r.get("verdict", INCONCLUSIVE), 0) + 1
    violated = [
        {
            k: r.get(k)
            for k in (
                "index",
                "bound",
                "problem",
                "summary",
                "measured_mean",
                "lcb",
                "bound_value",
                "ratio",
                "p_adjusted",
            )
        }
        for r in rows
        if r.get("verdict") == VIOLATED
    ]
    per_bound: dict[str, dict[str, int]] = {}
    for r in rows:
        d = per_bound.setdefault(r["bound"], {v: 0 for v in VERDICTS})
        d[r.get("verdict", INCONCLUSIVE)] += 1
    ratios = [
        r["ratio"]
        for r in rows
        if r.get("verdict") in (HOLDS, INCONCLUSIVE, VIOLATED) and isinstance(r.get("ratio"), float)
    ]
    disagree = [
        s["algorithm"]
        for s in report.get("exact_vs_mc_summary", [])
        if s.get("status") == "DISAGREES"
    ]
    return {
        "counts": counts,
        "per_bound": per_bound,
        "violated": violated,
        "max_tightness_ratio": max(ratios) if ratios else None,
        "median_tightness_ratio": float(np.median(ratios)) if ratios else None,
        "exact_vs_mc_disagreements": disagree,
        "not_verifiable": [r["note"] for r in rows if r.get("verdict") == NOT_VERIFIABLE],
        "correction": report["statistics"]["correction"],
        "family_wise_level": report["statistics"]["family_wise_level"],
        "exit_code": 1 if violated else 0,
    }


# =====================================================================================
# output
# =====================================================================================


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(xf):
        return "-"
    if math.isinf(xf):
        return "inf" if xf > 0 else "-inf"
    return format(xf, spec)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The terminal table: bound, problem, configuration, measured [lcb, ucb], bound, ratio,
    verdict. Violated rows are marked with ``!!``."""
    head = ("bound", "problem", "configuration", "measured [lcb, ucb]", "bound", "ratio", "verdict")
    body = []
    for r in rows:
        if r.get("verdict") == NOT_VERIFIABLE:
            body.append((r["bound"], "-", "-", "-", "-", "-", r.get("note", NOT_VERIFIABLE)))
            continue
        meas = f"{_fmt(r.get('measured_mean'))} [{_fmt(r.get('lcb'))}, {_fmt(r.get('ucb'))}]"
        verdict = r.get("verdict", "")
        if verdict == VIOLATED:
            verdict = "!! VIOLATED !!"
        body.append(
            (
                r["bound"],
                r["problem"],
                r.get("summary", ""),
                meas,
                _fmt(r.get("bound_value")),
                _fmt(r.get("ratio"), ".2f"),
                verdict,
            )
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return "\n".join(out)


def format_summary(report: Mapping[str, Any]) -> str:
    """Human-readable closing summary; violated bounds are listed prominently."""
    s = report["summary"]
    c = s["counts"]
    lines = [
        f"tested {sum(c[v] for v in (HOLDS, VIOLATED, INCONCLUSIVE))} configurations "
        f"({s['correction']} correction, family-wise level {s['family_wise_level']}): "
        f"{c[HOLDS]} hold, {c[VIOLATED]} violated, {c[INCONCLUSIVE]} inconclusive; "
        f"{c[OUTSIDE]} outside conditions; {c[NOT_VERIFIABLE]} not verifiable",
    ]
    if s["median_tightness_ratio"] is not None:
        lines.append(
            f"tightness measured/bound: median {s['median_tightness_ratio']:.3g}, "
            f"max {s['max_tightness_ratio']:.3g}"
        )
    for note in s["not_verifiable"]:
        lines.append(f"note: {note}")
    for a in s["exact_vs_mc_disagreements"]:
        lines.append(f"WARNING: exact moments and Monte Carlo disagree for {a}")
    if s["violated"]:
        lines.append("")
        lines.append("!" * 78)
        lines.append(f"BOUND VIOLATED in {len(s['violated'])} configuration(s):")
        for v in s["violated"]:
            lines.append(
                f"  [{v['index']}] {v['bound']} on {v['problem']} ({v['summary']}): "
                f"measured {_fmt(v['measured_mean'])} (lcb {_fmt(v['lcb'])}) > bound "
                f"{_fmt(v['bound_value'])}, ratio {_fmt(v['ratio'], '.2f')}"
            )
        lines.append("!" * 78)
    return "\n".join(lines)


def _write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})


class AtomicDirectory:
    """Write a directory atomically: files go to a temporary sibling, renamed at the end.

    On success an existing target (a previous report: it must contain ``results.json`` or be
    empty) is replaced; on failure the temporary directory and any parent directories
    created for it are removed, so nothing half-written is left behind. An unwritable
    target raises :class:`UserInputError` before any work is done.
    """

    def __init__(self, target: str | os.PathLike[str]):
        self.target = Path(target).expanduser().absolute()
        self.tmp: Path | None = None
        self._created: list[Path] = []

    def __enter__(self) -> Path:
        t = self.target
        if t.exists() and not t.is_dir():
            raise UserInputError(f"output path {str(t)!r} exists and is not a directory")
        if t.is_dir() and any(t.iterdir()) and not (t / "results.json").exists():
            raise UserInputError(
                f"output directory {str(t)!r} is not empty and holds no "
                "previous report (results.json); refusing to replace it"
            )
        missing = []
        p = t.parent
        while not p.exists():
            missing.append(p)
            p = p.parent
        if not p.is_dir():
            raise UserInputError(
                f"cannot write the report to {str(t)!r}: {str(p)!r} is not a directory"
            )
        try:
            for d in reversed(missing):
                d.mkdir()
                self._created.append(d)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{t.name}.tmp-", dir=t.parent))
        except OSError as exc:
            self._cleanup()
            raise UserInputError(f"cannot write the report to {str(t)!r}: {exc.strerror}") from None
        return self.tmp

    def _cleanup(self) -> None:
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        for d in reversed(self._created):
            try:
                d.rmdir()
            except OSError:
                pass
        self._created.clear()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._cleanup()
            return
        assert self.tmp is not None
        t = self.target
        old = None
        try:
            if t.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{t.name}.old-", dir=t.parent))
                os.rmdir(old)
                os.rename(t, old)
            os.rename(self.tmp, t)
        except OSError as exc:
            if old is not None and old.exists() and not t.exists():
                os.rename(old, t)
            self._cleanup()
            raise UserInputError(f"cannot write the report to {str(t)!r}: {exc.strerror}") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


#: (file name, report key, columns) of each CSV file of the report directory
_CSV_FILES = (
    ("results.csv", "results", RESULTS_COLUMNS),
    ("rates.csv", "rates", RATES_COLUMNS),
    ("exact_vs_mc.csv", "exact_vs_mc", EXACT_COLUMNS),
    ("speedup.csv", "speedup", SPEEDUP_COLUMNS),
    ("consensus.csv", "consensus", CONSENSUS_COLUMNS),
)


def write_report_files(
    report: Mapping[str, Any], directory: Path, *, plots: bool = True
) -> list[str]:
    """Write every report file into an existing ``directory``; returns the file names."""
    directory = Path(directory)
    files = []
    payload = dict(report)
    payload["columns"] = {name: list(cols) for name, _, cols in _CSV_FILES}
    with open(directory / "results.json", "w") as fh:
        json.dump(jsonable(payload), fh, indent=1, allow_nan=False)
    files.append("results.json")
    for name, key, cols in _CSV_FILES:
        _write_csv(directory / name, report.get(key, []), cols)
        files.append(name)
    with open(directory / "summary.txt", "w") as fh:
        fh.write(format_table(report["results"]) + "\n\n" + format_summary(report) + "\n")
    files.append("summary.txt")
    if plots:
        from theory import report_plots

        files += report_plots.plot_report(report, directory)
    return files


def write_report(
    report: Mapping[str, Any], out: str | os.PathLike[str], *, plots: bool = True
) -> list[str]:
    """Write the report directory ``out`` atomically; returns the file names written."""
    with AtomicDirectory(out) as tmp:
        return write_report_files(report, tmp, plots=plots)

"""Checking a problem's declared constants by sampling: :func:`check_constants`."""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from core.errors import UserInputError
from core.validation import ParameterError
from theory.problems.base import CONSTANTS, Problem


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        raise UserInputError("pass a numpy Generator or an integer seed (no global random state)")
    return np.random.default_rng(int(rng))


@dataclass
class ConstantsReport:
    """What :func:`check_constants` measured.

    ``L_measured`` and ``zeta2_measured`` never exceed the suprema they estimate (up to
    finite-difference error) and ``f_min_found`` is never below the infimum, so a value past
    the declared one contradicts the declaration. ``sigma2_measured`` is the largest sample
    mean of ``||g_k - grad f_k||^2`` over points and workers (biased upwards by the
    maximum), ``sigma2_pooled`` their average, ``sigma2_lower_conf`` the largest
    Bonferroni lower confidence bound (the quantity tested). ``noise_mean_max_z`` is nan
    when the zero-mean test does not apply (finite-sum index draws).
    """

    problem: str
    n_points: int
    L_declared: float
    L_measured: float
    sigma2_declared: float
    sigma2_measured: float
    sigma2_pooled: float
    sigma2_lower_conf: float
    zeta2_declared: float
    zeta2_measured: float
    f_star_declared: float
    f_min_found: float
    grad_rel_error: float
    local_mean_rel_error: float
    noise_mean_max_z: float
    exactness: dict[str, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def ratios(self) -> dict[str, float]:
        """measured / declared for L, sigma2, zeta2 (nan when the declared value is 0)."""

        def r(a: float, b: float) -> float:
            return a / b if b > 0 else (math.nan if a == 0 else math.inf)

        return {
            "L": r(self.L_measured, self.L_declared),
            "sigma2": r(self.sigma2_measured, self.sigma2_declared),
            "zeta2": r(self.zeta2_measured, self.zeta2_declared),
        }

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratios"] = self.ratios()
        out["ok"] = self.ok
        return out


def check_constants(
    problem: Problem,
    n: int = 24,
    rng: np.random.Generator | int = 0,
    *,
    n_noise: int = 400,
    power_iters: int = 40,
    gd_steps: int = 300,
    tol: float = 1e-4,
    z_crit: float | None = None,
    raise_on_violation: bool = True,
) -> ConstantsReport:
    """Sample ``problem`` and test every declared constant; raise when one is false.

    * ``L``: at ``n`` probe points, for every worker, power iteration on the
      central-difference Hessian (``||H v||`` for unit ``v`` never exceeds ``||H||_2``) and
      secant ratios ``||grad f_k(x) - grad f_k(y)|| / ||x - y||``; violation if the largest
      exceeds ``L (1 + tol)``.
    * ``sigma2``: ``n_noise`` oracle calls at a few points; violation if a one-sided lower
      confidence bound (Bonferroni over points and workers) of ``E||g_k - grad f_k||^2``
      exceeds ``sigma2 (1 + tol)``. The noise mean is tested with per-coordinate z-scores.
    * ``zeta2``: exact at each point; violation if it exceeds ``zeta2 (1 + tol)``.
    * ``f_star``: minimum of ``f`` over the points and over gradient-descent runs (step
      ``1/L``) from them; violation if below ``f_star - tol (1 + |f_star|)``.
    * consistency: ``grad`` against central differences of ``f``, and ``f``/``grad``
      against the means of ``local_fs``/``local_grads``.
    """
    rng = _rng(rng)
    if n < 4:
        raise ParameterError("n", n, "integer in [4, inf)")
    K, d = problem.K, problem.d
    P = np.asarray(problem.probe_points(rng, n), dtype=float)
    scale_x = 1.0 + np.linalg.norm(P, axis=-1, keepdims=True) / math.sqrt(d)
    Xp = np.broadcast_to(P[:, None, :], (n, K, d)).copy()
    L_meas = _measure_L(problem, Xp, scale_x, rng, power_iters)
    fv, gv, local_g, grad_err, mean_err = _consistency(problem, P, Xp, scale_x, rng)
    dev = local_g - gv[:, None, :]
    zeta_meas = float(np.max(np.mean(np.sum(dev * dev, axis=-1), axis=-1)))
    zeta_slack = 1e-12 * (1 + float(np.max(1.0 + np.linalg.norm(gv, axis=-1)))) ** 2
    m_sq, sigma_lcb, z_max, z_lim = _measure_noise(problem, Xp[: min(n, 6)], rng, n_noise, z_crit)
    report = ConstantsReport(
        problem=problem.name,
        n_points=n,
        L_declared=problem.L,
        L_measured=L_meas,
        sigma2_declared=problem.sigma2,
        sigma2_measured=float(np.max(m_sq)),
        sigma2_pooled=float(np.mean(m_sq)),
        sigma2_lower_conf=sigma_lcb,
        zeta2_declared=problem.zeta2,
        zeta2_measured=zeta_meas,
        f_star_declared=problem.f_star,
        f_min_found=_search_f_min(problem, P, fv, gd_steps),
        grad_rel_error=grad_err,
        local_mean_rel_error=mean_err,
        noise_mean_max_z=z_max,
        exactness=dict(problem.exactness),
    )
    report.violations = _violations(report, tol, zeta_slack, z_lim)
    if report.violations and raise_on_violation:
        raise UserInputError(
            f"problem {problem.name!r}: declared constants contradicted by sampling: "
            + "; ".join(report.violations)
        )
    return report


def _violations(r: ConstantsReport, tol: float, zeta_slack: float, z_lim: float) -> list[str]:
    """The declared constants the measurements of ``r`` contradict (see
    :func:`check_constants`); ``zeta_slack`` is the rounding allowance of ``zeta2``,
    ``z_lim`` the limit of the noise mean's z-score."""
    viol: list[str] = []
    if r.L_measured > r.L_declared * (1 + tol):
        viol.append(
            f"L: measured smoothness {r.L_measured:.6g} exceeds the declared L = {r.L_declared:.6g}"
        )
    if r.grad_rel_error > 1e-5:
        viol.append(f"grad is not the gradient of f (relative error {r.grad_rel_error:.3g})")
    if r.local_mean_rel_error > 1e-8:
        viol.append(
            f"f/grad differ from the means of local_fs/local_grads ({r.local_mean_rel_error:.3g})"
        )
    if r.zeta2_measured > r.zeta2_declared * (1 + tol) + zeta_slack:
        viol.append(
            f"zeta2: measured heterogeneity {r.zeta2_measured:.6g} exceeds the declared "
            f"zeta2 = {r.zeta2_declared:.6g}"
        )
    if r.sigma2_lower_conf > r.sigma2_declared * (1 + tol) + 1e-12:
        viol.append(
            f"sigma2: measured noise variance {r.sigma2_measured:.6g} (lower confidence bound "
            f"{r.sigma2_lower_conf:.6g}) exceeds the declared sigma2 = {r.sigma2_declared:.6g}"
        )
    if r.noise_mean_max_z > z_lim:
        viol.append(
            f"noise is not zero-mean (max coordinate z-score {r.noise_mean_max_z:.3g} > "
            f"{z_lim:.3g})"
        )
    f_star = r.f_star_declared
    if r.f_min_found < f_star - tol * (1 + abs(f_star)):
        viol.append(
            f"f_star: found f = {r.f_min_found:.6g} below the declared f_star = {f_star:.6g}"
        )
    return viol


def _measure_L(
    problem: Problem, Xp: np.ndarray, scale_x: np.ndarray, rng: np.random.Generator, iters: int
) -> float:
    """Largest curvature seen: power iteration on finite-difference Hessians of every
    ``f_k`` at the points ``Xp`` (n, K, d), and secant ratios at several distances."""
    n, K, d = Xp.shape
    h = 1e-5 * scale_x[:, :, None]
    v = rng.standard_normal((n, K, d))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    hv_norm = np.zeros((n, K))
    for _ in range(iters):
        Hv = (problem.local_grads(Xp + h * v) - problem.local_grads(Xp - h * v)) / (2 * h)
        hv_norm = np.linalg.norm(Hv, axis=-1)
        nz = hv_norm > 0
        v = np.where(nz[..., None], Hv / np.where(nz, hv_norm, 1.0)[..., None], v)
    L_sec = 0.0
    for dist in (1e-2, 1e-1, 1.0, 3.0):
        step = dist * scale_x[:, :, None] * rng.standard_normal((n, K, d)) / math.sqrt(d)
        dg = problem.local_grads(Xp + step) - problem.local_grads(Xp)
        ratio = np.linalg.norm(dg, axis=-1) / np.linalg.norm(step, axis=-1)
        L_sec = max(L_sec, float(np.max(ratio)))
    return max(float(np.max(hv_norm)), L_sec)


def _consistency(
    problem: Problem,
    P: np.ndarray,
    Xp: np.ndarray,
    scale_x: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """``f``, ``grad`` and ``local_grads`` at the points, the relative error of ``grad``
    against central differences of ``f``, and of ``f``/``grad`` against the means of
    ``local_fs``/``local_grads``."""
    n, d = P.shape
    u = rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    hh = 1e-5 * scale_x
    fv, gv = problem.f(P), problem.grad(P)
    fd = (problem.f(P + hh * u) - problem.f(P - hh * u)) / (2 * hh[:, 0])
    gd = np.sum(gv * u, axis=-1)
    g_scale = 1.0 + np.linalg.norm(gv, axis=-1)
    grad_err = float(np.max(np.abs(fd - gd) / g_scale))
    local_g = problem.local_grads(Xp)
    lf = problem.local_fs(Xp).mean(axis=-1)
    lg = local_g.mean(axis=-2)
    mean_err = float(
        max(
            np.max(np.abs(lf - fv) / (1 + np.abs(fv))),
            np.max(np.linalg.norm(lg - gv, axis=-1) / g_scale),
        )
    )
    return fv, gv, local_g, grad_err, mean_err


def _measure_noise(
    problem: Problem,
    Xs: np.ndarray,
    rng: np.random.Generator,
    n_noise: int,
    z_crit: float | None,
) -> tuple[np.ndarray, float, float, float]:
    """``n_noise`` oracle calls at the points ``Xs`` (n_sp, K, d): the per point and worker
    mean of ``||g_k - grad f_k||^2``, the largest Bonferroni lower confidence bound, and
    the largest per-coordinate z-score of the noise mean with its limit (nan, inf for
    index draws)."""
    n_sp, K, d = Xs.shape
    true = problem.local_grads(Xs)
    sq = np.empty((n_noise, n_sp, K))
    sums = np.zeros((n_sp, K, d))
    sums2 = np.zeros((n_sp, K, d))
    for i in range(n_noise):
        e = problem.stochastic_grads(Xs, rng) - true
        sq[i] = np.sum(e * e, axis=-1)
        sums += e
        sums2 += e * e
    m_sq = sq.mean(axis=0)
    se = sq.std(axis=0, ddof=1) / math.sqrt(n_noise)
    zc = z_crit if z_crit is not None else float(stats.norm.isf(1e-4 / (n_sp * K)))
    sigma_lcb = float(np.max(m_sq - zc * se))
    # zero mean: per-coordinate z-scores, for additive noise (minibatch index draws are
    # unbiased by construction, and their skewed discrete laws defeat a normal z-test)
    probe = problem.draw_randomness(rng, (1,))
    z_max, z_lim = math.nan, math.inf
    if probe is not None and np.issubdtype(probe.dtype, np.floating):
        mean_e = sums / n_noise
        var_e = sums2 / n_noise - mean_e**2
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(var_e > 1e-300, np.abs(mean_e) / np.sqrt(var_e / n_noise), 0.0)
        z_max = float(np.max(z))
        z_lim = float(stats.norm.isf(1e-6 / (2 * z.size))) + 1.0
    return m_sq, sigma_lcb, z_max, z_lim


def _search_f_min(problem: Problem, P: np.ndarray, fv: np.ndarray, gd_steps: int) -> float:
    """The least ``f`` over the points and over gradient descent (step ``1/L``) from them."""
    f_min = float(np.min(fv))
    x = P.copy()
    lr = 1.0 / problem.L
    with np.errstate(all="ignore"):
        for _ in range(gd_steps):
            x = x - lr * problem.grad(x)
        fx = problem.f(x)
    fx = fx[np.isfinite(fx)]
    if fx.size:
        f_min = min(f_min, float(np.min(fx)))
    return f_min


def with_declared(problem: Problem, **constants: float) -> Problem:
    """A shallow copy of ``problem`` with some declared constants replaced (for what-ifs)."""
    bad = set(constants) - set(CONSTANTS)
    if bad:
        raise UserInputError(f"unknown constant(s) {sorted(bad)}: choose from {sorted(CONSTANTS)}")
    new = copy.copy(problem)
    for k, val in constants.items():
        setattr(new, k, float(val))
    return new

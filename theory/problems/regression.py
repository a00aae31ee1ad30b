"""Robust regression (Geman-McClure, Cauchy) and logistic regression with a nonconvex
regulariser, with their factories."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from core.errors import UserInputError
from core.validation import ParameterError
from theory.problems.args import ProblemArgs, data_sigma2_arg, no_extra, shifts_arg, take_fields
from theory.problems.base import Array
from theory.problems.data import DataProblem


class RobustRegressionProblem(DataProblem):
    """Robust regression ``ell(z; y) = rho(z - y)`` with a bounded, nonconvex ``rho``.

    ``rho`` (``scale`` = ``c``):

    * Geman-McClure ``rho(r) = (c^2/2) r^2/(c^2 + r^2)``: ``rho'' = c^4 (c^2 - 3 r^2)/(c^2 + r^2)^3``
      in ``[-1/4, 1]``, ``|rho'| <= (3 sqrt(3)/16) c``.
    * Cauchy ``rho(r) = (c^2/2) log(1 + r^2/c^2)``: ``rho'' = c^2 (c^2 - r^2)/(c^2 + r^2)^2``
      in ``[-1/8, 1]``, ``|rho'| <= c/2``.

    Hence the Hessian ``(1/n) A_k^T diag(rho''(r)) A_k + 0`` has norm at most
    ``L = max_k ||A_k||_2^2 / n``, attained at zero residuals (exact when the data are
    realisable, i.e. no outliers, else an upper bound). ``rho >= 0`` gives
    ``f_star = 0`` as a valid lower bound (exact for realisable shared data).
    """

    def __init__(self, *, loss: str = "geman_mcclure", scale: float = 1.0, **kw: Any) -> None:
        if loss not in ("geman_mcclure", "cauchy"):
            raise UserInputError(f"unknown robust loss {loss!r}: 'geman_mcclure' or 'cauchy'")
        if not (math.isfinite(scale) and scale > 0):
            raise ParameterError("scale", scale, "(0, inf)")
        self.loss, self.scale = loss, float(scale)
        self.G = (3 * math.sqrt(3) / 16 if loss == "geman_mcclure" else 0.5) * self.scale
        self.G2 = 1.0
        super().__init__(reg_curv=0.0, **kw)
        self.info.update({"loss": loss, "scale": self.scale})

    def ell(self, z: Array, y: Array) -> Array:
        r, c2 = z - y, self.scale**2
        if self.loss == "geman_mcclure":
            return 0.5 * c2 * r * r / (c2 + r * r)
        return 0.5 * c2 * np.log1p(r * r / c2)

    def dell(self, z: Array, y: Array) -> Array:
        r, c2 = z - y, self.scale**2
        if self.loss == "geman_mcclure":
            return c2 * c2 * r / (c2 + r * r) ** 2
        return c2 * r / (c2 + r * r)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        xt = self.info.get("_x_true")
        if xt is not None:
            pts[0] = xt
        return pts


class LogisticProblem(DataProblem):
    """Logistic regression with the nonconvex regulariser ``lambda sum_i x_i^2/(1 + x_i^2)``.

    ``ell(z; y) = log(1 + exp(-y z))``, ``y in {-1, +1}``: ``|ell'| <= 1``,
    ``0 < ell'' <= 1/4`` with equality at ``z = 0``. The regulariser's second derivative
    ``(2 - 6 t^2)/(1 + t^2)^3`` lies in ``[-1/2, 2]`` with 2 at ``t = 0``. So
    ``L = max_k ||A_k||_2^2/(4n) + 2 lambda``, exact (attained at ``x = 0``);
    ``f_star = 0`` is a valid lower bound (both parts are nonnegative).
    """

    def __init__(self, *, lam: float = 0.1, **kw: Any) -> None:
        if not (math.isfinite(lam) and lam >= 0):
            raise ParameterError("lam", lam, "[0, inf)")
        self.lam = float(lam)
        self.G, self.G2 = 1.0, 0.25
        super().__init__(reg_curv=2.0 * self.lam, **kw)
        self.info["lam"] = self.lam

    def ell(self, z: Array, y: Array) -> Array:
        return np.logaddexp(0.0, -y * z)

    def dell(self, z: Array, y: Array) -> Array:
        return -y * special.expit(-y * z)

    def reg(self, x: Array) -> Array:
        x2 = x * x
        return self.lam * np.sum(x2 / (1.0 + x2), axis=-1)

    def dreg(self, x: Array) -> Array:
        return self.lam * 2.0 * x / (1.0 + x * x) ** 2

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        pts[0] = 0.0
        return pts


@dataclass(frozen=True)
class DataOptions:
    """The data keywords both data problems take: ``n_samples`` rows (per worker with
    ``shards``), per-worker data ``shards`` whose rows and planted ``x_true`` are shifted by
    ``shard_spread``, the minibatch ``batch`` of ``noise='finite_sum'``."""

    n_samples: int = 256
    shards: bool = False
    shard_spread: float = 1.0
    batch: int = 1


def _planted_design(
    rng: np.random.Generator, a: ProblemArgs, o: DataOptions
) -> tuple[Array, Array, Array]:
    """Gaussian design ``A``, a planted ``x_true`` and the clean margins ``a_i^T x_true``.

    With shards each worker's rows get their own mean (covariate shift) and each worker
    its own ``x_true_k = x_true + shard_spread N(0, I/d)``.
    """
    K, n, d = a.K, o.n_samples, a.d
    if n < 1:
        raise ParameterError("n_samples", n, "integer in [1, inf)")
    if o.shards:
        means = o.shard_spread * rng.standard_normal((K, 1, d)) / math.sqrt(d)
        A = rng.standard_normal((K, n, d)) + means
    else:
        A = rng.standard_normal((n, d))
    x_true = rng.standard_normal(d) / math.sqrt(d) * 2.0
    if o.shards:
        xt = x_true + o.shard_spread * rng.standard_normal((K, d)) / math.sqrt(d)
        return A, x_true, np.einsum("knd,kd->kn", A, xt)
    return A, x_true, A @ x_true


def _data_arguments(
    kw: dict[str, Any], name: str
) -> tuple[ProblemArgs, DataOptions, np.random.Generator, Any]:
    """The shared keywords of a data-problem factory, taken out of ``kw`` (anything left is
    refused, naming ``name``): ``ProblemArgs``, ``DataOptions``, the seeded generator and the
    noise variance."""
    a, o = ProblemArgs.take(kw), take_fields(DataOptions, kw)
    no_extra(kw, name)
    return a, o, a.rng(), data_sigma2_arg(a.noise, a.sigma)


def _data_keywords(
    a: ProblemArgs, o: DataOptions, rng: np.random.Generator, A: Array, y: Array, sigma2: Any
) -> dict[str, Any]:
    """The keywords of a data problem on the rows ``A`` and labels ``y`` that both factories
    share: linear terms of heterogeneity ``zeta`` unless ``shards`` (drawn last from
    ``rng``), ``f_star = 0``."""
    return {
        "K": a.K,
        "data": A,
        "labels": y,
        "shifts": shifts_arg(rng, a.K, a.d, a.zeta, o.shards),
        "noise": a.noise,
        "sigma2": sigma2,
        "batch": o.batch,
        "f_star": 0.0,
    }


def make_robust_regression(
    *,
    loss: str = "geman_mcclure",
    scale: float = 1.0,
    outliers: float = 0.1,
    outlier_scale: float = 10.0,
    **kw: Any,
) -> RobustRegressionProblem:
    """Robust regression (see :class:`RobustRegressionProblem`).

    Rows ``a_i ~ N(0, I_d)``, ``y_i = a_i^T x_true`` plus, on a fraction ``outliers`` of the
    rows, ``outlier_scale * scale * N(0, 1)``. Heterogeneity: linear terms with
    ``zeta2 = zeta^2`` exactly (``shards=False``, shared data), or per-worker data shards
    with their own ``x_true_k`` and covariate shift (``shards=True``; ``zeta2`` is then the
    upper bound ``G^2 mean_k min(mean_i ||a_{k,i}||, ||A_k||_2/sqrt(n))^2`` and ``zeta``
    must be 0). ``x0 = 0``. Takes the keywords of :class:`~theory.problems.args.ProblemArgs`
    (``K`` required) and of :class:`DataOptions`.
    """
    a, o, rng, sigma2 = _data_arguments(kw, "robust_regression")
    if not 0 <= outliers <= 1:
        raise ParameterError("outliers", outliers, "[0, 1]")
    A, x_true, y = _planted_design(rng, a, o)
    mask = rng.random(y.shape) < outliers
    y = y + mask * outlier_scale * scale * rng.standard_normal(y.shape)
    realisable = not mask.any()
    exact = {
        "L": "exact" if realisable else "upper bound",
        "f_star": "exact" if realisable and not o.shards else "lower bound",
    }
    prob = RobustRegressionProblem(
        name="robust_regression",
        exactness=exact,
        loss=loss,
        scale=scale,
        **_data_keywords(a, o, rng, A, y, sigma2),
    )
    if not o.shards:
        prob.info["_x_true"] = x_true
    prob.info.update({"outliers": float(outliers), "realisable": realisable})
    return prob


def make_logistic(
    *,
    lam: float = 0.1,
    label_noise: float = 0.1,
    **kw: Any,
) -> LogisticProblem:
    """Logistic regression with nonconvex regulariser (see :class:`LogisticProblem`).

    Rows ``a_i ~ N(0, I_d)`` (plus a per-worker mean with ``shards``), labels
    ``sign(a_i^T x_true)`` flipped with probability ``label_noise``. Heterogeneity as in
    :func:`make_robust_regression`. ``x0 = 0``. Takes the keywords of
    :class:`~theory.problems.args.ProblemArgs` (``K`` required) and of :class:`DataOptions`.
    """
    a, o, rng, sigma2 = _data_arguments(kw, "logistic")
    if not 0 <= label_noise <= 1:
        raise ParameterError("label_noise", label_noise, "[0, 1]")
    A, _, m = _planted_design(rng, a, o)
    y = np.where(m >= 0, 1.0, -1.0)
    y = np.where(rng.random(y.shape) < label_noise, -y, y)
    return LogisticProblem(
        name="logistic",
        exactness={"f_star": "lower bound"},
        lam=lam,
        **_data_keywords(a, o, rng, A, y, sigma2),
    )

"""Separable nonconvex cosine problems and certified 1-D global minimisation."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import optimize

from core.errors import UserInputError
from theory.problems.args import (
    ProblemArgs,
    center_and_scale,
    centred_shifts,
    finite_sum_args,
    no_extra,
    offset_finite_sum,
    sigma2_arg,
)
from theory.problems.base import Array, Problem


def minimize_1d_global(
    phi: Callable[[Array], Array], lo: float, hi: float, L: float, h: float | None = None
) -> tuple[float, float]:
    """Global minimum of an ``L``-smooth function on ``[lo, hi]``: ``(t_min, phi_min)``.

    A grid of spacing ``h`` is within ``L h^2 / 8`` of the minimum (at an interior
    minimiser the gradient vanishes, so ``phi(t* + s) <= phi(t*) + L s^2 / 2`` for
    ``|s| <= h/2``); every grid local minimum is then refined with bounded Brent. The
    result is within ``L h^2 / 8`` of the true minimum before refinement and, in practice,
    at machine precision after it.
    """
    if h is None:
        h = min((hi - lo) / 1000.0, 1e-3 / math.sqrt(L)) if hi > lo else 1.0
    n = max(3, int(math.ceil((hi - lo) / h)) + 1)
    t = np.linspace(lo, hi, n)
    v = phi(t)
    best_t, best_v = float(t[np.argmin(v)]), float(v.min())
    loc = np.flatnonzero((v[1:-1] <= v[:-2]) & (v[1:-1] <= v[2:])) + 1
    step = t[1] - t[0]
    for i in loc:
        a, b = max(lo, t[i] - step), min(hi, t[i] + step)
        res = optimize.minimize_scalar(
            lambda s: float(phi(np.array([s]))[0]),
            bounds=(a, b),
            method="bounded",
            options={"xatol": 1e-13},
        )
        if res.fun < best_v:
            best_t, best_v = float(res.x), float(res.fun)
    return best_t, best_v


class CosineProblem(Problem):
    """``f_k(x) = sum_i [x_i^2/2 + c cos(w x_i)] + <s_k, x>``, ``mean_k s_k = 0``.

    Exact constants: the Hessian is ``diag(1 - c w^2 cos(w x_i))`` for every ``k``, so
    ``L = 1 + |c| w^2`` (attained where ``cos(w x_i) = -sign(c)``); nonconvex iff
    ``|c| w^2 > 1``. ``grad f_k - grad f = s_k`` gives ``zeta2 = mean_k ||s_k||^2``;
    ``f_star = d min_t phi(t)`` with ``phi(t) = t^2/2 + c cos(w t)``, computed by
    :func:`minimize_1d_global` on ``[0, 2 sqrt(max(c, 0))]`` (``phi`` is even and
    ``phi(t) >= t^2/2 - |c| > phi(0)`` beyond that interval). Finite sums use per-sample
    linear terms ``f_{k,i} = f_k + <e_{k,i}, x>`` (state-independent error, exact sigma2).
    """

    separable = True

    def __init__(
        self,
        *,
        K: int,
        d: int,
        c: float,
        w: float,
        shifts: Array,
        noise: str = "gaussian",
        sigma2: float = 1.0,
        x0: Array | None = None,
        offsets: Array | None = None,
        batch: int = 1,
        name: str = "cosine",
    ) -> None:
        if not (math.isfinite(c) and math.isfinite(w) and w > 0):
            raise UserInputError(f"cosine needs finite c and w > 0, got c={c}, w={w}")
        self.c, self.w = float(c), float(w)
        self.shifts = centred_shifts(shifts, K, d)
        L = 1.0 + abs(self.c) * self.w**2
        hi = 2.0 * math.sqrt(max(self.c, 0.0))
        t_min, phi_min = minimize_1d_global(self.phi, 0.0, hi, L) if hi > 0 else (0.0, self.c)
        self.t_min, self.phi_min = t_min, phi_min
        zeta2 = float(np.mean(np.sum(self.shifts**2, axis=-1)))
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=L,
            sigma2=0.0 if noise == "none" else sigma2,
            zeta2=zeta2,
            f_star=d * phi_min,
            noise=noise,
            x0=x0,
        )
        self.info.update({"c": self.c, "w": self.w, "t_min": t_min, "nonconvex": c * w * w > 1})
        if noise == "finite_sum":
            self.info["_offsets"] = np.asarray(offsets, dtype=float)
            self.info["batch"] = int(batch)
            self.info["n_samples"] = int(self.info["_offsets"].shape[1])

    def phi(self, t: Array) -> Array:
        """The 1-D summand ``t^2/2 + c cos(w t)``."""
        return 0.5 * t * t + self.c * np.cos(self.w * t)

    def local_fs(self, X: Array) -> Array:
        X = np.asarray(X, dtype=float)
        return np.sum(self.phi(X), axis=-1) + np.sum(X * self.shifts, axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        if out is None:
            out = np.empty(np.broadcast_shapes(X.shape, self.shifts.shape))
        np.multiply(X, self.w, out=out)
        np.sin(out, out=out)
        out *= -self.c * self.w
        out += X
        out += self.shifts
        return out

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.multiply(Xb, self.w, out=out)
        np.sin(out, out=out)
        out *= -self.c * self.w
        out += Xb
        out += self.shifts[:, lo:hi]
        return out

    def f(self, x: Array) -> Array:
        return np.sum(self.phi(np.asarray(x, dtype=float)), axis=-1)

    def grad(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        return x - self.c * self.w * np.sin(self.w * x)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        # half-way points of the curvature extremes: cos(w x) = -sign(c) attains L
        pts[0] = (math.pi if self.c >= 0 else 0.0) / self.w
        pts[1] = self.t_min
        return pts


def make_cosine(
    *,
    c: float = 0.5,
    w: float = 2.0,
    x0_value: float = 3.0,
    **kw: Any,
) -> CosineProblem:
    """Separable nonconvex ``sum_i x_i^2/2 + c cos(w x_i)`` + per-worker linear terms (all exact).

    Defaults ``c = 0.5, w = 2``: ``L = 3``, curvature in ``[-1, 3]``. ``x0 = x0_value * 1``.
    ``zeta2 = zeta^2`` and ``sigma2 = sigma^2`` exactly (see :class:`CosineProblem`).
    Takes the keywords of :class:`~theory.problems.args.ProblemArgs` (``K`` required).
    """
    a = ProblemArgs.take(kw)
    K, d, noise, zeta = a.K, a.d, a.noise, a.zeta
    rng = a.rng()
    sigma2 = sigma2_arg(noise, a.sigma)
    n_s, batch = finite_sum_args(kw) if noise == "finite_sum" else (0, 1)
    no_extra(kw, "cosine")
    shifts = center_and_scale(rng.standard_normal((K, d)), zeta * zeta, "zeta")
    offsets = None
    if noise == "finite_sum":
        offsets = offset_finite_sum(rng.standard_normal((K, n_s, d)), sigma2, batch)
    return CosineProblem(
        K=K,
        d=d,
        c=c,
        w=w,
        shifts=shifts,
        noise=noise,
        sigma2=sigma2,
        x0=np.full(d, float(x0_value)),
        offsets=offsets,
        batch=batch,
    )

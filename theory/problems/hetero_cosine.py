"""A nonconvex family whose workers have different curvatures: per-worker quadratics plus a
common cosine, ``f_k(x) = sum_i [l_{k,i} (x_i - m_{k,i})^2/2 + c cos(w x_i)]``.

The quadratic parts are those of :class:`~theory.problems.hessians.HeteroHessianQuadratic`
(so Local SGD's drift does not cancel), the cosine makes ``f`` nonconvex when
``c w^2 > min_i lbar_i``. Constants (exact):

* ``L = max_{k,i} l_{k,i} + |c| w^2``;
* ``grad f_k - grad f`` is that of the quadratic parts (the cosine is common): the declared
  ``zeta2`` is its supremum over the same region, ``zeta2_star`` its value at the minimiser
  ``xq`` of the quadratic part;
* ``f = sum_i [lbar_i (x_i - xq_i)^2/2 + c cos(w x_i)] + fq_star`` is separable; each
  coordinate's global minimum lies within ``|x_i - xq_i| <= 2 sqrt(|c|/lbar_i)`` (beyond it
  the quadratic exceeds the cosine's range ``2|c|``) and is found by
  :func:`~theory.problems.cosine.minimize_1d_global`, so ``f_star`` is exact.
"""

from __future__ import annotations

import math

import numpy as np

from core.validation import ParameterError
from theory.problems.base import Array, into
from theory.problems.cosine import minimize_1d_global
from theory.problems.hessians import HeteroHessianQuadratic, make_hetero_hessian, with_zeta

__all__ = ["HeteroCosine", "make_hetero_cosine"]


class HeteroCosine(HeteroHessianQuadratic):
    """:class:`HeteroHessianQuadratic` plus the common ``c sum_i cos(w x_i)`` (see the module
    docstring)."""

    def __init__(self, *, c: float = 0.5, w: float = 2.0, **kw) -> None:
        if not (math.isfinite(c) and math.isfinite(w) and w > 0):
            raise ParameterError("w", w, "(0, inf) with a finite c")
        self.c, self.w = float(c), float(w)
        super().__init__(**kw)
        quad_star = self.f_star
        L_q = self.L
        self.L = L_q + abs(self.c) * self.w**2
        f_min = quad_star
        self.x_min = self.x_star.copy()
        for i in range(self.d):
            lb, xq = float(self.lbar[i]), float(self.x_star[i])

            def phi(t, lb=lb, xq=xq):
                return 0.5 * lb * (t - xq) ** 2 + self.c * np.cos(self.w * t)

            r = 2.0 * math.sqrt(abs(self.c) / lb) + 1e-9 if lb > 0 else 0.0
            if r == 0.0:
                t, v = xq, -abs(self.c)  # a flat coordinate: the cosine's minimum
            else:
                t, v = minimize_1d_global(phi, xq - r, xq + r, lb + abs(self.c) * self.w**2)
            self.x_min[i] = t
            f_min += v
        self.f_star = float(f_min)
        self.name = kw.get("name", "hetero_cosine")
        self.info.update({"c": self.c, "w": self.w})

    def local_fs(self, X: Array) -> Array:
        X = np.asarray(X, dtype=float)
        return super().local_fs(X) + self.c * np.sum(np.cos(self.w * X), axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        res = self.eigenvalues * (X - self.minimisers) - self.c * self.w * np.sin(self.w * X)
        return into(out, res)

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.subtract(Xb, self.minimisers[:, lo:hi], out=out)
        out *= self.eigenvalues[:, lo:hi]
        out -= self.c * self.w * np.sin(self.w * Xb)
        return out

    def grad(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        return self.lbar * (x - self.x_star) - self.c * self.w * np.sin(self.w * x)

    def f(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        D = x - self.x_star
        quad = 0.5 * np.sum(self.lbar * D * D, axis=-1) + self._quad_star()
        return quad + self.c * np.sum(np.cos(self.w * x), axis=-1)

    def _quad_star(self) -> float:
        return float(np.mean(0.5 * np.sum(self.eigenvalues * self.delta**2, axis=1)))


def make_hetero_cosine(
    *,
    K: int = 4,
    d: int = 2,
    L: float = 1.0,
    lam_min: float = 0.1,
    zeta: float = 1.0,
    sigma: float = 1.0,
    F0: float = 1.0,
    c: float = 0.5,
    w: float = 2.0,
    seed: int = 0,
) -> HeteroCosine:
    """The quadratic parts of :func:`~theory.problems.hessians.make_hetero_hessian` (the same
    ``K, d, L, lam_min, zeta, sigma, F0, seed``; here ``L`` is the largest curvature of the
    quadratic parts and ``zeta`` their heterogeneity at their minimiser) plus the cosine
    ``c cos(w x_i)``. The start is the quadratic family's ``x0``."""
    q = make_hetero_hessian(
        K=K, d=d, L=L, lam_min=lam_min, zeta=max(zeta, 1e-12), sigma=sigma, F0=F0, seed=seed
    )
    if zeta == 0:
        q = with_zeta(q, 0.0)
    return HeteroCosine(
        c=c, w=w, eigenvalues=q.eigenvalues, minimisers=q.minimisers, x0=q.x0(),
        sigma2=q.sigma2, name="hetero_cosine",
    )  # fmt: skip

"""Quadratics whose workers have different (diagonal) Hessians: Local SGD's drift does not cancel.

``f_k(x) = 1/2 sum_i l_{k,i} (x_i - m_{k,i})^2``. On quadratics that share one Hessian the
mean of the workers under Local SGD follows minibatch SGD exactly, so heterogeneity costs
nothing there; with per-worker Hessians the local steps drift towards each worker's own
minimiser at its own rate and the mean of the workers stops short of the minimiser ``x*`` of
``f`` (a biased fixed point). Exact moments: :mod:`theory.compare.pairs`.

Constants (all exact):

* ``L = max_{k,i} l_{k,i}`` (every ``f_k`` is ``L``-smooth);
* ``x*_i = sum_k l_{k,i} m_{k,i} / sum_k l_{k,i}`` (``x0_i`` where every ``l_{k,i} = 0``),
  ``f_star = f(x*)``, ``F0 = f(x0) - f_star``;
* ``sigma2``: isotropic Gaussian noise, per-coordinate variance ``sigma2/d``;
* heterogeneity: ``grad f_k(x) - grad f(x) = (l_k - lbar) (x - x*) - l_k (m_k - x*)``
  grows with ``|x - x*|`` when the Hessians differ, so A3 holds on bounded regions only.
  ``zeta2_star`` is its value at ``x*``; :meth:`HeteroHessianQuadratic.zeta2_on_box` its
  supremum over the box ``|x_i - x*_i| <= rho_i`` (per coordinate a convex quadratic in
  ``x_i``, maximised at a corner). The declared ``zeta2`` is that supremum over the box of
  :meth:`HeteroHessianQuadratic.region` (radius ``|x0 - x*| + max_k |m_k - x*|`` per
  coordinate), and ``exactness['zeta2']`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.files import read_mapping_file, resolve_input_path
from core.validation import ParameterError
from theory.problems.base import Array, Problem, into

__all__ = [
    "HeteroHessianQuadratic",
    "make_hetero_hessian",
    "load_hetero_hessian",
    "hetero_hessian_from",
    "with_zeta",
]

_REGION = "on the box |x_i - x*_i| <= |x0_i - x*_i| + max_k |m_ki - x*_i| (A3 fails globally)"


def _matrix(value: Any, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise UserInputError(f"'{name}' must be numbers (a list of lists)") from None
    if shape is not None and arr.shape != shape:
        raise UserInputError(f"'{name}' must have shape {shape}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise UserInputError(f"'{name}' has NaN or infinite entries")
    return arr


class HeteroHessianQuadratic(Problem):
    """``f_k(x) = 1/2 sum_i l_{k,i} (x_i - m_{k,i})^2`` with additive Gaussian noise.

    ``eigenvalues``: ``(K, d)`` nonnegative curvatures ``l_{k,i}``; ``minimisers``:
    ``(K, d)`` the ``m_{k,i}``; ``x0``: ``(d,)`` start (zeros if omitted); ``sigma2``: the
    total noise variance ``E||g_k - grad f_k||^2`` of one gradient (isotropic).
    """

    separable = True

    def __init__(
        self,
        *,
        eigenvalues: Array,
        minimisers: Array,
        x0: Array | None = None,
        sigma2: float = 0.0,
        name: str = "hetero_hessian",
    ) -> None:
        lam = _matrix(eigenvalues, "eigenvalues")
        if lam.ndim != 2 or lam.shape[0] < 1 or lam.shape[1] < 1:
            raise UserInputError(
                f"'eigenvalues' must be K lists of d numbers (one list per worker), got shape "
                f"{lam.shape}"
            )
        if np.any(lam < 0):
            raise UserInputError("'eigenvalues' must be nonnegative (convex workers)")
        K, d = lam.shape
        m = _matrix(minimisers, "minimisers", (K, d))
        start = np.zeros(d) if x0 is None else _matrix(x0, "x0", (d,))
        if not (isinstance(sigma2, int | float) and math.isfinite(sigma2) and sigma2 >= 0):
            raise ParameterError("sigma2", sigma2, "[0, inf)", "total noise variance")
        self.eigenvalues, self.minimisers = lam, m
        self.lbar = lam.mean(axis=0)
        flat = self.lbar == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            xs = np.where(flat, start, (lam * m).sum(axis=0) / np.where(flat, 1.0, lam.sum(0)))
        self.x_star = xs
        self.delta = m - xs  # (K, d), sum_k l_k delta_k = 0
        f_star = float(np.mean(0.5 * np.sum(lam * self.delta**2, axis=1)))
        rho = self.region(start)
        super().__init__(
            name=name, K=K, d=d, L=float(lam.max()), sigma2=float(sigma2),
            zeta2=self.zeta2_on_box(rho), f_star=f_star,
            noise="gaussian" if sigma2 > 0 else "none", x0=start,
            exactness={"zeta2": _REGION},
        )  # fmt: skip
        self.info.update({"zeta2_star": self.zeta2_star, "lam_min": float(lam.min())})

    # ---- exact constants ----------------------------------------------------------------
    def region(self, x0: Array | None = None) -> np.ndarray:
        """Per-coordinate radius ``|x0 - x*| + max_k |m_k - x*|`` of the declared region."""
        x0 = self._x0 if x0 is None else x0
        return np.abs(x0 - self.x_star) + np.abs(self.delta).max(axis=0)

    @property
    def zeta2_star(self) -> float:
        """``(1/K) sum_k ||grad f_k(x*)||^2``: the heterogeneity at the optimum."""
        g = self.eigenvalues * self.delta
        return float(np.mean(np.sum(g * g, axis=1)))

    def zeta2_on_box(self, rho: Array) -> float:
        """``sup (1/K) sum_k ||grad f_k(x) - grad f(x)||^2`` over ``|x_i - x*_i| <= rho_i``."""
        dl = self.eigenvalues - self.lbar
        V = np.mean(dl * dl, axis=0)
        C = np.mean(dl * self.eigenvalues * self.delta, axis=0)
        Z = np.mean((self.eigenvalues * self.delta) ** 2, axis=0)
        rho = np.asarray(rho, dtype=float)
        return float(np.sum(V * rho**2 + 2 * np.abs(C) * rho + Z))

    # ---- functions ----------------------------------------------------------------------
    def local_fs(self, X: Array) -> Array:
        D = np.asarray(X, dtype=float) - self.minimisers
        return 0.5 * np.sum(self.eigenvalues * D * D, axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        res = self.eigenvalues * (np.asarray(X, dtype=float) - self.minimisers)
        return into(out, res)

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.subtract(Xb, self.minimisers[:, lo:hi], out=out)
        out *= self.eigenvalues[:, lo:hi]
        return out

    def grad(self, x: Array) -> Array:
        return self.lbar * (np.asarray(x, dtype=float) - self.x_star)

    def f(self, x: Array) -> Array:
        D = np.asarray(x, dtype=float) - self.x_star
        return 0.5 * np.sum(self.lbar * D * D, axis=-1) + self.f_star

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        """Points inside the declared region (where the declared ``zeta2`` holds)."""
        rho = self.region()
        pts = self.x_star + rho * rng.uniform(-1.0, 1.0, size=(n, self.d))
        pts[0] = self.x_star
        return pts

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["zeta2_star"] = self.zeta2_star
        return out


def make_hetero_hessian(
    *,
    K: int = 4,
    d: int = 2,
    L: float = 1.0,
    lam_min: float = 0.1,
    zeta: float = 1.0,
    sigma: float = 1.0,
    F0: float = 1.0,
    seed: int = 0,
) -> HeteroHessianQuadratic:
    """A generated :class:`HeteroHessianQuadratic` with exact constants.

    Curvatures log-uniform in ``[lam_min, L]`` per worker and coordinate, with the largest
    set to ``L`` exactly; minimisers scaled so that the heterogeneity at the optimum
    ``zeta2_star = zeta^2``; the start ``x0 = x* + t v`` (``v`` a random direction) with
    ``t`` chosen so that ``F0 = f(x0) - f_star`` exactly; noise variance ``sigma^2``.
    """
    for name, val, low in (("L", L, 0.0), ("lam_min", lam_min, 0.0)):
        if not (isinstance(val, int | float) and math.isfinite(val) and val > low):
            raise ParameterError(name, val, "(0, inf)")
    if lam_min > L:
        raise ParameterError("lam_min", lam_min, f"(0, L] = (0, {L}]")
    for name, val in (("zeta", zeta), ("sigma", sigma), ("F0", F0)):
        if not (isinstance(val, int | float) and math.isfinite(val) and val >= 0):
            raise ParameterError(name, val, "[0, inf)")
    if not (isinstance(K, int) and K >= 2):
        raise ParameterError("K", K, "integer in [2, inf)", "heterogeneity needs two workers")
    if not (isinstance(d, int) and d >= 1):
        raise ParameterError("d", d, "integer in [1, inf)")
    rng = np.random.default_rng(seed)
    lam = np.exp(rng.uniform(math.log(lam_min), math.log(L), size=(K, d)))
    lam.flat[int(np.argmax(lam))] = L
    u = rng.standard_normal((K, d))
    base = HeteroHessianQuadratic(eigenvalues=lam, minimisers=u)
    scale = zeta / math.sqrt(base.zeta2_star) if zeta > 0 else 0.0
    m = base.x_star + scale * (u - base.x_star)
    v = rng.standard_normal(d)
    curv = 0.5 * float(np.sum(lam.mean(axis=0) * v * v))
    x_star = base.x_star  # unchanged by the scaling about x*
    x0 = x_star + math.sqrt(F0 / curv) * v
    return HeteroHessianQuadratic(eigenvalues=lam, minimisers=m, x0=x0, sigma2=float(sigma) ** 2)


def load_hetero_hessian(path: Any) -> HeteroHessianQuadratic:
    """A :class:`HeteroHessianQuadratic` from a YAML/JSON problem file.

    Keys: ``eigenvalues`` (``K`` lists of ``d`` numbers: worker ``k``'s diagonal Hessian),
    ``minimisers`` (``K`` lists of ``d`` numbers), ``x0`` (``d`` numbers, default zeros),
    ``sigma2`` (total gradient-noise variance, isotropic; default 0). Any other key is
    refused by name.
    """
    path = resolve_input_path(path, "--problem")
    data = read_mapping_file(path, "problem file")
    return hetero_hessian_from(data, f"problem file '{path}'")


def hetero_hessian_from(data: Mapping[str, Any], where: str) -> HeteroHessianQuadratic:
    """:func:`load_hetero_hessian` from a mapping already read (``where`` names it)."""
    known = {"eigenvalues", "minimisers", "x0", "sigma2", "name"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserInputError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
    for key in ("eigenvalues", "minimisers"):
        if key not in data:
            raise UserInputError(f"{where}: missing key '{key}'")
    try:
        return HeteroHessianQuadratic(
            eigenvalues=data["eigenvalues"], minimisers=data["minimisers"],
            x0=data.get("x0"), sigma2=data.get("sigma2", 0.0),
            name=str(data.get("name", "hetero_hessian")),
        )  # fmt: skip
    except UserInputError as exc:
        raise UserInputError(f"{where}: {exc}") from None


def with_zeta(problem: HeteroHessianQuadratic, zeta: float) -> HeteroHessianQuadratic:
    """``problem`` with the minimisers moved about ``x*`` so that ``zeta2_star = zeta^2``.

    The scaling ``m_k <- x* + s (m_k - x*)`` keeps ``x*``, the curvatures, the start, the
    noise and ``F0 = sum_i lbar_i (x0_i - x*_i)^2 / 2``; only the heterogeneity changes.
    """
    if not (isinstance(zeta, int | float) and math.isfinite(zeta) and zeta >= 0):
        raise ParameterError("zeta", zeta, "[0, inf)")
    now = problem.zeta2_star
    if now == 0 and zeta > 0:
        raise UserInputError(
            "the problem's workers share one minimiser (zeta_star = 0): its heterogeneity "
            "cannot be scaled to zeta > 0"
        )
    s = 0.0 if zeta == 0 else zeta / math.sqrt(now)
    return HeteroHessianQuadratic(
        eigenvalues=problem.eigenvalues,
        minimisers=problem.x_star + s * problem.delta,
        x0=problem.x0(),
        sigma2=problem.sigma2,
        name=problem.name,
    )

"""Heterogeneous quadratics ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)`` (every constant exact)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError
from theory.problems.args import (
    ProblemArgs,
    finite_sum_args,
    no_extra,
    offset_finite_sum,
    sigma2_arg,
)
from theory.problems.base import Array, Problem, into
from theory.validation import validate


class QuadraticProblem(Problem):
    """``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``, ``A = Q diag(lam) Q^T`` (``Q = I`` unless rotated).

    Exact constants: ``L = max lam``; ``grad f_k - grad f = A (bbar - b_k)`` does not depend
    on ``x``, so ``zeta2 = (1/K) sum_k ||A (b_k - bbar)||^2``; ``f`` is minimised at ``bbar``
    with ``f_star = (1/(2K)) sum_k (b_k - bbar)^T A (b_k - bbar)``. Finite sums use
    per-sample centres ``b_{k,i}`` (mean ``b_k``): a sample's gradient is
    ``A (x - b_{k,i})``, so the sampling error ``A (b_k - b_{k,i})`` is state-independent
    and ``sigma2`` is exact. Additive noise is isotropic, hence the same in every basis.
    """

    def __init__(
        self,
        *,
        K: int,
        d: int,
        eigenvalues: Array,
        b: Array,
        rotation: Array | None = None,
        noise: str = "gaussian",
        sigma2: float = 1.0,
        x0: Array | None = None,
        sample_centres: Array | None = None,
        batch: int = 1,
        name: str = "quadratic",
    ) -> None:
        lam = np.asarray(eigenvalues, dtype=float)
        if lam.shape != (d,) or np.any(lam < 0) or not np.all(np.isfinite(lam)):
            raise UserInputError(f"eigenvalues must be {d} finite nonnegative numbers")
        b = np.asarray(b, dtype=float)
        if b.shape != (K, d):
            raise UserInputError(f"b must have shape ({K}, {d}), got {b.shape}")
        self.eigenvalues, self.b = lam, b
        self.bbar = b.mean(axis=0)
        self.rotation = None if rotation is None else np.asarray(rotation, dtype=float)
        if self.rotation is not None:
            self.A = (self.rotation * lam) @ self.rotation.T
            self.A = 0.5 * (self.A + self.A.T)
        else:
            self.A = None
        dev = self._apply_A(b - self.bbar)
        zeta2 = float(np.mean(np.sum(dev * dev, axis=-1)))
        f_star = 0.5 * float(np.mean(np.sum((b - self.bbar) * dev, axis=-1)))
        self._f_min = f_star
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=float(lam.max()),
            sigma2=0.0 if noise == "none" else sigma2,
            zeta2=zeta2,
            f_star=f_star,
            noise=noise,
            x0=x0,
        )
        self.separable = self.rotation is None
        self.info.update({"lam_min": float(lam.min()), "lam_max": float(lam.max())})
        if noise == "finite_sum":
            if sample_centres is None:
                raise UserInputError("finite_sum quadratics need sample_centres (K, n, d)")
            self.sample_centres = np.asarray(sample_centres, dtype=float)
            self.info["_offsets"] = self._apply_A(self.b[:, None, :] - self.sample_centres)
            self.info["batch"] = int(batch)
            self.info["n_samples"] = int(self.sample_centres.shape[1])

    def _apply_A(self, V: Array) -> Array:
        return V * self.eigenvalues if self.A is None else V @ self.A

    def local_fs(self, X: Array) -> Array:
        D = np.asarray(X, dtype=float) - self.b
        return 0.5 * np.sum(D * self._apply_A(D), axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        if self.A is not None:
            res = (X - self.b) @ self.A
            return into(out, res)
        if out is None:
            out = np.empty(np.broadcast_shapes(X.shape, self.b.shape))
        np.subtract(X, self.b, out=out)
        out *= self.eigenvalues
        return out

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.subtract(Xb, self.b[:, lo:hi], out=out)
        out *= self.eigenvalues[lo:hi]
        return out

    def f(self, x: Array) -> Array:
        D = np.asarray(x, dtype=float) - self.bbar
        return 0.5 * np.sum(D * self._apply_A(D), axis=-1) + self._f_min

    def grad(self, x: Array) -> Array:
        return self._apply_A(np.asarray(x, dtype=float) - self.bbar)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        pts[0] = self.bbar
        return pts


def make_quadratic(
    *,
    L: float = 1.0,
    lam_min: float = 0.01,
    spectrum: str | Sequence[float] = "linear",
    rotate: bool = False,
    center_scale: float = 1.0,
    x0: Array | None = None,
    **kw: Any,
) -> QuadraticProblem:
    """Heterogeneous quadratic (see :class:`QuadraticProblem`); every constant is exact.

    ``spectrum``: ``"linear"`` (``lam`` evenly spaced in ``[lam_min, L]``), ``"geometric"``,
    or explicit eigenvalues (then ``L`` is their maximum). ``rotate=True`` uses a random
    orthogonal eigenbasis (dense ``A``). ``bbar ~ N(0, center_scale^2 I)``, ``x0 = 0``;
    ``b_k = bbar + u_k`` with ``u_k`` scaled so that ``zeta2 = zeta^2`` exactly. Finite sums
    (``n_samples``, ``batch``) are scaled so that ``sigma2 = sigma^2`` exactly. Takes the
    keywords of :class:`~theory.problems.args.ProblemArgs` (``K`` required).
    """
    a = ProblemArgs.take(kw)
    K, d, noise, zeta = a.K, a.d, a.noise, a.zeta
    rng = a.rng()
    sigma2 = sigma2_arg(noise, a.sigma)
    n_s, batch = finite_sum_args(kw) if noise == "finite_sum" else (0, 1)
    no_extra(kw, "quadratic")
    validate(L=L)
    lam = _spectrum(spectrum, d, L, lam_min)
    Q = None
    if rotate:
        if d > 4000:
            raise UserInputError("rotate=True builds a dense d x d matrix: use d <= 4000")
        Q, r = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(r))
    A = None if Q is None else (Q * lam) @ Q.T

    def apply_A(V: Array) -> Array:
        return V * lam if A is None else V @ A

    bbar = center_scale * rng.standard_normal(d)
    u = rng.standard_normal((K, d))
    u = u - u.mean(axis=0)
    Au = apply_A(u)
    cur = float(np.mean(np.sum(Au * Au, axis=-1)))
    if zeta > 0 and cur == 0:
        raise UserInputError("zeta > 0 needs at least K = 2 workers (K = 1 has no heterogeneity)")
    b = bbar + (u * (zeta / math.sqrt(cur)) if zeta > 0 else 0.0 * u)
    centres = None
    if noise == "finite_sum":
        raw = rng.standard_normal((K, n_s, d))
        centres = b[:, None, :] + offset_finite_sum(raw, sigma2, batch, apply_A)
    return QuadraticProblem(
        K=K,
        d=d,
        eigenvalues=lam,
        b=b,
        rotation=Q,
        noise=noise,
        sigma2=sigma2,
        x0=x0,
        sample_centres=centres,
        batch=batch,
    )


def _spectrum(spectrum: str | Sequence[float], d: int, L: float, lam_min: float) -> Array:
    """The eigenvalues of :func:`make_quadratic`: ``"linear"``, ``"geometric"`` in
    ``[lam_min, L]``, or the ``d`` values given."""
    if isinstance(spectrum, str):
        if spectrum == "linear":
            lam = np.linspace(lam_min, L, d) if d > 1 else np.array([L])
        elif spectrum == "geometric":
            if lam_min <= 0:
                raise ParameterError("lam_min", lam_min, "(0, L]", "geometric spectrum")
            lam = np.geomspace(lam_min, L, d) if d > 1 else np.array([L])
        else:
            raise UserInputError(
                f"unknown spectrum {spectrum!r}: 'linear', 'geometric' or a list of eigenvalues"
            )
        if not 0 <= lam_min <= L:
            raise ParameterError("lam_min", lam_min, f"[0, L] = [0, {L}]")
    else:
        lam = np.asarray(spectrum, dtype=float)
        if lam.shape != (d,):
            raise UserInputError(f"spectrum must list d = {d} eigenvalues, got shape {lam.shape}")
    return lam

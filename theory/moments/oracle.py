"""Exact moments on heterogeneous quadratics by round transfer maps (the fast exact oracle).

Same problem class and algorithms as :mod:`theory.moments.exact` (``f_k(x) = 1/2 (x - b_k)^T A
(x - b_k)``, additive noise; minibatch SGD, Local SGD, Post-Local SGD, DiLoCo, PALSGD with
independent or shared coins, outer averaging / SGD / Nesterov, warm-up ``T0``,
``sync_offset``, ``outer_steps_per_sync``), but instead of the ``(K+3) x (K+3)`` second-moment
matrix propagated step by step it uses two facts:

1. **Workers are exchangeable up to their offsets.** Within a round the anchor ``z`` is
   frozen and every worker starts at ``z``. Along an eigendirection (eigenvalue ``lam``),
   in coordinates shifted by ``x* = bbar``, worker ``k`` after ``j`` local steps is
   ``y_k = A_j z + B_j delta_k + N_j`` where ``(A_j, B_j)`` are random functions of the
   worker's coin path only (``A_0 = 1``, ``B_0 = 0``; step ``A <- s A + c``,
   ``B <- s B + d`` with the branch's scale ``s``, pull ``c`` and drift ``d``, see
   :func:`theory.moments.branches.local_step_branches`) and ``N_j`` is the accumulated noise. The
   coin paths are independent of ``z``; with independent coins they are i.i.d. across
   workers, with shared coins they are one path. Because ``sum_k delta_k = 0``,
   every cross term between the anchor part and the offset part of the workers' mean
   vanishes, and

       E ybar_j^2 = E[Abar_j^2] E z^2 + Var(B_j) Q / K + n_j s2 / K        (independent)
       E ybar_j^2 = E[A_j^2]   E z^2 +                n_j s2 / K        (shared)

   with ``E[Abar_j^2] = (E A_j)^2 + Var(A_j)/K``, ``Q = (1/K) sum_k delta_k^2``,
   ``s2 = (1/K) sum_k s2_k`` the mean noise variance and ``n_j`` the noise factor. These
   moments follow a linear recursion in ``j`` (:mod:`theory.moments.rounds`) that does
   not involve ``K``: the cost is ``O(H d)``, whatever ``K``.
2. **A round is a fixed affine map** of the anchor moments ``v = (E z^2, E z buf, E buf^2,
   E z, E buf, 1)`` (outer step on ``Delta = z - ybar_H``, then restart), and the round's
   sum of ``E||grad f(xbar_t)||^2`` is linear in ``v``. ``R`` rounds are one matrix power
   of the augmented ``7 x 7`` map per direction (repeated squaring, ``O(log R)``).

The quantity returned, ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` (the state recorded before
each step, as :func:`theory.moments.exact.exact_moments` records it), is therefore exact and
costs ``O(H d + d log(T/H))``. ``curves=True`` also returns the per-step curves (one pass
over the rounds). ``tests/test_round_moments.py`` checks the result against the step-by-step
recursion of :mod:`theory.moments.exact` and against brute-force enumeration of the coins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.algorithm import AlgorithmSpec
from theory.moments.inputs import as_eig, check_x0
from theory.moments.rounds import (
    A1,
    NV,
    ONE,
    Z1,
    Z2,
    minibatch_matrix,
    outer_coefficients,
    round_map,
    round_rows,
    start_state,
    step_matrix,
    with_accumulators,
)
from theory.moments.spec import local_start, moment_spec
from theory.validation import validate_one

__all__ = ["Directions", "OracleResult", "directions_of", "exact_oracle", "oracle_on"]


@dataclass(frozen=True)
class Directions:
    """A quadratic reduced to what the exact moments depend on, per eigendirection.

    ``lam`` eigenvalues (d,), ``y0`` start minus ``x*`` (d,), ``s2`` mean noise variance
    per worker and step (d,), ``Q`` mean squared heterogeneity offset ``(1/K) sum_k
    delta_k^2`` (d,), ``K`` workers. Then ``L = max lam``, ``sigma^2 = sum s2``,
    ``zeta^2 = sum lam^2 Q``, ``F0 = sum lam y0^2 / 2``.
    """

    lam: np.ndarray
    y0: np.ndarray
    s2: np.ndarray
    Q: np.ndarray
    K: int

    def constants(self) -> dict[str, float]:
        """``L, sigma2, zeta2, F0`` of this quadratic (exact)."""
        return {
            "L": float(np.max(self.lam)),
            "sigma2": float(np.sum(self.s2)),
            "zeta2": float(np.sum(self.lam**2 * self.Q)),
            "F0": float(0.5 * np.sum(self.lam * self.y0**2)),
        }


def directions_of(problem: Any, x0: Any = None) -> Directions:
    """:class:`Directions` of any quadratic :func:`theory.moments.exact.exact_moments` accepts."""
    prob = as_eig(problem)
    K, d = prob.b.shape
    bbar = prob.b.mean(axis=0)
    delta = prob.to_eig(prob.b - bbar)  # (K, d)
    start = prob.x0 if x0 is None else check_x0(x0, d)
    return Directions(
        lam=np.asarray(prob.lam, dtype=float),
        y0=prob.to_eig(start - bbar),
        s2=np.asarray(prob.s2, dtype=float).mean(axis=1),
        Q=np.mean(delta**2, axis=0),
        K=int(K),
    )


@dataclass
class OracleResult:
    """Exact time averages of one run (state recorded before each of the ``T`` steps).

    ``mean_grad_norm_sq = (1/T) sum_t E||grad f(xbar_t)||^2`` (what the nonconvex bounds
    control), ``mean_consensus = (1/T) sum_t E (1/K) sum_k ||x_k - xbar||^2``,
    ``final_grad_norm_sq`` after the last step, ``initial_grad_norm_sq = ||grad f(x0)||^2``,
    ``diverged`` when a moment overflowed. ``grad_norm_sq`` / ``consensus``: per-step curves
    when asked for (``curves=True``), else empty.
    """

    mean_grad_norm_sq: float
    mean_consensus: float
    final_grad_norm_sq: float
    initial_grad_norm_sq: float
    diverged: bool
    grad_norm_sq: np.ndarray = field(default_factory=lambda: np.zeros(0))
    consensus: np.ndarray = field(default_factory=lambda: np.zeros(0))


def exact_oracle(
    problem: Any, spec: Any, *, T: int, x0: Any = None, curves: bool = False
) -> OracleResult:
    """Exact ``(1/T) sum_t E||grad f(xbar_t)||^2`` of ``spec`` on the quadratic ``problem``.

    Accepts the same ``problem`` and ``spec`` as :func:`theory.moments.exact.exact_moments`
    and agrees with it to rounding; cost ``O(H d + d log(T/H))`` instead of
    ``O(T d K^2)``.
    """
    return oracle_on(directions_of(problem, x0), spec, T=T, curves=curves)


def oracle_on(dirs: Directions, spec: Any, *, T: int, curves: bool = False) -> OracleResult:
    """:func:`exact_oracle` on a reduced quadratic (see :class:`Directions`)."""
    validate_one("T", T)
    algo = moment_spec(spec)
    if algo.sync_delay:
        raise UserInputError(
            f"sync_delay = {algo.sync_delay}: the round-map oracle has no overlapped sync; "
            "theory.moments.exact_moments computes its exact moments step by step"
        )
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return _Run(dirs, algo, int(T), curves).result()


# ----------------------------------------------------------------------------- engine


class _Run:
    """One evaluation: the warm-up phase, then the rounds of the local phase."""

    def __init__(self, dirs: Directions, algo: AlgorithmSpec, T: int, curves: bool):
        self.d, self.a, self.T, self.curves = dirs, algo, T, curves
        self.lam2 = dirs.lam**2
        self.g_sum = np.zeros_like(dirs.lam)  # per direction sum of E (lam ybar)^2
        self.c_sum = np.zeros_like(dirs.lam)
        self.g_curve: list[np.ndarray] = []
        self.c_curve: list[np.ndarray] = []

    def result(self) -> OracleResult:
        d, T, a = self.d, self.T, self.a
        start = local_start(a)
        T0 = T if math.isinf(start) else min(int(start), T)
        m = self._warmup(T0)  # (E y^2, E y) per direction after T0 minibatch steps
        final = self.lam2 * m[0]
        if T > T0:
            v = np.zeros((NV, d.lam.size))
            v[Z2], v[Z1], v[ONE] = m[0], m[1], 1.0
            final = self._local(v, T - T0)
        g, c = float(np.sum(self.g_sum)) / T, float(np.sum(self.c_sum)) / T
        fin = float(np.sum(final))
        return OracleResult(
            mean_grad_norm_sq=g,
            mean_consensus=max(c, 0.0),
            final_grad_norm_sq=fin,
            initial_grad_norm_sq=float(np.sum(self.lam2 * d.y0**2)),
            diverged=not all(math.isfinite(x) for x in (g, c, fin)),
            grad_norm_sq=np.concatenate(self.g_curve) if self.curves else np.zeros(0),
            consensus=np.concatenate(self.c_curve) if self.curves else np.zeros(0),
        )

    # ------------------------------------------------------------------ warm-up
    def _warmup(self, n: int) -> np.ndarray:
        """``n`` minibatch-SGD steps ``y <- (1 - alpha lam) y - alpha mean_k xi_k``."""
        d = self.d
        m = np.stack([d.y0**2, d.y0, np.ones_like(d.y0)])
        if n == 0:
            return m
        P = minibatch_matrix(d.lam, d.s2, d.K, self.a.alpha)  # (D, 4, 4): E y^2, E y, 1, acc
        if self.curves:
            g, cur = np.empty((n, d.lam.size)), m
            for t in range(n):
                g[t] = self.lam2 * cur[0]
                cur = np.einsum("dij,jd->id", P[:, :3, :3], cur)
            self.g_sum += g.sum(axis=0)
            self.g_curve.append(g.sum(axis=1))
            self.c_curve.append(np.zeros(n))
            return cur
        w = np.einsum("dij,jd->di", np.linalg.matrix_power(P, n), np.vstack([m, 0 * d.y0]))
        self.g_sum += w[:, 3]
        return w[:, :3].T

    # ------------------------------------------------------------------ local phase
    def _local(self, v: np.ndarray, n: int) -> np.ndarray:
        a = self.a
        H = a.H
        first = (H - 1 - a.sync_offset) % H + 1
        mom = _Moments(self.d, a, H)
        if n < first:
            return self._partial(mom, v, n)
        v = self._rounds(mom, v, first, 1)
        n_full, rem = divmod(n - first, H)
        v = self._rounds(mom, v, H, n_full)
        if rem:
            return self._partial(mom, v, rem)
        return self.lam2 * v[Z2]

    def _partial(self, mom: _Moments, v: np.ndarray, n: int) -> np.ndarray:
        """``n < H`` local steps that end without a sync; returns the final ``E(lam ybar)^2``."""
        if n:
            self.g_sum += _dot(mom.grad_row(n), v)
            self.c_sum += _dot(mom.cons_row(n), v)
            if self.curves:
                self._curve(mom, v, n)
        return self.lam2 * (mom.AA[n] * v[Z2] + mom.VD[n])

    def _rounds(self, mom: _Moments, v: np.ndarray, ell: int, count: int) -> np.ndarray:
        """``count`` rounds of ``ell`` local steps, each ending with a sync."""
        if count == 0:
            return v
        M = mom.round_map(ell)  # (D, 6, 6)
        if self.curves:
            for _ in range(count):
                self._curve(mom, v, ell)
                self.g_sum += _dot(mom.grad_row(ell), v)
                self.c_sum += _dot(mom.cons_row(ell), v)
                v = np.einsum("dij,jd->id", M, v)
            return v
        P = with_accumulators(M, [mom.grad_row(ell).T, mom.cons_row(ell).T])
        w0 = np.vstack([v, np.zeros((2, v.shape[1]))])
        w = np.einsum("dij,jd->id", np.linalg.matrix_power(P, count), w0)
        self.g_sum += w[NV]
        self.c_sum += w[NV + 1]
        return w[:NV]

    def _curve(self, mom: _Moments, v: np.ndarray, n: int) -> None:
        g = self.lam2[None, :] * (mom.AA[:n] * v[Z2][None, :] + mom.VD[:n])
        c = mom.CA[:n] * v[Z2][None, :] + mom.CD[:n]
        self.g_curve.append(g.sum(axis=1))
        self.c_curve.append(c.sum(axis=1))


def _dot(row: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per-direction inner product of a ``(6, D)`` row with the state ``(6, D)``."""
    return np.sum(row * v, axis=0)


class _Moments:
    """Within-round moments of one worker's coin path for ``j = 0..H`` steps, per direction.

    ``AA[j] = E[Abar_j^2]`` (the workers' mean), ``VD[j]`` the anchor-free part of
    ``E ybar_j^2``; ``CA[j]``, ``CD[j]`` the same two parts of the consensus error;
    ``a1[j] = E A_j``. Shapes ``(H+1, D)`` (:mod:`theory.moments.rounds`).
    """

    def __init__(self, dirs: Directions, algo: AlgorithmSpec, H: int):
        lam = dirs.lam
        self.lam2 = lam**2
        P = step_matrix(lam, algo.alpha, algo.eta, algo.p)  # (D, 9, 9)
        # the states for j = 0..H by doubling: U[m:2m] = P^m U[0:m]
        U = np.empty((H + 1,) + P.shape[:-1])
        U[0] = start_state(lam.shape)
        m, Pm = 1, P
        while m <= H:
            hi = min(2 * m, H + 1)
            U[m:hi] = np.einsum("dij,ndj->ndi", Pm, U[: hi - m])
            Pm = Pm @ Pm
            m *= 2
        rows = round_rows(dirs.s2, dirs.Q, dirs.K, algo.shared_coins)  # (4, D, 9)
        self.AA, self.VD, self.CA, self.CD = (np.einsum("di,ndi->nd", r, U) for r in rows)
        self.a1 = U[..., A1]
        self.cumAA, self.cumVD = _prefix(self.AA), _prefix(self.VD)
        self.cumCA, self.cumCD = _prefix(self.CA), _prefix(self.CD)
        self.zc, self.bc = outer_coefficients(
            algo.outer, algo.gamma, algo.mu, algo.outer_steps_per_sync - 1
        )

    def grad_row(self, n: int) -> np.ndarray:
        """Row ``(6, D)``: the sum over steps ``j < n`` of ``E(lam ybar_j)^2`` as a function
        of the anchor state."""
        row = np.zeros((NV, self.lam2.size))
        row[Z2] = self.lam2 * self.cumAA[n]
        row[ONE] = self.lam2 * self.cumVD[n]
        return row

    def cons_row(self, n: int) -> np.ndarray:
        row = np.zeros((NV, self.lam2.size))
        row[Z2] = self.cumCA[n]
        row[ONE] = self.cumCD[n]
        return row

    def round_map(self, ell: int) -> np.ndarray:
        """The affine map ``v -> v'`` of one round of ``ell`` steps and its sync, ``(D, 6, 6)``."""
        return round_map(self.a1[ell], self.AA[ell], self.VD[ell], self.zc, self.bc)


def _prefix(x: np.ndarray) -> np.ndarray:
    """``out[n] = sum_{j<n} x[j]`` for ``n = 0..H`` (``x`` has ``H + 1`` rows)."""
    out = np.zeros_like(x)
    out[1:] = np.cumsum(x[:-1], axis=0)
    return out

"""The exact oracle of :mod:`theory.moments.oracle` for many designs at once.

Each design ``n`` is a quadratic reduced to eigendirections (:class:`theory.moments.oracle.
Directions`) with its own ``K, alpha, eta, p, H, T, gamma, mu``; all designs of a batch share
the algorithm family (minibatch SGD, or local steps with independent or shared coins and
outer SGD, heavy ball or Nesterov) and start their local phase at step 0 (no warm-up, no
sync offset, one outer step per sync). The result equals
:func:`theory.moments.oracle.oracle_on` to rounding (``tests/test_round_moments.py``).

Everything is a linear recursion with a per-design number of steps, evaluated by batched
binary exponentiation: for a per-design exponent ``e``, ``w <- P^e w`` takes
``log2(max e)`` squarings of the stacked maps. The within-round state and the round map
are those of :mod:`theory.moments.rounds`; the sums over ``j < ell`` of the anchor-free and
anchor parts of ``E ybar_j^2`` and of the consensus error are four accumulators of the same
linear system.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.moments import rounds
from theory.moments.rounds import A1, U

__all__ = ["BatchResult", "oracle_batch"]


@dataclass
class BatchResult:
    """Per design: ``mean_grad_norm_sq``, ``mean_consensus``, ``final_grad_norm_sq``,
    ``initial_grad_norm_sq`` and ``diverged`` (a moment overflowed), arrays of shape ``(N,)``."""

    mean_grad_norm_sq: np.ndarray
    mean_consensus: np.ndarray
    final_grad_norm_sq: np.ndarray
    initial_grad_norm_sq: np.ndarray
    diverged: np.ndarray


def power_apply(P: np.ndarray, e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``P^e w`` per design: ``P`` (N, D, n, n), ``e`` (N,) nonnegative ints, ``w`` (N, D, n)."""
    e = np.asarray(e, dtype=np.int64).copy()
    w = np.array(w, dtype=float)  # the caller's arrays are never written
    owned = False
    while np.any(e > 0):
        odd = (e & 1).astype(bool)
        if odd.all():
            w = np.einsum("ndij,ndj->ndi", P, w)
        elif odd.any():
            w[odd] = np.einsum("ndij,ndj->ndi", P[odd], w[odd])
        e >>= 1
        live = e > 0
        if live.all():
            P, owned = P @ P, True
        elif live.any():  # only the designs with bits left (long and short horizons mix)
            if not owned:
                P, owned = P.copy(), True
            P[live] = P[live] @ P[live]
    return w


def oracle_batch(
    lam: np.ndarray,
    y0: np.ndarray,
    s2: np.ndarray,
    Q: np.ndarray,
    *,
    K: np.ndarray,
    alpha: np.ndarray,
    T: np.ndarray,
    H: np.ndarray | None = None,
    p: np.ndarray | None = None,
    eta: np.ndarray | None = None,
    gamma: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    minibatch: bool = False,
    shared: bool = False,
    nesterov: bool = False,
    heavy_ball: bool = False,
    at_anchors: bool = False,
) -> BatchResult:
    """Exact ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` for ``N`` designs.

    ``at_anchors``: measure ``(1/R) sum_{r<R} E||grad f(z_r)||^2`` over the anchors
    ``z_0 .. z_{R-1}`` of the ``R = floor(T/H)`` full rounds instead. Outer momentum:
    PyTorch Nesterov (``nesterov``: ``buf <- mu buf + Delta``, ``z <- z - gamma (Delta +
    mu buf)``) or heavy ball (``heavy_ball``: ``z <- z - gamma buf``).

    ``lam, y0, s2, Q``: (N, D) per design and eigendirection (see :class:`theory.
    moments.oracle.Directions`). Per design (N,): ``K`` workers, ``alpha``, ``T`` steps; for
    local methods ``H``, ``p``, ``eta`` (0 for Local SGD), ``gamma`` (1: averaging) and
    ``mu`` (Nesterov only). ``minibatch``: every step is minibatch SGD over ``K`` workers.
    """
    lam, y0, s2, Q = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (lam, y0, s2, Q))
    N = lam.shape[0]

    def per(x: np.ndarray | None, default: float) -> np.ndarray:
        arr = np.full(N, default, dtype=float) if x is None else np.asarray(x, dtype=float)
        return np.broadcast_to(arr.reshape(-1), (N,))[:, None]

    Kf, a, Tn = per(K, 1), per(alpha, 0), np.asarray(T, dtype=np.int64).reshape(-1)
    lam2 = lam**2
    g0 = np.sum(lam2 * y0**2, axis=1)
    with np.errstate(all="ignore"):
        if minibatch:
            g_sum, c_sum, final = _minibatch(lam, y0, s2, Kf, a, Tn)
        else:
            Hn = np.asarray(H, dtype=np.int64).reshape(-1)
            g_sum, c_sum, final = _local(
                lam, y0, s2, Q, Kf, a, Tn, Hn, per(p, 0), per(eta, 0),
                per(gamma, 1), per(mu, 0), shared, nesterov, heavy_ball, at_anchors,
            )  # fmt: skip
        g, c = g_sum / Tn, c_sum / Tn
        if at_anchors and not minibatch:
            g = g_sum / np.maximum(Tn // Hn, 1)
        fin = final
    bad = ~(np.isfinite(g) & np.isfinite(c) & np.isfinite(fin))
    return BatchResult(g, np.maximum(c, 0.0), fin, g0, bad)


def _minibatch(lam, y0, s2, K, a, T):
    P = rounds.minibatch_matrix(lam, s2, K, a)  # (E y^2, E y, 1, acc)
    w = np.zeros(lam.shape + (4,))
    w[..., 0], w[..., 1], w[..., 2] = y0**2, y0, 1.0
    w = power_apply(P, T, w)
    g = np.sum(w[..., 3], axis=1)
    return g, np.zeros_like(g), np.sum(lam**2 * w[..., 0], axis=1)


def _local(lam, y0, s2, Q, K, a, T, H, p, eta, gamma, mu, shared, nesterov, heavy_ball,
           at_anchors=False):  # fmt: skip
    # the within-round state of D = 1 - A (rounds.step_matrix, deviation): E Dbar and
    # E Dbar^2 keep full precision where A is within rounding of 1, so the round map does
    # not lose its contraction to cancellation (long horizons, outer momentum near 1)
    rows = rounds.round_rows(s2, Q, K, shared)  # (4, N, D, 9): DD, VD, CA, CD as rows on u
    dev_row = rows[0]  # E Dbar^2 (the row of E Abar^2 read on the state of D)
    aa_row = dev_row.copy()  # E Abar^2 = 1 - 2 E D + E Dbar^2
    aa_row[..., rounds.C] += 1.0
    aa_row[..., A1] -= 2.0
    rows = np.stack([aa_row, *rows[1:]])
    step = rounds.step_matrix(lam, a, eta, p, deviation=True)
    P = rounds.with_accumulators(step, list(rows))  # (N, D, 13, 13)
    u0 = np.zeros(lam.shape + (U + 4,))
    u0[..., :U] = rounds.start_state(lam.shape, deviation=True)
    n_full, rem = T // H, T % H
    uH = power_apply(P, H, u0)  # state at j = H and sums over j < H
    uR = power_apply(P, rem, u0)  # the final partial round
    AA_H = np.einsum("ndi,ndi->nd", rows[0], uH[..., :U])
    VD_H = np.einsum("ndi,ndi->nd", rows[1], uH[..., :U])
    DD_H = np.einsum("ndi,ndi->nd", dev_row, uH[..., :U])
    if not (nesterov or heavy_ball):  # outer SGD without momentum
        zc, bc = rounds.outer_coefficients("sgd", gamma, 0.0)
    else:
        zc, bc = rounds.outer_coefficients("nesterov" if nesterov else "sgd", gamma, mu)
    d1 = uH[..., A1]
    M = rounds.round_map(1 - d1, AA_H, VD_H, zc, bc, d1=d1, dd=DD_H)  # (N, D, 6, 6)
    lam2 = lam**2
    zero = np.zeros(lam.shape + (6,))
    g_row, c_row = zero.copy(), zero.copy()
    if at_anchors:  # E||grad f(z_r)||^2 at the start of every full round
        g_row[..., 0] = lam2
    else:
        g_row[..., 0], g_row[..., 5] = lam2 * uH[..., U], lam2 * uH[..., U + 1]
    c_row[..., 0], c_row[..., 5] = uH[..., U + 2], uH[..., U + 3]
    W = rounds.with_accumulators(M, [g_row, c_row])
    v = np.zeros(lam.shape + (8,))
    v[..., 0], v[..., 3], v[..., 5] = y0**2, y0, 1.0  # E z^2, E z, 1
    v = power_apply(W, n_full, v)
    Z2 = v[..., 0]
    g = v[..., 6] + (0.0 if at_anchors else lam2 * (uR[..., U] * Z2 + uR[..., U + 1]))
    c = v[..., 7] + uR[..., U + 2] * Z2 + uR[..., U + 3]
    AA_R = np.einsum("ndi,ndi->nd", rows[0], uR[..., :U])
    VD_R = np.einsum("ndi,ndi->nd", rows[1], uR[..., :U])
    final = lam2 * np.where((rem > 0)[:, None], AA_R * Z2 + VD_R, Z2)
    return g.sum(axis=1), c.sum(axis=1), final.sum(axis=1)

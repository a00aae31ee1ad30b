"""The exact oracle of :mod:`theory.round_moments` for many designs at once.

Each design ``n`` is a quadratic reduced to eigendirections (:class:`theory.round_moments.
Directions`) with its own ``K, alpha, eta, p, H, T, gamma, mu``; all designs of a batch share
the algorithm family (minibatch SGD, or local steps with independent or shared coins and
outer SGD or Nesterov) and start their local phase at step 0 (no warm-up, no sync offset,
one outer step per sync). The result equals :func:`theory.round_moments.oracle_on` to
rounding (``tests/test_round_moments.py``).

Everything is a linear recursion with a per-design number of steps, evaluated by batched
binary exponentiation: for a per-design exponent ``e``, ``w <- P^e w`` takes
``log2(max e)`` squarings of the stacked maps. Within a round the state of one worker's
coin path is ``u = (E A, E B, E A^2, E AB, E B^2, n, (E A)^2, (E B)^2, 1)`` (the squares of
the means follow ``(E A)' ^2 = E[s]^2 (E A)^2 + 2 E[s] E[c] E A + E[c]^2``), so the
anchor-free and anchor parts of ``E ybar_j^2`` and of the consensus error are linear in
``u`` and their sums over ``j < ell`` are four accumulators of the same linear system.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BatchResult", "oracle_batch"]

_U = 9  # within-round state size
_A1, _B1, _AA, _AB, _BB, _NN, _A1S, _B1S, _C = range(_U)


@dataclass
class BatchResult:
    """Per design: ``mean_grad_norm_sq``, ``mean_consensus``, ``final_grad_norm_sq``,
    ``initial_grad_norm_sq`` and ``diverged`` (a moment overflowed), arrays of shape ``(N,)``."""

    mean_grad_norm_sq: np.ndarray
    mean_consensus: np.ndarray
    final_grad_norm_sq: np.ndarray
    initial_grad_norm_sq: np.ndarray
    diverged: np.ndarray


def _power_apply(P: np.ndarray, e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``P^e w`` per design: ``P`` (N, D, n, n), ``e`` (N,) nonnegative ints, ``w`` (N, D, n)."""
    e = np.asarray(e, dtype=np.int64).copy()
    while np.any(e > 0):
        odd = (e & 1).astype(bool)[:, None, None]
        w = np.where(odd, np.einsum("ndij,ndj->ndi", P, w), w)
        e >>= 1
        if np.any(e > 0):
            P = P @ P
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
    round_moments.Directions`). Per design (N,): ``K`` workers, ``alpha``, ``T`` steps; for
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
                per(gamma, 1), per(mu, 0), shared, "nesterov" if nesterov else
                "heavy_ball" if heavy_ball else "sgd", at_anchors,
            )  # fmt: skip
        g, c = g_sum / Tn, c_sum / Tn
        if at_anchors and not minibatch:
            g = g_sum / np.maximum(Tn // Hn, 1)
        fin = final
    bad = ~(np.isfinite(g) & np.isfinite(c) & np.isfinite(fin))
    return BatchResult(g, np.maximum(c, 0.0), fin, g0, bad)


def _minibatch(lam, y0, s2, K, a, T):
    c = 1 - a * lam
    P = np.zeros(lam.shape + (4, 4))  # (E y^2, E y, 1, acc)
    P[..., 0, 0], P[..., 0, 2] = c**2, a**2 * s2 / K
    P[..., 1, 1], P[..., 2, 2] = c, 1.0
    P[..., 3, 0], P[..., 3, 3] = lam**2, 1.0
    w = np.zeros(lam.shape + (4,))
    w[..., 0], w[..., 1], w[..., 2] = y0**2, y0, 1.0
    w = _power_apply(P, T, w)
    g = np.sum(w[..., 3], axis=1)
    return g, np.zeros_like(g), np.sum(lam**2 * w[..., 0], axis=1)


def _within_round(lam, s2, Q, K, a, p, eta, shared):
    """Step map of the within-round state with its four accumulators: (N, D, 13, 13)."""
    # the two branches of a local step (theory.quadratic.local_step_branches), written out
    # so that p = 0 (no pull branch) can sit in the same arrays as p > 0
    cg = a / (1 - p)
    cp = np.where(p > 0, a * eta / np.where(p > 0, p, 1.0), 0.0)
    pg, pp = 1 - p, p
    sg, sp_ = 1 - cg * lam, 1 - cp + 0 * lam
    dg = cg * lam
    Es, Ec, Ed = pg * sg + pp * sp_, pp * cp + 0 * lam, pg * dg
    Ess, Esc, Esd = pg * sg**2 + pp * sp_**2, pp * sp_ * cp, pg * sg * dg
    Ecc, Ecd, Edd = pp * cp**2 + 0 * lam, 0 * lam, pg * dg**2
    En = pg * cg**2 + 0 * lam
    n = _U + 4
    P = np.zeros(lam.shape + (n, n))
    P[..., _A1, _A1], P[..., _A1, _C] = Es, Ec
    P[..., _B1, _B1], P[..., _B1, _C] = Es, Ed
    P[..., _AA, _AA], P[..., _AA, _A1], P[..., _AA, _C] = Ess, 2 * Esc, Ecc
    P[..., _AB, _AB], P[..., _AB, _B1], P[..., _AB, _A1], P[..., _AB, _C] = Ess, Esc, Esd, Ecd
    P[..., _BB, _BB], P[..., _BB, _B1], P[..., _BB, _C] = Ess, 2 * Esd, Edd
    P[..., _NN, _NN], P[..., _NN, _C] = Ess, En
    P[..., _A1S, _A1S], P[..., _A1S, _A1], P[..., _A1S, _C] = Es**2, 2 * Es * Ec, Ec**2
    P[..., _B1S, _B1S], P[..., _B1S, _B1], P[..., _B1S, _C] = Es**2, 2 * Es * Ed, Ed**2
    P[..., _C, _C] = 1.0
    rows = _parts(lam, s2, Q, K, shared)  # (4, N, D, 9): AA, VD, CA, CD as rows on u
    for i in range(4):
        P[..., _U + i, :_U] = rows[i]
        P[..., _U + i, _U + i] = 1.0
    return P, rows


def _parts(lam, s2, Q, K, shared):
    """Rows on the within-round state giving ``AA = E Abar^2``, ``VD`` (anchor-free part of
    ``E ybar^2``), and the anchor / anchor-free parts ``CA``, ``CD`` of the consensus."""
    z = np.zeros(lam.shape + (_U,))
    AA, VD, CA, CD = z.copy(), z.copy(), z.copy(), z.copy()
    keep = 1 - 1 / K
    if shared:
        AA[..., _AA] = 1.0
        VD[..., _NN] = s2 / K
        CD[..., _BB] = Q
        CD[..., _NN] = s2 * keep
    else:
        AA[..., _A1S], AA[..., _AA] = 1 - 1 / K, 1 / K
        VD[..., _BB], VD[..., _B1S], VD[..., _NN] = Q / K, -Q / K, s2 / K
        CA[..., _AA], CA[..., _A1S] = keep, -keep
        CD[..., _B1S] = Q * (1 - keep)
        CD[..., _BB] = Q * keep
        CD[..., _NN] = s2 * keep
    return np.stack([AA, VD, CA, CD])


def _local(lam, y0, s2, Q, K, a, T, H, p, eta, gamma, mu, shared, outer, at_anchors=False):
    P, rows = _within_round(lam, s2, Q, K, a, p, eta, shared)
    u0 = np.zeros(lam.shape + (_U + 4,))
    u0[..., _A1] = u0[..., _AA] = u0[..., _A1S] = u0[..., _C] = 1.0
    n_full, rem = T // H, T % H
    uH = _power_apply(P, H, u0)  # state at j = H and sums over j < H
    uR = _power_apply(P, rem, u0)  # the final partial round
    AA_H = np.einsum("ndi,ndi->nd", rows[0], uH[..., :_U])
    VD_H = np.einsum("ndi,ndi->nd", rows[1], uH[..., :_U])
    a1_H = uH[..., _A1]
    M = _round_map(a1_H, AA_H, VD_H, gamma, mu, outer)  # (N, D, 6, 6)
    lam2 = lam**2
    W = np.zeros(lam.shape + (8, 8))
    W[..., :6, :6] = M
    if at_anchors:  # E||grad f(z_r)||^2 at the start of every full round
        W[..., 6, 0] = lam2
    else:
        W[..., 6, 0], W[..., 6, 5] = lam2 * uH[..., _U], lam2 * uH[..., _U + 1]
    W[..., 7, 0], W[..., 7, 5] = uH[..., _U + 2], uH[..., _U + 3]
    W[..., 6, 6] = W[..., 7, 7] = 1.0
    v = np.zeros(lam.shape + (8,))
    v[..., 0], v[..., 3], v[..., 5] = y0**2, y0, 1.0  # E z^2, E z, 1
    v = _power_apply(W, n_full, v)
    Z2 = v[..., 0]
    g = v[..., 6] + (0.0 if at_anchors else lam2 * (uR[..., _U] * Z2 + uR[..., _U + 1]))
    c = v[..., 7] + uR[..., _U + 2] * Z2 + uR[..., _U + 3]
    AA_R = np.einsum("ndi,ndi->nd", rows[0], uR[..., :_U])
    VD_R = np.einsum("ndi,ndi->nd", rows[1], uR[..., :_U])
    final = lam2 * np.where((rem > 0)[:, None], AA_R * Z2 + VD_R, Z2)
    return g.sum(axis=1), c.sum(axis=1), final.sum(axis=1)


def _round_map(a1, AA, VD, gamma, mu, outer):
    """Affine map of ``v = (E z^2, E z buf, E buf^2, E z, E buf, 1)`` over one round and
    its sync (see :func:`theory.round_moments._outer_coefficients`)."""
    shape = a1.shape
    one = np.ones(shape)
    zero = np.zeros(shape)
    g = np.broadcast_to(gamma, shape)
    m = np.broadcast_to(mu, shape)
    if outer == "nesterov":  # buf' = mu buf + D; z' = z - g (D + mu buf')
        zc = (one, -g * m * m, -g * (1 + m))
        bc = (zero, m, one)
    elif outer == "heavy_ball":  # buf' = mu buf + D; z' = z - g buf'
        zc = (one, -g * m, -g)
        bc = (zero, m, one)
    else:  # z' = z - g D; buf unchanged
        zc = (one, zero, -g)
        bc = (zero, one, zero)
    M = np.zeros(shape + (6, 6))
    # second moments of (z, buf, D) as linear forms on v: G[i][j] -> (coef on Z2, ZB, B2, one)
    u = 1 - a1
    dd_z2, dd_one = 1 - 2 * a1 + AA, VD
    # G entries as length-6 coefficient vectors over v
    e = np.eye(6)
    G = [[None] * 3 for _ in range(3)]
    G[0][0] = e[0] * one[..., None]
    G[0][1] = G[1][0] = e[1] * one[..., None]
    G[1][1] = e[2] * one[..., None]
    G[0][2] = G[2][0] = e[0] * u[..., None]
    G[1][2] = G[2][1] = e[1] * u[..., None]
    G[2][2] = e[0] * dd_z2[..., None] + e[5] * dd_one[..., None]
    mvec = [e[3] * one[..., None], e[4] * one[..., None], e[3] * u[..., None]]

    def quad(x, y):
        return sum(x[i][..., None] * y[j][..., None] * G[i][j] for i in range(3) for j in range(3))

    M[..., 0, :] = quad(zc, zc)
    M[..., 1, :] = quad(zc, bc)
    M[..., 2, :] = quad(bc, bc)
    M[..., 3, :] = sum(zc[i][..., None] * mvec[i] for i in range(3))
    M[..., 4, :] = sum(bc[i][..., None] * mvec[i] for i in range(3))
    M[..., 5, 5] = 1.0
    return M


def oracle_batch_easgd(
    lam: np.ndarray,
    y0: np.ndarray,
    s2: np.ndarray,
    *,
    K: np.ndarray,
    alpha: np.ndarray,
    T: np.ndarray,
    H: np.ndarray,
    a: np.ndarray | None = None,
) -> BatchResult:
    """Exact ``(1/T) sum_t E||grad f(u_t)||^2`` of EASGD on i.i.d. quadratics, ``N`` designs.

    EASGD as :mod:`theory.simulate` runs it (Wang and Joshi, JMLR 2021, eqs. (4), (5), (11)):
    plain SGD steps on every worker, and after every ``H``-th step the elastic mixing
    ``x_k <- (1 - a) x_k + a z``, ``z <- (1 - K a) z + a sum_k x_k`` (``a = 2/(K+2)`` by
    default), measured at ``u = (sum_k x_k + z)/(K+1)``. With identical data the workers
    are exchangeable, so per eigendirection the state ``(E x_k^2, E x_k x_l, E x_k z,
    E z^2, E x_k, E z, 1)`` is exact and closed under both maps (``tests/
    test_round_moments.py`` checks it against a full covariance propagation)."""
    lam, y0, s2 = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (lam, y0, s2))
    N = lam.shape[0]
    Kf = np.broadcast_to(np.asarray(K, dtype=float).reshape(-1), (N,))[:, None]
    al = np.broadcast_to(np.asarray(alpha, dtype=float).reshape(-1), (N,))[:, None]
    el = 2.0 / (Kf + 2) if a is None else np.asarray(a, dtype=float).reshape(-1)[:, None]
    el = np.broadcast_to(el, Kf.shape)
    Tn = np.asarray(T, dtype=np.int64).reshape(-1)
    Hn = np.asarray(H, dtype=np.int64).reshape(-1)
    c = 1 - al * lam
    n = 8  # kk, kl, kz, zz, k, z, 1, acc
    kk, kl, kz, zz, m1, z1, one, acc = range(n)
    P = np.zeros(lam.shape + (n, n))  # one SGD step, the accumulator first
    P[..., kk, kk], P[..., kk, one] = c**2, al**2 * s2
    P[..., kl, kl] = c**2
    P[..., kz, kz] = c
    P[..., zz, zz] = 1.0
    P[..., m1, m1] = c
    P[..., z1, z1] = 1.0
    P[..., one, one] = 1.0
    w = lam**2 / (Kf + 1) ** 2
    P[..., acc, kk], P[..., acc, kl] = w * Kf, w * Kf * (Kf - 1)
    P[..., acc, kz], P[..., acc, zz] = w * 2 * Kf, w
    P[..., acc, acc] = 1.0
    A = np.broadcast_to(el, lam.shape)
    Kb = np.broadcast_to(Kf, lam.shape)
    M = np.zeros(lam.shape + (n, n))  # the elastic mixing
    b = 1 - A
    q = 1 - Kb * A
    M[..., kk, kk], M[..., kk, kz], M[..., kk, zz] = b**2, 2 * A * b, A**2
    M[..., kl, kl], M[..., kl, kz], M[..., kl, zz] = b**2, 2 * A * b, A**2
    M[..., kz, kz] = b * q + A**2 * Kb
    M[..., kz, kk], M[..., kz, kl] = b * A, b * A * (Kb - 1)
    M[..., kz, zz] = A * q
    M[..., zz, zz], M[..., zz, kz] = q**2, 2 * A * q * Kb
    M[..., zz, kk], M[..., zz, kl] = A**2 * Kb, A**2 * Kb * (Kb - 1)
    M[..., m1, m1], M[..., m1, z1] = b, A
    M[..., z1, z1], M[..., z1, m1] = q, A * Kb
    M[..., one, one] = M[..., acc, acc] = 1.0
    v = np.zeros(lam.shape + (n,))
    v[..., kk] = v[..., kl] = v[..., kz] = v[..., zz] = y0**2
    v[..., m1] = v[..., z1] = y0
    v[..., one] = 1.0
    with np.errstate(all="ignore"):
        PH = np.stack([_power_apply(P, Hn, np.eye(n)[None, None, :, i].repeat(N, 0).repeat(
            lam.shape[1], 1)) for i in range(n)], axis=-1)  # fmt: skip
        W = M @ PH  # one round: H steps, then the mixing
        v = _power_apply(W, Tn // Hn, v)
        v = _power_apply(P, Tn % Hn, v)
        g = np.sum(v[..., acc], axis=1) / Tn
        Eu2 = Kb * v[..., kk] + Kb * (Kb - 1) * v[..., kl] + 2 * Kb * v[..., kz] + v[..., zz]
        fin = np.sum(lam**2 * Eu2 / (Kb + 1) ** 2, axis=1)
    bad = ~(np.isfinite(g) & np.isfinite(fin))
    g0 = np.sum(lam**2 * y0**2, axis=1)
    return BatchResult(g, np.full(N, np.nan), fin, g0, bad)

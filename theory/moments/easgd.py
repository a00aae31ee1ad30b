"""The exact oracle of EASGD on i.i.d. quadratics, for many designs at once."""

from __future__ import annotations

import numpy as np

from theory.moments.batch import BatchResult, power_apply

__all__ = ["oracle_batch_easgd"]


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
        PH = np.stack([power_apply(P, Hn, np.eye(n)[None, None, :, i].repeat(N, 0).repeat(
            lam.shape[1], 1)) for i in range(n)], axis=-1)  # fmt: skip
        W = M @ PH  # one round: H steps, then the mixing
        v = power_apply(W, Tn // Hn, v)
        v = power_apply(P, Tn % Hn, v)
        g = np.sum(v[..., acc], axis=1) / Tn
        Eu2 = Kb * v[..., kk] + Kb * (Kb - 1) * v[..., kl] + 2 * Kb * v[..., kz] + v[..., zz]
        fin = np.sum(lam**2 * Eu2 / (Kb + 1) ** 2, axis=1)
    bad = ~(np.isfinite(g) & np.isfinite(fin))
    g0 = np.sum(lam**2 * y0**2, axis=1)
    return BatchResult(g, np.full(N, np.nan), fin, g0, bad)

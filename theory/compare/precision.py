"""The precision guard of the tuning: a configuration's values rechecked in extended precision.

Far out on the tuning grid (outer rates in the thousands, inner steps near ``1e-7``) the
float64 round map cancels: ``1 - E Abar`` and ``1 - 2 E Abar + E Abar^2`` are tiny
differences of numbers near 1 that the outer rate then multiplies by ``gamma^2``. An outside
search found a spurious 2-round PALSGD there that the trajectory and Monte Carlo refute.

:func:`longdouble_values` recomputes ``E||grad f(z_r)||^2`` of configurations at given
rounds with the whole chain (pair moments, round map, its powers) in ``numpy.longdouble``
(64-bit mantissa on x86-64, 2048 times finer than float64; where ``longdouble`` is float64
the check is vacuous and says so through :data:`EXTENDED`). :func:`longdouble_verifier` is
the :data:`theory.compare.tune.Verifier` of the exact engine: a configuration is resolved
when, at each answer ``r`` of each target (and at ``r - 1``), both precisions put the value
on the same side of ``eps`` and agree to :data:`RTOL` relative to ``max(value, eps)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from theory.compare.exact import Quadratic, _round_maps
from theory.compare.methods import Method
from theory.compare.pairs import _aggregate, pair_step_matrix, pairs_of, start_state
from theory.compare.scan import start_vector, values_at
from theory.moments.rounds import B2, BUF1, NV, ONE, Z1, Z2, ZB, outer_coefficients

__all__ = ["EXTENDED", "RTOL", "longdouble_values", "longdouble_verifier"]

#: whether this platform's ``longdouble`` is finer than float64
EXTENDED = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps
#: the relative disagreement of the two precisions that refuses a configuration
RTOL = 1e-3
LD = np.longdouble


def _power_apply(P: np.ndarray, e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``P^e w`` per row, every array ``longdouble``: ``P`` (N, ..., n, n), ``e`` (N,)
    nonnegative ints, ``w`` (N, ..., n)."""
    e = np.asarray(e, dtype=np.int64).copy()
    while np.any(e > 0):
        odd = (e & 1).astype(bool)
        if odd.any():
            w = w.copy()
            w[odd] = np.einsum("n...ij,n...j->n...i", P[odd], w[odd])
        e >>= 1
        if np.any(e > 0):
            P = np.einsum("n...ij,n...jk->n...ik", P, P)
    return w


def _round_map(q: Quadratic, m: Method, H, eta, p, alpha, gamma, mu) -> np.ndarray:
    """The anchor's round map ``(N, d, 6, 6)`` in ``longdouble`` (as
    :func:`theory.compare.exact._evaluate` builds it in float64)."""
    n = alpha.size
    col = lambda x: np.asarray(x, dtype=LD).reshape(-1, 1)  # noqa: E731
    if not m.local:
        Hn, p_, eta_, outer, g, mu_ = 1, np.zeros(n), np.zeros(n), "sgd", np.ones(n), 0.0
    else:
        Hn = H
        p_, eta_ = (p, eta) if m.pulls else (np.zeros(n), np.zeros(n))
        outer, g, mu_ = m.outer, gamma, m.outer_momentum(mu)
    lam, delta, s2 = (np.asarray(x, dtype=LD) for x in (q.lam, q.delta, q.s2))
    mom = {}
    for j, k in pairs_of(q.K, m.shared):  # (errors of far-out designs become inf/nan, refused)
        P = pair_step_matrix(
            lam[None, :, j], lam[None, :, k], delta[None, :, j], delta[None, :, k],
            s2[None, :], col(alpha), col(eta_), col(p_), same_coin=m.shared or j == k,
            same_worker=j == k, dtype=LD,
        )  # fmt: skip
        P = np.broadcast_to(P, (n, lam.shape[0]) + P.shape[-2:])
        u0 = start_state((n, lam.shape[0]), dtype=LD)
        mom[j, k] = _power_apply(P, np.full(n, int(Hn)), u0)
    with np.errstate(all="ignore"):
        return _anchor_map(_aggregate(mom, q.K, m.shared), outer, g, np.full(n, mu_))


def _anchor_map(mom, outer: str, gamma, mu) -> np.ndarray:
    """:func:`theory.compare.scan.anchor_map` kept in ``longdouble`` throughout (the shared
    :func:`theory.moments.rounds.round_map` stores its result in float64): the second
    moments of ``(z, buf, Delta)`` as linear forms on ``v``, then the outer update's
    coefficients applied to them."""
    zc, bc = outer_coefficients(outer, np.asarray(gamma, dtype=float).reshape(-1, 1),
                                np.asarray(mu, dtype=float).reshape(-1, 1))  # fmt: skip
    zc, bc = (np.asarray(x, dtype=LD) for x in (zc, bc))  # (N, 1, 3)
    a1, b1, ab = mom.a1, mom.b1, mom.ab
    u, dev2, VD = 1 - a1, 1 - 2 * a1 + mom.aa, mom.bb + mom.nn
    one, zero = np.ones_like(a1), np.zeros_like(a1)
    e = np.eye(NV, dtype=LD)

    def form(*terms):  # sum of coefficient x unit row
        return sum(c[..., None] * e[i] for c, i in terms)

    G = [[None] * 3 for _ in range(3)]
    G[0][0], G[1][1] = form((one, Z2)), form((one, B2))
    G[0][1] = G[1][0] = form((one, ZB))
    G[0][2] = G[2][0] = form((u, Z2), (-b1, Z1))
    G[1][2] = G[2][1] = form((u, ZB), (-b1, BUF1))
    G[2][2] = form((dev2, Z2), (-2 * (b1 - ab), Z1), (VD, ONE))
    mvec = [form((one, Z1)), form((one, BUF1)), form((u, Z1), (-b1, ONE))]
    z = [zc[..., i] + zero for i in range(3)]
    b = [bc[..., i] + zero for i in range(3)]

    def quad(x, y):
        return sum(x[i][..., None] * y[j][..., None] * G[i][j] for i in range(3) for j in range(3))

    M = np.zeros(a1.shape + (NV, NV), dtype=LD)
    M[..., Z2, :], M[..., ZB, :], M[..., B2, :] = quad(z, z), quad(z, b), quad(b, b)
    M[..., Z1, :] = sum(z[i][..., None] * mvec[i] for i in range(3))
    M[..., BUF1, :] = sum(b[i][..., None] * mvec[i] for i in range(3))
    M[..., ONE, ONE] = 1
    return M


def longdouble_values(
    q: Quadratic, m: Method, *, H: int, eta, p, alpha, gamma, mu: float, rounds: np.ndarray
) -> np.ndarray:
    """``E||grad f(z_r)||^2`` of ``N`` configurations at ``rounds`` ``(N, R)``, computed in
    ``longdouble`` (returned as such)."""
    alpha = np.asarray(alpha, dtype=float).reshape(-1)
    n = alpha.size
    M = _round_map(q, m, H, np.asarray(eta), np.asarray(p), alpha, np.asarray(gamma), mu)
    rounds = np.asarray(rounds, dtype=np.int64).reshape(n, -1)
    R = rounds.shape[1]
    idx = np.repeat(np.arange(n), R)
    v0 = start_vector(q.y0, n * R).astype(LD)
    with np.errstate(all="ignore"):
        v = _power_apply(M[idx], rounds.reshape(-1), v0)
        val = np.einsum("d,nd->n", np.asarray(q.weight, dtype=LD), v[..., Z2])
    return val.reshape(n, R)


def _float64_values(q: Quadratic, m: Method, *, H, eta, p, alpha, gamma, mu, rounds):
    """The same values by the float64 engine (:func:`theory.compare.scan.values_at`)."""

    M = _round_maps(q, m, H, eta, p, alpha, gamma, mu)
    n, R = rounds.shape
    idx = np.repeat(np.arange(n), R)
    v0 = start_vector(q.y0, n * R)
    with np.errstate(all="ignore"):
        return values_at(M[idx], v0, q.weight, rounds.reshape(-1)).reshape(n, R)


def longdouble_verifier(q: Quadratic) -> Callable[..., np.ndarray]:
    """The exact engine's precision guard for :func:`theory.compare.tune.tune`."""

    def verify(m, *, H, eta, p, alpha, gamma, mu, rounds, eps) -> np.ndarray:
        rounds = np.asarray(rounds, dtype=np.int64)
        n, T = rounds.shape
        eps_t = np.resize(np.asarray(eps, dtype=float), T)  # target t is eps[t % E]
        at = np.concatenate([rounds, rounds - 1], axis=1)
        use = at >= 0
        at = np.where(use, at, 0)
        kw = dict(H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, mu=mu, rounds=at)
        lo = longdouble_values(q, m, **kw)
        hi = _float64_values(q, m, **kw)
        e2 = np.concatenate([eps_t, eps_t])[None, :]
        same_side = (lo <= e2) == (hi <= e2)
        close = np.abs(lo - hi) <= RTOL * np.maximum(np.abs(lo), e2)
        return ((same_side & close) | ~use).all(axis=1)

    return verify

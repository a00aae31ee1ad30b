"""The within-round moment recursion and the round map, one implementation for the
single-run oracle (:mod:`theory.moments.oracle`) and the batched one
(:mod:`theory.moments.batch`).

Along an eigendirection, in coordinates shifted by ``x* = bbar``, worker ``k`` after ``j``
local steps of a round is ``y_k = A_j z + B_j delta_k + N_j``: ``(A_j, B_j)`` are random
functions of the worker's coin path only (``A_0 = 1``, ``B_0 = 0``; a step maps
``A <- s A + c``, ``B <- s B + d`` with the branch's scale ``s``, pull ``c`` and drift ``d``
of :func:`theory.moments.branches.local_step_branches`) and ``N_j`` is the accumulated
noise. The state of one coin path, ``u = (E A, E B, E A^2, E AB, E B^2, n, (E A)^2,
(E B)^2, 1)``, follows one fixed linear map per step (:func:`step_matrix`; the squares of
the means follow ``((E A)')^2 = E[s]^2 (E A)^2 + 2 E[s] E[c] E A + E[c]^2``). Linear rows
on ``u`` (:func:`round_rows`) give ``E ybar_j^2`` and the consensus error, split into the
part on ``E z^2`` and the anchor-free part. A round and its sync is an affine map of the
anchor moments ``v = (E z^2, E z buf, E buf^2, E z, E buf, 1)`` (:func:`round_map`).

Every function broadcasts: one design (arrays ``(D,)`` over eigendirections) or ``N``
designs (``(N, D)``, per-design scalars as ``(N, 1)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from theory.algorithm import outer_step
from theory.moments.branches import local_step_branches

#: within-round state of one coin path
U = 9
A1, B1, AA, AB, BB, NN, A1S, B1S, C = range(U)
#: anchor state: E z^2, E z buf, E buf^2, E z, E buf, 1
NV = 6
Z2, ZB, B2, Z1, BUF1, ONE = range(NV)


def step_matrix(lam: Any, alpha: Any, eta: Any, p: Any, deviation: bool = False) -> np.ndarray:
    """The map ``u -> u'`` of one local step, ``(..., 9, 9)``, from the branch means.

    ``deviation``: the state tracks ``D = 1 - A`` instead of ``A`` (the same layout, ``E D``
    in place of ``E A`` and so on; start from :func:`start_state` with ``deviation``). A step
    maps ``D <- s D + (1 - s - c)``, and ``1 - s - c`` is the branch's drift for both
    branches (gradient: ``alpha lam/(1 - p)``; pull: 0), taken as such, so that ``E D`` and
    ``E D^2`` carry full relative precision when ``A`` is within rounding of 1 (tiny
    ``alpha lam H``); ``1 - E A`` computed from ``E A`` would lose it all."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in (lam, alpha, eta, p)))
    br = local_step_branches(lam, alpha, eta, p, 1.0)

    def mean(f: Any) -> np.ndarray:
        return sum(np.broadcast_to(np.asarray(b.prob * f(b), dtype=float), shape) for b in br)

    def pull(b: Any) -> Any:
        return b.drift if deviation else b.pull

    Es, Ec, Ed = mean(lambda b: b.scale), mean(pull), mean(lambda b: b.drift)
    Ess, Esc, Esd = (
        mean(lambda b: b.scale**2),
        mean(lambda b: b.scale * pull(b)),
        mean(lambda b: b.scale * b.drift),
    )
    Ecc, Ecd, Edd = (
        mean(lambda b: pull(b) ** 2),
        mean(lambda b: pull(b) * b.drift),
        mean(lambda b: b.drift**2),
    )
    En = mean(lambda b: b.noise)
    P = np.zeros(shape + (U, U))
    P[..., A1, A1], P[..., A1, C] = Es, Ec
    P[..., B1, B1], P[..., B1, C] = Es, Ed
    P[..., AA, AA], P[..., AA, A1], P[..., AA, C] = Ess, 2 * Esc, Ecc
    P[..., AB, AB], P[..., AB, B1], P[..., AB, A1], P[..., AB, C] = Ess, Esc, Esd, Ecd
    P[..., BB, BB], P[..., BB, B1], P[..., BB, C] = Ess, 2 * Esd, Edd
    P[..., NN, NN], P[..., NN, C] = Ess, En
    P[..., A1S, A1S], P[..., A1S, A1], P[..., A1S, C] = Es**2, 2 * Es * Ec, Ec**2
    P[..., B1S, B1S], P[..., B1S, B1], P[..., B1S, C] = Es**2, 2 * Es * Ed, Ed**2
    P[..., C, C] = 1.0
    return P


def start_state(shape: tuple[int, ...], deviation: bool = False) -> np.ndarray:
    """``u`` at ``j = 0`` (``A = 1``, ``B = 0``, no noise), ``shape + (9,)``; with
    ``deviation`` the state of ``D = 1 - A`` (:func:`step_matrix`): ``D = 0``."""
    u0 = np.zeros(shape + (U,))
    u0[..., C] = 1.0
    if not deviation:
        u0[..., A1] = u0[..., AA] = u0[..., A1S] = 1.0
    return u0


def round_rows(s2: Any, Q: Any, K: Any, shared: bool) -> np.ndarray:
    """Rows ``(4, ..., 9)`` on ``u``: ``AA = E Abar^2`` and ``VD`` (the parts of ``E ybar^2``
    on ``E z^2`` and anchor-free), ``CA`` and ``CD`` (the same parts of the consensus
    error ``E (1/K) sum_k (y_k - ybar)^2``). ``s2`` mean noise variance, ``Q`` mean squared
    offset, ``K`` workers; independent coins: ``E Abar^2 = (E A)^2 + Var(A)/K``."""
    shape = np.broadcast_shapes(np.shape(s2), np.shape(Q), np.shape(K))
    z = np.zeros(shape + (U,))
    rAA, rVD, rCA, rCD = z.copy(), z.copy(), z.copy(), z.copy()
    keep = 1 - 1 / K
    if shared:
        rAA[..., AA] = 1.0
        rVD[..., NN] = s2 / K
        rCD[..., BB] = Q
        rCD[..., NN] = s2 * keep
    else:
        rAA[..., A1S], rAA[..., AA] = 1 - 1 / K, 1 / K
        rVD[..., BB], rVD[..., B1S], rVD[..., NN] = Q / K, -Q / K, s2 / K
        rCA[..., AA], rCA[..., A1S] = keep, -keep
        rCD[..., B1S] = Q * (1 - keep)
        rCD[..., BB] = Q * keep
        rCD[..., NN] = s2 * keep
    return np.stack([rAA, rVD, rCA, rCD])


def outer_coefficients(
    outer: str, gamma: Any, mu: Any, extra_steps: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``z'`` and ``buf'`` as coefficient vectors ``(..., 3)`` on ``(z, buf, Delta)``: the
    outer update of :func:`theory.algorithm.outer_step` applied to the unit vectors
    (``gamma``, ``mu`` numbers or per-design arrays)."""
    z, buf, delta = np.eye(3)
    g = np.asarray(gamma, dtype=float)[..., None]
    m = mu if isinstance(mu, int | float) else np.asarray(mu, dtype=float)[..., None]
    zc, bc = outer_step(z, buf, delta, outer=outer, gamma=g, mu=m, extra_steps=extra_steps)
    return np.asarray(zc, dtype=float), np.asarray(bc, dtype=float)


def round_map(
    a1: Any,
    AA_: Any,
    VD: Any,
    zc: np.ndarray,
    bc: np.ndarray,
    b1: Any = 0.0,
    ab: Any = 0.0,
    *,
    d1: Any = None,
    dd: Any = None,
) -> np.ndarray:
    """The affine map of ``v`` over one round and its sync, ``(..., 6, 6)``.

    At the end of the round the workers' mean is ``ybar = Abar z + Bbar + Nbar`` with the
    coins and noise of the round independent of ``(z, buf)``: ``a1 = E Abar``,
    ``AA_ = E Abar^2``, ``VD = E Bbar^2 + E Nbar^2`` (the anchor-free part of
    ``E ybar^2``), ``b1 = E Bbar`` and ``ab = E Abar Bbar`` (both 0 when the workers share
    one Hessian, :mod:`theory.moments.oracle`; the drift terms of
    :mod:`theory.compare.pairs` otherwise). ``Delta = z - ybar``; ``zc``, ``bc`` from
    :func:`outer_coefficients`. ``d1 = E(1 - Abar)`` and ``dd = E(1 - Abar)^2``, when given,
    replace ``1 - a1`` and ``1 - 2 a1 + AA_`` (computed without cancellation, from the
    deviation state of :func:`step_matrix`).
    """
    shape = np.broadcast_shapes(np.shape(a1), np.shape(b1), np.shape(ab))
    one = np.ones(shape)
    u = (1 - a1 if d1 is None else d1) + 0 * one
    dev2 = 1 - 2 * a1 + AA_ if dd is None else dd
    b1 = np.asarray(b1, dtype=float) + 0 * one
    e = np.eye(NV)
    # second moments of (z, buf, Delta) as linear forms on v
    G = [[None] * 3 for _ in range(3)]
    G[0][0] = e[Z2] * one[..., None]
    G[0][1] = G[1][0] = e[ZB] * one[..., None]
    G[1][1] = e[B2] * one[..., None]
    G[0][2] = G[2][0] = e[Z2] * u[..., None] - e[Z1] * b1[..., None]
    G[1][2] = G[2][1] = e[ZB] * u[..., None] - e[BUF1] * b1[..., None]
    G[2][2] = (
        e[Z2] * (dev2 + 0 * one)[..., None]
        - 2 * e[Z1] * (b1 - ab)[..., None]
        + e[ONE] * (np.asarray(VD) + 0 * one)[..., None]
    )
    mvec = [
        e[Z1] * one[..., None],
        e[BUF1] * one[..., None],
        e[Z1] * u[..., None] - e[ONE] * b1[..., None],
    ]
    zc = [np.broadcast_to(zc[..., i], shape)[..., None] for i in range(3)]
    bc = [np.broadcast_to(bc[..., i], shape)[..., None] for i in range(3)]

    def quad(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> np.ndarray:
        return sum(x[i] * y[j] * G[i][j] for i in range(3) for j in range(3))

    M = np.zeros(shape + (NV, NV))
    M[..., Z2, :] = quad(zc, zc)
    M[..., ZB, :] = quad(zc, bc)
    M[..., B2, :] = quad(bc, bc)
    M[..., Z1, :] = sum(zc[i] * mvec[i] for i in range(3))
    M[..., BUF1, :] = sum(bc[i] * mvec[i] for i in range(3))
    M[..., ONE, ONE] = 1.0
    return M


def with_accumulators(M: np.ndarray, rows: Sequence[Any]) -> np.ndarray:
    """``M`` (..., n, n) extended by one accumulator per row: ``acc_i <- acc_i + row_i . w``."""
    n, k = M.shape[-1], len(rows)
    P = np.zeros(M.shape[:-2] + (n + k, n + k))
    P[..., :n, :n] = M
    for i, row in enumerate(rows):
        P[..., n + i, :n] = row
        P[..., n + i, n + i] = 1.0
    return P


def minibatch_matrix(lam: Any, s2: Any, K: Any, alpha: Any) -> np.ndarray:
    """One minibatch-SGD step ``y <- (1 - alpha lam) y - alpha mean_k xi_k`` on
    ``(E y^2, E y, 1)`` with the accumulator of ``E (lam y)^2``, ``(..., 4, 4)``."""
    c = 1 - alpha * lam
    shape = np.shape(c)
    M = np.zeros(shape + (3, 3))
    M[..., 0, 0], M[..., 0, 2] = c**2, alpha**2 * s2 / K
    M[..., 1, 1], M[..., 2, 2] = c, 1.0
    row = np.zeros(shape + (3,))
    row[..., 0] = lam**2
    return with_accumulators(M, [row])

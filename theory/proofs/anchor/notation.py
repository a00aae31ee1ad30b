"""Notation of the Theorem 2 proof: symbols, sign-check domains, the constants of each route.

Part of :mod:`theory.proofs.anchor` (``docs/anchor_theorem.md``)."""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.proofs.lemmas import Domain

#: the drift routes of Theorem 2 (``docs/anchor_theorem.md``): whether the algorithm pulls
#: (PALSGD; Local SGD is its ``p = 0`` case) and whether the drift horizon is the pull-aware
#: ``min(H - 1, 2/(alpha (eta - L)))`` (``eta > L``) instead of the summed drift
ROUTES: dict[str, tuple[bool, bool]] = {
    "palsgd": (True, False),
    "pull_aware": (True, True),
    "local_sgd": (False, False),
}
KINDS = tuple(ROUTES)


def route(kind: str) -> tuple[bool, bool]:
    """``(pulls, pull_aware)`` of the route ``kind`` (one of :data:`KINDS`)."""
    if kind not in ROUTES:
        raise ValueError(f"kind must be one of {KINDS}")
    return ROUTES[kind]


L, sigma, zeta, F0 = S.L, S.sigma, S.zeta, S.F0
K, H, T, R = S.K, S.H, S.T, S.R
p, alpha, eta, gamma, mu = S.p, S.alpha, S.eta, S.gamma, S.mu

_nn = dict(nonnegative=True)
# per-round scalars of the composition (sums over the R rounds; linearity of expectation)
Phi, Gz, sw, D2 = sp.symbols("Phi G_z s_w Delta2", **_nn)
ip, dF = sp.symbols("ip dF", real=True)
He, Hup, Hlo = sp.symbols("H_e H_up H_lo", positive=True)
# drift-lemma scalars
E2, E2n, Gk, V, Gx, Y, Dt, Dn, D0 = sp.symbols("E2 E2_next G_k V G_x Y D_t D_next D_start", **_nn)
tt = sp.Symbol("t", nonnegative=True)
mpull = sp.Symbol("m_pull", positive=True)  # eta - L, in sign checks only

_u = sp.Symbol("u", positive=True)
_w = sp.Symbol("w", nonnegative=True)
PULL_DOMAIN = Domain(
    {p: _u / (1 + _u), eta: L + mpull}, "0 < p < 1 (p = u/(1+u)), eta = L + m (m > 0)"
)
PULL_STEP_DOMAIN = Domain(
    {p: _u / (1 + _u), eta: L + mpull, alpha: 1 / ((L + mpull) * (1 + _w))},
    "0 < p < 1, eta = L + m (m > 0), alpha = 1/(eta (1 + w)) (w >= 0): alpha eta <= 1 (P1)",
)

# generic constants of the round inequality (specialised by pieces())
GENERIC = dict(
    gp=sp.Symbol("gamma_e", positive=True),
    Lo=sp.Symbol("L_o", positive=True),
    cp=sp.Symbol("c_p", nonnegative=True),
    nu=sp.Symbol("nu", nonnegative=True),
    XG=sp.Symbol("X_G", nonnegative=True),
    Xs=sp.Symbol("X_s", nonnegative=True),
    omp=sp.Symbol("o_p", positive=True),
)


def smooth_min(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """``min(a, b)`` as ``(a + b - |a - b|)/2`` (vectorises under lambdify)."""
    return (a + b - sp.Abs(a - b)) / 2


def round_constants(h: sp.Expr) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """``(c_S, E_zeta, E_sigma)`` of the round inequality at ``H_e = h``, generic constants."""
    g = GENERIC
    cS = L**2 / 2 + g["Lo"] * g["gp"] * alpha * (2 * L**2 * h + g["nu"] / K)
    Ez = cS * g["XG"] + g["Lo"] * g["gp"] * alpha * g["cp"] / K
    Es = cS * g["Xs"] + g["Lo"] * g["gp"] * alpha / (K * g["omp"])
    return cS, Ez, Es


def pieces(kind: str) -> dict[str, sp.Expr]:
    """The constants of Theorem 2 for ``kind`` (see the docs for their meaning)."""
    pulls, pull_aware = route(kind)
    gp = gamma / (1 - mu)  # effective outer learning rate
    Lo = L * (1 + mu) / (1 - mu)  # outer curvature (L at mu = 0)
    if not pulls:
        cp, nu, q1, hlo, hup = sp.S.Zero, sp.S.Zero, sp.S.One, H, H
        one_minus_p = sp.S.One
    else:
        cp = 4 * p / (1 - p)
        nu = 2 * (1 - p) * eta**2 / p + 4 * p * L**2 / (1 - p)
        q1 = 1 + alpha * eta * H
        hlo = H / q1
        hup = smooth_min(H, 1 / (alpha * eta)) if pull_aware else H
        one_minus_p = 1 - p
    if pull_aware:
        m = eta - L
        M = smooth_min(H - 1, 2 / (alpha * m))
        XG = M * (alpha / m + 4 * p * alpha**2 / (1 - p))
        Xs = M * alpha**2 / (1 - p)
    elif pulls:
        XG = 8 * alpha**2 * q1 * (H - 1) * (H / 3 + p / (1 - p))
        Xs = 2 * alpha**2 * q1 * (H - 1) / (1 - p)
    else:
        XG = sp.Rational(8, 3) * alpha**2 * H * (H - 1)
        Xs = 2 * alpha**2 * (H - 1)
    return dict(gp=gp, Lo=Lo, cp=cp, nu=nu, Hlo=hlo, Hup=hup, XG=XG, Xs=Xs, omp=one_minus_p)

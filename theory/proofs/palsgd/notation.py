"""Notation of the Theorem 1 proof: symbols, the sign-check domain, the named constants.

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.proofs.lemmas import Domain

COINS = ("independent", "shared")

L, sigma, zeta, F0 = S.L, S.sigma, S.zeta, S.F0
K, H, T, R = S.K, S.H, S.T, S.R
p, alpha, eta = S.p, S.alpha, S.eta

# reparametrisation of the parameter region for sign checks: 0 < p < 1 and H >= 1
_u = sp.Symbol("u", positive=True)  # u = p/(1-p)
_h = sp.Symbol("h", nonnegative=True)  # h = H - 1
DOMAIN = Domain({p: _u / (1 + _u), H: 1 + _h}, "0 < p < 1 (p = u/(1+u), u > 0), H >= 1 (H = 1+h)")

# proof-internal nonnegative scalars (per-step and per-round aggregates)
_nn = dict(nonnegative=True)
Phi, Lam, Gam, D, C, W = sp.symbols("Phi Lam Gam D C W", **_nn)
A_, Bq = sp.symbols("A_het B_het", **_nn)
M, Gap, Vbar, AvgVar, s2, Snoise = sp.symbols("M Gap Vbar AvgVar s2 S_noise", **_nn)
ip, f0, fplus = sp.symbols("ip f_x f_next", real=True)
SPhi, SLam, SGam, SD = sp.symbols("SPhi SLam SGam SD", **_nn)
Delta = sp.Symbol("Delta", real=True)
Omega = sp.Symbol("Omega", positive=True)
t_step = sp.Symbol("t", positive=True, integer=True)  # step index inside a round


def specialise_p0(expr):
    """The ``p = 0`` case: substitute ``eta = 0`` first (no pull ever happens), then ``p = 0``.

    The order matters: PALSGD terms carry ``eta**2/p`` (pull variance), which is ``0`` once
    ``eta = 0`` but undefined at ``p = 0`` for ``eta > 0`` (the pull coefficient
    ``alpha*eta/p`` is infinite there).
    """
    if isinstance(expr, sp.MatrixBase):
        return expr.applyfunc(specialise_p0)
    if isinstance(expr, sp.core.relational.Relational):
        return expr.func(specialise_p0(expr.lhs), specialise_p0(expr.rhs))
    return sp.sympify(expr).subs(eta, 0).subs(p, 0)


# ----------------------------------------------------------------------------- coefficients
def coefficients(coins: str = "independent") -> dict[str, sp.Expr]:
    """The named constants of the proof (docs, section "Constants").

    ``Q`` is the round constant of L18 (``Q_parts`` its terms, for display).
    ``kappa``: how many independent coins are averaged in the step direction (``K`` for
    independent coins, ``1`` for shared); ``chi``: whether the coin variance sees the
    heterogeneity (``1`` independent, ``0`` shared).
    """
    if coins not in COINS:
        raise ValueError(f"coins must be one of {COINS}, got {coins!r}")
    kappa = K if coins == "independent" else sp.Integer(1)
    chi = sp.Integer(1) if coins == "independent" else sp.Integer(0)
    P = H + 4 * p / (1 - p)
    c_gam = L * alpha**2 * p / ((1 - p) * kappa)
    c_D = alpha / 2 * (L + eta) ** 2 + L * alpha**2 * (1 - p) * eta**2 / (p * kappa)
    n1 = L * alpha**2 * sigma**2 / (2 * K * (1 - p))
    c_prime = c_D + 2 * L**2 * c_gam
    rho_D = 2 * alpha**2 * (H - 1) * (L**2 * P + 2 * eta**2 * (1 - p) / p)
    loss = 2 * c_gam + 3 * alpha**2 * (H - 1) * P * c_prime
    q_parts = (
        H * n1,
        H * 2 * chi * c_gam * zeta**2,
        H * 3 * alpha**2 * (H - 1) * P * c_prime * zeta**2,
        sp.Rational(3, 2) * c_prime * alpha**2 * sigma**2 * H * (H - 1) / (1 - p),
    )
    return {
        "kappa": kappa,
        "chi": chi,
        "P": P,
        "c_Gam": c_gam,
        "c_D": c_D,
        "n1": n1,
        "c_prime": c_prime,
        "rho_D": rho_D,
        "loss": loss,
        "omega": alpha / 2 - loss,
        "Q": sp.Add(*q_parts),
        "Q_parts": q_parts,
    }

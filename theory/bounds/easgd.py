"""EASGD (elastic averaging SGD): Wang and Joshi, Cooperative SGD, JMLR 22(213), 2021, Theorem 3.

Source: J. Wang and G. Joshi, JMLR 22(213):1-50, 2021 (read from the JMLR PDF), eqs. (4), (5), (11),
Theorem 1, Lemma 1 and Theorem 3.

Symbols. The paper writes ``eta`` for the workers' learning rate (project: ``alpha``),
``m`` for workers (``K``), ``tau`` for the period (``H``), ``K`` for iterations (``T``). Two
more paper symbols clash with project names and are kept *out* of the project's symbols:

* the paper's elastic coefficient ``alpha_e`` (EASGD's ``alpha``; the project's pull rate
  ``eta`` plays a similar role in PALSGD but is a different parameter): every ``H`` steps
  ``x_i <- x_i - alpha_e (x_i - z)`` and ``z <- (1 - K alpha_e) z + K alpha_e mean_i x_i``.
  Theorem 3 fixes ``alpha_e = 2/(K+2)`` (Lemma 1: the value that minimises the spectral
  quantity below), so the bound does not depend on any pull parameter;
* the paper's spectral quantity ``zeta = max(|1 - alpha_e|, |1 - (K+1) alpha_e|)`` of the
  mixing matrix ``W_alpha`` (not the project's heterogeneity ``zeta``); at ``alpha_e =
  2/(K+2)`` it equals ``K/(K+2)``.

EASGD is the framework ``A(tau, W_alpha, v = 1)`` (one auxiliary variable, the centre ``z``),
so the effective step of the averaged model ``u = (sum_i x_i + z)/(K+1)`` is
``eta_eff = K alpha/(K+1)``.
"""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.assumptions import A1_SMOOTH, A2_NOISE, A3_IID, A4_LOWER_BOUND, INNER_SGD
from theory.bound import Bound, Condition
from theory.bounds import register

__all__ = [
    "EASGD",
    "ELASTIC_ALPHA",
    "SPECTRAL_ZETA",
    "effective_step",
    "theorem1_iid",
    "theorem3_expression",
    "theorem3_C",
    "condition_expression",
]

#: Lemma 1's elastic coefficient ``alpha_e = 2/(K+2)`` used by Theorem 3.
ELASTIC_ALPHA = 2 / (S.K + 2)
#: the mixing matrix's spectral quantity at that coefficient: ``max(|1 - a|, |1 - (K+1) a|)``.
SPECTRAL_ZETA = sp.Max(sp.Abs(1 - ELASTIC_ALPHA), sp.Abs(1 - (S.K + 1) * ELASTIC_ALPHA))


def effective_step(v: int | sp.Expr = 1) -> sp.Expr:
    """``eta_eff = K alpha / (K + v)`` (Cooperative SGD, averaged-model update)."""
    return S.K * S.alpha / (S.K + v)


def theorem1_iid(
    spectral_zeta: sp.Expr, v: int | sp.Expr
) -> tuple[sp.Expr, sp.core.relational.Relational]:
    """Theorem 1 (i.i.d., beta = 0) of Cooperative SGD for ``A(H, W, v)`` in project symbols.

    Returns ``(bound, condition)`` with ``spectral_zeta`` the mixing matrix's spectral
    quantity ``max(|lambda_2(W)|, |lambda_{K+v}(W)|) < 1``:

    bound: ``2 F0/(eta_eff T) + eta_eff L sigma^2/K
    + eta_eff^2 L^2 sigma^2 ((1+zeta_s^2)/(1-zeta_s^2) H - 1) (1 + v/K)^2``;
    condition: ``eta_eff L + 5 eta_eff^2 L^2 [(1 + v/K) H/(1 - zeta_s)]^2 <= 1``.
    """
    e = effective_step(v)
    L, sig, K, H, T, F0 = S.L, S.sigma, S.K, S.H, S.T, S.F0
    z = spectral_zeta
    bound = (
        2 * F0 / (e * T)
        + e * L * sig**2 / K
        + e**2 * L**2 * sig**2 * ((1 + z**2) / (1 - z**2) * H - 1) * (1 + v / K) ** 2
    )
    cond = sp.Le(e * L + 5 * e**2 * L**2 * ((1 + v / K) * H / (1 - z)) ** 2, 1)
    return bound, cond


def theorem3_C() -> sp.Expr:
    """Theorem 3's constant ``C = 1 + 2 (1 + 1/K)^2``."""
    return 1 + 2 * (1 + 1 / S.K) ** 2


def theorem3_expression() -> sp.Expr:
    """Theorem 3's bound in project symbols.

    ``2 F0/(eta_eff T) + eta_eff L sigma^2/K + (1/2) eta_eff^2 L^2 sigma^2 (K+1) [1 + C (H-1)]``
    with ``eta_eff = K alpha/(K+1)`` and ``C`` from :func:`theorem3_C`.
    """
    e = effective_step(1)
    L, sig, K, H, T, F0 = S.L, S.sigma, S.K, S.H, S.T, S.F0
    return (
        2 * F0 / (e * T)
        + e * L * sig**2 / K
        + sp.Rational(1, 2) * e**2 * L**2 * sig**2 * (K + 1) * (1 + theorem3_C() * (H - 1))
    )


def condition_expression() -> sp.Expr:
    """Left side of the step condition: ``K alpha L/(K+1) + (5/4) alpha^2 L^2 H^2 (K+2)^2``.

    This is Theorem 1's ``eta_eff L + 5 eta_eff^2 L^2 [(1 + v/K) H/(1 - zeta_s)]^2`` at
    ``v = 1``, ``zeta_s = K/(K+2)``, ``eta_eff = K alpha/(K+1)`` (the tests check the algebra
    against :func:`theorem1_iid`).
    """
    a, L, K, H = S.alpha, S.L, S.K, S.H
    return K * a * L / (K + 1) + sp.Rational(5, 4) * a**2 * L**2 * H**2 * (K + 2) ** 2


EASGD = register(
    Bound(
        name="easgd",
        title="EASGD, elastic coefficient 2/(K+2), i.i.d. data (Wang-Joshi Thm. 3)",
        expression=theorem3_expression(),
        conditions=(
            Condition(
                "step",
                sp.Le(condition_expression(), 1),
                "eta_eff L + 5 eta_eff^2 L^2 [(1+1/K) H/(1-zeta_s)]^2 <= 1 with eta_eff = "
                "K alpha/(K+1), zeta_s = K/(K+2) (Theorem 1's condition, v = 1)",
            ),
        ),
        assumptions=(A1_SMOOTH, A2_NOISE, A3_IID, A4_LOWER_BOUND, INNER_SGD),
        provenance=(
            "Wang & Joshi, Cooperative SGD, JMLR 22(213):1-50, 2021, Theorem 3 (EASGD as "
            "A(tau, W_alpha, 1) with alpha_e = 2/(m+2) from Lemma 1, eta_eff = m eta/(m+1)); "
            "condition: Theorem 1 with v = 1 and spectral zeta = m/(m+2); paper symbols "
            "eta, m, tau, K -> alpha, K, H, T"
        ),
        algorithm="easgd",
        recommended_step=(S.K + 1) / S.K * sp.sqrt(S.K / S.T) / S.L,
        notes=(
            "EASGD with elastic coefficient alpha_e = 2/(K+2) applied every H steps, centre "
            "variable z updated symmetrically; the bound is on the average of "
            "E||grad f(u_t)||^2 with u_t = (sum_k x_k + z)/(K+1) (centre included), not the "
            "workers' mean. alpha is each worker's learning rate; eta_eff = K alpha/(K+1). "
            "The source note gives Theorem 3's bound but not its step condition; the condition "
            "encoded here is Theorem 1's general condition at v = 1, spectral zeta = K/(K+2). "
            "The requirement alpha_e < 2/(K+1) for a stable mixing matrix holds for "
            "alpha_e = 2/(K+2) at every K. Theorem 3's third term (C = 1 + 2(1+1/K)^2) is "
            "larger than Theorem 1's general term evaluated at the same W (coefficient of "
            "H-1: (K^2+2K+2)/K^2); both are read, not re-derived. The recommended step is "
            "Corollary 1's (eta_eff = sqrt(K/T)/L). i.i.d. data only."
        ),
    )
)

"""Local SGD (periodic averaging): Wang and Joshi, Cooperative SGD, JMLR 22(213), 2021.

Source: J. Wang and G. Joshi, "Cooperative SGD: A Unified Framework for the Design and
Analysis of Local-Update SGD Algorithms", JMLR 22(213):1-50, 2021 (read from the JMLR PDF).

Translation of the paper's symbols to the project's:

=====================  ==========================================  =============
paper                  meaning                                     project
=====================  ==========================================  =============
``eta``                learning rate of every worker               ``alpha``
``m``                  number of workers                           ``K``
``tau``                local steps between averaging               ``H``
``K``                  total iterations                            ``T``
``kappa^2``            heterogeneity ``(1/m) sum ||grad F_i - grad F||^2``  ``zeta^2``
``F(x_1) - F_inf``     initial gap                                 ``F0``
=====================  ==========================================  =============

PSASGD (periodic simple-averaging SGD) is Local SGD with plain averaging every ``H`` steps:
the framework ``A(tau, W, v)`` with ``W = J = 11^T/m`` and no auxiliary variable (``v = 0``),
so ``eta_eff = eta``. The averaged model ``u_k`` is the mean of the workers' iterates.

* :data:`LOCAL_SGD_IID` is Corollary 2 (i.i.d. data, eq. (17) specialised to PSASGD).
* :data:`LOCAL_SGD_NONIID` is Theorem 2 (non-i.i.d.) specialised to PSASGD.

Both are encoded as read; neither is re-derived here (the ``p = 0`` case of the project's
PALSGD theorem re-derives Local SGD independently).
"""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.assumptions import (
    A1_SMOOTH,
    A2_NOISE,
    A3_HETEROGENEITY,
    A3_IID,
    A4_LOWER_BOUND,
    INNER_SGD,
    OUTER_AVERAGING,
    Assumption,
)
from theory.bound import Bound, Condition
from theory.bounds import register

__all__ = [
    "HETEROGENEOUS_LOCAL_SGD",
    "LOCAL_SGD_IID",
    "LOCAL_SGD_NONIID",
    "iid_expression",
    "noniid_drift_coefficient",
    "noniid_expression",
    "recommended_step",
]

_SOURCE = "Wang & Joshi, Cooperative SGD, JMLR 22(213):1-50, 2021"

#: the hypotheses of Local SGD with heterogeneous data: A1-A4 (smoothness, noise,
#: heterogeneity, lower bound), plain SGD inside, plain averaging every H steps. Shared by
#: :data:`LOCAL_SGD_NONIID` and the project's own PALSGD bounds (:mod:`theory.bounds.palsgd`),
#: which add their coin assumption.
HETEROGENEOUS_LOCAL_SGD: tuple[Assumption, ...] = (
    A1_SMOOTH,
    A2_NOISE,
    A3_HETEROGENEITY,
    A4_LOWER_BOUND,
    INNER_SGD,
    OUTER_AVERAGING,
)


def iid_expression() -> sp.Expr:
    """Corollary 2 bound: ``2 F0/(alpha T) + alpha L sigma^2/K + alpha^2 L^2 sigma^2 (H - 1)``."""
    a, L, sig, K, H, T, F0 = S.alpha, S.L, S.sigma, S.K, S.H, S.T, S.F0
    return 2 * F0 / (a * T) + a * L * sig**2 / K + a**2 * L**2 * sig**2 * (H - 1)


def noniid_drift_coefficient() -> sp.Expr:
    """Theorem 2's ``C`` for PSASGD: ``6 alpha^2 L^2 H (H - 1)``."""
    return 6 * S.alpha**2 * S.L**2 * S.H * (S.H - 1)


def noniid_expression() -> sp.Expr:
    """Theorem 2 for PSASGD: ``2 * [Corollary 2 bound] + C zeta^2``."""
    return 2 * iid_expression() + noniid_drift_coefficient() * S.zeta**2


def recommended_step() -> sp.Expr:
    """Corollary 2's step ``alpha = sqrt(K/T) / L`` (valid when ``10 K H^2 <= T``)."""
    return sp.sqrt(S.K / S.T) / S.L


LOCAL_SGD_IID = register(
    Bound(
        name="local_sgd_iid",
        title="Local SGD (PSASGD), i.i.d. data (Wang-Joshi Cor. 2)",
        expression=iid_expression(),
        conditions=(
            Condition(
                "step",
                sp.Le(S.alpha * S.L + S.alpha**2 * S.L**2 * S.H * (S.H - 1), 1),
                "alpha L + alpha^2 L^2 H (H-1) <= 1 (Cor. 2)",
            ),
        ),
        assumptions=(A1_SMOOTH, A2_NOISE, A3_IID, A4_LOWER_BOUND, INNER_SGD, OUTER_AVERAGING),
        provenance=(
            f"{_SOURCE}, Corollary 2 (PSASGD: A(tau, J, 0), i.e. eq. (17) of Theorem 1 with "
            "W = J, v = 0, beta = 0); paper symbols eta, m, tau, K -> alpha, K, H, T"
        ),
        algorithm="local_sgd",
        recommended_step=recommended_step(),
        notes=(
            "Bounds the average over T steps of E||grad f(u_t)||^2, u_t the mean of the "
            "workers' iterates (a virtual sequence between syncs). Needs identically "
            "distributed data (zeta = 0), plain SGD inside and plain averaging every H steps "
            "(gamma = 1, mu = 0). With alpha = sqrt(K/T)/L and 10 K H^2 <= T it gives "
            "(2 L F0 + sigma^2)/sqrt(K T) + K (H-1) sigma^2/T, so linear speed-up needs "
            "H = O(T^(1/2) K^(-3/2)). At H = 1 it is the minibatch-SGD bound 'sgd'."
        ),
    )
)

LOCAL_SGD_NONIID = register(
    Bound(
        name="local_sgd_noniid",
        title="Local SGD (PSASGD), heterogeneous data (Wang-Joshi Thm. 2)",
        expression=noniid_expression(),
        conditions=(
            Condition("step", sp.Le(S.alpha * S.L, 1), "alpha L <= 1 (Thm. 2)"),
            Condition(
                "drift",
                sp.Le(noniid_drift_coefficient(), sp.Rational(1, 2)),
                "C = 6 alpha^2 L^2 H (H-1) <= 1/2 (Thm. 2, PSASGD)",
            ),
        ),
        assumptions=HETEROGENEOUS_LOCAL_SGD,
        provenance=(
            f"{_SOURCE}, Theorem 2 (non-IID) specialised to PSASGD (W = J, v = 0, spectral "
            "zeta = 0, so C = 6 eta^2 L^2 tau (tau-1)); bound = 2 x [eq. (17)] + C kappa^2; "
            "paper symbols eta, m, tau, K, kappa -> alpha, K, H, T, zeta"
        ),
        algorithm="local_sgd",
        recommended_step=recommended_step(),
        notes=(
            "Encoded as read from the PDF text extraction: the overall factor 2 in front of "
            "the i.i.d. bound could not be rechecked against a typeset copy of the paper; if "
            "it is absent the published bound is tighter than this one. The conditions are "
            "the two stated in Theorem 2 (alpha L <= 1 and C <= 1/2); Corollary 2's "
            "i.i.d. condition is not part of this statement. With alpha = sqrt(K/T)/L the "
            "heterogeneity term 6 K H (H-1) zeta^2/T limits linear speed-up to "
            "H = O(T^(1/4) K^(-3/4)), as in the paper's Table 1."
        ),
    )
)

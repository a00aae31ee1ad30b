"""Minibatch SGD / DDP: Ghadimi and Lan (2013), constant-step average-iterate form.

Statement (Ghadimi and Lan, SIAM J. Optim. 23(4) 2013, eq. (2.11), constant steps
``gamma_k = alpha``, summed descent lemma): for L-smooth ``f`` bounded below and an
unbiased oracle with variance ``sigma^2``,

    sum_t (alpha - L alpha^2 / 2) E||grad f(x_t)||^2 <= F0 + (L sigma^2 / 2) T alpha^2 .

With ``alpha <= 1/L`` (so ``alpha - L alpha^2/2 >= alpha/2``) and ``K`` workers averaging
their gradients (variance ``sigma^2 / K``):

    (1/T) sum_t E||grad f(x_t)||^2 <= 2 F0 / (alpha T) + L alpha sigma^2 / K .

This equals the "fully synchronous SGD" part of Wang and Joshi (JMLR 2021, eq. (17)).
"""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.assumptions import A1_SMOOTH, A2_NOISE, A4_LOWER_BOUND, INNER_SGD
from theory.bound import Bound, Condition
from theory.bounds import register

__all__ = ["SGD", "sgd_expression"]


def sgd_expression() -> sp.Expr:
    """``2 F0/(alpha T) + L alpha sigma^2 / K``."""
    return 2 * S.F0 / (S.alpha * S.T) + S.L * S.alpha * S.sigma**2 / S.K


SGD = register(
    Bound(
        name="sgd",
        title="Minibatch SGD / DDP over K workers (Ghadimi-Lan, constant step)",
        expression=sgd_expression(),
        conditions=(Condition("step", sp.Le(S.alpha * S.L, 1), "alpha <= 1/L"),),
        assumptions=(A1_SMOOTH, A2_NOISE, A4_LOWER_BOUND, INNER_SGD),
        provenance=(
            "Ghadimi & Lan, SIAM J. Optim. 23(4):2341-2368, 2013, eq. (2.11) with constant "
            "step and alpha <= 1/L; equals the fully-synchronous term of Wang & Joshi, "
            "JMLR 22(213) 2021, eq. (17)"
        ),
        algorithm="sgd",
        recommended_step=sp.sqrt(2 * S.F0 * S.K / (S.L * S.sigma**2 * S.T)),
        notes=(
            "Heterogeneity does not enter: gradients are averaged over all workers every step. "
            "The recommended step sqrt(2 F0 K/(L sigma^2 T)) balances the two terms; it meets "
            "alpha <= 1/L once T >= 2 F0 K L/sigma^2 (before that the optimum is alpha = 1/L)."
        ),
    )
)

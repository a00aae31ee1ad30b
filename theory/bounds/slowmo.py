"""SlowMo with an all-reduce SGD base optimizer: Wang, Tantia, Ballas, Rabbat (ICLR 2020).

Statement (Theorem 1, eq. (5)). ``m`` workers run ``tau`` base-optimizer steps
``x_{t,k+1} = x_{t,k} - gamma d_{t,k}`` per outer iteration, then average and take the slow
momentum step ``u_{t+1} = beta u_t + (x_{t,0} - x_{t,tau})/gamma``,
``x_{t+1,0} = x_{t,0} - alpha gamma u_{t+1}`` (eqs. (2)-(3)), ``u_0 = 0``. Under L-smoothness of
every ``f_i`` (Assumption 1), noise variance ``sigma^2`` (Assumption 2) and
``E||d_{t,k} - E_{t,k} d_{t,k}||^2 <= V`` (Assumption 3), if
``alpha gamma/(1 - beta) = sqrt(m/(tau T))`` and
``tau T >= m L^2 (1 + sqrt(3) max{3 tau (1 - beta - alpha)/alpha, 4 tau beta/(1 - beta), 1})``:

    (1/(tau T)) sum_{t,k} E||grad f(x_{t,k})||^2 <= (2 (f(x_{0,0}) - f_inf) + m V L)/sqrt(m tau T)
        + (1/(tau T)) sum_{t,k} E||grad f(x_{t,k}) - E_{t,k} d_{t,k}||^2
        + (4 m V L^2 (tau - 1)/(tau T)) ((1 - beta)/alpha - 1)^2
        + (8 m V L^2 tau/(tau T)) beta^2/(1 - beta^2).

The second term ("effect of the base optimizer") is a property of the trajectory. It is
zero for the all-reduce SGD base (AR-SGD: the workers average their stochastic gradients at
the common point every step, so ``E_{t,k} d_{t,k} = grad f(x_{t,k})``), for which
``V = sigma^2/m`` (eq. (4)). That case is encoded here. For Local SGD as the base (BMUF,
Corollary 1) the main text states only ``O(1/sqrt(m tau T)) + O(m tau/T)``; its constants
are in an appendix that was not available, so it is not encoded.

As printed in the main text (the ICLR 2020 version) the theorem is false inside its own
conditions (:mod:`theory.verify.findings`, docs/verification.md, section 7). Beside it,
``slowmo_ar_sgd_corrected`` encodes its likely intended reading: the horizon condition
squared, ``tau T >= m L^2 (1 + sqrt(3) max{...})^2`` (what a step condition
``alpha gamma/(1 - beta) L (1 + sqrt(3) max{...}) <= 1`` gives at the theorem's step), and
the slow rate at most 1. It is the project's reading, not a published statement, and it is
verified like every other bound.

Project notation: ``m -> K``, ``tau -> H``, ``tau T -> T`` (total steps), the fast rate
``gamma -> alpha`` (inner ``lr``), the slow rate ``alpha -> gamma``, the slow momentum
``beta -> mu``, ``f(x_{0,0}) - f_inf -> F0``. The slow momentum step is the project's outer
``"sgd"`` with momentum ``mu`` (PyTorch SGD momentum on the outer gradient ``z - xbar``).
"""

from __future__ import annotations

import sympy as sp

from theory import symbols as S
from theory.assumptions import A1_SMOOTH, A2_NOISE, A4_LOWER_BOUND, INNER_SGD
from theory.bound import Bound, Condition
from theory.bounds import register

__all__ = [
    "SLOWMO_AR_SGD",
    "SLOWMO_AR_SGD_CORRECTED",
    "slowmo_ar_sgd_expression",
    "slowmo_conditions",
    "slowmo_step",
]

L, sigma, F0, K, H, T = S.L, S.sigma, S.F0, S.K, S.H, S.T
alpha, gamma, mu = S.alpha, S.gamma, S.mu


def slowmo_step() -> sp.Expr:
    """The inner step the theorem is stated at: ``alpha gamma/(1 - mu) = sqrt(K/T)``."""
    return (1 - mu) / gamma * sp.sqrt(K / T)


def slowmo_ar_sgd_expression() -> sp.Expr:
    """Eq. (5) with the base-optimizer term 0 and ``V = sigma^2/K`` (``K V = sigma^2``)."""
    return (
        (2 * F0 + sigma**2 * L) / sp.sqrt(K * T)
        + 4 * sigma**2 * L**2 * (H - 1) / T * ((1 - mu) / gamma - 1) ** 2
        + 8 * sigma**2 * L**2 * H / T * mu**2 / (1 - mu**2)
    )


def _horizon_need(squared: bool) -> sp.Expr:
    """``K L^2 (1 + sqrt(3) max{3 H (1 - mu - gamma)/gamma, 4 H mu/(1 - mu), 1})``, squared
    factor when ``squared``."""
    factor = 1 + sp.sqrt(3) * sp.Max(3 * H * (1 - mu - gamma) / gamma, 4 * H * mu / (1 - mu), 1)
    return K * L**2 * (factor**2 if squared else factor)


def slowmo_conditions(*, corrected: bool = False) -> tuple[Condition, ...]:
    """The conditions of Theorem 1 as printed, or (``corrected``) with the horizon condition
    squared and the slow rate ``gamma <= 1``."""
    conds = (
        Condition(
            "step_hi",
            sp.Le(alpha * gamma / (1 - mu), sp.sqrt(K / T)),
            "alpha gamma/(1 - mu) = sqrt(K/T): the theorem holds at this one step (upper side)",
        ),
        Condition(
            "step_lo",
            sp.Le(sp.sqrt(K / T), alpha * gamma / (1 - mu)),
            "alpha gamma/(1 - mu) = sqrt(K/T) (lower side)",
        ),
        Condition(
            "horizon",
            sp.Le(_horizon_need(corrected), T),
            "T >= K L^2 (1 + sqrt(3) max{3 H (1 - mu - gamma)/gamma, 4 H mu/(1 - mu), 1})"
            + ("^2 (squared: the likely intended reading)" if corrected else ""),
        ),
        Condition("momentum", sp.Lt(mu, 1), "slow momentum 0 <= mu < 1"),
    )
    if corrected:
        conds += (Condition("slow_rate", sp.Le(gamma, 1), "slow rate gamma <= 1"),)
    return conds


SLOWMO_AR_SGD = register(
    Bound(
        name="slowmo_ar_sgd",
        title="SlowMo over all-reduce SGD (Wang, Tantia, Ballas, Rabbat, ICLR 2020, Thm 1)",
        expression=slowmo_ar_sgd_expression(),
        conditions=slowmo_conditions(),
        assumptions=(A1_SMOOTH, A2_NOISE, A4_LOWER_BOUND, INNER_SGD),
        provenance=(
            "Wang, Tantia, Ballas & Rabbat, SlowMo: Improving Communication-Efficient "
            "Distributed SGD with Slow Momentum, ICLR 2020, Theorem 1, eq. (5), with the "
            "base-optimizer term zero and V = sigma^2/m (eq. (4)) for the AR-SGD base; "
            "reduces to the AR-SGD rate at tau = 1, alpha = 1, beta = 0 (Sec. 5) and to "
            "Corollary 2, eq. (7), at m = 1, beta = 0"
        ),
        algorithm="slowmo_ar_sgd",
        recommended_step=slowmo_step(),
        refuted=(
            "a known finding (theory.verify.findings): Theorem 1 as printed in the paper's "
            "main text is false at two designs inside its conditions (heavy-ball GD at H = 1: "
            "ratio 1.345; diverging inner steps at alpha L = 3.1); docs/verification.md, "
            "section 7; the likely corrected reading is slowmo_ar_sgd_corrected"
        ),
        notes=(
            "Stated at a single inner step (alpha gamma/(1 - mu) = sqrt(K/T)), as two conditions; "
            "verify pins every design to that step. The base optimizer synchronises every step "
            "(an outer heavy-ball step every H steps on top of DDP): verify measures it exactly "
            "on quadratics as Local SGD with one worker, noise sigma^2/K and outer heavy ball "
            "(the simulator does not run it, so there is no Monte Carlo on nonconvex problems). "
            "As stated in the paper's main text (and encoded) it is shown false inside its "
            "conditions (heavy-ball GD at H = 1, mu = 0.95, T = 133: ratio 1.345; inner steps "
            "at alpha L = 3.1 diverging); with the horizon condition squared and gamma <= 1 no "
            "violation is found (slowmo_ar_sgd_corrected; docs/verification.md, section 7). "
            "With gamma = 1 - mu the (H - 1) term vanishes."
        ),
    )
)

SLOWMO_AR_SGD_CORRECTED = register(
    Bound(
        name="slowmo_ar_sgd_corrected",
        title=(
            "SlowMo over all-reduce SGD, Theorem 1 with the horizon condition squared and "
            "slow rate <= 1 (the likely intended reading)"
        ),
        expression=slowmo_ar_sgd_expression(),
        conditions=slowmo_conditions(corrected=True),
        assumptions=(A1_SMOOTH, A2_NOISE, A4_LOWER_BOUND, INNER_SGD),
        provenance=(
            "Wang, Tantia, Ballas & Rabbat, ICLR 2020, Theorem 1, eq. (5) (AR-SGD base, "
            "V = sigma^2/m) with two changes made here: the horizon condition squared and "
            "the slow rate at most 1; the printed statement is false (slowmo_ar_sgd, "
            "docs/verification.md, section 7)"
        ),
        algorithm="slowmo_ar_sgd",
        recommended_step=slowmo_step(),
        notes=(
            "The project's reading of Theorem 1, not a published statement: a typo (the "
            "horizon condition without its square) plus an implicit condition (gamma <= 1; "
            "with the square alone the outer step overshoots for gamma near 2). palsgd "
            "verify finds no violation (worst ratio about 0.6). Stated at one inner step, as "
            "slowmo_ar_sgd."
        ),
    )
)

"""Oracle facts of the PALSGD step (L1-L5c): mean, second moment, variance, averaging.

One function per lemma, in the order of ``docs/palsgd_proof.md``. Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.lemmas import (
    Branches,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    borrow,
    dot,
    expect,
    mean_zero_two_point,
    sqnorm,
    vector,
)
from theory.proofs.palsgd.notation import (
    DOMAIN,
    AvgVar,
    D,
    Gam,
    K,
    Vbar,
    W,
    eta,
    p,
    s2,
    sigma,
)


# ----------------------------------------------------------------------------- oracle
def _coin() -> Branches:
    return Branches.of((1 - p, 0), (p, 1))


def _oracle(b, e, g, xi):
    """PALSGD step direction ``G`` (``x+ = x - alpha G``) for coin ``b`` and noise ``xi``."""
    if b == 1:
        return eta * e / p
    return (g + xi) / (1 - p)


def _var_formula(e, g, noise2):
    """``p(1-p)||eta e/p - g/(1-p)||^2 + noise2/(1-p)`` (I2), written without 0/0 at p = 0."""
    return (
        (1 - p) * eta**2 * sqnorm(e) / p
        + p * sqnorm(g) / (1 - p)
        - 2 * eta * dot(e, g)
        + noise2 / (1 - p)
    )


def _step_vectors():
    """The vectors of one worker's step: ``e = x - z``, ``g = grad f_k(x)``, the noise law."""
    e, g = vector("e"), vector("g")
    noise, _ = mean_zero_two_point("xi")
    return e, g, noise


def l1_oracle_mean() -> Lemma:
    """L1 (I1): the PALSGD direction is unbiased for the gradient of the pulled objective."""
    e, g, noise = _step_vectors()
    return Identity(
        "L1",
        "Oracle mean (I1)",
        "E[G] = grad f_k(x) + eta (x - z): in expectation a PALSGD step is a gradient step of "
        "length alpha on h_z(x) = f_k(x) + (eta/2)||x - z||^2.",
        "Weighted sum of the pull branch (prob. p, direction eta e/p) and the gradient branch "
        "(prob. 1-p, direction g/(1-p)) with E xi = 0.",
        uses=("A2",),
        lhs=expect(lambda b, xi: _oracle(b, e, g, xi), _coin(), noise),
        rhs=g + eta * e,
    )


def l2_oracle_second_moment() -> Lemma:
    """L2: second moment of the direction (branch sum)."""
    e, g, noise = _step_vectors()
    return Identity(
        "L2",
        "Oracle second moment",
        "E||G||^2 = eta^2 ||e||^2 / p + (||grad f_k||^2 + E||xi||^2)/(1-p), e = x - z.",
        "Branch sum; the cross term 2<grad f_k, xi> has mean zero.",
        uses=("A2",),
        lhs=expect(lambda b, xi: sqnorm(_oracle(b, e, g, xi)), _coin(), noise),
        rhs=eta**2 * sqnorm(e) / p + (sqnorm(g) + expect(sqnorm, noise)) / (1 - p),
    )


def l3_oracle_variance() -> Lemma:
    """L3 (I2): the variance of the direction depends on the state."""
    e, g, noise = _step_vectors()
    m = g + eta * e
    return Identity(
        "L3",
        "Oracle variance (I2)",
        "E||G - E G||^2 = p(1-p)||eta e/p - grad f_k/(1-p)||^2 + E||xi||^2/(1-p): the "
        "variance depends on the state (||e||^2 and ||grad f_k||^2).",
        "L2 minus the squared mean L1, expanded.",
        uses=("L1", "L2"),
        lhs=expect(lambda b, xi: sqnorm(_oracle(b, e, g, xi) - m), _coin(), noise),
        rhs=_var_formula(e, g, expect(sqnorm, noise)),
    )


def l4_variance_bound() -> Lemma:
    """L4: the state-dependent variance bounded by ||e||^2, ||grad f_k||^2 and sigma^2."""
    e, g = vector("e"), vector("g")
    return Inequality(
        "L4",
        "Oracle variance bound",
        "E||G - E G||^2 <= 2(1-p) eta^2 ||e||^2/p + 2p ||grad f_k||^2/(1-p) + sigma^2/(1-p).",
        "||a - b||^2 <= 2||a||^2 + 2||b||^2 applied to a = eta e/p, b = grad f_k/(1-p) inside "
        "L3 (the slack is p(1-p)||eta e/p + grad f_k/(1-p)||^2), and A2 (s^2 <= sigma^2).",
        uses=("L3", "A2"),
        lhs=_var_formula(e, g, s2),
        rhs=2 * (1 - p) * eta**2 * sqnorm(e) / p + 2 * p * sqnorm(g) / (1 - p) + sigma**2 / (1 - p),
        hypotheses=(Hypothesis("A2", sigma**2 - s2, "assumption A2: E||xi||^2 = s^2 <= sigma^2"),),
        multipliers={"A2": 1 / (1 - p)},
        nonneg_terms=(p * (1 - p) * sqnorm(eta * e / p + g / (1 - p)),),
        domain=DOMAIN,
    )


def l5_averaged_direction(coins: str) -> Lemma:
    """L5: second moment of the averaged direction over K = 2 workers (branch sum)."""
    e1, e2, g1, g2 = vector("e1"), vector("e2"), vector("g1"), vector("g2")
    n1, _ = mean_zero_two_point("xi1")
    n2, _ = mean_zero_two_point("xi2")
    v1, v2 = expect(sqnorm, n1), expect(sqnorm, n2)
    mbar = (g1 + eta * e1 + g2 + eta * e2) / 2
    if coins == "independent":

        def sq(b1, b2, x1, x2):
            return sqnorm((_oracle(b1, e1, g1, x1) + _oracle(b2, e2, g2, x2)) / 2)

        lhs = expect(sq, _coin(), _coin(), n1, n2)
        rhs = sqnorm(mbar) + (_var_formula(e1, g1, v1) + _var_formula(e2, g2, v2)) / 4
        statement = (
            "Independent coins: E||Gbar||^2 = ||mbar||^2 + (1/K^2) sum_k Var_k, Gbar = "
            "(1/K) sum_k G_k, mbar = E Gbar, Var_k the variance L3 of worker k."
        )
        proof = (
            "Conditionally on the past, the K directions are independent (independent coins "
            "and noise), so the cross terms of the centred directions vanish. Checked for K = 2 "
            "by the branch sum over both coins and both noises."
        )
    else:
        ebar, gbar = (e1 + e2) / 2, (g1 + g2) / 2

        def sq(b, x1, x2):
            return sqnorm((_oracle(b, e1, g1, x1) + _oracle(b, e2, g2, x2)) / 2)

        lhs = expect(sq, _coin(), n1, n2)
        rhs = sqnorm(mbar) + _var_formula(ebar, gbar, (v1 + v2) / 2 / 2)
        statement = (
            "Shared coins: E||Gbar||^2 = ||mbar||^2 + p(1-p)||eta ebar/p - gbar/(1-p)||^2 + "
            "(1/K^2) sum_k E||xi_k||^2/(1-p), with ebar = xbar - z, gbar = (1/K) sum_k grad f_k(x_k)."
        )
        proof = (
            "With one coin for all workers, Gbar is itself a PALSGD direction for (ebar, gbar) "
            "whose noise (1/K) sum_k xi_k has second moment (1/K^2) sum_k E||xi_k||^2. Checked for "
            "K = 2 by the branch sum over the shared coin and both noises."
        )
    return Identity(
        "L5",
        "Averaged direction (" + coins + " coins)",
        statement,
        proof,
        uses=("L1", "L3", "A2"),
        lhs=lhs,
        rhs=rhs,
    )


def l5c_averaged_variance(co: dict[str, sp.Expr], coins: str, l4: Lemma) -> Lemma:
    """L5c: Vbar <= [2(1-p) eta^2 D/p + 2p Gam/(1-p)]/kappa + sigma^2/(K(1-p)); uses L4's object."""
    kappa = co["kappa"]
    rhs = (2 * (1 - p) * eta**2 * D / p + 2 * p * Gam / (1 - p)) / kappa + sigma**2 / (K * (1 - p))
    if coins == "independent":
        hyps = (
            Hypothesis("L5", Vbar - AvgVar / K, "L5: Vbar = (1/K^2) sum_k Var_k", equality=True),
            # L4 averaged over workers: AvgVar = (1/K) sum_k Var_k, ||e||^2 -> D, ||g||^2 -> Lam
            borrow(l4, "L4", AvgVar, {"e": D, "g": Gam}),
        )
        mult = {"L5": -1, "L4": 1 / K}
        proof = "Average L4 over the workers and divide by K (L5)."
    else:
        hyps = (
            # L4 applied to (ebar, gbar) with noise second moment <= sigma^2/K (L5)
            borrow(l4, "L4", Vbar, {"e": W, "g": Gam}, subs={sigma: sigma / sp.sqrt(K)}),
            Hypothesis("L8", D - W, "L8: D = C + W >= W"),
        )
        mult = {"L4": 1, "L8": 2 * (1 - p) * eta**2 / p}
        proof = (
            "L5 says Gbar is a PALSGD direction for (ebar, gbar) with noise variance at most "
            "sigma^2/K; apply L4 to it, then W <= D (L8)."
        )
    return Inequality(
        "L5c",
        "Variance of the averaged direction",
        "Vbar = E||Gbar - mbar||^2 <= [2(1-p) eta^2 D/p + 2p Gam/(1-p)]/kappa + sigma^2/(K(1-p)), "
        "kappa = K for independent coins and 1 for shared coins.",
        proof,
        uses=("L4", "L5", "L8"),
        lhs=Vbar,
        rhs=rhs,
        hypotheses=hyps,
        multipliers=mult,
        domain=DOMAIN,
    )

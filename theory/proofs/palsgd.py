"""The PALSGD convergence theorem (derived here) as a chain of machine-checked lemmas.

The paper's own theorem text (Naganuma et al., TMLR 2025) was not available to the
project; this theorem and its proof are the project's own derivation. The proof is written
out in ``docs/palsgd_proof.md``; each numbered lemma there is one object built here, and
:func:`theorem` assembles the bound and its step-size conditions *from those objects*
(the bound is the right-hand side of the last lemma, the conditions are the condition
hypotheses the certificates use), so the statement is never typed in twice.

Setting (Theorem 1 of the docs). ``K`` workers, ``f = (1/K) sum_k f_k``; A1 every ``f_k``
is L-smooth; A2 ``E g_k = grad f_k``, ``E||g_k - grad f_k||^2 <= sigma^2``, independent
across workers and steps; A3 ``(1/K) sum_k ||grad f_k - grad f||^2 <= zeta^2``; A4
``F0 = f(x_0) - f_star``. PALSGD with inner SGD and outer averaging: within a round the
anchor ``z`` is fixed and every worker, from ``x_k = z``, repeats ``H`` times
``x <- x - (alpha*eta/p)(x - z)`` with probability ``p`` (pull) and
``x <- x - (alpha/(1-p)) g_k(x)`` otherwise; then ``z <- mean_k x_k``. Coins are
independent across workers (``coins="independent"``, the algorithm as described) or one
coin per step shared by all workers (``coins="shared"``, the authors' code). The bound is
on ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` with ``xbar_t = mean_k x_{k,t}``, ``T = R*H``.

Notation inside the proof (per step ``t`` of a round, all expectations total):
``Phi = ||grad f(xbar)||^2``; ``Lam = (1/K) sum_k ||grad f_k(x_k)||^2``;
``D = (1/K) sum_k ||x_k - z||^2`` (anchor distance); ``C = (1/K) sum_k ||x_k - xbar||^2``
(consensus error); ``W = ||xbar - z||^2``; ``Gam`` is ``Lam`` for independent coins and
``||(1/K) sum_k grad f_k(x_k)||^2`` for shared coins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np
import sympy as sp

from theory import symbols as S
from theory.bound import Condition
from theory.proofs.lemmas import (
    Branches,
    CheckResult,
    Cited,
    Domain,
    Family,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    SampledInequality,
    by_key,
    dot,
    expect,
    from_lemma,
    is_zero,
    mean_zero_two_point,
    sqnorm,
    vector,
)

__all__ = [
    "COINS",
    "PALSGDTheorem",
    "coefficients",
    "build_chain",
    "theorem",
    "local_sgd_theorem",
    "specialise_p0",
]

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
    }


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


def _oracle_lemmas() -> list[Lemma]:
    e, g = vector("e"), vector("g")
    noise, _ = mean_zero_two_point("xi")
    noise2 = expect(sqnorm, noise)
    m = g + eta * e

    def G(b, xi):
        return _oracle(b, e, g, xi)

    L1 = Identity(
        "L1",
        "Oracle mean (I1)",
        "E[G] = grad f_k(x) + eta (x - z): in expectation a PALSGD step is a gradient step of "
        "length alpha on h_z(x) = f_k(x) + (eta/2)||x - z||^2.",
        "Weighted sum of the pull branch (prob. p, direction eta e/p) and the gradient branch "
        "(prob. 1-p, direction g/(1-p)) with E xi = 0.",
        uses=("A2",),
        lhs=expect(G, _coin(), noise),
        rhs=m,
    )
    L2 = Identity(
        "L2",
        "Oracle second moment",
        "E||G||^2 = eta^2 ||e||^2 / p + (||grad f_k||^2 + E||xi||^2)/(1-p), e = x - z.",
        "Branch sum; the cross term 2<grad f_k, xi> has mean zero.",
        uses=("A2",),
        lhs=expect(lambda b, xi: sqnorm(G(b, xi)), _coin(), noise),
        rhs=eta**2 * sqnorm(e) / p + (sqnorm(g) + noise2) / (1 - p),
    )
    L3 = Identity(
        "L3",
        "Oracle variance (I2)",
        "E||G - E G||^2 = p(1-p)||eta e/p - grad f_k/(1-p)||^2 + E||xi||^2/(1-p): the "
        "variance depends on the state (||e||^2 and ||grad f_k||^2).",
        "L2 minus the squared mean L1, expanded.",
        uses=("L1", "L2"),
        lhs=expect(lambda b, xi: sqnorm(G(b, xi) - m), _coin(), noise),
        rhs=_var_formula(e, g, noise2),
    )
    L4 = Inequality(
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
    return [L1, L2, L3, L4]


def _averaging_lemma(coins: str) -> Lemma:
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


def _aggregate_variance_lemma(co: dict[str, sp.Expr], coins: str) -> Lemma:
    """L5c: Vbar <= [2(1-p) eta^2 D/p + 2p Gam/(1-p)]/kappa + sigma^2/(K(1-p))."""
    kappa = co["kappa"]
    rhs = (2 * (1 - p) * eta**2 * D / p + 2 * p * Gam / (1 - p)) / kappa + sigma**2 / (K * (1 - p))
    if coins == "independent":
        hyps = (
            Hypothesis("L5", Vbar - AvgVar / K, "L5: Vbar = (1/K^2) sum_k Var_k", equality=True),
            Hypothesis(
                "L4",
                2 * (1 - p) * eta**2 * D / p + 2 * p * Gam / (1 - p) + sigma**2 / (1 - p) - AvgVar,
                "L4 averaged over workers (AvgVar = (1/K) sum_k Var_k, Gam = Lam)",
            ),
        )
        mult = {"L5": -1, "L4": 1 / K}
        proof = "Average L4 over the workers and divide by K (L5)."
    else:
        hyps = (
            Hypothesis(
                "L4",
                2 * (1 - p) * eta**2 * W / p
                + 2 * p * Gam / (1 - p)
                + sigma**2 / (K * (1 - p))
                - Vbar,
                "L5 with L4 applied to (ebar, gbar); noise second moment <= sigma^2/K",
            ),
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


# ----------------------------------------------------------------------------- descent
def _descent_spot_check() -> tuple[bool, str]:
    """Descent lemma on random smooth test functions f(x) = sum_i a_i cos(<w_i, x> + c_i)."""
    rng = np.random.default_rng(20250101)
    worst = -np.inf
    for _ in range(200):
        n, d = 4, 3
        a = rng.normal(size=n)
        w = rng.normal(size=(n, d))
        c = rng.uniform(0, 2 * np.pi, size=n)
        lip = float(np.sum(np.abs(a) * np.sum(w**2, axis=1)))  # ||Hess f|| <= sum |a_i| ||w_i||^2
        x, y = rng.normal(size=(2, 50, d)) * 3

        def f(z, a=a, w=w, c=c):
            return np.cos(z @ w.T + c) @ a

        def grad(z, a=a, w=w, c=c):
            return -(np.sin(z @ w.T + c) * a) @ w

        gap = (
            f(y) - f(x) - np.sum(grad(x) * (y - x), axis=1) - lip / 2 * np.sum((y - x) ** 2, axis=1)
        )
        worst = max(worst, float(np.max(gap / (1 + np.abs(f(x))))))
    return (
        worst <= 1e-12,
        f"10000 random pairs on 200 random functions, max relative excess {worst:.2e}",
    )


def _descent_lemmas(co: dict[str, sp.Expr], coins: str) -> list[Lemma]:
    a, mv = vector("a"), vector("m")
    L6 = Cited(
        "L6",
        "Descent lemma",
        "If f is L-smooth, f(y) <= f(x) + <grad f(x), y - x> + (L/2)||y - x||^2 for all x, y.",
        "Integrate <grad f(x + s(y - x)) - grad f(x), y - x> over s in [0, 1] (A1).",
        uses=("A1",),
        reference="Nesterov, Introductory Lectures on Convex Optimization (2004), Lemma 1.2.3",
        spot_check=_descent_spot_check,
    )
    L7 = Identity(
        "L7",
        "Polarisation",
        "-alpha<a, m> + (L alpha^2/2)||m||^2 = -(alpha/2)||a||^2 - (alpha/2)(1 - alpha L)||m||^2 "
        "+ (alpha/2)||a - m||^2.",
        "2<a, m> = ||a||^2 + ||m||^2 - ||a - m||^2.",
        lhs=-alpha * dot(a, mv) + L * alpha**2 / 2 * sqnorm(mv),
        rhs=-alpha / 2 * sqnorm(a)
        - alpha / 2 * (1 - alpha * L) * sqnorm(mv)
        + alpha / 2 * sqnorm(a - mv),
    )
    vs = [vector(f"v{k}") for k in range(3)]
    vbar = (vs[0] + vs[1] + vs[2]) / 3
    L8 = Identity(
        "L8",
        "Mean-square decomposition (Jensen)",
        "(1/K) sum_k ||v_k||^2 = ||vbar||^2 + (1/K) sum_k ||v_k - vbar||^2. Consequences: "
        "D = C + W (v_k = x_k - z), so C <= D and W <= D; ||grad f(xbar) - (1/K) sum_k "
        "grad f_k(x_k)||^2 <= (1/K) sum_k ||grad f_k(xbar) - grad f_k(x_k)||^2 <= L^2 C (A1); "
        "(1/K) sum_k ||grad f_k(xbar)||^2 = Phi + (1/K) sum_k ||grad f_k(xbar) - grad f(xbar)||^2 "
        "<= Phi + zeta^2 (A3).",
        "Expand the squares; the cross term vanishes because sum_k (v_k - vbar) = 0. Checked for "
        "K = 3.",
        uses=("A1", "A3"),
        lhs=sum((sqnorm(v) for v in vs), sp.S.Zero) / 3,
        rhs=sqnorm(vbar) + sum((sqnorm(v - vbar) for v in vs), sp.S.Zero) / 3,
    )
    dl, w = vector("delta"), vector("w")
    Cs = sp.Symbol("C", nonnegative=True)
    L9 = Inequality(
        "L9",
        "Gradient gap",
        "||grad f(xbar) - mbar||^2 <= (L + eta)^2 D, mbar = (1/K) sum_k grad f_k(x_k) + eta(xbar - z).",
        "grad f(xbar) - mbar = delta - eta w with ||delta||^2 <= L^2 C (L8) and w = xbar - z; "
        "the certificate is ((L+eta)^2/L^2)(L^2 C - ||delta||^2) plus two squares; finally "
        "C + ||w||^2 = D (L8).",
        uses=("L8", "A1"),
        lhs=sqnorm(dl - eta * w),
        rhs=(L + eta) ** 2 * (Cs + sqnorm(w)),
        hypotheses=(Hypothesis("L8/A1", L**2 * Cs - sqnorm(dl), "||delta||^2 <= L^2 C"),),
        multipliers={"L8/A1": (L + eta) ** 2 / L**2},
        nonneg_terms=(
            eta * (2 * L + eta) / L**2 * sqnorm(dl + L**2 * w / (2 * L + eta)),
            2 * L * (L + eta) ** 2 / (2 * L + eta) * sqnorm(w),
        ),
        domain=DOMAIN,
    )
    va, vb = vector("a"), vector("b")
    L10a = Inequality(
        "L10a",
        "Two-term Young inequality",
        "||a + b||^2 <= 2||a||^2 + 2||b||^2.",
        "The slack is ||a - b||^2.",
        lhs=sqnorm(va + vb),
        rhs=2 * sqnorm(va) + 2 * sqnorm(vb),
        nonneg_terms=(sqnorm(va - vb),),
    )
    L10 = Inequality(
        "L10",
        "Heterogeneity split",
        "Lam = (1/K) sum_k ||grad f_k(x_k)||^2 <= 2 L^2 D + 2 zeta^2 + 2 Phi.",
        "grad f_k(x_k) = [grad f_k(x_k) - grad f_k(xbar)] + grad f_k(xbar); L10a per worker, then "
        "A1 with C <= D and the A3 consequence of L8.",
        uses=("L10a", "L8", "A1", "A3"),
        lhs=Lam,
        rhs=2 * L**2 * D + 2 * zeta**2 + 2 * Phi,
        hypotheses=(
            Hypothesis(
                "A1", L**2 * C - A_, "(1/K) sum_k ||grad f_k(x_k) - grad f_k(xbar)||^2 <= L^2 C"
            ),
            Hypothesis(
                "A3", zeta**2 + Phi - Bq, "(1/K) sum_k ||grad f_k(xbar)||^2 <= zeta^2 + Phi (L8)"
            ),
            Hypothesis("L10a", 2 * A_ + 2 * Bq - Lam, "L10a averaged over workers"),
            Hypothesis("L8", D - C, "C <= D"),
        ),
        multipliers={"L10a": 1, "A1": 2, "A3": 2, "L8": 2 * L**2},
        domain=DOMAIN,
    )
    out: list[Lemma] = [L6, L7, L8, L9, L10a, L10]
    if coins == "shared":
        out.append(
            Inequality(
                "L10s",
                "Mean-gradient split (shared coins)",
                "Gam = ||(1/K) sum_k grad f_k(x_k)||^2 <= 2 L^2 D + 2 Phi.",
                "(1/K) sum_k grad f_k(x_k) = grad f(xbar) - delta; L10a, then ||delta||^2 <= L^2 C "
                "<= L^2 D (L8).",
                uses=("L10a", "L8", "A1"),
                lhs=Gam,
                rhs=2 * L**2 * D + 2 * Phi,
                hypotheses=(
                    Hypothesis("L10a", 2 * A_ + 2 * Phi - Gam, "L10a with ||delta||^2 = A"),
                    Hypothesis("A1", L**2 * C - A_, "||delta||^2 <= L^2 C (L8)"),
                    Hypothesis("L8", D - C, "C <= D"),
                ),
                multipliers={"L10a": 1, "A1": 2, "L8": 2 * L**2},
                domain=DOMAIN,
            )
        )
    return out


def _one_step_lemma(co: dict[str, sp.Expr]) -> Lemma:
    """L11: one-step descent (uses C1)."""
    c1 = Hypothesis.condition("C1", alpha * L, 1, "step: alpha <= 1/L")
    L11 = Inequality(
        "L11",
        "One-step descent",
        "E f(xbar_{t+1}) <= E f(xbar_t) - (alpha/2) Phi_t + c_D D_t + c_Gam Gam_t + n_1.",
        "Descent lemma L6 at xbar with xbar_{t+1} = xbar_t - alpha Gbar; E Gbar = mbar (L1) and "
        "E||Gbar||^2 = ||mbar||^2 + Vbar (L5); polarisation L7 with a = grad f(xbar); drop "
        "-(alpha/2)(1 - alpha L)||mbar||^2 by C1; gradient gap L9; variance L5c.",
        uses=("L6", "L1", "L5", "L7", "L9", "L5c", "C1"),
        lhs=fplus,
        rhs=f0 - alpha / 2 * Phi + co["c_D"] * D + co["c_Gam"] * Gam + co["n1"],
        hypotheses=(
            Hypothesis(
                "L6",
                f0 - alpha * ip + L * alpha**2 / 2 * (M + Vbar) - fplus,
                "L6 in expectation: E f(xbar+) <= f(xbar) - alpha<grad f, mbar> + (L alpha^2/2)E||Gbar||^2",
            ),
            Hypothesis(
                "L7",
                ip - (Phi + M - Gap) / 2,
                "polarisation, ip = <grad f(xbar), mbar>",
                equality=True,
            ),
            c1,
            Hypothesis(
                "L9", (L + eta) ** 2 * D - Gap, "Gap = ||grad f(xbar) - mbar||^2 <= (L+eta)^2 D"
            ),
            Hypothesis(
                "L5c",
                (2 * (1 - p) * eta**2 * D / p + 2 * p * Gam / (1 - p)) / co["kappa"]
                + sigma**2 / (K * (1 - p))
                - Vbar,
                "variance of the averaged direction",
            ),
        ),
        multipliers={
            "L6": 1,
            "L7": alpha,
            "C1": alpha / 2 * M,
            "L9": alpha / 2,
            "L5c": L * alpha**2 / 2,
        },
        domain=DOMAIN,
    )
    return L11


# ----------------------------------------------------------------------------- drift
def _pull_contraction_lemma() -> Lemma:
    """L15a: the mean pull contracts (uses C2)."""
    q = 1 - alpha * eta
    c2 = Hypothesis.condition(
        "C2", alpha * eta, 2, "mean pull: alpha*eta <= 2, so |1 - alpha*eta| <= 1"
    )
    L15a = Inequality(
        "L15a",
        "Pull contraction",
        "Under C2, q^2 = (1 - alpha eta)^2 <= 1, hence q^(2j) <= 1 for j >= 0.",
        "1 - q^2 = alpha eta (2 - alpha eta).",
        uses=("C2",),
        lhs=q**2,
        rhs=1,
        hypotheses=(c2,),
        multipliers={"C2": alpha * eta},
        domain=DOMAIN,
    )
    return L15a


def _drift_lemmas(co: dict[str, sp.Expr]) -> list[Lemma]:
    q = 1 - alpha * eta
    g = sp.IndexedBase("grad")
    xi = sp.IndexedBase("xi")
    # L12: unrolled anchor deviation, instances t = 1..5 (scalar coordinates suffice: linear)
    parts = []
    for t in range(1, 6):
        e = sp.S.Zero
        for s in range(t):
            m = g[s] + eta * e
            e = e - alpha * (m + xi[s])
        closed = -alpha * sum((q ** (t - 1 - s) * (g[s] + xi[s]) for s in range(t)), sp.S.Zero)
        parts.append(Identity(f"L12[t={t}]", "", "", lhs=e, rhs=closed))
    L12 = Family(
        "L12",
        "Unrolled anchor deviation",
        "From e_0 = 0 and e_{s+1} = e_s - alpha(grad f_k(x_s) + eta e_s + xi_s) (xi_s = G_s - E_s G_s): "
        "e_t = -alpha sum_{s<t} q^{t-1-s} (grad f_k(x_s) + xi_s), q = 1 - alpha eta.",
        "Induction on t; the step is linear in (e, grad, xi), so it holds coordinate-wise. "
        "Checked for t = 1..5.",
        uses=("L1",),
        parts=tuple(parts),
    )
    # L13: martingale orthogonality on a two-step tree with branch-dependent second step
    x0, pi0 = mean_zero_two_point("z0")
    v = [vector(f"u{i}") for i in range(2)]
    rho = [sp.Symbol(f"rho{i}", positive=True) for i in range(2)]
    c0, c1s = sp.symbols("c0 c1", real=True)
    lhs = sp.S.Zero
    second = sp.S.Zero
    for i, (pr0, val0) in enumerate(x0.outcomes):
        branch = Branches.of((rho[i], v[i]), (1 - rho[i], -rho[i] * v[i] / (1 - rho[i])))
        lhs += pr0 * expect(lambda x1, val0=val0: sqnorm(c0 * val0 + c1s * x1), branch)
        second += pr0 * expect(sqnorm, branch)
    L13 = Identity(
        "L13",
        "Martingale orthogonality",
        "For martingale differences xi_s (E[xi_s | past] = 0) and fixed weights c_s: "
        "E||sum_s c_s xi_s||^2 = sum_s c_s^2 E||xi_s||^2.",
        "Cross terms E<xi_r, xi_s> (r < s) vanish by the tower property. Checked on a two-step "
        "tree whose second-step distribution depends on the first step's branch.",
        lhs=lhs,
        rhs=c0**2 * expect(sqnorm, x0) + c1s**2 * second,
    )
    parts = []
    for t in range(1, 5):
        vs = [vector(f"v{s}") for s in range(t)]
        cs = sp.symbols(f"c0:{t}", real=True)
        total = sum((cs[s] * vs[s] for s in range(t)), sp.zeros(2, 1))
        hyps = tuple(Hypothesis(f"c{s}", 1 - cs[s] ** 2, "c_s^2 <= 1") for s in range(t))
        parts.append(
            Inequality(
                f"L14[t={t}]",
                "",
                "",
                lhs=sqnorm(total),
                rhs=t * sum((sqnorm(vv) for vv in vs), sp.S.Zero),
                hypotheses=hyps,
                multipliers={f"c{s}": t * sqnorm(vs[s]) for s in range(t)},
                nonneg_terms=tuple(
                    sqnorm(cs[r] * vs[r] - cs[s] * vs[s]) for r in range(t) for s in range(r + 1, t)
                ),
            )
        )
    L14 = Family(
        "L14",
        "Weighted Cauchy-Schwarz",
        "If c_s^2 <= 1: ||sum_{s<t} c_s v_s||^2 <= t sum_{s<t} ||v_s||^2.",
        "Lagrange's identity t sum ||c_s v_s||^2 - ||sum c_s v_s||^2 = sum_{r<s} ||c_r v_r - c_s v_s||^2, "
        "then c_s^2 <= 1. Checked for t = 1..4.",
        parts=tuple(parts),
    )
    t = sp.Symbol("t", positive=True, integer=True)
    Dt, At, Bt, SLt, SDt, SVt, SVqt = sp.symbols(
        "D_t A_t B_t SLam_t SD_t SV_t SVq_t", nonnegative=True
    )
    rhs15 = (
        2
        * alpha**2
        * ((t + 2 * p / (1 - p)) * SLt + 2 * (1 - p) * eta**2 * SDt / p + t * sigma**2 / (1 - p))
    )
    L15 = Inequality(
        "L15",
        "Anchor distance at step t",
        "D_t <= 2 alpha^2 sum_{s<t} [(t + 2p/(1-p)) Lam_s + 2(1-p) eta^2 D_s/p + sigma^2/(1-p)], "
        "D_0 = 0.",
        "Per worker, L12 and L10a: E||e_t||^2 <= 2 alpha^2 E||sum q^{t-1-s} grad_s||^2 + "
        "2 alpha^2 E||sum q^{t-1-s} xi_s||^2; the first is <= t sum E||grad_s||^2 by L14 and L15a, "
        "the second is sum q^{2(t-1-s)} E Var_s <= sum E Var_s by L13 and L15a; bound Var_s by L4; "
        "average over workers. SLam_t, SD_t, SV_t below are the sums over s < t.",
        uses=("L12", "L10a", "L13", "L14", "L15a", "L4"),
        lhs=Dt,
        rhs=rhs15,
        hypotheses=(
            Hypothesis("L12+L10a", 2 * alpha**2 * At + 2 * alpha**2 * Bt - Dt, "split of e_t"),
            Hypothesis("L14", t * SLt - At, "weighted Cauchy-Schwarz with c_s = q^{t-1-s}"),
            Hypothesis("L13", SVqt - Bt, "B_t = sum q^{2(t-1-s)} E Var_s", equality=True),
            Hypothesis("L15a", SVt - SVqt, "q^{2j} <= 1 and Var_s >= 0"),
            Hypothesis(
                "L4",
                2 * (1 - p) * eta**2 * SDt / p
                + 2 * p * SLt / (1 - p)
                + t * sigma**2 / (1 - p)
                - SVt,
                "L4 summed over s < t and averaged over workers",
            ),
        ),
        multipliers={
            "L12+L10a": 1,
            "L14": 2 * alpha**2,
            "L13": 2 * alpha**2,
            "L15a": 2 * alpha**2,
            "L4": 2 * alpha**2,
        },
        domain=DOMAIN,
    )
    # L16: the round sum
    P = co["P"]
    s_, t_ = sp.symbols("s t_", integer=True, nonnegative=True)
    round_rhs = (
        alpha**2 * (H - 1) * P * SLam
        + 4 * alpha**2 * eta**2 * (H - 1) * (1 - p) / p * SD
        + alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
    )
    parts16: list[Lemma] = [
        Identity(
            "L16[w1]",
            "",
            "",
            lhs=sp.summation(t_, (t_, s_ + 1, H - 1)),
            rhs=(H - 1 - s_) * (H + s_) / 2,
        ),
        Identity("L16[w2]", "", "", lhs=sp.summation(1, (t_, s_ + 1, H - 1)), rhs=H - 1 - s_),
        Identity(
            "L16[w3]", "", "", lhs=sp.summation(H - 1 - s_, (s_, 0, H - 2)), rhs=H * (H - 1) / 2
        ),
        Inequality(
            "L16[b1]",
            "",
            "",
            lhs=(H - 1 - s_) * (H + s_) / 2,
            rhs=H * (H - 1) / 2,
            nonneg_terms=(s_ * (s_ + 1) / 2,),
        ),
        Inequality("L16[b2]", "", "", lhs=H - 1 - s_, rhs=H - 1, nonneg_terms=(s_,)),
    ]
    for Hn in range(1, 6):
        lam = sp.symbols(f"Lam0:{Hn}", nonnegative=True)
        dd = sp.symbols(f"D0:{Hn}", nonnegative=True)
        sub = {H: Hn}
        hyps = []
        for tt in range(Hn):
            r15 = rhs15.subs({t: tt, SLt: sum(lam[:tt], sp.S.Zero), SDt: sum(dd[:tt], sp.S.Zero)})
            hyps.append(Hypothesis(f"L15[t={tt}]", r15 - dd[tt], "L15 at step t"))
        goal_rhs = round_rhs.subs(sub).subs({SLam: sum(lam, sp.S.Zero), SD: sum(dd, sp.S.Zero)})
        goal_lhs = sum(dd, sp.S.Zero)
        rest = goal_rhs - goal_lhs - sum((h.slack for h in hyps), sp.S.Zero)
        parts16.append(
            Inequality(
                f"L16[H={Hn}]",
                "",
                "",
                lhs=goal_lhs,
                rhs=goal_rhs,
                hypotheses=tuple(hyps),
                multipliers={h.name: 1 for h in hyps},
                nonneg_terms=(sp.expand(rest),),
                domain=DOMAIN,
            )
        )
    L16 = Family(
        "L16",
        "Anchor distance over a round",
        "SD <= alpha^2 (H-1) P SLam + 4 alpha^2 eta^2 (H-1)(1-p)/p SD + alpha^2 sigma^2 H(H-1)/(1-p), "
        "P = H + 4p/(1-p); SD, SLam, SPhi are sums over the H steps of a round.",
        "Sum L15 over t < H and exchange the sums: the weight of step s is "
        "sum_{t=s+1}^{H-1} t = (H-1-s)(H+s)/2 <= H(H-1)/2 for Lam_s and H-1-s <= H-1 for D_s; "
        "the noise weight is sum_s (H-1-s) = H(H-1)/2. Checked: the weight identities for "
        "symbolic s, H; the weight bounds by certificate; the whole inequality as a "
        "certificate for H = 1..5.",
        uses=("L15",),
        parts=tuple(parts16),
    )
    return [L12, L13, L14, L15, L16]


# ----------------------------------------------------------------------------- assembly
def _round_lemmas(co: dict[str, sp.Expr], coins: str) -> tuple[list[Lemma], sp.Expr]:
    P, c_gam, c_prime, n1 = co["P"], co["c_Gam"], co["c_prime"], co["n1"]
    chi, rho_D, loss = co["chi"], co["rho_D"], co["loss"]
    c3 = Hypothesis.condition("C3", rho_D, sp.Rational(1, 3), "drift feedback: rho_D <= 1/3")
    drift_rhs = 3 * alpha**2 * (H - 1) * P * (H * zeta**2 + SPhi) + sp.Rational(
        3, 2
    ) * alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
    L17 = Inequality(
        "L17",
        "Anchor distance with feedback",
        "Under C3: SD <= 3 alpha^2 (H-1) P (H zeta^2 + SPhi) + (3/2) alpha^2 sigma^2 H(H-1)/(1-p).",
        "Insert L10 (summed over the round) into L16: (1 - rho_D) SD <= 2 alpha^2 (H-1) P "
        "(H zeta^2 + SPhi) + alpha^2 sigma^2 H(H-1)/(1-p), and 1 - rho_D >= 2/3 by C3.",
        uses=("L16", "L10", "C3"),
        lhs=SD,
        rhs=drift_rhs,
        hypotheses=(
            Hypothesis(
                "L16",
                alpha**2 * (H - 1) * P * SLam
                + 4 * alpha**2 * eta**2 * (H - 1) * (1 - p) / p * SD
                + alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
                - SD,
                "round drift",
            ),
            Hypothesis(
                "L10",
                2 * L**2 * SD + 2 * H * zeta**2 + 2 * SPhi - SLam,
                "L10 summed over the round",
            ),
            c3,
        ),
        multipliers={
            "L16": sp.Rational(3, 2),
            "L10": sp.Rational(3, 2) * alpha**2 * (H - 1) * P,
            "C3": sp.Rational(3, 2) * SD,
        },
        domain=DOMAIN,
    )
    Q = (
        H * (2 * chi * c_gam + 3 * alpha**2 * (H - 1) * P * c_prime) * zeta**2
        + sp.Rational(3, 2) * c_prime * alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
        + H * n1
    )
    # the same constant, term by term (used to display the bound; checked equal below)
    co["Q_parts"] = (
        H * n1,
        H * 2 * chi * c_gam * zeta**2,
        H * 3 * alpha**2 * (H - 1) * P * c_prime * zeta**2,
        sp.Rational(3, 2) * c_prime * alpha**2 * sigma**2 * H * (H - 1) / (1 - p),
    )
    gam_split = "L10" if coins == "independent" else "L10s"
    gam_slack = 2 * L**2 * SD + 2 * chi * H * zeta**2 + 2 * SPhi - SGam
    L18 = Inequality(
        "L18",
        "Round descent",
        "omega SPhi <= f(z_r) - E f(z_{r+1}) + Q, omega = alpha/2 - 2 c_Gam - 3 alpha^2 (H-1) P c', "
        "Q = H (2 chi c_Gam + 3 alpha^2 (H-1) P c') zeta^2 + (3/2) c' alpha^2 sigma^2 H(H-1)/(1-p) "
        "+ H n_1, c' = c_D + 2 L^2 c_Gam.",
        "Sum L11 over the round; the f-terms telescope to f(z_r) - f(z_{r+1}) because with outer "
        "averaging xbar at the end of round r is z_{r+1} (L19). Then Gam <= 2L^2 D + 2 chi zeta^2 "
        "+ 2 Phi (L10 or L10s) and L17.",
        uses=("L11", "L19", gam_split, "L17"),
        lhs=co["omega"] * SPhi,
        rhs=Delta + Q,
        hypotheses=(
            Hypothesis(
                "L11",
                Delta + co["c_D"] * SD + c_gam * SGam + H * n1 - alpha / 2 * SPhi,
                "L11 summed over the round, Delta = f(z_r) - E f(z_{r+1})",
            ),
            Hypothesis(gam_split, gam_slack, "Gam split summed over the round"),
            from_lemma(L17, "L17"),
        ),
        multipliers={"L11": 1, gam_split: c_gam, "L17": c_prime},
        domain=DOMAIN,
    )
    c4 = Hypothesis.condition(
        "C4",
        loss,
        alpha / 4,
        "absorption: the descent keeps at least alpha/4 of its ||grad f||^2 term",
    )
    L18b = Inequality(
        "L18b",
        "Round descent under C4",
        "Under C4 (omega >= alpha/4): (alpha/4) SPhi <= f(z_r) - E f(z_{r+1}) + Q.",
        "L18 and (omega - alpha/4) SPhi >= 0.",
        uses=("L18", "C4"),
        lhs=alpha / 4 * SPhi,
        rhs=Delta + Q,
        hypotheses=(from_lemma(L18, "L18"), c4),
        multipliers={"L18": 1, "C4": SPhi},
        domain=DOMAIN,
    )
    a = sp.IndexedBase("fz")
    r = sp.Symbol("r", integer=True, nonnegative=True)
    L19 = Identity(
        "L19",
        "Telescoping",
        "sum_{r<R} (f(z_r) - f(z_{r+1})) = f(z_0) - f(z_R) <= F0 (A4); within a round, "
        "sum_{t<H} (f(xbar_t) - f(xbar_{t+1})) = f(z_r) - f(z_{r+1}) since xbar_0 = z_r and, with "
        "outer averaging, xbar_H = mean_k x_{k,H} = z_{r+1}.",
        "Telescoping sum (checked symbolically in R); f(z_R) >= f_star.",
        uses=("A4",),
        lhs=sp.Sum(a[r] - a[r + 1], (r, 0, R - 1)).doit(),
        rhs=a[0] - a[R],
    )
    return [L17, L18, L18b, L19], Q


def _theorem_lemmas(
    co: dict[str, sp.Expr], Q: sp.Expr, L18b: Lemma
) -> tuple[list[Lemma], sp.Expr, sp.Expr]:
    SPhi_all, SDelta = sp.symbols("SPhi_all SDelta", real=True)
    bound = 4 * F0 / (alpha * T) + 4 * Q / (alpha * H)
    L20 = Inequality(
        "L20",
        "Theorem 1 (assembly)",
        "(1/T) sum_{t<T} E||grad f(xbar_t)||^2 <= 4 F0/(alpha T) + 4 Q/(alpha H), T = R H.",
        "Sum L18b over the R rounds, bound the telescoped sum by F0 (L19, A4), divide by "
        "alpha T/4.",
        uses=("L18b", "L19", "A4"),
        lhs=SPhi_all / (R * H),
        rhs=bound.subs(T, R * H),
        hypotheses=(
            from_lemma(
                L18b, "L18b", {Delta: SDelta / R, SPhi: SPhi_all / R}, scale=R
            ),  # L18b summed over the R rounds (linearity)
            Hypothesis("L19", F0 - SDelta, "telescoping and A4"),
        ),
        multipliers={"L18b": 4 / (alpha * R * H), "L19": 4 / (alpha * R * H)},
        domain=DOMAIN,
    )
    sharp = F0 / (co["omega"] * T) + Q / (co["omega"] * H)
    L20s = Inequality(
        "L20s",
        "Theorem 1, sharp form",
        "With omega = alpha/2 - 2 c_Gam - 3 alpha^2 (H-1) P c' > 0: "
        "(1/T) sum_t E||grad f(xbar_t)||^2 <= F0/(omega T) + Q/(omega H).",
        "Sum L18 over the rounds and divide by omega T (omega is written Omega > 0 in the "
        "certificate).",
        uses=("L18", "L19", "A4"),
        lhs=SPhi_all / (R * H),
        rhs=(F0 / (Omega * T) + Q / (Omega * H)).subs(T, R * H),
        hypotheses=(
            Hypothesis("L18", SDelta + R * Q - Omega * SPhi_all, "L18 summed over rounds"),
            Hypothesis("L19", F0 - SDelta, "telescoping and A4"),
        ),
        multipliers={"L18": 1 / (Omega * R * H), "L19": 1 / (Omega * R * H)},
        domain=DOMAIN,
    )
    return [L20, L20s], bound, sharp


# ----------------------------------------------------------------------------- the theorem
@dataclass(frozen=True)
class PALSGDTheorem:
    """The assembled theorem: lemma chain, constants, conditions, bound.

    ``expression`` is the registered bound (``4 F0/(alpha T) + 4 Q/(alpha H)``, valid under
    every condition); ``sharp_expression`` is ``F0/(omega T) + Q/(omega H)``, which is never
    larger under C4 and is exact minibatch SGD at ``H = 1, p = 0``. The expression and the
    conditions are assembled from the scalar lemmas L11, L15a and L17-L20 when the object is
    built; the full chain (:attr:`lemmas`, with the vector lemmas and their branch sums) is
    built on first access.
    """

    coins: str
    local_sgd: bool
    coefficients: dict[str, sp.Expr]
    conditions: tuple[Condition, ...]
    expression: sp.Expr
    sharp_expression: sp.Expr
    recommended_step: sp.Expr
    round_constant: sp.Expr
    chain_factory: Callable[[], list[Lemma]] = field(repr=False, compare=False, default=list)
    extra_checks: tuple[Lemma, ...] = field(default=())

    @cached_property
    def lemmas(self) -> tuple[Lemma, ...]:
        """The numbered chain L1-L20s, in order."""
        return tuple(self.chain_factory())

    def lemma(self, key: str) -> Lemma:
        return by_key(self.lemmas)[key]

    def check(self) -> list[CheckResult]:
        """Check every lemma of the chain and the extra cross-checks."""
        return [lem.check() for lem in self.lemmas + self.extra_checks]


@dataclass(frozen=True)
class _Core:
    """The scalar part of the chain that the statement is assembled from."""

    co: dict[str, sp.Expr]
    one_step: Lemma
    contraction: Lemma
    rounds: list[Lemma]
    final: list[Lemma]
    Q: sp.Expr
    bound: sp.Expr
    sharp: sp.Expr

    @property
    def lemmas(self) -> list[Lemma]:
        return [self.one_step, self.contraction, *self.rounds, *self.final]


@cache
def _core(coins: str) -> _Core:
    co = coefficients(coins)
    rounds, Q = _round_lemmas(co, coins)
    final, bound, sharp = _theorem_lemmas(co, Q, by_key(rounds)["L18b"])
    # the bound is read off the last lemma (not retyped): rhs of L20 with R*H -> T,
    # displayed term by term (4 F0/(alpha T) plus 4 q/(alpha H) for each part q of Q)
    assembled = sp.sympify(final[0].rhs).subs(R, T / H)
    display = 4 * F0 / (alpha * T) + sp.Add(*(4 * q / (alpha * H) for q in co["Q_parts"]))
    if not is_zero(assembled - bound) or not is_zero(display - assembled):  # pragma: no cover
        raise AssertionError("L20 does not reproduce the assembled bound")
    return _Core(
        co, _one_step_lemma(co), _pull_contraction_lemma(), rounds, final, Q, display, sharp
    )


def build_chain(
    coins: str = "independent",
) -> tuple[list[Lemma], dict[str, sp.Expr], sp.Expr, sp.Expr, sp.Expr]:
    """All lemmas in order, the constants, the round constant Q, the bound and the sharp bound."""
    core = _core(coins)
    co = core.co
    chain: list[Lemma] = []
    chain += _oracle_lemmas()
    chain.append(_averaging_lemma(coins))
    chain.append(_aggregate_variance_lemma(co, coins))
    chain += _descent_lemmas(co, coins)
    chain.append(core.one_step)
    drift = _drift_lemmas(co)
    chain += drift[:3]  # L12, L13, L14
    chain.append(core.contraction)  # L15a
    chain += drift[3:]  # L15, L16
    chain += core.rounds
    chain += core.final
    return chain, co, core.Q, core.bound, core.sharp


def _collect_conditions(chain: list[Lemma]) -> list[Hypothesis]:
    seen: dict[str, Hypothesis] = {}

    def visit(lem: Lemma) -> None:
        for part in getattr(lem, "parts", ()):
            visit(part)
        for h in getattr(lem, "hypotheses", ()):
            if h.relation is not None and h.name not in seen:
                seen[h.name] = h

    for lem in chain:
        visit(lem)
    return sorted(seen.values(), key=lambda h: h.name)


def _to_conditions(
    hyps: list[Hypothesis], fn: Callable[[sp.Expr], sp.Expr] | None
) -> tuple[Condition, ...]:
    out: list[Condition] = []
    normal_forms: list[sp.Expr] = []
    for h in hyps:
        rel = h.relation
        lhs, rhs = (rel.lhs, rel.rhs) if fn is None else (fn(rel.lhs), fn(rel.rhs))
        rel2 = sp.Le(lhs, rhs)
        if rel2 is sp.true:
            continue  # a condition that the specialisation makes vacuous (C2 at eta = 0)
        if rel2 is sp.false:
            raise ValueError(f"condition {h.name} is never satisfiable after specialisation")
        normal = lhs / rhs if rhs != 0 else None
        same = [i for i, n in enumerate(normal_forms) if fn is not None and is_zero(normal - n)]
        if normal is not None and same:
            # identical to an earlier condition after specialisation: merge the names
            idx = same[0]
            prev = out[idx]
            out[idx] = Condition(
                prev.name + "=" + h.name, prev.relation, prev.description + "; " + h.description
            )
            continue
        normal_forms.append(normal)
        out.append(Condition(h.name, sp.Le(lhs, rhs, evaluate=False), h.description))
    return tuple(out)


def _recommended_step(co: dict[str, sp.Expr]) -> sp.Expr:
    """Balance 4F0/(alpha T) against the terms linear in alpha (sigma^2/K and coin-heterogeneity)."""
    lin = 2 * L / (1 - p) * (sigma**2 / K + 4 * co["chi"] * p * zeta**2 / co["kappa"])
    return sp.sqrt(4 * F0 / (T * lin))


def _extra_checks(
    co: dict[str, sp.Expr], conds: tuple[Condition, ...], bound, sharp
) -> tuple[Lemma, ...]:
    """X1 (certificate) and X1s (the same by exact-rational sampling, a cross-check)."""
    region = tuple(c.relation for c in conds)
    ranges = {
        L: (sp.Rational(1, 10), 10),
        eta: (0, 10),
        p: (sp.Rational(1, 100), sp.Rational(99, 100)),
        H: (1, 40),
        K: (1, 16),
        alpha: (sp.Rational(1, 10**4), 1),
        F0: (0, 10),
        T: (1, 10**6),
        sigma: (0, 10),
        zeta: (0, 10),
    }
    Q = sp.sympify((bound - 4 * F0 / (alpha * T)) * alpha * H / 4)
    x1 = Inequality(
        "X1",
        "Sharp form is never larger",
        "Under C4: F0/(omega T) + Q/(omega H) <= 4F0/(alpha T) + 4Q/(alpha H).",
        "The difference is (F0/T + Q/H)(4 omega - alpha)/(alpha omega) and C4 is "
        "omega - alpha/4 >= 0 (omega written Omega > 0; Q >= 0 on the domain).",
        uses=("C4",),
        lhs=F0 / (Omega * T) + Q / (Omega * H),
        rhs=bound,
        hypotheses=(Hypothesis("C4", Omega - alpha / 4, "condition C4: omega >= alpha/4"),),
        multipliers={"C4": 4 * (F0 / T + Q / H) / (alpha * Omega)},
        domain=DOMAIN,
    )
    x1s = SampledInequality(
        "X1s",
        "Sharp form is never larger (sampled cross-check)",
        "Under C1-C4: F0/(omega T) + Q/(omega H) <= 4F0/(alpha T) + 4Q/(alpha H) (omega >= alpha/4).",
        "Sampled with exact rationals inside the conditions.",
        lhs=sharp,
        rhs=bound,
        ranges=ranges,
        region=region,
        integers=(H, K, T),
        log_scale=(alpha, L, T),
        n=600,
        min_kept=40,
        seed=1,
    )
    return (x1, x1s, _c2_redundancy(co))


def _c2_redundancy(co: dict[str, sp.Expr]) -> Lemma:
    """X2: for H >= 2, C4 implies alpha eta <= 1/sqrt(12) < 2, so C2 is never binding there."""
    g = sp.Symbol("g", nonnegative=True)  # H = 2 + g
    return Inequality(
        "X2",
        "C2 is implied by C4 when H >= 2",
        "If H >= 2 and C4 holds, then 12 alpha^2 eta^2 <= 1, hence alpha eta <= 1/sqrt(12) < 2. "
        "At H = 1 the drift lemmas that use C2 (L15a in L15-L17) are vacuous (D_0 = 0, H - 1 = 0).",
        "C4 gives 3 alpha^2 (H-1) P c' <= alpha/4 with c' >= alpha (L+eta)^2/2, P >= H >= 2, "
        "H - 1 >= 1: 3 alpha^3 eta^2 <= alpha/4.",
        uses=("C4",),
        lhs=12 * alpha**2 * eta**2,
        rhs=sp.Integer(1),
        hypotheses=(Hypothesis("C4", alpha / 4 - co["loss"], "condition C4"),),
        multipliers={"C4": 4 / alpha},
        nonneg_terms=(4 / alpha * co["loss"] - 12 * alpha**2 * eta**2,),
        domain=Domain({p: _u / (1 + _u), H: 2 + g}, "0 < p < 1, H >= 2"),
    )


@cache
def theorem(coins: str = "independent") -> PALSGDTheorem:
    """The PALSGD theorem (derived here) for independent or shared coins."""
    core = _core(coins)
    conds = _to_conditions(_collect_conditions(core.lemmas), None)
    return PALSGDTheorem(
        coins=coins,
        local_sgd=False,
        coefficients=core.co,
        conditions=conds,
        expression=core.bound,
        sharp_expression=core.sharp,
        recommended_step=_recommended_step(core.co),
        round_constant=core.Q,
        chain_factory=lambda: build_chain(coins)[0],
        extra_checks=_extra_checks(core.co, conds, core.bound, core.sharp),
    )


@cache
def local_sgd_theorem() -> PALSGDTheorem:
    """The ``p = 0`` case (Local SGD with outer averaging): every lemma specialised.

    At ``p = 0`` no pull ever happens, so ``eta`` is irrelevant and set to 0
    (:func:`specialise_p0`). Coins play no role, so the chain of the independent-coin
    theorem is used.
    """
    core = _core("independent")
    conds = _to_conditions(_collect_conditions(core.lemmas), specialise_p0)
    co0 = {
        k: (tuple(specialise_p0(x) for x in v) if isinstance(v, tuple) else specialise_p0(v))
        for k, v in core.co.items()
    }
    return PALSGDTheorem(
        coins="none",
        local_sgd=True,
        coefficients=co0,
        conditions=conds,
        expression=sp.Add(
            *(sp.factor(specialise_p0(term)) for term in sp.Add.make_args(core.bound))
        ),
        sharp_expression=specialise_p0(core.sharp),
        recommended_step=specialise_p0(_recommended_step(core.co)),
        round_constant=specialise_p0(core.Q),
        chain_factory=lambda: [lem.map(specialise_p0) for lem in build_chain("independent")[0]],
    )

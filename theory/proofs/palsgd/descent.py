"""Descent (L6-L11): descent lemma, polarisation, averages, gradient gap, one step.

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from theory.proofs.lemmas import (
    Cited,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    borrow,
    dot,
    from_lemma,
    sqnorm,
    vector,
)
from theory.proofs.palsgd.notation import (
    A_,
    DOMAIN,
    Bq,
    C,
    D,
    Gam,
    Gap,
    L,
    Lam,
    M,
    Phi,
    Vbar,
    W,
    alpha,
    eta,
    f0,
    fplus,
    ip,
    zeta,
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


def l6_descent() -> Lemma:
    """L6: the descent lemma of an L-smooth function (cited, spot-checked)."""
    return Cited(
        "L6",
        "Descent lemma",
        "If f is L-smooth, f(y) <= f(x) + <grad f(x), y - x> + (L/2)||y - x||^2 for all x, y.",
        "Integrate <grad f(x + s(y - x)) - grad f(x), y - x> over s in [0, 1] (A1).",
        uses=("A1",),
        reference="Nesterov, Introductory Lectures on Convex Optimization (2004), Lemma 1.2.3",
        spot_check=_descent_spot_check,
    )


def l7_polarisation() -> Lemma:
    """L7: polarisation of the inner product in the descent lemma."""
    a, mv = vector("a"), vector("m")
    return Identity(
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


def l8_mean_square() -> Lemma:
    """L8: the mean-square decomposition (checked for K = 3)."""
    vs = [vector(f"v{k}") for k in range(3)]
    vbar = (vs[0] + vs[1] + vs[2]) / 3
    return Identity(
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


def l9_gradient_gap() -> Lemma:
    """L9: the pull bias folded into the gradient gap, (L + eta)^2 (C + ||w||^2)."""
    dl, w = vector("delta"), vector("w")
    return Inequality(
        "L9",
        "Gradient gap",
        "||grad f(xbar) - mbar||^2 <= (L + eta)^2 D, mbar = (1/K) sum_k grad f_k(x_k) + eta(xbar - z).",
        "grad f(xbar) - mbar = delta - eta w with ||delta||^2 <= L^2 C (L8) and w = xbar - z; "
        "the certificate is ((L+eta)^2/L^2)(L^2 C - ||delta||^2) plus two squares; finally "
        "C + ||w||^2 = D (L8).",
        uses=("L8", "A1"),
        lhs=sqnorm(dl - eta * w),
        rhs=(L + eta) ** 2 * (C + sqnorm(w)),
        hypotheses=(Hypothesis("L8/A1", L**2 * C - sqnorm(dl), "||delta||^2 <= L^2 C"),),
        multipliers={"L8/A1": (L + eta) ** 2 / L**2},
        nonneg_terms=(
            eta * (2 * L + eta) / L**2 * sqnorm(dl + L**2 * w / (2 * L + eta)),
            2 * L * (L + eta) ** 2 / (2 * L + eta) * sqnorm(w),
        ),
        domain=DOMAIN,
    )


def l10a_young() -> Lemma:
    """L10a: ||a + b||^2 <= 2||a||^2 + 2||b||^2."""
    va, vb = vector("a"), vector("b")
    return Inequality(
        "L10a",
        "Two-term Young inequality",
        "||a + b||^2 <= 2||a||^2 + 2||b||^2.",
        "The slack is ||a - b||^2.",
        lhs=sqnorm(va + vb),
        rhs=2 * sqnorm(va) + 2 * sqnorm(vb),
        nonneg_terms=(sqnorm(va - vb),),
    )


def l10_heterogeneity_split(l10a: Lemma) -> Lemma:
    """L10: Lam <= 2 L^2 D + 2 zeta^2 + 2 Phi; L10a's hypothesis is built from its object."""
    return Inequality(
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
            borrow(l10a, "L10a", Lam, {"a": A_, "b": Bq}),  # averaged over workers
            Hypothesis("L8", D - C, "C <= D"),
        ),
        multipliers={"L10a": 1, "A1": 2, "A3": 2, "L8": 2 * L**2},
        domain=DOMAIN,
    )


def l10s_mean_gradient_split(l10a: Lemma) -> Lemma:
    """L10s (shared coins): Gam <= 2 L^2 D + 2 Phi; L10a's hypothesis from its object."""
    return Inequality(
        "L10s",
        "Mean-gradient split (shared coins)",
        "Gam = ||(1/K) sum_k grad f_k(x_k)||^2 <= 2 L^2 D + 2 Phi.",
        "(1/K) sum_k grad f_k(x_k) = grad f(xbar) - delta; L10a, then ||delta||^2 <= L^2 C "
        "<= L^2 D (L8).",
        uses=("L10a", "L8", "A1"),
        lhs=Gam,
        rhs=2 * L**2 * D + 2 * Phi,
        hypotheses=(
            borrow(l10a, "L10a", Gam, {"a": A_, "b": Phi}),  # ||delta||^2 = A
            Hypothesis("A1", L**2 * C - A_, "||delta||^2 <= L^2 C (L8)"),
            Hypothesis("L8", D - C, "C <= D"),
        ),
        multipliers={"L10a": 1, "A1": 2, "L8": 2 * L**2},
        domain=DOMAIN,
    )


def l11_one_step(co: dict[str, sp.Expr], l5c: Lemma, l9: Lemma) -> Lemma:
    """L11: one-step descent (uses C1); L5c's and L9's hypotheses from their objects."""
    c1 = Hypothesis.condition("C1", alpha * L, 1, "step: alpha <= 1/L")
    return Inequality(
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
            borrow(l9, "L9", Gap, {"w": W}),  # Gap = ||grad f(xbar) - mbar||^2, ||w||^2 = W
            Hypothesis("L8", D - C - W, "L8: D = C + W", equality=True),
            from_lemma(l5c, "L5c"),
        ),
        multipliers={
            "L6": 1,
            "L7": alpha,
            "C1": alpha / 2 * M,
            "L9": alpha / 2,
            "L8": alpha / 2 * (L + eta) ** 2,
            "L5c": L * alpha**2 / 2,
        },
        domain=DOMAIN,
    )

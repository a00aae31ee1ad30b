"""The drift routes (O6-O8s): pull contraction, drift recursion and its solution for every
t by induction (pull-aware route), and the summed drift (Theorem 1 route).

One function per lemma; O7 borrows O6 and Theorem 1's L4 and L10a, O8a/O8b are built
from O7's object. Part of :mod:`theory.proofs.anchor` (``docs/anchor_theorem.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.anchor.notation import (
    D0,
    E2,
    PULL_DOMAIN,
    PULL_STEP_DOMAIN,
    Dn,
    Dt,
    E2n,
    Gk,
    Gx,
    H,
    L,
    V,
    Y,
    _nn,
    _u,
    alpha,
    eta,
    mpull,
    p,
    route,
    sigma,
    tt,
)
from theory.proofs.lemmas import (
    Domain,
    Hypothesis,
    Induction,
    Inequality,
    Lemma,
    borrow,
    from_lemma,
    sqnorm,
    vector,
)


def o6_pull_contraction() -> Lemma:
    """O6: ||q e - alpha delta - alpha g||^2 <= (1 - alpha m)||e||^2 + (alpha/m)||g||^2."""
    e, dl, g = vector("e"), vector("dl"), vector("g")
    w = sp.Symbol("w", nonnegative=True)
    q = 1 - alpha * eta
    m = eta - L
    s = 1 - alpha * m
    u, v = q * e - alpha * dl, -alpha * g
    c = alpha * m / s
    hyp = Hypothesis(
        "A1", L**2 * sqnorm(e) - sqnorm(dl), "A1: ||grad f_k(x) - grad f_k(z)|| <= L||e||"
    )
    cond = Hypothesis.condition("P1", alpha * eta, 1, "alpha eta <= 1 (pull weights in [0, 1])")
    return Inequality(
        "O6",
        "Pull contraction (eta > L)",
        "With q = 1 - alpha eta >= 0, m = eta - L > 0 and ||delta|| <= L||e||: "
        "||q e - alpha delta - alpha g||^2 <= (1 - alpha m)||e||^2 + (alpha/m)||g||^2.",
        "||q e - alpha delta|| <= (q + alpha L)||e|| = (1 - alpha m)||e|| (certificate below), "
        "then ||u + v||^2 <= (1 + c)||u||^2 + (1 + 1/c)||v||^2 with c = alpha m/(1 - alpha m).",
        uses=("A1",),
        lhs=sqnorm(u + v),
        rhs=s * sqnorm(e) + alpha / m * sqnorm(g),
        hypotheses=(hyp, cond),
        multipliers={"A1": (q * alpha / L + alpha**2) / s},
        nonneg_terms=(q * alpha / (L * s) * sqnorm(L * e + dl), (1 / c) * sqnorm(c * u - v)),
        domain=Domain(
            {eta: L + mpull, alpha: 1 / ((L + mpull) * (1 + w))},
            "eta = L + m (m > 0), alpha = 1/((L + m)(1 + w)) (w >= 0): alpha eta <= 1",
        ),
    )


def o7_drift_recursion(o6: Lemma, l4: Lemma, l10a: Lemma) -> Lemma:
    """O7: the one-step drift recursion; O6, L4 and L10a borrowed from their objects."""
    m = eta - L
    nu = 2 * (1 - p) * eta**2 / p + 4 * p * L**2 / (1 - p)
    rho = 1 - alpha * m + alpha**2 * nu
    Bk = (alpha / m + 4 * p * alpha**2 / (1 - p)) * Gk + alpha**2 * sigma**2 / (1 - p)
    return Inequality(
        "O7",
        "Drift recursion (eta > L)",
        "E||e_{t+1}||^2 <= rho ||e_t||^2 + B_k with rho = 1 - alpha (eta - L) + alpha^2 nu, "
        "nu = 2(1-p) eta^2/p + 4 p L^2/(1-p), B_k = (alpha/(eta-L) + 4p alpha^2/(1-p)) "
        "||grad f_k(z)||^2 + alpha^2 sigma^2/(1-p).",
        "e_{t+1} = q e_t - alpha grad f_k(x_t) - alpha xi_t, so E||e_{t+1}||^2 = Y + alpha^2 V "
        "(the noise has mean zero given the past); Y <= O6, V <= L4 (Theorem 1 chain), and "
        "||grad f_k(x)||^2 <= 2||grad f_k(z)||^2 + 2 L^2 ||e||^2 (L10a with A1).",
        uses=("O6", "L4", "L10a", "A1"),
        lhs=E2n,
        rhs=rho * E2 + Bk,
        hypotheses=(
            Hypothesis("step", Y + alpha**2 * V - E2n, source="martingale step", equality=True),
            borrow(o6, "O6", Y, {"e": E2, "g": Gk}),
            borrow(l4, "L4", V, {"e": E2, "g": Gx}),
            # L10a with a = grad f_k(z), b = grad f_k(x) - grad f_k(z), ||b||^2 <= L^2 ||e||^2 (A1)
            borrow(l10a, "L10a", Gx, {"a": Gk, "b": L**2 * E2}),
        ),
        multipliers={"step": 1, "O6": 1, "L4": alpha**2, "L10a": 2 * p * alpha**2 / (1 - p)},
        domain=PULL_DOMAIN,
    )


def _p2() -> Hypothesis:
    return Hypothesis.condition(
        "P2",
        alpha * _nu(),
        (eta - L) / 2,
        "alpha nu <= (eta - L)/2: the coin variance does not undo the pull contraction",
    )


def _recursion(o7: Lemma) -> tuple[sp.Expr, sp.Expr]:
    """``(rho, B)`` read off O7's right-hand side ``rho E2 + B``."""
    rhs = sp.sympify(o7.rhs)  # type: ignore[attr-defined]
    return sp.diff(rhs, E2), rhs.subs(E2, 0)


def _drift_induction(
    o7: Lemma, key: str, bound: sp.Expr, leftover: tuple[sp.Expr, ...], **text: str
) -> Lemma:
    """``D_t <= bound`` for every t >= 0 from D_0 = 0 and O7 (``bound`` = t B or cap B).

    The step's certificate: O7 with multiplier 1, the claim at t with multiplier rho, P2
    with multiplier ``alpha * bound`` and the nonnegative ``leftover`` terms."""
    rho = _recursion(o7)[0]
    start = Hypothesis("start", -D0, source="D_0 = 0: x_0 = z", equality=True)
    at0 = bound.subs(tt, 0)
    base = Inequality(
        f"{key}[base t=0]",
        "",
        "",
        lhs=D0,
        rhs=at0,
        hypotheses=(start,),
        multipliers={"start": 1},
        nonneg_terms=(at0,) if at0 != 0 else (),
        domain=PULL_STEP_DOMAIN,
    )
    step = Inequality(
        f"{key}[step]",
        "",
        "",
        lhs=Dn,
        rhs=bound.subs(tt, tt + 1),
        hypotheses=(
            Hypothesis("IH", bound - Dt, "claim at t"),
            from_lemma(o7, "O7", subs={E2n: Dn, E2: Dt}),
            _p2(),
        ),
        multipliers={"IH": rho, "O7": 1, "P2": alpha * bound},
        nonneg_terms=leftover,
        domain=PULL_STEP_DOMAIN,
    )
    return Induction(
        key,
        text["title"],
        text["statement"],
        text["proof"],
        uses=("O7", "P2"),
        lhs=Dt,
        rhs=bound,
        var=tt,
        start=0,
        advance={tt: tt + 1, Dt: Dn},
        base_subs={Dt: D0},
        base=base,
        step=step,
    )


def _nu() -> sp.Expr:
    return 2 * (1 - p) * eta**2 / p + 4 * p * L**2 / (1 - p)


def o8a_drift_horizon_t(o7: Lemma) -> Lemma:
    """O8a: D_t <= t B for every t (induction, built from O7's object)."""
    B = _recursion(o7)[1]
    return _drift_induction(
        o7,
        "O8a",
        tt * B,
        (alpha * (eta - L) / 2 * tt * B,),
        title="Drift solution, horizon t (every t, by induction)",
        statement="D_t <= t B for every t >= 0, B the constant term of O7 (rho <= 1 by P2).",
        proof="Base D_0 = 0. Step: D_{t+1} <= rho D_t + B (O7) <= rho t B + B <= (t + 1) B, "
        "since 1 - rho >= alpha (eta - L)/2 >= 0 (P2).",
    )


def o8b_drift_horizon_cap(o7: Lemma) -> Lemma:
    """O8b: D_t <= (2/(alpha (eta - L))) B for every t (induction, built from O7's object)."""
    B = _recursion(o7)[1]
    return _drift_induction(
        o7,
        "O8b",
        2 / (alpha * (eta - L)) * B,
        (),
        title="Drift solution, horizon 2/(alpha (eta - L)) (every t, by induction)",
        statement="D_t <= (2/(alpha (eta - L))) B for every t >= 0; with O8a, "
        "D_t <= min(t, 2/(alpha (eta - L))) B.",
        proof="Base D_0 = 0 <= cap B. Step: D_{t+1} <= rho D_t + B <= (rho cap + 1) B <= cap B, "
        "since rho <= 1 - alpha (eta - L)/2 (P2).",
    )


def o8s_summed_drift(kind: str) -> Lemma:
    """O8s: the summed drift S <= 2 A from S <= rho_S S + A and rho_S <= 1/2 (Theorem 1 route)."""
    Ssum, Aterm = sp.symbols("S_D A_D", **_nn)
    if not route(kind)[0]:  # no pulls: Local SGD
        rhoS = 4 * alpha**2 * L**2 * H * (H - 1) / 2
        cond = Hypothesis.condition("P3", 2 * alpha**2 * L**2 * H * (H - 1), sp.Rational(1, 2))
    else:
        P = H - 1 + 2 * p / (1 - p)
        rhoS = 2 * alpha**2 * (H - 1) * (2 * P * L**2 + 2 * (1 - p) * eta**2 / p)
        cond = Hypothesis.condition("P3", rhoS, sp.Rational(1, 2), "summed drift feedback <= 1/2")
    return Inequality(
        "O8s",
        "Summed drift",
        "S_D = sum_{t<H} D_t <= 2 A_D, where A_D collects the gradient and noise sums of the "
        "per-step drift (Theorem 1, L15-L16, measured from the anchor), if rho_S <= 1/2.",
        "S_D <= rho_S S_D + A_D and 1 - rho_S >= 1/2.",
        uses=("L15", "L16"),
        lhs=Ssum,
        rhs=2 * Aterm,
        hypotheses=(
            Hypothesis("rec", rhoS * Ssum + Aterm - Ssum, source="L16 from the anchor"),
            cond,
        ),
        multipliers={"rec": 2, "P3": 2 * Ssum},
        domain=Domain({p: _u / (1 + _u), H: 1 + sp.Symbol("h", nonnegative=True)}),
    )

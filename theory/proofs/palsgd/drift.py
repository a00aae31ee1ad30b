"""Drift within a round (L12-L16): unrolled deviation, martingale sums, anchor distance.

One function per lemma; L14 and L16 are certified for every t and H by induction.

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.lemmas import (
    Branches,
    Domain,
    Family,
    Hypothesis,
    Identity,
    Induction,
    Inequality,
    Lemma,
    borrow,
    expect,
    from_lemma,
    is_zero,
    mean_zero_two_point,
    sqnorm,
    vector,
)
from theory.proofs.palsgd.notation import DOMAIN, SD, H, SLam, alpha, eta, p, sigma, t_step


# ----------------------------------------------------------------------------- drift
def l15a_pull_contraction() -> Lemma:
    """L15a: the mean pull contracts (uses C2)."""
    q = 1 - alpha * eta
    c2 = Hypothesis.condition(
        "C2", alpha * eta, 2, "mean pull: alpha*eta <= 2, so |1 - alpha*eta| <= 1"
    )
    return Inequality(
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


def _unrolled_step_every_t(q: sp.Expr) -> Lemma:
    """L12 induction step for symbolic t: if e_t = -alpha sum_{s<t} q^{t-1-s} u_s, then
    e_t - alpha (grad_t + eta e_t + xi_t) = -alpha (sum_{s<t} q^{t-s} u_s + u_t), which is the
    closed form at t + 1 with its last term (s = t) split off; u_s = grad_s + xi_s."""
    t, s = sp.symbols("t s", integer=True, nonnegative=True)
    u = sp.Function("u")
    e_t = -alpha * sp.Sum(q ** (t - 1 - s) * u(s), (s, 0, t - 1))
    step = e_t - alpha * (eta * e_t + u(t))  # e_{t+1} = e_t - alpha (grad + eta e + xi)
    closed_next = -alpha * (sp.Sum(q ** (t - s) * u(s), (s, 0, t - 1)) + u(t))
    return _SumIdentity("L12[every t]", "", "", lhs=step, rhs=closed_next)


class _SumIdentity(Identity):
    """An identity between expressions with symbolic sums over the same range.

    ``lhs - rhs`` is expanded; the terms outside any sum must cancel, and the terms inside
    sums with the same limits are gathered into one summand, in which every power
    ``b**(e0 + k)`` of a common base with a symbolic exponent is written ``b**k * Z`` (``k`` an
    integer); that summand must reduce to zero (:func:`theory.proofs.lemmas.is_zero`).
    """

    def check(self):  # type: ignore[override]
        diff = sp.expand(sp.sympify(self.lhs) - sp.sympify(self.rhs))
        groups: dict[tuple, list[sp.Expr]] = {}
        rest = sp.S.Zero
        for term in sp.Add.make_args(diff):
            factors = sp.Mul.make_args(term)
            sums = [f for f in factors if isinstance(f, sp.Sum)]
            if len(sums) == 1:
                coeff = sp.Mul(*(f for f in factors if not isinstance(f, sp.Sum)))
                groups.setdefault(sums[0].limits, []).append(coeff * sums[0].function)
            else:
                rest += term
        ok = is_zero(rest) and all(is_zero(_common_powers(sp.Add(*fs))) for fs in groups.values())
        return self.result(ok, "lhs - rhs == 0" if ok else "lhs != rhs")


def _common_powers(expr: sp.Expr) -> sp.Expr:
    """Write powers ``b**e`` with symbolic exponents as ``b**(e - e0) * Z_b`` (integer shift)."""
    expr = sp.expand(expr)
    pows = [a for a in expr.atoms(sp.Pow) if not a.exp.is_number]
    by_base: dict[sp.Expr, list[sp.Pow]] = {}
    for a in pows:
        by_base.setdefault(a.base, []).append(a)
    for i, (base, items) in enumerate(by_base.items()):
        e0 = items[0].exp
        z = sp.Symbol(f"Z_{i}", positive=True)
        for a in items:
            k = sp.simplify(a.exp - e0)
            if k.is_integer:
                expr = expr.xreplace({a: base**k * z})
    return sp.expand(expr)


def l12_unrolled_deviation() -> Lemma:
    """L12: the anchor deviation unrolled (instances t = 1..5 and the step for every t)."""
    q = 1 - alpha * eta
    g = sp.IndexedBase("grad")
    xi = sp.IndexedBase("xi")
    parts: list[Lemma] = []
    for t in range(1, 6):
        e = sp.S.Zero
        for s in range(t):
            e = e - alpha * (g[s] + eta * e + xi[s])
        closed = -alpha * sum((q ** (t - 1 - s) * (g[s] + xi[s]) for s in range(t)), sp.S.Zero)
        parts.append(Identity(f"L12[t={t}]", "", "", lhs=e, rhs=closed))
    parts.append(_unrolled_step_every_t(q))
    return Family(
        "L12",
        "Unrolled anchor deviation",
        "From e_0 = 0 and e_{s+1} = e_s - alpha(grad f_k(x_s) + eta e_s + xi_s) (xi_s = G_s - E_s G_s): "
        "e_t = -alpha sum_{s<t} q^{t-1-s} (grad f_k(x_s) + xi_s), q = 1 - alpha eta.",
        "Induction on t; the step is linear in (e, grad, xi), so it holds coordinate-wise. "
        "Checked for t = 1..5, and the induction step for every t (symbolic t, the sum's last "
        "term split off).",
        uses=("L1",),
        parts=tuple(parts),
    )


def l13_martingale() -> Lemma:
    """L13: martingale orthogonality on a two-step tree with a branch-dependent second step."""
    x0, _ = mean_zero_two_point("z0")
    v = [vector(f"u{i}") for i in range(2)]
    rho = [sp.Symbol(f"rho{i}", positive=True) for i in range(2)]
    c0, c1 = sp.symbols("c0 c1", real=True)
    lhs = sp.S.Zero
    second = sp.S.Zero
    for i, (pr0, val0) in enumerate(x0.outcomes):
        branch = Branches.of((rho[i], v[i]), (1 - rho[i], -rho[i] * v[i] / (1 - rho[i])))
        lhs += pr0 * expect(lambda x1, val0=val0: sqnorm(c0 * val0 + c1 * x1), branch)
        second += pr0 * expect(sqnorm, branch)
    return Identity(
        "L13",
        "Martingale orthogonality",
        "For martingale differences xi_s (E[xi_s | past] = 0) and fixed weights c_s: "
        "E||sum_s c_s xi_s||^2 = sum_s c_s^2 E||xi_s||^2.",
        "Cross terms E<xi_r, xi_s> (r < s) vanish by the tower property. Checked on a two-step "
        "tree whose second-step distribution depends on the first step's branch.",
        lhs=lhs,
        rhs=c0**2 * expect(sqnorm, x0) + c1**2 * second,
    )


def _cauchy_schwarz_instance(t: int) -> Lemma:
    """L14 at a fixed t: Lagrange's identity as a certificate (a cross-check of the induction)."""
    vs = [vector(f"v{s}") for s in range(t)]
    cs = sp.symbols(f"c0:{t}", real=True)
    total = sum((cs[s] * vs[s] for s in range(t)), sp.zeros(2, 1))
    return Inequality(
        f"L14[t={t}]",
        "",
        "",
        lhs=sqnorm(total),
        rhs=t * sum((sqnorm(vv) for vv in vs), sp.S.Zero),
        hypotheses=tuple(Hypothesis(f"c{s}", 1 - cs[s] ** 2, "c_s^2 <= 1") for s in range(t)),
        multipliers={f"c{s}": t * sqnorm(vs[s]) for s in range(t)},
        nonneg_terms=tuple(
            sqnorm(cs[r] * vs[r] - cs[s] * vs[s]) for r in range(t) for s in range(r + 1, t)
        ),
    )


def l14_cauchy_schwarz() -> Lemma:
    """L14 for every t >= 1, by induction: ||S_t||^2 <= t N_t with S_t = sum_{s<t} c_s v_s,
    N_t = sum_{s<t} ||v_s||^2 and c_s^2 <= 1."""
    t = t_step
    S, v = vector("S"), vector("v")
    c = sp.Symbol("c", real=True)
    N = sp.Symbol("N_v", nonnegative=True)
    j = sp.Symbol("j", nonnegative=True)
    c_ok = Hypothesis("c", 1 - c**2, "c_t^2 <= 1")
    advance = {t: t + 1, N: N + sqnorm(v), **{S[i]: S[i] + c * v[i] for i in range(len(S))}}
    base = Inequality(
        "L14[base t=1]",
        "",
        "",
        lhs=sqnorm(c * v),
        rhs=sqnorm(v),
        hypotheses=(c_ok,),
        multipliers={"c": sqnorm(v)},
    )
    step = Inequality(
        "L14[step]",
        "",
        "",
        lhs=sqnorm(S + c * v),
        rhs=(t + 1) * (N + sqnorm(v)),
        hypotheses=(Hypothesis("IH", t * N - sqnorm(S), "claim at t"), c_ok),
        multipliers={"IH": 1 + 1 / t, "c": (1 + t) * sqnorm(v)},
        nonneg_terms=(sqnorm(S - t * c * v) / t,),
        domain=Domain({t: 1 + j}, "t >= 1 (t = 1 + j)"),
    )
    return Induction(
        "L14",
        "Weighted Cauchy-Schwarz",
        "If c_s^2 <= 1: ||sum_{s<t} c_s v_s||^2 <= t sum_{s<t} ||v_s||^2, for every t >= 1.",
        "Induction on t. Base t = 1: ||c_0 v_0||^2 <= ||v_0||^2. Step: with S = sum_{s<t} c_s v_s "
        "and N = sum_{s<t} ||v_s||^2, ||S + c v||^2 <= (1 + 1/t)||S||^2 + (1 + t) c^2 ||v||^2 "
        "(the slack is ||S - t c v||^2/t) <= (t + 1)(N + ||v||^2) by the claim at t and c^2 <= 1. "
        "Cross-checked by Lagrange's identity for t = 1..4.",
        lhs=sqnorm(S),
        rhs=t * N,
        var=t,
        start=1,
        advance=advance,
        base_subs={N: sqnorm(v), **{S[i]: c * v[i] for i in range(len(S))}},
        base=base,
        step=step,
        extra=tuple(_cauchy_schwarz_instance(n) for n in range(1, 5)),
    )


# per-worker, per-step scalars of L15 (sums over s < t, averaged over the workers)
Dt, At, Bt, SLt, SDt, SVt, SVqt = sp.symbols("D_t A_t B_t SLam_t SD_t SV_t SVq_t", nonnegative=True)


def l15_anchor_distance(l4: Lemma, l14: Lemma) -> Lemma:
    """L15: the anchor distance at step t; L4's and L14's hypotheses from their objects."""
    t = t_step
    rhs15 = (
        2
        * alpha**2
        * ((t + 2 * p / (1 - p)) * SLt + 2 * (1 - p) * eta**2 * SDt / p + t * sigma**2 / (1 - p))
    )
    N = next(s for s in sp.sympify(l14.rhs).free_symbols if s != t)  # type: ignore[attr-defined]
    return Inequality(
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
            # L14 with c_s = q^{t-1-s} (L15a), v_s = grad_s, averaged: N_t -> SLam_t
            borrow(l14, "L14", At, subs={N: SLt}),
            Hypothesis("L13", SVqt - Bt, "B_t = sum q^{2(t-1-s)} E Var_s", equality=True),
            Hypothesis("L15a", SVt - SVqt, "q^{2j} <= 1 and Var_s >= 0"),
            # L4 summed over the t steps s < t and averaged over the workers
            borrow(l4, "L4", SVt / t, {"e": SDt / t, "g": SLt / t}, scale=t),
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


def _round_drift_rhs(co: dict[str, sp.Expr]) -> sp.Expr:
    return (
        alpha**2 * (H - 1) * co["P"] * SLam
        + 4 * alpha**2 * eta**2 * (H - 1) * (1 - p) / p * SD
        + alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
    )


def _l15_at(l15: Lemma, name: str, t: sp.Expr, slam: sp.Expr, sd: sp.Expr, d: sp.Expr):
    """L15 at step ``t`` with its partial sums ``slam``, ``sd`` and its ``D_t = d``."""
    return from_lemma(l15, name, subs={t_step: t, SLt: slam, SDt: sd, Dt: d})


def _round_drift_cross_checks(co: dict[str, sp.Expr], l15: Lemma) -> tuple[Lemma, ...]:
    """The exchange-of-sums weights (symbolic s, H) and the whole inequality for H = 1..5."""
    s_, t_ = sp.symbols("s t_", integer=True, nonnegative=True)
    parts: list[Lemma] = [
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
    for n in range(1, 6):
        lam = sp.symbols(f"Lam0:{n}", nonnegative=True)
        dd = sp.symbols(f"D0:{n}", nonnegative=True)
        hyps = [
            _l15_at(l15, f"L15[t={k}]", k, sum(lam[:k], sp.S.Zero), sum(dd[:k], sp.S.Zero), dd[k])
            for k in range(n)
        ]
        rhs = _round_drift_rhs(co).subs(H, n).subs({SLam: sum(lam), SD: sum(dd)})
        rest = rhs - sum(dd) - sum((h.slack for h in hyps), sp.S.Zero)
        parts.append(
            Inequality(
                f"L16[H={n}]",
                "",
                "",
                lhs=sum(dd),
                rhs=rhs,
                hypotheses=tuple(hyps),
                multipliers={h.name: 1 for h in hyps},
                nonneg_terms=(sp.expand(rest),),
                domain=DOMAIN,
            )
        )
    return tuple(parts)


def l16_round_drift(co: dict[str, sp.Expr], l15: Lemma) -> Lemma:
    """L16 for every H >= 1, by induction on H; its L15 hypotheses from L15's object."""
    rhs = _round_drift_rhs(co)
    DH, LH, D1, Lam1 = sp.symbols("D_H Lam_H D_first Lam_first", nonnegative=True)
    advance = {H: H + 1, SD: SD + DH, SLam: SLam + LH}
    base = Inequality(
        "L16[base H=1]",
        "",
        "",
        lhs=D1,
        rhs=rhs.xreplace({H: 1, SD: D1, SLam: Lam1}),
        hypotheses=(_l15_at(l15, "L15", 0, 0, 0, D1),),
        multipliers={"L15": 1},
        domain=DOMAIN,
    )
    step = Inequality(
        "L16[step]",
        "",
        "",
        lhs=SD + DH,
        rhs=rhs.xreplace(advance),
        hypotheses=(
            Hypothesis("IH", rhs - SD, "claim at H"),
            _l15_at(l15, "L15", H, SLam, SD, DH),
        ),
        multipliers={"IH": 1, "L15": 1},
        nonneg_terms=(
            alpha**2 * H * (H + 1 + 4 * p / (1 - p)) * LH,
            4 * alpha**2 * eta**2 * H * (1 - p) / p * DH,
        ),
        domain=DOMAIN,
    )
    return Induction(
        "L16",
        "Anchor distance over a round",
        "SD <= alpha^2 (H-1) P SLam + 4 alpha^2 eta^2 (H-1)(1-p)/p SD + alpha^2 sigma^2 H(H-1)/(1-p), "
        "P = H + 4p/(1-p), for every H >= 1; SD, SLam, SPhi are sums over the H steps of a round.",
        "Induction on H. Base H = 1: D_0 <= 0 is L15 at t = 0. Step H -> H + 1: add L15 at t = H "
        "(its sums over s < H are SLam and SD) to the claim at H; the coefficients of SLam, SD "
        "and sigma^2 then match the claim at H + 1 exactly, and what is left is "
        "alpha^2 H (H + 1 + 4p/(1-p)) Lam_H + 4 alpha^2 eta^2 H (1-p)/p D_H >= 0. "
        "Cross-checks: the exchange-of-sums weights (symbolic s, H) and the whole inequality "
        "for H = 1..5.",
        uses=("L15",),
        lhs=SD,
        rhs=rhs,
        var=H,
        start=1,
        advance=advance,
        base_subs={SD: D1, SLam: Lam1},
        base=base,
        step=step,
        extra=_round_drift_cross_checks(co, l15),
    )

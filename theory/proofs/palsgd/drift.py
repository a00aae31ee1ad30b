"""Drift within a round (L12-L16): unrolled deviation, martingale sums, anchor distance.

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.lemmas import (
    Branches,
    CheckResult,
    Family,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    expect,
    is_zero,
    mean_zero_two_point,
    sqnorm,
    vector,
)
from theory.proofs.palsgd.notation import DOMAIN, SD, H, SLam, alpha, eta, p, sigma


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
        return CheckResult(self.key, ok, self.method, "lhs - rhs == 0" if ok else "lhs != rhs")


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
    parts.append(_unrolled_step_every_t(q))
    L12 = Family(
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

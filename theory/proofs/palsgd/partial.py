"""The final partial round (L21a, L21b, L21): the bound for every T, not only multiples of H.

A run of ``T = R H + H'`` steps, ``1 <= H' < H``, ends with a round of ``H'`` steps. Every
lemma of the chain holds for any round length (H is a symbol), so L18b holds for the
partial round with ``H'`` in place of ``H`` once its conditions hold at ``H'``; L21a shows
that they follow from those at ``H`` and L21b that the partial round's constant is at most
its share ``H' Q/H`` of a full round's.

One function per lemma. Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.lemmas import Domain, Family, Hypothesis, Inequality, Lemma, from_lemma
from theory.proofs.palsgd.notation import F0, Delta, H, R, SPhi, _u, alpha, p

Hp = sp.Symbol("H_p", positive=True, integer=True)  # length H' of the final partial round
_hp = sp.Symbol("h_p", nonnegative=True)
_j = sp.Symbol("j", nonnegative=True)
#: 0 < p < 1, H' >= 1 (H' = 1 + h_p) and H >= H' (H = H' + j)
PARTIAL_DOMAIN = Domain(
    {p: _u / (1 + _u), Hp: 1 + _hp, H: 1 + _hp + _j},
    "0 < p < 1, H' = 1 + h_p >= 1, H = H' + j >= H'",
)


def _shrinks(key: str, name: str, value: sp.Expr, limit: sp.Expr) -> Inequality:
    """``value(H') <= limit`` from the condition ``value(H) <= limit`` (value increasing in H)."""
    at = value.subs(H, Hp)
    return Inequality(
        key,
        "",
        "",
        lhs=at,
        rhs=limit,
        hypotheses=(Hypothesis.condition(name, value, limit),),
        multipliers={name: 1},
        nonneg_terms=(value - at,),
        domain=PARTIAL_DOMAIN,
    )


def l21a_conditions_at_shorter_rounds(co: dict[str, sp.Expr]) -> Lemma:
    """L21a: C3 and C4 at H' <= H follow from C3 and C4 at H (C1 and C2 do not involve H)."""
    return Family(
        "L21a",
        "Conditions for a shorter round",
        "For 1 <= H' <= H: rho_D(H') <= rho_D(H) <= 1/3 and loss(H') <= loss(H) <= alpha/4, "
        "so C3 and C4 at H imply them at H'.",
        "rho_D(H) - rho_D(H') and loss(H) - loss(H') are polynomials in H' - 1 and H - H' with "
        "nonnegative coefficients (after p = u/(1+u)).",
        uses=("C3", "C4"),
        parts=(
            _shrinks("L21a[C3]", "C3", co["rho_D"], sp.Rational(1, 3)),
            _shrinks("L21a[C4]", "C4", co["loss"], alpha / 4),
        ),
    )


def l21b_round_constant_share(co: dict[str, sp.Expr]) -> Lemma:
    """L21b: Q(H') <= H' Q(H)/H for 1 <= H' <= H (Q/H is increasing in H)."""
    Q = co["Q"]
    return Inequality(
        "L21b",
        "Round constant of a shorter round",
        "For 1 <= H' <= H: Q(H') <= (H'/H) Q(H).",
        "Q/H = (2 chi c_Gam + 3 alpha^2 (H-1) P c') zeta^2 + (3/2) c' alpha^2 sigma^2 (H-1)/(1-p) "
        "+ n_1 grows with H; the slack is a polynomial with nonnegative coefficients.",
        lhs=Q.subs(H, Hp),
        rhs=Hp * Q / H,
        nonneg_terms=(Hp * Q / H - Q.subs(H, Hp),),
        domain=PARTIAL_DOMAIN,
    )


def l21_final_partial_round(co: dict[str, sp.Expr], l18b: Lemma, l21b: Lemma) -> Lemma:
    """L21: Theorem 1 for T = R H + H' (R >= 0 full rounds, then H' < H steps)."""
    SPhi_full, SDelta, SPhi_p, Delta_p = sp.symbols("SPhi_full SDelta SPhi_p Delta_p", real=True)
    Q = co["Q"]
    partial = from_lemma(l18b, "L18b[H']", {H: Hp, Delta: Delta_p, SPhi: SPhi_p})
    share = from_lemma(l21b, "L21b")
    parts = []
    for full, key in ((True, "L21[R>=1]"), (False, "L21[R=0]")):
        steps = R * H + Hp if full else Hp
        delta = SDelta if full else sp.S.Zero
        hyps = [partial, share, Hypothesis("L19", F0 - delta - Delta_p, "telescoping and A4")]
        if full:  # L18b summed over the R full rounds (linearity)
            hyps.append(from_lemma(l18b, "L18b", {Delta: SDelta / R, SPhi: SPhi_full / R}, scale=R))
        parts.append(
            Inequality(
                key,
                "",
                "",
                lhs=(SPhi_full + SPhi_p if full else SPhi_p) / steps,
                rhs=4 * F0 / (alpha * steps) + 4 * Q / (alpha * H),
                hypotheses=tuple(hyps),
                multipliers={h.name: 4 / (alpha * steps) for h in hyps},
                domain=PARTIAL_DOMAIN,
            )
        )
    return Family(
        "L21",
        "Final partial round",
        "For T = R H + H' with R >= 0 and 1 <= H' < H: (1/T) sum_{t<T} E||grad f(xbar_t)||^2 "
        "<= 4 F0/(alpha T) + 4 Q/(alpha H), the bound of L20, under C1-C4 at H.",
        "L18b for each of the R full rounds and, with H' in place of H (its conditions by L21a), "
        "for the partial round; the f terms telescope to f(z_0) - f(xbar_T) <= F0 (L19, A4); "
        "Q(H') <= H' Q/H (L21b), so the constants sum to (R H + H') Q/H = T Q/H; divide by "
        "alpha T/4. Checked for R >= 1 and for R = 0 (T < H).",
        uses=("L18b", "L21a", "L21b", "L19", "A4"),
        parts=tuple(parts),
    )

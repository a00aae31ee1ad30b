"""Rounds and assembly (L17-L20s): drift with feedback, round descent, telescoping, theorem.

One function per lemma; every hypothesis taken from an earlier lemma is built from its object.

Part of :mod:`theory.proofs.palsgd` (``docs/palsgd_proof.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.lemmas import (
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    from_lemma,
)
from theory.proofs.palsgd.notation import (
    DOMAIN,
    F0,
    SD,
    D,
    Delta,
    Gam,
    H,
    Lam,
    Omega,
    Phi,
    R,
    SGam,
    SLam,
    SPhi,
    T,
    alpha,
    f0,
    fplus,
    p,
    sigma,
    zeta,
)


# ----------------------------------------------------------------------------- assembly
def _round_sums(name: str, lemma: Lemma, per_step: dict[sp.Expr, sp.Expr]):
    """A per-step lemma summed over the H steps of a round: each per-step symbol replaced by
    its round sum divided by H, the slack multiplied by H (linearity)."""
    return from_lemma(lemma, name, subs={k: v / H for k, v in per_step.items()}, scale=H)


def l17_drift_feedback(co: dict[str, sp.Expr], l16: Lemma, l10: Lemma) -> Lemma:
    """L17 (uses C3): L16 with L10 inserted; both hypotheses from the lemma objects."""
    P, rho_D = co["P"], co["rho_D"]
    c3 = Hypothesis.condition("C3", rho_D, sp.Rational(1, 3), "drift feedback: rho_D <= 1/3")
    drift_rhs = 3 * alpha**2 * (H - 1) * P * (H * zeta**2 + SPhi) + sp.Rational(
        3, 2
    ) * alpha**2 * sigma**2 * H * (H - 1) / (1 - p)
    return Inequality(
        "L17",
        "Anchor distance with feedback",
        "Under C3: SD <= 3 alpha^2 (H-1) P (H zeta^2 + SPhi) + (3/2) alpha^2 sigma^2 H(H-1)/(1-p).",
        "Insert L10 (summed over the round) into L16: (1 - rho_D) SD <= 2 alpha^2 (H-1) P "
        "(H zeta^2 + SPhi) + alpha^2 sigma^2 H(H-1)/(1-p), and 1 - rho_D >= 2/3 by C3.",
        uses=("L16", "L10", "C3"),
        lhs=SD,
        rhs=drift_rhs,
        hypotheses=(
            from_lemma(l16, "L16"),
            _round_sums("L10", l10, {Lam: SLam, D: SD, Phi: SPhi}),
            c3,
        ),
        multipliers={
            "L16": sp.Rational(3, 2),
            "L10": sp.Rational(3, 2) * alpha**2 * (H - 1) * P,
            "C3": sp.Rational(3, 2) * SD,
        },
        domain=DOMAIN,
    )


def l18_round_descent(
    co: dict[str, sp.Expr], coins: str, l11: Lemma, gam_split: Lemma, l17: Lemma
) -> Lemma:
    """L18: L11 summed over a round, Gam split by L10 (L10s), L17; all from the lemma objects."""
    c_gam, c_prime, Q = co["c_Gam"], co["c_prime"], co["Q"]
    split = "L10" if coins == "independent" else "L10s"
    gam = Lam if coins == "independent" else Gam
    return Inequality(
        "L18",
        "Round descent",
        "omega SPhi <= f(z_r) - E f(z_{r+1}) + Q, omega = alpha/2 - 2 c_Gam - 3 alpha^2 (H-1) P c', "
        "Q = H (2 chi c_Gam + 3 alpha^2 (H-1) P c') zeta^2 + (3/2) c' alpha^2 sigma^2 H(H-1)/(1-p) "
        "+ H n_1, c' = c_D + 2 L^2 c_Gam.",
        "Sum L11 over the round; the f-terms telescope to f(z_r) - f(z_{r+1}) because with outer "
        "averaging xbar at the end of round r is z_{r+1} (L19). Then Gam <= 2L^2 D + 2 chi zeta^2 "
        "+ 2 Phi (L10 or L10s) and L17.",
        uses=("L11", "L19", split, "L17"),
        lhs=co["omega"] * SPhi,
        rhs=Delta + Q,
        hypotheses=(
            # L11 summed over the round: sum of f(xbar_{t+1}) - f(xbar_t) = -Delta (L19)
            _round_sums("L11", l11, {fplus: f0 * H - Delta, Phi: SPhi, D: SD, Gam: SGam}),
            _round_sums(split, gam_split, {gam: SGam, D: SD, Phi: SPhi}),
            from_lemma(l17, "L17"),
        ),
        multipliers={"L11": 1, split: c_gam, "L17": c_prime},
        domain=DOMAIN,
    )


def l18b_round_descent_c4(co: dict[str, sp.Expr], l18: Lemma) -> Lemma:
    """L18b (uses C4): L18 with omega >= alpha/4."""
    c4 = Hypothesis.condition(
        "C4",
        co["loss"],
        alpha / 4,
        "absorption: the descent keeps at least alpha/4 of its ||grad f||^2 term",
    )
    return Inequality(
        "L18b",
        "Round descent under C4",
        "Under C4 (omega >= alpha/4): (alpha/4) SPhi <= f(z_r) - E f(z_{r+1}) + Q.",
        "L18 and (omega - alpha/4) SPhi >= 0.",
        uses=("L18", "C4"),
        lhs=alpha / 4 * SPhi,
        rhs=Delta + co["Q"],
        hypotheses=(from_lemma(l18, "L18"), c4),
        multipliers={"L18": 1, "C4": SPhi},
        domain=DOMAIN,
    )


def l19_telescoping() -> Lemma:
    """L19: the f terms telescope over rounds (symbolic R)."""
    a = sp.IndexedBase("fz")
    r = sp.Symbol("r", integer=True, nonnegative=True)
    return Identity(
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


SPhi_all, SDelta = sp.symbols("SPhi_all SDelta", real=True)


def bound_expression(co: dict[str, sp.Expr]) -> sp.Expr:
    """The bound of Theorem 1, ``4 F0/(alpha T) + 4 Q/(alpha H)``."""
    return 4 * F0 / (alpha * T) + 4 * co["Q"] / (alpha * H)


def sharp_expression(co: dict[str, sp.Expr]) -> sp.Expr:
    """The sharp form ``F0/(omega T) + Q/(omega H)``."""
    return F0 / (co["omega"] * T) + co["Q"] / (co["omega"] * H)


def l20_theorem(co: dict[str, sp.Expr], l18b: Lemma) -> Lemma:
    """L20 (Theorem 1): L18b summed over the rounds, built from its object."""
    return Inequality(
        "L20",
        "Theorem 1 (assembly)",
        "(1/T) sum_{t<T} E||grad f(xbar_t)||^2 <= 4 F0/(alpha T) + 4 Q/(alpha H), T = R H.",
        "Sum L18b over the R rounds, bound the telescoped sum by F0 (L19, A4), divide by "
        "alpha T/4.",
        uses=("L18b", "L19", "A4"),
        lhs=SPhi_all / (R * H),
        rhs=bound_expression(co).subs(T, R * H),
        hypotheses=(
            from_lemma(
                l18b, "L18b", {Delta: SDelta / R, SPhi: SPhi_all / R}, scale=R
            ),  # L18b summed over the R rounds (linearity)
            Hypothesis("L19", F0 - SDelta, "telescoping and A4"),
        ),
        multipliers={"L18b": 4 / (alpha * R * H), "L19": 4 / (alpha * R * H)},
        domain=DOMAIN,
    )


def l20s_sharp(co: dict[str, sp.Expr], l18: Lemma) -> Lemma:
    """L20s: the sharp form, L18 summed over the rounds (omega renamed Omega > 0)."""
    Q = co["Q"]
    return Inequality(
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
            from_lemma(
                l18,
                "L18",
                {Delta: SDelta / R, SPhi: Omega * SPhi_all / (R * co["omega"])},
                scale=R,
            ),
            Hypothesis("L19", F0 - SDelta, "telescoping and A4"),
        ),
        multipliers={"L18": 1 / (Omega * R * H), "L19": 1 / (Omega * R * H)},
        domain=DOMAIN,
    )

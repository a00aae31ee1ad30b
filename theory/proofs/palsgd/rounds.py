"""Rounds and assembly (L17-L20s): drift with feedback, round descent, telescoping, theorem.

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
    Delta,
    H,
    L,
    Omega,
    R,
    SGam,
    SLam,
    SPhi,
    T,
    alpha,
    eta,
    p,
    sigma,
    zeta,
)


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

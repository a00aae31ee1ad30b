"""The round inequality and the theorem (O5, O9, O10).

One function per lemma; O9 builds its O3, O4 and O5 hypotheses from their objects and O10
its O9 hypothesis. Part of :mod:`theory.proofs.anchor` (``docs/anchor_theorem.md``)."""

from __future__ import annotations

import sympy as sp

from theory.proofs.anchor.notation import (
    D2,
    F0,
    GENERIC,
    Gz,
    He,
    Hlo,
    Hup,
    K,
    L,
    Phi,
    R,
    alpha,
    dF,
    ip,
    round_constants,
    sigma,
    sw,
    zeta,
)
from theory.proofs.lemmas import Cited, Hypothesis, Inequality, Lemma, borrow, from_lemma


def o5_displacement() -> Lemma:
    """O5: the displacement's second moment (argued, not certified)."""
    g = GENERIC
    return Cited(
        "O5",
        "Displacement second moment",
        "E||Delta||^2 <= alpha^2 [4 H_e^2 Phi + 4 L^2 H_e^2 s_w + (2 H_e/K)(nu s_w + c_p G_z "
        "+ sigma^2/(1-p))], s_w = (1/H_e) sum_s w_s D_s, G_z = (1/K) sum_k ||grad f_k(z)||^2.",
        "Delta = -alpha sum_s w_s (gbar_s + xibar_s) (unrolled step, weights w_s <= 1 summing to "
        "H_e); L10a splits predictable and martingale parts; weighted Cauchy-Schwarz bounds the "
        "first by H_e sum_s w_s ||gbar_s||^2 <= H_e sum_s w_s (2 Phi + 2 L^2 D_s); L13 and "
        "w_s^2 <= w_s the second by sum_s w_s E||xibar_s||^2, and with independent coins "
        "E||xibar_s||^2 <= (1/K)(nu D_s + c_p G_z + sigma^2/(1-p)) by L4 and L10a.",
        uses=("L4", "L10a", "L13", "A1"),
        reference="composition of Theorem 1's L4, L10a and L13 (argued, not certified)",
        lhs=D2,
        rhs=alpha**2
        * (
            4 * He**2 * Phi
            + 4 * L**2 * He**2 * sw
            + 2 * He / K * (g["nu"] * sw + g["cp"] * Gz + sigma**2 / g["omp"])
        ),
    )


def o9_round(o3: Lemma, o4: Lemma, o5: Lemma) -> Lemma:
    """O9: the round inequality; O3, O4 and O5 from their objects."""
    gp, Lo, XG = GENERIC["gp"], GENERIC["Lo"], GENERIC["XG"]
    cS, Ez, Es = round_constants(He)
    omega_up = (sp.Rational(1, 2) - 2 * Lo * gp * alpha * He - Ez).subs(He, Hup)
    return Inequality(
        "O9",
        "Round inequality",
        "E f(y_{r+1}) - f(y_r) <= -gamma' alpha H_e [Phi/4 - E_zeta zeta^2 - E_sigma sigma^2] "
        "if omega(H_up) >= 1/4 (per round; summed over rounds by linearity).",
        "Outer descent (O1-O3 or the descent lemma at mu = 0), O4 summed, O5, the drift lemma "
        "(s_w <= X_G G_z + X_s sigma^2), A3 (G_z <= Phi + zeta^2) and omega decreasing in H_e.",
        uses=("O1", "O2", "O3", "O4", "O5", "drift", "A3"),
        lhs=dF,
        rhs=-gp * alpha * He * (Phi / 4 - Ez * zeta**2 - Es * sigma**2),
        hypotheses=(
            from_lemma(o3, "O3"),
            # O4 weighted by w_s and summed (sum w_s = H_e), ||delta_s||^2 <= L^2 D_s (A1)
            borrow(o4, "O4", ip / (alpha * He), {"a": Phi, "dl": L**2 * sw}, scale=alpha * He),
            from_lemma(o5, "O5"),
            Hypothesis("drift", XG * Gz + GENERIC["Xs"] * sigma**2 - sw, source="drift lemma"),
            Hypothesis("A3", Phi + zeta**2 - Gz, source="A3 with L8"),
            Hypothesis("up", Hup - He, source="H_e <= H_up"),
            Hypothesis.condition(
                "C", sp.Rational(1, 4), omega_up, "omega(H_up) >= 1/4 (absorption)"
            ),
        ),
        multipliers={
            "O3": 1,
            "O4": gp,
            "O5": Lo * gp**2 / 2,
            "drift": gp * alpha * He * cS,
            "A3": gp * alpha * He * Ez,
            "up": gp * alpha * He * Phi * 2 * Lo * gp * alpha * (1 + L**2 * XG),
            "C": gp * alpha * He * Phi,
        },
    )


def o10_theorem(o9: Lemma) -> Lemma:
    """O10 (Theorem 2), built from the object of O9 (its right-hand side, summed)."""
    gp, Lo, XG, Xs = GENERIC["gp"], GENERIC["Lo"], GENERIC["XG"], GENERIC["Xs"]
    _, Ez, Es = round_constants(Hup)
    SPhi, SdF = sp.symbols("S_Phi S_dF", real=True)
    return Inequality(
        "O10",
        "Theorem 2",
        "(1/R) sum_{r<R} E||grad f(z_r)||^2 <= 4 F0/(gamma' alpha H_lo R) + 4 E_zeta(H_up) zeta^2 "
        "+ 4 E_sigma(H_up) sigma^2.",
        "Sum O9 over the R rounds (telescoping: sum of f(y_{r+1}) - f(y_r) = f(y_R) - f(y_0) >= "
        "-F0 by A4, y_0 = z_0), divide by gamma' alpha H_e R/4, then H_lo <= H_e <= H_up.",
        uses=("O9", "A4"),
        lhs=SPhi / R,
        rhs=4 * F0 / (gp * alpha * Hlo * R) + 4 * Ez * zeta**2 + 4 * Es * sigma**2,
        hypotheses=(
            # O9 summed over the R rounds: dF -> S_dF/R, Phi -> S_Phi/R, times R
            from_lemma(o9, "O9", subs={dF: SdF / R, Phi: SPhi / R}, scale=R),
            Hypothesis("A4", SdF + F0, source="A4: f(y_R) - f(y_0) >= -F0"),
            Hypothesis("lo", He - Hlo, source="H_e >= H_lo"),
            Hypothesis("up", Hup - He, source="H_e <= H_up"),
        ),
        multipliers={
            "O9": 4 / (gp * alpha * He * R),
            "A4": 4 / (gp * alpha * He * R),
            "lo": 4 * F0 / (gp * alpha * Hlo * He * R),
            "up": 8 * Lo * gp * alpha * L**2 * (XG * zeta**2 + Xs * sigma**2),
        },
    )

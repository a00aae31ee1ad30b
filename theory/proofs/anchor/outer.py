"""The outer step (O1-O4): virtual sequence of the outer momentum, its cost, the outer
descent, and the anchor inner product.

One function per lemma. Part of :mod:`theory.proofs.anchor` (``docs/anchor_theorem.md``)."""

from __future__ import annotations

import random

import sympy as sp

from theory.proofs.anchor.notation import D2, GENERIC, L, dF, gamma, ip, mu
from theory.proofs.lemmas import Cited, Domain, Identity, Inequality, Lemma, dot, sqnorm, vector


def _nesterov_y_step(z0: sp.Matrix, b0: sp.Matrix, d: sp.Matrix) -> sp.Matrix:
    g = -d  # PyTorch's outer gradient z - xbar
    b1 = mu * b0 + g
    z1 = z0 - gamma * (g + mu * b1)
    k = gamma * mu**2 / (1 - mu)
    return (z1 - k * b1) - (z0 - k * b0)


def o1_virtual_sequence() -> Lemma:
    """O1: heavy ball and Nesterov both move a virtual sequence by gamma/(1-mu) Delta."""
    z0, zm, b0, d = vector("z"), vector("zp"), vector("buf"), vector("D")
    gp = gamma / (1 - mu)
    z1 = z0 + gamma * d + mu * (z0 - zm)  # heavy ball
    return Identity(
        "O1",
        "Virtual sequence of the outer momentum",
        "Heavy ball y_r = z_r + (mu/(1-mu))(z_r - z_{r-1}) and PyTorch Nesterov "
        "y_r = z_r - (gamma mu^2/(1-mu)) buf_{r-1} both satisfy y_{r+1} = y_r + (gamma/(1-mu)) Delta_r.",
        "Substitute one outer step (stacked: heavy-ball rows, then Nesterov rows).",
        lhs=sp.Matrix.vstack(
            z1 + mu / (1 - mu) * (z1 - z0) - (z0 + mu / (1 - mu) * (z0 - zm)),
            _nesterov_y_step(z0, b0, d),
        ),
        rhs=sp.Matrix.vstack(gp * d, gp * d),
    )


def o2_young() -> Lemma:
    """O2: the cost of evaluating the displacement at z instead of y (Young)."""
    a, c = vector("a"), vector("c")  # a = grad f(y) - grad f(z), c = Delta
    gp = gamma / (1 - mu)
    kap = sp.Symbol("kappa", positive=True)
    w = sp.Symbol("w", positive=True)
    return Inequality(
        "O2",
        "Cost of evaluating the displacement at z instead of y",
        "gamma' <a, Delta> <= (gamma'/(2 L gamma' kappa)) ||a||^2 + (L gamma'^2 kappa/2) ||Delta||^2.",
        "Young's inequality; the slack is a square.",
        lhs=gp * dot(a, c),
        rhs=gp / (2 * L * gp * kap) * sqnorm(a) + L * gp**2 * kap / 2 * sqnorm(c),
        nonneg_terms=(gp / (2 * L * gp * kap) * sqnorm(a - L * gp * kap * c),),
        domain=Domain({mu: w / (1 + w)}),
    )


def _buffer_spot_check() -> tuple[bool, str]:
    rng = random.Random(7)
    worst = 0.0
    for _ in range(300):
        m = rng.random() * 0.99
        n = rng.randint(1, 30)
        v = [rng.gauss(0, 1) for _ in range(n)]
        lhs = sum(sum(m ** (r - 1 - j) * v[j] for j in range(r)) ** 2 for r in range(n + 1))
        rhs = sum(x * x for x in v) / (1 - m) ** 2
        worst = max(worst, lhs / rhs)
    return worst <= 1 + 1e-12, f"300 random sequences, max lhs/rhs = {worst:.4f}"


def o3_outer_descent() -> Lemma:
    """O3: the momentum-buffer sum and the outer descent (cited, spot-checked)."""
    gp, Lo = GENERIC["gp"], GENERIC["Lo"]
    return Cited(
        "O3",
        "Momentum buffer sum and outer descent",
        "sum_{r<R} ||sum_{j<r} mu^{r-1-j} v_j||^2 <= (1-mu)^{-2} sum_{j<R} ||v_j||^2; with "
        "O1, sum_r ||y_r - z_r||^2 <= mu^2 gamma'^2 (1-mu)^{-2} sum_r ||Delta_r||^2 "
        "(heavy ball; Nesterov has mu^4 <= mu^2); with O2 and the descent lemma at y, summed "
        "over the rounds: f(y_{r+1}) - f(y_r) <= gamma' <grad f(z_r), Delta_r> + "
        "(L_o gamma'^2/2) ||Delta_r||^2.",
        "Cauchy-Schwarz with weights mu^{r-1-j}, then exchange the sums.",
        reference="Cauchy-Schwarz and Fubini (standard); spot check on random sequences",
        spot_check=_buffer_spot_check,
        lhs=dF,
        rhs=gp * ip + Lo * gp**2 / 2 * D2,
    )


def o4_anchor_step() -> Lemma:
    """O4: the anchor inner product of one step (SOS)."""
    a, dl = vector("a"), vector("dl")
    return Inequality(
        "O4",
        "Anchor inner product, one step",
        "-<a, a + delta> <= -||a||^2/2 + ||delta||^2/2, a = grad f(z), delta = gbar_s - grad f(z).",
        "The slack is ||a + delta||^2/2. Weighted by w_s = (1 - alpha eta)^{H-1-s} and summed, "
        "with ||delta_s||^2 <= L^2 D_s (A1): E<grad f(z), Delta> <= -(alpha H_e/2) Phi + "
        "(alpha L^2/2) sum_s w_s D_s.",
        lhs=-dot(a, a + dl),
        rhs=-sqnorm(a) / 2 + sqnorm(dl) / 2,
        nonneg_terms=(sqnorm(a + dl) / 2,),
    )

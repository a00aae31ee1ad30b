"""Theorem 2 (derived here): PALSGD and Local SGD with an outer learning rate and momentum.

The analysis follows the anchor sequence ``z_r`` (the model the outer optimizer holds)
instead of the per-step average, so the outer step can be any of

* outer SGD ``z <- z + gamma Delta`` (``gamma = 1``: plain averaging),
* heavy-ball ``z <- z + gamma Delta + mu (z - z_prev)``,
* PyTorch Nesterov ``buf <- mu buf - Delta; z <- z - gamma (-Delta + mu buf)``,

with ``Delta = mean_k x_{k,H} - z`` the round's displacement. The bound is on
``(1/R) sum_{r<R} E||grad f(z_r)||^2``, ``R = T/H`` rounds. Three drift lemmas give three
registered theorems (``docs/anchor_theorem.md``):

``"palsgd"``      any pull rate (``0 < p < 1``), summed drift (the Theorem 1 route);
``"pull_aware"``  ``eta > L``: the pull makes each worker's mean step a gradient step on
                   the strongly convex ``f_k + (eta/2)||x - z||^2``; the drift contracts, so
                   the drift horizon is ``min(H - 1, 2/(alpha (eta - L)))`` instead of ``H``;
``"local_sgd"``   ``p = 0`` (no pull), summed drift.

Every lemma is a :mod:`theory.proofs.lemmas` object. The hypotheses a certificate borrows
from another lemma are built from that lemma's object by :func:`borrow` (its slack
``rhs - lhs`` with the vector quantities renamed to the scalars of the composition), never
retyped, so changing a constant in one lemma breaks every certificate that uses it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory import symbols as S
from theory.bound import Condition
from theory.proofs import palsgd as theorem1
from theory.proofs.lemmas import (
    CheckResult,
    Cited,
    Domain,
    Hypothesis,
    Identity,
    Inequality,
    Lemma,
    by_key,
    dot,
    sqnorm,
    vector,
)

__all__ = ["KINDS", "AnchorTheorem", "borrow", "final_lemma", "pieces", "theorem"]

KINDS = ("palsgd", "pull_aware", "local_sgd")

L, sigma, zeta, F0 = S.L, S.sigma, S.zeta, S.F0
K, H, T, R = S.K, S.H, S.T, S.R
p, alpha, eta, gamma, mu = S.p, S.alpha, S.eta, S.gamma, S.mu

_nn = dict(nonnegative=True)
# per-round scalars of the composition (sums over the R rounds; linearity of expectation)
Phi, Gz, sw, D2 = sp.symbols("Phi G_z s_w Delta2", **_nn)
ip, dF = sp.symbols("ip dF", real=True)
He, Hup, Hlo = sp.symbols("H_e H_up H_lo", positive=True)
# drift-lemma scalars
E2, E2n, Gk, V, Gx, Y, Bt, Dt, tt = sp.symbols("E2 E2_next G_k V G_x Y B_t D_t t", **_nn)
mpull = sp.Symbol("m_pull", positive=True)  # eta - L, in sign checks only


def _min(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """``min(a, b)`` as ``(a + b - |a - b|)/2`` (vectorises under lambdify)."""
    return (a + b - sp.Abs(a - b)) / 2


def borrow(
    lemma: Lemma, name: str, lhs: sp.Expr, norms: Mapping[str, sp.Expr] | None = None
) -> Hypothesis:
    """The right-hand side of ``lemma`` as a bound on the scalar ``lhs``: slack ``rhs - lhs``.

    The hypothesis is built from the lemma object, never retyped: ``norms`` maps the name of
    each vector of the lemma to the scalar that stands for its squared norm, and every vector
    ``v`` is replaced by ``(sqrt(norms[v]), 0, ...)``; the lemma's right-hand side must depend
    on its vectors through their squared norms only (checked: no square root may remain).
    So a changed constant in the lemma changes every certificate that borrows it.
    """
    rhs = sp.sympify(lemma.rhs)  # type: ignore[attr-defined]
    subs: dict[sp.Symbol, sp.Expr] = {}
    for s in rhs.free_symbols:
        base, _, idx = s.name.rpartition("_")
        if base and idx.isdigit() and norms is not None and base in norms:
            subs[s] = sp.sqrt(norms[base]) if idx == "0" else sp.S.Zero
    inst = sp.expand(rhs.xreplace(subs))
    if inst.has(sp.sqrt(sp.Symbol("_")).func) and any(
        a.exp == sp.Rational(1, 2) for a in inst.atoms(sp.Pow)
    ):
        raise ValueError(f"borrowing {lemma.key}: its rhs is not a function of squared norms")
    left = [s for s in inst.free_symbols if s.name.rpartition("_")[2].isdigit()]
    if left:
        raise ValueError(f"borrowing {lemma.key}: vectors left {sorted(map(str, left))}")
    return Hypothesis(name, inst - lhs, source=f"lemma {lemma.key}")


# ----------------------------------------------------------------------------- constants
def pieces(kind: str) -> dict[str, sp.Expr]:
    """The constants of Theorem 2 for ``kind`` (see the docs for their meaning)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    gp = gamma / (1 - mu)  # effective outer learning rate
    Lo = L * (1 + mu) / (1 - mu)  # outer curvature (L at mu = 0)
    if kind == "local_sgd":
        cp, nu, q1, hlo, hup = sp.S.Zero, sp.S.Zero, sp.S.One, H, H
        one_minus_p = sp.S.One
    else:
        cp = 4 * p / (1 - p)
        nu = 2 * (1 - p) * eta**2 / p + 4 * p * L**2 / (1 - p)
        q1 = 1 + alpha * eta * H
        hlo = H / q1
        hup = _min(H, 1 / (alpha * eta)) if kind == "pull_aware" else H
        one_minus_p = 1 - p
    if kind == "pull_aware":
        m = eta - L
        M = _min(H - 1, 2 / (alpha * m))
        XG = M * (alpha / m + 4 * p * alpha**2 / (1 - p))
        Xs = M * alpha**2 / (1 - p)
    elif kind == "palsgd":
        XG = 8 * alpha**2 * q1 * (H - 1) * (H / 3 + p / (1 - p))
        Xs = 2 * alpha**2 * q1 * (H - 1) / (1 - p)
    else:
        XG = sp.Rational(8, 3) * alpha**2 * H * (H - 1)
        Xs = 2 * alpha**2 * (H - 1)
    return dict(gp=gp, Lo=Lo, cp=cp, nu=nu, Hlo=hlo, Hup=hup, XG=XG, Xs=Xs, omp=one_minus_p)


def _round_coefficients(co: Mapping[str, sp.Expr], h: sp.Expr) -> tuple[sp.Expr, ...]:
    """``(omega, E_zeta, E_sigma)`` of the round inequality at ``H_e = h``."""
    gp, Lo = co["gp"], co["Lo"]
    cS = L**2 / 2 + Lo * gp * alpha * (2 * L**2 * h + co["nu"] / K)
    omega = (
        sp.Rational(1, 2) - 2 * Lo * gp * alpha * h - cS * co["XG"] - Lo * gp * alpha * co["cp"] / K
    )
    Ez = cS * co["XG"] + Lo * gp * alpha * co["cp"] / K
    Es = cS * co["Xs"] + Lo * gp * alpha / (K * co["omp"])
    return omega, Ez, Es


# ----------------------------------------------------------------------------- lemmas
def _outer_lemmas() -> list[Lemma]:
    """O1-O3: virtual sequence of the outer momentum, its cost, and the outer descent."""
    z0, zm, b0, d = vector("z"), vector("zp"), vector("buf"), vector("D")
    gp = gamma / (1 - mu)
    # heavy ball: y = z + (mu/(1-mu))(z - z_prev); z' = z + gamma d + mu (z - z_prev)
    z1 = z0 + gamma * d + mu * (z0 - zm)
    hb = Identity(
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
    a, c = vector("a"), vector("c")  # a = grad f(y) - grad f(z), c = Delta
    kap = sp.Symbol("kappa", positive=True)
    young = Inequality(
        "O2",
        "Cost of evaluating the displacement at z instead of y",
        "gamma' <a, Delta> <= (gamma'/(2 L gamma' kappa)) ||a||^2 + (L gamma'^2 kappa/2) ||Delta||^2.",
        "Young's inequality; the slack is a square.",
        lhs=gp * dot(a, c),
        rhs=gp / (2 * L * gp * kap) * sqnorm(a) + L * gp**2 * kap / 2 * sqnorm(c),
        nonneg_terms=(gp / (2 * L * gp * kap) * sqnorm(a - L * gp * kap * c),),
        domain=Domain({mu: sp.Symbol("w", positive=True) / (1 + sp.Symbol("w", positive=True))}),
    )
    buf = Cited(
        "O3",
        "Momentum buffer sum",
        "sum_{r<R} ||sum_{j<r} mu^{r-1-j} v_j||^2 <= (1-mu)^{-2} sum_{j<R} ||v_j||^2; with "
        "O1, sum_r ||y_r - z_r||^2 <= mu^2 gamma'^2 (1-mu)^{-2} sum_r ||Delta_r||^2 "
        "(heavy ball; Nesterov has mu^4 <= mu^2).",
        "Cauchy-Schwarz with weights mu^{r-1-j}, then exchange the sums.",
        reference="Cauchy-Schwarz and Fubini (standard); spot check on random sequences",
        spot_check=_buffer_spot_check,
    )
    return [hb, young, buf]


def _nesterov_y_step(z0: sp.Matrix, b0: sp.Matrix, d: sp.Matrix) -> sp.Matrix:
    g = -d  # PyTorch's outer gradient z - xbar
    b1 = mu * b0 + g
    z1 = z0 - gamma * (g + mu * b1)
    k = gamma * mu**2 / (1 - mu)
    return (z1 - k * b1) - (z0 - k * b0)


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


def _anchor_step_lemma() -> Lemma:
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


def _pull_contraction_lemma() -> Lemma:
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


_u = sp.Symbol("u", positive=True)
_w = sp.Symbol("w", nonnegative=True)
_PULL_DOMAIN = Domain(
    {p: _u / (1 + _u), eta: L + mpull}, "0 < p < 1 (p = u/(1+u)), eta = L + m (m > 0)"
)
_PULL_STEP_DOMAIN = Domain(
    {p: _u / (1 + _u), eta: L + mpull, alpha: 1 / ((L + mpull) * (1 + _w))},
    "0 < p < 1, eta = L + m (m > 0), alpha = 1/(eta (1 + w)) (w >= 0): alpha eta <= 1 (P1)",
)


def _pull_drift_lemmas(contraction: Lemma) -> list[Lemma]:
    """O7 (one-step drift recursion) and O8a/O8b (its solution for every t, by induction)."""
    m = eta - L
    nu = 2 * (1 - p) * eta**2 / p + 4 * p * L**2 / (1 - p)
    rho = 1 - alpha * m + alpha**2 * nu
    Bk = (alpha / m + 4 * p * alpha**2 / (1 - p)) * Gk + alpha**2 * sigma**2 / (1 - p)
    var_bound = theorem1.theorem("independent").lemma("L4")
    step = Inequality(
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
            borrow(contraction, "O6", Y, {"e": E2, "g": Gk}),
            borrow(var_bound, "L4", V, {"e": E2, "g": Gx}),
            Hypothesis("L10a", 2 * Gk + 2 * L**2 * E2 - Gx, source="lemma L10a with A1"),
        ),
        multipliers={"step": 1, "O6": 1, "L4": alpha**2, "L10a": 2 * p * alpha**2 / (1 - p)},
        domain=_PULL_DOMAIN,
    )
    P2 = Hypothesis.condition(
        "P2",
        alpha * nu,
        (eta - L) / 2,
        "alpha nu <= (eta - L)/2: the coin variance does not undo the pull contraction",
    )
    ind_t = Inequality(
        "O8a",
        "Drift solution, horizon t (induction step, every t)",
        "If D_t <= t B, then rho D_t + B <= (t + 1) B (rho <= 1 by P2); with D_0 = 0 this "
        "gives D_t <= t B for every t.",
        "Multiply the induction hypothesis by rho and add B.",
        uses=("O7",),
        lhs=rho * Dt + Bt,
        rhs=(tt + 1) * Bt,
        hypotheses=(Hypothesis("IH", tt * Bt - Dt, source="induction hypothesis"), P2),
        multipliers={"IH": rho, "P2": alpha * tt * Bt},
        nonneg_terms=(alpha * m / 2 * tt * Bt,),
        domain=_PULL_STEP_DOMAIN,
    )
    cap = 2 / (alpha * m)
    ind_c = Inequality(
        "O8b",
        "Drift solution, horizon 2/(alpha (eta - L)) (induction step, every t)",
        "If D_t <= (2/(alpha m)) B, then rho D_t + B <= (2/(alpha m)) B (rho <= 1 - alpha m/2 "
        "by P2); so D_t <= min(t, 2/(alpha (eta - L))) B for every t.",
        "Multiply the induction hypothesis by rho and add B.",
        uses=("O7",),
        lhs=rho * Dt + Bt,
        rhs=cap * Bt,
        hypotheses=(Hypothesis("IH", cap * Bt - Dt, source="induction hypothesis"), P2),
        multipliers={"IH": rho, "P2": alpha * cap * Bt},
        domain=_PULL_STEP_DOMAIN,
    )
    return [step, ind_t, ind_c]


def _sum_drift_lemma(kind: str) -> Lemma:
    """O8s: the summed drift S <= 2 A from S <= rho_S S + A and rho_S <= 1/2 (Theorem 1 route)."""
    Ssum, Aterm = sp.symbols("S_D A_D", **_nn)
    if kind == "local_sgd":
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


# generic constants of the round inequality (specialised by pieces())
_g = dict(
    gp=sp.Symbol("gamma_e", positive=True),
    Lo=sp.Symbol("L_o", positive=True),
    cp=sp.Symbol("c_p", nonnegative=True),
    nu=sp.Symbol("nu", nonnegative=True),
    XG=sp.Symbol("X_G", nonnegative=True),
    Xs=sp.Symbol("X_s", nonnegative=True),
    omp=sp.Symbol("o_p", positive=True),
)


def _round_lemmas() -> list[Lemma]:
    """O5 (displacement second moment, argued), O9 (round inequality), O10 (the theorem)."""
    gp, Lo, cp, nu, XG, Xs, omp = (_g[k] for k in ("gp", "Lo", "cp", "nu", "XG", "Xs", "omp"))
    o5 = Cited(
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
    )
    cS = L**2 / 2 + Lo * gp * alpha * (2 * L**2 * He + nu / K)
    Ez = cS * XG + Lo * gp * alpha * cp / K
    Es = cS * Xs + Lo * gp * alpha / (K * omp)
    omega_e = sp.Rational(1, 2) - 2 * Lo * gp * alpha * He - Ez
    omega_up = omega_e.subs(He, Hup)
    o9 = Inequality(
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
            Hypothesis("desc", gp * ip + Lo * gp**2 / 2 * D2 - dF, source="O1-O3 / descent lemma"),
            Hypothesis(
                "O4", -alpha * He / 2 * Phi + alpha * L**2 / 2 * He * sw - ip, source="lemma O4"
            ),
            Hypothesis(
                "O5",
                alpha**2
                * (
                    4 * He**2 * Phi
                    + 4 * L**2 * He**2 * sw
                    + 2 * He / K * (nu * sw + cp * Gz + sigma**2 / omp)
                )
                - D2,
                source="lemma O5",
            ),
            Hypothesis("drift", XG * Gz + Xs * sigma**2 - sw, source="drift lemma"),
            Hypothesis("A3", Phi + zeta**2 - Gz, source="A3 with L8"),
            Hypothesis("up", Hup - He, source="H_e <= H_up"),
            Hypothesis.condition(
                "C", sp.Rational(1, 4), omega_up, "omega(H_up) >= 1/4 (absorption)"
            ),
        ),
        multipliers={
            "desc": 1,
            "O4": gp,
            "O5": Lo * gp**2 / 2,
            "drift": gp * alpha * He * cS,
            "A3": gp * alpha * He * Ez,
            "up": gp * alpha * He * Phi * 2 * Lo * gp * alpha * (1 + L**2 * XG),
            "C": gp * alpha * He * Phi,
        },
    )
    return [o5, o9, final_lemma(o9)]


def final_lemma(o9: Lemma) -> Lemma:
    """O10 (the theorem), built from the object of O9 (its right-hand side, summed)."""
    gp, Lo, XG, Xs = _g["gp"], _g["Lo"], _g["XG"], _g["Xs"]
    cS = L**2 / 2 + Lo * gp * alpha * (2 * L**2 * He + _g["nu"] / K)
    Ez = cS * XG + Lo * gp * alpha * _g["cp"] / K
    Es = cS * Xs + Lo * gp * alpha / (K * _g["omp"])
    SPhi, SdF = sp.symbols("S_Phi S_dF", real=True)
    Ez_up, Es_up = Ez.subs(He, Hup), Es.subs(He, Hup)
    return Inequality(
        "O10",
        "Theorem 2",
        "(1/R) sum_{r<R} E||grad f(z_r)||^2 <= 4 F0/(gamma' alpha H_lo R) + 4 E_zeta(H_up) zeta^2 "
        "+ 4 E_sigma(H_up) sigma^2.",
        "Sum O9 over the R rounds (telescoping: sum of f(y_{r+1}) - f(y_r) = f(y_R) - f(y_0) >= "
        "-F0 by A4, y_0 = z_0), divide by gamma' alpha H_e R/4, then H_lo <= H_e <= H_up.",
        uses=("O9", "A4"),
        lhs=SPhi / R,
        rhs=4 * F0 / (gp * alpha * Hlo * R) + 4 * Ez_up * zeta**2 + 4 * Es_up * sigma**2,
        hypotheses=(
            Hypothesis(
                "O9",
                sp.expand(R * sp.sympify(o9.rhs)).subs(Phi * R, SPhi) - SdF,  # type: ignore[attr-defined]
                source="lemma O9 summed over R rounds",
            ),
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


# ----------------------------------------------------------------------------- the theorem
@dataclass(frozen=True)
class AnchorTheorem:
    """Theorem 2 for one drift route: its lemma chain, conditions and bound.

    ``expression`` is the right-hand side of O10 with the generic constants replaced by
    :func:`pieces` and ``R = T/H``; ``conditions`` are the condition hypotheses of the chain
    (O9's absorption condition specialised, and the drift lemma's).
    """

    kind: str
    lemmas: tuple[Lemma, ...]
    conditions: tuple[Condition, ...]
    expression: sp.Expr
    constants: dict[str, sp.Expr]

    def lemma(self, key: str) -> Lemma:
        return by_key(self.lemmas)[key]

    def check(self) -> list[CheckResult]:
        return [lem.check() for lem in self.lemmas]


def _specialise(kind: str) -> dict[sp.Expr, sp.Expr]:
    co = pieces(kind)
    out = {_g[k]: co[k] for k in _g if k != "omp"}
    out[_g["omp"]] = co["omp"]
    out[Hup] = co["Hup"]
    out[Hlo] = co["Hlo"]
    return out


@cache
def theorem(kind: str = "pull_aware") -> AnchorTheorem:
    """Theorem 2 (derived here) with the drift route ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    chain: list[Lemma] = [*_outer_lemmas(), _anchor_step_lemma()]
    conds: list[Condition] = []
    if kind == "pull_aware":
        o6 = _pull_contraction_lemma()
        chain += [o6, *_pull_drift_lemmas(o6)]
        conds.append(
            Condition(
                "P0",
                sp.Lt(L, eta),
                "eta > L: the local objective f_k + (eta/2)||x - z||^2 is strongly convex",
            )
        )
    else:
        chain.append(_sum_drift_lemma(kind))
    chain += _round_lemmas()
    sub = _specialise(kind)
    seen: dict[str, Condition] = {}
    for lem in chain:
        for h in getattr(lem, "hypotheses", ()):
            if h.relation is not None and h.name not in seen:
                rel = h.relation
                lhs, rhs = sp.sympify(rel.lhs).xreplace(sub), sp.sympify(rel.rhs).xreplace(sub)
                seen[h.name] = Condition(h.name, sp.Le(lhs, rhs, evaluate=False), h.description)
    if kind != "local_sgd":
        seen.setdefault(
            "P1", Condition("P1", sp.Le(alpha * eta, 1), "alpha eta <= 1 (pull weights in [0, 1])")
        )
    conds += [seen[k] for k in sorted(seen)]
    o10 = chain[-1]
    expr = sp.sympify(o10.rhs).xreplace(sub).subs(R, T / H)  # type: ignore[attr-defined]
    return AnchorTheorem(kind, tuple(chain), tuple(conds), expr, pieces(kind))

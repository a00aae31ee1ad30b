"""Exact verification of SlowMo over all-reduce SGD (Wang, Tantia, Ballas, Rabbat, ICLR 2020).

The oracle measures SlowMo as Local SGD with one worker, noise variance ``sigma^2/K`` and the
outer heavy-ball step (:data:`theory.verify.oracle.ALL_REDUCE_ALGORITHMS`); here that is
checked against a direct propagation of SlowMo's own recursion (paper, eqs. (2)-(3), ``K``
workers averaging their gradients), the pinned-step designs are checked, and the registered
statement is shown false at the designs of the known finding (theory.verify.findings,
docs/verification.md, section 7), while the registered corrected reading
(``slowmo_ar_sgd_corrected``: horizon condition squared, slow rate at most 1) is not, and
its false variants are rejected.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sympy as sp

from palsgd.cli import main
from theory import bounds as registry
from theory import symbols as S
from theory.verify.controls import power, run_controls
from theory.verify.designs import isolating, random_points, space_of
from theory.verify.exact import QUICK_BUDGET, Budget, verify_exact
from theory.verify.findings import known
from theory.verify.oracle import evaluate, family_of, parse_design, pinned_step
from theory.verify.plots_exact import plot_tightness
from theory.verify.search import Pool, climb, evaluate_points

NAME = "slowmo_ar_sgd"
CORRECTED = "slowmo_ar_sgd_corrected"
SMALL = Budget().scaled(0.5)


def _at(text: str, K: int, T: int, gamma: float, mu: float) -> str:
    """A design at the theorem's step ``alpha = (1 - mu)/gamma sqrt(K/T)``."""
    alpha = (1 - mu) / gamma * np.sqrt(K / T)
    return f"{text} K={K} T={T} gamma={gamma!r} mu={mu!r} heavy_ball=1 alpha={float(alpha)!r}"


#: the designs of the known finding, inside every condition of the registered statement,
#: where it fails: heavy-ball gradient descent (one worker, H = 1, no noise) on f = x^2/2
#: from F0 = 1, at the smallest T the horizon condition allows (T >= 1 + sqrt(3) 4 mu/(1 -
#: mu) = 132.6), ratio 1.345; and H = 2 noisy steps at alpha L = 3.1, allowed by T >= 1 +
#: sqrt(3) 3 H (1 - gamma)/gamma, where the inner steps diverge (ratio 2.9e11)
HEAVY_BALL_GD, INNER_DIVERGES = (d.at for d in known(NAME).designs)


def _squared_horizon():
    """Theorem 1 with ``T >= K L^2 (1 + sqrt(3) max{...})^2`` and ``gamma <= 1``: the
    registered corrected reading, checked here against its definition."""
    b = registry.get(CORRECTED)
    K, L, H, mu, g = S.K, S.L, S.H, S.mu, S.gamma
    mx = sp.Max(3 * H * (1 - mu - g) / g, 4 * H * mu / (1 - mu), 1)
    conds = {c.name: c.relation for c in b.conditions}
    assert sp.simplify(conds["horizon"].lhs - K * L**2 * (1 + sp.sqrt(3) * mx) ** 2) == 0
    assert conds["slow_rate"] == sp.Le(g, 1)
    assert sp.simplify(b.expression - registry.get(NAME).expression) == 0
    return b


def _direct(design: dict, offsets: np.ndarray) -> float:
    """(1/T) sum_{t,k} E||grad f(x_{t,k})||^2 of SlowMo over AR-SGD, propagated directly.

    Eigendirections ``lam``; start ``y0``; per-worker noise variance ``s2``; worker ``k``'s
    optimum ``offsets[k]`` (``f_k = 1/2 sum_i lam_i (x_i - b_ki)^2``). State ``(x, x0, u)``
    (paper, eqs. (2)-(3), fast rate ``alpha``, slow rate ``gamma``, momentum ``mu``): every
    step ``x <- x - alpha (1/K) sum_k (grad f_k(x) + xi_k)``; after ``H`` steps
    ``u <- mu u + (x0 - x)/alpha``, ``x0 <- x0 - gamma alpha u``, ``x <- x0``. Mean and
    covariance propagate exactly (the recursion is affine with Gaussian noise)."""
    g = {k: float(v[0]) for k, v in design.items()}
    lam = np.array([g["L"], g["lam_F"], g["lam_s"], g["lam_z"]])
    y0 = np.array([0.0, np.sqrt(2 * g["F0"] / g["lam_F"]), 0.0, 0.0])
    s2 = np.array([0.0, 0.0, g["sigma2"], 0.0])
    K, H, T = int(g["K"]), int(g["H"]), int(g["T"])
    a, gam, mu = g["alpha"], g["gamma"], g["mu"]
    n = lam.size
    bbar = offsets.mean(axis=0)
    m = np.concatenate([y0, y0, np.zeros(n)])
    C = np.zeros((3 * n, 3 * n))
    eye, zero = np.eye(n), np.zeros((n, n))
    step = np.block([[eye - a * np.diag(lam), zero, zero], [zero, eye, zero], [zero, zero, eye]])
    shift = np.concatenate([a * np.mean([lam * b for b in offsets], axis=0), np.zeros(2 * n)])
    noise = np.zeros((3 * n, 3 * n))
    noise[:n, :n] = a**2 * np.diag(sum(s2 for _ in range(K)) / K**2)
    u_row = np.hstack([-eye / a, eye / a, mu * eye])
    x0_row = np.hstack([zero, eye, zero]) - gam * a * u_row
    outer = np.vstack([x0_row, x0_row, u_row])
    total = 0.0
    for t in range(T):
        dev = m[:n] - bbar
        total += float(np.sum(lam**2 * (dev**2 + np.diag(C)[:n])))
        m, C = step @ m + shift, step @ C @ step.T + noise
        if (t + 1) % H == 0:
            m, C = outer @ m, outer @ C @ outer.T
    return total / T


@pytest.mark.parametrize(
    "at",
    [
        "L=1 lam_F=0.5 lam_s=0.3 lam_z=0.8 F0=2 sigma2=1.5 zeta2=4 K=3 H=4 T=24 gamma=0.7 "
        "mu=0.6 alpha=0.3",
        "L=2 lam_F=2 lam_s=1 lam_z=0.2 F0=0.5 sigma2=3 zeta2=1 K=4 H=3 T=30 gamma=1.4 mu=0.3 "
        "alpha=0.2",
        "L=1 lam_F=1 lam_s=1 F0=1 sigma2=1 K=1 H=1 T=12 gamma=1 mu=0 alpha=0.5",
    ],
)
def test_oracle_equals_direct_propagation(at):
    """The oracle's SlowMo case, heterogeneous workers included (it cancels), equals the
    step-by-step recursion of the paper's eqs. (2)-(3)."""
    b = registry.get(NAME)
    d = parse_design(at)
    K = int(d["K"][0])
    Q = float(d["zeta2"][0] / d["lam_z"][0] ** 2)
    offsets = np.zeros((K, 4))
    if K > 1:  # mean 0, mean square Q on the heterogeneity direction
        offsets[:, 3] = np.sqrt(Q * K / 2) * np.array([1.0, -1.0] + [0.0] * (K - 2))
    ev = evaluate(b, family_of(b), d)
    assert float(ev.measured[0]) == pytest.approx(_direct(d, offsets), rel=1e-10)


def test_the_step_is_pinned_generically():
    """Only a bound stated at one step (equal sides in two conditions) is pinned; its
    designs, the search's included, take the recommended step and stay inside."""
    assert [n for n in registry.names() if pinned_step(registry.get(n))] == [NAME, CORRECTED]
    b = registry.get(NAME)
    fam = family_of(b)
    assert fam.pinned and fam.all_reduce and fam.outer == "heavy_ball" and not fam.heterogeneous
    space = space_of(fam)
    rng = np.random.default_rng(0)
    xi, mi = isolating(space, rng, 60)
    xr, mr = random_points(space, rng, 60)
    pool = Pool()
    x, m = np.concatenate([xi, xr]), np.concatenate([mi, mr])
    ev = evaluate_points(b, space, x, m)
    pool.add(x, m, ev)
    seeds = np.flatnonzero(ev.inside)[:3]
    climb(b, space, x[seeds], m[seeds], -np.ones(3, int), rng, iters=4, batch=6, pool=pool)
    _, _, ev = pool.merged()
    d = ev.designs
    inside = ev.inside
    assert inside.sum() > 50
    rec = (1 - d["mu"]) / d["gamma"] * np.sqrt(d["K"] / d["T"])
    np.testing.assert_allclose(d["alpha"][inside], rec[inside], rtol=1e-12)
    assert np.all(d["T"] % d["H"] == 0) and np.all(d["heavy_ball"] == 1)
    assert np.all(d["zeta2"] == 0)


def test_a_partial_outer_iteration_is_outside():
    """The theorem counts full outer iterations: T not a multiple of H is outside."""
    b = registry.get(NAME)
    full = parse_design(_at("L=1 lam_F=1 F0=1 H=4", K=2, T=400, gamma=1.0, mu=0.5))
    part = parse_design(_at("L=1 lam_F=1 F0=1 H=4", K=2, T=401, gamma=1.0, mu=0.5))
    assert evaluate(b, family_of(b), full).inside[0]
    assert not evaluate(b, family_of(b), part).inside[0]


@pytest.mark.parametrize("at", [HEAVY_BALL_GD, INNER_DIVERGES])
def test_registered_statement_is_shown_false(at, capsys):
    """Finding: inside every condition of Theorem 1 as encoded, measured/bound > 1.3 (heavy
    ball at H = 1 with mu = 0.95; inner steps at alpha L = 3.1 diverging); the --at
    command reports it, and the direct propagation agrees."""
    b = registry.get(NAME)
    d = parse_design(at)
    ev = evaluate(b, family_of(b), d)
    assert ev.inside[0] and ev.ratio[0] > 1.3
    direct = _direct(d, np.zeros((int(d["K"][0]), 4)))
    assert direct > 1.3 * float(ev.bound[0])
    assert main(["verify", "--bounds", NAME, "--at", at]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED (a known finding" in out and "FAILS" not in out


def test_search_finds_the_registered_statement_false():
    r = verify_exact(registry.get(NAME), budget=QUICK_BUDGET, seed=0)
    assert r.verdict == "violated" and r.worst_ratio > 1.3 and r.inside > 100


def test_squared_horizon_is_not_shown_false():
    """With the horizon condition squared and gamma <= 1 no design inside fails."""
    r = verify_exact(_squared_horizon(), budget=SMALL, seed=3)
    assert r.verdict == "not shown false", r.worst_command
    assert 0.3 < r.worst_ratio <= 1 + 1e-6 and r.inside > 500


@pytest.mark.parametrize("factor", [0.1, 0.5])
def test_scaled_bound_is_rejected(factor):
    """x 0.1 and x 0.5 are violated (the worst ratio of the statement is about 0.6, so
    x 0.9 may be true and is not asserted)."""
    b = _squared_horizon()
    c = dataclasses.replace(b, name="scaled", expression=b.expression * factor)
    assert verify_exact(c, budget=SMALL, seed=0).verdict == "violated"


@pytest.mark.parametrize("term", [0, 1])
def test_bound_without_a_term_is_rejected(term):
    """Without its F0 (and noise) term, or without its (H - 1) term: violated."""
    b = _squared_horizon()
    c = dataclasses.replace(b, name="removed", expression=b.expression - b.terms[term])
    r = verify_exact(c, budget=SMALL, seed=0)
    assert r.verdict == "violated" and r.worst_ratio > 1.2


@pytest.mark.slow
def test_standard_controls():
    """The verifier's own controls on the squared-horizon statement: the F0/noise term
    halved and removed and the (H - 1) term removed are rejected."""
    ctrls = run_controls(_squared_horizon(), budget=SMALL, seed=0)
    by = {(c.kind, c.term): c.status for c in ctrls}
    lead = str(_squared_horizon().terms[0])
    assert by[("halved", lead)] == by[("removed", lead)] == "rejected"
    assert power(ctrls)["rejected"] >= 3


def test_cli_quick_run(tmp_path, capsys):
    """The quick run verifies the bound exactly, reports it as the known finding with its
    reproduce commands (exit 0: it reproduced), and says 'not verifiable' only of the Monte
    Carlo on nonconvex problems."""
    out = tmp_path / "all"
    argv = ["verify", "--bounds", NAME, "--quick", "--no-plots", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "violated (known finding)" in text and "KNOWN FINDING (reproduced)" in text
    assert f"palsgd verify --bounds {NAME} --at" in text
    rep = json.loads((out / "results.json").read_text())
    assert [r["bound"] for r in rep["exact"]] == [NAME]
    assert rep["power"]["controls"] == 7
    notes = rep["summary"]["not_verifiable"]
    assert len(notes) == 1 and "Monte Carlo on cosine, logistic" in notes[0]
    assert main([*argv, "--problems", "quadratic", "--out", str(tmp_path / "q")]) == 0
    assert "not verifiable" not in capsys.readouterr().out


def test_tightness_plot_draws_an_infinite_ratio(tmp_path):
    """A violated bound whose exact value overflowed (ratio inf) is drawn, capped."""
    rows = [
        {"bound": NAME, "term": "a", "status": "tested", "max_ratio": float("inf")},
        {"bound": NAME, "term": "b", "status": "tested", "max_ratio": 0.2},
        {"bound": NAME, "term": "c", "status": "untested", "max_ratio": None},
    ]
    assert plot_tightness(rows, tmp_path) == ["tightness.png", "tightness.pdf"]
    assert (tmp_path / "tightness.png").stat().st_size > 0

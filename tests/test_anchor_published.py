"""Published anchors: SlowMo (Wang, Tantia, Ballas, Rabbat, ICLR 2020, Theorem 1) over all-reduce SGD.

Reductions to the special cases the paper names (AR-SGD at tau = 1, alpha = 1, beta = 0;
Lookahead, Corollary 2, eq. (7)) and exact second moments on a quadratic instance of its
assumptions.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from theory import bounds as registry
from theory import symbols as S
from theory.bounds.slowmo import slowmo_ar_sgd_expression, slowmo_step
from theory.lower import get_lower

SLOWMO = "slowmo_ar_sgd"


def test_registered_with_provenance_and_its_step():
    b = registry.get(SLOWMO)
    assert "ICLR 2020" in b.provenance and "Theorem 1" in b.provenance and "eq. (5)" in b.provenance
    assert sp.simplify(b.expression - slowmo_ar_sgd_expression()) == 0
    assert sp.simplify(b.recommended_step - slowmo_step()) == 0


def test_reduces_to_minibatch_sgd_at_one_step_per_round():
    """tau = 1, alpha = 1, beta = 0 (paper, Sec. 5): the Ghadimi-Lan bound at alpha = sqrt(K/T)."""
    b = registry.get(SLOWMO).expression.subs({S.H: 1, S.gamma: 1, S.mu: 0})
    sgd = registry.get("sgd").expression.subs(S.alpha, sp.sqrt(S.K / S.T))
    assert sp.simplify(b - sgd) == 0
    assert sp.simplify(slowmo_step().subs({S.gamma: 1, S.mu: 0}) - sp.sqrt(S.K / S.T)) == 0


def test_reduces_to_lookahead_corollary_2():
    """m = 1, beta = 0: eq. (7), (2 F0 + sigma^2 L)/sqrt(tau T) + 4 sigma^2 L^2 (tau-1)(1/alpha - 1)^2/(tau T)."""
    b = registry.get(SLOWMO).expression.subs({S.K: 1, S.mu: 0})
    eq7 = (2 * S.F0 + S.sigma**2 * S.L) / sp.sqrt(S.T) + 4 * S.sigma**2 * S.L**2 * (
        S.H - 1
    ) / S.T * (1 / S.gamma - 1) ** 2
    assert sp.simplify(b - eq7) == 0


def test_slow_momentum_terms_vanish_where_the_paper_says():
    e = slowmo_ar_sgd_expression()
    lead = (2 * S.F0 + S.sigma**2 * S.L) / sp.sqrt(S.K * S.T)
    rest = sp.simplify(e.subs({S.gamma: 1 - S.mu}) - lead)
    assert sp.simplify(rest.subs(S.mu, 0)) == 0  # alpha = 1 - beta and beta = 0: only the lead
    assert sp.simplify(e.subs(S.mu, 0).subs(S.gamma, 1) - lead) == 0


def _slowmo_quadratic(L, sigma2, x0, K, H, R, alpha, gamma, mu):
    """Exact (1/T) sum E||grad f(x_{t,k})||^2 of SlowMo over AR-SGD on f = (L/2) x^2 in 1-D.

    State (x, x_round_start, u) is linear in the noise, so its mean and covariance propagate
    exactly: x <- (1 - alpha L) x - alpha xi (Var xi = sigma^2/K); at the end of a round
    u <- mu u + (x0 - x)/alpha, x0 <- x0 - gamma alpha u, x <- x0 (paper, eqs. (2)-(3))."""
    m = np.array([x0, x0, 0.0])
    C = np.zeros((3, 3))
    inner = np.diag([1 - alpha * L, 1.0, 1.0])
    noise = np.zeros((3, 3))
    noise[0, 0] = alpha**2 * sigma2 / K
    a, b = 1.0 / alpha, -1.0 / alpha  # u' = mu u + a x0 + b x
    u_row = np.array([b, a, mu])
    x0_row = np.array([0.0, 1.0, 0.0]) - gamma * alpha * u_row
    outer = np.vstack([x0_row, x0_row, u_row])
    total = 0.0
    for _ in range(R):
        for _ in range(H):
            total += L**2 * (m[0] ** 2 + C[0, 0])
            m, C = inner @ m, inner @ C @ inner.T + noise
        m, C = outer @ m, outer @ C @ outer.T
    return total / (R * H)


@pytest.mark.parametrize(
    ("K", "H", "gamma", "mu", "T"),
    [
        (4, 1, 1.0, 0.0, 4096),
        (4, 8, 1.0, 0.5, 4096),
        (8, 16, 0.5, 0.5, 16384),
        (2, 4, 0.3, 0.9, 8192),
    ],
)
def test_bound_holds_on_exact_quadratic_dynamics(K, H, gamma, mu, T):
    """At the theorem's step, inside its horizon condition, two starts (F0 term, noise term)."""
    b = registry.get(SLOWMO)
    L, sigma = 1.0, 1.0
    alpha = float((1 - mu) / gamma * np.sqrt(K / T))
    for x0, sig in ((3.0, 0.0), (0.0, sigma), (1.0, sigma)):
        vals = dict(L=L, sigma=sig, F0=L / 2 * x0**2, K=K, H=H, T=T, gamma=gamma, mu=mu)
        vals["alpha"] = alpha
        assert b.conditions_hold(**vals), vals
        measured = _slowmo_quadratic(L, sig**2, x0, K, H, T // H, alpha, gamma, mu)
        bound = float(b.evaluate(**vals))
        assert measured <= bound, (vals, measured, bound)


def test_minibatch_case_is_above_the_quadratic_lower_bound():
    """H = 1, gamma = 1, mu = 0 is minibatch SGD at alpha = sqrt(K/T): never below the exact
    quadratic value (theory.lower), on random configurations inside the conditions."""
    b, low = registry.get(SLOWMO), get_lower("local_sgd_quadratic_lower")
    rng = np.random.default_rng(11)
    for _ in range(200):
        K = int(rng.integers(1, 64))
        L = float(10 ** rng.uniform(-1, 1))
        T = int(np.ceil(K * L**2 * (1 + np.sqrt(3)) * 10 ** rng.uniform(0, 3)))
        vals = dict(L=L, sigma=float(rng.uniform(0, 3)), F0=float(rng.uniform(0, 3)), K=K, H=1)
        vals.update(T=T, gamma=1.0, mu=0.0, alpha=float(np.sqrt(K / T)))
        assert b.conditions_hold(**vals)
        lv = float(low.evaluate(**{k: v for k, v in vals.items() if k in low.parameters}))
        assert lv <= float(b.evaluate(**vals)) * (1 + 1e-12)


@pytest.mark.parametrize(
    ("K", "H", "gamma", "mu", "T"),
    [(4, 1, 1.0, 0.0, 4096), (4, 8, 1.0, 0.5, 4096), (2, 4, 0.3, 0.9, 8192)],
)
def test_negative_controls_fail_the_same_exact_comparison(K, H, gamma, mu, T):
    """The comparisons above can say "false": the bound x 0.1 is below the exact value for
    every start, and the bound without its F0 term is below it for the noiseless start."""
    b = registry.get(SLOWMO)
    alpha = float((1 - mu) / gamma * np.sqrt(K / T))
    for x0, sig in ((3.0, 0.0), (0.0, 1.0), (1.0, 1.0)):
        vals = dict(L=1.0, sigma=sig, F0=x0**2 / 2, K=K, H=H, T=T, gamma=gamma, mu=mu)
        vals["alpha"] = alpha
        measured = _slowmo_quadratic(1.0, sig**2, x0, K, H, T // H, alpha, gamma, mu)
        bound = float(b.evaluate(**vals))
        assert measured > 0.1 * bound, (vals, measured, bound)
        if sig == 0.0:
            without_f0 = bound - 2 * vals["F0"] / np.sqrt(K * T)
            assert measured > without_f0, (vals, measured, without_f0)


def test_lower_bound_comparison_rejects_a_bound_below_it():
    """Negative control of the lower-bound check: SlowMo's bound x 0.1 goes below the exact
    quadratic value somewhere on the same random configurations."""
    b, low = registry.get(SLOWMO), get_lower("local_sgd_quadratic_lower")
    rng = np.random.default_rng(11)
    below = 0
    for _ in range(50):
        K = int(rng.integers(1, 64))
        L = float(10 ** rng.uniform(-1, 1))
        T = int(np.ceil(K * L**2 * (1 + np.sqrt(3)) * 10 ** rng.uniform(0, 3)))
        vals = dict(L=L, sigma=float(rng.uniform(0, 3)), F0=float(rng.uniform(0, 3)), K=K, H=1)
        vals.update(T=T, gamma=1.0, mu=0.0, alpha=float(np.sqrt(K / T)))
        lv = float(low.evaluate(**{k: v for k, v in vals.items() if k in low.parameters}))
        below += lv > 0.1 * float(b.evaluate(**vals))
    assert below > 0

"""The encoded baseline bounds against independent transcriptions of the published statements.

Each published statement is typed again here in the *paper's* notation (Wang & Joshi,
Cooperative SGD, JMLR 2021: eta learning rate, m workers, tau period, K iterations, kappa
heterogeneity; Ghadimi & Lan: gamma step) and mapped to the project's symbols; the encoded
bound must match it term by term. Then the reductions and the corollary algebra.
"""

import numpy as np
import pytest
import sympy as sp

from theory import symbols as S
from theory.bounds import easgd as easgd_mod
from theory.bounds import local_sgd as lsgd_mod
from theory.bounds.easgd import EASGD
from theory.bounds.local_sgd import LOCAL_SGD_IID, LOCAL_SGD_NONIID
from theory.bounds.sgd import SGD

# ----------------------------------------------------------------------------- paper notation
eta, Lp, sig, F, kap = sp.symbols("eta L_paper sigma_paper F_gap kappa", positive=True)
m, tau, Kit = sp.symbols("m tau K_iter", positive=True, integer=True)
TO_PROJECT = {eta: S.alpha, Lp: S.L, sig: S.sigma, F: S.F0, kap: S.zeta, m: S.K, tau: S.H, Kit: S.T}


def project(terms):
    return [sp.sympify(t).subs(TO_PROJECT, simultaneous=True) for t in terms]


def assert_same_terms(bound, transcribed):
    """Every encoded additive term equals exactly one transcribed term, and vice versa."""
    encoded = list(bound.terms)
    expected = project(transcribed)
    assert len(encoded) == len(expected), (encoded, expected)
    unmatched = list(expected)
    for term in encoded:
        hits = [e for e in unmatched if sp.simplify(term - e) == 0]
        assert hits, f"{bound.name}: encoded term {term} not in the published statement {expected}"
        unmatched.remove(hits[0])
    assert not unmatched
    # and numerically, through the compiled path
    rng = np.random.default_rng(7)
    vals = dict(
        L=rng.uniform(0.1, 5, 20),
        sigma=rng.uniform(0, 3, 20),
        zeta=rng.uniform(0, 3, 20),
        F0=rng.uniform(0, 9, 20),
        K=rng.integers(1, 50, 20),
        H=rng.integers(1, 60, 20),
        T=rng.integers(10, 10**6, 20),
        alpha=10 ** rng.uniform(-4, 0, 20),
    )
    got = bound.evaluate(**vals)
    syms = [S.L, S.sigma, S.zeta, S.F0, S.K, S.H, S.T, S.alpha]
    want = sp.lambdify(syms, sp.Add(*expected))(*(vals[s.name] for s in syms))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def assert_same_relation(cond, small, big):
    """``cond`` reads ``small <= big`` (paper notation mapped to ours)."""
    s, b = project([small, big])
    assert cond.relation.rel_op == "<="
    assert sp.simplify((cond.relation.lhs - cond.relation.rhs) - (s - b)) == 0


# ----------------------------------------------------------------------------- statements
def test_sgd_is_ghadimi_lan_constant_step_form():
    assert_same_terms(SGD, [2 * F / (eta * Kit), Lp * eta * sig**2 / m])
    assert_same_relation(SGD.conditions[0], eta * Lp, 1)


def test_local_sgd_iid_is_wang_joshi_corollary_2():
    # Cor. 2: 2[F(x1)-Finf]/(eta K) + eta L sigma^2/m + eta^2 L^2 sigma^2 (tau-1)
    assert_same_terms(
        LOCAL_SGD_IID,
        [2 * F / (eta * Kit), eta * Lp * sig**2 / m, eta**2 * Lp**2 * sig**2 * (tau - 1)],
    )
    (cond,) = LOCAL_SGD_IID.conditions
    assert_same_relation(cond, eta * Lp + eta**2 * Lp**2 * tau * (tau - 1), 1)
    assert sp.simplify(LOCAL_SGD_IID.recommended_step - project([sp.sqrt(m / Kit) / Lp])[0]) == 0


def test_local_sgd_noniid_is_wang_joshi_theorem_2_for_psasgd():
    # Thm 2: 2 x [IID bound (17)] + C kappa^2, C = 6 eta^2 L^2 tau (tau-1) for PSASGD
    C = 6 * eta**2 * Lp**2 * tau * (tau - 1)
    assert_same_terms(
        LOCAL_SGD_NONIID,
        [
            4 * F / (eta * Kit),
            2 * eta * Lp * sig**2 / m,
            2 * eta**2 * Lp**2 * sig**2 * (tau - 1),
            C * kap**2,
        ],
    )
    by_name = {c.name: c for c in LOCAL_SGD_NONIID.conditions}
    assert set(by_name) == {"step", "drift"}
    assert_same_relation(by_name["step"], eta * Lp, 1)
    assert_same_relation(by_name["drift"], C, sp.Rational(1, 2))
    assert "factor 2" in LOCAL_SGD_NONIID.notes


def test_easgd_is_wang_joshi_theorem_3():
    eta_eff = m * eta / (m + 1)  # v = 1 auxiliary variable
    C = 1 + 2 * (1 + 1 / m) ** 2
    assert_same_terms(
        EASGD,
        [
            2 * F / (eta_eff * Kit),
            eta_eff * Lp * sig**2 / m,
            sp.Rational(1, 2) * eta_eff**2 * Lp**2 * sig**2 * (m + 1) * (1 + C * (tau - 1)),
        ],
    )
    # Theorem 1's condition with v = 1 and spectral zeta_s = m/(m+2)
    zs = m / (m + 2)
    (cond,) = EASGD.conditions
    assert_same_relation(
        cond, eta_eff * Lp + 5 * eta_eff**2 * Lp**2 * ((1 + 1 / m) * tau / (1 - zs)) ** 2, 1
    )


def test_easgd_spectral_quantity_at_lemma_1_coefficient():
    # zeta_s = max(|1-a|, |1-(m+1)a|) at a = 2/(m+2) is m/(m+2); a < 2/(m+1) (stable mixing)
    for k in range(1, 40):
        z = easgd_mod.SPECTRAL_ZETA.subs(S.K, k)
        assert z == sp.Rational(k, k + 2)
        assert easgd_mod.ELASTIC_ALPHA.subs(S.K, k) < sp.Rational(2, k + 1)


def test_theorem1_transcription_reduces_to_corollary_2_bound():
    bound, _ = easgd_mod.theorem1_iid(0, 0)  # W = J: spectral zeta 0, no auxiliary variable
    assert sp.simplify(bound - lsgd_mod.iid_expression()) == 0


def test_easgd_theorem_3_is_no_tighter_than_theorem_1_at_the_same_mixing():
    thm1, _ = easgd_mod.theorem1_iid(S.K / (S.K + 2), 1)
    h = sp.Symbol("h", nonnegative=True)
    diff = sp.factor(sp.simplify((EASGD.expression - thm1).subs(S.H, 1 + h)))
    assert diff.is_nonnegative, diff
    assert sp.simplify((EASGD.expression - thm1).subs(S.H, 1)) == 0


# ----------------------------------------------------------------------------- reductions
def test_local_sgd_at_H_1_is_the_sgd_bound():
    assert sp.simplify(LOCAL_SGD_IID.expression.subs(S.H, 1) - SGD.expression) == 0
    (c_local,) = LOCAL_SGD_IID.conditions
    (c_sgd,) = SGD.conditions
    assert sp.simplify(c_local.margin.subs(S.H, 1) - c_sgd.margin) == 0


def test_noniid_at_H_1_is_twice_sgd_and_drift_vanishes():
    assert sp.simplify(LOCAL_SGD_NONIID.expression.subs(S.H, 1) - 2 * SGD.expression) == 0
    assert lsgd_mod.noniid_drift_coefficient().subs(S.H, 1) == 0


def test_noniid_with_zeta_0_dominates_iid():
    gap = sp.expand(LOCAL_SGD_NONIID.expression.subs(S.zeta, 0) - LOCAL_SGD_IID.expression)
    assert sp.simplify(gap - LOCAL_SGD_IID.expression) == 0  # exactly twice


# ----------------------------------------------------------------------------- Cor. 2 algebra
def test_corollary_2_algebra():
    a = sp.sqrt(S.K / S.T) / S.L
    value = LOCAL_SGD_IID.expression.subs(S.alpha, a)
    claim = (2 * S.L * S.F0 + S.sigma**2) / sp.sqrt(S.K * S.T) + S.K * (S.H - 1) * S.sigma**2 / S.T
    assert sp.simplify(value - claim) == 0  # the corollary's "<=" holds with equality


def test_corollary_2_step_meets_the_condition_when_10KH2_le_T():
    # T = 10 K H^2 s^2 with s >= 1 covers 10 K H^2 <= T; write H = 1 + h, s = 1 + r, h, r >= 0
    h, r = sp.symbols("h r", nonnegative=True)
    s = 1 + r
    a = sp.sqrt(S.K / S.T) / S.L
    margin = LOCAL_SGD_IID.conditions[0].margin.subs(S.alpha, a)
    margin = sp.simplify(margin.subs(S.T, 10 * S.K * S.H**2 * s**2)).subs(S.H, 1 + h)
    # multiply by the positive denominator 10 H s^2; every coefficient must be positive
    numer = sp.expand(sp.simplify(margin * 10 * (1 + h) * s**2))
    poly = sp.Poly(numer, h, r)
    assert all(c > 0 for c in poly.coeffs()), numer
    # and numerically at the boundary T = 10 K H^2
    for K, H in [(1, 1), (4, 32), (64, 500)]:
        T = 10 * K * H**2
        assert LOCAL_SGD_IID.conditions_hold(alpha=np.sqrt(K / T), L=1.0, H=H, K=K, T=T)


# ----------------------------------------------------------------------------- H scaling
def _h_star(bound):
    """Largest H (continuous) with higher-order rate terms <= leading term, from rate()."""
    lead, *rest = bound.rate()
    eq = sp.Add(*(r.expression for r in rest)) - lead.expression
    sols = [s for s in sp.solve(eq, S.H) if s.is_positive is not False]
    return sols


def test_local_sgd_iid_linear_speedup_H_scales_as_sqrtT_over_K_three_halves():
    lead, second = LOCAL_SGD_IID.rate()
    assert lead.t_exponent == sp.Rational(-1, 2) and second.t_exponent == -1
    assert sp.simplify(lead.coefficient - (2 * S.L * S.F0 + S.sigma**2) / sp.sqrt(S.K)) == 0
    (hs,) = _h_star(LOCAL_SGD_IID)
    c = sp.simplify((hs - 1) * S.K ** sp.Rational(3, 2) / sp.sqrt(S.T))
    assert not ({S.T, S.K} & c.free_symbols), c  # H - 1 = c * T^(1/2) K^(-3/2)
    vals = dict(L=1.0, sigma=1.0, F0=1.0)
    h1 = LOCAL_SGD_IID.max_H(K=4, T=10**10, **vals)["speedup"]
    h_T = LOCAL_SGD_IID.max_H(K=4, T=16 * 10**10, **vals)["speedup"]
    h_K = LOCAL_SGD_IID.max_H(K=16, T=10**10, **vals)["speedup"]
    assert (h_T - 1) / (h1 - 1) == pytest.approx(4.0, rel=1e-3)  # T x16 -> H x4
    assert (h1 - 1) / (h_K - 1) == pytest.approx(8.0, rel=1e-3)  # K x4 -> H /8
    exact = 1 + (2 * 1 * 1 + 1) * np.sqrt(1e10) / (1 * 4**1.5)
    assert float(h1) == np.floor(exact)


def test_local_sgd_noniid_linear_speedup_H_scales_as_T_quarter():
    vals = dict(L=1.0, sigma=0.0, F0=1.0, zeta=1.0)
    h1 = LOCAL_SGD_NONIID.max_H(K=4, T=10**12, **vals)["speedup"]
    h_T = LOCAL_SGD_NONIID.max_H(K=4, T=16 * 10**12, **vals)["speedup"]
    h_K = LOCAL_SGD_NONIID.max_H(K=64, T=10**12, **vals)["speedup"]
    assert h_T / h1 == pytest.approx(2.0, rel=2e-2)  # T x16 -> H x2
    assert h1 / h_K == pytest.approx(8.0, rel=2e-2)  # K x16 -> H /8


def test_easgd_rate_leading_term_matches_corollary_1_form():
    lead = EASGD.rate()[0]
    assert lead.t_exponent == sp.Rational(-1, 2)
    assert sp.simplify(lead.coefficient - (2 * S.L * S.F0 + S.sigma**2) / sp.sqrt(S.K)) == 0


def test_every_baseline_has_provenance_and_is_published():
    for b in (SGD, LOCAL_SGD_IID, LOCAL_SGD_NONIID, EASGD):
        assert not b.derived_here
        assert b.provenance and ("Wang & Joshi" in b.provenance or "Ghadimi" in b.provenance)
        assert b.recommended_step is not None

"""Tests of theory.verify: statistics, multiple testing, rate fit, and bound verification."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from core.errors import UserInputError
from theory import verify as V

PLAN = V.BootstrapPlan(1999, seed=1)


# ------------------------------------------------------------------ single tests


def test_mean_test_holds_violated_inconclusive():
    rng = np.random.default_rng(0)
    y = rng.exponential(1.0, size=200)  # mean 1, right-skewed, nonnegative
    m = y.mean()
    holds = V.mean_test(y, 2.0, PLAN)
    viol = V.mean_test(y, 0.5, PLAN)
    inc = V.mean_test(y, m * 1.01, PLAN)
    floor = 1 / (PLAN.n_resamples + 1)  # smallest bootstrap p-value
    assert holds.direction == V.HOLDS and holds.p_holds <= floor and holds.p_violated > 0.99
    assert viol.direction == V.VIOLATED and viol.p_violated <= floor and viol.p_holds > 0.99
    assert inc.p_value > 0.5
    verdicts, corr = V.decide([holds, viol, inc], 0.05, "holm")
    assert verdicts == [V.HOLDS, V.VIOLATED, V.INCONCLUSIVE]
    assert list(corr.reject) == [True, True, False]


def test_t_pvalue_matches_scipy_ttest():
    rng = np.random.default_rng(1)
    y = rng.normal(3.0, 1.0, size=40)
    t = V.mean_test(y, 3.2, PLAN)
    ref = stats.ttest_1samp(y, 3.2, alternative="less").pvalue
    assert t.p_holds_t == pytest.approx(ref, rel=1e-10)
    ref_v = stats.ttest_1samp(y, 3.2, alternative="greater").pvalue
    assert t.p_violated_t == pytest.approx(ref_v, rel=1e-10)


@pytest.mark.parametrize("level", [0.001, 0.01, 0.05, 0.2])
def test_confidence_bounds_agree_with_pvalues(level):
    """b >= ucb  <=>  p_holds <= level, and b <= lcb  <=>  p_violated <= level."""
    rng = np.random.default_rng(2)
    y = rng.lognormal(0.0, 1.0, size=60)
    t0 = V.mean_test(y, 1.0, PLAN)
    ci = t0.confidence_bounds(level)
    assert ci["ucb"] == max(ci["t_ucb"], ci["boot_ucb"])
    assert ci["lcb"] == min(ci["t_lcb"], ci["boot_lcb"])
    for b in np.linspace(ci["lcb"] * 0.8, ci["ucb"] * 1.2, 41):
        t = V.mean_test(y, b, PLAN)
        if b > ci["ucb"] * (1 + 1e-9):
            assert t.p_holds <= level
        if b < ci["ucb"] * (1 - 1e-9):
            assert t.p_holds > level
        if b < ci["lcb"] * (1 - 1e-9):
            assert t.p_violated <= level
        if b > ci["lcb"] * (1 + 1e-9):
            assert t.p_violated > level


def test_bootstrap_is_more_conservative_upper_bound_for_right_skew():
    """For right-skewed draws the bootstrap-t upper bound exceeds the t bound (t undercovers)."""
    rng = np.random.default_rng(3)
    y = rng.lognormal(0.0, 1.5, size=50)
    ci = V.mean_test(y, 1.0, PLAN).confidence_bounds(0.01)
    assert ci["boot_ucb"] > ci["t_ucb"]
    assert ci["ucb"] == ci["boot_ucb"]


def test_coverage_of_conservative_upper_bound_on_skewed_data():
    """On skewed draws (gamma, shape 2) the conservative upper bound covers the true mean at
    about the nominal rate, and misses less often than the t bound alone."""
    rng = np.random.default_rng(4)
    true_mean = 2.0
    level, n_rep = 0.05, 400
    plan = V.BootstrapPlan(999, seed=5)
    miss = miss_t = 0
    for _ in range(n_rep):
        y = rng.gamma(2.0, 1.0, size=30)
        ci = V.mean_test(y, true_mean, plan).confidence_bounds(level)
        miss += ci["ucb"] < true_mean
        miss_t += ci["t_ucb"] < true_mean
    # binomial(400, 0.05) exceeds 32 with probability < 1%
    assert miss <= 32, miss
    assert miss <= miss_t


def test_identical_values_and_single_value():
    t = V.mean_test(np.full(8, 2.0), 3.0, PLAN)
    assert t.se == 0 and t.direction == V.HOLDS and t.p_holds == 0.0
    assert t.confidence_bounds(0.01)["ucb"] == 2.0
    t = V.mean_test(np.full(8, 2.0), 1.0, PLAN)
    assert t.direction == V.VIOLATED and t.p_violated == 0.0
    one = V.mean_test([1.0], 2.0, PLAN)
    assert one.p_value == 1.0  # one replica cannot decide anything


def test_diverged_replicas_are_a_violation():
    y = np.array([0.1, 0.2, np.inf, 0.15, 0.12])
    t = V.mean_test(y, 10.0, PLAN)
    assert t.n_diverged == 1 and t.direction == V.VIOLATED and t.p_violated < 1e-100
    assert t.confidence_bounds(0.01)["lcb"] == math.inf


def test_mean_test_rejects_empty():
    with pytest.raises(UserInputError):
        V.mean_test([], 1.0, PLAN)


# ------------------------------------------------------------------ multiple testing


def test_holm_and_bonferroni_known_values():
    p = [0.01, 0.04, 0.03, 0.005]
    bon = V.correct(p, 0.05, "bonferroni")
    assert list(bon.reject) == [True, False, False, True]
    np.testing.assert_allclose(bon.adjusted, [0.04, 0.16, 0.12, 0.02])
    holm = V.correct(p, 0.05, "holm")
    # sorted 0.005 (<= .0125), 0.01 (<= .01667), 0.03 (> .025): stop
    assert list(holm.reject) == [True, False, False, True]
    np.testing.assert_allclose(holm.adjusted, [0.03, 0.06, 0.06, 0.02])
    holm2 = V.correct([0.01, 0.02, 0.04, 0.001], 0.05, "holm")
    assert holm2.reject.all()
    assert not V.correct([0.01, 0.02, 0.04, 0.001], 0.05, "bonferroni").reject.all()


@pytest.mark.parametrize("method", V.CORRECTIONS)
def test_reject_iff_p_below_test_level(method):
    rng = np.random.default_rng(6)
    for _ in range(50):
        p = rng.uniform(0, 0.05, size=rng.integers(1, 12)) ** rng.uniform(0.5, 2)
        c = V.correct(p, 0.05, method)
        np.testing.assert_array_equal(c.reject, p <= c.test_level)
        np.testing.assert_array_equal(c.reject, c.adjusted <= 0.05)


def test_holm_matches_independent_implementation():
    rng = np.random.default_rng(7)
    for _ in range(100):
        p = rng.uniform(0, 0.1, size=8)
        order = np.argsort(p)
        expected = np.zeros(8, bool)
        for j, i in enumerate(order):
            if p[i] <= 0.05 / (8 - j):
                expected[i] = True
            else:
                break
        np.testing.assert_array_equal(V.correct(p, 0.05, "holm").reject, expected)


def test_family_wise_error_under_the_null():
    """Every mean equals its threshold: any verdict other than inconclusive is an error."""
    rng = np.random.default_rng(8)
    plan = V.BootstrapPlan(999, seed=9)
    families, m, errors = 150, 6, 0
    for _ in range(families):
        tests = [V.mean_test(rng.normal(1.0, 0.3, size=20), 1.0, plan) for _ in range(m)]
        verdicts, _ = V.decide(tests, 0.05, "holm")
        errors += any(v != V.INCONCLUSIVE for v in verdicts)
    # family-wise rate <= 0.05 (binomial(150, .05) > 15 has probability < 1%)
    assert errors <= 15, errors


def test_correction_without_it_would_err_more():
    """Uncorrected per-test decisions make more family-wise errors than the correction."""
    rng = np.random.default_rng(10)
    plan = V.BootstrapPlan(999, seed=11)
    raw = corrected = 0
    for _ in range(60):
        tests = [V.mean_test(rng.normal(1.0, 0.3, size=20), 1.0, plan) for _ in range(10)]
        raw += any(t.p_value <= 0.05 for t in tests)
        corrected += any(v != V.INCONCLUSIVE for v in V.decide(tests, 0.05, "bonferroni")[0])
    assert corrected < raw


def test_correct_rejects_bad_input():
    with pytest.raises(UserInputError, match="correction"):
        V.correct([0.1], 0.05, "sidak")
    with pytest.raises(UserInputError, match="level"):
        V.correct([0.1], 1.5)


# ------------------------------------------------------------------ rate fit


def test_rate_fit_recovers_known_slope():
    rng = np.random.default_rng(12)
    T = np.array([32, 64, 128, 256, 512, 1024])
    true = 3.0 * T**-0.5
    reps = true[:, None] * rng.lognormal(0, 0.2, size=(T.size, 200)) / math.exp(0.02)
    fit = V.fit_power_law(T, reps.mean(axis=1), reps.std(axis=1, ddof=1) / math.sqrt(200))
    assert fit.ci_low <= -0.5 <= fit.ci_high
    assert abs(fit.slope + 0.5) < 0.05
    assert fit.ci_high - fit.ci_low < 0.2


def test_rate_fit_distinguishes_slopes():
    T = np.array([32, 64, 128, 256, 512])
    m = 5.0 * T**-1.0
    fit = V.fit_power_law(T, m * (1 + 0.01 * np.array([1, -1, 1, -1, 1])), 0.01 * m)
    assert fit.ci_high < -0.9 and fit.ci_low > -1.1
    assert not (fit.ci_low <= -0.5 <= fit.ci_high)


def test_rate_fit_scales_up_ci_when_points_scatter():
    T = np.array([32, 64, 128, 256, 512])
    m = T**-0.5 * np.array([1.3, 0.8, 1.2, 0.7, 1.25])
    tight = V.fit_power_law(T, m, 1e-4 * m)
    assert tight.chi2 / tight.dof > 1
    assert tight.ci_low <= -0.5 <= tight.ci_high  # scatter-scaled CI still covers


def test_rate_fit_rejects_bad_input():
    with pytest.raises(UserInputError):
        V.fit_power_law([1, 2], [1, 1])
    with pytest.raises(UserInputError):
        V.fit_power_law([1, 2, 3], [1, -1, 1])


# ------------------------------------------------------------------ with the simulator

sim = pytest.importorskip("theory.simulate")
problems = pytest.importorskip("theory.problems")

from theory import bounds as registry  # noqa: E402
from theory.algorithm import AlgorithmSpec  # noqa: E402
from theory.assumptions import INDEPENDENT_COINS  # noqa: E402
from theory.bound import Bound  # noqa: E402
from theory.verify.sampling import _needs_iid as needs_iid  # noqa: E402


def _isotropic_quadratic(K: int = 2, d: int = 4):
    """f_k = |x - b|^2 / 2 (all eigenvalues L = 1), i.i.d., Gaussian noise sigma = 1."""
    return problems.make_problem(
        "quadratic", K=K, d=d, noise="gaussian", sigma=1.0, zeta=0.0, seed=3, spectrum=[1.0] * d
    )


def _sgd_configs(bound_name: str, K: int = 2, seeds=range(3)):
    return [
        V.Config(
            bound=bound_name, problem="quadratic", algorithm="sgd", K=K, T=200, alpha=0.5, seed=s
        )
        for s in seeds
    ]


def test_deliberately_wrong_bound_is_detected_and_true_bound_holds():
    """SGD bound / 10 is violated on an isotropic quadratic (its noise floor alone is
    alpha L sigma^2 / (K (2 - alpha L)) > alpha L sigma^2 / (10 K)); the true bound holds."""
    wrong = Bound.from_strings(
        "sgd_div10",
        "(2*F0/(alpha*T) + L*alpha*sigma**2/K)/10",
        ["alpha*L <= 1"],
        algorithm="sgd",
        provenance="wrong on purpose",
    )
    prob = _isotropic_quadratic()
    rows_wrong = V.verify_configs(wrong, {"quadratic": prob}, _sgd_configs("sgd_div10"), R=32)
    rows_true = V.verify_configs(
        registry.get("sgd"), {"quadratic": prob}, _sgd_configs("sgd"), R=32
    )
    assert [r["verdict"] for r in rows_wrong] == [V.VIOLATED] * 3
    assert [r["verdict"] for r in rows_true] == [V.HOLDS] * 3
    for r in rows_wrong:
        assert r["lcb"] > r["bound_value"] and r["ratio"] > 1
    for r in rows_true:
        assert r["ucb"] < r["bound_value"] and r["ratio"] < 1
        # exact mean: e_t = E||x_t - x*||^2 = c^t e_0 + v (1 - c^t), c = (1 - alpha)^2,
        # v = alpha sigma^2 / (K (2 - alpha)) (A = I, so grad = x - x*)
        c, v = 0.25, 0.5 / (2 * 1.5)
        e0 = float(np.sum((prob.x0() - prob.b.mean(axis=0)) ** 2))
        ct = c ** np.arange(200)
        exact = float(np.mean(ct * e0 + v * (1 - ct)))
        assert r["measured_mean"] == pytest.approx(exact, rel=0.1)


def test_halved_bound_is_inconclusive_or_violated_but_never_holds():
    """Halving the SGD bound puts it near the measured floor: it must not be declared to hold
    where it is violated (noise floor alpha/(K(2 - alpha)) vs bound/2 = alpha/(2K) + transient)."""
    half = Bound.from_strings(
        "sgd_half", "(2*F0/(alpha*T) + L*alpha*sigma**2/K)/2", ["alpha*L <= 1"], algorithm="sgd"
    )
    prob = _isotropic_quadratic()
    cfgs = [
        V.Config(
            bound="sgd_half", problem="quadratic", algorithm="sgd", K=2, T=2000, alpha=0.9, seed=s
        )
        for s in range(2)
    ]
    rows = V.verify_configs(half, {"quadratic": prob}, cfgs, R=48)
    # floor 0.9/(2*1.1) = 0.409 > 0.9/4 + F0/(0.9*2000) ~ 0.225 + small
    assert all(r["verdict"] == V.VIOLATED for r in rows)


def test_outside_conditions_not_tested():
    prob = _isotropic_quadratic()
    cfgs = [
        V.Config(bound="sgd", problem="quadratic", algorithm="sgd", K=2, T=50, alpha=1.5, seed=0)
    ] + _sgd_configs("sgd", seeds=[1])
    rows = V.verify_configs(registry.get("sgd"), {"quadratic": prob}, cfgs, R=16)
    assert rows[0]["verdict"] == V.OUTSIDE and not rows[0]["conditions_hold"]
    assert rows[0]["failed_conditions"] == "step"
    assert rows[1]["verdict"] == V.HOLDS
    assert math.isnan(rows[0]["p_adjusted"])


def test_inconsistent_dimensions_are_rejected():
    prob = _isotropic_quadratic(K=2)
    cfg = V.Config(bound="sgd", problem="quadratic", algorithm="sgd", K=4, T=10, alpha=0.5)
    with pytest.raises(UserInputError, match="inconsistent dimensions"):
        V.verify_configs(registry.get("sgd"), {"quadratic": prob}, [cfg], R=4)


def test_sample_configs_respect_conditions_and_seed():
    settings = V.VerifySettings(configs=6, outside=2, K=(2, 4), T=(64, 128))
    cache = V.ProblemCache(settings)
    for name in ("sgd", "local_sgd_iid", "local_sgd_noniid"):
        b = registry.get(name)
        a = V.sample_configs(b, "quadratic", cache, settings, seed=5)
        again = V.sample_configs(b, "quadratic", cache, settings, seed=5)
        assert a == again
        assert len(a) == 8
        for c in a:
            prob = cache.get("quadratic", c.K, iid=needs_iid(b))
            vals = V.bound_values(b, V.problem_constants(prob), {**c.__dict__})
            inside = bool(b.conditions_hold(**vals))
            assert inside == (c.alpha_role != "outside"), (name, c)
            assert c.T % c.H == 0 and c.K in (2, 4)
        if needs_iid(b):
            assert cache.get("quadratic", 2, iid=True).zeta2 == 0.0


def test_a_bound_holds_the_spec_it_is_verified_as():
    """The verifier simulates the bound's own spec (no guessing from its formula): a bound
    states one algorithm of the table, with its coin model and outer update."""
    assert V.bound_spec(registry.get("sgd")).kind == "sgd"
    assert registry.get("sgd").algorithms == ("sgd", "ddp")
    assert V.bound_spec(registry.get("local_sgd_iid")).kind == "local_sgd"
    assert V.bound_spec(registry.get("easgd")).kind == "easgd"
    outer = registry.get("local_sgd_outer")
    assert (outer.algorithm.kind, outer.algorithm.outer, outer.outers) == (
        "diloco", "sgd", ("sgd", "nesterov"),
    )  # fmt: skip
    pal = Bound.from_strings("pal_user", "F0/(alpha*T) + p*eta", algorithm="palsgd")
    assert V.bound_spec(pal).kind == "palsgd"
    p0 = Bound.from_strings("p0_user", "F0/(alpha*T)", algorithm="local_sgd")
    assert V.bound_spec(p0).kind == "local_sgd"
    with pytest.raises(UserInputError, match="names no algorithm"):
        V.bound_spec(Bound.from_strings("none_user", "F0/(alpha*T)"))
    with pytest.raises(UserInputError, match="unknown algorithm kind 'scaffold'"):
        Bound.from_strings("scaffold_user", "F0/(alpha*T)", algorithm="scaffold")
    with pytest.raises(UserInputError, match="averages the models"):
        Bound.from_strings("gamma_user", "F0/(alpha*gamma*T)", algorithm="local_sgd")
    with pytest.raises(UserInputError, match="contradicts"):
        Bound.from_strings(
            "coins_user", "F0/(alpha*T)", algorithm=AlgorithmSpec.of("palsgd", coins="shared"),
            assumptions=(INDEPENDENT_COINS,),
        )  # fmt: skip


def test_not_verifiable_bound_is_reported_not_dropped(monkeypatch):
    """A bound for an algorithm the simulator lacks is listed as not verifiable."""
    other = Bound.from_strings(
        "slowmo_user",
        "2*F0/(alpha*T)",
        ["alpha*L <= 1"],
        algorithm="slowmo_ar_sgd",
        provenance="test",
    )
    registry.names()  # load the built-in bounds first
    monkeypatch.setitem(registry._REGISTRY, other.name, other)  # registered for this test only
    assert "slowmo_ar_sgd" not in sim.KINDS
    settings = V.VerifySettings(
        bounds=("slowmo_user", "sgd"),
        problems=("quadratic",),
        replicas=8,
        configs=1,
        outside=0,
        T=(32,),
        K=(2,),
        rates=False,
        speedup=False,
        exact=False,
        consensus=False,
        search=False,
    )
    rep = V.run_verification(settings, progress=False)
    rows = [r for r in rep.results if r["bound"] == "slowmo_user"]
    assert len(rows) == 1 and rows[0]["verdict"] == V.NOT_VERIFIABLE
    assert "simulator lacks slowmo_ar_sgd" in rows[0]["note"]
    assert rep.summary.counts[V.NOT_VERIFIABLE] == 1
    assert "slowmo_user" in V.format_table(rep.results)


def test_declared_constant_that_sampling_refutes_is_an_error():
    prob = problems.make_problem("quadratic", K=2, d=4, zeta=0.5, seed=0)
    with pytest.raises(UserInputError, match="L"):
        V.apply_declared_constants(prob, {"L": 0.5 * prob.L})
    looser = V.apply_declared_constants(prob, {"L": 2 * prob.L})
    assert looser.L == 2 * prob.L and prob.L != looser.L
    with pytest.raises(UserInputError, match="declarable"):
        V.apply_declared_constants(prob, {"kappa": 1.0})


def test_exact_vs_monte_carlo_agree():
    settings = V.VerifySettings(exact_T=16, exact_replicas=1500)
    rows, summ = V.exact_vs_mc(settings, seed=1)
    assert len(summ) == len(V.exact_specs())
    for s in summ:
        assert s["status"] == "agrees", s
    assert {r["metric"] for r in rows} == {"grad_norm_sq", "loss_gap", "consensus"}


def test_exact_vs_monte_carlo_detects_a_wrong_curve(monkeypatch):
    """A 5% error in the exact curve must be flagged (the comparison can fail)."""
    quad = pytest.importorskip("theory.moments")
    real = quad.exact_moments

    def skewed(*a, **k):
        out = real(*a, **k)
        out.grad_norm_sq = out.grad_norm_sq * 1.05
        return out

    monkeypatch.setattr(quad, "exact_moments", skewed)
    _, summ = V.exact_vs_mc(V.VerifySettings(exact_T=16, exact_replicas=1500), seed=1)
    assert any(s["status"] == "DISAGREES" for s in summ)


@pytest.mark.parametrize("name", ["sgd", "local_sgd_iid", "local_sgd_noniid"])
def test_numeric_leading_exponent_matches_bound_rate(name):
    b = registry.get(name)
    vals = {"L": 2.0, "sigma": 1.0, "zeta": 0.5, "F0": 3.0, "K": 4, "H": 4, "T": 100, "alpha": 0.1}
    vals = {k: v for k, v in vals.items() if k in b.parameters}
    assert V.leading_exponent(b, vals, "recommended") == float(b.rate()[0].t_exponent)
    import sympy as sp

    fixed = float(b.rate(sp.Float(0.01))[0].t_exponent)
    assert V.leading_exponent(b, vals, 0.01) == fixed


def test_coins_are_the_specs():
    """The coin model is the bound's spec's (no search of its name or assumptions)."""
    assert V.bound_spec(registry.get("sgd")).coins == "independent"
    assert V.bound_spec(registry.get("palsgd_shared_coins")).coins == "shared"
    named = Bound.from_strings("palsgd_shared_user", "F0/(alpha*T)", algorithm="palsgd")
    assert V.bound_spec(named).coins == "independent"  # a name says nothing
    shared = Bound.from_strings(
        "palsgd_user", "F0/(alpha*T)", algorithm=AlgorithmSpec.of("palsgd", coins="shared")
    )
    assert V.bound_spec(shared).coins == "shared"


def test_deterministic_draws_up_to_rounding():
    """Noise-free runs give identical replicas up to rounding: decided exactly, no NaN/inf."""
    y = 0.25 * (1 + 1e-16 * np.array([1, -1, 0, 2, -2, 1, 0, 0]))
    assert V.mean_test(y, 0.3, PLAN).direction == V.HOLDS
    assert V.mean_test(y, 0.3, PLAN).p_holds == 0.0
    ci = V.mean_test(y, 0.2, PLAN).confidence_bounds(1e-4)
    assert ci["lcb"] == ci["ucb"] == pytest.approx(0.25)


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names())
def test_numeric_leading_exponent_matches_bound_rate_every_bound(name):
    b = registry.get(name)
    if b.recommended_step is None:
        pytest.skip("no recommended step")
    vals = {
        "L": 2.0,
        "sigma": 1.0,
        "zeta": 0.5,
        "F0": 3.0,
        "K": 4,
        "H": 4,
        "T": 100,
        "alpha": 0.1,
        "p": 0.2,
        "eta": 0.5,
        "gamma": 1.0,
        "mu": 0.0,
        "beta": 0.0,
    }
    vals = {k: v for k, v in vals.items() if k in b.parameters}
    assert V.leading_exponent(b, vals, "recommended") == float(b.rate()[0].t_exponent)

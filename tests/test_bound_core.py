import numpy as np
import pytest
import sympy as sp

from core.errors import UserInputError
from theory import symbols as S
from theory.bound import Bound
from theory.bounds import get, names, register


def test_sgd_optimal_step_matches_closed_form():
    b = get("sgd")
    vals = dict(F0=2.0, T=np.array([100, 1000, 10000]), L=3.0, sigma=1.5, K=4)
    a = b.optimal_step(**vals)
    closed = np.sqrt(2 * 2.0 * 4 / (3.0 * 1.5**2 * vals["T"]))
    expect = np.minimum(closed, 1 / 3.0)
    np.testing.assert_allclose(a, expect, rtol=1e-6)


def test_rate_groups_powers_of_T():
    r = get("sgd").rate()
    assert len(r) == 1 and r[0].t_exponent == sp.Rational(-1, 2)
    assert sp.simplify(r[0].coefficient - 2 * sp.sqrt(2 * S.L * S.F0 / S.K) * S.sigma) == 0


def test_condition_margins_and_max_step():
    b = get("sgd")
    rep = b.condition_report(alpha=np.array([0.5, 2.0]), L=1.0)
    assert rep[0].holds.tolist() == [True, False]
    np.testing.assert_allclose(rep[0].margin, [0.5, -1.0])
    np.testing.assert_allclose(b.max_step(L=np.array([1.0, 4.0])), [1.0, 0.25], rtol=1e-9)


def test_user_bound_from_strings_gets_every_method(monkeypatch):
    b = Bound.from_strings(
        "user_test_bound",
        "4*F0/(alpha*T) + L*alpha*sigma**2/K",
        {"step": "alpha*L <= 1/2"},
        provenance="test",
        recommended_step=sp.sqrt(4 * S.F0 * S.K / (S.L * S.sigma**2 * S.T)),
    )
    from theory.bounds import _REGISTRY

    names()  # load the built-in bounds first
    monkeypatch.setitem(_REGISTRY, b.name, b)  # removed again after this test
    assert register(b) is b
    assert "user_test_bound" in names()
    assert b.max_step(L=2.0) == pytest.approx(0.25)
    assert b.rate()[0].t_exponent == sp.Rational(-1, 2)
    assert np.isfinite(b.rounds_to_eps(0.1, F0=1, L=1, sigma=1, K=2, H=1))


def test_user_bound_rejects_garbage():
    with pytest.raises(UserInputError, match="unknown (symbols|name)"):
        Bound.from_strings("bad", "x + L")
    with pytest.raises(UserInputError, match="not an inequality"):
        Bound.from_strings("bad", "L", ["alpha + 1"])
    with pytest.raises(UserInputError, match="cannot parse"):
        Bound.from_strings("bad", "L +* 2")


def test_unknown_bound_name_lists_known():
    with pytest.raises(UserInputError, match="known bounds"):
        get("nope")


def test_missing_parameter_is_named():
    with pytest.raises(UserInputError, match="F0"):
        get("sgd").evaluate(alpha=0.1, T=10, L=1, sigma=1, K=1)


# ----------------------------------------------------------------------------- extensions
def test_condition_holds_at_its_boundary_despite_rounding():
    b = get("sgd")
    L = np.array([3.0, 7.0, 0.1, 49.0])
    assert b.conditions_hold(alpha=1 / L, L=L).all()
    assert not b.conditions_hold(alpha=(1 / L) * (1 + 1e-9), L=L).any()


def test_results_broadcast_over_every_supplied_parameter():
    b = get("sgd")
    out = b.evaluate(alpha=0.1, T=10, L=1, sigma=1, K=1, F0=1, p=np.array([0.1, 0.2, 0.3]))
    assert out.shape == (3,)
    assert b.conditions_hold(alpha=0.1, L=1, H=np.ones((2, 2))).shape == (2, 2)


def test_mismatched_array_shapes_are_a_user_error():
    with pytest.raises(UserInputError, match="broadcast"):
        get("sgd").evaluate(alpha=np.ones(2), T=np.ones(3), L=1, sigma=1, K=1, F0=1)


def test_max_step_local_sgd_matches_quadratic_root():
    b = get("local_sgd_iid")
    H = np.array([1, 2, 8, 100, 1000])
    L = 2.5
    got = b.max_step(L=L, H=H)
    hh = H * (H - 1.0)
    root = np.where(hh > 0, (-1 + np.sqrt(1 + 4 * hh)) / (2 * L * np.where(hh > 0, hh, 1)), 1 / L)
    np.testing.assert_allclose(got, root, rtol=1e-9)


def test_optimal_step_without_conditions_finds_interior_optimum():
    b = Bound.from_strings("no_conditions_test", "2*F0/(alpha*T) + L*alpha*sigma**2/K")
    vals = dict(F0=3.0, T=np.array([10, 10**4, 10**8]), L=2.0, sigma=0.5, K=8)
    closed = np.sqrt(2 * 3.0 * 8 / (2.0 * 0.25 * vals["T"]))
    np.testing.assert_allclose(b.optimal_step(**vals), closed, rtol=1e-7)
    assert np.isinf(b.max_step(**vals)).all()


def test_infeasible_conditions_give_nan_steps():
    b = Bound.from_strings("infeasible_test", "F0/(alpha*T) + alpha", ["T >= 10*K"])
    assert np.isnan(b.max_step(T=5, K=1))
    assert np.isnan(b.optimal_step(T=5, K=1, F0=1))
    assert b.rounds_to_eps(1e-3, F0=1.0, K=10**13) == 10**14  # T = 10 K is the first feasible T
    assert not b.conditions_hold(T=10**14 - 1, K=10**13, alpha=1.0)
    assert np.isinf(b.rounds_to_eps(1e-3, F0=1.0, K=10**15))  # needs T > t_max


def test_max_H_matches_closed_form_for_local_sgd():
    b = get("local_sgd_iid")
    L, F0, sigma, K = 1.5, 2.0, 0.7, np.array([1, 4, 16])
    T = 10**9
    got = b.max_H(L=L, F0=F0, sigma=sigma, K=K, T=T, factor=0.5).speedup
    exact = 1 + 0.5 * (2 * L * F0 + sigma**2) * np.sqrt(T) / (sigma**2 * K**1.5)
    np.testing.assert_array_equal(got, np.floor(exact))


def test_max_H_conditions_at_recommended_step():
    b = get("local_sgd_iid")
    K, T, L = 4, 10**6, 1.0
    got = b.max_H(L=L, F0=1.0, sigma=1.0, K=K, T=T).conditions
    a = np.sqrt(K / T) / L
    H = np.arange(1, 5000)
    ok = a * L + (a * L) ** 2 * H * (H - 1) <= 1
    assert got == H[ok].max()


def test_max_H_without_H_dependence_returns_h_max():
    out = get("sgd").max_H(L=1, F0=1, sigma=1, K=2, T=100, h_max=1234)
    assert out.speedup == 1234 and out.conditions == 1234 and out.H == 1234
    assert out.binding == "none" and out["speedup"] == out.speedup


def test_max_H_result_names_the_binding_limit_and_its_step():
    b = get("palsgd")
    base = dict(L=1.0, sigma=1.0, zeta=0.0, F0=1.0, K=4, p=0.2, eta=0.5)
    rec = b.max_H(T=1e4, **base)
    assert rec.step == "recommended" and rec.speedup < rec.conditions
    assert rec.H == rec.speedup and rec.binding == "speedup"
    assert rec.alpha == pytest.approx(float(b.recommended_step_value(T=1e4, H=rec.H, **base)))
    given = b.max_H(T=np.array([1e3, 1e4]), step=0.001, **base)
    assert given.step == 0.001 and given.H.shape == (2,)
    assert list(given.binding) == ["conditions", "conditions"]
    np.testing.assert_array_equal(given.H, given.conditions)
    np.testing.assert_array_equal(given.alpha, [0.001, 0.001])
    # the conditions hold at H and fail at H + 1 at that step
    assert bool(b.conditions_hold(T=1e4, H=given.H[1], alpha=0.001, **base))
    assert not bool(b.conditions_hold(T=1e4, H=given.H[1] + 1, alpha=0.001, **base))
    for bad, msg in (
        (dict(factor=0.0), "factor"),
        (dict(h_max=0.5), "h_max"),
        (dict(step="x"), "step"),
    ):
        with pytest.raises(UserInputError, match=msg):
            b.max_H(T=1e4, **bad, **base)
    # a step at which even H = 1 fails: NaN, with the failing limit named
    bad = b.max_H(T=1e4, step=10.0, **base)
    assert np.isnan(bad.H) and np.isnan(bad.alpha) and bad.binding in ("conditions", "both")


def test_rounds_to_eps_for_sgd_matches_closed_form():
    # optimised SGD bound: 2 sqrt(2 F0 L sigma^2/(K T)) while sqrt(2 F0 K/(L sigma^2 T)) <= 1/L
    F0, L, sigma, K, eps = 1.0, 1.0, 1.0, 4, 0.0123
    R = get("sgd").rounds_to_eps(eps, F0=F0, L=L, sigma=sigma, K=K)
    T_exact = 8 * F0 * L * sigma**2 / (K * eps**2)
    assert R == np.ceil(T_exact)
    assert np.sqrt(2 * F0 * K / (L * sigma**2 * R)) <= 1 / L


def test_rounds_to_eps_divides_steps_by_H():
    b = get("local_sgd_iid")
    vals = dict(F0=1.0, L=1.0, sigma=1.0, K=4)
    R = b.rounds_to_eps(0.05, H=8, **vals)
    T = R * 8
    a = b.optimal_step(H=8, T=T, **vals)
    assert b.evaluate(H=8, T=T, alpha=a, **vals) <= 0.05
    a_prev = b.optimal_step(H=8, T=(R - 1) * 8, **vals)
    assert b.evaluate(H=8, T=(R - 1) * 8, alpha=a_prev, **vals) > 0.05


def test_rounds_to_eps_is_inf_when_one_round_exceeds_t_max():
    # eps is met after one round, but one round is H = 10 steps and t_max allows only 5
    b = get("local_sgd_iid")
    vals = dict(F0=1.0, L=1.0, sigma=1.0, K=2, H=10)
    assert b.rounds_to_eps(1e6, t_max=10, **vals) == 1
    assert np.isinf(b.rounds_to_eps(1e6, t_max=5, **vals))


def test_compiled_functions_are_cached():
    b = get("local_sgd_noniid")
    assert b._f_expression is b._f_expression
    assert b.rate() == b.rate()
    assert b._rate_cache  # the default step's rate is cached


def test_describe_is_json_ready_and_complete():
    import json

    for b in (get("sgd"), get("local_sgd_iid"), get("local_sgd_noniid"), get("easgd")):
        d = json.loads(json.dumps(b.describe()))
        assert d["name"] == b.name and d["conditions"] and d["assumptions"]
        assert len(d["terms"]) == len(b.terms)


def test_from_strings_accepts_recommended_step_string():
    b = Bound.from_strings(
        "rec_step_test",
        "2*F0/(alpha*T) + L*alpha*sigma**2",
        ["alpha*L <= 1"],
        recommended_step="sqrt(F0/(L*T))",
    )
    assert b.rate()[0].t_exponent == sp.Rational(-1, 2)
    with pytest.raises(UserInputError, match="unknown (symbols|name)"):
        Bound.from_strings("bad_step", "L*alpha", recommended_step="x/T")


def test_term_values_sum_to_the_bound():
    b = get("local_sgd_noniid")
    vals = dict(F0=1.0, T=1e5, L=2.0, sigma=1.5, K=4, H=16, zeta=0.5, alpha=1e-3)
    total = sum(v for _, v in b.term_values(**vals))
    assert total == pytest.approx(float(b.evaluate(**vals)), rel=1e-12)


def test_benchmark_script_runs_with_tiny_n(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_bounds.py"
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            "--n",
            "500",
            "--n-subs",
            "3",
            "--repeat",
            "1",
            "--no-progress",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert res["n_compiled"] == 500 and res["n_subs"] == 3
    assert res["compiled_evals_per_s"] > 0 and res["subs_evals_per_s"] > 0
    assert res["max_rel_diff"] < 1e-9
    assert "ratio" in proc.stdout


def test_recommended_step_value():
    b = get("local_sgd_iid")  # alpha = sqrt(K/T)/L (Wang-Joshi Cor. 2)
    T = np.array([100.0, 10**4])
    got = b.recommended_step_value(K=4, T=T, L=2.0, sigma=1.0, lr=0.3)
    np.testing.assert_allclose(got, np.sqrt(4 / T) / 2.0)
    assert b.recommended_step_value(K=4, L=2.0) is None  # T missing
    no_step = Bound.from_strings("no_step_test", "F0/(alpha*T) + alpha")
    assert no_step.recommended_step_value(F0=1.0, T=10) is None


@pytest.mark.parametrize("name", ["local_sgd_noniid", "easgd"])
def test_max_H_speedup_agrees_with_the_simplified_rate(name):
    # max_H compiles the rate groups without simplifying them; rate() simplifies for display
    b = get(name)
    vals = dict(L=1.3, sigma=0.8, F0=2.0, K=4, T=10**9, zeta=0.0 if name == "easgd" else 0.5)
    lead, *rest = b.rate()
    H = np.arange(1, 20001)
    subs = {getattr(S, k): v for k, v in vals.items()}
    f_lead = sp.lambdify(S.H, lead.expression.subs(subs), "numpy")
    f_rest = sp.lambdify(S.H, sp.Add(*(r.expression for r in rest)).subs(subs), "numpy")
    ok = f_rest(H) <= 0.5 * f_lead(H)
    got = b.max_H(factor=0.5, h_max=20000, **vals).speedup
    assert got == H[ok].max() and H[ok].max() < 20000

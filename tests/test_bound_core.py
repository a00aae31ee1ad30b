import numpy as np
import pytest
import sympy as sp

from theory import symbols as S
from theory.bound import Bound
from theory.bounds import get, names, register
from theory.validation import UserInputError


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


def test_user_bound_from_strings_gets_every_method():
    b = Bound.from_strings(
        "user_test_bound",
        "4*F0/(alpha*T) + L*alpha*sigma**2/K",
        {"step": "alpha*L <= 1/2"},
        provenance="test",
        recommended_step=sp.sqrt(4 * S.F0 * S.K / (S.L * S.sigma**2 * S.T)),
    )
    register(b, replace=True)
    assert "user_test_bound" in names()
    assert b.max_step(L=2.0) == pytest.approx(0.25)
    assert b.rate()[0].t_exponent == sp.Rational(-1, 2)
    assert np.isfinite(b.rounds_to_eps(0.1, F0=1, L=1, sigma=1, K=2, H=1))


def test_user_bound_rejects_garbage():
    with pytest.raises(UserInputError, match="unknown symbols"):
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

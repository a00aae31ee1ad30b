"""The notebook surface: ``theory.bounds`` after ``import theory``, a callable bound,
``theory.at_optimal_step`` and ``theory.verify_bound``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import theory
from core.errors import UserInputError
from core.validation import ParameterError
from theory.bound import Bound

REF = dict(L=1.0, sigma=1.0, zeta=0.0, F0=1.0, K=4, H=8, T=10_000, p=0.2, eta=0.5)


def test_import_theory_gives_the_registry_lazily():
    code = (
        "import sys, theory; assert 'sympy' not in sys.modules; "
        "b = theory.bounds.get('sgd'); assert 'sympy' in sys.modules; print(b.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sgd"
    with pytest.raises(AttributeError):
        theory.no_such_thing  # noqa: B018


def test_a_bound_is_callable_with_the_same_validation():
    b = theory.bounds.get("palsgd")
    vals = {**REF, "alpha": np.array([0.001, 0.01])}
    np.testing.assert_array_equal(b(**vals), b.evaluate(**vals))
    with pytest.raises(ParameterError, match="sigma"):
        b(**{**vals, "sigma": -1.0})
    with pytest.raises(UserInputError, match="needs parameter"):
        b(alpha=0.01)


def test_at_optimal_step_is_the_optimum_and_its_value():
    b = theory.bounds.get("local_sgd_iid")
    got = theory.at_optimal_step("local_sgd_iid", **{**REF, "H": np.array([1, 8, 64])})
    assert got.alpha.shape == got.value.shape == (3,)
    for i, h in enumerate((1, 8, 64)):
        a = float(b.optimal_step(**{**REF, "H": h}))
        assert got.alpha[i] == a
        assert got.value[i] == float(b(**{**REF, "H": h, "alpha": a}))
    assert theory.at_optimal_step(b, **REF).value == b.at_optimal_step(**REF).value
    # no feasible step: NaN in both
    never = Bound.from_strings("never", "F0/(alpha*T) + alpha*L", ["L <= 0.5"])
    none = never.at_optimal_step(L=np.array([0.25, 1.0]), F0=1.0, T=100)
    assert np.all(np.isfinite([none.alpha[0], none.value[0]]))
    assert np.isnan(none.alpha[1]) and np.isnan(none.value[1])
    with pytest.raises(UserInputError, match="bound name"):
        theory.at_optimal_step(3.0, **REF)


FAST = dict(rates=False, speedup=False, consensus=False, controls=False, exact=False)


def test_verify_bound_rejects_a_wrong_bound_and_leaves_the_registry_alone():
    wrong = Bound.from_strings(
        "sgd_without_noise", "2*F0/(alpha*T)", ["alpha*L <= 1"], algorithm="sgd"
    )
    rep = theory.verify_bound(wrong, search=True, problems=("quadratic",), **FAST)
    assert rep.summary.exact_violated == ["sgd_without_noise"]
    assert rep.summary.exit_code == 1
    assert "sgd_without_noise" not in theory.bounds.names()
    ok = theory.verify_bound("sgd", problems=("quadratic",), **FAST)
    assert ok.summary.exit_code == 0 and ok.summary.exact_violated == []


def test_verify_bound_refuses_bad_settings():
    with pytest.raises(UserInputError, match="no_such_field"):
        theory.verify_bound("sgd", no_such_field=1)
    with pytest.raises(UserInputError, match="bounds"):
        theory.verify_bound("sgd", bounds=("palsgd",))

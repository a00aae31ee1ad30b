"""theory.safe_parse: user formulas are read by a whitelist, never evaluated."""

from __future__ import annotations

import pytest
import sympy as sp

from core.errors import UserInputError
from theory import symbols as S
from theory.bound import Bound
from theory.safe_parse import parse_condition, parse_formula


def test_formula_in_project_symbols():
    e = parse_formula("2*F0/(alpha*T) + L*alpha*sigma**2/K")
    assert sp.simplify(e - (2 * S.F0 / (S.alpha * S.T) + S.L * S.alpha * S.sigma**2 / S.K)) == 0
    e = parse_formula("max(L, sqrt(eta)) + log(T)/T + Abs(p - 1/2) + exp(-H) + L^2")
    assert e.has(sp.Max) and e.has(sp.log) and e.has(sp.Abs) and S.L**2 in e.args


def test_condition():
    c = parse_condition("alpha * L <= 1")
    assert isinstance(c, sp.Le) and c.lhs == S.alpha * S.L
    assert isinstance(parse_condition("H >= 1"), sp.Ge)


@pytest.mark.parametrize(
    "text, named",
    [
        ("__import__('os').system('touch /tmp/palsgd_pwned')", "__import__"),
        ("L.__class__", "L.__class__"),
        ("(lambda: 1)()", "lambda"),
        ("[1][0]", "[1][0]"),
        ("x + L", "'x'"),
        ("'a' + L", "'a'"),
        ("F0 if L else T", "F0 if L else T"),
        ("sqrt(L, k=1)", "sqrt(L, k=1)"),
        ("open('f')", "open"),
        ("10**10**10", "larger than 64"),
        ("L +", "cannot parse"),
        ("L <= 1", "comparison"),
    ],
)
def test_refused_with_the_token_named(text, named, tmp_path):
    with pytest.raises(UserInputError) as exc:
        parse_formula(text)
    assert named in str(exc.value)
    assert not (tmp_path / "palsgd_pwned").exists()


def test_bound_from_strings_never_executes(tmp_path):
    target = tmp_path / "pwned"
    with pytest.raises(UserInputError, match="not allowed"):
        Bound.from_strings("evil", f"__import__('os').system('touch {target}')")
    with pytest.raises(UserInputError, match="not allowed"):
        Bound.from_strings("evil", "L", [f"__import__('os').system('touch {target}') <= 1"])
    assert not target.exists()


@pytest.mark.parametrize("text", ["L = 1", "alpha*L <= 1 <= 2", "L", "L == 1"])
def test_bad_conditions(text):
    with pytest.raises(UserInputError):
        parse_condition(text)

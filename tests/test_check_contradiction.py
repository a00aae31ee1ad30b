"""``palsgd check``: an upper bound below a lower bound where both apply is a contradiction
(theory.check.contradiction): the verdict names both, says at least one is false, does not
call the run covered, and the command exits with code 5 (core.exitcodes.CONTRADICTION)."""

from __future__ import annotations

import json

import pytest

from core import exitcodes
from palsgd.cli import main
from theory import lower as lower_registry
from theory.bound import Bound
from theory.bounds import registered
from theory.check import check
from theory.lower.quadratic import ClosedFormLowerBound, quadratic_lower

#: the descent-lemma point: alpha = 1/L, sigma = 0, T = 10; sgd and the quadratic lower
#: bound are both exactly 2 L F0/T = 0.2 there
TIGHT = {"L": 1.0, "sigma": 0.0, "F0": 1.0, "K": 1, "T": 10, "alpha": 1.0}
FLAGS = ["--L", "1", "--sigma", "0", "--F0", "1", "--K", "1", "--T", "10", "--lr", "1"]


@pytest.fixture()
def doubled_lower(monkeypatch):
    """The quadratic lower bound x 2 (false), registered for one test."""
    lb = ClosedFormLowerBound(
        name="quadratic_lower_x2",
        title="negative control: the quadratic lower bound x 2",
        provenance="a false statement for the test",
        algorithms=("sgd", "local_sgd"),
        parameters=("alpha", "L", "sigma", "K", "T", "F0"),
        formula=lambda **v: 2 * quadratic_lower(**v),
        attained_on="quadratic",
    )
    monkeypatch.setitem(lower_registry._LOWER, lb.name, lb)
    return lb


def test_tight_bounds_do_not_contradict():
    rep = check(TIGHT)
    assert rep.verdict_code == "covered"
    assert main(["check", *FLAGS]) == exitcodes.OK


def test_a_false_lower_bound_against_a_true_upper_bound(doubled_lower, capsys):
    """The case of the issue: the tight sgd bound is not called false and the run is not
    called covered; both are named and the command exits 5."""
    rep = check(TIGHT)
    assert rep.verdict_code == "contradiction"
    assert "covered" not in rep.verdict.split(":")[0]
    assert "sgd" in rep.verdict and doubled_lower.name in rep.verdict
    assert "at least one of them is false" in rep.verdict
    assert main(["check", *FLAGS]) == exitcodes.CONTRADICTION == 5
    out = capsys.readouterr().out
    assert out.startswith("verdict: contradiction:")
    assert "the bound is false" not in out
    assert main(["check", *FLAGS, "--verbose"]) == 5
    out = capsys.readouterr().out
    assert out.startswith("verdict: contradiction:")
    assert "the bound is false" not in out
    assert "CONTRADICTION: this bound is below it, so at least one of the two is false" in out
    assert main(["check", *FLAGS, "--json"]) == 5
    assert json.loads(capsys.readouterr().out)["verdict_code"] == "contradiction"


def test_a_false_upper_bound_against_a_true_lower_bound(capsys):
    half = Bound.from_strings(
        "sgd_half", "(2*F0/(alpha*T) + L*alpha*sigma**2/K)/2", ["alpha*L <= 1"],
        provenance="a negative control: sgd halved", algorithm="sgd",
    )  # fmt: skip
    with registered(half):
        assert main(["check", *FLAGS, "--bound", "sgd_half", "--bound", "sgd"]) == 5
    verdict = capsys.readouterr().out.splitlines()[0]
    assert "sgd_half" in verdict and "local_sgd_quadratic_lower" in verdict
    assert "palsgd verify --bounds sgd_half local_sgd_quadratic_lower" in verdict


def test_no_contradiction_where_the_conditions_fail():
    """Outside the upper bound's conditions it claims nothing: no contradiction."""
    half = Bound.from_strings(
        "sgd_half", "(2*F0/(alpha*T) + L*alpha*sigma**2/K)/2", ["alpha*L <= 0.5"],
        provenance="a negative control", algorithm="sgd",
    )  # fmt: skip
    rep = check(TIGHT, bounds=[half])
    assert rep.verdict_code == "conditions_fail"


def test_the_exit_code_is_documented():
    assert exitcodes.TABLE[exitcodes.CONTRADICTION][0] == "contradiction"
    assert exitcodes.describe(5) == "5 (contradiction)"

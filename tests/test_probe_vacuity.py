"""Vacuity where a bound meets a run (:mod:`theory.check.vacuity`, the probe's comparison).

A constructed case for each reason (the bound above the run's own starting
``||grad f(x0)||^2``; one term over 99% of the bound; an infinite bound), a non-vacuous
case, and the probe's report: a vacuous comparison reads ``vacuous (reason)``, never
covered, on the checker's verdict and on each bound's line.
"""

from __future__ import annotations

import math

import pytest

import empirical.probe as P
from theory.check import TermShare, check
from theory.check.vacuity import DOMINANCE, vacuity

#: the constants the default ``palsgd probe`` measured (issue 30): L 30.8, sigma^2 0.53,
#: zeta^2 0, F0 5.53, K 2, T 48 at alpha 0.004, PALSGD H 2, p 0.2, eta 1
DEFAULT_PROBE = {
    "L": 30.8,
    "sigma": math.sqrt(0.53),
    "zeta": 0.0,
    "F0": 5.53,
    "K": 2,
    "T": 48,
    "alpha": 0.004,
    "H": 2,
    "gamma": 1.0,
    "mu": 0.0,
    "p": 0.2,
    "eta": 1.0,
}
#: the same constants and step over a run long enough for the bound to say something
#: (``palsgd probe --steps 2000``): T 2000, bound 2.88, below the untrained model's
#: ||grad f(x0)||^2 of 3.31, its initial-gap term under 99% of it
LONG_RUN = {**DEFAULT_PROBE, "T": 2000}


def _terms(*values: float) -> list[TermShare]:
    total = sum(values)
    return [TermShare(f"t{i}", v, 100 * v / total) for i, v in enumerate(values)]


def test_bound_above_the_starting_gradient_is_vacuous():
    v = vacuity(10.0, _terms(5.0, 5.0), start_grad_sq=4.0)
    assert v.vacuous and [r.code for r in v.reasons] == ["start"]
    assert v.label.startswith("vacuous (the bound 10 is 2.5x the run's own starting")
    # just below the starting value it can say something
    assert not vacuity(3.99, _terms(2.0, 1.99), start_grad_sq=4.0).vacuous


def test_one_dominant_term_is_vacuous():
    v = vacuity(1.0, _terms(0.995, 0.005), start_grad_sq=100.0)
    assert [r.code for r in v.reasons] == ["dominant"]
    assert v.top_term == "t0" and v.top_share == pytest.approx(0.995)
    assert "99.5% of it" in v.label
    # at the threshold itself it is not (strictly more than 99%)
    assert not vacuity(1.0, _terms(DOMINANCE, 1 - DOMINANCE), start_grad_sq=100.0).vacuous


def test_infinite_bound_is_vacuous():
    v = vacuity(math.inf, _terms(1.0), start_grad_sq=1.0)
    assert [r.code for r in v.reasons] == ["infinite"]
    assert vacuity(0.0, (), None).reasons[0].code == "infinite"


def test_balanced_bound_below_the_start_is_informative():
    v = vacuity(2.0, _terms(1.2, 0.8), start_grad_sq=3.0)
    assert not v.vacuous and v.label == "informative" and v.reasons == ()
    # without a measured start only the term shares are tested
    assert not vacuity(2.0, _terms(1.2, 0.8), None).vacuous


def test_the_default_probe_is_vacuous_for_both_reasons():
    b = check(dict(DEFAULT_PROBE), algorithm="palsgd").bound("palsgd")
    v = vacuity(b.value, b.terms, start_grad_sq=3.31)
    assert {r.code for r in v.reasons} == {"dominant", "start"}
    assert v.top_term == "4*F0/(T*alpha)" and v.top_share > 0.998


def test_probe_comparison_reports_vacuous_never_covered():
    out = P.compare_with_theory(DEFAULT_PROBE, 2.235, algorithm="palsgd", start_grad_sq=3.31)
    assert out["verdict_code"] == "vacuous"
    assert out["verdict"].startswith("vacuous (")
    assert "covered" not in out["text"].splitlines()[0]
    c = {x["bound"]: x for x in out["comparison"]}["palsgd"]
    assert c["verdict"].startswith("vacuous (") and c["vacuity"]["vacuous"]
    assert {r["code"] for r in c["vacuity"]["reasons"]} == {"dominant", "start"}
    # a measurement above even a vacuous bound is still a finding, not "vacuous"
    above = P.compare_with_theory(DEFAULT_PROBE, 200.0, algorithm="palsgd", start_grad_sq=3.31)
    c2 = {x["bound"]: x for x in above["comparison"]}["palsgd"]
    assert "ABOVE" in c2["verdict"]


def test_probe_comparison_on_a_long_run_is_informative():
    out = P.compare_with_theory(LONG_RUN, 0.9, algorithm="palsgd", start_grad_sq=3.31)
    assert out["verdict_code"] == "covered"
    c = {x["bound"]: x for x in out["comparison"]}["palsgd"]
    assert c["conditions_hold"] and 0.9 < c["value"] < 3.31
    assert c["vacuity"]["vacuous"] is False and c["vacuity"]["top_share"] < DOMINANCE
    assert c["verdict"] == "measured below the bound"


def test_render_shows_the_vacuous_verdict():
    from empirical.probe.report import _render_theory

    out = P.compare_with_theory(DEFAULT_PROBE, 2.235, algorithm="palsgd", start_grad_sq=3.31)
    text = "\n".join(_render_theory({"inside_theory": True, "outside": [], **out}))
    assert "verdict: vacuous (" in text and "verdict: covered" not in text
    assert "palsgd: bound 115.3, measured 2.235" in text

"""Lower bounds as statements ``palsgd verify`` can refute (theory.verify.lower): the
registered ones pass, their independent exact witnesses agree with them, their negative
controls (x 1.5, x 2, a term removed) are rejected, and a false lower bound is flagged and
blamed correctly when it contradicts a true upper bound."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from palsgd.cli import main
from theory import lower as lower_registry
from theory.lower import get_lower, lower_bounds
from theory.lower.quadratic import ClosedFormLowerBound, quadratic_lower
from theory.verify.controls import power
from theory.verify.lower import (
    KNOWN,
    OWN,
    ScaledLower,
    at,
    attained,
    controls_of,
    evaluate_claims,
    judge,
    verify_lower,
)
from theory.verify.lower_designs import designs

QUAD, HET = "local_sgd_quadratic_lower", "local_sgd_heterogeneity_lower"


@pytest.fixture(scope="module")
def checked():
    """Each registered lower bound verified once (half size): result, designs, attained."""
    return {lb.name: verify_lower(lb, seed=4, scale=0.5, rounds=1) for lb in lower_bounds()}


@pytest.mark.parametrize("name", [QUAD, HET])
def test_registered_lower_bounds_are_not_shown_false(checked, name):
    res, ds, _ = checked[name]
    assert res.verdict == "not shown false" and res.inside > 10
    # the claim equals what its own instances attain, computed by other code
    assert res.worst_ratio == pytest.approx(1.0, abs=1e-8)


def test_the_two_curvature_witness_is_the_bound_on_random_designs():
    """Step-by-step moments and an interval region of their own against the lower bound's
    round maps: every outer optimiser, both coin modes, iterates and anchors, overshooting
    pulls (alpha eta/p > 1) included."""
    lb = get_lower(HET)
    ds = designs("two_curvature", np.random.default_rng(7), 24)
    ds.append(
        dict(
            alpha=0.135,
            L=0.963,
            zeta=1.87,
            K=8,
            H=24,
            T=300,
            p=0.65,
            eta=5.2,
            sigma=0.0,
            F0=0.0,
            gamma=0.76,
            mu=0.29,
            outer="sgd",
            measured="anchors",
            coins="independent",
        )  # fmt: skip
    )  # alpha eta/p = 1.08: the pull overshoots
    assert {d["coins"] for d in ds} == {"independent", "shared"}
    assert {d["outer"] for d in ds} == {"average", "sgd", "nesterov"}
    claimed = evaluate_claims(lb, ds)
    own, _ = attained(lb, ds)
    np.testing.assert_allclose(claimed, own, rtol=1e-8, atol=1e-18)  # zeta^2 ~ 1
    assert np.sum(own > 0) > 15


def test_descent_lemma_design_refutes_the_quadratic_lower_bound_x2(capsys):
    """alpha = 1/L, sigma = 0, T = 10: every L-smooth run has (1/T) sum ||grad f||^2 <=
    2 L F0/T (the descent lemma), attained by the quadratic: x 2 is refuted by both."""
    d = dict(alpha=1.0, L=1.0, F0=1.0, T=10)
    true = at(QUAD, **d)
    assert true["claimed"] == pytest.approx(0.2) and true["known_worst_case"] == pytest.approx(0.2)
    assert not true["violated"]
    out = at(f"{QUAD}~scaled[2]", **d)
    assert out["violated"] and out["ratio"] == pytest.approx(2.0)
    assert out["refuted_by"] == f"{OWN} and {KNOWN}"
    assert "VIOLATED" in capsys.readouterr().out


@pytest.mark.parametrize("name", [QUAD, HET])
def test_controls_are_rejected_and_counted_as_lower(checked, name):
    """x 1.5, x 2 and the term removed (the noise transient of the quadratic form; the
    region's share of the heterogeneity budget of the instances) are all rejected."""
    lb = get_lower(name)
    res, ds, (own, known) = checked[name]
    ctrls = controls_of(lb, ds)
    assert [c.kind for c in ctrls] == ["scaled", "scaled", "removed"]
    for c in ctrls:
        c.result = judge(c.bound, ds, own, known)
    assert all(c.status == "rejected" for c in ctrls), [c.result for c in ctrls]
    pw = power(ctrls)
    assert pw["by_kind"] == {"lower": {"controls": 3, "rejected": 3, "power": 1.0}}


def test_removing_a_nonnegative_term_is_no_control():
    """A lower bound without a nonnegative term is weaker, not false: only the negative
    term (the noise transient) gives a control."""
    lb = get_lower(QUAD)
    removed = [c for c in controls_of(lb) if c.kind == "removed"]
    assert [c.term for c in removed] == [lb.terms[2][0]]
    weaker = ScaledLower(lb, "weaker", drop=0)
    ds = designs("quadratic", np.random.default_rng(1), 64)
    own, known = attained(lb, ds)
    assert judge(weaker, ds, own, known).verdict == "not shown false"


@pytest.fixture()
def doubled(monkeypatch):
    """A false lower bound, the quadratic one x 2, registered for one test."""
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


def test_a_false_lower_bound_is_flagged_and_the_contradiction_blames_it(doubled, tmp_path):
    """x 2 of the quadratic lower bound is refuted, and against the true, tight sgd bound
    the contradiction is settled against the lower bound, not the upper."""
    out = tmp_path / "r"
    argv = ["verify", "--bounds", "sgd", doubled.name, "--controls", "--quick"]
    assert main([*argv, "--out", str(out), "--no-progress", "--no-plots"]) == 1
    rep = json.loads((out / "results.json").read_text())
    assert rep["summary"]["new_violations"] == [doubled.name]
    assert [r["verdict"] for r in rep["lower"]] == ["violated"]
    (c,) = rep["crossings"]
    assert (c["upper"], c["lower"], c["refuted"]) == ("sgd", doubled.name, doubled.name)
    assert c["upper_refuted_at"] == 0
    assert (
        "CONTRADICTION: sgd (upper) is below quadratic_lower_x2"
        in (out / "summary.txt").read_text()
    )


def test_cli_lower_bound_alone(tmp_path, capsys):
    """``palsgd verify --bounds local_sgd_quadratic_lower`` runs, exits 0, writes lower.csv
    with its reproduce command, and the command works."""
    out = tmp_path / "q"
    argv = ["verify", "--bounds", QUAD, "--quick", "--out", str(out), "--no-progress"]
    assert main([*argv, "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "lower bounds" in text and "result: no bound violated (exit code 0)" in text
    (row,) = list(csv.DictReader((out / "lower.csv").open()))
    assert row["bound"] == QUAD and row["verdict"] == "not shown false"
    at_text = row["worst_command"].split("--at ", 1)[1].strip("'")
    assert main(["verify", "--bounds", QUAD, "--at", at_text]) == 0
    assert main(["verify", "--bounds", HET, "--at", "alpha=0.1 L=1 zeta=1 K=4 H=8 T=64"]) == 0
    assert main(["verify", "--bounds", QUAD, "--at", "alpha=1 L=1 nope=3 T=2"]) == 2

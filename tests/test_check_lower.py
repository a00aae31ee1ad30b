"""``palsgd check`` shows the lower bounds beside each upper bound (theory.check.lower)."""

from __future__ import annotations

import json

import pytest

from palsgd.cli import main
from theory.bound import Bound
from theory.check import check
from theory.lower import get_lower

LOCAL = dict(L=1.0, sigma=1.0, zeta=1.0, F0=10.0, K=4, H=32, T=10_000, alpha=0.01)
HET, QUAD = "local_sgd_heterogeneity_lower", "local_sgd_quadratic_lower"


def _lower(bound_check):
    return {lo.name: lo for lo in bound_check.lower_bounds}


def test_local_sgd_bounds_carry_both_lower_bounds_at_their_alpha():
    rep = check(LOCAL)
    b = rep.bound("local_sgd_noniid")
    lows = _lower(b)
    assert set(lows) == {HET, QUAD}
    args = {k: v for k, v in LOCAL.items() if k not in ("sigma", "F0")}
    assert lows[HET].value == pytest.approx(get_lower(HET).evaluate(**args))
    quad = get_lower(QUAD).evaluate(**{k: v for k, v in LOCAL.items() if k != "zeta"})
    assert lows[QUAD].value == pytest.approx(float(quad))
    assert b.value >= max(lo.value for lo in lows.values()) > 0


def test_an_outer_optimiser_keeps_only_the_heterogeneity_lower_bound_at_the_anchors():
    """local_sgd_outer averages the anchors: the quadratic lower bound (iterates) is listed
    as not comparable, the heterogeneity one is taken at the anchors."""
    rep = check({**LOCAL, "gamma": 0.7, "mu": 0.9})
    b = rep.bound("local_sgd_outer")
    lows = _lower(b)
    assert set(lows) == {HET}
    lb = get_lower(HET)
    args = {k: v for k, v in LOCAL.items() if k not in ("sigma", "F0")}
    both = [
        lb.evaluate(**args, gamma=0.7, mu=0.9, outer=o, measured="anchors")
        for o in ("sgd", "nesterov")
    ]
    assert lows[HET].value == pytest.approx(min(both))
    local = _lower(check(LOCAL, bounds=["local_sgd_outer"]).bound("local_sgd_outer"))
    assert local[QUAD].value is None and "anchors" in local[QUAD].reason
    assert local[HET].value == pytest.approx(lb.evaluate(**args, measured="anchors"))


def test_palsgd_configuration_gets_the_coin_version():
    rep = check({**LOCAL, "p": 0.2, "eta": 2.0})
    lows = _lower(rep.bound("palsgd"))
    assert set(lows) == {HET} and lows[HET].value > 0


def test_a_false_bound_is_flagged_below_the_lower_bound():
    """A bound without any heterogeneity term, checked at a heterogeneous configuration."""
    false = Bound.from_strings(
        "no_drift", "2*F0/(alpha*T) + alpha*L*sigma**2/K", ["alpha*L <= 1"],
        provenance="a negative control", algorithm="local_sgd",
    )  # fmt: skip
    rep = check({**LOCAL, "sigma": 0.0, "F0": 1e-6, "zeta": 3.0}, bounds=[false])
    text = rep.to_text()
    assert "CONTRADICTION: this bound is below it" in text
    assert rep.verdict_code == "contradiction" and "no_drift" in rep.verdict


def test_cli_prints_and_writes_them(capsys):
    flags = [f"--{k}={v}" for k, v in LOCAL.items()]
    assert main(["check", *flags, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "lower bounds at alpha = 0.01" in out and HET in out and QUAD in out
    assert main(["check", *flags, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    b = next(x for x in data["bounds"] if x["name"] == "local_sgd_noniid")
    assert {lo["name"] for lo in b["lower_bounds"]} == {HET, QUAD}

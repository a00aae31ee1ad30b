"""The verifier's heterogeneous instances (theory.verify.hetero): registered bounds are not
shown false, false ones are rejected, and the controls use them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from theory import bounds as registry
from theory import symbols as S
from theory.validation import UserInputError
from theory.verify.controls import controls_of
from theory.verify.hetero import VIOLATED, applies, at, judge, verify_hetero
from theory.verify.run import _hetero_stage
from theory.verify.settings import VerifySettings

HETERO = [
    "local_sgd_noniid", "local_sgd_ours", "local_sgd_outer", "palsgd", "palsgd_outer",
    "palsgd_pull_aware",
]  # fmt: skip


def test_it_covers_exactly_the_heterogeneous_independent_coin_bounds():
    covered = sorted(b.name for b in registry.all_bounds() if applies(b))
    assert covered == sorted(HETERO)


@pytest.fixture(scope="module")
def checked():
    """Each covered bound checked once at the default size: result, designs, exact values."""
    return {name: verify_hetero(registry.get(name), seed=5) for name in HETERO}


@pytest.mark.parametrize("name", HETERO)
def test_registered_bounds_are_not_shown_false(checked, name):
    res, _, _ = checked[name]
    assert res.inside > 0 and res.verdict != VIOLATED
    assert 0 < res.worst_ratio < 1


@pytest.mark.parametrize("name", HETERO)
@pytest.mark.parametrize("how", ["zeta removed", "x 1e-3"])
def test_false_bounds_are_rejected(checked, name, how):
    """Negative controls: the bound without its heterogeneity (zeta = 0 in the formula),
    and the bound x 1e-3, are violated on the same designs."""
    b = registry.get(name)
    expr = b.expression.subs(S.zeta, 0) if how == "zeta removed" else b.expression * 1e-3
    false = dataclasses.replace(b, name=f"{name}~{how}", expression=expr)
    _, designs, lower = checked[name]
    assert judge(false, designs, lower).verdict == VIOLATED


def test_controls_are_rejected_by_the_instances():
    b = registry.get("local_sgd_noniid")
    ctrls = controls_of(b)
    _hetero_stage(b, ctrls, VerifySettings(quick=True), seed=2)
    by = {c.bound.name: c.hetero.verdict for c in ctrls}
    zeta_terms = [c for c in ctrls if c.kind == "removed" and "zeta" in (c.term or "")]
    assert zeta_terms and all(by[c.bound.name] == VIOLATED for c in zeta_terms)
    scaled = next(c for c in ctrls if c.kind == "scaled")
    assert by[scaled.bound.name] != VIOLATED  # the bound is loose here by far more than 0.9


def test_at_reproduces_the_worst_design(checked, capsys):
    res, _, _ = checked["palsgd"]
    out = at("palsgd", **res.worst_design)
    assert out["ratio"] == pytest.approx(res.worst_ratio, rel=1e-9)
    assert "palsgd: exact" in capsys.readouterr().out
    ctrl = controls_of(registry.get("palsgd"))[0].bound.name
    assert np.isfinite(at(ctrl, **res.worst_design)["ratio"])


def test_at_refuses_unknown_names_and_missing_values(checked):
    res, _, _ = checked["palsgd"]
    with pytest.raises(UserInputError, match="control"):
        at("palsgd~nope", **res.worst_design)
    with pytest.raises(UserInputError, match="missing"):
        at("palsgd", L=1.0)
    outside = {**res.worst_design, "alpha": 1e3}
    assert at("palsgd", **outside)["inside"] is False

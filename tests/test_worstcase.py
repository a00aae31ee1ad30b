"""The class oracle (theory.worstcase): closed forms, an independent PEP, instances below it,
K-independence of the compact relaxation, lifts, verdicts and their negative controls."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from core.errors import UserInputError
from theory import bounds
from theory.lower import get_lower
from theory.worstcase import design_of, worst_case
from theory.worstcase.judge import CERTIFIED, CONSISTENT, OUTSIDE, REFUTED, judge_lower, judge_upper
from theory.worstcase.lift import lift, signs
from theory.worstcase.pep import solve

sys.path.insert(0, str(Path(__file__).parent))
from pep_reference import local_sgd_worst  # noqa: E402


@pytest.mark.parametrize("T", [1, 3, 5])
@pytest.mark.parametrize(("L", "F0"), [(1.0, 1.0), (4.0, 0.5)])
def test_gradient_descent_at_one_over_L_is_tight(T, L, F0):
    wc = worst_case("sgd", K=1, T=T, L=L, alpha=1.0 / L, zeta=0.0, F0=F0)
    assert wc.value == pytest.approx(2 * L * F0 / T, rel=1e-5)
    assert wc.ok and wc.dual_residual < 1e-6


@pytest.mark.parametrize(
    "case",
    [
        dict(K=2, H=2, R=2, L=1.0, alpha=0.1, zeta=1.0, F0=1.0, measured="anchors"),
        # 9-11 s each on two cores: under -m slow
        pytest.param(dict(K=2, H=3, R=2, L=2.0, alpha=0.07, zeta=0.5, F0=3.0,
                          measured="iterates"), marks=pytest.mark.slow),
        pytest.param(dict(K=2, H=2, R=3, L=0.5, alpha=0.9, zeta=2.0, F0=0.7,
                          measured="anchors"), marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_local_sgd_agrees_with_an_independent_pep(case):
    ours = worst_case("local_sgd", **case).value
    ref = local_sgd_worst(**case)
    assert ours == pytest.approx(ref, rel=1e-2)


def test_minibatch_sgd_agrees_with_an_independent_pep():
    ours = worst_case("sgd", K=2, T=5, L=1.5, alpha=0.4, zeta=1.0, F0=2.0).value
    ref = local_sgd_worst(K=2, H=1, R=5, L=1.5, alpha=0.4, zeta=1.0, F0=2.0, minibatch=True)
    assert ours == pytest.approx(ref, rel=1e-2)


def test_the_class_is_never_below_an_instance():
    """The exact values of the toolkit's own instances (theory.lower) are below the class."""
    hetero = get_lower("local_sgd_heterogeneity_lower")
    quad = get_lower("local_sgd_quadratic_lower")
    for alpha, H, T in [(0.2, 2, 4), (0.5, 3, 6), (0.05, 2, 6)]:
        wc = worst_case("local_sgd", K=2, H=H, T=T, L=1.0, alpha=alpha, zeta=1.0, F0=1e-12)
        inst = float(np.asarray(hetero.evaluate(alpha=alpha, L=1.0, zeta=1.0, K=2, H=H, T=T)))
        assert 0 < inst <= wc.value * (1 + 1e-5)
        wq = worst_case("sgd", K=1, T=T, L=1.0, alpha=alpha, zeta=0.0, F0=1.0)
        q = float(np.asarray(quad.evaluate(alpha=alpha, L=1.0, sigma=0.0, K=1, T=T, F0=1.0)))
        assert 0 < q <= wq.value * (1 + 1e-5)


@pytest.mark.parametrize(
    ("algorithm", "params"),
    [
        ("local_sgd", dict(H=2, T=4)),
        ("diloco", dict(H=2, T=4, outer="nesterov", gamma=0.7, mu=0.9)),
        ("palsgd", dict(H=2, T=3, p=0.3, eta=2.0, coins="shared")),
    ],
)
def test_compact_relaxation_is_the_same_for_every_K(algorithm, params):
    kw = dict(L=1.0, alpha=0.2, zeta=1.0, F0=1.0, relaxation="compact", **params)
    v2 = worst_case(algorithm, K=2, **kw).value
    v3 = worst_case(algorithm, K=3, **kw).value
    full = worst_case(algorithm, K=2, **{**kw, "relaxation": "full"}).value
    assert v3 == pytest.approx(v2, rel=1e-4)
    assert full <= v2 * (1 + 1e-5)  # more constraints: never above


def test_the_lift_is_an_explicit_instance_below_the_class():
    d = design_of("local_sgd", K=2, H=2, R=2, L=1.0, alpha=0.1, zeta=1.0, F0=1.0,
                  measured="anchors")  # fmt: skip
    w = solve(d).value
    lf = lift(d)
    assert lf.value is not None and lf.value <= w * (1 + 1e-6)
    assert lf.value >= 0.99 * w  # the one-dimensional family attains the class to 1%
    assert lf.checks["max_curvature"] <= 1.0 + 1e-9
    assert lf.checks["f(x0) - inf f"] <= lf.checks["F0"] + 1e-9
    s = signs(3)
    assert abs(s.mean()) < 1e-12 and np.mean(s**2) == pytest.approx(1.0)


def test_the_lift_stops_at_the_first_instance_above_its_target():
    d = design_of("local_sgd", K=2, H=2, R=2, L=1.0, alpha=0.1, zeta=1.0, F0=1.0,
                  measured="anchors")  # fmt: skip
    full = lift(d, starts=2)
    assert full.starts == 2 and full.value is not None
    early = lift(d, starts=2, target=0.5 * full.value)
    assert early.value is not None and early.value > 0.5 * full.value
    assert early.starts < 2  # the search ended once an instance was above the target


def test_a_true_bound_is_certified_and_its_controls_refuted():
    sgd = bounds.get("sgd")
    d = design_of("sgd", K=2, T=4, L=1.0, alpha=1.0, zeta=0.0, F0=1.0)
    v = judge_upper(sgd, d)
    assert v.verdict == CERTIFIED and v.tightness == pytest.approx(1.0, rel=1e-4)
    from theory.verify.controls import controls_of

    scaled = [c for c in controls_of(sgd) if c.kind == "scaled"][0].bound
    bad = judge_upper(scaled, d)
    assert bad.verdict == REFUTED and bad.lifted > bad.bound_value


def test_a_design_outside_the_conditions_is_not_judged():
    sgd = bounds.get("sgd")
    d = design_of("sgd", K=2, T=4, L=1.0, alpha=1.5, zeta=0.0, F0=1.0)
    assert judge_upper(sgd, d).verdict == OUTSIDE


def test_a_lower_bound_above_the_class_is_refuted():
    quad = get_lower("local_sgd_quadratic_lower")
    d = design_of("sgd", K=1, T=4, L=1.0, alpha=0.5, zeta=0.0, F0=1.0)
    assert judge_lower(quad, d).verdict == CONSISTENT

    class Inflated:
        name, kind, algorithms = "inflated", "lower", ("sgd",)
        parameters = quad.parameters

        def evaluate(self, **kw):
            return 3.0 * np.asarray(quad.evaluate(**kw))

    assert judge_lower(Inflated(), d).verdict == REFUTED


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(algorithm="easgd", K=2, H=2, T=4), "elastic"),
        (dict(algorithm="local_sgd", K=2, H=2, T=5, measured="anchors"), "multiple of H"),
        (dict(algorithm="palsgd", K=2, H=2, T=8, p=0.5, eta=1.0), "coin paths"),
        (dict(algorithm="local_sgd", K=2, H=2), "exactly one"),
        (dict(algorithm="local_sgd", K=0, H=2, T=4), "'K'"),
    ],
)
def test_bad_designs_are_refused_naming_the_cause(kwargs, needle):
    kwargs = {"L": 1.0, "alpha": 0.1, "zeta": 1.0, "F0": 1.0, **kwargs}
    algorithm = kwargs.pop("algorithm")
    with pytest.raises(UserInputError, match=needle):
        design_of(algorithm, **kwargs)

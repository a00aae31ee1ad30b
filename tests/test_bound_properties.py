"""Property tests (hypothesis) of the encoded baseline bounds.

Sanity properties every bound on E||grad f||^2 must have (theory plan, "Sanity properties"):
non-decreasing in sigma, L, F0 (and zeta); non-increasing in T; each condition, if it holds
at a step alpha, holds at every smaller step; invalid parameters are rejected with a
ParameterError naming the parameter; optimal_step returns a feasible step no worse than a
dense grid search.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.validation import ParameterError
from theory.bounds.easgd import EASGD
from theory.bounds.local_sgd import LOCAL_SGD_IID, LOCAL_SGD_NONIID
from theory.bounds.sgd import SGD

BOUNDS = [SGD, LOCAL_SGD_IID, LOCAL_SGD_NONIID, EASGD]
IDS = [b.name for b in BOUNDS]
PROFILE = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def log_uniform(lo: float, hi: float):
    return st.floats(np.log10(lo), np.log10(hi)).map(lambda e: float(10.0**e))


configs = st.fixed_dictionaries(
    {
        "L": log_uniform(1e-3, 1e3),
        "sigma": st.one_of(st.just(0.0), log_uniform(1e-3, 1e2)),
        "zeta": st.one_of(st.just(0.0), log_uniform(1e-3, 1e2)),
        "F0": st.one_of(st.just(0.0), log_uniform(1e-3, 1e3)),
        "K": st.integers(1, 512),
        "H": st.integers(1, 2000),
        "T": st.integers(1, 10**9),
        "alpha": log_uniform(1e-9, 10.0),
    }
)
scale = st.floats(1.0, 1e3)


def value(bound, cfg):
    return float(bound.evaluate(**cfg))


def no_smaller(after: float, before: float) -> bool:
    return after >= before * (1 - 1e-12)


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@PROFILE
@given(cfg=configs, factor=scale, name=st.sampled_from(["sigma", "L", "F0", "zeta"]))
def test_non_decreasing_in_constants(bound, cfg, factor, name):
    bigger = {**cfg, name: cfg[name] * factor if cfg[name] > 0 else factor - 1.0}
    assert no_smaller(value(bound, bigger), value(bound, cfg))


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@PROFILE
@given(cfg=configs, factor=scale)
def test_non_increasing_in_T(bound, cfg, factor):
    longer = {**cfg, "T": int(np.ceil(cfg["T"] * factor))}
    assert no_smaller(value(bound, cfg), value(bound, longer))


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@PROFILE
@given(cfg=configs, shrink=st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=8))
def test_conditions_monotone_in_alpha(bound, cfg, shrink):
    for rep_big in bound.condition_report(**cfg):
        if not rep_big.holds:
            continue
        smaller = {**cfg, "alpha": cfg["alpha"] * np.asarray(shrink)}
        rep = {r.name: r for r in bound.condition_report(**smaller)}[rep_big.name]
        assert rep.holds.all(), (rep_big.name, cfg, shrink)


INVALID = {
    "L": [0.0, -1.0, float("nan"), float("inf")],
    "sigma": [-1e-3, float("nan")],
    "zeta": [-0.5],
    "F0": [-1.0],
    "K": [0, 2.5, -3],
    "H": [0, 1.5],
    "T": [0, 10.25],
    "alpha": [0.0, -1e-3, float("inf")],
}


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@PROFILE
@given(cfg=configs, data=st.data())
def test_invalid_parameters_are_rejected_by_name(bound, cfg, data):
    name = data.draw(st.sampled_from(sorted(set(bound.parameters) & set(INVALID))))
    bad = data.draw(st.sampled_from(INVALID[name]))
    as_array = data.draw(st.booleans())
    val = np.array([cfg[name], bad]) if as_array else bad
    for method in (bound.evaluate, bound.condition_report, bound.optimal_step, bound.max_step):
        if method in (bound.optimal_step, bound.max_step) and name == "alpha":
            continue
        with pytest.raises(ParameterError, match=f"'{name}'"):
            method(**{**cfg, name: val})


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(cfg=configs)
def test_optimal_step_is_feasible_and_beats_a_grid(bound, cfg):
    base = {k: v for k, v in cfg.items() if k != "alpha"}
    amax = float(bound.max_step(**base))
    best = float(bound.optimal_step(**base))
    assert np.isfinite(amax) and 0 < best <= amax * (1 + 1e-12)
    assert bound.conditions_hold(**base, alpha=best)
    grid = amax * np.logspace(-8, 0, 801)
    ok = bound.conditions_hold(**base, alpha=grid)
    assert ok.all()  # the feasible set is (0, amax]
    grid_best = bound.evaluate(**base, alpha=grid).min()
    assert float(bound.evaluate(**base, alpha=best)) <= grid_best * (1 + 1e-9)


@pytest.mark.parametrize("bound", BOUNDS, ids=IDS)
@settings(max_examples=15, deadline=None, derandomize=True)
@given(cfgs=st.lists(configs, min_size=2, max_size=6))
def test_vectorised_equals_scalar(bound, cfgs):
    arrays = {k: np.array([c[k] for c in cfgs], dtype=float) for k in cfgs[0]}
    vec = bound.evaluate(**arrays)
    scal = [value(bound, c) for c in cfgs]
    np.testing.assert_allclose(vec, scal, rtol=1e-14)
    hold_vec = bound.conditions_hold(**arrays)
    assert hold_vec.tolist() == [bool(bound.conditions_hold(**c)) for c in cfgs]

"""The vectorised step-size and H searches of theory.bound.numeric against scalar references."""

import math

import numpy as np
import pytest

from theory.bounds import get

CFG = dict(L=1.0, sigma=1.0, zeta=1.0, F0=1.0, K=4, T=10**5, p=0.2, eta=1.0)
CASES = [
    ("palsgd", {**CFG, "H": 32}),
    ("palsgd_shared_coins", {**CFG, "H": 8, "zeta": 0.3}),
    ("local_sgd_ours", {k: v for k, v in {**CFG, "H": 16}.items() if k not in ("p", "eta")}),
    ("sgd", dict(L=3.0, sigma=1.5, F0=2.0, K=4, T=1000)),
]


def _scalar_max_step(b, vals):
    ok = lambda a: bool(b.conditions_hold(alpha=a, **vals))  # noqa: E731
    lo, hi = 1e-14, 1e-14
    assert ok(lo)
    while ok(hi):
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


@pytest.mark.parametrize("name,vals", CASES, ids=[c[0] for c in CASES])
def test_max_and_optimal_step_match_scalar_searches(name, vals):
    b = get(name)
    amax = float(b.max_step(**vals))
    ref = _scalar_max_step(b, vals)
    assert amax == pytest.approx(ref, rel=1e-12)
    assert bool(b.conditions_hold(alpha=amax, **vals))
    opt = float(b.optimal_step(**vals))
    assert 0 < opt <= amax
    grid = np.exp(np.linspace(math.log(amax) - 20 * math.log(10), math.log(amax), 200001))
    vals_grid = b.evaluate(alpha=grid, **vals)
    assert float(b.evaluate(alpha=opt, **vals)) <= float(vals_grid.min()) * (1 + 1e-12)


@pytest.mark.parametrize("name,vals", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_max_H_matches_a_scan_over_H(name, vals):
    b = get(name)
    base = {k: v for k, v in vals.items() if k != "H"}
    got = b.max_H(**base)
    hs = np.arange(1, 3000)
    a = b.recommended_step_value(H=hs, **base)
    holds = b.conditions_hold(H=hs, alpha=a, **base)
    first_fail = np.flatnonzero(~holds)
    assert first_fail.size and np.all(holds[: first_fail[0]])
    assert got.conditions == hs[first_fail[0]] - 1
    opt = b.max_H(step="optimal", h_max=3000, **base)
    a_opt = np.array([float(b.optimal_step(H=h, **base)) for h in range(1, 200)])
    holds_opt = b.conditions_hold(H=np.arange(1, 200), alpha=a_opt, **base)
    assert np.all(holds_opt)  # the optimal step keeps the conditions
    v = b.evaluate(H=np.arange(1, 200), alpha=a_opt, **base)
    within = np.flatnonzero(v <= 2 * v[0])
    assert opt.speedup == within[-1] + 1 or opt.speedup >= 199


def test_rounds_to_eps_matches_a_scan():
    b = get("local_sgd_ours")
    vals = dict(L=1.0, sigma=1.0, zeta=0.5, F0=1.0, K=4, H=4)
    eps = 0.3
    r = float(b.rounds_to_eps(eps, **vals))
    assert math.isfinite(r)
    rs = np.arange(1, int(r) + 2)
    best = np.array([float(b.optimal_step(T=k * 4, **vals)) for k in rs])
    ok = b.evaluate(T=rs * 4, alpha=best, **vals) <= eps
    assert r == rs[np.flatnonzero(ok)[0]]
    arr = b.rounds_to_eps(eps, **{**vals, "H": np.array([1, 4, 16])})
    assert arr.shape == (3,) and np.all(np.isfinite(arr))
    assert float(arr[1]) == r

"""The heterogeneity lower bound (theory.lower.hetero): its instance is in the class,
its value is exact, no registered upper bound is below it, and false bounds are."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from core.errors import UserInputError
from theory import bounds as registry
from theory.lower import get_lower, lower_bounds
from theory.lower.two_curvature import instance_value, unit_value
from theory.moments import MatrixQuadratic, exact_moments

LB = "local_sgd_heterogeneity_lower"


def _gradients(x, L, b, c, R, K):
    """Every worker's gradient of the piecewise instance at the points ``x`` (K, ...)."""
    m = 0.5 * (L + b)
    xc = np.clip(x, -R, R)
    j = K // 2
    kinds = [(L, c)] * j + [(b, -c)] * j + ([(m, 0.0)] if K % 2 else [])
    slope = np.array([h for h, _ in kinds]).reshape((K,) + (1,) * (x.ndim - 1))
    lin = np.array([s for _, s in kinds]).reshape(slope.shape)
    # inside [-R, R]: h x + s; outside: the value at the edge continued with slope m
    return slope * xc + lin * (np.abs(x) <= R) + m * (x - xc) + lin * (np.abs(x) > R)


def _simulate(*, alpha, L, b, c, R, K, H, T, p=0.0, eta=0.0, outer="average", gamma=1.0,
              mu=0.0, runs=1, seed=0, measured="iterates", coins="independent"):  # fmt: skip
    """Direct simulation of the actual instance (gradients of the piecewise functions)."""
    from theory.algorithm import outer_step

    rng = np.random.default_rng(seed)
    m = 0.5 * (L + b)
    x = np.zeros((K, runs))
    z = np.zeros(runs)
    buf = np.zeros(runs)
    total, reach = np.zeros(runs), 0.0
    for t in range(T):
        if measured == "iterates" or (t % H == 0 and t // H < T // H):
            total += (m * x.mean(axis=0)) ** 2
        g = _gradients(x, L, b, c, R, K)
        pull = (
            rng.random((1 if coins == "shared" else K, runs)) < p
            if p > 0
            else np.zeros((K, runs), bool)
        )
        pull = np.broadcast_to(pull, (K, runs))
        step = x - alpha / (1 - p) * g
        x = np.where(pull, x - alpha * eta / max(p, 1e-300) * (x - z), step)
        reach = max(reach, float(np.abs(x).max()))
        if (t + 1) % H == 0:
            z, buf = outer_step(z, buf, z - x.mean(axis=0), outer=outer, gamma=gamma, mu=mu)
            x = np.repeat(z[None], K, axis=0)
    return total / (T if measured == "iterates" else T // H), reach


@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("p", [0.0, 0.3])
def test_exact_against_the_common_hessian_oracle(K, p):
    """At b = L the instance is a quadratic with offsets: the oracle of theory.moments."""
    L, alpha, H, T, eta = 1.5, 0.05, 6, 40, 2.0
    j = K // 2
    offs = [-1.0 / L] * j + [1.0 / L] * j + ([0.0] if K % 2 else [])
    prob = MatrixQuadratic(A=np.array([[L]]), b=np.array(offs)[:, None], noise=0.0)
    kind = "palsgd" if p else "local_sgd"
    curves = exact_moments(prob, dict(kind=kind, alpha=alpha, H=H, p=p, eta=eta), T=T)
    unit, _ = unit_value(alpha=alpha, L=L, b=L, K=K, H=H, T=T, p=p, eta=eta)
    assert unit == pytest.approx(curves.mean_grad_norm_sq(), rel=1e-10)


@pytest.mark.parametrize(
    "outer,gamma,mu", [("average", 1.0, 0.0), ("sgd", 0.7, 0.9), ("nesterov", 0.5, 0.8)]
)
@pytest.mark.parametrize("b_over_L", [-0.9, 0.0, 0.5])
@pytest.mark.parametrize("H,T", [(1, 20), (5, 37), (16, 160)])
@pytest.mark.parametrize("measured", ["iterates", "anchors"])
def test_exact_on_the_piecewise_instance_without_coins(outer, gamma, mu, b_over_L, H, T, measured):
    L, zeta, K, alpha = 2.0, 0.8, 4, 0.04
    ins = instance_value(
        alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=T, b=b_over_L * L, outer=outer,
        gamma=gamma, mu=mu, measured=measured,
    )  # fmt: skip
    sim, reach = _simulate(alpha=alpha, L=L, b=ins.b, c=ins.c, R=ins.R, K=K, H=H, T=T,
                           outer=outer, gamma=gamma, mu=mu, measured=measured)  # fmt: skip
    assert reach <= ins.R * (1 + 1e-12)
    assert float(sim[0]) == pytest.approx(ins.value, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("outer,gamma,mu", [("average", 1.0, 0.0), ("nesterov", 0.6, 0.7)])
@pytest.mark.parametrize("b_over_L", [0.0, 0.5])
@pytest.mark.parametrize("measured", ["iterates", "anchors"])
def test_exact_on_the_piecewise_instance_with_coins(b_over_L, outer, gamma, mu, measured):
    """Monte Carlo over the coins agrees within 5 standard errors; no path leaves [-R, R]."""
    L, zeta, K, alpha, H, T, p, eta = 1.0, 1.0, 3, 0.05, 8, 48, 0.4, 3.0
    kw = dict(p=p, eta=eta, outer=outer, gamma=gamma, mu=mu, measured=measured)
    ins = instance_value(alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=T, b=b_over_L, **kw)
    sim, reach = _simulate(alpha=alpha, L=L, b=ins.b, c=ins.c, R=ins.R, K=K, H=H, T=T,
                           runs=20000, seed=3, **kw)  # fmt: skip
    assert reach <= ins.R * (1 + 1e-12)
    se = sim.std() / np.sqrt(sim.size)
    assert abs(sim.mean() - ins.value) < 5 * se
    assert abs(sim.mean() - ins.value) < 0.05 * ins.value


@pytest.mark.parametrize("coins", ["independent", "shared"])
@pytest.mark.parametrize("eta", [3.0, 12.0])
def test_coins_and_an_overshooting_pull(coins, eta):
    """Shared coins (one coin for every worker) and a pull that overshoots the anchor
    (alpha eta/p = 1.5 > 1, where 1 - alpha eta/p < 0 flips the interval): Monte Carlo
    agrees within 5 standard errors and no path leaves [-R, R]."""
    L, zeta, K, alpha, H, T, p = 1.0, 1.0, 3, 0.05, 8, 48, 0.4
    kw = dict(p=p, eta=eta, outer="nesterov", gamma=0.6, mu=0.7, coins=coins)
    ins = instance_value(alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=T, b=0.0, **kw)
    sim, reach = _simulate(alpha=alpha, L=L, b=ins.b, c=ins.c, R=ins.R, K=K, H=H, T=T,
                           runs=20000, seed=5, **kw)  # fmt: skip
    assert reach <= ins.R * (1 + 1e-12)
    se = sim.std() / np.sqrt(sim.size)
    assert abs(sim.mean() - ins.value) < 5 * se and ins.value > 0


@pytest.mark.parametrize("K", [2, 5])
def test_the_instance_is_in_the_class(K):
    """L-smooth workers, heterogeneity <= zeta^2 everywhere, f = m x^2/2 with f(0) = f_star."""
    L, zeta = 2.0, 0.7
    ins = instance_value(alpha=0.05, L=L, zeta=zeta, K=K, H=8, T=64, b=-0.5 * L)
    x = np.linspace(-5 * ins.R, 5 * ins.R, 20001)
    g = _gradients(np.repeat(x[None], K, axis=0), L, ins.b, ins.c, ins.R, K)
    gbar = g.mean(axis=0)
    assert np.allclose(gbar, 0.5 * (L + ins.b) * x, atol=1e-12)
    assert ((g - gbar) ** 2).mean(axis=0).max() <= zeta**2 * (1 + 1e-9)
    slopes = np.diff(g, axis=1) / np.diff(x)
    assert np.abs(slopes).max() <= L * (1 + 1e-9)
    assert ins.value > 0


def test_registered_and_kept_apart_from_upper_bounds():
    lb = get_lower(LB)
    assert lb.kind == "lower" and lb in lower_bounds() and LB not in registry.names()
    assert lb.evaluate(alpha=0.01, L=1, zeta=1, K=4, H=1, T=500) == 0.0
    vals = [lb.evaluate(alpha=0.01, L=1, zeta=1, K=4, H=H, T=4096) for H in (2, 8, 32)]
    assert vals[0] < vals[1] < vals[2]
    with pytest.raises(UserInputError, match="outer"):
        lb.evaluate(alpha=0.01, L=1, zeta=1, K=4, H=8, T=64, gamma=0.5, mu=0.9)
    with pytest.raises(UserInputError, match="missing"):
        lb.evaluate(alpha=0.01, L=1, K=4, H=8, T=64)


def _configs(bound, n, seed, p_range=None):
    """Random configurations inside ``bound``'s conditions, dominated by heterogeneity."""
    rng = np.random.default_rng(seed)
    vals = dict(
        L=np.exp(rng.uniform(-1, 1, n)),
        sigma=np.zeros(n),
        zeta=np.exp(rng.uniform(-1, 2, n)),
        F0=np.full(n, 1e-6),
        K=rng.integers(2, 9, n),
        H=rng.integers(2, 65, n),
        T=rng.integers(64, 2049, n),
    )
    if p_range is not None:
        vals["p"] = rng.uniform(*p_range, n)
        vals["eta"] = np.exp(rng.uniform(-2, 2, n))
    params = set(bound.parameters)
    vals = {k: v for k, v in vals.items() if k in params or k in ("p", "eta")}
    if "gamma" in params:
        vals["gamma"], vals["mu"] = np.ones(n), np.zeros(n)
    amax = bound.max_step(**{k: v for k, v in vals.items() if k in params})
    alpha = amax * np.exp(rng.uniform(-3, 0, n))
    finite = np.isfinite(alpha) & (alpha > 0)
    alpha = np.where(finite, alpha, 1e-3)
    ok = finite & bound.conditions_hold(
        alpha=alpha, **{k: v for k, v in vals.items() if k in params}
    )
    return alpha, vals, ok


@functools.cache
def _lower_at_configs(name, n, seed, p_range):
    """The configurations of :func:`_configs` and the lower bound at each one inside."""
    alpha, vals, ok = _configs(registry.get(name), n, seed, p_range)
    lower = np.full(n, np.nan)
    for i in np.flatnonzero(ok):
        args = {k: float(v[i]) for k, v in vals.items() if k != "sigma" and k != "F0"}
        lower[i] = get_lower(LB).evaluate(alpha=float(alpha[i]), **args)
    return alpha, vals, ok, lower


def _worst_ratio(bound, expression_scale=None, n=100, seed=0, p_range=None):
    """Largest lower/upper over configurations inside the bound's conditions."""
    alpha, vals, ok, lower = _lower_at_configs(bound.name, n, seed, p_range)
    params = set(bound.parameters)
    upper = bound.evaluate(alpha=alpha, **{k: v for k, v in vals.items() if k in params})
    if expression_scale is not None:
        upper = expression_scale(alpha, vals, upper)
    return float(np.max(lower[ok] / upper[ok])), int(ok.sum())


@pytest.mark.parametrize(
    "name,p_range",
    [
        ("local_sgd_noniid", None),
        ("local_sgd_ours", None),
        ("palsgd", (0.05, 0.9)),
        ("palsgd_pull_aware", (0.05, 0.9)),
    ],
)
def test_upper_bounds_are_never_below_it(name, p_range):
    worst, inside = _worst_ratio(registry.get(name), p_range=p_range)
    assert inside > 30
    assert worst <= 1.0, f"{name} is below the heterogeneity lower bound (ratio {worst})"


def _heterogeneity_scaled(bound, scale):
    """``bound`` with its heterogeneity part (its value at zeta minus at zeta = 0) scaled."""
    params = set(bound.parameters)

    def scaled(alpha, vals, upper):
        at0 = {k: v for k, v in vals.items() if k in params}
        at0["zeta"] = np.zeros_like(at0["zeta"])
        base = bound.evaluate(alpha=alpha, **at0)
        return base + scale * (upper - base)

    return scaled


@pytest.mark.parametrize("name,p_range", [("local_sgd_noniid", None), ("palsgd", (0.05, 0.9))])
@pytest.mark.parametrize("scale", [0.0, 1e-3])
def test_false_bounds_are_rejected(name, p_range, scale):
    """Negative controls: the bound with its heterogeneity part removed or scaled by 1e-3 is
    below the lower bound somewhere inside its conditions (false there)."""
    bound = registry.get(name)
    worst, _ = _worst_ratio(bound, _heterogeneity_scaled(bound, scale), p_range=p_range)
    assert worst > 1.0


def test_a_shorter_horizon_is_the_truncated_sum():
    """horizon T' counts (1/T) sum_{t<T'} on the instance built for T' steps."""
    kw = dict(alpha=0.05, L=1.0, zeta=1.0, K=4, H=8, b=0.0, p=0.3, eta=2.0)
    short = instance_value(T=200, horizon=64, **kw)
    alone = instance_value(T=64, **kw)
    assert short.c == alone.c and short.value == pytest.approx(alone.value * 64 / 200)
    lb = get_lower(LB)
    v = dict(alpha=0.05, L=1.0, zeta=1.0, K=4, H=8, T=200, p=0.3, eta=2.0)
    assert lb.evaluate(**v) >= short.value > 0


@pytest.mark.parametrize("outer,gamma,mu", [("average", 1.0, 0.0), ("nesterov", 0.5, 0.8)])
def test_long_runs_bound_the_tail_in_closed_form(outer, gamma, mu):
    """Past the first rounds the region comes from the contraction of the round map: the
    simulated path of the instance stays inside it and the value is still exact."""
    L, zeta, K, alpha, H, T = 1.0, 1.0, 4, 0.05, 4, 4002
    kw = dict(outer=outer, gamma=gamma, mu=mu)
    ins = instance_value(alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=T, b=0.0, **kw)
    sim, reach = _simulate(alpha=alpha, L=L, b=ins.b, c=ins.c, R=ins.R, K=K, H=H, T=T, **kw)
    assert reach <= ins.R * (1 + 1e-12) and ins.value > 0
    assert float(sim[0]) == pytest.approx(ins.value, rel=1e-9)
    far = get_lower(LB).evaluate(alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=10**9, **kw)
    assert 0 < far < np.inf


@pytest.mark.parametrize(
    "extra,match",
    [({"zetta": 1.0}, "unknown parameter"), ({"p": 0.3}, "eta"), ({"p": 1.5, "eta": 1.0}, "p")],
)
def test_bad_inputs_are_refused_by_name(extra, match):
    with pytest.raises(UserInputError, match=match):
        get_lower(LB).evaluate(alpha=0.01, L=1, zeta=1, K=4, H=8, T=64, **extra)


@pytest.mark.parametrize("eta", [2.0, 6.0])
def test_the_region_holds_every_coin_path(eta):
    """Every coin path enumerated (K = 2 workers, 3 rounds of H = 3 steps: 2^18 paths) stays
    within the region of :func:`theory.lower.region.reach_history`, the overshooting pull
    (alpha eta/p = 1.5 at eta = 6) included."""
    from itertools import product

    from theory.algorithm import outer_step
    from theory.lower.region import reach_history

    L, b, alpha, p, H, rounds = 1.0, -0.5, 0.1, 0.4, 3, 3
    groups = [(0.5, L, 1.0), (0.5, b, -1.0)]
    reach = float(reach_history(groups, [(rounds, H)], alpha, p, eta, "sgd", 0.7, 0.5)[-1])
    coins = np.array(list(product((0, 1), repeat=2 * H * rounds)), dtype=bool)
    n = coins.shape[0]
    x, z, buf, far = np.zeros((2, n)), np.zeros(n), np.zeros(n), 0.0
    h, s = np.array([[L], [b]]), np.array([[1.0], [-1.0]])
    for r in range(rounds):
        for t in range(H):
            pull = coins[:, 2 * (r * H + t) : 2 * (r * H + t) + 2].T
            grad = x - alpha / (1 - p) * (h * x + s)
            x = np.where(pull, x - alpha * eta / p * (x - z), grad)
            far = max(far, float(np.abs(x).max()))
        z, buf = outer_step(z, buf, z - x.mean(axis=0), outer="sgd", gamma=0.7, mu=0.5)
        far = max(far, float(np.abs(z).max()))
        x = np.repeat(z[None], 2, axis=0)
    assert far <= reach * (1 + 1e-12)
    assert far > 0.5 * reach  # the interval hull is not loose beyond reason here

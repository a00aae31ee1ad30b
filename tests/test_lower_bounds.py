"""Lower bounds (theory.lower): kept out of the upper-bound registry, exact on their
instance, and never above a valid upper bound inside its conditions."""

from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserInputError
from theory import bounds as registry
from theory.lower import get_lower, lower_bounds
from theory.moments import MatrixQuadratic, exact_moments

LB = "local_sgd_quadratic_lower"


def test_lower_bounds_are_not_upper_bounds():
    lb = get_lower(LB)
    assert lb.kind == "lower" and lb in lower_bounds()
    assert LB not in registry.names()
    assert all(getattr(b, "kind", "upper") == "upper" for b in registry.all_bounds())
    with pytest.raises(UserInputError, match="lower bound"):
        registry.get(LB)
    with pytest.raises(TypeError):
        registry.register(lb)


@pytest.mark.parametrize("H", [1, 4, 16])
@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.5])
def test_lower_bound_is_exact_on_its_instance(H, alpha):
    L, K, T, s2 = 2.0, 4, 96, 0.7
    x0 = np.array([1.5])
    prob = MatrixQuadratic(A=np.array([[L]]), b=np.zeros((K, 1)), noise=s2, x0=x0)
    kind = "sgd" if H == 1 else "local_sgd"
    curves = exact_moments(prob, dict(kind=kind, alpha=alpha, H=H), T=T)
    value = get_lower(LB).evaluate(
        alpha=alpha, L=L, K=K, T=T, sigma=np.sqrt(s2), F0=0.5 * L * float(x0 @ x0)
    )
    assert curves.mean_grad_norm_sq() == pytest.approx(float(value), rel=1e-9)


@pytest.mark.parametrize("name", ["sgd", "local_sgd_iid", "local_sgd_noniid", "local_sgd_ours"])
def test_upper_bounds_are_never_below_the_lower_bound(name):
    b, lb = registry.get(name), get_lower(LB)
    rng = np.random.default_rng(0)
    n = 4000
    vals = dict(
        L=np.exp(rng.uniform(-2, 2, n)),
        sigma=rng.uniform(0, 3, n),
        zeta=np.zeros(n),
        F0=np.exp(rng.uniform(-3, 3, n)),
        K=rng.integers(1, 17, n),
        H=rng.integers(1, 65, n),
        T=rng.integers(1, 10**5, n),
    )
    amax = b.max_step(**vals)
    alpha = amax * np.exp(rng.uniform(-8, 0, n))
    inside = np.isfinite(alpha) & b.conditions_hold(alpha=alpha, **vals)
    assert inside.sum() > 1000
    upper = b.evaluate(alpha=alpha, **vals)
    lower = lb.evaluate(alpha=alpha, **vals)
    assert np.all(upper[inside] >= lower[inside] * (1 - 1e-9))
    ratio = lower[inside] / upper[inside]
    assert ratio.max() > 0.1  # the lower bound is not trivially small

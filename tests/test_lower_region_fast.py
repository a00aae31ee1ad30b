"""The reach of the heterogeneity lower bound's instances, computed faster and once: the
interval propagation without ``sorted`` gives the plain loop's values exactly, the cache
gives each caller its own copy, and the cached instances are the computed ones."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from theory.algorithm import pull_coefficient
from theory.lower import region
from theory.lower.hetero import LOCAL_SGD_HETEROGENEITY_LOWER
from theory.lower.region import _filled, _sync_box, reach_history


def _plain_reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu, start=0.0):
    """The loop of :func:`reach_history` for ``p > 0`` as it was written first (sorted, min,
    max at every step): the reference the fast loop must match bit for bit."""
    beta = pull_coefficient(alpha, eta, p)
    box = (float(start), float(start), 0.0, 0.0)
    reach, hist = abs(float(start)), []
    for k, (rounds, n) in enumerate(lengths):
        for _ in range(rounds):
            zlo, zhi = box[0], box[1]
            ends = []
            for _, h, s in groups:
                lo, hi = zlo, zhi
                q, off = 1.0 - alpha * h / (1.0 - p), -alpha * s / (1.0 - p)
                for _ in range(n):
                    g0, g1 = sorted((q * lo + off, q * hi + off))
                    x0, x1 = sorted(((1 - beta) * lo, (1 - beta) * hi))
                    lo, hi = min(g0, x0 + beta * zlo), max(g1, x1 + beta * zhi)
                    reach = max(reach, abs(lo), abs(hi))
                ends.append((lo, hi))
            xlo = sum(w * e[0] for (w, _, _), e in zip(groups, ends, strict=True))
            xhi = sum(w * e[1] for (w, _, _), e in zip(groups, ends, strict=True))
            new = _sync_box(box, xlo, xhi, outer, gamma, mu)
            reach = max(reach, abs(new[0]), abs(new[1])) if math.isfinite(reach) else math.inf
            hist.append(reach)
            if new == box or not math.isfinite(reach):
                break
            box = new
        hist = list(_filled(hist, sum(r for r, _ in lengths[: k + 1])))
    return np.array(hist)


def _cases(n: int, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        K, L = rng.choice([2, 4, 8]), rng.uniform(0.5, 20)
        f = rng.choice([-0.9, -0.5, 0.0, 0.5, 0.99])
        groups = [((K - 1) / K, L, 1.0), (1 / K, f * L, -(K - 1.0))]
        H = rng.choice([1, 2, 8, 32])
        T = rng.choice([3 * H + 1, 100, 300])
        lengths = [(T // H, H)] + ([(1, T % H)] if T % H else [])
        # steps from tiny to diverging; pulls that overshoot (alpha eta / p > 1) included
        alpha = rng.choice([1e-3, 1e-2, 0.1, 0.5]) / L * rng.choice([1, 5, 30])
        p, eta = rng.choice([0.05, 0.2, 0.9]), rng.choice([0.1, 1.0, 50.0])
        outer = rng.choice(["average", "sgd", "nesterov"])
        gamma, mu = rng.choice([1.0, 0.7, 1.5]), rng.choice([0.0, 0.9])
        yield groups, lengths, alpha, p, eta, outer, gamma, mu, rng.choice([0.0, 1.0, -2.0])


def test_the_fast_loop_gives_the_plain_loops_values_exactly():
    finite, overshoot = set(), set()
    for args in _cases(80):
        region._REACH_CACHE.clear()
        got, want = reach_history(*args), _plain_reach_history(*args)
        assert got.shape == want.shape, args
        assert np.array_equal(got, want, equal_nan=True), args
        assert np.array_equal(np.signbit(got), np.signbit(want)), args
        finite.add(bool(np.isfinite(got[-1])))
        overshoot.add(pull_coefficient(args[2], args[4], args[3]) > 1)
    # finite and diverging runs, pulls that overshoot (1 - beta < 0) and pulls that do not
    assert finite == {True, False} and overshoot == {True, False}


def test_the_cache_gives_each_caller_its_own_copy():
    args = next(_cases(1, seed=3))
    first = reach_history(*args)
    first[:] = -1.0  # a caller that writes into its result
    again = reach_history(*args)
    assert np.array_equal(again, _plain_reach_history(*args))
    assert again is not first and again.flags.writeable


def test_equal_values_of_other_types_are_not_mixed_up():
    groups, lengths, alpha, p, eta, outer, gamma, mu, start = next(_cases(1, seed=5))
    a = reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu, start)
    b = reach_history(groups, lengths, np.float64(alpha), p, eta, outer, gamma, mu, start)
    assert np.array_equal(a, b)
    keys = {k for k in region._REACH_CACHE if k[2] in ((float, alpha), (np.float64, alpha))}
    assert len(keys) == 2


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_cached_instances_are_the_computed_ones(p):
    lb = LOCAL_SGD_HETEROGENEITY_LOWER
    v = dict(alpha=0.01, L=4.0, zeta=0.5, K=4, H=8, T=200, p=p)
    if p:
        v["eta"] = 1.0
    computed = lb._instances(dict(v))
    assert lb.instances(**v) == computed  # first call: computed and kept
    assert lb.instances(**v) == computed  # second: from the cache, equal
    assert lb.evaluate(**v) == max(i.value for i in computed)

"""The Monte-Carlo side of the comparison: intervals that contain the exact answer, a holdout
re-estimate, wins only where intervals separate, and families whose Local SGD is biased."""

import numpy as np
import pytest

from core.errors import UserInputError
from theory.compare import METHODS, Grid, MapSpec
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.montecarlo import build_family, decide, estimate, spec_of
from theory.compare.run_mc import run_mc_map
from theory.problems.hessians import make_hetero_hessian
from theory.simulate import AlgorithmSpec, simulate


def test_the_interval_contains_the_exact_first_passage():
    prob = make_hetero_hessian(K=3, d=2, zeta=1.0, sigma=0.5, F0=1.0, seed=2)
    q = Quadratic.of(prob)
    m = METHODS["palsgd"]
    eps = np.array([0.2, 0.1])
    kw = dict(H=8, eta=2.0, p=0.5, alpha=0.05, gamma=1.0, mu=0.0)
    exact, _ = exact_rounds(q, m, H=8, eta=np.array([2.0]), p=np.array([0.5]),
                            alpha=np.array([0.05]), gamma=np.array([1.0]), eps=eps,
                            cap=np.array([200]), group=np.array([0]))  # fmt: skip
    est = estimate(prob, m, eps=eps, cap=200, replicas=400, seed=4, **kw)
    for e, x in enumerate(est):
        assert x.lo is not None and x.hi is not None
        assert x.lo <= exact[0, e] <= x.hi


def test_decide_needs_separated_intervals():
    assert decide((1.0, 2.0), (3.0, 4.0)) == "a"
    assert decide((3.0, 4.0), (1.0, 2.0)) == "b"
    assert decide((1.0, 3.0), (2.0, 4.0)) == "undecided"
    assert decide((1.0, 2.0), None) == "a"
    assert decide(None, None) == "undecided"


def test_spec_of_maps_every_method_to_its_algorithm():
    kw = dict(H=8, eta=2.0, p=0.5, alpha=0.1, gamma=1.5, mu=0.9, seed=0)
    assert spec_of(METHODS["sgd"], **kw).kind == "sgd"
    loc = spec_of(METHODS["local_sgd"], **kw)
    assert (loc.kind, loc.outer, loc.gamma, loc.mu, loc.p) == ("diloco", "sgd", 1.5, 0.0, 0.0)
    dil = spec_of(METHODS["diloco"], **kw)
    assert (dil.outer, dil.mu) == ("nesterov", 0.9)
    sh = spec_of(METHODS["palsgd_shared"], **kw)
    assert (sh.kind, sh.coins, sh.p, sh.eta) == ("palsgd", "shared", 0.5, 2.0)


@pytest.mark.parametrize("family", ["hetero_cosine", "cosine"])
def test_local_sgd_fixed_point_is_biased_on_the_nonconvex_families(family):
    """Deterministic runs (sigma = 0): minibatch SGD reaches a stationary point, Local SGD with
    long rounds settles at a point whose gradient is far from zero (the drift bias)."""
    prob = build_family(family, zeta=3.0, K=4, d=2, sigma=0.0, seed=0)
    sgd = simulate(prob, AlgorithmSpec(kind="sgd", alpha=0.05), T=4000, R=1, seed=0)
    loc = simulate(prob, AlgorithmSpec(kind="local_sgd", alpha=0.01, H=256), T=256 * 60 + 1,
                   R=1, seed=0, record_every=256)  # fmt: skip
    g_sgd = float(sgd.final_grad_norm_sq[0])
    tail = loc.grad_norm_sq[0, -5:]
    assert g_sgd < 1e-8
    assert tail.min() > 1e-3 and np.ptp(tail) < 1e-6 * tail.max()  # settled, and biased


def test_build_family_refuses_unknown_names():
    with pytest.raises(UserInputError, match="family"):
        build_family("nope", zeta=1.0, K=2, d=2, sigma=0.0, seed=0)


def test_a_small_monte_carlo_map_reports_intervals():
    spec = MapSpec(H=(16,), eta=(2.0,), p=(0.5,), zeta=(1.0,), eps=(0.2,), budgets={"rounds": 40},
                   methods=("local_sgd", "palsgd"), grid=Grid(n_alpha=3, n_outer=1, span=2,
                                                            max_extend=0))  # fmt: skip
    res = run_mc_map(spec, replicas=16, holdout_replicas=32, d=2)
    (cell,) = res.cells
    assert res.engine == "montecarlo"
    for m in ("local_sgd", "palsgd"):
        if cell.cost[m] is not None:
            lo, hi = cell.intervals[m]
            assert lo <= cell.cost[m] <= hi
    assert cell.winner in ("palsgd", "baseline", "undecided", "neither")


def test_an_overlapped_sync_reaches_the_simulated_spec_and_changes_the_dynamics():
    """``sync_delay`` is set on every method with rounds (not on minibatch SGD), refused where
    it cannot apply, and the simulated trajectories differ from the blocking sync's."""
    from dataclasses import replace

    kw = dict(H=8, eta=2.0, p=0.5, alpha=0.1, gamma=1.0, mu=0.0, seed=0)
    delayed = {n: replace(m, sync_delay=3) if m.local else m for n, m in METHODS.items()}
    assert spec_of(delayed["palsgd"], **kw).sync_delay == 3
    assert spec_of(delayed["diloco"], **kw).sync_delay == 3
    assert spec_of(delayed["sgd"], **kw).sync_delay == 0
    prob = build_family("hetero_cosine", zeta=1.0, K=2, d=2, sigma=0.0, seed=0)
    eps = np.array([1e-9])
    runs = [
        estimate(
            prob,
            m,
            H=8,
            eta=2.0,
            p=0.5,
            alpha=0.05,
            gamma=1.0,
            mu=0.0,
            eps=eps,
            cap=30,
            replicas=2,
            seed=1,
        )  # fmt: skip
        for m in (METHODS["local_sgd"], delayed["local_sgd"])
    ]
    spec = spec_of(delayed["local_sgd"], **kw)
    blocking = simulate(prob, spec.replace(sync_delay=0), T=33, R=2, seed=1, record_every=8)
    overlapped = simulate(prob, spec, T=33, R=2, seed=1, record_every=8)
    g0, g1 = blocking.grad_norm_sq, overlapped.grad_norm_sq  # (replicas, records)
    assert g0.shape == g1.shape == (2, 5) and np.allclose(g0[:, 0], g1[:, 0])
    # round 1's outer step lands 3 steps into round 2: the anchor at the end of round 1 is
    # still the start, at the end of round 2 it is the blocking sync's round-1 anchor
    assert np.allclose(g1[:, 1], g0[:, 0]) and np.allclose(g1[:, 2], g0[:, 1])
    assert not np.allclose(g1[:, 3:], g0[:, 3:])
    assert all(len(r) == 1 for r in runs)
    with pytest.raises(UserInputError, match="sync_delay = 8 must be at most H - 1 = 7"):
        MapSpec(H=(8, 16), sync_delay=8)
    with pytest.raises(UserInputError, match="needs the Monte-Carlo engine"):
        from theory.compare import run_map

        run_map(MapSpec(H=(8,), sync_delay=1))

"""Tuning that cannot starve a method: every cell extended by one rule, outer rates until
interior or the cap, a precision guard, the sustained criterion exact against a trajectory."""

import numpy as np
import pytest

import theory.compare.precision as precision
from theory.compare import METHODS, Grid
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.pairs import round_moments
from theory.compare.scan import anchor_map, start_vector
from theory.compare.tune import GAMMA_MAX, tune
from theory.problems.hessians import make_hetero_hessian

PALSGD = METHODS["palsgd"]


def _bowl(alpha_opt: float, gamma_opt: float):
    """A fake evaluator: rounds grow with the log-distance from ``(alpha_opt, gamma_opt)``,
    the same in every cell; it records how many configurations each cell got."""
    seen: dict[int, int] = {}

    def evaluate(m, *, H, eta, p, alpha, gamma, eps, cap, group, mu, known=None):
        da = np.log10(alpha) - np.log10(alpha_opt)
        dg = np.log2(gamma) - np.log2(gamma_opt)
        r = np.ceil(5 + 40 * da**2 + 3 * dg**2).astype(np.int64)
        for g in group:
            seen[int(g)] = seen.get(int(g), 0) + 1
        return np.repeat(r[:, None], np.size(eps), axis=1), np.zeros(len(alpha), dtype=bool)

    return evaluate, seen


def test_every_cell_is_extended_not_only_the_first():
    """With ``any(...)`` over a generator the first extending cell stopped the others: here
    the eight cells are alike (one stability edge: ``p = 1/2``, ``eta <= 1``), so each must
    get the same configurations and end interior."""
    evaluate, seen = _bowl(alpha_opt=3e-3, gamma_opt=40.0)
    cells = [(eta, 0.5) for eta in (0.1, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 1.0)]
    grid = Grid(n_alpha=6, n_outer=4, span=1.0, max_extend=3)
    res = tune(evaluate, PALSGD, H=16, cells=cells, eps=np.array([0.1]),
               caps=np.full(len(cells), 1000), grid=grid, L=1.0)  # fmt: skip
    assert len(set(seen.values())) == 1, seen  # the same number of configurations per cell
    for row in res:
        t = row[0]
        # the global probe lands near gamma = 40 (its row, adopted, is walked around): one
        # extension where the walk from the base grid took two
        assert t.extended >= 1 and t.rounds <= 8  # 5 at the optimum, up to the grid spacing
        assert t.gamma_edge == "interior" and t.alpha_edge == "interior"
        assert 20.0 < t.gamma < 80.0


def test_outer_rates_grow_until_interior_and_stop_at_the_cap():
    evaluate, _ = _bowl(alpha_opt=1e-2, gamma_opt=1e7)  # far above the cap
    (row,) = tune(evaluate, PALSGD, H=16, cells=[(5.0, 0.5)], eps=np.array([0.1]),
                  caps=np.array([1000]), grid=Grid(n_alpha=4, n_outer=4), L=1.0)  # fmt: skip
    t = row[0]
    assert t.gamma_edge == "upper" and t.on_edge
    assert GAMMA_MAX / 2 <= t.gamma <= GAMMA_MAX


def test_an_extension_is_evaluated_before_it_is_reported():
    """The last extension used to be added and never evaluated, its optimum labelled
    "interior": every configuration reported must have been evaluated."""
    evaluate, seen = _bowl(alpha_opt=1e-9, gamma_opt=1.0)  # below any inner-step cap
    grid = Grid(n_alpha=4, n_outer=1, span=1.0, max_extend=2, refine=0)
    (row,) = tune(evaluate, METHODS["sgd"], H=1, cells=[(0.0, 0.0)], eps=np.array([0.1]),
                  caps=np.array([10**6]), grid=grid, L=1.0)  # fmt: skip
    t = row[0]
    assert t.alpha_edge == "lower" and t.on_edge  # still at the edge after the cap
    assert t.configs == seen[0] == 4 + 2 * 2


def test_the_precision_guard_refuses_and_takes_the_next_best():
    evaluate, _ = _bowl(alpha_opt=0.05, gamma_opt=1.0)
    calls = []

    def verify(m, *, H, eta, p, alpha, gamma, mu, rounds, eps):
        calls.append(len(alpha))
        return ~np.isclose(gamma, 1.0)  # every optimum at gamma = 1 is "unresolved"

    (row,) = tune(evaluate, PALSGD, H=16, cells=[(5.0, 0.5)], eps=np.array([0.1]),
                  caps=np.array([1000]), grid=Grid(n_alpha=5, n_outer=4, max_extend=0),
                  L=1.0, verify=verify)  # fmt: skip
    t = row[0]
    assert t.gamma != pytest.approx(1.0) and t.refused >= 1 and t.rechecked >= 1
    assert len(calls) >= 2


def test_long_double_values_match_float64_where_it_resolves_them():
    q = Quadratic.of(make_hetero_hessian(zeta=3.0))
    n = 4
    kw = dict(H=16, eta=np.full(n, 5.0), p=np.full(n, 0.5), alpha=np.geomspace(1e-3, 0.3, n),
              gamma=np.full(n, 2.0), mu=0.0, rounds=np.tile([[0, 1, 7, 30]], (n, 1)))  # fmt: skip
    lo = precision.longdouble_values(q, PALSGD, **kw)
    hi = precision._float64_values(q, PALSGD, **kw)
    assert lo.dtype == np.longdouble
    np.testing.assert_allclose(hi, lo.astype(float), rtol=1e-10)
    verify = precision.longdouble_verifier(q)
    r = np.tile([[1, 7]], (n, 1))
    vkw = {k: v for k, v in kw.items() if k != "rounds"}
    assert verify(PALSGD, **vkw, rounds=r, eps=np.array([0.05, 0.01])).all()


def test_the_verifier_refuses_a_value_float64_gets_wrong(monkeypatch):
    q = Quadratic.of(make_hetero_hessian(zeta=3.0))
    real = precision._float64_values
    monkeypatch.setattr(precision, "_float64_values", lambda *a, **k: real(*a, **k) * 1.01)
    kw = dict(H=16, eta=np.array([5.0]), p=np.array([0.5]), alpha=np.array([0.01]),
              gamma=np.array([2.0]), mu=0.0)  # fmt: skip
    verify = precision.longdouble_verifier(q)
    assert not verify(PALSGD, **kw, rounds=np.array([[3]]), eps=np.array([0.05])).any()


@pytest.mark.parametrize("name", ["diloco", "palsgd_nesterov", "local_sgd"])
def test_sustained_passage_is_exact_against_the_trajectory(name):
    """Where the value dips below eps and rebounds, the sustained answer is one past the
    last round above eps (through the end of the cap's block when not certified earlier)."""
    m = METHODS[name]
    q = Quadratic.of(make_hetero_hessian(zeta=3.0))
    rng = np.random.default_rng(1)
    N, H, cap, B = 30, 16, 150, 64
    alpha, gamma = 10 ** rng.uniform(-2.5, 0.2, N), 10 ** rng.uniform(-0.5, 1.2, N)
    eta, p, eps = np.full(N, 5.0), np.full(N, 0.5), np.array([0.05, 0.01])
    r, div = exact_rounds(q, m, H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, eps=eps,
                          cap=np.full(N, cap), group=np.arange(N), sustained=True)  # fmt: skip
    assert r.shape == (N, 4)
    with np.errstate(all="ignore"):
        mom = round_moments(q.lam, q.delta, q.s2, alpha=alpha, eta=eta if m.pulls else 0 * eta,
                            p=p if m.pulls else 0 * p, H=np.full(N, H), shared=m.shared)  # fmt: skip
        M = anchor_map(mom, m.outer, gamma, np.full(N, 0.9 if m.nesterov else 0.0))
        v, vals = start_vector(q.y0, N), []
        for _ in range(-(-cap // B) * B + 1):
            vals.append(np.einsum("d,nd->n", q.weight, v[..., 0]))
            v = np.einsum("ndij,ndj->ndi", M, v)
    vals = np.array(vals).T
    differ = 0
    for i in np.flatnonzero(~div):
        for e, ep in enumerate(eps):
            below = vals[i] <= ep
            hit = np.flatnonzero(below[: cap + 1])
            assert r[i, e] == (hit[0] if hit.size else -1)
            above = np.flatnonzero(~below)
            sus = above[-1] + 1 if above.size else 0
            assert r[i, 2 + e] == (sus if sus <= cap else -1)
            differ += int(r[i, e] != r[i, 2 + e])
    if m.nesterov:  # outer momentum overshoots: some passages here are transient
        assert differ > 0

"""The tuner's continuous polish (:mod:`theory.compare.polish`): the values the exact engine
returns beside the rounds, the score built on them, and a window of one round fewer that is
thinner than the grid stages' spacing, found by the polish alone."""

import numpy as np
import pytest

from theory.compare import METHODS, Grid
from theory.compare.exact import Quadratic, exact_rounds, exact_values
from theory.compare.polish import score
from theory.compare.scan import values_at
from theory.compare.tune import ExactEvaluator, exact_evaluator, tune
from theory.problems.hessians import make_hetero_hessian


def _quadratic(seed: int = 3) -> Quadratic:
    return Quadratic.of(make_hetero_hessian(K=3, d=2, zeta=1.0, sigma=0.5, F0=1.0, seed=seed))


def test_the_engine_returns_the_values_of_the_first_rounds():
    """``values=W`` of :func:`exact_rounds` and :func:`exact_values` give the same values as
    the matrix powers of :func:`values_at`, and the rounds are unchanged by asking."""
    q = _quadratic()
    m = METHODS["diloco"]
    n = 6
    kw = dict(H=8, eta=np.zeros(n), p=np.zeros(n), alpha=np.geomspace(1e-3, 0.3, n),
              gamma=np.geomspace(0.2, 2.0, n), mu=0.9)  # fmt: skip
    eps = np.array([0.05, 0.01])
    plain, div = exact_rounds(q, m, **kw, eps=eps, cap=np.full(n, 500),
                              group=np.arange(n), sustained=True)  # fmt: skip
    R, div2, V = exact_rounds(q, m, **kw, eps=eps, cap=np.full(n, 500), group=np.arange(n),
                              sustained=True, values=10)  # fmt: skip
    assert np.array_equal(plain, R) and np.array_equal(div, div2)
    alone = exact_values(q, m, **kw, rounds=10)
    from theory.compare.exact import _round_maps
    from theory.compare.scan import start_vector

    M = _round_maps(q, m, 8, kw["eta"], kw["p"], kw["alpha"], kw["gamma"], 0.9)
    v0 = start_vector(q.y0, n)
    ref = np.stack([values_at(M, v0, q.weight, np.full(n, r)) for r in range(1, 11)], axis=1)
    finite = np.isfinite(ref) & (ref < 1e100)
    np.testing.assert_allclose(V[finite], ref[finite], rtol=1e-9)
    np.testing.assert_allclose(alone[finite], ref[finite], rtol=1e-9)


def test_the_score_is_at_most_zero_exactly_where_the_rounds_say_so():
    V = np.array([[4.0, 2.0, 0.5, 0.8, 0.9], [4.0, 0.9, 1.5, 0.9, 0.9], [np.inf] * 5])
    eps = 1.0
    # first passage by round t: row 0 from round 3, row 1 from round 2
    assert list(score(V, 2, False, eps) <= 0) == [False, True, False]
    assert list(score(V, 3, False, eps) <= 0) == [True, True, False]
    # sustained from round t (as far as W = 5): row 0 from 3, row 1 from 4
    assert list(score(V, 3, True, eps) <= 0) == [True, False, False]
    assert list(score(V, 4, True, eps) <= 0) == [True, True, False]
    assert score(V, 2, False, eps)[0] == pytest.approx(np.log(2.0))  # the closer, the lower
    assert np.isinf(score(V, 0, False, eps)).all() and np.isinf(score(V, 6, True, eps)).all()


class _Needle:
    """A fake evaluator with values: ``V_j = q^j`` with ``q = 0.5 + 0.3 d^2``, ``d`` the
    log-distance from ``(alpha_opt, gamma_opt)``; at ``eps = 0.250003`` two rounds need
    ``d <= 0.0032``, so every grid point takes three."""

    values = 16

    def __init__(self, alpha_opt: float, gamma_opt: float) -> None:
        self.opt = np.log([alpha_opt, gamma_opt])

    def early(self, m, *, H, eta, p, alpha, gamma, mu, rounds):
        d2 = (np.log(alpha) - self.opt[0]) ** 2
        if m.has_outer:
            d2 = d2 + (np.log(gamma) - self.opt[1]) ** 2
        q = 0.5 + 0.3 * d2
        return q[:, None] ** np.arange(1, rounds + 1)[None, :]

    def __call__(self, m, *, H, eta, p, alpha, gamma, eps, cap, group, mu, known=None,
                 values=0):  # fmt: skip
        V = self.early(m, H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, mu=mu, rounds=64)
        below = V[:, :, None] <= np.asarray(eps)[None, None, :]
        r = np.where(below.any(axis=1), below.argmax(axis=1) + 1, -1).astype(np.int64)
        out = (r, np.zeros(len(alpha), dtype=bool))
        return (*out, V[:, :values]) if values else out


@pytest.mark.parametrize("name", ["sgd", "local_sgd"])
def test_the_polish_finds_a_window_thinner_than_the_grid(name):
    m = METHODS[name]
    fake = _Needle(alpha_opt=0.0123, gamma_opt=1.23)
    kw = dict(H=4, cells=[(0.0, 0.0)], eps=np.array([0.250003]), caps=np.array([100]), L=1.0)
    (grid_only,) = tune(fake, m, grid=Grid(n_alpha=10, n_outer=4, polish=0), **kw)
    assert grid_only[0].rounds == 3 and grid_only[0].polished == 0
    (polished,) = tune(fake, m, grid=Grid(n_alpha=10, n_outer=4), **kw)
    t = polished[0]
    assert t.rounds == 2 and t.polished > 0
    assert abs(np.log(t.alpha / 0.0123)) <= 0.004
    if m.has_outer:
        assert abs(np.log(t.gamma / 1.23)) <= 0.004


def test_an_evaluator_without_values_is_not_polished():
    """The Monte-Carlo engine and the fakes of other tests return rounds alone: nothing
    changes for them (their calls never get ``values``)."""
    fake = _Needle(alpha_opt=0.0123, gamma_opt=1.23)

    def rounds_only(m, **kw):
        assert "values" not in kw
        return fake(m, **kw)

    (row,) = tune(rounds_only, METHODS["sgd"], H=1, cells=[(0.0, 0.0)], eps=np.array([0.250003]),
                  caps=np.array([100]), grid=Grid(n_alpha=10, n_outer=4), L=1.0)  # fmt: skip
    assert row[0].rounds == 3 and row[0].polished == 0


def test_the_exact_evaluator_polishes_alike_in_every_method():
    """Every method gets the polish from the same rule (the exact evaluator carries values);
    the result is never worse than the grid stages' alone."""
    q = _quadratic(seed=5)
    assert isinstance(exact_evaluator(q), ExactEvaluator)
    eps = np.array([0.05 * q.initial_value()])
    for name in ("sgd", "local_sgd", "diloco", "palsgd_nesterov"):
        m = METHODS[name]
        kw = dict(H=8, cells=[(1.0, 0.2)], eps=eps, caps=np.array([400]), L=1.0)
        (a,) = tune(exact_evaluator(q), m, grid=Grid(n_alpha=8, n_outer=3, polish=0), **kw)
        (b,) = tune(exact_evaluator(q), m, grid=Grid(n_alpha=8, n_outer=3), **kw)
        for x, y in zip(a, b, strict=True):
            assert x.rounds is None or y.rounds <= x.rounds, (name, x, y)

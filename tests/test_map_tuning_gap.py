"""Issue 27's acceptance: the map's tuner against an outside search with much wider grids
(:mod:`theory.compare.outside`, ``benchmarks/bench_map_tuning_gap.py``), the refinement
step of the tuner that closes the gap on a cliff, and the polish that finds the windows of
one round fewer thinner than any grid's spacing (:mod:`theory.compare.polish`)."""

import math

import numpy as np
import pytest

from theory.compare import METHODS, Grid, MapSpec, ProblemSource, run_map
from theory.compare.exact import Quadratic
from theory.compare.methods import DEFAULT_METHODS
from theory.compare.outside import WideGrid, held_out_problem, outside_rounds, tuning_gap
from theory.compare.tune import tune
from theory.problems.hessians import load_hetero_hessian

LIMIT = 1.25


def _cliff(alpha_c: float):
    """A fake evaluator: rounds fall with the inner step up to a cliff at ``alpha_c``, past
    which every configuration diverges (the last stable step of a large outer rate)."""

    def evaluate(m, *, H, eta, p, alpha, gamma, eps, cap, group, mu, known=None):
        r = np.where(alpha <= alpha_c, np.ceil(2 + 50 * np.log10(alpha_c / alpha)), -1)
        div = alpha > alpha_c
        return np.repeat(r.astype(np.int64)[:, None], np.size(eps), axis=1), div

    return evaluate


def test_refinement_lands_near_a_cliff_that_the_base_grid_straddles():
    grid = Grid(n_alpha=6, n_outer=1, span=2.0, max_extend=1)
    step = 2.0 / 5  # decades between base steps (6 steps over 2 decades)
    alpha_c = 0.98 * 2.0 * 10 ** (-step * 2.5)  # midway between two base steps
    runs = {}
    for refine in (0, 3):
        (row,) = tune(_cliff(alpha_c), METHODS["sgd"], H=1, cells=[(0.0, 0.0)],
                      eps=np.array([0.1]), caps=np.array([1000]),
                      grid=Grid(**{**grid.__dict__, "refine": refine}), L=1.0)  # fmt: skip
        runs[refine] = row[0].rounds
    assert runs[3] < runs[0]
    assert runs[0] >= 2 + 50 * step / 2  # the base grid: half a step below the cliff
    assert runs[3] <= 2 + 50 * step / 8 + 1  # three levels: within an eighth of a step


def _gap(seed: int, tmp_path, criterion: str, **cells) -> list:
    path = held_out_problem(tmp_path / f"held_out_{seed}.json", seed)
    prob = load_hetero_hessian(path)
    q = Quadratic.of(prob)
    g0 = q.initial_value()
    eps = tuple(f * g0 for f in cells.pop("eps_frac"))
    spec = MapSpec(zeta=None, eps=eps, criterion=criterion, **cells)
    res = run_map(spec, ProblemSource(path=str(path)), bounds=False)
    return tuning_gap(spec, res, q, prob.L, WideGrid(), path.name)


def test_tuned_within_the_limit_on_a_held_out_cell(tmp_path):
    """One held-out problem, one cell, every method, first passage: PALSGD-Nesterov there
    needed 9 rounds against the outside search's 4 (2.25x) before the refinement."""
    rows = _gap(1, tmp_path, "first", H=(64,), eta=(1.0,), p=(0.5,), eps_frac=(0.002,),
                budgets={"rounds": 2e4})  # fmt: skip
    assert {r.method for r in rows} == set(DEFAULT_METHODS)
    bad = [(r.method, r.tuned_rounds, r.outside_rounds) for r in rows if r.ratio > LIMIT]
    assert not bad, bad
    assert all(r.outside_rounds is not None for r in rows)


def test_outside_search_refuses_what_long_double_does_not_confirm(tmp_path, monkeypatch):
    """A configuration the precision check refuses is dropped and the search repeated."""
    import theory.compare.outside as outside

    path = held_out_problem(tmp_path / "p.json", 2)
    prob = load_hetero_hessian(path)
    q = Quadratic.of(prob)
    eps = np.array([0.01 * q.initial_value()])
    kw = dict(H=16, eta=0.0, p=0.0, eps=eps, cap=2000, L=prob.L,
              grid=WideGrid(alpha_decades=3, per_decade=4, gamma_min=0.5, gamma_max=4.0))  # fmt: skip
    base, refused = outside_rounds(q, METHODS["local_sgd"], **kw)
    assert refused == 0 and base[0] > 0
    calls = []

    def first_refused(qq):
        def verify(m, **k):
            calls.append(len(k["alpha"]))
            return np.array([len(calls) > 1] * len(k["alpha"]))

        return verify

    monkeypatch.setattr(outside, "longdouble_verifier", first_refused)
    again, refused = outside_rounds(q, METHODS["local_sgd"], **kw)
    assert refused >= 1 and again[0] >= base[0] and len(calls) == 2


def test_diagonal_search_finds_the_one_round_window_on_a_held_out_cell(tmp_path):
    """Held-out problem 2, ``H = 16, eta = 1, p = 0.2``, 2% target: PALSGD's one-round window
    lies on the ``alpha * gamma ~ 0.19`` diagonal at ``gamma >= 45``; the axis-aligned grid
    alone found 2 rounds at ``gamma ~ 7`` (ratio 2.0), the diagonal stage finds 1."""
    rows = _gap(2, tmp_path, "first", H=(16,), eta=(1.0,), p=(0.2,), eps_frac=(0.02,),
                budgets={"grads": 2e5}, methods=("palsgd",))  # fmt: skip
    (row,) = rows
    assert row.outside_rounds == 1 and row.tuned_rounds == 1, row


@pytest.mark.parametrize(
    "seed, method, cell, criterion, rounds",
    [
        (1, "palsgd_nesterov", dict(H=(64,), eta=(1.0,), p=(0.5,)), "first", 2),
        (2, "palsgd_nesterov", dict(H=(16,), eta=(20.0,), p=(0.2,)), "first", 1),
        (2, "diloco", dict(H=(64,), eta=(1.0,), p=(0.2,)), "sustained", 2),
    ],
)
def test_the_polish_finds_the_thin_windows_of_the_held_out_problems(
    tmp_path, seed, method, cell, criterion, rounds
):
    """The cells the grid stages left above 1.25x (2% target): PALSGD-Nesterov's first
    passage in 2 rounds on a needle ``gamma ~ 0.69-0.76`` (the grid: 3) and in 1 round at
    ``alpha gamma ~ 0.1, gamma ~ 900`` (the grid: 2), DiLoCo's sustained passage from round 2
    on a sliver beside the stability edge (the grid: 3); the outside search's rounds."""
    (row,) = _gap(seed, tmp_path, criterion, eps_frac=(0.02,), budgets={"rounds": 2e4},
                  methods=(method,), **cell)  # fmt: skip
    assert row.outside_rounds == rounds and row.tuned_rounds == rounds, row


@pytest.mark.slow
@pytest.mark.parametrize("criterion", ["first", "sustained"])
def test_tuned_within_the_limit_on_held_out_problems(tmp_path, criterion):
    """The full acceptance (three held-out problems, 24 cells each, two budgets, 864
    method-cells): met under both criteria since the polish (:mod:`theory.compare.polish`;
    before it 4 method-cells above 1.25x under first passage, PALSGD-Nesterov up to 2.0x,
    and 8 under sustained, DiLoCo 1.5x)."""
    rows = []
    for seed in (1, 2, 3):
        rows += _gap(seed, tmp_path, criterion, H=(16, 64, 256), eta=(1.0, 20.0),
                     p=(0.2, 0.5), eps_frac=(0.02, 0.002),
                     budgets={"grads": 2e5, "rounds": 2e4})  # fmt: skip
    worst = max(r.ratio for r in rows if r.ratio is not None and not math.isinf(r.ratio))
    assert worst <= LIMIT, worst


def _two_basins(m, *, H, eta, p, alpha, gamma, eps, cap, group, mu, known=None):
    """A fake landscape: a basin of about 20 rounds around ``alpha gamma = 0.01``,
    ``gamma = 0.5`` (inside the base grids) and one of 8 rounds at ``gamma >= 30``,
    ``alpha gamma`` in ``[0.3, 3]`` that no grid stage reaches."""
    c = alpha * gamma
    r = 20 + np.round(5 * np.abs(np.log10(c / 0.01)) + 2 * np.abs(np.log2(gamma / 0.5)))
    r = np.where((gamma >= 30) & (c >= 0.3) & (c <= 3.0), 8, r).astype(np.int64)
    return np.repeat(r[:, None], np.size(eps), axis=1), np.zeros(alpha.size, dtype=bool)


@pytest.mark.parametrize("name", [n for n in METHODS if METHODS[n].has_outer])
def test_the_global_probe_finds_a_far_basin_for_every_outer_method(name, monkeypatch):
    """The same rule for every method with an outer rate: the probe over
    ``[GAMMA_MIN, GAMMA_MAX]`` finds the far basin; without it the tuner stays in the near
    one (the negative control)."""
    import theory.compare.tune as tune_mod

    kw = dict(H=16, cells=[(1.0, 0.5)], eps=np.array([0.1]), caps=np.array([1000]),
              grid=Grid(polish=0), L=1.0)  # fmt: skip
    (row,) = tune(_two_basins, METHODS[name], **kw)
    assert row[0].rounds == 8 and row[0].gamma >= 30, row[0]
    monkeypatch.setattr(tune_mod, "global_probe", lambda c, T: False)
    (row,) = tune(_two_basins, METHODS[name], **kw)
    assert row[0].rounds >= 19, row[0]


@pytest.mark.parametrize("criterion, outside, tuned", [("first", 8, 8), ("sustained", 9, 8)])
def test_the_global_probe_finds_the_second_basin_of_a_held_out_problem(
    tmp_path, criterion, outside, tuned
):
    """Held-out problem 4, ``H = 256, eta = 20, p = 0.5``, 2% target: PALSGD-Nesterov's
    grid stages found 19 rounds (first passage) and 20 (sustained) at ``gamma ~ 3-6``,
    ``alpha gamma ~ 6e-4``, interior in their basin; the outside search's 8 and 9 lie in a
    second basin at ``gamma >= 11``, ``alpha gamma ~ 8e-3``, which the probe reaches (the
    stages after it find 8 sustained, a round below the outside search's grid)."""
    (row,) = _gap(4, tmp_path, criterion, H=(256,), eta=(20.0,), p=(0.5,), eps_frac=(0.02,),
                  budgets={"rounds": 2e4}, methods=("palsgd_nesterov",))  # fmt: skip
    assert row.outside_rounds == outside and row.tuned_rounds == tuned, row

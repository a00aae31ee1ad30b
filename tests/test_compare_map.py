"""The comparison map: tuning alike, edges extended, costs per budget, cache, bounds' side,
diagnoses and time averages."""

import json
import math

import numpy as np
import pytest

import theory.compare.run as run_module
from core.errors import UserInputError
from theory.compare import METHODS, Grid, MapSpec, Prices, ProblemSource, round_cost, run_map
from theory.compare.averages import exact_averages
from theory.compare.bounds_side import agreement, term_family
from theory.compare.diagnose import diagnose
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.methods import DEFAULT_METHODS
from theory.compare.records import CellResult
from theory.compare.tune import exact_evaluator, tune
from theory.problems.hessians import make_hetero_hessian
from theory.simulate import AlgorithmSpec, simulate

SMALL = dict(H=(8, 64), eta=(2.0, 20.0), p=(0.5,), zeta=(1.0,), eps=(0.05, 0.01),
             budgets={"grads": 5e4, "rounds": 5e3}, grid=Grid(n_alpha=8, n_outer=2))  # fmt: skip


@pytest.fixture(scope="module")
def small_map():
    return run_map(MapSpec(**SMALL), tuned_points=True)


def test_every_cell_has_a_cost_per_method_and_budget(small_map):
    spec = MapSpec(**SMALL)
    assert len(small_map.cells) == spec.n_cells() == 2 * 2 * 1 * 1 * 2 * 2
    d = small_map.to_dict()
    json.dumps(d)  # serialisable
    cell = d["cells"][0]
    for key in ("H", "eta", "p", "eps", "budget", "B", "cost", "tuned", "ratio", "winner"):
        assert key in cell
    assert set(cell["cost"]) == set(DEFAULT_METHODS)
    assert cell["measured_at"] == "anchor after a sync"


def test_costs_are_rounds_times_the_price_of_a_round(small_map):
    for c in small_map.cells:
        for name, cost in c.cost.items():
            m = METHODS[name]
            r = c.rounds[name]
            if cost is None:
                assert r is None or r * round_cost(m, c.budget, c.H, c.p) > c.B
            else:
                assert cost == pytest.approx(r * round_cost(m, c.budget, c.H, c.p))
                assert cost <= c.B * (1 + 1e-12)


def test_every_method_gets_a_grid_of_the_same_size():
    q = Quadratic.of(make_hetero_hessian(zeta=1.0))
    grid = Grid(n_alpha=6, n_outer=3, max_extend=0)
    sizes = {}
    for name, m in METHODS.items():
        cells = [(5.0, 0.5)] if m.pulls else [(0.0, 0.0)]
        res = tune(exact_evaluator(q), m, H=16, cells=cells, eps=np.array([0.05]),
                   caps=np.array([10_000]), grid=grid, L=1.0)  # fmt: skip
        sizes[name] = res[0][0].configs
    assert set(sizes.values()) == {18}, sizes


def test_the_tuned_optimum_is_the_grid_minimum():
    """Tuning with group skipping returns the minimum of the grid's first passages computed
    one configuration at a time."""
    q = Quadratic.of(make_hetero_hessian(zeta=3.0))
    m = METHODS["palsgd"]
    grid = Grid(n_alpha=10, n_outer=2, max_extend=0)
    (res,) = tune(exact_evaluator(q), m, H=16, cells=[(5.0, 0.5)], eps=np.array([0.01]),
                  caps=np.array([20_000]), grid=grid, L=1.0)  # fmt: skip
    alphas, gammas = grid.alphas(m, 1.0, 5.0, 0.5), grid.gammas(m)
    A, G = (x.ravel() for x in np.meshgrid(alphas, gammas))
    n = A.size
    r, _ = exact_rounds(q, m, H=16, eta=np.full(n, 5.0), p=np.full(n, 0.5), alpha=A, gamma=G,
                        eps=np.array([0.01]), cap=np.full(n, 20_000), group=np.arange(n))  # fmt: skip
    assert res[0].rounds == r[r >= 0].min()


def test_an_optimum_on_the_lower_edge_extends_the_grid():
    q = Quadratic.of(make_hetero_hessian(zeta=3.0))
    m = METHODS["local_sgd"]
    narrow = Grid(n_alpha=4, n_outer=1, span=0.3, max_extend=3)
    (res,) = tune(exact_evaluator(q), m, H=256, cells=[(0.0, 0.0)], eps=np.array([0.01]),
                  caps=np.array([10_000]), grid=narrow, L=1.0)  # fmt: skip
    t = res[0]
    assert t.extended >= 1 and t.configs > 4
    assert t.rounds is not None
    assert t.alpha < 0.98 * 2.0 * 10**-0.3  # below the original grid


def test_budgets_cap_the_rounds_and_rounds_count_each_step_of_sgd():
    m = METHODS["sgd"]
    assert round_cost(m, "rounds", 64, 0.5) == 1.0
    assert round_cost(m, "grads", 64, 0.5) == 1.0
    assert round_cost(METHODS["palsgd"], "grads", 64, 0.25) == pytest.approx(48.0)
    assert round_cost(METHODS["local_sgd"], "grads", 64, 0.25) == 64.0
    prices = Prices(grad_s=1.0, pull_s=0.01, sync_s=5.0, ddp_step_s=0.5, K=4)
    t_pal = round_cost(METHODS["palsgd"], "time", 16, 0.5, prices)
    t_shared = round_cost(METHODS["palsgd_shared"], "time", 16, 0.5, prices)
    assert t_shared == pytest.approx(8 * 1.0 + 8 * 0.01 + 5.0)
    assert t_pal > t_shared  # independent coins wait for the slowest worker
    with pytest.raises(UserInputError, match="prices"):
        round_cost(m, "time", 1, 0.0)


def test_spec_refuses_bad_values_by_name():
    with pytest.raises(UserInputError, match="'eta'"):
        MapSpec(eta=(-1.0,))
    with pytest.raises(UserInputError, match="'p'"):
        MapSpec(p=(1.0,))
    with pytest.raises(UserInputError, match="budget"):
        MapSpec(budgets={"flops": 1.0})
    with pytest.raises(UserInputError, match="prices"):
        MapSpec(budgets={"time": 10.0})
    with pytest.raises(UserInputError, match="method"):
        MapSpec(methods=("adam",))


def test_the_cache_resumes_without_recomputing(tmp_path, monkeypatch):
    spec = MapSpec(H=(8,), eta=(2.0,), p=(0.5,), zeta=(1.0,), eps=(0.05,),
                   grid=Grid(n_alpha=4, n_outer=2))  # fmt: skip
    first = run_map(spec, cache_dir=tmp_path, bounds=False)
    assert list(tmp_path.glob("*.json"))

    def boom(*a, **k):
        raise AssertionError("recomputed a cached unit")

    monkeypatch.setattr(run_module, "tune", boom)
    second = run_map(spec, cache_dir=tmp_path, bounds=False)
    assert [c.to_dict()["cost"] for c in first.cells] == [c.to_dict()["cost"] for c in second.cells]


def test_a_problem_file_and_its_zeta(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "eigenvalues: [[1.0, 0.2], [0.3, 0.9]]\nminimisers: [[1.0, -1.0], [-0.5, 2.0]]\n"
        "x0: [2.0, 2.0]\nsigma2: 0.5\n"
    )
    src = ProblemSource(path=str(path))
    own = src.build(None)
    scaled = src.build(2.0)
    assert scaled.zeta2_star == pytest.approx(4.0)
    assert scaled.F0 == pytest.approx(own.F0)
    res = run_map(MapSpec(H=(4,), eta=(2.0,), zeta=None, eps=(0.5,), grid=Grid(4, 2)), src,
                  bounds=False)  # fmt: skip
    assert res.cells[0].zeta is None and res.cells[0].rounds["local_sgd"] is not None


def test_bound_side_scores_and_agreement(small_map):
    ag = small_map.summary["agreement"]
    assert ag["cells"] > 0 and 0 <= ag["winner_agreement"] <= 1
    c = next(c for c in small_map.cells if c.budget == "grads")
    tp = c.bounds["tuned_point"]["local_sgd"]["local_sgd_noniid"]
    assert tp["bound"] > 0 and tp["exact"] > 0
    if tp["inside_conditions"]:
        assert tp["exact"] <= tp["bound"]  # a true bound inside its conditions holds
    assert tp["miss"] in ("F0", "noise", "heterogeneity")


def test_agreement_counts_a_contradicted_bound_win():
    def cell(truth, bound):
        c = CellResult(H=1, eta=1.0, p=0.5, zeta=1.0, eps=0.1, budget="grads", B=1.0,
                       cost={"palsgd": truth, "local_sgd": 1.0}, rounds={}, tuned={})  # fmt: skip
        c.bounds["ratio"] = bound
        return c

    ag = agreement([cell(2.0, 0.5), cell(0.5, 0.5), cell(3.0, 4.0)])
    assert ag["bound_wins_contradicted"] == 1
    assert ag["winner_agreement"] == pytest.approx(2 / 3)


def test_term_families():
    assert term_family("6*H*L**2*alpha**2*zeta**2*(H - 1)") == "heterogeneity"
    assert term_family("2*L*alpha*sigma**2/K") == "noise"
    assert term_family("4*F0/(T*alpha)") == "F0"


def test_time_averages_agree_with_the_simulator():
    prob = make_hetero_hessian(K=3, d=2, zeta=1.0, sigma=0.5, F0=1.0, seed=1)
    q = Quadratic.of(prob)
    ex = exact_averages(q, METHODS["palsgd"], H=5, eta=2.0, p=0.3, alpha=0.2, gamma=1.0, mu=0.0,
                        R=6)  # fmt: skip
    spec = AlgorithmSpec(kind="palsgd", alpha=0.2, H=5, p=0.3, eta=2.0, seed=1)
    g = simulate(prob, spec, T=30, R=40_000, seed=3).grad_norm_sq
    it, an = g.mean(axis=1), g[:, ::5].mean(axis=1)
    assert abs(it.mean() - ex["iterates"][0]) < 5 * it.std() / math.sqrt(it.size)
    assert abs(an.mean() - ex["anchors"][0]) < 5 * an.std() / math.sqrt(an.size)


def test_diagnosis_splits_the_floor():
    q = Quadratic.of(make_hetero_hessian(zeta=3.0, sigma=1.0))
    d = diagnose(q, METHODS["palsgd"], H=64, eta=5.0, p=0.5, alpha=0.01, gamma=1.0, mu=0.0)
    assert 0 < d.rate < 1 and d.consensus > 0
    assert d.bias + d.coin_variance + d.noise == pytest.approx(d.floor, rel=1e-9)
    loc = diagnose(q, METHODS["local_sgd"], H=64, eta=0.0, p=0.0, alpha=0.01, gamma=1.0, mu=0.0)
    assert loc.coin_variance == pytest.approx(0.0, abs=1e-12 * loc.floor)
    assert loc.bias > d.bias  # the pull keeps the mean closer to x*
    sgd = diagnose(q, METHODS["sgd"], H=1, eta=0.0, p=0.0, alpha=0.1, gamma=None, mu=None)
    assert sgd.bias == pytest.approx(0.0, abs=1e-20)  # no drift without local steps


def test_monte_carlo_verdicts_count_overlapping_intervals_as_undecided():
    """A side wins a Monte-Carlo cell only when the intervals separate; the summary counts
    wins, losses and undecided cells for independent and for shared coins."""
    from theory.compare.records import MapResult
    from theory.compare.report import format_summary
    from theory.compare.summary import summarize

    def cell(pal, shared, base):
        cost = {"palsgd": pal[0], "palsgd_shared": shared[0], "local_sgd": base[0]}
        iv = {"palsgd": pal[1:], "palsgd_shared": shared[1:], "local_sgd": base[1:]}
        return CellResult(H=8, eta=1.0, p=0.5, zeta=1.0, eps=0.1, budget="rounds", B=9.0,
                          cost=cost, rounds={}, tuned={}, intervals=iv)  # fmt: skip

    cells = [
        cell((3, 2, 4), (2, 1, 2), (5, 5, 6)),  # both PALSGD win: the intervals separate
        cell((4, 3, 6), (4, 4, 4), (5, 5, 6)),  # independent undecided (6 >= 5), shared wins
        cell((9, 8, 10), (6, 6, 7), (5, 5, 5)),  # both lose
        cell((5, 5, 5), (5, 5, 5), (5, 5, 5)),  # equal costs, intervals touch: undecided
    ]
    assert [c.winner for c in cells] == ["palsgd", "undecided", "baseline", "undecided"]
    assert [c.shared_winner for c in cells] == ["palsgd", "palsgd", "baseline", "undecided"]
    s = summarize(cells)
    assert s["verdicts"] == {"palsgd": 1, "baseline": 1, "tie": 0, "undecided": 2, "neither": 0}
    assert s["shared_verdicts"]["palsgd"] == 2 and s["decided"] == 2
    assert s["groups"][0]["verdicts"]["undecided"] == 2
    text = format_summary(MapResult(cells, {}, {}, "montecarlo", 1.0, s))
    assert "PALSGD cheaper in 1 of 2 decided cells, dearer in 1; 2 undecided" in text
    assert "PALSGD, shared coins cheaper in 2 of 3 decided cells, dearer in 1; 1 undecided" in text
    # without intervals (exact): equal costs tie, nothing is undecided
    exact = CellResult(H=8, eta=1.0, p=0.5, zeta=1.0, eps=0.1, budget="rounds", B=9.0,
                       cost={"palsgd": 5, "local_sgd": 5}, rounds={}, tuned={})  # fmt: skip
    assert exact.winner == "tie" and exact.shared_winner is None

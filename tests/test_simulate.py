"""Tests of theory.simulate: exact step semantics, special cases, common random numbers."""

import math

import numpy as np
import pytest
import torch

import theory.coins as coins
import theory.simulate.numpy_run as numpy_run
from core.errors import UserInputError
from theory.coins import pull_coins
from theory.problems import QuadraticProblem, make_problem
from theory.simulate import AlgorithmSpec, Trace, simulate


# ---------------------------------------------------------------------------------------
# an independent, deliberately naive implementation: loops over replicas and workers
# ---------------------------------------------------------------------------------------
def reference_run(problem, spec, T, R, seed, x0=None):
    rng = np.random.default_rng(seed)
    K, d = problem.K, problem.d
    start = problem.x0() if x0 is None else x0
    X = [[start.copy() for _ in range(K)] for _ in range(R)]
    Z = [start.copy() for _ in range(R)]
    buf = [np.zeros(d) for _ in range(R)]
    m = math.ceil(spec.pull_fraction * d)
    gn = np.zeros((R, T))
    for t in range(T):
        for r in range(R):
            xbar = np.mean(X[r], axis=0)
            gn[r, t] = np.sum(problem.grad(xbar) ** 2)
        draw = problem.draw_randomness(rng, (R,))
        for r in range(R):
            G = problem.stochastic_grads_from(np.stack(X[r]), None if draw is None else draw[r])
            if spec.kind == "sgd" or t < spec.T0:
                x = Z[r] - spec.alpha * G.mean(axis=0)
                Z[r] = x
                X[r] = [x.copy() for _ in range(K)]
                continue
            for k in range(K):
                pull = spec.p > 0 and bool(
                    pull_coins(spec.seed, spec.p, t, k, r, shared=spec.coins == "shared")
                )
                if pull:
                    c = spec.alpha * spec.eta / spec.p
                    X[r][k][:m] = X[r][k][:m] - c * (X[r][k][:m] - Z[r][:m])
                else:
                    X[r][k] = X[r][k] - spec.alpha / (1 - spec.p) * G[k]
            if (t - spec.T0 + 1 + spec.sync_offset) % spec.H == 0:
                xbar = np.mean(X[r], axis=0)
                delta = Z[r] - xbar
                if spec.outer == "average":
                    Z[r] = xbar
                elif spec.outer == "sgd":
                    Z[r] = Z[r] - spec.gamma * delta
                else:
                    for a in range(spec.outer_steps_per_sync):
                        g = delta if a == 0 else np.zeros(d)
                        buf[r] = spec.mu * buf[r] + g
                        Z[r] = Z[r] - spec.gamma * (g + spec.mu * buf[r])
                X[r] = [Z[r].copy() for _ in range(K)]
    return np.array([np.stack(x) for x in X]), np.array(Z), gn


CONFIGS = [
    dict(kind="sgd", alpha=0.1),
    dict(kind="local_sgd", alpha=0.1, H=3),
    dict(kind="post_local_sgd", alpha=0.1, H=3, T0=4),
    dict(kind="diloco", alpha=0.1, H=4, outer="nesterov", gamma=0.7, mu=0.9),
    dict(kind="diloco", alpha=0.1, H=4, outer="sgd", gamma=1.5, T0=2),
    dict(kind="palsgd", alpha=0.1, H=5, p=0.3, eta=1.5),
    dict(kind="palsgd", alpha=0.1, H=5, p=0.3, eta=1.5, coins="shared", seed=3),
    dict(
        kind="palsgd",
        alpha=0.1,
        H=4,
        p=0.2,
        eta=1.0,
        outer="nesterov",
        gamma=0.5,
        mu=0.8,
        T0=3,
        sync_offset=1,
        outer_steps_per_sync=3,
        pull_fraction=0.4,
    ),  # fmt: skip
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c["kind"])
@pytest.mark.parametrize(
    "pname,noise", [("cosine", "gaussian"), ("logistic", "finite_sum"), ("quadratic", "rademacher")]
)
def test_vectorised_equals_naive_loops(cfg, pname, noise):
    prob = make_problem(pname, K=3, d=5, noise=noise, zeta=0.0 if noise == "finite_sum" else 0.5)
    spec = AlgorithmSpec(**cfg)
    tr = simulate(prob, spec, T=17, R=2, seed=11)
    X, Z, gn = reference_run(prob, spec, 17, 2, 11)
    np.testing.assert_allclose(tr.final_x, X, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(tr.anchor, Z, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(tr.grad_norm_sq, gn, rtol=1e-11, atol=1e-13)


def test_coin_chunks_do_not_change_the_trajectory(monkeypatch):
    prob = make_problem("cosine", K=3, d=4, noise="gaussian", zeta=0.5)
    spec = AlgorithmSpec("palsgd", 0.1, H=4, p=0.4, eta=1.0, T0=3)
    monkeypatch.setattr(coins, "COIN_CHUNK_ELEMS", 5 * 2 * 3)  # chunks of 5 steps
    tr = simulate(prob, spec, T=23, R=2, seed=4)
    X, Z, gn = reference_run(prob, spec, 23, 2, 4)
    np.testing.assert_allclose(tr.final_x, X, rtol=1e-12, atol=1e-13)
    expect = pull_coins(
        0, 0.4, np.arange(3, 23)[:, None, None], np.arange(3), np.arange(2)[:, None]
    )
    np.testing.assert_array_equal(tr.pull_steps, expect.sum(0))


# ---------------------------------------------------------------------------------------
# hand-computed steps on f_1 = 1/2 ||x - b_1||_A^2, f_2 = 1/2 ||x - b_2||_A^2, A = diag(1, 2)
# ---------------------------------------------------------------------------------------
def _hand_problem(b=((1.0, 0.0), (0.0, 1.0))):
    return QuadraticProblem(
        K=2, d=2, eigenvalues=np.array([1.0, 2.0]), b=np.array(b), noise="none", sigma2=0.0
    )


def test_sgd_two_steps_by_hand():
    # g_1(0) = (-1, 0), g_2(0) = (0, -2): x1 = -0.1 * (-0.5, -1) = (0.05, 0.1)
    # g_1(x1) = (-0.95, 0.2), g_2(x1) = (0.05, -1.8): x2 = x1 + 0.1 * (0.45, 0.8) = (0.095, 0.18)
    tr = simulate(_hand_problem(), AlgorithmSpec("sgd", alpha=0.1), T=2, R=1, seed=0)
    np.testing.assert_allclose(tr.final_x[0], [[0.095, 0.18], [0.095, 0.18]], rtol=1e-14)
    np.testing.assert_array_equal(tr.comm_rounds, [0, 1])
    np.testing.assert_array_equal(tr.consensus, 0.0)
    np.testing.assert_array_equal(tr.grad_evals[0], [0, 1])


def test_local_sgd_round_by_hand():
    # worker 1: (0,0) -> (0.1, 0) -> (0.1 + 0.1*0.9, 0) = (0.19, 0)
    # worker 2: (0,0) -> (0, 0.2) -> (0, 0.2 + 0.1*1.6) = (0, 0.36); average (0.095, 0.18)
    tr = simulate(_hand_problem(), AlgorithmSpec("local_sgd", alpha=0.1, H=2), T=2, R=1, seed=0)
    np.testing.assert_allclose(tr.anchor[0], [0.095, 0.18], rtol=1e-14)
    np.testing.assert_allclose(tr.final_x[0], [[0.095, 0.18]] * 2, rtol=1e-14)
    # before step 1: x = (0.1, 0), (0, 0.2); xbar = (0.05, 0.1); z = 0
    np.testing.assert_allclose(tr.consensus[0], [0.0, 0.0125], rtol=1e-13)
    np.testing.assert_allclose(tr.anchor_dist[0], [0.0, 0.025], rtol=1e-13)
    np.testing.assert_array_equal(tr.comm_rounds, [0, 0])
    assert tr.final_grad_norm_sq[0] == pytest.approx((0.095 - 0.5) ** 2 + (2 * (0.18 - 0.5)) ** 2)


@pytest.mark.parametrize(
    "outer,A,expected",
    [
        ("sgd", 1, [0.0475, 0.09]),  # z = 0 - 0.5 * Delta, Delta = -(0.095, 0.18)
        ("nesterov", 1, [0.09025, 0.171]),  # buf = Delta; z = -0.5 (Delta + 0.9 Delta)
        # two extra outer steps on zero gradient: buf = 0.9 Delta, 0.81 Delta; each moves
        # z by -0.5 * 0.9 * buf
        ("nesterov", 3, [0.09025 + 0.405 * 0.095 + 0.3645 * 0.095,
                         0.171 + 0.405 * 0.18 + 0.3645 * 0.18]),
    ],
)  # fmt: skip
def test_outer_steps_by_hand(outer, A, expected):
    spec = AlgorithmSpec("diloco", 0.1, H=2, outer=outer, gamma=0.5, mu=0.9, outer_steps_per_sync=A)
    tr = simulate(_hand_problem(), spec, T=3, R=1, seed=0)
    # after the sync at t = 1 every worker restarts from z; record before step 2
    z = np.array(expected)
    assert tr.anchor_dist[0, 2] == 0.0 and tr.consensus[0, 2] == 0.0
    np.testing.assert_allclose(tr.anchor[0], z, rtol=1e-13)
    np.testing.assert_array_equal(tr.comm_rounds, [0, 0, A])


def _find_coin_seed(p, want):
    """A coin seed whose independent coins at steps 0, 1 for workers 0, 1 are ``want``."""
    for s in range(10000):
        c = pull_coins(s, p, np.arange(2)[:, None], np.arange(2)[None, :], 0)
        if np.array_equal(c, want):
            return s
    raise AssertionError("no seed found")


@pytest.mark.parametrize("pf,expected_w1", [(1.0, [0.12, 0.24]), (0.5, [0.12, 0.4])])
def test_palsgd_pull_and_gradient_branches_by_hand(pf, expected_w1):
    # p = 0.5, eta = 2, alpha = 0.1: pull coefficient 0.4, gradient lr 0.2.
    # b_1 = (1, 1), b_2 = (0, 1). Step 0 both gradient: w1 = 0.2 * (1, 2) = (0.2, 0.4),
    # w2 = (0, 0.4). Step 1: w1 pulls towards z = 0: 0.6 * w1 = (0.12, 0.24) (first coordinate
    # only with pull_fraction 0.5); w2 gradient: g = (0, 2 (0.4 - 1)) -> (0, 0.4 + 0.24).
    seed = _find_coin_seed(0.5, np.array([[False, False], [True, False]]))
    spec = AlgorithmSpec("palsgd", 0.1, H=10, p=0.5, eta=2.0, seed=seed, pull_fraction=pf)
    tr = simulate(_hand_problem(b=((1.0, 1.0), (0.0, 1.0))), spec, T=2, R=1, seed=0)
    np.testing.assert_allclose(tr.final_x[0, 0], expected_w1, rtol=1e-14)
    np.testing.assert_allclose(tr.final_x[0, 1], [0.0, 0.64], rtol=1e-14)
    np.testing.assert_array_equal(tr.pull_steps, [[1, 0]])
    assert tr.final_x.shape == (1, 2, 2)


def test_pull_fraction_leaves_the_tail_untouched():
    prob = make_problem("cosine", K=4, d=10, noise="gaussian", zeta=0.3)
    # shared coins: step 0 a gradient step, steps 1 and 2 pulls
    seed = next(
        s for s in range(10000)
        if list(pull_coins(s, 0.5, np.arange(3), 0, 0)) == [False, True, True]
    )  # fmt: skip
    spec = AlgorithmSpec("palsgd", 0.05, H=1000, p=0.5, eta=1.0, pull_fraction=0.3,
                         coins="shared", seed=seed)  # fmt: skip
    a = simulate(prob, spec, T=1, R=1, seed=2)
    b = simulate(prob, spec, T=3, R=1, seed=2)
    np.testing.assert_array_equal(a.final_x[..., 3:], b.final_x[..., 3:])
    # pulled twice towards z = x0 with coefficient 0.05 * 1 / 0.5 = 0.1
    x0 = prob.x0()[:3]
    np.testing.assert_allclose(
        b.final_x[..., :3] - x0, 0.81 * (a.final_x[..., :3] - x0), rtol=1e-12
    )


def test_nesterov_outer_matches_torch_sgd():
    prob = make_problem("cosine", K=3, d=4, noise="none", zeta=0.8)
    H, A, rounds, alpha = 3, 2, 4, 0.05
    spec = AlgorithmSpec("diloco", alpha, H=H, outer="nesterov", gamma=0.7, mu=0.9,
                         outer_steps_per_sync=A)  # fmt: skip
    tr = simulate(prob, spec, T=H * rounds, R=1, seed=0)
    torch.set_num_threads(1)
    z = torch.tensor(prob.x0(), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([z], lr=0.7, momentum=0.9, nesterov=True)
    for _ in range(rounds):
        X = np.broadcast_to(z.detach().numpy(), (3, 4)).copy()
        for _ in range(H):
            X = X - alpha * prob.local_grads(X)
        delta = z.detach().numpy() - X.mean(axis=0)
        z.grad = torch.tensor(delta)
        opt.step()
        for _ in range(A - 1):
            z.grad = torch.zeros(4, dtype=torch.float64)
            opt.step()
    np.testing.assert_allclose(tr.anchor[0], z.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert tr.comm_rounds[-1] == (rounds - 1) * A


def test_shared_and_independent_coins():
    prob = make_problem("quadratic", K=4, d=3, noise="gaussian")
    T, R, p = 300, 3, 0.4
    shared = simulate(prob, AlgorithmSpec("palsgd", 0.05, H=7, p=p, eta=1, coins="shared",
                                          seed=5), T=T, R=R, seed=0)  # fmt: skip
    indep = simulate(prob, AlgorithmSpec("palsgd", 0.05, H=7, p=p, eta=1, seed=5), T=T, R=R, seed=0)
    expect_shared = pull_coins(5, p, np.arange(T)[:, None], 0, np.arange(R)[None, :]).sum(0)
    for k in range(4):
        np.testing.assert_array_equal(shared.pull_steps[:, k], expect_shared)
    expect = pull_coins(5, p, np.arange(T)[:, None, None], np.arange(4), np.arange(R)[:, None])
    np.testing.assert_array_equal(indep.pull_steps, expect.sum(0))
    assert not np.all(indep.pull_steps == indep.pull_steps[:, :1])
    # gradient evaluations per worker: T minus the mean number of pulls
    np.testing.assert_allclose(indep.final_grad_norm_sq.shape, (R,))
    ge_end = indep.grad_evals[:, -1] + (1 - expect[-1].mean(-1))
    np.testing.assert_allclose(ge_end, T - indep.pull_steps.mean(1))


@pytest.mark.parametrize("coins", ["independent", "shared"])
def test_pull_frequency_matches_p(coins):
    prob = make_problem("quadratic", K=5, d=2, noise="none")
    p, T, R, T0 = 0.3, 400, 10, 20
    tr = simulate(prob, AlgorithmSpec("palsgd", 0.05, H=8, p=p, eta=1.0, coins=coins, T0=T0,
                                      seed=1), T=T, R=R, seed=0)  # fmt: skip
    n_coins = (T - T0) * R * (prob.K if coins == "independent" else 1)
    freq = tr.pull_steps.sum() / ((T - T0) * R * prob.K)
    assert abs(freq - p) < 4.5 * math.sqrt(p * (1 - p) / n_coins)


def test_p0_palsgd_equals_local_sgd_exactly():
    prob = make_problem("cosine", K=4, d=6, noise="gaussian", zeta=0.5)
    a = simulate(prob, AlgorithmSpec("palsgd", 0.1, H=5, p=0.0, eta=3.0), T=40, R=3, seed=9)
    b = simulate(prob, AlgorithmSpec("local_sgd", 0.1, H=5), T=40, R=3, seed=9)
    for f in ("final_x", "anchor", "grad_norm_sq", "consensus", "anchor_dist", "grad_evals"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("pname", ["cosine", "logistic", "quadratic"])
def test_H1_local_sgd_equals_minibatch_sgd(pname):
    prob = make_problem(pname, K=4, d=5, noise="gaussian", zeta=0.4)
    a = simulate(prob, AlgorithmSpec("local_sgd", 0.1, H=1), T=50, R=3, seed=4)
    b = simulate(prob, AlgorithmSpec("sgd", 0.1), T=50, R=3, seed=4)
    np.testing.assert_allclose(a.final_x, b.final_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.grad_norm_sq, b.grad_norm_sq, rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(a.comm_rounds[1:], b.comm_rounds[1:] + 0)


def test_local_sgd_average_follows_minibatch_sgd_on_quadratics():
    """Additive noise on a quadratic: the averaged iterate of Local SGD is minibatch SGD
    (gradients are affine, Woodworth et al. 2020), for any H, with outer averaging."""
    prob = make_problem("quadratic", K=4, d=6, noise="gaussian", zeta=1.0)
    a = simulate(prob, AlgorithmSpec("local_sgd", 0.2, H=7), T=60, R=2, seed=1)
    b = simulate(prob, AlgorithmSpec("sgd", 0.2), T=60, R=2, seed=1)
    np.testing.assert_allclose(a.grad_norm_sq, b.grad_norm_sq, rtol=1e-9)
    assert np.max(a.consensus) > 1e-3  # the workers really drift apart


def simulate_recording_draws(prob, spec, seed, T, R=2):
    """``simulate(prob, spec, ...)`` and a copy of every noise draw it made."""
    draws = []
    orig = prob.draw_randomness

    def recording(rng, prefix, out=None):
        dr = orig(rng, prefix, out)
        draws.append(dr.copy())
        return dr

    prob.draw_randomness = recording
    try:
        return simulate(prob, spec, T=T, R=R, seed=seed), draws
    finally:
        del prob.draw_randomness


def test_common_random_numbers_across_algorithms():
    prob = make_problem("cosine", K=3, d=4, noise="gaussian")
    logs: dict[str, list] = {}

    def run(label, spec, seed):
        logs[label] = simulate_recording_draws(prob, spec, seed, 30)[1]

    run("sgd", AlgorithmSpec("sgd", 0.1), 7)
    run("pal", AlgorithmSpec("palsgd", 0.1, H=4, p=0.5, eta=1.0, coins="shared"), 7)
    run("other", AlgorithmSpec("sgd", 0.1), 8)
    assert len(logs["sgd"]) == len(logs["pal"]) == 30
    np.testing.assert_array_equal(np.stack(logs["sgd"]), np.stack(logs["pal"]))
    assert not np.array_equal(np.stack(logs["sgd"]), np.stack(logs["other"]))


def test_sync_offset_and_schedule():
    prob = make_problem("quadratic", K=2, d=3, noise="gaussian")
    for off, syncs in [(0, [3, 7]), (1, [2, 6])]:
        spec = AlgorithmSpec("palsgd", 0.1, H=4, p=0.2, eta=1.0, sync_offset=off)
        assert [t for t in range(10) if spec.is_sync_step(t)] == syncs
        tr = simulate(prob, spec, T=10, R=2, seed=0)
        expected = np.array([sum(s < t for s in syncs) for t in range(10)])
        np.testing.assert_array_equal(tr.comm_rounds, expected)
        for s in syncs:
            np.testing.assert_array_equal(tr.anchor_dist[:, s + 1], 0.0)
            np.testing.assert_array_equal(tr.consensus[:, s + 1], 0.0)
        assert np.all(tr.anchor_dist[:, syncs[0]] > 0)


def test_T0_warmup_is_minibatch_sgd_then_local():
    prob = make_problem("cosine", K=3, d=4, noise="gaussian", zeta=0.5)
    T0, H = 5, 3
    a = simulate(prob, AlgorithmSpec("post_local_sgd", 0.1, H=H, T0=T0), T=12, R=2, seed=3)
    b = simulate(prob, AlgorithmSpec("sgd", 0.1), T=12, R=2, seed=3)
    np.testing.assert_array_equal(a.grad_norm_sq[:, : T0 + 1], b.grad_norm_sq[:, : T0 + 1])
    # identical workers (the mean of K equal rows can differ from them in the last bit)
    np.testing.assert_allclose(a.consensus[:, : T0 + 1], 0.0, atol=1e-25)
    assert np.all(a.consensus[:, T0 + 1] > 0)
    # T0 all-reduces, then one per round: rounds end after t = 7 and t = 10
    np.testing.assert_array_equal(a.comm_rounds, [0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 6, 7])
    assert not np.array_equal(a.final_x, b.final_x)


def test_eta_zero_makes_pulls_no_ops_but_skips_gradients():
    prob = make_problem("quadratic", K=2, d=3, noise="none")
    tr = simulate(prob, AlgorithmSpec("palsgd", 0.1, H=100, p=0.5, eta=0.0), T=20, R=4, seed=0)
    ref = reference_run(prob, AlgorithmSpec("palsgd", 0.1, H=100, p=0.5, eta=0.0), 20, 4, 0)
    np.testing.assert_allclose(tr.final_x, ref[0], rtol=1e-13)
    assert np.all(tr.grad_evals[:, -1] < 19)


@pytest.mark.parametrize("pname", ["quadratic", "cosine"])
@pytest.mark.parametrize("noise", ["gaussian", "finite_sum", "none"])
@pytest.mark.parametrize("elems,blocks", [(1000, (1, 333)), (5000, (2, 700))])
def test_blocked_path_is_bitwise_identical(pname, noise, elems, blocks, monkeypatch):
    monkeypatch.setattr(numpy_run, "BLOCK_ELEMS", elems)  # several blocks of replicas / coords
    assert numpy_run.blocks_for(5, 3, 700) == blocks
    kw = {"n_samples": 4} if noise == "finite_sum" else {}
    prob = make_problem(pname, K=3, d=700, noise=noise, zeta=0.5, **kw)
    # pull_fraction 0.6: the pulled coordinates end inside the second coordinate block
    spec = AlgorithmSpec("palsgd", 0.05, H=3, p=0.3, eta=1.0, pull_fraction=0.6, T0=2)
    a = simulate(prob, spec, T=9, R=5, seed=1, blocked=True)
    b = simulate(prob, spec, T=9, R=5, seed=1, blocked=False)
    np.testing.assert_array_equal(a.final_x, b.final_x)
    np.testing.assert_array_equal(a.grad_norm_sq, b.grad_norm_sq)
    c = simulate(prob, AlgorithmSpec("local_sgd", 0.05, H=3), T=9, R=5, seed=1, blocked=True)
    e = simulate(prob, AlgorithmSpec("local_sgd", 0.05, H=3), T=9, R=5, seed=1, blocked=False)
    np.testing.assert_array_equal(c.final_x, e.final_x)


def test_trace_shapes_and_json(tmp_path):
    prob = make_problem("logistic", K=3, d=4, zeta=0.2)
    spec = AlgorithmSpec("palsgd", 0.1, H=4, p=0.25, eta=1.0)
    tr = simulate(prob, spec, T=10, R=5, seed=0, record_every=3)
    assert isinstance(tr, Trace)
    np.testing.assert_array_equal(tr.steps, [0, 3, 6, 9])
    for f in ("grad_norm_sq", "loss_gap", "consensus", "anchor_dist", "grad_evals"):
        assert getattr(tr, f).shape == (5, 4)
    assert tr.comm_rounds.shape == (4,)
    assert tr.final_x.shape == (5, 3, 4) and tr.anchor.shape == (5, 4)
    assert tr.pull_steps.shape == (5, 3)
    with pytest.raises(UserInputError, match="record_every=1"):
        tr.mean_grad_norm_sq()
    full = simulate(prob, spec, T=10, R=5, seed=0)
    np.testing.assert_array_equal(full.grad_norm_sq[:, ::3], tr.grad_norm_sq)
    np.testing.assert_allclose(full.mean_grad_norm_sq(), full.grad_norm_sq.mean(1))
    tr.save_json(str(tmp_path / "t.json"))
    import json

    data = json.loads((tmp_path / "t.json").read_text())
    assert data["spec"]["kind"] == "palsgd" and len(data["grad_norm_sq"]) == 5
    # x0 per replica
    x0 = np.arange(20.0).reshape(5, 4) / 10
    tr2 = simulate(prob, spec, T=1, R=5, seed=0, x0=x0)
    np.testing.assert_allclose(tr2.loss_gap[:, 0], prob.f(x0) - prob.f_star)


def test_spec_aliases_and_properties():
    s = AlgorithmSpec.from_params("palsgd", lr=0.1, prob_no_grad=0.2, sync_interval=8, eta=1.0,
                                  outer="sgd", outer_lr=0.7, local_sgd_start_iter=4)  # fmt: skip
    assert (s.alpha, s.p, s.H, s.gamma, s.T0) == (0.1, 0.2, 8, 0.7, 4)
    assert s.pull_coef == pytest.approx(0.5) and s.grad_lr == pytest.approx(0.125)
    assert AlgorithmSpec("local_sgd", 0.1).pull_coef == 0.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(kind="adam", alpha=0.1), "unknown algorithm kind"),
        (dict(kind="palsgd", alpha=0.1, outer="adam"), "unknown outer"),
        (dict(kind="palsgd", alpha=0.1, coins="some"), "unknown coins"),
        (dict(kind="palsgd", alpha=0.1, p=1.0), "'p'"),
        (dict(kind="palsgd", alpha=0.0), "'alpha'"),
        (dict(kind="palsgd", alpha=0.1, H=0), "'H'"),
        (dict(kind="palsgd", alpha=0.1, mu=1.0), "'mu'"),
        (dict(kind="local_sgd", alpha=0.1, p=0.2), "pull steps exist only in 'palsgd'"),
        (
            dict(kind="local_sgd", alpha=0.1, outer="nesterov"),
            "takes the outer update.*use 'diloco'",
        ),
        (dict(kind="palsgd", alpha=0.1, gamma=0.7), "outer='average'"),
        (dict(kind="diloco", alpha=0.1, coins="shared"), "coin model of pull steps"),
        (dict(kind="local_sgd", alpha=0.1, T0=3), "post_local_sgd"),
        (dict(kind="post_local_sgd", alpha=0.1), "'T0'"),
        (dict(kind="diloco", alpha=0.1, outer="average"), "takes the outer update"),
        (dict(kind="easgd", alpha=0.1, outer="sgd"), "takes the outer update"),
        (dict(kind="palsgd", alpha=0.1, pull_fraction=0.0), "pull_fraction"),
        (dict(kind="palsgd", alpha=0.1, pull_fraction=1.5), "pull_fraction"),
        (dict(kind="palsgd", alpha=0.1, outer_steps_per_sync=0), "outer_steps_per_sync"),
        (dict(kind="palsgd", alpha=0.1, sync_offset=-1), "sync_offset"),
        (dict(kind="palsgd", alpha=0.1, seed=-2), "seed"),
    ],
)
def test_spec_errors(kwargs, match):
    with pytest.raises(UserInputError, match=match):
        AlgorithmSpec(**kwargs)


def test_simulate_errors():
    prob = make_problem("quadratic", K=3, d=4)
    spec = AlgorithmSpec("local_sgd", 0.1, H=2)
    with pytest.raises(UserInputError, match="'T'"):
        simulate(prob, spec, T=0, R=1, seed=0)
    with pytest.raises(UserInputError, match="'R'"):
        simulate(prob, spec, T=5, R=0, seed=0)
    with pytest.raises(UserInputError, match="does not match"):
        simulate(prob, spec, T=5, R=1, seed=0, K=4)
    with pytest.raises(UserInputError, match="x0 must have shape"):
        simulate(prob, spec, T=5, R=2, seed=0, x0=np.zeros(5))
    with pytest.raises(UserInputError, match="record_every"):
        simulate(prob, spec, T=5, R=2, seed=0, record_every=0)
    with pytest.raises(UserInputError, match="seed"):
        simulate(prob, spec, T=5, R=2, seed=-1)
    with pytest.raises(UserInputError, match="separable"):
        simulate(make_problem("logistic", K=3, d=4), spec, T=5, R=1, seed=0, blocked=True)
    with pytest.raises(UserInputError, match="AlgorithmSpec"):
        simulate(prob, {"kind": "sgd"}, T=5, R=1, seed=0)
    assert simulate(prob, spec, T=5, R=1, seed=0, K=3).final_x.shape == (1, 3, 4)

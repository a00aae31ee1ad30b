"""Tests of EASGD in theory.simulate (kind ``"easgd"``).

Semantics under test (Wang and Joshi, Cooperative SGD, JMLR 22(213), 2021, eqs. (4), (5),
(11)): every step ``x_k <- x_k - alpha g_k(x_k)``; after the steps ``t`` with
``(t + 1) % H == 0`` the elastic mixing ``x_k <- (1 - a) x_k + a z``,
``z <- (1 - K a) z + a sum_k x_k`` (pre-mixing values on the right). The recorded
gradient norm is taken at ``u = (sum_k x_k + z)/(K + 1)``.
"""

import numpy as np
import pytest
from test_simulate import simulate_recording_draws

import theory.simulate.numpy_run as numpy_run
from core.errors import UserInputError
from core.validation import ParameterError
from theory import verify as V
from theory.problems import QuadraticProblem, make_problem
from theory.simulate import AlgorithmSpec, simulate

# ---------------------------------------------------------------------------------------
# hand-computed steps: f_k = 1/2 (x - b_k)^T A (x - b_k), A = diag(1, 2), no noise, x0 = 0
# ---------------------------------------------------------------------------------------
B2 = ((1.0, 0.0), (0.0, 1.0))
B3 = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))


def _hand_problem(b):
    b = np.array(b)
    return QuadraticProblem(
        K=len(b), d=2, eigenvalues=np.array([1.0, 2.0]), b=b, noise="none", sigma2=0.0
    )


def _grad_f(b, v):
    """grad f(v) = A (v - mean_k b_k) for the hand problems."""
    return np.array([1.0, 2.0]) * (np.asarray(v) - np.mean(b, axis=0))


# (b, H, T, a, expected workers, expected centre); alpha = 0.1 everywhere
HAND_CASES = [
    # K = 2, a = 2/(K+2) = 1/2, mixing after every step (H = 1).
    # t = 0: g_1(0) = (-1, 0), g_2(0) = (0, -2) -> w_1 = (0.1, 0), w_2 = (0, 0.2);
    # mix: x_k = w_k/2 + z/2 = (0.05, 0), (0, 0.1); z = (1 - 1) 0 + (w_1 + w_2)/2 = (0.05, 0.1)
    pytest.param(B2, 1, 1, None, [[0.05, 0.0], [0.0, 0.1]], [0.05, 0.1], id="K2-one-step"),
    # t = 1: g_1 = (-0.95, 0), g_2 = (0, -1.8) -> w_1 = (0.145, 0), w_2 = (0, 0.28);
    # mix: x_1 = (0.0725, 0) + (0.025, 0.05), x_2 = (0, 0.14) + (0.025, 0.05);
    # z = 0 * z + (0.145, 0.28)/2
    pytest.param(
        B2, 1, 2, None, [[0.0975, 0.05], [0.025, 0.19]], [0.0725, 0.14], id="K2-two-steps"
    ),
    # H = 2: t = 0 plain SGD (w_1 = (0.1, 0), w_2 = (0, 0.2), z = 0); t = 1:
    # g_1 = (-0.9, 0), g_2 = (0, -1.6) -> w_1 = (0.19, 0), w_2 = (0, 0.36); mix with z = 0:
    # x_k = w_k/2, z = (w_1 + w_2)/2 = (0.095, 0.18)
    pytest.param(B2, 2, 2, None, [[0.095, 0.0], [0.0, 0.18]], [0.095, 0.18], id="K2-sgd-then-mix"),
    # K = 3, a = 2/5. t = 0: g = (-1, 0), (0, -2), (-1, -2) -> w = (0.1, 0), (0, 0.2),
    # (0.1, 0.2); mix: x_k = 0.6 w_k; z = (1 - 1.2) 0 + 0.4 (0.2, 0.4) = (0.08, 0.16)
    pytest.param(
        B3, 1, 1, None, [[0.06, 0.0], [0.0, 0.12], [0.06, 0.12]], [0.08, 0.16], id="K3-one-step"
    ),
    # t = 1: g = (-0.94, 0), (0, -1.76), (-0.94, -1.76) -> w = (0.154, 0), (0, 0.296),
    # (0.154, 0.296); mix: x_k = 0.6 w_k + 0.4 (0.08, 0.16) = 0.6 w_k + (0.032, 0.064);
    # z = -0.2 (0.08, 0.16) + 0.4 (0.308, 0.592) = (0.1072, 0.2048)
    pytest.param(
        B3,
        1,
        2,
        None,
        [[0.1244, 0.064], [0.032, 0.2416], [0.1244, 0.2416]],
        [0.1072, 0.2048],
        id="K3-two-steps",
    ),
    # K = 3 with a user coefficient a = 0.2, H = 1, one step: x_k = 0.8 w_k,
    # z = (1 - 0.6) 0 + 0.2 (0.2, 0.4) = (0.04, 0.08)
    pytest.param(
        B3,
        1,
        1,
        0.2,
        [[0.08, 0.0], [0.0, 0.16], [0.08, 0.16]],
        [0.04, 0.08],
        id="K3-a0.2-one-step",
    ),
]


@pytest.mark.parametrize("b,H,T,a,workers,centre", HAND_CASES)
def test_easgd_steps_by_hand(b, H, T, a, workers, centre):
    spec = AlgorithmSpec("easgd", alpha=0.1, H=H, easgd_alpha=a)
    tr = simulate(_hand_problem(b), spec, T=T, R=1, seed=0)
    np.testing.assert_allclose(tr.final_x[0], workers, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(tr.anchor[0], centre, rtol=1e-13, atol=1e-16)
    # the final gradient norm is at u = (sum_k x_k + z)/(K+1), not at the workers' mean
    u = (np.sum(workers, axis=0) + np.array(centre)) / (len(b) + 1)
    g = _grad_f(b, u)
    assert tr.final_grad_norm_sq[0] == pytest.approx(g @ g, rel=1e-13)
    xbar = np.mean(workers, axis=0)
    assert not np.allclose(_grad_f(b, xbar) @ _grad_f(b, xbar), g @ g, rtol=1e-6)
    # one all-reduce per mixing (record before each step)
    mixes = [sum((s + 1) % H == 0 for s in range(t)) for t in range(T)]
    np.testing.assert_array_equal(tr.comm_rounds, mixes)
    np.testing.assert_array_equal(tr.grad_evals[0], np.arange(T))


def test_recorded_quantities_by_hand():
    # K = 2, H = 2, recorded before step 1: x_1 = (0.1, 0), x_2 = (0, 0.2), z = 0 (no mixing
    # yet). u = (0.1, 0.2)/3, xbar = (0.05, 0.1).
    tr = simulate(_hand_problem(B2), AlgorithmSpec("easgd", 0.1, H=2), T=3, R=1, seed=0)
    u = np.array([0.1, 0.2]) / 3
    g = _grad_f(B2, u)
    assert tr.grad_norm_sq[0, 0] == pytest.approx(1.25, rel=1e-14)  # u_0 = 0: A (-1/2, -1/2)
    assert tr.grad_norm_sq[0, 1] == pytest.approx(g @ g, rel=1e-13)
    prob = _hand_problem(B2)
    assert tr.loss_gap[0, 1] == pytest.approx(float(prob.f(u)) - prob.f_star, rel=1e-13)
    # consensus (1/2)(|(0.05, -0.1)|^2 + |(-0.05, 0.1)|^2), anchor (1/2)(0.1^2 + 0.2^2)
    assert tr.consensus[0, 1] == pytest.approx(0.0125, rel=1e-13)
    assert tr.anchor_dist[0, 1] == pytest.approx(0.025, rel=1e-13)
    # before step 2: after the mixing x_k = w_k/2, z = (0.095, 0.18) (see HAND_CASES)
    X = np.array([[0.095, 0.0], [0.0, 0.18]])
    z = np.array([0.095, 0.18])
    assert tr.anchor_dist[0, 2] == pytest.approx(np.mean(np.sum((X - z) ** 2, axis=1)))
    assert tr.consensus[0, 2] == pytest.approx(np.mean(np.sum((X - X.mean(0)) ** 2, axis=1)))


# ---------------------------------------------------------------------------------------
# the averaged variable u moves by -(K alpha/(K+1)) mean_k g_k(x_k) at every step
# ---------------------------------------------------------------------------------------
def _states(prob, spec, T, R, seed, x0=None):
    """(X_t, z_t) for t = 0..T, from runs of length t (the simulator is deterministic)."""
    start = np.broadcast_to(prob.x0() if x0 is None else x0, (R, prob.d))
    Xs = [np.repeat(start[:, None, :], prob.K, axis=1)]
    Zs = [start.copy()]
    for t in range(1, T + 1):
        tr = simulate(prob, spec, T=t, R=R, seed=seed, x0=x0)
        Xs.append(tr.final_x)
        Zs.append(tr.anchor)
    return Xs, Zs


@pytest.mark.parametrize("K,H,a,offset", [(3, 3, None, 0), (4, 2, 0.3, 1), (2, 1, 0.6, 0)], ids=str)
def test_averaged_variable_follows_eta_eff_identity(K, H, a, offset):
    prob = make_problem("cosine", K=K, d=5, noise="gaussian", zeta=0.5, seed=2)
    alpha, R, T, seed = 0.08, 3, 11, 17
    spec = AlgorithmSpec("easgd", alpha, H=H, easgd_alpha=a, sync_offset=offset)
    rng = np.random.default_rng(123)
    x0 = rng.normal(size=(R, prob.d))
    Xs, Zs = _states(prob, spec, T, R, seed, x0)
    noise_rng = np.random.default_rng(seed)  # the simulator's noise stream
    eta_eff = K * alpha / (K + 1)
    mixed = 0
    for t in range(T):
        draw = prob.draw_randomness(noise_rng, (R,))
        g = prob.stochastic_grads_from(Xs[t], draw)
        u0 = (Xs[t].sum(axis=1) + Zs[t]) / (K + 1)
        u1 = (Xs[t + 1].sum(axis=1) + Zs[t + 1]) / (K + 1)
        np.testing.assert_allclose(u1, u0 - eta_eff * g.mean(axis=1), rtol=1e-12, atol=1e-13)
        if spec.is_sync_step(t):
            mixed += 1
            # the workers' mean alone is not preserved by the mixing: z != xbar here
            assert not np.allclose(Zs[t + 1], Xs[t + 1].mean(axis=1))
    assert mixed == sum(spec.is_sync_step(t) for t in range(T)) >= 3


# ---------------------------------------------------------------------------------------
# special cases and common random numbers
# ---------------------------------------------------------------------------------------
def test_zero_elastic_coefficient_is_independent_sgd_with_frozen_centre():
    prob = make_problem("quadratic", K=3, d=4, noise="gaussian", zeta=0.7, seed=1)
    R, T, alpha, seed = 2, 9, 0.1, 5
    tr = simulate(prob, AlgorithmSpec("easgd", alpha, H=2, easgd_alpha=0.0), T=T, R=R, seed=seed)
    # reference: every worker runs SGD on its own f_k with the same noise stream
    rng = np.random.default_rng(seed)
    X = np.broadcast_to(prob.x0(), (R, 3, 4)).copy()
    for _ in range(T):
        X = X - alpha * prob.stochastic_grads_from(X, prob.draw_randomness(rng, (R,)))
    np.testing.assert_allclose(tr.final_x, X, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(tr.anchor, np.broadcast_to(prob.x0(), (R, 4)))
    assert np.max(tr.consensus) > 1e-3  # the workers really drift apart
    # same trajectory as Local SGD that never averages within the horizon
    never = simulate(prob, AlgorithmSpec("local_sgd", alpha, H=T + 1), T=T, R=R, seed=seed)
    np.testing.assert_array_equal(tr.final_x, never.final_x)


def test_common_random_numbers_with_other_kinds():
    prob = make_problem("cosine", K=3, d=4, noise="gaussian", zeta=0.5)
    logs: dict[str, list] = {}

    def run(label, spec, seed, T=12):
        tr, logs[label] = simulate_recording_draws(prob, spec, seed, T)
        return tr

    e = run("easgd", AlgorithmSpec("easgd", 0.1, H=3), 7)
    run("local", AlgorithmSpec("local_sgd", 0.1, H=3), 7)
    run("pal", AlgorithmSpec("palsgd", 0.1, H=4, p=0.3, eta=1.0), 7)
    run("other", AlgorithmSpec("easgd", 0.1, H=3), 8)
    assert len(logs["easgd"]) == 12
    np.testing.assert_array_equal(np.stack(logs["easgd"]), np.stack(logs["local"]))
    np.testing.assert_array_equal(np.stack(logs["easgd"]), np.stack(logs["pal"]))
    assert not np.array_equal(np.stack(logs["easgd"]), np.stack(logs["other"]))
    # before the first mixing (after step H - 1 = 2) EASGD and Local SGD coincide
    a = run("e2", AlgorithmSpec("easgd", 0.1, H=3), 7, T=2)
    b = run("l2", AlgorithmSpec("local_sgd", 0.1, H=3), 7, T=2)
    np.testing.assert_array_equal(a.final_x, b.final_x)
    assert not np.allclose(e.final_x, run("l12", AlgorithmSpec("local_sgd", 0.1, H=3), 7).final_x)


def test_warmup_then_easgd():
    prob = make_problem("cosine", K=3, d=4, noise="gaussian", zeta=0.5)
    T0 = 4
    a = simulate(prob, AlgorithmSpec("easgd", 0.1, H=3, T0=T0), T=10, R=2, seed=3)
    b = simulate(prob, AlgorithmSpec("sgd", 0.1), T=10, R=2, seed=3)
    # during warm-up u = x (workers and centre equal); the mean of K + 1 equal rows may
    # differ from them in the last bit
    np.testing.assert_allclose(a.grad_norm_sq[:, : T0 + 1], b.grad_norm_sq[:, : T0 + 1], rtol=1e-13)
    assert np.all(a.consensus[:, T0 + 1] > 0)
    # T0 all-reduces, then one mixing after t = 6 and t = 9 (records before steps 0..9)
    np.testing.assert_array_equal(a.comm_rounds, [0, 1, 2, 3, 4, 4, 4, 5, 5, 5])


def test_blocked_path_is_bitwise_identical(monkeypatch):
    monkeypatch.setattr(numpy_run, "BLOCK_ELEMS", 1000)
    prob = make_problem("cosine", K=3, d=700, noise="gaussian", zeta=0.5)
    spec = AlgorithmSpec("easgd", 0.05, H=2)
    a = simulate(prob, spec, T=5, R=3, seed=1, blocked=True)
    c = simulate(prob, spec, T=5, R=3, seed=1, blocked=False)
    np.testing.assert_array_equal(a.final_x, c.final_x)
    np.testing.assert_array_equal(a.anchor, c.anchor)
    np.testing.assert_array_equal(a.grad_norm_sq, c.grad_norm_sq)


# ---------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------
def test_default_elastic_coefficient_is_lemma_1():
    spec = AlgorithmSpec("easgd", 0.1, H=4)
    for K in (1, 2, 3, 8):
        assert spec.elastic_coef(K) == pytest.approx(2 / (K + 2))
    assert AlgorithmSpec("easgd", 0.1, easgd_alpha=0.3).elastic_coef(3) == 0.3
    assert AlgorithmSpec.from_params("easgd", lr=0.1, sync_interval=4, easgd_alpha=0.2).H == 4


@pytest.mark.parametrize("K,a", [(3, 0.5), (3, 0.6), (2, 0.667), (5, 2 / 6)])
def test_elastic_coefficient_outside_stability_range_is_rejected(K, a):
    prob = make_problem("quadratic", K=K, d=3)
    spec = AlgorithmSpec("easgd", 0.1, H=2, easgd_alpha=a)
    with pytest.raises(ParameterError, match="'easgd_alpha'") as err:
        simulate(prob, spec, T=3, R=1, seed=0)
    assert err.value.name == "easgd_alpha" and "2/(K+1)" in str(err.value)
    inside = AlgorithmSpec("easgd", 0.1, H=2, easgd_alpha=0.99 * 2 / (K + 1))
    assert np.all(np.isfinite(simulate(prob, inside, T=3, R=1, seed=0).final_x))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(easgd_alpha=-0.1), "'easgd_alpha'"),
        (dict(easgd_alpha=1.0), "'easgd_alpha'"),
        (dict(easgd_alpha=float("nan")), "'easgd_alpha'"),
        (dict(easgd_alpha=True), "'easgd_alpha'"),
        (dict(easgd_alpha="0.2"), "'easgd_alpha'"),
        (dict(p=0.2), "pull steps exist only in 'palsgd'"),
        (dict(outer="nesterov"), r"'easgd' takes the outer update\(s\) \['average'\]"),
        (dict(outer_steps_per_sync=2), "no outer optimiser"),
    ],
)
def test_spec_errors(kwargs, match):
    with pytest.raises(UserInputError, match=match):
        AlgorithmSpec("easgd", 0.1, H=2, **kwargs)


def test_easgd_alpha_only_for_easgd():
    with pytest.raises(
        UserInputError, match="EASGD's elastic coefficient; 'local_sgd' does not use it"
    ):
        AlgorithmSpec("local_sgd", 0.1, H=2, easgd_alpha=0.2)
    with pytest.raises(UserInputError, match="no elastic coefficient"):
        AlgorithmSpec("local_sgd", 0.1, H=2).elastic_coef(2)


# ---------------------------------------------------------------------------------------
# verification of the registered bound
# ---------------------------------------------------------------------------------------
def test_easgd_bound_is_verified_not_skipped():
    settings = V.VerifySettings(
        bounds=("easgd",), problems=("quadratic", "cosine"), replicas=16, configs=2, outside=0,
        T=(48,), K=(2, 3), rates=False, speedup=False, exact=False, consensus=False,
        budget=0.2, controls=False,
    )  # fmt: skip
    rep = V.run_verification(settings, progress=False)
    # the quadratic exactly (EASGD has an exact oracle), the nonconvex problem by Monte Carlo
    assert [(r["bound"], r["verdict"]) for r in rep.exact] == [("easgd", "not shown false")]
    rows = rep.results
    assert len(rows) == 2 and {r["algorithm"] for r in rows} == {"easgd"}
    assert {r["problem"] for r in rows} == {"cosine"}
    assert all(r["verdict"] != V.NOT_VERIFIABLE for r in rows)
    assert all(np.isfinite(r["measured_mean"]) and r["bound_value"] > 0 for r in rows)
    # Theorem 3 inside its conditions: no configuration may violate it
    assert rep.summary.counts.get(V.VIOLATED, 0) == 0, rep.summary

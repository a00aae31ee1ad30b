"""The fast exact oracle (theory.moments.oracle, theory.moments.batch) against the
step-by-step recursion, brute-force enumeration of the coins, and Monte Carlo."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from theory import problems, simulate
from theory.moments import exact_moments, oracle_batch, oracle_batch_easgd
from theory.moments import oracle as rm

PROB = problems.make_problem("quadratic", K=3, d=4, noise="gaussian", sigma=1.0, zeta=1.0, seed=5)
LP = float(PROB.L)

SPECS = [
    dict(kind="sgd", alpha=0.3 / LP),
    dict(kind="local_sgd", alpha=0.2 / LP, H=4),
    dict(kind="post_local_sgd", alpha=0.2 / LP, H=4, T0=7),
    dict(kind="diloco", alpha=0.2 / LP, H=3, outer="nesterov", gamma=0.7, mu=0.9),
    dict(kind="palsgd", alpha=0.2 / LP, H=5, p=0.3, eta=0.5 * LP),
    dict(kind="palsgd", alpha=0.2 / LP, H=5, p=0.3, eta=0.5 * LP, coins="shared"),
    dict(kind="palsgd", alpha=0.2 / LP, H=4, p=0.6, eta=2 * LP, outer="sgd", gamma=0.8),
    dict(
        kind="palsgd", alpha=0.2 / LP, H=6, p=0.3, eta=0.5 * LP, outer="nesterov", gamma=0.7,
        mu=0.9, T0=5, sync_offset=2, outer_steps_per_sync=3,
    ),
]  # fmt: skip


@pytest.mark.parametrize("kw", SPECS, ids=lambda kw: f"{kw['kind']}-{kw.get('coins', 'ind')}")
@pytest.mark.parametrize("T", [1, 2, 17, 40])
def test_equals_step_by_step_recursion(kw, T):
    spec = simulate.AlgorithmSpec(**kw)
    ref = exact_moments(PROB, spec, T=T)
    fast = rm.exact_oracle(PROB, spec, T=T)
    curves = rm.exact_oracle(PROB, spec, T=T, curves=True)
    assert fast.mean_grad_norm_sq == pytest.approx(ref.mean_grad_norm_sq(), rel=1e-11)
    assert fast.mean_consensus == pytest.approx(float(np.mean(ref.consensus)), rel=1e-9, abs=1e-14)
    assert fast.final_grad_norm_sq == pytest.approx(ref.final_grad_norm_sq, rel=1e-11)
    np.testing.assert_allclose(curves.grad_norm_sq, ref.grad_norm_sq, rtol=1e-11)
    np.testing.assert_allclose(curves.consensus, ref.consensus, rtol=1e-9, atol=1e-14)


def _brute_force(lam, delta, y0, s2, K, alpha, eta, p, H, T, gamma, shared):
    """Every coin path enumerated; given the coins the run is a linear Gaussian system, so
    the mean and covariance of (x_1..x_K, z) are propagated exactly."""
    n = K + 1
    total = 0.0
    n_coins = T if shared else K * T
    for coins in itertools.product((0, 1), repeat=n_coins):
        prob = np.prod([p if c else 1 - p for c in coins])
        m = np.full(n, y0, dtype=float)
        C = np.zeros((n, n))
        acc = 0.0
        for t in range(T):
            w = np.full(K, 1.0 / K)
            acc += lam**2 * ((w @ m[:K]) ** 2 + w @ C[:K, :K] @ w)
            J = np.eye(n)
            b = np.zeros(n)
            Nv = np.zeros(n)
            for k in range(K):
                c = coins[t] if shared else coins[t * K + k]
                if c:
                    cp = alpha * eta / p
                    J[k, k], J[k, K] = 1 - cp, cp
                else:
                    cg = alpha / (1 - p)
                    J[k, k] = 1 - cg * lam
                    b[k] = cg * lam * delta[k]
                    Nv[k] = cg**2 * s2
            m = J @ m + b
            C = J @ C @ J.T + np.diag(Nv)
            if (t + 1) % H == 0:
                S = np.zeros((n, n))
                zrow = np.zeros(n)
                zrow[:K] = gamma / K
                zrow[K] = 1 - gamma
                S[:] = zrow
                m, C = S @ m, S @ C @ S.T
        total += prob * acc
    return total / T


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("K, H, T, gamma", [(2, 2, 5, 1.0), (3, 3, 4, 0.7), (1, 2, 6, 1.3)])
def test_equals_brute_force_enumeration(shared, K, H, T, gamma):
    lam, alpha, eta, p, y0, s2 = 0.8, 0.3, 1.7, 0.35, 1.3, 0.6
    delta = np.array([0.9, -0.4, -0.5])[:K] if K > 1 else np.zeros(1)
    delta = delta - delta.mean()
    ref = _brute_force(lam, delta, y0, s2, K, alpha, eta, p, H, T, gamma, shared)
    dirs = rm.Directions(
        lam=np.array([lam]), y0=np.array([y0]), s2=np.array([s2]),
        Q=np.array([np.mean(delta**2)]), K=K,
    )  # fmt: skip
    spec = dict(kind="palsgd", alpha=alpha, H=H, p=p, eta=eta, outer="sgd", gamma=gamma,
                coins="shared" if shared else "independent")  # fmt: skip
    assert rm.oracle_on(dirs, spec, T=T).mean_grad_norm_sq == pytest.approx(ref, rel=1e-12)
    b = oracle_batch(
        dirs.lam[None], dirs.y0[None], dirs.s2[None], dirs.Q[None], K=[K], alpha=[alpha], T=[T],
        H=[H], p=[p], eta=[eta], gamma=[gamma], shared=shared,
    )  # fmt: skip
    assert b.mean_grad_norm_sq[0] == pytest.approx(ref, rel=1e-12)


def test_batch_equals_single_on_random_designs():
    rng = np.random.default_rng(0)
    N, D = 60, 3
    lam = np.exp(rng.uniform(-3, 0, (N, D)))
    y0, s2, Q = rng.normal(size=(N, D)), rng.exponential(size=(N, D)), rng.exponential(size=(N, D))
    K = rng.choice([1, 2, 5, 64], N)
    Q = Q * (K[:, None] > 1)
    H = rng.choice([1, 2, 7, 64], N)
    T = H * rng.integers(1, 30, N) + rng.integers(0, 6, N)
    alpha = rng.uniform(0.01, 0.6, N)
    p = np.where(rng.random(N) < 0.3, 0.0, rng.uniform(0.02, 0.95, N))
    eta = np.exp(rng.uniform(-2, 1, N)) * (p > 0)
    gamma, mu = rng.uniform(0.3, 1.5, N), rng.uniform(0, 0.95, N)
    mu[:5] = 0.0  # momentum 0 inside a batch with momentum
    for minibatch, shared, nest, hb in [(True, False, False, False), (False, False, False, False),
                                        (False, True, False, False), (False, False, True, False),
                                        (False, False, False, True)]:  # fmt: skip
        b = oracle_batch(lam, y0, s2, Q, K=K, alpha=alpha, T=T, H=H, p=p, eta=eta, gamma=gamma,
                         mu=mu, minibatch=minibatch, shared=shared, nesterov=nest,
                         heavy_ball=hb)  # fmt: skip
        for n in range(N):
            d = rm.Directions(lam[n], y0[n], s2[n], Q[n], int(K[n]))
            if minibatch:
                spec = dict(kind="sgd", alpha=alpha[n])
            else:
                spec = dict(kind="palsgd", alpha=alpha[n], H=int(H[n]), p=p[n], eta=eta[n],
                            outer="nesterov" if nest else "sgd", gamma=gamma[n],
                            mu=mu[n] if nest or hb else 0.0,
                            coins="shared" if shared else "independent")  # fmt: skip
            o = rm.oracle_on(d, spec, T=int(T[n]))
            if math.isfinite(o.mean_grad_norm_sq) and o.mean_grad_norm_sq < 1e100:
                assert b.mean_grad_norm_sq[n] == pytest.approx(o.mean_grad_norm_sq, rel=1e-9)
                assert b.mean_consensus[n] == pytest.approx(o.mean_consensus, rel=1e-8, abs=1e-12)
            else:
                assert b.diverged[n] or b.mean_grad_norm_sq[n] > 1e90


def test_agrees_with_monte_carlo():
    spec = simulate.AlgorithmSpec(kind="palsgd", alpha=0.2 / LP, H=4, p=0.3, eta=0.5 * LP)
    T, R = 24, 4000
    exact = rm.exact_oracle(PROB, spec, T=T).mean_grad_norm_sq
    tr = simulate.simulate(PROB, spec, T=T, R=R, seed=3)
    y = np.asarray(tr.mean_grad_norm_sq())
    z = (y.mean() - exact) / (y.std(ddof=1) / math.sqrt(R))
    assert abs(z) < 4.0, z


def test_reduction_matches_problem_constants():
    d = rm.directions_of(PROB)
    c = d.constants()
    assert c["L"] == pytest.approx(LP)
    assert c["zeta2"] == pytest.approx(float(PROB.zeta2), rel=1e-9)
    assert c["sigma2"] == pytest.approx(float(PROB.sigma2), rel=1e-9)


def test_local_sgd_mean_is_minibatch_sgd():
    """Common Hessian: the workers' mean under Local SGD with averaging is minibatch SGD
    (heterogeneity never reaches it), a known fact the oracle must reproduce."""
    d = rm.Directions(np.array([1.0]), np.array([0.0]), np.array([0.0]), np.array([5.0]), 4)
    r = rm.oracle_on(d, dict(kind="local_sgd", alpha=0.3, H=16), T=200)
    assert r.mean_grad_norm_sq == pytest.approx(0.0, abs=1e-12)  # rounding of Var(B)
    assert r.mean_consensus > 0.1


def _easgd_full(lam, y0, s2, K, alpha, H, T, a):
    """EASGD on one direction, the mean and covariance of (x_1..x_K, z) propagated exactly."""
    n = K + 1
    m = np.full(n, y0)
    C = np.zeros((n, n))
    G = np.eye(n)
    G[:K, :K] *= 1 - alpha * lam
    noise = np.diag([alpha**2 * s2] * K + [0.0])
    W = np.eye(n)
    W[:K, :K] *= 1 - a
    W[:K, K] = a
    W[K, :K] = a
    W[K, K] = 1 - K * a
    u = np.full(n, 1.0 / n)
    acc = 0.0
    for t in range(T):
        acc += lam**2 * ((u @ m) ** 2 + u @ C @ u)
        m, C = G @ m, G @ C @ G.T + noise
        if (t + 1) % H == 0:
            m, C = W @ m, W @ C @ W.T
    return acc / T


@pytest.mark.parametrize("K, H, T", [(1, 1, 5), (2, 3, 11), (5, 4, 30)])
def test_easgd_equals_full_covariance_propagation(K, H, T):
    lam, y0, s2, alpha = np.array([0.7, 0.05]), np.array([1.2, -3.0]), np.array([0.4, 1.1]), 0.5
    a = 2.0 / (K + 2)
    ref = sum(_easgd_full(lam[i], y0[i], s2[i], K, alpha, H, T, a) for i in range(2))
    b = oracle_batch_easgd(lam[None], y0[None], s2[None], K=[K], alpha=[alpha], T=[T], H=[H])
    assert b.mean_grad_norm_sq[0] == pytest.approx(ref, rel=1e-12)


def test_easgd_agrees_with_the_simulator():
    prob = problems.make_problem("quadratic", K=3, d=3, sigma=1.0, zeta=0.0, seed=2)
    d = rm.directions_of(prob)
    L = float(prob.L)
    spec = simulate.AlgorithmSpec(kind="easgd", alpha=0.3 / L, H=3)
    r = oracle_batch_easgd(d.lam[None], d.y0[None], d.s2[None], K=[3], alpha=[0.3 / L], T=[17],
                           H=[3])  # fmt: skip
    y = np.asarray(simulate.simulate(prob, spec, T=17, R=6000, seed=1).mean_grad_norm_sq())
    z = (y.mean() - r.mean_grad_norm_sq[0]) / (y.std(ddof=1) / math.sqrt(len(y)))
    assert abs(z) < 4.0, z


def _local_sgd_momentum(lam, delta, y0, s2, alpha, H, T, gamma, mu, outer):
    """Local SGD (no coins) with outer momentum: a linear Gaussian system on
    (x_1..x_K, z, buf); returns the per-step and the anchor averages of E||grad f||^2."""
    K = len(delta)
    n = K + 2
    m = np.zeros(n)
    m[: K + 1] = y0
    C = np.zeros((n, n))
    steps, anchors = 0.0, []
    for t in range(T):
        if t % H == 0:
            anchors.append(lam**2 * (m[K] ** 2 + C[K, K]))
        w = np.zeros(n)
        w[:K] = 1.0 / K
        steps += lam**2 * ((w @ m) ** 2 + w @ C @ w)
        J = np.eye(n)
        J[:K, :K] *= 1 - alpha * lam
        b = np.zeros(n)
        b[:K] = alpha * lam * delta
        m, C = J @ m + b, J @ C @ J.T + np.diag([alpha**2 * s2] * K + [0.0, 0.0])
        if (t + 1) % H == 0:
            d = np.zeros(n)  # Delta = z - xbar
            d[K], d[:K] = 1.0, -1.0 / K
            buf = mu * np.eye(n)[K + 1] + d
            z = np.eye(n)[K] - gamma * (d + mu * buf if outer == "nesterov" else buf)
            S = np.zeros((n, n))
            S[: K + 1] = z
            S[K + 1] = buf
            m, C = S @ m, S @ C @ S.T
    return steps / T, float(np.mean(anchors[: T // H]))


@pytest.mark.parametrize("outer", ["nesterov", "heavy_ball"])
@pytest.mark.parametrize("H, T", [(1, 7), (3, 12), (4, 13)])
def test_outer_momentum_and_anchor_average(outer, H, T):
    lam, y0, s2, alpha, gamma, mu = 0.9, 1.4, 0.3, 0.4, 0.7, 0.6
    delta = np.array([0.5, -0.2, -0.3])
    ref_steps, ref_anchors = _local_sgd_momentum(lam, delta, y0, s2, alpha, H, T, gamma, mu, outer)
    args = ([[lam]], [[y0]], [[s2]], [[np.mean(delta**2)]])
    kw = dict(K=[3], alpha=[alpha], T=[T], H=[H], gamma=[gamma], mu=[mu],
              nesterov=outer == "nesterov", heavy_ball=outer == "heavy_ball")  # fmt: skip
    assert oracle_batch(*args, **kw).mean_grad_norm_sq[0] == pytest.approx(ref_steps, rel=1e-12)
    at = oracle_batch(*args, **kw, at_anchors=True).mean_grad_norm_sq[0]
    assert at == pytest.approx(ref_anchors, rel=1e-12)

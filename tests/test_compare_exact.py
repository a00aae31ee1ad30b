"""The comparison engine's exact moments on per-worker-Hessian quadratics, checked three ways:
brute-force enumeration of every coin path, the common-Hessian oracle, and Monte Carlo."""

import itertools

import numpy as np
import pytest

from core.errors import UserInputError
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.methods import METHODS
from theory.compare.pairs import round_moments
from theory.compare.scan import SKIPPED, anchor_map, first_passage, start_vector, values_at
from theory.moments import MatrixQuadratic, exact_oracle
from theory.problems.hessians import (
    HeteroHessianQuadratic,
    load_hetero_hessian,
    make_hetero_hessian,
)
from theory.simulate import AlgorithmSpec, simulate


def _brute_force(prob, *, alpha, eta, p, H, R, outer, gamma, mu, shared):
    """``E||grad f(z_r)||^2`` for r = 0..R by the full second-moment matrix of
    ``(x_1..x_K, z, buf, 1)`` averaged over every coin path of a round (one coordinate at a
    time): an implementation that shares nothing with :mod:`theory.compare.pairs`."""
    K, d = prob.K, prob.d
    s2 = prob.sigma2 / d
    a = alpha / (1 - p) if p > 0 else alpha
    c = alpha * eta / p if p > 0 else 0.0
    n = K + 3
    Z, BUF, ONE = K, K + 1, K + 2
    paths = [(0,) * H] if p == 0 else list(itertools.product((0, 1), repeat=H))
    total = np.zeros(R + 1)
    for i in range(d):
        lam, m = prob.eigenvalues[:, i], prob.minimisers[:, i]
        lbar, xs = lam.mean(), prob.x_star[i]
        S = np.zeros((n, n))
        s = np.zeros(n)
        s[Z], s[ONE] = prob.x0()[i], 1.0
        S = np.outer(s, s)
        worker_paths = [paths] * K
        if shared:
            combos = [(pp,) * K for pp in paths]
        else:
            combos = list(itertools.product(*worker_paths))
        vals = [lbar**2 * (S[Z, Z] - 2 * xs * S[Z, ONE] + xs**2)]
        for _ in range(R):
            S_new = np.zeros((n, n))
            for combo in combos:
                prob_path = 1.0
                T = np.eye(n)
                T[:K, :] = 0.0
                T[:K, Z] = 1.0  # restart from z
                S_p = T @ S @ T.T
                for j in range(H):
                    M = np.eye(n)
                    Nz = np.zeros((n, n))
                    for k in range(K):
                        b = combo[k][j]
                        M[k, :] = 0.0
                        if b:  # pull
                            M[k, k], M[k, Z] = 1 - c, c
                        else:
                            M[k, k], M[k, ONE] = 1 - a * lam[k], a * lam[k] * m[k]
                            Nz[k, k] = a * a * s2
                    S_p = M @ S_p @ M.T + Nz
                for k in range(K):
                    bits = combo[k]
                    prob_path *= np.prod([p if b else 1 - p for b in bits])
                if shared:
                    prob_path = np.prod([p if b else 1 - p for b in combo[0]])
                # outer step on Delta = z - mean_k x_k
                D = np.zeros(n)
                D[Z] = 1.0
                D[:K] -= 1.0 / K
                O = np.eye(n)
                if outer == "sgd":  # heavy ball: buf <- mu buf + D; z <- z - gamma buf
                    O[BUF, :] = mu * np.eye(n)[BUF] + D
                    O[Z, :] = np.eye(n)[Z] - gamma * O[BUF, :]
                else:  # nesterov
                    O[BUF, :] = mu * np.eye(n)[BUF] + D
                    O[Z, :] = np.eye(n)[Z] - gamma * (D + mu * O[BUF, :])
                S_new += prob_path * (O @ S_p @ O.T)
            S = S_new
            vals.append(lbar**2 * (S[Z, Z] - 2 * xs * S[Z, ONE] + xs**2))
        total += np.array(vals)
    return total


def _engine(prob, *, alpha, eta, p, H, R, outer, gamma, mu, shared):
    q = Quadratic.of(prob)
    mom = round_moments(
        q.lam, q.delta, q.s2, alpha=np.array([alpha]), eta=np.array([eta]), p=np.array([p]),
        H=np.array([H]), shared=shared,
    )  # fmt: skip
    M = anchor_map(mom, outer, np.array([gamma]), np.array([mu]))
    v0 = start_vector(q.y0, 1)
    return np.array([values_at(M, v0, q.weight, np.array([r]))[0] for r in range(R + 1)])


CASES = [
    dict(alpha=0.3, eta=0.0, p=0.0, H=3, outer="sgd", gamma=1.0, mu=0.0, shared=False),
    dict(alpha=0.2, eta=2.0, p=0.4, H=3, outer="sgd", gamma=1.0, mu=0.0, shared=False),
    dict(alpha=0.2, eta=2.0, p=0.4, H=3, outer="sgd", gamma=1.0, mu=0.0, shared=True),
    dict(alpha=0.25, eta=3.0, p=0.3, H=2, outer="nesterov", gamma=0.7, mu=0.9, shared=False),
    dict(alpha=0.25, eta=3.0, p=0.3, H=3, outer="sgd", gamma=1.5, mu=0.5, shared=True),
    dict(alpha=0.4, eta=0.0, p=0.0, H=4, outer="nesterov", gamma=0.5, mu=0.9, shared=False),
]


@pytest.mark.parametrize("case", CASES)
def test_engine_equals_enumeration_of_every_coin_path(case):
    prob = make_hetero_hessian(K=2, d=2, L=1.0, lam_min=0.2, zeta=1.0, sigma=0.7, F0=1.0, seed=3)
    want = _brute_force(prob, R=4, **case)
    got = _engine(prob, R=4, **case)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_engine_equals_enumeration_with_three_workers_and_shared_coins():
    prob = make_hetero_hessian(K=3, d=1, L=2.0, lam_min=0.1, zeta=2.0, sigma=0.3, F0=2.0, seed=7)
    case = dict(alpha=0.15, eta=4.0, p=0.5, H=2, outer="sgd", gamma=1.0, mu=0.0, shared=True)
    np.testing.assert_allclose(
        _engine(prob, R=5, **case), _brute_force(prob, R=5, **case), rtol=1e-11, atol=1e-13
    )


def test_a_wrong_drift_is_caught_by_the_enumeration():
    """Negative control: dropping the drift term E Abar Bbar from the round map changes the
    values by far more than the tolerance of the enumeration test."""
    prob = make_hetero_hessian(K=2, d=2, L=1.0, lam_min=0.2, zeta=1.0, sigma=0.0, F0=1.0, seed=3)
    case = dict(alpha=0.3, eta=2.0, p=0.4, H=3, outer="sgd", gamma=1.0, mu=0.0, shared=False)
    q = Quadratic.of(prob)
    mom = round_moments(
        q.lam, q.delta, q.s2, alpha=np.array([0.3]), eta=np.array([2.0]), p=np.array([0.4]),
        H=np.array([3]), shared=False,
    )  # fmt: skip
    from dataclasses import replace

    wrong = replace(mom, ab=0 * mom.ab)
    M = anchor_map(wrong, "sgd", np.array([1.0]), np.array([0.0]))
    bad = np.array(
        [values_at(M, start_vector(q.y0, 1), q.weight, np.array([r]))[0] for r in range(5)]
    )
    want = _brute_force(prob, R=4, **case)
    assert np.max(np.abs(bad - want) / want) > 1e-3


def test_common_hessian_agrees_with_the_existing_oracle():
    """With one Hessian for every worker the engine must equal theory.moments' oracle."""
    lam = np.array([1.0, 0.3])
    K = 3
    rng = np.random.default_rng(0)
    m = rng.normal(size=(K, 2))
    prob = HeteroHessianQuadratic(
        eigenvalues=np.tile(lam, (K, 1)), minimisers=m, x0=[1.0, -2.0], sigma2=0.5
    )
    mq = MatrixQuadratic(A=np.diag(lam), b=m, noise=0.25, x0=[1.0, -2.0])
    for shared in (False, True):
        spec = dict(
            kind="palsgd", alpha=0.2, H=4, p=0.3, eta=2.0, outer="nesterov", gamma=0.6, mu=0.8,
            coins="shared" if shared else "independent",
        )  # fmt: skip
        got = _engine(prob, alpha=0.2, eta=2.0, p=0.3, H=4, R=3, outer="nesterov", gamma=0.6,
                      mu=0.8, shared=shared)  # fmt: skip
        for r in (1, 2, 3):
            want = exact_oracle(mq, spec, T=4 * r).final_grad_norm_sq
            assert got[r] == pytest.approx(want, rel=1e-10)


def test_engine_agrees_with_monte_carlo_on_a_user_given_problem(tmp_path):
    """A problem file as a user writes it; the simulator (100k replicas) within 5 standard
    errors of the exact values at every round, for Local SGD and PALSGD."""
    path = tmp_path / "problem.yaml"
    path.write_text(
        "eigenvalues: [[1.0, 0.2], [0.3, 0.9], [0.6, 0.1]]\n"
        "minimisers: [[1.0, -1.0], [-0.5, 2.0], [0.0, 0.5]]\n"
        "x0: [2.0, 2.0]\n"
        "sigma2: 0.5\n"
    )
    prob = load_hetero_hessian(path)
    for spec, kw in (
        (AlgorithmSpec(kind="local_sgd", alpha=0.3, H=4),
         dict(alpha=0.3, eta=0.0, p=0.0, outer="sgd", gamma=1.0, mu=0.0, shared=False)),
        (AlgorithmSpec(kind="palsgd", alpha=0.2, H=4, p=0.3, eta=2.0, seed=1),
         dict(alpha=0.2, eta=2.0, p=0.3, outer="sgd", gamma=1.0, mu=0.0, shared=False)),
    ):  # fmt: skip
        exact = _engine(prob, H=4, R=5, **kw)
        tr = simulate(prob, spec, T=5 * 4 + 1, R=100_000, seed=2, record_every=4)
        g = tr.grad_norm_sq
        mean, se = g.mean(axis=0), g.std(axis=0) / np.sqrt(g.shape[0])
        assert np.all(np.abs(mean[1:] - exact[1:]) <= 5 * se[1:] + 1e-12)


def test_problem_file_errors_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("eigenvalues: [[1.0, 2.0]]\nminimisers: [[1.0]]\n")
    with pytest.raises(UserInputError, match="minimisers"):
        load_hetero_hessian(bad)
    bad.write_text("eigenvalues: [[1.0]]\nminimisers: [[1.0]]\nsigma: 1\n")
    with pytest.raises(UserInputError, match="unknown key"):
        load_hetero_hessian(bad)
    bad.write_text("eigenvalues: [[-1.0]]\nminimisers: [[1.0]]\n")
    with pytest.raises(UserInputError, match="nonnegative"):
        load_hetero_hessian(bad)


def test_generated_constants_are_exact():
    prob = make_hetero_hessian(K=4, d=3, L=2.0, lam_min=0.1, zeta=1.5, sigma=0.4, F0=3.0, seed=5)
    assert prob.L == 2.0
    assert prob.zeta2_star == pytest.approx(1.5**2, rel=1e-12)
    assert prob.F0 == pytest.approx(3.0, rel=1e-12)
    assert prob.sigma2 == pytest.approx(0.16)
    # the declared zeta2 bounds the heterogeneity on the declared region
    rng = np.random.default_rng(0)
    pts = prob.probe_points(rng, 500)
    G = prob.local_grads(np.repeat(pts[:, None, :], prob.K, axis=1))
    het = np.mean(np.sum((G - G.mean(axis=1, keepdims=True)) ** 2, axis=-1), axis=1)
    assert het.max() <= prob.zeta2 * (1 + 1e-12)
    corner = prob.x_star + prob.region() * np.sign(rng.normal(size=prob.d))
    assert prob.zeta2_on_box(prob.region()) >= het.max()
    assert np.isfinite(corner).all()


def test_first_passage_skips_only_what_cannot_be_a_minimum():
    prob = make_hetero_hessian(K=4, d=2, zeta=3.0, sigma=1.0, F0=1.0, seed=1)
    q = Quadratic.of(prob)
    N = 400
    alpha = np.geomspace(1e-4, 0.1, N)
    kw = dict(H=16, eta=np.full(N, 5.0), p=np.full(N, 0.5), alpha=alpha, gamma=np.ones(N),
              eps=np.array([0.05, 0.01]), cap=np.full(N, 5000))  # fmt: skip
    m = METHODS["palsgd"]
    grouped, _ = exact_rounds(q, m, group=np.arange(N) // 50, **kw)
    alone, _ = exact_rounds(q, m, group=np.arange(N), **kw)
    assert (grouped == SKIPPED).any()
    for g in range(N // 50):
        rows = slice(50 * g, 50 * g + 50)
        for e in range(2):
            a = alone[rows, e][alone[rows, e] >= 0]
            b = grouped[rows, e][grouped[rows, e] >= 0]
            assert (a.min() if a.size else None) == (b.min() if b.size else None)
    # every value found with grouping is the true first passage
    found = grouped >= 0
    assert np.array_equal(grouped[found], alone[found])


def test_first_passage_is_the_first_round_below_eps():
    prob = make_hetero_hessian(K=3, d=2, zeta=1.0, sigma=0.5, F0=1.0, seed=2)
    q = Quadratic.of(prob)
    mom = round_moments(q.lam, q.delta, q.s2, alpha=np.array([0.05, 0.2]), eta=np.zeros(2),
                        p=np.zeros(2), H=np.array([8, 8]), shared=False)  # fmt: skip
    M = anchor_map(mom, "nesterov", np.array([0.7, 0.7]), np.array([0.9, 0.9]))
    v0 = start_vector(q.y0, 2)
    vals = np.array([values_at(M, v0, q.weight, np.full(2, r)) for r in range(300)])  # (R, 2)
    eps = np.array([0.2, 0.05, 0.02])
    got, _ = first_passage(M, v0, q.weight, eps, np.full(2, 299), group=np.arange(2), block=7)
    for n in range(2):
        for e, target in enumerate(eps):
            below = np.flatnonzero(vals[:, n] <= target)
            assert got[n, e] == (below[0] if below.size else -1)

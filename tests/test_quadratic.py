"""Exact moment recursions on quadratics (theory.moments: exact.py, branches.py).

Checks, each able to fail independently of the code under test:
* a reference table of E z^2 per round computed independently of this engine and
  confirmed by Monte Carlo, converted to the project's notation;
* the closed forms I4/I5 and the Khaled et al. round factor, symbolically (sympy) from the
  branch coefficients the engine uses, and numerically from the full engine;
* Woodworth's mechanism: Local SGD on a homogeneous quadratic with additive noise has the
  averaged iterate of minibatch-K SGD, so the curves of f(xbar) coincide;
* an independent brute-force propagation (full augmented matrices, every coin pattern
  enumerated) for heterogeneous problems, both coin modes, warm-up, offsets and Nesterov;
* the deterministic case against a direct run;
* Monte Carlo with theory.simulate (skipped while the simulator is absent).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sympy as sp

from core.errors import UserInputError
from core.validation import ParameterError
from theory.moments import (
    ExactCurves,
    MatrixQuadratic,
    exact_moments,
    local_sgd_round_mean_factor,
    local_step_branches,
    within_round_closed_form,
    within_round_moments,
)

# ----------------------------------------------------------------------------- helpers


def _random_problem(rng: np.random.Generator, K: int, d: int, s2: float, het: float = 1.0):
    M = rng.normal(size=(d, d))
    A = M @ M.T / d + 0.2 * np.eye(d)
    b = het * rng.normal(size=(K, d))
    x0 = rng.normal(size=d) * 2.0
    return MatrixQuadratic(A=A, b=b, noise=s2, x0=x0)


def _brute_force(problem: MatrixQuadratic, spec: dict, T: int) -> dict[str, np.ndarray]:
    """Independent implementation: full (K+3)x(K+3) augmented matrices per eigendirection,
    all 2^K coin patterns enumerated, sync written as explicit updates."""
    lam, U = np.linalg.eigh(problem.A)
    K, d = problem.b.shape
    s2 = np.full(d, float(problem.noise))
    bbar = problem.b.mean(0)
    b_e = (problem.b - bbar) @ U  # (K, d)
    y0 = U.T @ (problem.x0 - bbar)
    alpha, H, p, eta = spec["alpha"], spec["H"], spec.get("p", 0.0), spec.get("eta", 0.0)
    T0, off = spec.get("T0", 0), spec.get("sync_offset", 0)
    outer, gamma, mu = spec.get("outer", "avg"), spec.get("gamma", 1.0), spec.get("mu", 0.0)
    if outer == "avg":
        gamma, mu = 1.0, 0.0
    shared = spec.get("coins", "independent") == "shared"
    tau = spec.get("sync_delay", 0)
    n = K + 4  # the outer gradient in flight Q stays 0 without an overlapped sync
    Z, BUF, ONE, Q = K, K + 1, K + 2, K + 3
    if shared:
        patterns = [((0,) * K, 1 - p), ((1,) * K, p)]
    else:
        patterns = [
            (c, math.prod(p if ci else 1 - p for ci in c))
            for c in itertools.product((0, 1), repeat=K)
        ]
    patterns = [(c, w) for c, w in patterns if w > 0]
    loss, grad, cons = np.zeros(T), np.zeros(T), np.zeros(T)
    for i in range(d):
        y = np.zeros(n)
        y[:K] = y0[i]
        y[Z] = y0[i]
        y[ONE] = 1
        S = np.outer(y, y)
        for t in range(T):
            if t == T0 and T0 > 0:
                J = np.eye(n)
                J[Z] = 0
                J[Z, :K] = 1 / K
                J[BUF] = 0
                S = J @ S @ J.T
            avg = np.zeros(n)
            avg[:K] = 1 / K
            ybar2 = avg @ S @ avg
            loss[t] += 0.5 * lam[i] * ybar2
            grad[t] += lam[i] ** 2 * ybar2
            cons[t] += np.trace(S[:K, :K]) / K - ybar2
            if t < T0:
                M = np.eye(n)
                for k in range(K):
                    M[k, k] = 1 - alpha * lam[i]
                N = np.zeros((n, n))
                N[:K, :K] = alpha**2 * s2[i] / K
                S = M @ S @ M.T + N
                continue
            Snew = np.zeros((n, n))
            for coins, w in patterns:
                M = np.eye(n)
                N = np.zeros((n, n))
                for k, c in enumerate(coins):
                    if c:
                        M[k, k] = 1 - alpha * eta / p
                        M[k, Z] = alpha * eta / p
                    else:
                        cg = alpha / (1 - p)
                        M[k, k] = 1 - cg * lam[i]
                        M[k, ONE] = cg * lam[i] * b_e[k, i]
                        N[k, k] = cg**2 * s2[i]
                Snew += w * (M @ S @ M.T + N)
            S = Snew
            if tau and t - tau >= T0 and (t - tau - T0 + 1 + off) % H == 0:
                # the update in flight lands: outer step on Q, workers shifted by z' - z
                J = np.eye(n)
                Delta = np.eye(n)[Q]
                buf_new = J[BUF]
                if outer == "nesterov":
                    buf_new = mu * J[BUF] + Delta
                    z_new = J[Z] - gamma * (Delta + mu * buf_new)
                else:
                    z_new = J[Z] - gamma * Delta
                for k in range(K):
                    J[k] = np.eye(n)[k] + z_new - np.eye(n)[Z]
                J[Z], J[BUF], J[Q] = z_new, buf_new, 0
                S = J @ S @ J.T
            if (t - T0 + 1 + off) % H == 0 and tau:
                J = np.eye(n)  # overlapped sync starts: Q <- z - xbar, workers <- z
                J[Q] = 0
                J[Q, :K] = -1 / K
                J[Q, Z] = 1
                J[:K] = np.eye(n)[Z]
                S = J @ S @ J.T
            elif (t - T0 + 1 + off) % H == 0:
                J = np.eye(n)
                xbar = np.zeros(n)
                xbar[:K] = 1 / K
                Delta = -xbar
                Delta[Z] += 1
                if outer == "nesterov":
                    buf_new = mu * J[BUF] + Delta
                    z_new = J[Z] - gamma * (Delta + mu * buf_new)
                    J[BUF] = buf_new
                else:
                    z_new = J[Z] - gamma * Delta
                J[Z] = z_new
                for k in range(K):
                    J[k] = z_new
                S = J @ S @ J.T
    return {"loss_gap": loss, "grad_norm_sq": grad, "consensus": cons}


# ----------------------------------------------------------------------------- reference


# the reference table's source writes eta for the inner lr and alpha for the pull rate:
# lr 0.05 -> alpha, pull 2 -> eta.
REF = dict(lam=1.0, alpha=0.05, eta=2.0, p=0.3, s2=1.0, H=8, K=4, z0=3.0)


@pytest.mark.parametrize(
    "outer, gamma, mu, expected",
    [
        ("sgd", 1.0, 0.0, [5.19032, 0.99965, 0.11682, 0.01940]),
        ("nesterov", 0.7, 0.9, [4.17688, 0.58098, 0.75903, 0.14368]),
    ],
)
def test_reference_table(outer, gamma, mu, expected):
    prob = MatrixQuadratic(
        A=[[REF["lam"]]], b=np.zeros((REF["K"], 1)), noise=REF["s2"], x0=[REF["z0"]]
    )
    spec = dict(
        kind="palsgd", alpha=REF["alpha"], eta=REF["eta"], p=REF["p"], H=REF["H"],
        outer=outer, gamma=gamma, mu=mu, coins="independent",
    )  # fmt: skip
    c = exact_moments(prob, spec, T=12 * REF["H"])
    np.testing.assert_array_equal(c.round_steps, np.arange(13) * REF["H"])
    assert c.z_dist_sq[0] == pytest.approx(REF["z0"] ** 2)
    got = c.z_dist_sq[[1, 4, 8, 12]]
    np.testing.assert_allclose(got, expected, rtol=0, atol=6e-6)


# ----------------------------------------------------------------------------- symbolic

lam_s, alpha_s, eta_s, s2_s, gamma_s = sp.symbols("lambda alpha eta s2 gamma", positive=True)
p_s = sp.Symbol("p", positive=True)


def _zero(expr) -> bool:
    """Exact identity check: a rational function is zero iff its cancelled form is 0."""
    return sp.cancel(sp.together(expr)) == 0


@pytest.mark.parametrize("H", [1, 2, 3, 4])
def test_within_round_recursion_matches_closed_forms_symbolically(H):
    A, B, C = within_round_moments(lam_s, alpha_s, eta_s, p_s, s2_s, H)
    A_cf, C_cf, rho2 = within_round_closed_form(lam_s, alpha_s, eta_s, p_s, s2_s, H)
    assert _zero(A - A_cf)
    assert _zero(sp.diff(A, p_s))  # I4: the mean does not depend on p
    assert _zero(C - C_cf)
    assert not _zero(sp.diff(B, p_s))  # p enters the second moments


def test_one_step_contraction_and_noise_injection_symbolically():
    br = local_step_branches(lam_s, alpha_s, eta_s, p_s, s2_s)
    assert sum(b.prob for b in br) == 1
    rho2 = sum(b.prob * b.scale**2 for b in br)
    _, _, rho2_cf = within_round_closed_form(lam_s, alpha_s, eta_s, p_s, s2_s, 1)
    assert _zero(rho2 - rho2_cf)
    assert _zero(sum(b.prob * b.noise for b in br) - alpha_s**2 * s2_s / (1 - p_s))
    # I1 mean identity along an eigendirection: E[x'] = x - alpha (lam (x - delta) + eta (x - z))
    x, z, dk = sp.symbols("x z delta")
    mean = sum(b.prob * (b.scale * x + b.pull * z + b.drift * dk) for b in br)
    assert _zero(mean - (x - alpha_s * (lam_s * (x - dk) + eta_s * (x - z))))


@pytest.mark.parametrize("H", [1, 2, 5])
def test_local_sgd_round_factor_symbolically(H):
    A, _, C = within_round_moments(lam_s, alpha_s, eta_s, 0, s2_s, H)
    factor = local_sgd_round_mean_factor(lam_s, alpha_s, gamma_s, H)
    assert _zero(1 + gamma_s * A - factor)
    geometric = sum((1 - alpha_s * lam_s) ** (2 * j) for j in range(H))
    assert _zero(C - alpha_s**2 * s2_s * geometric)


# ----------------------------------------------------------------------------- engine vs closed forms


def test_engine_round_mean_is_closed_form_and_independent_of_p():
    rng = np.random.default_rng(0)
    prob = _random_problem(rng, K=3, d=3, s2=0.5, het=0.0)
    lam, U = prob.eigenvalues, prob.eigenvectors
    alpha, eta, H, gamma = 0.1, 1.5, 6, 0.8
    A_H, _, _ = within_round_closed_form(lam, alpha, eta, 0.5, 0.0, H)
    expect = U @ ((1 + gamma * A_H) * (U.T @ prob.x0))
    for p in (0.1, 0.3, 0.6):
        for coins in ("independent", "shared"):
            spec = dict(kind="palsgd", alpha=alpha, eta=eta, p=p, H=H, outer="sgd",
                        gamma=gamma, coins=coins)  # fmt: skip
            c = exact_moments(prob, spec, T=H)
            np.testing.assert_allclose(c.z_mean[1], expect, rtol=1e-12, atol=1e-12)


def test_engine_local_sgd_round_factor():
    rng = np.random.default_rng(1)
    prob = _random_problem(rng, K=4, d=4, s2=0.0, het=0.0)
    lam, U = prob.eigenvalues, prob.eigenvectors
    alpha, H, gamma = 0.2, 5, 1.7
    spec = dict(kind="diloco", alpha=alpha, H=H, outer="sgd", gamma=gamma)
    c = exact_moments(prob, spec, T=3 * H)
    f = local_sgd_round_mean_factor(lam, alpha, gamma, H)
    y0 = U.T @ prob.x0
    for r in range(4):
        np.testing.assert_allclose(c.z_mean[r], U @ (f**r * y0), rtol=1e-11, atol=1e-12)
        # deterministic: E||z||^2 = ||E z||^2
        assert c.z_dist_sq[r] == pytest.approx(np.sum((f**r * y0) ** 2), rel=1e-11)


@pytest.mark.parametrize("gamma", [1.0, 0.6])
def test_engine_one_round_noise_is_C_H_over_K(gamma):
    # from z0 = x* the first round's E z^2 is gamma^2 C_H / K per direction (section 4.1)
    lam, alpha, eta, p, s2, H, K = 0.7, 0.08, 1.2, 0.25, 0.9, 7, 5
    prob = MatrixQuadratic(A=[[lam]], b=np.zeros((K, 1)), noise=s2, x0=[0.0])
    spec = dict(kind="palsgd", alpha=alpha, eta=eta, p=p, H=H, outer="sgd", gamma=gamma)
    c = exact_moments(prob, spec, T=H)
    _, C_H, _ = within_round_closed_form(lam, alpha, eta, p, s2, H)
    assert c.z_dist_sq[1] == pytest.approx(gamma**2 * C_H / K, rel=1e-12)


def test_noise_given_as_covariance_matrix_or_eigen_vector_agrees():
    rng = np.random.default_rng(2)
    base = _random_problem(rng, K=2, d=3, s2=0.0)
    Sigma = np.diag([0.5, 1.0, 2.0])
    s_eig = np.einsum("ij,ik,kj->j", base.eigenvectors, Sigma, base.eigenvectors)
    p1 = MatrixQuadratic(A=base.A, b=base.b, noise=Sigma, x0=base.x0)
    p2 = MatrixQuadratic(A=base.A, b=base.b, noise=s_eig, x0=base.x0)
    spec = dict(kind="palsgd", alpha=0.1, eta=1.0, p=0.2, H=4, outer="avg")
    c1, c2 = exact_moments(p1, spec, T=12), exact_moments(p2, spec, T=12)
    np.testing.assert_allclose(c1.loss_gap, c2.loss_gap, rtol=1e-12)


# ----------------------------------------------------------------------------- Woodworth


@pytest.mark.parametrize("H, het", [(1, 0.0), (4, 0.0), (9, 0.0), (6, 2.0)])
def test_local_sgd_averaged_iterate_equals_minibatch_sgd(H, het):
    # Gradients are affine with a common Hessian, so mean_k g_k(x_k) = A (xbar - bbar) + noise:
    # xbar follows minibatch-K SGD exactly. This needs equal Hessians, not equal b_k.
    rng = np.random.default_rng(3)
    d, K = 4, 3
    base = _random_problem(rng, K=K, d=d, s2=0.3)
    b = np.tile(rng.normal(size=d), (K, 1)) + het * rng.normal(size=(K, d))  # x* != 0
    prob = MatrixQuadratic(A=base.A, b=b, noise=0.3, x0=base.x0)
    T = 40
    loc = exact_moments(prob, dict(kind="local_sgd", alpha=0.15, H=H, outer="avg"), T=T)
    mb = exact_moments(prob, dict(kind="minibatch", alpha=0.15), T=T)
    np.testing.assert_allclose(loc.loss_gap, mb.loss_gap, rtol=1e-11)
    np.testing.assert_allclose(loc.grad_norm_sq, mb.grad_norm_sq, rtol=1e-11)
    np.testing.assert_allclose(mb.consensus, 0.0, atol=1e-12)
    if H > 1:
        assert loc.consensus[1] > 1e-3  # the workers do drift apart between syncs


def test_minibatch_sgd_noise_floor():
    # stationary E f(x) - f_star of minibatch-K SGD: sum_i lam_i/2 * alpha^2 s2/K / (1-(1-alpha lam_i)^2)
    rng = np.random.default_rng(8)
    prob = _random_problem(rng, K=3, d=4, s2=0.3)
    a, K, s2 = 0.15, 3, 0.3
    lam = prob.eigenvalues
    floor = 0.5 * np.sum(lam * a**2 * s2 / K / (1 - (1 - a * lam) ** 2))
    long = exact_moments(prob, dict(kind="minibatch", alpha=a), T=3000)
    assert long.loss_gap[-1] == pytest.approx(floor, rel=1e-6)


@pytest.mark.parametrize(
    "spec",
    [
        dict(kind="diloco", alpha=0.2, H=6, outer="sgd", gamma=1.5),
        dict(kind="diloco", alpha=0.2, H=6, outer="nesterov", gamma=0.7, mu=0.9),
        dict(kind="palsgd", alpha=0.2, H=6, p=0.3, eta=1.0, outer="avg"),
    ],
)
def test_other_outer_steps_and_pulls_leave_the_minibatch_path(spec):
    rng = np.random.default_rng(4)
    prob = _random_problem(rng, K=3, d=3, s2=0.1, het=2.0)
    other = exact_moments(prob, spec, T=30)
    mb = exact_moments(prob, dict(kind="minibatch", alpha=0.2), T=30)
    assert np.max(np.abs(other.loss_gap - mb.loss_gap) / mb.loss_gap) > 1e-2


# ----------------------------------------------------------------------------- brute force

BRUTE_SPECS = [
    dict(kind="palsgd", alpha=0.1, eta=1.5, p=0.3, H=4, outer="avg", coins="independent"),
    dict(kind="palsgd", alpha=0.1, eta=1.5, p=0.3, H=4, outer="avg", coins="shared"),
    dict(
        kind="palsgd",
        alpha=0.07,
        eta=2.0,
        p=0.4,
        H=5,
        outer="sgd",
        gamma=1.4,
        coins="independent",
        T0=3,
        sync_offset=2,
    ),  # fmt: skip
    dict(
        kind="palsgd",
        alpha=0.07,
        eta=2.0,
        p=0.2,
        H=3,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        coins="shared",
        T0=2,
    ),  # fmt: skip
    dict(
        kind="palsgd",
        alpha=0.07,
        eta=0.8,
        p=0.5,
        H=3,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        coins="independent",
    ),  # fmt: skip
    dict(kind="diloco", alpha=0.1, H=4, outer="nesterov", gamma=0.7, mu=0.9),
    dict(kind="post_local_sgd", alpha=0.1, H=4, T0=5, outer="avg"),
    # the overlapped sync: the outer step lands sync_delay steps after its sync
    dict(
        kind="palsgd",
        alpha=0.07,
        eta=2.0,
        p=0.3,
        H=4,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        coins="independent",
        T0=2,
        sync_offset=1,
        sync_delay=2,
    ),  # fmt: skip
    dict(kind="palsgd", alpha=0.1, eta=1.5, p=0.3, H=3, outer="avg", coins="shared", sync_delay=1),
    dict(kind="local_sgd", alpha=0.1, H=5, outer="avg", sync_delay=4),
]


@pytest.mark.parametrize(
    "spec", BRUTE_SPECS, ids=lambda s: f"{s['kind']}-{s.get('coins', '')}-{s.get('sync_delay', 0)}"
)
def test_against_brute_force_enumeration(spec):
    rng = np.random.default_rng(5)
    prob = _random_problem(rng, K=3, d=2, s2=0.4, het=1.5)
    T = 17
    c = exact_moments(prob, spec, T=T)
    ref = _brute_force(prob, spec, T)
    for key in ("loss_gap", "grad_norm_sq", "consensus"):
        np.testing.assert_allclose(getattr(c, key), ref[key], rtol=1e-10, atol=1e-13, err_msg=key)


def test_shared_and_independent_coins_same_mean_different_spread():
    rng = np.random.default_rng(6)
    prob = _random_problem(rng, K=4, d=2, s2=0.2, het=1.0)
    base = dict(kind="palsgd", alpha=0.1, eta=2.0, p=0.3, H=6, outer="sgd", gamma=1.0)
    ind = exact_moments(prob, {**base, "coins": "independent"}, T=30)
    sh = exact_moments(prob, {**base, "coins": "shared"}, T=30)
    np.testing.assert_allclose(ind.z_mean, sh.z_mean, rtol=1e-12, atol=1e-14)
    assert np.max(np.abs(ind.z_dist_sq - sh.z_dist_sq)) > 1e-3
    assert np.max(np.abs(ind.consensus - sh.consensus)) > 1e-3


def test_deterministic_local_sgd_matches_direct_run():
    rng = np.random.default_rng(7)
    prob = _random_problem(rng, K=3, d=3, s2=0.0, het=1.0)
    A, b, K = prob.A, prob.b, prob.K
    alpha, H, gamma, mu, T = 0.2, 4, 0.7, 0.9, 21
    spec = dict(kind="diloco", alpha=alpha, H=H, outer="nesterov", gamma=gamma, mu=mu)
    c = exact_moments(prob, spec, T=T)
    xs = np.tile(prob.x0, (K, 1))
    z, buf = prob.x0.copy(), np.zeros(3)
    xstar = b.mean(0)
    for t in range(T):
        xbar = xs.mean(0)
        gap = 0.5 * (xbar - xstar) @ A @ (xbar - xstar)
        assert c.loss_gap[t] == pytest.approx(gap, rel=1e-10, abs=1e-14)
        assert c.consensus[t] == pytest.approx(np.mean(np.sum((xs - xbar) ** 2, 1)), abs=1e-12)
        xs = xs - alpha * (xs - b) @ A
        if (t + 1) % H == 0:
            delta = z - xs.mean(0)
            buf = mu * buf + delta
            z = z - gamma * (delta + mu * buf)
            xs = np.tile(z, (K, 1))


# ----------------------------------------------------------------------------- API


def test_curves_api_and_serialisation():
    prob = MatrixQuadratic(A=np.diag([1.0, 0.5]), b=np.zeros((2, 2)), noise=0.1, x0=[1.0, 1.0])
    c = exact_moments(prob, dict(kind="palsgd", alpha=0.1, eta=1.0, p=0.2, H=3), T=10)
    assert isinstance(c, ExactCurves)
    assert c.steps.shape == c.loss_gap.shape == c.grad_norm_sq.shape == c.consensus.shape == (10,)
    assert c.mean_grad_norm_sq() == pytest.approx(np.mean(c.grad_norm_sq))
    assert c.loss_gap[0] == pytest.approx(0.75)
    assert c.grad_norm_sq[0] == pytest.approx(1.25)
    d = c.to_dict()
    assert d["meta"]["coins"] == "independent" and len(d["loss_gap"]) == 10
    assert c.to_csv().count("\n") == 11


def test_accepts_duck_typed_problem_with_sigma2():
    class Quad:
        A = np.diag([2.0, 1.0])
        b = np.array([[1.0, 0.0], [-1.0, 0.0]])
        sigma2 = 0.6  # total variance: s2 = sigma2 / d
        noise_model = "gaussian"
        x0 = np.array([0.5, -0.5])

    ref = MatrixQuadratic(A=Quad.A, b=Quad.b, noise=0.3, x0=Quad.x0)
    spec = dict(kind="palsgd", alpha=0.1, eta=1.0, p=0.2, H=3)
    np.testing.assert_allclose(
        exact_moments(Quad(), spec, T=9).loss_gap, exact_moments(ref, spec, T=9).loss_gap
    )
    Quad.noise_model = "minibatch"
    with pytest.raises(UserInputError, match="not additive"):
        exact_moments(Quad(), spec, T=9)


@pytest.mark.parametrize(
    "bad, name",
    [
        (dict(alpha=-0.1), "alpha"),
        (dict(p=1.0), "p"),
        (dict(H=0), "H"),
        (dict(mu=1.0, outer="nesterov"), "mu"),
        (dict(gamma=0.0, outer="sgd"), "gamma"),
        (dict(lr=-1.0, alpha=None), "alpha"),
    ],
)
def test_bad_parameters_are_named(bad, name):
    prob = MatrixQuadratic(A=[[1.0]], b=np.zeros((2, 1)))
    spec = {**dict(kind="palsgd", alpha=0.1, eta=1.0, p=0.2, H=3), **bad}
    with pytest.raises(ParameterError, match=f"'{name}'"):
        exact_moments(prob, spec, T=5)


def test_unsupported_options_rejected():
    prob = MatrixQuadratic(A=[[1.0]], b=np.zeros((2, 1)))
    base = dict(kind="palsgd", alpha=0.1, eta=1.0, p=0.2, H=3)
    with pytest.raises(UserInputError, match="pull_fraction"):
        exact_moments(prob, {**base, "pull_fraction": 0.5}, T=5)
    with pytest.raises(UserInputError, match="adam"):
        exact_moments(prob, {**base, "outer": "adam"}, T=5)
    with pytest.raises(UserInputError, match="coins"):
        exact_moments(prob, {**base, "coins": "sometimes"}, T=5)
    with pytest.raises(UserInputError, match="symmetric"):
        MatrixQuadratic(A=[[1.0, 1.0], [0.0, 1.0]], b=np.zeros((2, 2)))
    with pytest.raises(UserInputError, match="semi-definite"):
        MatrixQuadratic(A=[[-1.0]], b=np.zeros((2, 1)))
    with pytest.raises(ParameterError, match="'T'"):
        exact_moments(prob, base, T=0)


# ----------------------------------------------------------------------------- Monte Carlo


def _bonferroni_check(samples: dict[str, np.ndarray], curves: ExactCurves, fwer: float = 1e-3):
    """Every recorded step: |exact - MC mean| <= z * SE, z Bonferroni-corrected over all
    steps and quantities. ``samples[key]`` has shape ``(R, T)``."""
    from scipy import stats

    n_tests = sum(v.shape[1] for v in samples.values())
    z = stats.norm.isf(fwer / (2 * n_tests))
    worst = 0.0
    for key, v in samples.items():
        mean = v.mean(0)
        se = v.std(0, ddof=1) / np.sqrt(v.shape[0])
        exact = getattr(curves, key)
        slack = 1e-9 * (1.0 + np.abs(exact))  # deterministic steps: only rounding differs
        dev = np.maximum(np.abs(exact - mean) - slack, 0.0) / np.maximum(se, 1e-300)
        worst = max(worst, float(dev.max()))
        assert np.all(dev <= z), (key, int(np.argmax(dev)), float(dev.max()), float(z))
    return worst


def _mini_mc(problem: MatrixQuadratic, spec: dict, T: int, R: int, seed: int):
    """Test-local vectorised Monte Carlo (R replicas x K workers x d) with coins common to all
    coordinates of a worker, as in the algorithm; returns per-replica curves."""
    rng = np.random.default_rng(seed)
    A, b, K, d = problem.A, problem.b, problem.K, problem.d
    sd = math.sqrt(float(problem.noise))
    alpha, H, p, eta = spec["alpha"], spec["H"], spec.get("p", 0.0), spec.get("eta", 0.0)
    outer, gamma, mu = spec.get("outer", "avg"), spec.get("gamma", 1.0), spec.get("mu", 0.0)
    T0, off = spec.get("T0", 0), spec.get("sync_offset", 0)
    if outer == "avg":
        gamma = 1.0
    shared = spec.get("coins", "independent") == "shared"
    xs = np.tile(problem.x0, (R, K, 1))
    z = np.tile(problem.x0, (R, 1))
    buf = np.zeros((R, d))
    xstar = b.mean(0)
    out = {k: np.zeros((R, T)) for k in ("loss_gap", "grad_norm_sq", "consensus")}
    for t in range(T):
        if t == T0 and T0 > 0:
            z = xs.mean(1)
            buf[:] = 0
        xbar = xs.mean(1)
        e = xbar - xstar
        ge = e @ A
        out["loss_gap"][:, t] = 0.5 * np.sum(e * ge, 1)
        out["grad_norm_sq"][:, t] = np.sum(ge**2, 1)
        out["consensus"][:, t] = np.mean(np.sum((xs - xbar[:, None]) ** 2, 2), 1)
        noise = sd * rng.standard_normal((R, K, d))
        g = (xs - b) @ A + noise
        if t < T0:
            xs = xs - alpha * g.mean(1, keepdims=True)
            continue
        u = rng.random((R, 1, 1) if shared else (R, K, 1))
        pull = u < p
        step_pull = xs - (alpha * eta / p) * (xs - z[:, None]) if p > 0 else xs
        xs = np.where(pull, step_pull, xs - (alpha / (1 - p)) * g)
        if (t - T0 + 1 + off) % H == 0:
            delta = z - xs.mean(1)
            if outer == "nesterov":
                buf = mu * buf + delta
                z = z - gamma * (delta + mu * buf)
            else:
                z = z - gamma * delta
            xs = np.repeat(z[:, None], K, 1)
    return out


MC_SPECS = [
    dict(kind="palsgd", alpha=0.1, eta=1.5, p=0.3, H=4, outer="avg", coins="independent"),
    dict(
        kind="palsgd",
        alpha=0.1,
        eta=1.5,
        p=0.3,
        H=4,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        coins="shared",
        T0=2,
        sync_offset=1,
    ),  # fmt: skip
]


@pytest.mark.parametrize("spec", MC_SPECS, ids=lambda s: s.get("coins", ""))
def test_test_local_monte_carlo_agrees(spec):
    # non-diagonal A, coins common to the coordinates of a worker: checks the decoupling
    rng = np.random.default_rng(9)
    prob = _random_problem(rng, K=3, d=2, s2=0.5, het=1.0)
    T = 14
    curves = exact_moments(prob, spec, T=T)
    samples = _mini_mc(prob, spec, T=T, R=20000, seed=10)
    _bonferroni_check(samples, curves)


# ----------------------------------------------------------------------------- theory.simulate

SIM_SPECS = {
    "sgd": dict(kind="sgd", alpha=0.3),
    "local_sgd": dict(kind="local_sgd", alpha=0.3, H=4),
    "post_local_sgd": dict(kind="post_local_sgd", alpha=0.3, H=4, T0=5),
    "diloco": dict(kind="diloco", alpha=0.3, H=4, outer="nesterov", gamma=0.7, mu=0.9),
    "palsgd_avg": dict(kind="palsgd", alpha=0.3, H=4, p=0.3, eta=1.0),
    "palsgd_shared": dict(kind="palsgd", alpha=0.3, H=4, p=0.3, eta=1.0, coins="shared"),
    "palsgd_outer_sgd": dict(
        kind="palsgd", alpha=0.3, H=4, p=0.3, eta=1.0, outer="sgd", gamma=1.3
    ),  # fmt: skip
    "palsgd_nesterov": dict(
        kind="palsgd", alpha=0.3, H=4, p=0.3, eta=1.0, outer="nesterov", gamma=0.7, mu=0.9
    ),  # fmt: skip
    "palsgd_nesterov_shared_warmup": dict(
        kind="palsgd",
        alpha=0.3,
        H=5,
        p=0.4,
        eta=1.5,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        T0=3,
        coins="shared",
        sync_offset=2,
    ),  # fmt: skip
    "palsgd_nesterov_overlapped": dict(
        kind="palsgd",
        alpha=0.3,
        H=4,
        p=0.3,
        eta=1.0,
        outer="nesterov",
        gamma=0.7,
        mu=0.9,
        T0=1,
        sync_delay=2,
    ),  # fmt: skip
}
SIM_KEYS = ("loss_gap", "grad_norm_sq", "consensus", "anchor_dist")


def _simulator():
    sim = pytest.importorskip("theory.simulate")
    problems = pytest.importorskip("theory.problems")
    return sim, problems


def _check_against_simulator(prob, kw: dict, T: int, R: int, seed: int, fwer: float = 1e-3):
    sim, _ = _simulator()
    spec = sim.AlgorithmSpec(**kw, seed=seed)
    exact = exact_moments(prob, spec, T=T)
    trace = sim.simulate(prob, spec, T=T, R=R, seed=seed + 1)
    samples = {k: np.asarray(getattr(trace, k)) for k in SIM_KEYS}
    return _bonferroni_check(samples, exact, fwer=fwer)


@pytest.mark.parametrize("label", list(SIM_SPECS))
def test_simulator_agrees_with_exact_moments(label):
    # heterogeneous (zeta > 0), rotated eigenbasis, Gaussian noise
    _, problems = _simulator()
    prob = problems.make_problem("quadratic", K=3, d=3, noise="gaussian", sigma=1.0, zeta=1.0,
                                 seed=11, rotate=True, lam_min=0.3, x0=np.full(3, 2.0))  # fmt: skip
    _check_against_simulator(prob, SIM_SPECS[label], T=16, R=6000, seed=20)


def test_simulator_detects_a_wrong_coin_mode():
    # the comparison has power: exact curves of the other coin mode are rejected
    sim, problems = _simulator()
    prob = problems.make_problem("quadratic", K=4, d=2, noise="gaussian", sigma=0.5, zeta=2.0,
                                 seed=12, lam_min=0.5, x0=np.full(2, 3.0))  # fmt: skip
    kw = dict(kind="palsgd", alpha=0.3, H=6, p=0.3, eta=1.5, coins="shared")
    spec = sim.AlgorithmSpec(**kw, seed=3)
    trace = sim.simulate(prob, spec, T=18, R=6000, seed=4)
    samples = {k: np.asarray(getattr(trace, k)) for k in SIM_KEYS}
    _bonferroni_check(samples, exact_moments(prob, spec, T=18))
    wrong = exact_moments(prob, {**kw, "coins": "independent"}, T=18)
    with pytest.raises(AssertionError):
        _bonferroni_check(samples, wrong)


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["gaussian", "rademacher", "finite_sum"])
@pytest.mark.parametrize("label", list(SIM_SPECS))
def test_simulator_agrees_large(label, noise):
    _, problems = _simulator()
    extra = dict(n_samples=7, batch=2) if noise == "finite_sum" else {}
    prob = problems.make_problem("quadratic", K=4, d=5, noise=noise, sigma=1.5, zeta=1.5,
                                 seed=13, rotate=True, lam_min=0.1, x0=np.full(5, 1.0),
                                 **extra)  # fmt: skip
    _check_against_simulator(prob, SIM_SPECS[label], T=40, R=20000, seed=30)


@pytest.mark.slow
def test_simulator_agrees_outer_steps_per_sync():
    _, problems = _simulator()
    prob = problems.make_problem("quadratic", K=3, d=3, noise="gaussian", sigma=1.0, zeta=1.0,
                                 seed=14, lam_min=0.2, x0=np.full(3, 2.0))  # fmt: skip
    kw = dict(kind="palsgd", alpha=0.2, H=4, p=0.2, eta=1.0, outer="nesterov", gamma=0.1,
              mu=0.9, outer_steps_per_sync=4)  # fmt: skip
    _check_against_simulator(prob, kw, T=40, R=20000, seed=40)


def test_unstable_pull_diverges_and_is_flagged():
    # alpha*eta/p = 5 > 2: the pull branch overshoots (q = -4), rho2 >= p q^2 = 8 per step
    prob = MatrixQuadratic(A=[[1.0]], b=np.zeros((2, 1)), noise=0.1, x0=[1.0])
    spec = dict(kind="palsgd", alpha=0.5, eta=5.0, p=0.5, H=1000, outer="avg")
    c = exact_moments(prob, spec, T=400)
    assert c.meta["diverged"] is True
    stable = exact_moments(prob, {**spec, "eta": 1.0}, T=400)
    assert stable.meta["diverged"] is False and np.all(np.isfinite(stable.loss_gap))


def test_x0_override_and_problems_quadratic_directly():
    problems = pytest.importorskip("theory.problems")
    prob = problems.make_problem("quadratic", K=3, d=4, noise="gaussian", sigma=0.8, zeta=1.0,
                                 seed=5, rotate=True)  # fmt: skip
    mine = MatrixQuadratic(A=prob.A, b=prob.b, noise=0.8**2 / 4, x0=prob.x0())
    spec = dict(kind="palsgd", alpha=0.2, eta=1.0, p=0.25, H=5, outer="nesterov", gamma=0.7,
                mu=0.9)  # fmt: skip
    x0 = np.array([1.0, -2.0, 0.5, 3.0])
    a, b = exact_moments(prob, spec, T=20, x0=x0), exact_moments(mine, spec, T=20, x0=x0)
    for key in ("loss_gap", "grad_norm_sq", "consensus", "anchor_dist", "z_dist_sq"):
        np.testing.assert_allclose(
            getattr(a, key), getattr(b, key), rtol=1e-10, atol=1e-12, err_msg=key
        )
    assert a.loss_gap[0] == pytest.approx(float(prob.f(x0)) - prob.f_star, rel=1e-12)


def test_kinds_without_an_exact_recursion_are_rejected():
    from core.errors import UserInputError
    from theory.problems import make_problem
    from theory.simulate import AlgorithmSpec

    prob = make_problem("quadratic", K=2, d=3, sigma=1.0)
    with pytest.raises(UserInputError, match="easgd"):
        exact_moments(prob, AlgorithmSpec(kind="easgd", alpha=0.1, H=2), T=4)

"""Tests of theory.problems: declared constants, noise models, registry, check_constants."""

import math

import numpy as np
import pytest
from scipy import stats

from core.errors import UserInputError
from core.validation import ParameterError
from theory.problems import (
    NOISE_MODELS,
    PROBLEMS,
    CosineProblem,
    FunctionProblem,
    LogisticProblem,
    Problem,
    QuadraticProblem,
    RobustRegressionProblem,
    check_constants,
    make_problem,
    minimize_1d_global,
    problem_names,
    register_problem,
    with_declared,
)

BUILTIN = ["quadratic", "cosine", "robust_regression", "logistic"]

CASES = [
    (name, noise, extra)
    for name in BUILTIN
    for noise in NOISE_MODELS
    for extra in ([{}] if name in ("quadratic", "cosine") else [{}, {"shards": True}])
]


def _build(name, noise, extra, K=3, d=5, seed=0):
    zeta = 0.0 if extra.get("shards") else 0.7
    return make_problem(name, K=K, d=d, noise=noise, zeta=zeta, seed=seed, **extra)


@pytest.mark.parametrize("name,noise,extra", CASES)
def test_every_declared_constant_survives_sampling(name, noise, extra):
    prob = _build(name, noise, extra)
    rep = check_constants(prob, n=16, rng=np.random.default_rng(5), n_noise=300)
    assert rep.ok
    assert rep.L_measured <= prob.L * (1 + 1e-4)
    assert rep.zeta2_measured <= prob.zeta2 * (1 + 1e-4) + 1e-12
    assert rep.f_min_found >= prob.f_star - 1e-6
    assert rep.grad_rel_error < 1e-6
    assert set(prob.exactness) == {"L", "sigma2", "zeta2", "f_star"}
    assert prob.F0 >= 0


@pytest.mark.parametrize("name,noise,extra", CASES)
def test_exact_constants_are_attained(name, noise, extra):
    """A constant declared exact must be reached (to sampling accuracy), not only bounded."""
    prob = _build(name, noise, extra)
    rep = check_constants(prob, n=16, rng=np.random.default_rng(6), n_noise=200, power_iters=150)
    if prob.exactness["L"] == "exact":
        assert rep.L_measured >= 0.995 * prob.L
    if prob.exactness["zeta2"] == "exact":
        assert rep.zeta2_measured == pytest.approx(prob.zeta2, rel=1e-9, abs=1e-14)
    if prob.exactness["f_star"] == "exact":
        assert rep.f_min_found == pytest.approx(prob.f_star, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("noise", ["gaussian", "rademacher", "finite_sum"])
@pytest.mark.parametrize("name", ["quadratic", "cosine"])
def test_noise_second_moment_is_sigma2(name, noise):
    prob = (
        make_problem(name, K=4, d=6, noise=noise, sigma=0.8, n_samples=8, batch=2)
        if (noise == "finite_sum")
        else make_problem(name, K=4, d=6, noise=noise, sigma=0.8)
    )
    assert prob.sigma2 == pytest.approx(0.64, rel=1e-12)
    e = prob.noise(np.random.default_rng(1), (20000,))
    sq = np.sum(e * e, axis=-1).ravel()
    se = sq.std() / math.sqrt(sq.size)
    assert abs(sq.mean() - 0.64) <= 5 * se + 1e-12
    m = e.mean(axis=0)  # (K, d): each coordinate's mean is ~ N(0, var/20000)
    zs = m / (e.std(axis=0) / math.sqrt(e.shape[0]))
    assert np.max(np.abs(zs)) < stats.norm.isf(1e-4 / zs.size)


def test_rademacher_values_and_gaussian_per_coordinate_variance():
    prob = make_problem("quadratic", K=2, d=4, noise="rademacher", sigma=2.0)
    e = prob.noise(np.random.default_rng(0), (1000,))
    np.testing.assert_allclose(np.abs(e), 1.0)  # sigma / sqrt(d) = 2 / 2
    g = make_problem("quadratic", K=2, d=4, noise="gaussian", sigma=2.0)
    e = g.noise(np.random.default_rng(0), (50000,))
    assert stats.kstest(e[:, 1, 2], "norm", args=(0, 1.0)).pvalue > 1e-4


@pytest.mark.parametrize("name", ["quadratic", "cosine"])
def test_offset_finite_sums_have_exact_sampling_variance(name):
    """Enumeration over the finite set: centred offsets with mean square B*sigma^2 per worker."""
    B, n, s = 3, 7, 0.9
    prob = make_problem(name, K=3, d=4, noise="finite_sum", sigma=s, n_samples=n, batch=B)
    off = prob.info["_offsets"]
    assert off.shape == (3, n, 4)
    np.testing.assert_allclose(off.mean(axis=1), 0.0, atol=1e-14)
    np.testing.assert_allclose(np.mean(np.sum(off**2, -1), axis=1), B * s * s, rtol=1e-12)
    # the minibatch mean of B draws with replacement: E||.||^2 = (1/B) * mean ||e_i||^2
    assert prob.sigma2 == pytest.approx(s * s, rel=1e-12)


def test_quadratic_finite_sum_is_a_true_finite_sum_of_sample_centres():
    prob = make_problem("quadratic", K=2, d=3, noise="finite_sum", n_samples=5, batch=1, seed=3)
    X = np.random.default_rng(0).standard_normal((2, 3))
    per_sample = (X[:, None, :] - prob.sample_centres) * prob.eigenvalues  # (K, n, d)
    np.testing.assert_allclose(per_sample.mean(axis=1), prob.local_grads(X), atol=1e-12)
    g = prob.stochastic_grads(X, np.random.default_rng(1))
    dist = np.min(np.linalg.norm(per_sample - g[:, None, :], axis=-1), axis=1)
    np.testing.assert_allclose(dist, 0.0, atol=1e-12)


@pytest.mark.parametrize("name", ["robust_regression", "logistic"])
@pytest.mark.parametrize("shards", [False, True])
def test_data_finite_sums_unbiased_and_variance_below_declared(name, shards):
    B = 2
    prob = make_problem(name, K=3, d=4, noise="finite_sum", n_samples=40, batch=B, shards=shards)
    assert prob.exactness["sigma2"] == "upper bound"
    rng = np.random.default_rng(2)
    X = 2.0 * rng.standard_normal((5, 3, 4))
    all_rows = np.broadcast_to(np.arange(40), (5, 3, 40))
    np.testing.assert_allclose(
        prob.stochastic_grads_from(X, all_rows), prob.local_grads(X), rtol=1e-10, atol=1e-12
    )
    # exact sampling variance by enumeration of the rows: (1/B) Var_i(per-sample gradient)
    for r in range(5):
        for k in range(3):
            per = np.stack(
                [prob.stochastic_grads_from(X[r], np.full((3, 1), i))[k] for i in range(40)]
            )
            var = np.mean(np.sum((per - per.mean(0)) ** 2, -1)) / B
            assert var <= prob.sigma2 * (1 + 1e-12)
    with pytest.raises(UserInputError, match="depends on x"):
        prob.noise(rng, (2,))


def test_quadratic_constants_by_hand():
    lam = np.array([0.5, 2.0])
    b = np.array([[1.0, 0.0], [-1.0, 2.0]])
    prob = QuadraticProblem(K=2, d=2, eigenvalues=lam, b=b, noise="none", sigma2=0.0)
    # bbar = (0, 1); A(b_k - bbar) = (0.5, -2), (-0.5, 2) -> zeta2 = 0.25 + 4 = 4.25
    assert prob.zeta2 == pytest.approx(4.25)
    # f_star = 1/2 mean_k (b_k - bbar)^T A (b_k - bbar) = 1/2 (0.5 + 2) = 1.25
    assert prob.f_star == pytest.approx(1.25)
    assert prob.L == 2.0
    assert float(prob.f(np.array([0.0, 1.0]))) == pytest.approx(1.25)
    np.testing.assert_allclose(prob.grad(np.array([1.0, 1.0])), [0.5, 0.0])


def test_quadratic_zeta_is_exact_and_rotation_keeps_constants():
    for rotate in (False, True):
        prob = make_problem("quadratic", K=5, d=6, zeta=1.3, rotate=rotate, spectrum="geometric")
        assert prob.zeta2 == pytest.approx(1.69, rel=1e-12)
        assert prob.L == pytest.approx(1.0)
        check_constants(prob, rng=0)
    with pytest.raises(UserInputError, match="K = 2"):
        make_problem("quadratic", K=1, zeta=0.5)


def test_cosine_f_star_matches_brute_force_and_L():
    for c, w in [(0.5, 2.0), (2.0, 1.5), (0.1, 1.0), (-0.7, 3.0)]:
        prob = CosineProblem(K=2, d=3, c=c, w=w, shifts=np.zeros((2, 3)), noise="none", sigma2=0)
        t = np.linspace(-6, 6, 2_000_001)
        brute = np.min(t * t / 2 + c * np.cos(w * t))
        assert prob.f_star / 3 == pytest.approx(brute, abs=1e-10)
        assert prob.f_star / 3 <= brute + 1e-15
        assert prob.L == pytest.approx(1 + abs(c) * w * w)
        assert prob.info["nonconvex"] == (c * w * w > 1)


@pytest.mark.parametrize("name", ["quadratic", "cosine", "robust_regression", "logistic"])
@pytest.mark.parametrize("batch", [0, -2])
def test_finite_sum_batch_below_one_is_named(name, batch):
    with pytest.raises(ParameterError, match="batch"):
        make_problem(name, K=2, d=3, noise="finite_sum", n_samples=8, batch=batch)


def test_linear_terms_must_have_zero_mean_over_workers():
    # f, grad and f_star of these classes drop <mean_k s_k, x>: shifts with a nonzero mean
    # would make f differ from mean_k f_k (and f_star = 0 no lower bound for the data problems)
    shifts = np.array([[1.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    with pytest.raises(UserInputError, match="shifts"):
        CosineProblem(K=2, d=3, c=0.5, w=2.0, shifts=shifts, noise="none", sigma2=0)
    data, labels = np.eye(3), np.ones(3)
    common = dict(K=2, data=data, labels=labels, shifts=shifts, noise="none", sigma2=None)
    common.update(batch=1, f_star=0.0, exactness={})
    with pytest.raises(UserInputError, match="shifts"):
        RobustRegressionProblem(name="robust_regression", **common)
    with pytest.raises(UserInputError, match="shifts"):
        LogisticProblem(name="logistic", **common)
    # centred shifts are accepted and f is the mean of the local functions
    centred = shifts - shifts.mean(axis=0)
    prob = CosineProblem(K=2, d=3, c=0.5, w=2.0, shifts=centred, noise="none", sigma2=0)
    x = np.array([[0.3, -1.0, 2.0]])
    assert prob.f(x)[0] == pytest.approx(prob.local_fs(prob._broadcast(x)).mean(), rel=1e-14)


def test_minimize_1d_global_finds_the_global_not_a_local_minimum():
    # double well with the deeper well on the right
    def phi(t):
        return (t * t - 1) ** 2 - 0.3 * t

    t_min, v = minimize_1d_global(phi, -2.0, 2.0, L=60.0)
    assert t_min > 0.9
    assert v == pytest.approx(float(phi(np.array([t_min]))[0]))
    tt = np.linspace(-2, 2, 400001)
    assert v <= np.min(phi(tt)) + 1e-12


def test_robust_regression_realisable_has_exact_L_and_f_star():
    for loss in ("geman_mcclure", "cauchy"):
        prob = make_problem("robust_regression", K=3, d=4, loss=loss, outliers=0.0, zeta=0.5)
        assert prob.exactness["L"] == "exact" and prob.exactness["f_star"] == "exact"
        x_true = prob.info["_x_true"]
        assert float(prob.f(x_true)) == pytest.approx(0.0, abs=1e-20)
        A = prob.data[0]
        assert prob.L == pytest.approx(np.linalg.norm(A, 2) ** 2 / A.shape[0])
        rep = check_constants(prob, rng=1, power_iters=200)
        assert rep.L_measured >= 0.999 * prob.L
    dirty = make_problem("robust_regression", K=3, d=4, outliers=0.3)
    assert dirty.exactness["L"] == "upper bound" and dirty.exactness["f_star"] == "lower bound"


def test_robust_loss_curvature_and_slope_bounds():
    prob_gm = make_problem("robust_regression", K=1, d=2, loss="geman_mcclure", scale=1.7)
    prob_c = make_problem("robust_regression", K=1, d=2, loss="cauchy", scale=1.7)
    r = np.linspace(-50, 50, 400001)
    for prob, lo in ((prob_gm, -0.25), (prob_c, -0.125)):
        d1 = prob.dell(r, 0.0)
        h = r[1] - r[0]
        d2 = np.gradient(d1, h)
        assert np.max(np.abs(d1)) <= prob.G * (1 + 1e-9)
        assert np.max(np.abs(d1)) >= prob.G * (1 - 1e-6)
        assert np.max(d2) == pytest.approx(1.0, abs=1e-6)
        assert np.min(d2) == pytest.approx(lo, abs=1e-6)


def test_logistic_L_formula_and_regulariser_curvature():
    prob = make_problem("logistic", K=2, d=5, lam=0.3, n_samples=50)
    A = prob.data[0]
    assert prob.L == pytest.approx(np.linalg.norm(A, 2) ** 2 / (4 * 50) + 0.6)
    # Hessian at 0 by finite differences: its top eigenvalue is L
    h = 1e-6
    H = np.stack([(prob.grad(h * e) - prob.grad(-h * e)) / (2 * h) for e in np.eye(5)])
    assert np.max(np.linalg.eigvalsh(0.5 * (H + H.T))) == pytest.approx(prob.L, rel=1e-6)
    t = np.linspace(-10, 10, 200001)
    r2 = np.gradient(np.gradient(t * t / (1 + t * t), t), t)
    assert np.max(r2) == pytest.approx(2.0, abs=1e-4) and np.min(r2) == pytest.approx(
        -0.5, abs=1e-4
    )


@pytest.mark.parametrize("const,factor", [("L", 0.9), ("sigma2", 0.8), ("zeta2", 0.8)])
@pytest.mark.parametrize("name", BUILTIN)
def test_a_too_small_declaration_is_caught(name, const, factor):
    noise = "gaussian"
    prob = make_problem(name, K=3, d=5, noise=noise, zeta=0.7)
    if const == "L" and prob.exactness["L"] != "exact":
        prob = make_problem(name, K=3, d=5, noise=noise, zeta=0.7, outliers=0.0)
    bad = with_declared(prob, **{const: getattr(prob, const) * factor})
    with pytest.raises(UserInputError, match=const):
        check_constants(bad, rng=3, power_iters=100)
    rep = check_constants(bad, rng=3, power_iters=100, raise_on_violation=False)
    assert not rep.ok and any(v.startswith(const) for v in rep.violations)


@pytest.mark.parametrize("name", ["quadratic", "cosine"])
def test_a_too_high_f_star_is_caught(name):
    prob = make_problem(name, K=2, d=4)
    bad = with_declared(prob, f_star=prob.f_star + 0.05)
    with pytest.raises(UserInputError, match="f_star"):
        check_constants(bad, rng=0)


def _user_logcosh(L_decl, *, grad_ok=True, noise_sigma2=None):
    # f_k(x) = sum_i log(cosh(x_i - s_k)) : f'' = sech^2 in (0, 1], L = 1 attained at x = s_k
    s = np.array([[0.5], [-0.5]]) * np.ones((2, 3))

    def lf(X):
        return np.sum(np.log(np.cosh(X - s)), axis=-1)

    def lg(X):
        return np.tanh(X - s) * (1.0 if grad_ok else 1.3)

    return FunctionProblem(
        "logcosh", K=2, d=3, local_f=lf, local_grad=lg, L=L_decl, sigma2=0.25,
        zeta2=float(np.tanh(0.5) ** 2 * 3) * 1.0001, f_star=0.0, noise="rademacher",
        noise_sigma2=noise_sigma2, exactness={"zeta2": "upper bound", "f_star": "lower bound"},
    )  # fmt: skip


def test_user_problem_true_declarations_pass_and_false_ones_are_caught():
    # zeta2: (1/K) sum_k ||tanh(x - s_k) - mean||^2 peaks at x = 0 with d tanh(1/2)^2
    ok = _user_logcosh(1.0)
    rep = check_constants(ok, rng=0)
    assert rep.ok and rep.L_measured > 0.99
    with pytest.raises(UserInputError, match="L: measured"):
        check_constants(_user_logcosh(0.8), rng=0)
    with pytest.raises(UserInputError, match="not the gradient"):
        check_constants(_user_logcosh(2.0, grad_ok=False), rng=0)
    with pytest.raises(UserInputError, match="sigma2"):
        check_constants(_user_logcosh(1.0, noise_sigma2=0.5), rng=0)


def test_biased_noise_is_caught():
    prob = _user_logcosh(1.0)
    biased = FunctionProblem(
        "biased", K=2, d=3, local_f=prob._local_f, local_grad=prob._local_grad, L=1.0,
        sigma2=1.0, zeta2=prob.zeta2, f_star=0.0,
        noise=lambda rng, shape: 0.2 + 0.5 * rng.standard_normal(shape),
    )  # fmt: skip
    with pytest.raises(UserInputError, match="zero-mean"):
        check_constants(biased, rng=0)


def test_shapes_with_leading_dimensions():
    for name in BUILTIN:
        prob = make_problem(name, K=3, d=4, zeta=0.2)
        X = np.random.default_rng(0).standard_normal((2, 5, 3, 4))
        assert prob.local_grads(X).shape == (2, 5, 3, 4)
        assert prob.local_fs(X).shape == (2, 5, 3)
        assert prob.f(X[:, :, 0]).shape == (2, 5)
        assert prob.grad(X[:, :, 0]).shape == (2, 5, 4)
        assert prob.stochastic_grads(X, np.random.default_rng(1)).shape == (2, 5, 3, 4)
        assert prob.noise(np.random.default_rng(1), (7,)).shape == (7, 3, 4)
        assert prob.x0().shape == (4,)
        out = np.empty((2, 5, 3, 4))
        assert prob.local_grads(X, out=out) is out
        np.testing.assert_allclose(out, prob.local_grads(X))
        d = prob.describe()
        assert d["name"] == name and d["K"] == 3 and "exactness" in d


def test_separable_blocks_agree_with_full_gradients():
    for name in ("quadratic", "cosine"):
        prob = make_problem(name, K=3, d=10, zeta=0.4)
        assert prob.separable
        X = np.random.default_rng(0).standard_normal((2, 3, 10))
        full = prob.local_grads(X)
        out = np.empty((2, 3, 4))
        np.testing.assert_array_equal(
            prob.local_grads_block(X[..., 3:7], 3, 7, out), full[..., 3:7]
        )
    assert not make_problem("quadratic", K=2, d=3, rotate=True).separable
    assert not make_problem("logistic", K=2, d=3).separable


def test_registry_and_input_errors():
    assert set(BUILTIN) <= set(problem_names())
    with pytest.raises(UserInputError, match="registered problems are"):
        make_problem("nope", K=2)
    with pytest.raises(UserInputError, match="noise"):
        make_problem("quadratic", K=2, noise="laplace")
    with pytest.raises(UserInputError, match="unknown option"):
        make_problem("quadratic", K=2, colour="red")
    with pytest.raises(UserInputError, match="'K'"):
        make_problem("quadratic", K=0)
    with pytest.raises(UserInputError, match="sigma = 0"):
        make_problem("cosine", K=2, noise="none", sigma=1.0)
    with pytest.raises(UserInputError, match="do not pass sigma"):
        make_problem("logistic", K=2, noise="finite_sum", sigma=1.0)
    with pytest.raises(UserInputError, match="zeta = 0"):
        make_problem("logistic", K=2, shards=True, zeta=1.0)
    with pytest.raises(UserInputError, match="'sigma'"):
        make_problem("quadratic", K=2, sigma=-1.0)

    def factory(*, K, d, noise, sigma, zeta, seed):
        return make_problem("quadratic", K=K, d=d, noise=noise, sigma=sigma, zeta=zeta, seed=seed)

    try:
        register_problem("my_quad", factory)
        assert isinstance(make_problem("my_quad", K=2, d=3), Problem)
        with pytest.raises(UserInputError, match="already registered"):
            register_problem("my_quad", lambda **kw: None)
        register_problem("bad", lambda **kw: 3, replace=True)
        with pytest.raises(TypeError, match="not a Problem"):
            make_problem("bad", K=2)
    finally:
        PROBLEMS.pop("my_quad", None)
        PROBLEMS.pop("bad", None)


def test_problem_data_depend_on_seed_only():
    a = make_problem("logistic", K=2, d=3, seed=4)
    b = make_problem("logistic", K=2, d=3, seed=4)
    c = make_problem("logistic", K=2, d=3, seed=5)
    np.testing.assert_array_equal(a.data, b.data)
    assert not np.array_equal(a.data, c.data)

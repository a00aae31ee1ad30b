"""Exact first and second moments of every algorithm on heterogeneous quadratics.

Problem class. Worker ``k`` minimises ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)`` with ``A``
symmetric positive semi-definite, ``b`` of shape ``(K, d)``. A stochastic gradient is
``g_k(x) = A (x - b_k) + xi`` with additive noise ``xi`` of mean zero, independent across
workers and steps, with covariance ``Sigma`` (``Sigma_k`` may depend on the worker; for the
simulator's Gaussian and Rademacher models ``Sigma = s2 * I`` with ``s2 = sigma^2 / d``;
minibatch sampling from a finite sum is additive on a quadratic too, see :func:`_as_eig`). The global objective
``f = (1/K) sum_k f_k`` has minimiser ``x* = bbar = (1/K) sum_k b_k`` (on ``range(A)``) and

    f(x) - f_star = 1/2 (x - bbar)^T A (x - bbar),     grad f(x) = A (x - bbar).

Why the moments are exact. In the eigenbasis ``A = U diag(lambda) U^T`` the coordinates
decouple: coordinate ``i`` of every worker, of the anchor ``z`` and of the outer momentum
buffer evolves by an affine map whose random coefficients (the pull coins) are drawn fresh
at each step, independently of the current state, plus additive noise with variance
``(U^T Sigma U)_ii``. Coins are common to all coordinates of a worker, but a coordinate's
second moment only involves that coordinate's own moments, so per eigendirection the
augmented second-moment matrix ``S = E[y y^T]`` of ``y = (x_1..x_K, z, buf, 1)`` (the
constant 1 carries the means and the heterogeneity offsets) obeys an exact linear
recursion, step by step. This module propagates it for ``t = 0..T-1``. No symmetry between
workers is assumed: with heterogeneity the workers' means differ, and the full ``K x K``
worker block is tracked. Cost: ``O(T d K^2)`` for the local steps plus ``O(d K^3)`` per
sync.

The step (notation of the PALSGD paper, Naganuma et al., TMLR 2025, Algorithm 1): ``alpha`` inner learning rate, ``eta`` pull rate, ``p`` pull
probability. On each local step, worker ``k`` with a coin ``c ~ Bernoulli(p)``:

* pull (``c = 1``): ``x <- x - (alpha*eta/p) (x - z)``,
* gradient (``c = 0``): ``x <- x - (alpha/(1-p)) g_k(x)``.

Coins are independent across workers (``coins='independent'``, the algorithm as
described) or common to all workers (``coins='shared'``, the authors' code). Warm-up steps
``t < T0`` are minibatch SGD ``x <- x - alpha (1/K) sum_k g_k(x)``; at ``t = T0`` the
anchor is set ``z <- x`` and the outer momentum buffer to zero. The sync after local step
``t`` happens when ``(t - T0 + 1 + sync_offset) % H == 0``: with ``Delta = z - mean_k x_k``,
outer SGD is ``z <- z - gamma Delta`` (averaging is ``gamma = 1``) and outer Nesterov is the
PyTorch form ``buf <- mu buf + Delta; z <- z - gamma (Delta + mu buf)``; then every worker
restarts from ``z``.

Sources of the closed forms checked against this recursion (``tests/test_quadratic.py``):
the within-round mean ``A_H = -(lambda/(lambda+eta)) (1 - c^H)``, ``c = 1 - alpha
(lambda+eta)``, the per-step mean-square contraction ``rho2 = c^2 + p(1-p) alpha^2
(eta/p - lambda/(1-p))^2`` and the noise injection ``alpha^2 s2 / (1-p)`` follow from
the two branches of one step (a pull multiplies the deviation by ``1 - alpha eta/p`` with
probability ``p``, a gradient step by ``1 - alpha lambda/(1-p)`` with probability ``1-p``)
by taking the mean and the variance over the coin; the Local SGD round mean factor ``(1-gamma) + gamma (1 - alpha lambda)^H`` is the
quadratic mean map of Khaled, Jin, Kale, Fergus, Douillard and Zaheer (NeurIPS 2025,
arXiv 2509.10439). Because every ``f_k`` has the same Hessian, ``mean_k g_k(x_k) =
A (xbar - bbar) + mean_k xi_k``: under Local SGD with averaging the averaged iterate follows
minibatch-K SGD exactly (the mechanism of Woodworth et al., ICML 2020), with or without
heterogeneous ``b_k``; the tests check this equality of the exact curves.

The pull-fraction option of the trainer (pulling only part of the parameters) is not
modelled here; a spec that asks for it is rejected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from theory.algorithm import outer_step
from theory.validation import UserInputError, check_int, validate, validate_one

__all__ = [
    "QuadraticProblem",
    "ExactCurves",
    "Branch",
    "exact_moments",
    "local_step_branches",
    "within_round_moments",
    "within_round_closed_form",
    "local_sgd_round_mean_factor",
]

_OUTER_AVG = ("avg", "average", "averaging", "mean")
_OUTER_SGD = ("sgd",)
_OUTER_NESTEROV = ("nesterov",)
_KIND_MINIBATCH = ("minibatch", "minibatch_sgd", "sgd", "ddp", "mbsgd")
_KIND_LOCAL = ("local_sgd", "post_local_sgd", "diloco", "palsgd")


# ----------------------------------------------------------------------------- problem


@dataclass(frozen=True)
class QuadraticProblem:
    """Heterogeneous quadratic ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)`` with additive noise.

    A light stand-alone description for :func:`exact_moments` (which also accepts the
    quadratics of :mod:`theory.problems` directly). ``A``: ``(d, d)`` symmetric PSD matrix.
    ``b``: ``(K, d)`` per-worker centres. ``noise``: the covariance of the additive gradient
    noise of one worker at one step, as a scalar ``s2`` (isotropic, ``Sigma = s2 I``;
    ``s2 = sigma^2/d`` for total variance ``sigma^2``), a ``(d,)`` vector of variances along
    A's eigenvectors (in the order of ``numpy.linalg.eigh``), or a ``(d, d)`` covariance
    matrix in the original coordinates. ``x0``: starting point (zeros if omitted).
    """

    A: np.ndarray
    b: np.ndarray
    noise: float | np.ndarray = 0.0
    x0: np.ndarray | None = None

    def __post_init__(self) -> None:
        A = np.asarray(self.A, dtype=float)
        if A.ndim == 0:
            A = A.reshape(1, 1)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise UserInputError(f"A must be a square matrix, got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            raise UserInputError("A has NaN or infinite entries")
        if not np.allclose(A, A.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(A).max()))):
            raise UserInputError("A must be symmetric")
        d = A.shape[0]
        b = _check_b(self.b, d)
        x0 = _check_x0(self.x0, d)
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "x0", x0)
        lam, U = np.linalg.eigh(0.5 * (A + A.T))
        tol = 1e-12 * max(1.0, float(np.abs(lam).max()))
        if lam.min() < -tol:
            raise UserInputError(
                f"A must be positive semi-definite (smallest eigenvalue {lam.min():.3g})"
            )
        object.__setattr__(self, "_lam", np.clip(lam, 0.0, None))
        object.__setattr__(self, "_U", U)
        object.__setattr__(self, "_s2", _noise_in_eigenbasis(self.noise, U))

    @property
    def K(self) -> int:
        return int(self.b.shape[0])

    @property
    def d(self) -> int:
        return int(self.A.shape[0])

    @property
    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of ``A`` in ascending order."""
        return self._lam  # type: ignore[attr-defined]

    @property
    def eigenvectors(self) -> np.ndarray:
        """Orthonormal eigenvectors of ``A`` as columns."""
        return self._U  # type: ignore[attr-defined]

    @property
    def noise_variances(self) -> np.ndarray:
        """Per-eigendirection noise variances ``(U^T Sigma U)_ii``, shape ``(d,)``."""
        return self._s2  # type: ignore[attr-defined]

    @property
    def x_star(self) -> np.ndarray:
        """The minimiser ``bbar`` of ``f`` (unique when ``A`` is positive definite)."""
        return self.b.mean(axis=0)


@dataclass(frozen=True)
class _Eig:
    """A quadratic in A's eigenbasis: eigenvalues ``lam`` (d,), eigenvectors ``U`` (columns;
    ``None`` for the identity), centres ``b`` (K, d) in the original coordinates, noise
    variance ``s2`` (d, K) per eigendirection and worker, start ``x0`` (d,)."""

    lam: np.ndarray
    U: np.ndarray | None
    b: np.ndarray
    s2: np.ndarray
    x0: np.ndarray

    def to_eig(self, v: np.ndarray) -> np.ndarray:
        return v if self.U is None else v @ self.U

    def from_eig(self, v: np.ndarray) -> np.ndarray:
        return v if self.U is None else v @ self.U.T


def _check_b(b: Any, d: int) -> np.ndarray:
    b = np.asarray(b, dtype=float)
    if b.ndim == 1 and d == 1:
        b = b.reshape(-1, 1)
    if b.ndim != 2 or b.shape[1] != d:
        raise UserInputError(f"b must have shape (K, {d}), got {b.shape}")
    validate_one("K", b.shape[0])
    if not np.all(np.isfinite(b)):
        raise UserInputError("b has NaN or infinite entries")
    return b


def _check_x0(x0: Any, d: int) -> np.ndarray:
    x0 = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float).reshape(-1)
    if x0.shape != (d,) or not np.all(np.isfinite(x0)):
        raise UserInputError(f"x0 must be a finite vector of length {d}")
    return x0


def _noise_in_eigenbasis(noise: Any, U: np.ndarray) -> np.ndarray:
    d = U.shape[0]
    arr = np.asarray(noise, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise UserInputError("noise variance has NaN or infinite entries")
    if arr.ndim == 0:
        out = np.full(d, float(arr))
    elif arr.shape == (d,):
        out = arr.copy()
    elif arr.shape == (d, d):
        out = np.einsum("ij,ik,kj->j", U, arr, U)
    else:
        raise UserInputError(
            f"noise must be a scalar variance, a ({d},) vector or a ({d}, {d}) covariance; "
            f"got shape {arr.shape}"
        )
    if np.any(out < -1e-12 * max(1.0, float(np.abs(out).max()))):
        raise UserInputError("noise variance must be nonnegative")
    return np.clip(out, 0.0, None)


def _as_eig(problem: Any) -> _Eig:
    """The quadratic in its eigenbasis, from a :class:`QuadraticProblem`, a
    ``theory.problems.QuadraticProblem`` or any object/dict with ``A`` and ``b``.

    For :mod:`theory.problems` quadratics (attributes ``eigenvalues``, ``rotation``, ``b``,
    ``noise_model``): ``"gaussian"`` and ``"rademacher"`` noise are isotropic with
    per-coordinate variance ``sigma2/d`` (the variance fixed when the problem was built);
    ``"finite_sum"`` minibatch noise is additive on a quadratic (a sample's gradient is
    ``A (x - b_{k,i})``, so the sampling error does not depend on ``x``): with ``B`` indices
    drawn uniformly with replacement from ``n`` zero-mean offsets ``o_{k,i}``, worker ``k``'s
    noise covariance is ``(1/(B n)) sum_i o_{k,i} o_{k,i}^T``. Other objects: ``A`` (or
    ``Q``/``hessian``), ``b``, noise from ``noise_cov``/``noise_var``/``s2`` or ``sigma2``
    (total variance, ``s2 = sigma2/d``).
    """
    if isinstance(problem, QuadraticProblem):
        return _Eig(
            lam=problem.eigenvalues,
            U=problem.eigenvectors,
            b=problem.b,
            s2=np.repeat(problem.noise_variances[:, None], problem.K, axis=1),
            x0=problem.x0,
        )
    if isinstance(problem, Mapping):
        get = problem.get
    else:

        def get(name: str, default: Any = None) -> Any:
            return getattr(problem, name, default)

    b = _first(get, ("b", "centers", "b_k"))
    lam = _first(get, ("eigenvalues",))
    A = _first(get, ("A", "Q", "hessian"))
    if b is None or (lam is None and A is None):
        raise UserInputError(
            f"problem {type(problem).__name__} is not a quadratic: exact moments need "
            "A (or its eigenvalues) and b"
        )
    x0 = get("x0")
    if callable(x0):
        x0 = x0()
    if lam is not None:
        lam = np.asarray(lam, dtype=float).reshape(-1)
        if np.any(lam < 0) or not np.all(np.isfinite(lam)):
            raise UserInputError("eigenvalues must be finite and nonnegative")
        d = lam.shape[0]
        rot = get("rotation")
        U = None if rot is None else np.asarray(rot, dtype=float)
        if U is not None and U.shape != (d, d):
            raise UserInputError(f"rotation must have shape ({d}, {d}), got {U.shape}")
    else:
        qp = QuadraticProblem(A=A, b=b, noise=0.0, x0=x0)
        lam, U, d = qp.eigenvalues, qp.eigenvectors, qp.d
    b = _check_b(b, d)
    K = b.shape[0]
    x0 = _check_x0(x0, d)
    s2 = _noise_of(problem, get, U, d, K)
    return _Eig(lam=lam, U=U, b=b, s2=s2, x0=x0)


def _noise_of(problem: Any, get: Any, U: np.ndarray | None, d: int, K: int) -> np.ndarray:
    """Noise variance ``(d, K)`` per eigendirection and worker (see :func:`_as_eig`)."""
    model = get("noise_model")
    if model is None and isinstance(get("noise"), str):
        model = get("noise")
    model = None if model is None else str(model).lower()
    if model == "none":
        return np.zeros((d, K))
    if model == "finite_sum":
        info = get("info") or {}
        offsets, batch = info.get("_offsets"), info.get("batch")
        if offsets is None or batch is None:
            raise UserInputError("finite_sum quadratic without per-sample offsets")
        offsets = np.asarray(offsets, dtype=float)  # (K, n, d), original coordinates
        scale = max(1.0, float(np.abs(offsets).max()))
        if np.abs(offsets.mean(axis=1)).max() > 1e-9 * scale:
            raise UserInputError(
                "finite_sum offsets are not zero-mean: the sampling error would bias the "
                "gradients, which the exact moments do not model"
            )
        proj = offsets if U is None else offsets @ U
        return (np.mean(proj**2, axis=1) / float(batch)).T
    if model not in (None, "gaussian", "rademacher", "additive"):
        raise UserInputError(
            f"noise model {model!r} is not additive: exact moments support gaussian, "
            "rademacher and (on quadratics) finite_sum noise"
        )
    noise = _first(get, ("noise_cov", "noise_var", "s2"))
    if noise is None:
        total = None
        additive = getattr(problem, "_additive_variance", None)
        if callable(additive):
            total = float(additive())  # the variance fixed at construction
        if total is None:
            total = get("sigma2")
        if total is None and get("sigma") is not None:
            total = float(get("sigma")) ** 2
        noise = 0.0 if total is None else float(total) / d
    s2 = _noise_in_eigenbasis(noise, np.eye(d) if U is None else U)
    return np.repeat(s2[:, None], K, axis=1)


def _first(get: Any, names: Sequence[str]) -> Any:
    for name in names:
        val = get(name)
        if val is not None and not callable(val):
            return val
    return None


# ----------------------------------------------------------------------------- algorithm


@dataclass(frozen=True)
class _Algo:
    alpha: float
    H: int
    p: float
    eta: float
    outer: str  # "sgd" (momentum mu) or "nesterov"
    gamma: float
    mu: float
    T0: float  # math.inf for minibatch SGD
    shared: bool
    sync_offset: int
    outer_steps: int = 1  # outer steps per sync (extra ones on a zero outer gradient)


def _spec_get(spec: Any, name: str, default: Any = None) -> Any:
    if isinstance(spec, Mapping):
        return spec.get(name, default)
    return getattr(spec, name, default)


def _as_algo(spec: Any) -> _Algo:
    """Normalise an algorithm spec (``theory.simulate.AlgorithmSpec``, a dict, or any object
    with the fields ``kind, alpha, H, p, eta, outer, gamma, mu, T0, coins, sync_offset``)."""
    kind = str(_spec_get(spec, "kind", "palsgd") or "palsgd").lower().replace("-", "_")
    alpha = _spec_get(spec, "alpha")
    if alpha is None:
        alpha = _spec_get(spec, "lr")
    if alpha is None:
        raise UserInputError("algorithm spec lacks the inner learning rate 'alpha'")
    H = _spec_get(spec, "H", 1)
    p = _spec_get(spec, "p", 0.0) or 0.0
    eta = _spec_get(spec, "eta", 0.0) or 0.0
    T0 = _spec_get(spec, "T0", 0) or 0
    sync_offset = _spec_get(spec, "sync_offset", 0) or 0
    outer_steps = _spec_get(spec, "outer_steps_per_sync", 1) or 1
    sync_offset = check_int("sync_offset", sync_offset, 0, integral_floats=True)
    outer_steps = check_int("outer_steps_per_sync", outer_steps, 1, integral_floats=True)
    outer = str(_spec_get(spec, "outer", "avg") or "avg").lower()
    gamma = _spec_get(spec, "gamma", 1.0)
    mu = _spec_get(spec, "mu", 0.0) or 0.0
    coins = str(_spec_get(spec, "coins", "independent") or "independent").lower()
    fraction = _spec_get(spec, "pull_fraction", None)
    if fraction is not None and float(fraction) != 1.0:
        raise UserInputError(
            "pull_fraction != 1 is not supported by exact moments (a partial pull is not "
            "a per-eigendirection affine map)"
        )
    if coins not in ("independent", "shared"):
        raise UserInputError(f"coins must be 'independent' or 'shared', got {coins!r}")
    validate(alpha=alpha, H=H, p=p, eta=eta, T0=T0, mu=mu)
    if kind not in _KIND_MINIBATCH + _KIND_LOCAL:
        raise UserInputError(
            f"algorithm kind {kind!r} has no exact moment recursion here; known kinds: "
            f"{sorted(_KIND_MINIBATCH + _KIND_LOCAL)} (simulate EASGD with theory.simulate)"
        )
    if kind in _KIND_MINIBATCH:
        return _Algo(float(alpha), 1, 0.0, 0.0, "sgd", 1.0, 0.0, math.inf, False, 0)
    if outer in _OUTER_AVG:
        outer, gamma, mu = "sgd", 1.0, 0.0
    elif outer in _OUTER_SGD:
        outer = "sgd"
    elif outer not in _OUTER_NESTEROV:
        raise UserInputError(
            f"outer optimizer {outer!r} has no exact moment recursion: use 'avg', 'sgd' or "
            "'nesterov' (Adam is nonlinear; simulate it)"
        )
    validate(gamma=gamma)
    return _Algo(
        float(alpha),
        int(H),
        float(p),
        float(eta),
        outer,
        float(gamma),
        float(mu),
        float(T0),
        coins == "shared",
        int(sync_offset),
        int(outer_steps),
    )


# ----------------------------------------------------------------------------- one step


@dataclass(frozen=True)
class Branch:
    """One branch of a local step on one eigendirection (scalars or sympy expressions).

    With probability ``prob`` a worker's shifted coordinate ``y = x - bbar`` becomes
    ``scale*y + pull*(z - bbar) + drift*delta_k + noise term``, where
    ``delta_k = b_k - bbar`` and the noise term has mean zero and variance ``noise``.
    """

    prob: Any
    scale: Any
    pull: Any
    drift: Any
    noise: Any


def local_step_branches(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any) -> tuple[Branch, ...]:
    """The two branches of a PALSGD local step along an eigendirection with eigenvalue ``lam``.

    Gradient branch (probability ``1-p``): ``y <- y - (alpha/(1-p)) (lam (y - delta_k) + xi)``
    with ``Var xi = s2``. Pull branch (probability ``p``): ``y <- y - (alpha eta/p)(y - z)``.
    Pure arithmetic, so the arguments may be numbers, numpy arrays or sympy symbols. A
    numeric ``p == 0`` (Local SGD, DiLoCo) returns the gradient branch only.
    """
    cg = alpha / (1 - p)
    grad = Branch(prob=1 - p, scale=1 - cg * lam, pull=0 * lam, drift=cg * lam, noise=cg**2 * s2)
    if isinstance(p, int | float) and p == 0:
        return (grad,)
    cp = alpha * eta / p
    pull = Branch(prob=p, scale=1 - cp + 0 * lam, pull=cp + 0 * lam, drift=0 * lam, noise=0 * s2)
    return (grad, pull)


def within_round_moments(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any, H: int):
    """Coefficients ``(A_H, B_H, C_H)`` of one worker's deviation ``e = x - z`` after ``H``
    local steps from ``x = z`` on a homogeneous quadratic (``delta_k = 0``, ``x* = 0``):
    ``E[e | z] = A_H z`` and ``E[e^2 | z] = B_H z^2 + C_H`` (the recursion of the theory
    notes, section 4.1), computed from :func:`local_step_branches`. Works with sympy."""
    validate_one("H", H)
    A, B, C = 0 * lam, 0 * lam, 0 * lam
    for _ in range(int(H)):
        nA, nB, nC = 0 * lam, 0 * lam, 0 * lam
        for br in local_step_branches(lam, alpha, eta, p, s2):
            # x = z + e; x' - z = scale*e + (scale + pull - 1) z + noise
            u = br.scale + br.pull - 1
            nA = nA + br.prob * (br.scale * A + u)
            nB = nB + br.prob * (br.scale**2 * B + 2 * br.scale * u * A + u**2)
            nC = nC + br.prob * (br.scale**2 * C + br.noise)
        A, B, C = nA, nB, nC
    return A, B, C


def within_round_closed_form(lam: Any, alpha: Any, eta: Any, p: Any, s2: Any, H: Any):
    """Closed forms ``(A_H, C_H, rho2)`` (identities I4, I5 of the theory notes):
    ``A_H = -(lam/(lam+eta)) (1 - c^H)`` with ``c = 1 - alpha (lam+eta)``;
    ``rho2 = c^2 + p(1-p) alpha^2 (eta/p - lam/(1-p))^2`` (per-step mean-square contraction);
    ``C_H = alpha^2 s2/(1-p) (1 - rho2^H)/(1 - rho2)`` (noise accumulated in a round).
    A numeric ``p == 0`` never pulls (Local SGD): ``eta`` is then taken as 0."""
    if isinstance(p, int | float) and p == 0:
        c = 1 - alpha * lam
        A = -(1 - c**H) + 0 * lam
        rho2 = c**2
        C = alpha**2 * s2 * (1 - rho2**H) / (1 - rho2)
        return A, C, rho2
    c = 1 - alpha * (lam + eta)
    A = -(lam / (lam + eta)) * (1 - c**H)
    rho2 = c**2 + p * (1 - p) * alpha**2 * (eta / p - lam / (1 - p)) ** 2
    C = alpha**2 * s2 / (1 - p) * (1 - rho2**H) / (1 - rho2)
    return A, C, rho2


def local_sgd_round_mean_factor(lam: Any, alpha: Any, gamma: Any, H: Any) -> Any:
    """Mean contraction of one Local SGD round with outer SGD(``gamma``) along eigenvalue
    ``lam``: ``(1 - gamma) + gamma (1 - alpha lam)^H`` (Khaled et al. 2025)."""
    return (1 - gamma) + gamma * (1 - alpha * lam) ** H


# ----------------------------------------------------------------------------- curves


@dataclass
class ExactCurves:
    """Exact expected curves; the state is recorded before step ``t`` for ``t = 0..T-1``.

    ``loss_gap[t] = E f(xbar_t) - f_star``; ``grad_norm_sq[t] = E||grad f(xbar_t)||^2``;
    ``consensus[t] = E (1/K) sum_k ||x_k,t - xbar_t||^2``; ``anchor_dist[t] =
    E (1/K) sum_k ||x_k,t - z_t||^2`` (zero during warm-up, where the anchor is the model).
    ``final_loss_gap``, ``final_grad_norm_sq``: the same after the last step.
    Rounds: ``round_steps[r]`` is the step before which anchor ``z_r`` is in place
    (``r = 0``: start of the local phase, ``r >= 1``: after the ``r``-th sync; a sync after
    the last step gives ``T``); ``z_dist_sq[r] = E||z_r - x*||^2`` and
    ``z_mean[r] = E z_r - x*`` (shape ``(rounds, d)``), with ``x* = bbar``.
    """

    steps: np.ndarray
    loss_gap: np.ndarray
    grad_norm_sq: np.ndarray
    consensus: np.ndarray
    anchor_dist: np.ndarray = field(default_factory=lambda: np.zeros(0))
    final_loss_gap: float = math.nan
    final_grad_norm_sq: float = math.nan
    round_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    z_dist_sq: np.ndarray = field(default_factory=lambda: np.zeros(0))
    z_mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    meta: dict[str, Any] = field(default_factory=dict)

    def mean_grad_norm_sq(self) -> float:
        """``(1/T) sum_t E||grad f(xbar_t)||^2``: the quantity the nonconvex bounds control."""
        return float(np.mean(self.grad_norm_sq))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (arrays as lists)."""
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self).items()}
        out["mean_grad_norm_sq"] = self.mean_grad_norm_sq()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_csv(self) -> str:
        """Per-step CSV: ``step,loss_gap,grad_norm_sq,consensus,anchor_dist``."""
        rows = ["step,loss_gap,grad_norm_sq,consensus,anchor_dist"]
        cols = (self.steps, self.loss_gap, self.grad_norm_sq, self.consensus, self.anchor_dist)
        for t, f, g, c, a in zip(*cols, strict=True):
            rows.append(f"{int(t)},{f!r},{g!r},{c!r},{a!r}")
        return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------- engine


def exact_moments(
    problem: Any, spec: Any, *, T: int, x0: Any = None, progress: bool = False
) -> ExactCurves:
    """Exact expected curves of the algorithm ``spec`` on the quadratic ``problem``.

    ``problem``: a :class:`QuadraticProblem`, a quadratic of :mod:`theory.problems`
    (``gaussian``, ``rademacher``, ``finite_sum`` or ``none`` noise), or any object with
    ``A`` and ``b`` (see :func:`_as_eig`). ``spec``: ``theory.simulate.AlgorithmSpec`` or
    any object/dict with ``kind, alpha, H, p, eta, outer ('average'|'sgd'|'nesterov'),
    gamma, mu, T0, coins ('independent'|'shared'), sync_offset, outer_steps_per_sync``;
    ``kind='sgd'`` (also ``'minibatch'``, ``'ddp'``) runs minibatch SGD at every step.
    ``T``: number of steps (pull steps count). ``x0``: starting point (default: the
    problem's). All workers start at ``x0``; the anchor starts at ``x0`` (``T0 = 0``) or at
    the warm-up iterate (``T0 > 0``), the outer momentum buffer at zero. ``progress``
    shows a tqdm bar over the steps. Cost ``O(T d K^2 + (T/H) d K^3)``.
    """
    prob = _as_eig(problem)
    algo = _as_algo(spec)
    validate_one("T", T)
    T = int(T)
    lam, s2 = prob.lam, prob.s2
    K, d = prob.b.shape
    bbar = prob.b.mean(axis=0)
    delta = prob.to_eig(prob.b - bbar).T  # (d, K): heterogeneity offsets per eigendirection
    start = prob.x0 if x0 is None else _check_x0(x0, d)
    y0 = prob.to_eig(start - bbar)

    n = K + 3  # workers, z, buf, constant 1
    iz, i1 = K, K + 2
    v0 = np.zeros((d, n))
    v0[:, :K] = y0[:, None]
    v0[:, iz] = y0
    v0[:, i1] = 1.0
    S = v0[:, :, None] * v0[:, None, :]

    a, eta, p = algo.alpha, algo.eta, algo.p
    # branch noise for unit variance, scaled per worker by s2 (d, K)
    step_map = _step_map(local_step_branches(lam, a, eta, p, 1.0), delta)
    warm_noise = a**2 * s2.sum(axis=1) / K**2  # Var of alpha * mean_k xi_k
    sync_J = _sync_matrix(K, algo)
    start_J = _start_matrix(K)

    loss, grad, cons, anch = (np.empty(T) for _ in range(4))
    r_steps: list[int] = []
    r_dist: list[float] = []
    r_mean: list[np.ndarray] = []

    def record_round(step: int) -> None:
        r_steps.append(step)
        r_dist.append(float(np.sum(S[:, iz, iz])))
        r_mean.append(prob.from_eig(S[:, iz, i1]))

    def ybar_sq() -> np.ndarray:
        return S[:, :K, :K].sum(axis=(1, 2)) / K**2

    # an unstable configuration overflows to inf: that is the answer, reported in meta
    with np.errstate(over="ignore", invalid="ignore"):
        for t in tqdm(range(T), desc="exact moments", disable=not progress, leave=False):
            local = t >= algo.T0
            if local and t == algo.T0:
                if algo.T0 > 0:
                    S = _apply_linear(start_J, S)
                record_round(t)
            ybar2 = ybar_sq()
            diag = np.einsum("dkk->dk", S[:, :K, :K])
            loss[t] = 0.5 * float(lam @ ybar2)
            grad[t] = float((lam**2) @ ybar2)
            cons[t] = float(np.sum(diag.sum(axis=1) / K - ybar2))
            if local:
                anch[t] = float(
                    np.sum(diag.sum(axis=1) / K - 2 * S[:, :K, iz].mean(axis=1) + S[:, iz, iz])
                )
                S = _local_step(S, K, step_map, s2, algo.shared)
                if (t - int(algo.T0) + 1 + algo.sync_offset) % algo.H == 0:
                    S = _apply_linear(sync_J, S)
                    record_round(t + 1)
            else:
                anch[t] = 0.0
                S = _warm_step(S, K, 1 - a * lam, warm_noise)
        ybar2 = ybar_sq()
    finite = bool(np.all(np.isfinite(S)))

    return ExactCurves(
        steps=np.arange(T),
        loss_gap=loss,
        grad_norm_sq=grad,
        consensus=np.maximum(cons, 0.0),
        anchor_dist=np.maximum(anch, 0.0),
        final_loss_gap=0.5 * float(lam @ ybar2),
        final_grad_norm_sq=float((lam**2) @ ybar2),
        round_steps=np.asarray(r_steps, dtype=int),
        z_dist_sq=np.asarray(r_dist),
        z_mean=np.asarray(r_mean).reshape(len(r_mean), d),
        meta={
            "K": K,
            "d": d,
            "T": T,
            "alpha": a,
            "H": algo.H,
            "p": p,
            "eta": eta,
            "outer": algo.outer,
            "gamma": algo.gamma,
            "mu": algo.mu,
            "T0": None if math.isinf(algo.T0) else int(algo.T0),
            "coins": "shared" if algo.shared else "independent",
            "sync_offset": algo.sync_offset,
            "outer_steps_per_sync": algo.outer_steps,
            "diverged": not finite,
        },
    )


def _branch_blocks(br: Branch, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-direction scale ``(d,)`` and the ``(d, K, 3)`` coefficients on ``(z, buf, 1)``."""
    d, K = delta.shape
    scale = np.broadcast_to(np.asarray(br.scale, dtype=float), (d,))
    B = np.zeros((d, K, 3))
    B[:, :, 0] = np.broadcast_to(np.asarray(br.pull, dtype=float), (d,))[:, None]
    B[:, :, 2] = np.broadcast_to(np.asarray(br.drift, dtype=float), (d,))[:, None] * delta
    return scale, B


def _map_blocks(W, C, O, scale, B):
    """Worker block and worker/others block after ``y_w <- scale*y_w + B y_o`` (exact)."""
    Bt = B.transpose(0, 2, 1)
    BO = B @ O
    s = scale[:, None, None]
    # s^2 W + s (C B^T + B C^T) + B O B^T, with B C^T = (C B^T)^T
    CB = s * (C @ Bt)
    W_new = s**2 * W + CB + CB.transpose(0, 2, 1) + BO @ Bt
    C_new = s * C + BO
    return W_new, C_new


def _assemble(S: np.ndarray, K: int, W_new: np.ndarray, C_new: np.ndarray) -> np.ndarray:
    out = S.copy()
    out[:, :K, :K] = W_new
    out[:, :K, K:] = C_new
    out[:, K:, :K] = C_new.transpose(0, 2, 1)
    return out


@dataclass(frozen=True)
class _StepMap:
    """The per-direction maps of a local step, the same at every step: for each branch
    ``(prob, scale (d,), B (d, K, 3))`` (see :func:`_branch_blocks`), their
    probability-weighted means ``mean_scale``, ``mean_B`` and the mean unit-noise factor
    ``noise`` (d,)."""

    branches: tuple[tuple[float, np.ndarray, np.ndarray], ...]
    mean_scale: np.ndarray
    mean_B: np.ndarray
    noise: np.ndarray


def _step_map(branches: Sequence[Branch], delta: np.ndarray) -> _StepMap:
    d, K = delta.shape
    blocks = []
    noise = np.zeros(d)
    mean_scale = np.zeros(d)
    mean_B = np.zeros((d, K, 3))
    for br in branches:
        scale, B = _branch_blocks(br, delta)
        blocks.append((br.prob, scale, B))
        noise += br.prob * np.broadcast_to(np.asarray(br.noise, dtype=float), (d,))
        mean_scale += br.prob * scale
        mean_B += br.prob * B
    return _StepMap(tuple(blocks), mean_scale, mean_B, noise)


def _local_step(S: np.ndarray, K: int, step: _StepMap, s2: np.ndarray, shared: bool) -> np.ndarray:
    """One local step of every worker: exact update of ``S = E[y y^T]`` per direction.

    Shared coins: every worker takes the same branch, so ``S'`` is the branch average of
    ``M S M^T``. Independent coins: a worker's row is linear in its own coin, so
    cross-worker entries use the mean map and each worker's own second moment is the branch
    average (the diagonal of the shared-coin formula). Noise is independent per worker
    (variance ``s2[:, k]`` times the branch's unit-noise factor) and enters the diagonal.
    """
    W, C, O = S[:, :K, :K], S[:, :K, K:], S[:, K:, K:]
    W_sh = np.zeros_like(W)
    C_new = np.zeros_like(C)
    for prob, scale, B in step.branches:
        Wb, Cb = _map_blocks(W, C, O, scale, B)
        W_sh += prob * Wb
        C_new += prob * Cb
    idx = np.arange(K)
    if shared or len(step.branches) == 1:
        W_new = W_sh
    else:
        W_new, _ = _map_blocks(W, C, O, step.mean_scale, step.mean_B)
        W_new[:, idx, idx] = W_sh[:, idx, idx]
    W_new[:, idx, idx] += step.noise[:, None] * s2
    return _assemble(S, K, W_new, C_new)


def _warm_step(S: np.ndarray, K: int, scale: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Minibatch SGD step ``y <- (1 - alpha lam) y - alpha mean_k xi_k`` on every worker
    (the workers hold the same model; the averaged noise, of variance ``noise`` per
    direction, is common to all of them)."""
    W, C, O = S[:, :K, :K], S[:, :K, K:], S[:, K:, K:]
    W_new, C_new = _map_blocks(W, C, O, scale, np.zeros((S.shape[0], K, 3)))
    return _assemble(S, K, W_new + noise[:, None, None], C_new)


def _apply_linear(J: np.ndarray, S: np.ndarray) -> np.ndarray:
    """``S <- J S J^T`` for a deterministic linear map ``J`` common to all directions."""
    return np.einsum("ij,djk,lk->dil", J, S, J, optimize=True)


def _sync_matrix(K: int, algo: _Algo) -> np.ndarray:
    """Outer step and restart as a linear map on ``(x_1..x_K, z, buf, 1)`` (shifted coords).

    ``Delta = z - xbar``; the rows of ``z'`` and ``buf'`` are
    :func:`theory.algorithm.outer_step` applied to the rows of ``z``, ``buf`` and ``Delta``
    (``outer_steps_per_sync - 1`` further steps on a zero outer gradient included). Then
    ``x_k' = z'``.
    """
    n = K + 3
    iz, ib, i1 = K, K + 1, K + 2
    J = np.eye(n)
    delta_row = np.zeros(n)
    delta_row[:K] = -1.0 / K
    delta_row[iz] = 1.0
    z_row, buf_row = outer_step(
        J[iz].copy(), J[ib].copy(), delta_row, outer=algo.outer, gamma=algo.gamma,
        mu=algo.mu, extra_steps=algo.outer_steps - 1,
    )  # fmt: skip
    J[ib] = buf_row
    J[:K] = z_row
    J[iz] = z_row
    J[i1] = 0.0
    J[i1, i1] = 1.0
    return J


def _start_matrix(K: int) -> np.ndarray:
    """End of warm-up: ``z <- xbar``, ``buf <- 0``, workers unchanged."""
    n = K + 3
    J = np.eye(n)
    J[K] = 0.0
    J[K, :K] = 1.0 / K
    J[K + 1] = 0.0
    return J

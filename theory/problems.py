"""Synthetic distributed problems whose constants are known exactly (or bounded, as stated).

A :class:`Problem` is ``f(x) = (1/K) sum_k f_k(x)`` over ``x in R^d``, one local function
per worker, with a stochastic-gradient oracle and the declared constants of the theory
(see ``theory.assumptions``):

* ``L``: every ``f_k`` is ``L``-smooth (A1),
* ``sigma2``: ``E||g_k(x) - grad f_k(x)||^2 <= sigma2`` per worker and step (A2),
* ``zeta2``: ``sup_x (1/K) sum_k ||grad f_k(x) - grad f(x)||^2 <= zeta2`` (A3),
* ``f_star``: ``inf f >= f_star`` (A4); ``F0 = f(x0) - f_star``.

``problem.exactness`` says for each constant whether it is ``"exact"`` (the supremum /
infimum is attained or approached) or only ``"upper bound"`` / ``"lower bound"``; the
derivation of each value is in the docstring of the problem's factory. Every array is
float64; a batch of worker iterates ``X`` has shape ``(..., K, d)`` (leading dims e.g.
``R`` Monte-Carlo replicas), a batch of points ``x`` has shape ``(..., d)``.

Built-in problems (:data:`PROBLEMS`, :func:`make_problem`):

* ``"quadratic"``: ``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``, all constants exact.
* ``"cosine"``: separable ``sum_i x_i^2/2 + c cos(w x_i)`` plus per-worker linear terms,
  nonconvex when ``c w^2 > 1``, all constants exact (``f_star`` by certified 1-D global
  minimisation).
* ``"robust_regression"``: Geman-McClure or Cauchy loss on a data matrix (nonconvex).
* ``"logistic"``: logistic regression with the nonconvex regulariser
  ``lambda sum_i x_i^2/(1 + x_i^2)``.

Noise models: ``"gaussian"`` (isotropic, per-coordinate variance ``sigma^2/d``),
``"rademacher"`` (coordinates ``+-sigma/sqrt(d)``), ``"finite_sum"`` (true minibatch
sampling, with replacement, from a per-worker finite sum), ``"none"``.

:func:`check_constants` samples a problem and raises :class:`~theory.validation.UserInputError`
when a declared constant is contradicted; use it on any problem you register.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from theory.validation import ParameterError, UserInputError, check_memory, validate

__all__ = [
    "NOISE_MODELS",
    "Problem",
    "QuadraticProblem",
    "CosineProblem",
    "RobustRegressionProblem",
    "LogisticProblem",
    "FunctionProblem",
    "make_quadratic",
    "make_cosine",
    "make_robust_regression",
    "make_logistic",
    "PROBLEMS",
    "register_problem",
    "make_problem",
    "problem_names",
    "ConstantsReport",
    "check_constants",
    "minimize_1d_global",
    "with_declared",
]

NOISE_MODELS = ("gaussian", "rademacher", "finite_sum", "none")

Array = np.ndarray


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        raise UserInputError("pass a numpy Generator or an integer seed (no global random state)")
    return np.random.default_rng(int(rng))


def _check_noise(noise: str) -> str:
    if noise not in NOISE_MODELS:
        raise UserInputError(f"unknown noise model {noise!r}: choose one of {list(NOISE_MODELS)}")
    return noise


def _center_and_scale(u: Array, target_sq: float, what: str) -> Array:
    """Center ``u`` (K, d) across workers and scale it so that mean_k ||u_k||^2 = target_sq."""
    u = u - u.mean(axis=0, keepdims=True)
    cur = float(np.mean(np.sum(u * u, axis=-1)))
    if target_sq == 0.0:
        return np.zeros_like(u)
    if cur == 0.0:
        raise UserInputError(
            f"{what} > 0 needs at least K = 2 workers (with K = 1 there is no heterogeneity)"
        )
    return u * math.sqrt(target_sq / cur)


def _centred_shifts(shifts: Any, K: int, d: int) -> Array:
    """The per-worker linear terms ``s`` (K, d) as an array, checked to have ``mean_k s_k = 0``.

    The problems with linear terms evaluate ``f`` and ``grad f`` (and declare ``f_star``)
    without ``<mean_k s_k, x>``, which is exact only for zero-mean terms.
    """
    s = np.asarray(shifts, dtype=float)
    if s.shape != (K, d):
        raise UserInputError(f"shifts must have shape ({K}, {d}), got {s.shape}")
    scale = max(1.0, float(np.abs(s).max()))
    if float(np.abs(s.mean(axis=0)).max()) > 1e-9 * scale:
        raise UserInputError(
            "shifts (the per-worker linear terms) must have zero mean over the workers"
        )
    return s


# --------------------------------------------------------------------------------------
# base class
# --------------------------------------------------------------------------------------


class Problem(ABC):
    """Abstract distributed problem with declared constants (see the module docstring).

    Subclasses implement :meth:`local_fs` and :meth:`local_grads`; they may override
    :meth:`f`, :meth:`grad` (defaults: means over workers) and the finite-sum hooks.

    Randomness: :meth:`draw_randomness` draws everything random that one oracle call of
    all ``K`` workers needs (additive noise, or minibatch indices) from an explicit
    generator, independently of the query point; :meth:`stochastic_grads_from` turns a
    draw into gradients at ``X``. The simulator draws once per step for every worker, so
    two algorithms run with the same seed see the same noise (common random numbers).
    """

    #: the gradient of coordinate i depends on coordinate i only (enables blocking)
    separable: bool = False

    def __init__(
        self,
        *,
        name: str,
        K: int,
        d: int,
        L: float,
        sigma2: float,
        zeta2: float,
        f_star: float,
        noise: str = "none",
        x0: Array | None = None,
        exactness: dict[str, str] | None = None,
    ) -> None:
        validate(K=K, d=d, L=L)
        for nm, val in (("sigma2", sigma2), ("zeta2", zeta2)):
            if not (math.isfinite(val) and val >= 0):
                raise ParameterError(nm, val, "[0, inf)")
        if not math.isfinite(f_star):
            raise ParameterError("f_star", f_star, "(-inf, inf)", "must be finite")
        self.name = str(name)
        self.K, self.d = int(K), int(d)
        self.L, self.sigma2, self.zeta2 = float(L), float(sigma2), float(zeta2)
        self.f_star = float(f_star)
        self.noise_model = _check_noise(noise)
        # the actual variance of the additive noise, fixed here: changing the declared
        # ``sigma2`` afterwards (e.g. with :func:`with_declared`) does not change the noise
        self._noise_var = self.sigma2
        self._x0 = np.zeros(self.d) if x0 is None else np.asarray(x0, dtype=float).copy()
        if self._x0.shape != (self.d,):
            raise UserInputError(f"x0 must have shape ({self.d},), got {self._x0.shape}")
        self.exactness = {"L": "exact", "sigma2": "exact", "zeta2": "exact", "f_star": "exact"}
        self.exactness.update(exactness or {})
        self.info: dict[str, Any] = {}

    # ---- functions --------------------------------------------------------------------
    @abstractmethod
    def local_fs(self, X: Array) -> Array:
        """``f_k(X[..., k, :])`` for every worker; ``X`` (..., K, d) -> (..., K)."""

    @abstractmethod
    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        """``grad f_k(X[..., k, :])``; ``X`` (..., K, d) -> (..., K, d) (into ``out`` if given)."""

    def _broadcast(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        return np.broadcast_to(x[..., None, :], (*x.shape[:-1], self.K, self.d))

    def f(self, x: Array) -> Array:
        """Global objective ``f(x) = mean_k f_k(x)``; ``x`` (..., d) -> (...)."""
        return self.local_fs(self._broadcast(x)).mean(axis=-1)

    def grad(self, x: Array) -> Array:
        """``grad f(x)``; ``x`` (..., d) -> (..., d)."""
        return self.local_grads(self._broadcast(x)).mean(axis=-2)

    def x0(self) -> Array:
        """Default starting point, shape (d,) (a copy)."""
        return self._x0.copy()

    @property
    def F0(self) -> float:
        """Initial gap ``f(x0) - f_star`` (an upper bound when ``f_star`` is a lower bound)."""
        return float(self.f(self._x0)) - self.f_star

    def declared(self) -> dict[str, float]:
        """The declared constants (``sigma``/``zeta`` are the square roots)."""
        return {
            "L": self.L,
            "sigma2": self.sigma2,
            "zeta2": self.zeta2,
            "f_star": self.f_star,
            "F0": self.F0,
            "sigma": math.sqrt(self.sigma2),
            "zeta": math.sqrt(self.zeta2),
        }

    def describe(self) -> dict[str, Any]:
        """JSON-ready description: name, sizes, noise model, constants and their exactness."""
        return {
            "name": self.name,
            "K": self.K,
            "d": self.d,
            "noise": self.noise_model,
            **self.declared(),
            "exactness": dict(self.exactness),
            "info": {
                k: (v.item() if isinstance(v, np.generic) else v)
                for k, v in self.info.items()
                if not k.startswith("_") and (np.isscalar(v) or isinstance(v, str))
            },
        }

    # ---- randomness ---------------------------------------------------------------------
    def draw_randomness(
        self, rng: np.random.Generator, shape_prefix: Sequence[int] = (), out: Array | None = None
    ) -> Array | None:
        """All randomness of one oracle call of the K workers, independent of the query point.

        Returns ``None`` (no noise), a float array (..., K, d) of additive noise (written
        into ``out`` if given), or, for finite sums whose sampling error depends on ``x``,
        an integer array (..., K, B) of minibatch indices.
        """
        shape = (*tuple(shape_prefix), self.K, self.d)
        if self.noise_model == "none":
            return None
        if self.noise_model == "finite_sum":
            return self._draw_finite_sum(rng, tuple(shape_prefix))
        buf = np.empty(shape) if out is None else out
        scale = math.sqrt(self._additive_variance() / self.d)
        if self.noise_model == "gaussian":
            rng.standard_normal(out=buf)
            buf *= scale
        else:  # rademacher
            signs = rng.integers(0, 2, size=shape, dtype=np.int8)
            np.multiply(signs, 2.0 * scale, out=buf)
            buf -= scale
        return buf

    def _additive_variance(self) -> float:
        """``E||noise_k||^2`` of the additive noise models (``sigma2`` as constructed)."""
        return self._noise_var

    def _draw_finite_sum(self, rng: np.random.Generator, prefix: tuple[int, ...]) -> Array:
        """Finite sums of per-sample gradient offsets (state-independent sampling error)."""
        offsets = self.info.get("_offsets")
        if offsets is None:
            raise NotImplementedError(f"{type(self).__name__} has no finite-sum sampler")
        n, B = offsets.shape[1], int(self.info["batch"])
        idx = rng.integers(0, n, size=(*prefix, self.K, B))
        return offsets[np.arange(self.K)[:, None], idx].mean(axis=-2)

    def stochastic_grads_from(
        self, X: Array, draw: Array | None, out: Array | None = None
    ) -> Array:
        """Stochastic gradients at ``X`` (..., K, d) for a draw of :meth:`draw_randomness`."""
        out = self.local_grads(X, out=out)
        if draw is not None:
            if not np.issubdtype(draw.dtype, np.floating):
                raise TypeError("index draws need a finite-sum problem that overrides this method")
            out += draw
        return out

    def noise(self, rng: np.random.Generator, shape_prefix: Sequence[int] = ()) -> Array:
        """Zero-mean additive noise (..., K, d) with ``E||noise_k||^2 = sigma2`` (or <=, see exactness).

        Not available for finite sums whose sampling error depends on ``x``: use
        :meth:`stochastic_grads` there.
        """
        draw = self.draw_randomness(rng, shape_prefix)
        if draw is None:
            return np.zeros((*tuple(shape_prefix), self.K, self.d))
        if not np.issubdtype(draw.dtype, np.floating):
            raise UserInputError(
                f"the finite-sum noise of {self.name!r} depends on x: use stochastic_grads(X, rng)"
            )
        return draw

    def stochastic_grads(self, X: Array, rng: np.random.Generator) -> Array:
        """``local_grads(X)`` plus one draw of the noise model; ``X`` (..., K, d)."""
        X = np.asarray(X, dtype=float)
        return self.stochastic_grads_from(X, self.draw_randomness(rng, X.shape[:-2]))

    # ---- blocked evaluation (separable problems) -------------------------------------
    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        """Coordinates ``lo:hi`` of the local gradients from ``Xb = X[..., lo:hi]`` (separable only)."""
        raise NotImplementedError(f"{type(self).__name__} is not separable")

    # ---- sampling support for check_constants --------------------------------------------
    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        """Points (n, d) at which :func:`check_constants` probes the constants.

        Default: ``x0`` plus Gaussian perturbations at several scales. Subclasses add the
        points where their constants are attained, which makes the check sharper.
        """
        x0 = self._x0
        base = 1.0 + float(np.linalg.norm(x0)) / math.sqrt(self.d)
        scales = base * np.array([0.03, 0.3, 1.0, 3.0])
        s = scales[np.arange(n) % len(scales)][:, None]
        return x0[None, :] + s * rng.standard_normal((n, self.d))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, K={self.K}, d={self.d}, "
            f"noise={self.noise_model!r}, L={self.L:.6g}, sigma2={self.sigma2:.6g}, "
            f"zeta2={self.zeta2:.6g}, f_star={self.f_star:.6g})"
        )


def _offset_finite_sum(
    raw: Array, sigma2: float, batch: int, to_grad: Callable[[Array], Array] | None = None
) -> Array:
    """Scale centred per-sample offsets (K, n, d) so that a batch mean has E||.||^2 = sigma2.

    With ``B`` indices drawn uniformly with replacement from ``n`` centred offsets ``e_i``,
    ``E||mean_j e_{i_j}||^2 = (1/B) (1/n) sum_i ||e_i||^2``; each worker's offsets are scaled
    to make this exactly ``sigma2``. With ``to_grad`` (a linear map) the gradient errors are
    ``to_grad(e_i)`` and their norms are the ones scaled (the quadratics' sample centres,
    whose gradient error is ``A e_i``).
    """
    raw = raw - raw.mean(axis=1, keepdims=True)
    err = raw if to_grad is None else to_grad(raw)
    per = np.mean(np.sum(err * err, axis=-1), axis=1)  # (K,)
    if sigma2 > 0 and np.any(per == 0):
        raise UserInputError(
            "finite_sum needs nonzero per-sample gradient errors (n_samples >= 2 and, for "
            "quadratics, a nonzero spectrum)"
        )
    scale = np.sqrt(batch * sigma2 / np.where(per > 0, per, 1.0))
    return raw * scale[:, None, None]


def _batch_arg(batch: Any) -> int:
    """The minibatch size ``B`` of a finite sum, an integer ``>= 1``."""
    B = int(batch)
    if B < 1:
        raise ParameterError("batch", B, "integer in [1, inf)")
    return B


def _finite_sum_args(kw: dict[str, Any]) -> tuple[int, int]:
    n = int(kw.pop("n_samples", 32))
    batch = kw.pop("batch", 1)
    if n < 2:
        raise ParameterError("n_samples", n, "integer in [2, inf)")
    return n, _batch_arg(batch)


# --------------------------------------------------------------------------------------
# (a) heterogeneous quadratics
# --------------------------------------------------------------------------------------


class QuadraticProblem(Problem):
    """``f_k(x) = 1/2 (x - b_k)^T A (x - b_k)``, ``A = Q diag(lam) Q^T`` (``Q = I`` unless rotated).

    Exact constants: ``L = max lam``; ``grad f_k - grad f = A (bbar - b_k)`` does not depend
    on ``x``, so ``zeta2 = (1/K) sum_k ||A (b_k - bbar)||^2``; ``f`` is minimised at ``bbar``
    with ``f_star = (1/(2K)) sum_k (b_k - bbar)^T A (b_k - bbar)``. Finite sums use
    per-sample centres ``b_{k,i}`` (mean ``b_k``): a sample's gradient is
    ``A (x - b_{k,i})``, so the sampling error ``A (b_k - b_{k,i})`` is state-independent
    and ``sigma2`` is exact. Additive noise is isotropic, hence the same in every basis.
    """

    def __init__(
        self,
        *,
        K: int,
        d: int,
        eigenvalues: Array,
        b: Array,
        rotation: Array | None = None,
        noise: str = "gaussian",
        sigma2: float = 1.0,
        x0: Array | None = None,
        sample_centres: Array | None = None,
        batch: int = 1,
        name: str = "quadratic",
    ) -> None:
        lam = np.asarray(eigenvalues, dtype=float)
        if lam.shape != (d,) or np.any(lam < 0) or not np.all(np.isfinite(lam)):
            raise UserInputError(f"eigenvalues must be {d} finite nonnegative numbers")
        b = np.asarray(b, dtype=float)
        if b.shape != (K, d):
            raise UserInputError(f"b must have shape ({K}, {d}), got {b.shape}")
        self.eigenvalues, self.b = lam, b
        self.bbar = b.mean(axis=0)
        self.rotation = None if rotation is None else np.asarray(rotation, dtype=float)
        if self.rotation is not None:
            self.A = (self.rotation * lam) @ self.rotation.T
            self.A = 0.5 * (self.A + self.A.T)
        else:
            self.A = None
        dev = self._apply_A(b - self.bbar)
        zeta2 = float(np.mean(np.sum(dev * dev, axis=-1)))
        f_star = 0.5 * float(np.mean(np.sum((b - self.bbar) * dev, axis=-1)))
        self._f_min = f_star
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=float(lam.max()),
            sigma2=0.0 if noise == "none" else sigma2,
            zeta2=zeta2,
            f_star=f_star,
            noise=noise,
            x0=x0,
        )
        self.separable = self.rotation is None
        self.info.update({"lam_min": float(lam.min()), "lam_max": float(lam.max())})
        if noise == "finite_sum":
            if sample_centres is None:
                raise UserInputError("finite_sum quadratics need sample_centres (K, n, d)")
            self.sample_centres = np.asarray(sample_centres, dtype=float)
            self.info["_offsets"] = self._apply_A(self.b[:, None, :] - self.sample_centres)
            self.info["batch"] = int(batch)
            self.info["n_samples"] = int(self.sample_centres.shape[1])

    def _apply_A(self, V: Array) -> Array:
        return V * self.eigenvalues if self.A is None else V @ self.A

    def local_fs(self, X: Array) -> Array:
        D = np.asarray(X, dtype=float) - self.b
        return 0.5 * np.sum(D * self._apply_A(D), axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        if self.A is not None:
            res = (X - self.b) @ self.A
            if out is None:
                return res
            out[...] = res
            return out
        if out is None:
            out = np.empty(np.broadcast_shapes(X.shape, self.b.shape))
        np.subtract(X, self.b, out=out)
        out *= self.eigenvalues
        return out

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.subtract(Xb, self.b[:, lo:hi], out=out)
        out *= self.eigenvalues[lo:hi]
        return out

    def f(self, x: Array) -> Array:
        D = np.asarray(x, dtype=float) - self.bbar
        return 0.5 * np.sum(D * self._apply_A(D), axis=-1) + self._f_min

    def grad(self, x: Array) -> Array:
        return self._apply_A(np.asarray(x, dtype=float) - self.bbar)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        pts[0] = self.bbar
        return pts


def make_quadratic(
    *,
    K: int,
    d: int = 10,
    noise: str = "gaussian",
    sigma: float | None = None,
    zeta: float = 0.0,
    seed: int = 0,
    L: float = 1.0,
    lam_min: float = 0.01,
    spectrum: str | Sequence[float] = "linear",
    rotate: bool = False,
    center_scale: float = 1.0,
    x0: Array | None = None,
    **kw: Any,
) -> QuadraticProblem:
    """Heterogeneous quadratic (see :class:`QuadraticProblem`); every constant is exact.

    ``spectrum``: ``"linear"`` (``lam`` evenly spaced in ``[lam_min, L]``), ``"geometric"``,
    or explicit eigenvalues (then ``L`` is their maximum). ``rotate=True`` uses a random
    orthogonal eigenbasis (dense ``A``). ``bbar ~ N(0, center_scale^2 I)``, ``x0 = 0``;
    ``b_k = bbar + u_k`` with ``u_k`` scaled so that ``zeta2 = zeta^2`` exactly. Finite sums
    (``n_samples``, ``batch``) are scaled so that ``sigma2 = sigma^2`` exactly.
    """
    rng = np.random.default_rng(seed)
    sigma2 = _sigma2_arg(noise, sigma)
    n_s, batch = _finite_sum_args(kw) if noise == "finite_sum" else (0, 1)
    _no_extra(kw, "quadratic")
    validate(L=L)
    if isinstance(spectrum, str):
        if spectrum == "linear":
            lam = np.linspace(lam_min, L, d) if d > 1 else np.array([L])
        elif spectrum == "geometric":
            if lam_min <= 0:
                raise ParameterError("lam_min", lam_min, "(0, L]", "geometric spectrum")
            lam = np.geomspace(lam_min, L, d) if d > 1 else np.array([L])
        else:
            raise UserInputError(
                f"unknown spectrum {spectrum!r}: 'linear', 'geometric' or a list of eigenvalues"
            )
        if not 0 <= lam_min <= L:
            raise ParameterError("lam_min", lam_min, f"[0, L] = [0, {L}]")
    else:
        lam = np.asarray(spectrum, dtype=float)
        if lam.shape != (d,):
            raise UserInputError(f"spectrum must list d = {d} eigenvalues, got shape {lam.shape}")
    Q = None
    if rotate:
        if d > 4000:
            raise UserInputError("rotate=True builds a dense d x d matrix: use d <= 4000")
        Q, r = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.sign(np.diag(r))
    A = None if Q is None else (Q * lam) @ Q.T

    def apply_A(V: Array) -> Array:
        return V * lam if A is None else V @ A

    bbar = center_scale * rng.standard_normal(d)
    u = rng.standard_normal((K, d))
    u = u - u.mean(axis=0)
    Au = apply_A(u)
    cur = float(np.mean(np.sum(Au * Au, axis=-1)))
    if zeta > 0 and cur == 0:
        raise UserInputError("zeta > 0 needs at least K = 2 workers (K = 1 has no heterogeneity)")
    b = bbar + (u * (zeta / math.sqrt(cur)) if zeta > 0 else 0.0 * u)
    centres = None
    if noise == "finite_sum":
        raw = rng.standard_normal((K, n_s, d))
        centres = b[:, None, :] + _offset_finite_sum(raw, sigma2, batch, apply_A)
    return QuadraticProblem(
        K=K,
        d=d,
        eigenvalues=lam,
        b=b,
        rotation=Q,
        noise=noise,
        sigma2=sigma2,
        x0=x0,
        sample_centres=centres,
        batch=batch,
    )


# --------------------------------------------------------------------------------------
# (b1) separable cosine
# --------------------------------------------------------------------------------------


def minimize_1d_global(
    phi: Callable[[Array], Array], lo: float, hi: float, L: float, h: float | None = None
) -> tuple[float, float]:
    """Global minimum of an ``L``-smooth function on ``[lo, hi]``: ``(t_min, phi_min)``.

    A grid of spacing ``h`` is within ``L h^2 / 8`` of the minimum (at an interior
    minimiser the gradient vanishes, so ``phi(t* + s) <= phi(t*) + L s^2 / 2`` for
    ``|s| <= h/2``); every grid local minimum is then refined with bounded Brent. The
    result is within ``L h^2 / 8`` of the true minimum before refinement and, in practice,
    at machine precision after it.
    """
    if h is None:
        h = min((hi - lo) / 1000.0, 1e-3 / math.sqrt(L)) if hi > lo else 1.0
    n = max(3, int(math.ceil((hi - lo) / h)) + 1)
    t = np.linspace(lo, hi, n)
    v = phi(t)
    best_t, best_v = float(t[np.argmin(v)]), float(v.min())
    loc = np.flatnonzero((v[1:-1] <= v[:-2]) & (v[1:-1] <= v[2:])) + 1
    step = t[1] - t[0]
    for i in loc:
        a, b = max(lo, t[i] - step), min(hi, t[i] + step)
        res = optimize.minimize_scalar(
            lambda s: float(phi(np.array([s]))[0]),
            bounds=(a, b),
            method="bounded",
            options={"xatol": 1e-13},
        )
        if res.fun < best_v:
            best_t, best_v = float(res.x), float(res.fun)
    return best_t, best_v


class CosineProblem(Problem):
    """``f_k(x) = sum_i [x_i^2/2 + c cos(w x_i)] + <s_k, x>``, ``mean_k s_k = 0``.

    Exact constants: the Hessian is ``diag(1 - c w^2 cos(w x_i))`` for every ``k``, so
    ``L = 1 + |c| w^2`` (attained where ``cos(w x_i) = -sign(c)``); nonconvex iff
    ``|c| w^2 > 1``. ``grad f_k - grad f = s_k`` gives ``zeta2 = mean_k ||s_k||^2``;
    ``f_star = d min_t phi(t)`` with ``phi(t) = t^2/2 + c cos(w t)``, computed by
    :func:`minimize_1d_global` on ``[0, 2 sqrt(max(c, 0))]`` (``phi`` is even and
    ``phi(t) >= t^2/2 - |c| > phi(0)`` beyond that interval). Finite sums use per-sample
    linear terms ``f_{k,i} = f_k + <e_{k,i}, x>`` (state-independent error, exact sigma2).
    """

    separable = True

    def __init__(
        self,
        *,
        K: int,
        d: int,
        c: float,
        w: float,
        shifts: Array,
        noise: str = "gaussian",
        sigma2: float = 1.0,
        x0: Array | None = None,
        offsets: Array | None = None,
        batch: int = 1,
        name: str = "cosine",
    ) -> None:
        if not (math.isfinite(c) and math.isfinite(w) and w > 0):
            raise UserInputError(f"cosine needs finite c and w > 0, got c={c}, w={w}")
        self.c, self.w = float(c), float(w)
        self.shifts = _centred_shifts(shifts, K, d)
        L = 1.0 + abs(self.c) * self.w**2
        hi = 2.0 * math.sqrt(max(self.c, 0.0))
        t_min, phi_min = minimize_1d_global(self.phi, 0.0, hi, L) if hi > 0 else (0.0, self.c)
        self.t_min, self.phi_min = t_min, phi_min
        zeta2 = float(np.mean(np.sum(self.shifts**2, axis=-1)))
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=L,
            sigma2=0.0 if noise == "none" else sigma2,
            zeta2=zeta2,
            f_star=d * phi_min,
            noise=noise,
            x0=x0,
        )
        self.info.update({"c": self.c, "w": self.w, "t_min": t_min, "nonconvex": c * w * w > 1})
        if noise == "finite_sum":
            self.info["_offsets"] = np.asarray(offsets, dtype=float)
            self.info["batch"] = int(batch)
            self.info["n_samples"] = int(self.info["_offsets"].shape[1])

    def phi(self, t: Array) -> Array:
        """The 1-D summand ``t^2/2 + c cos(w t)``."""
        return 0.5 * t * t + self.c * np.cos(self.w * t)

    def local_fs(self, X: Array) -> Array:
        X = np.asarray(X, dtype=float)
        return np.sum(self.phi(X), axis=-1) + np.sum(X * self.shifts, axis=-1)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        if out is None:
            out = np.empty(np.broadcast_shapes(X.shape, self.shifts.shape))
        np.multiply(X, self.w, out=out)
        np.sin(out, out=out)
        out *= -self.c * self.w
        out += X
        out += self.shifts
        return out

    def local_grads_block(self, Xb: Array, lo: int, hi: int, out: Array) -> Array:
        np.multiply(Xb, self.w, out=out)
        np.sin(out, out=out)
        out *= -self.c * self.w
        out += Xb
        out += self.shifts[:, lo:hi]
        return out

    def f(self, x: Array) -> Array:
        return np.sum(self.phi(np.asarray(x, dtype=float)), axis=-1)

    def grad(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        return x - self.c * self.w * np.sin(self.w * x)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        # half-way points of the curvature extremes: cos(w x) = -sign(c) attains L
        pts[0] = (math.pi if self.c >= 0 else 0.0) / self.w
        pts[1] = self.t_min
        return pts


def make_cosine(
    *,
    K: int,
    d: int = 10,
    noise: str = "gaussian",
    sigma: float | None = None,
    zeta: float = 0.0,
    seed: int = 0,
    c: float = 0.5,
    w: float = 2.0,
    x0_value: float = 3.0,
    **kw: Any,
) -> CosineProblem:
    """Separable nonconvex ``sum_i x_i^2/2 + c cos(w x_i)`` + per-worker linear terms (all exact).

    Defaults ``c = 0.5, w = 2``: ``L = 3``, curvature in ``[-1, 3]``. ``x0 = x0_value * 1``.
    ``zeta2 = zeta^2`` and ``sigma2 = sigma^2`` exactly (see :class:`CosineProblem`).
    """
    rng = np.random.default_rng(seed)
    sigma2 = _sigma2_arg(noise, sigma)
    n_s, batch = _finite_sum_args(kw) if noise == "finite_sum" else (0, 1)
    _no_extra(kw, "cosine")
    shifts = _center_and_scale(rng.standard_normal((K, d)), zeta * zeta, "zeta")
    offsets = None
    if noise == "finite_sum":
        offsets = _offset_finite_sum(rng.standard_normal((K, n_s, d)), sigma2, batch)
    return CosineProblem(
        K=K,
        d=d,
        c=c,
        w=w,
        shifts=shifts,
        noise=noise,
        sigma2=sigma2,
        x0=np.full(d, float(x0_value)),
        offsets=offsets,
        batch=batch,
    )


# --------------------------------------------------------------------------------------
# (b2, b3) data problems: robust regression, nonconvex-regularised logistic regression
# --------------------------------------------------------------------------------------


class _DataProblem(Problem):
    """``f_k(x) = (1/n) sum_i ell(a_{k,i}^T x; y_{k,i}) + r(x) + <s_k, x>``.

    Data ``A`` (K, n, d) (a broadcast view when the workers share one data set), labels
    ``y`` (K, n), linear terms ``s`` (K, d) with zero mean. Subclasses give ``ell``, its
    derivative ``dell`` in the first argument, and the separable regulariser ``r``.
    Finite sums sample ``batch`` rows of the worker's own data uniformly with replacement.
    """

    #: sup_z |dell(z; y)| and sup_z |d2ell(z; y)|, set by subclasses
    G: float = 1.0
    G2: float = 1.0

    def __init__(
        self,
        *,
        name: str,
        K: int,
        data: Array,
        labels: Array,
        shifts: Array,
        noise: str,
        sigma2: float | None,
        batch: int,
        reg_curv: float,
        f_star: float,
        exactness: dict[str, str],
        x0: Array | None = None,
    ) -> None:
        data = np.asarray(data, dtype=float)
        if data.ndim == 2:
            data = np.broadcast_to(data, (K, *data.shape))
        labels = np.asarray(labels, dtype=float)
        if labels.ndim == 1:
            labels = np.broadcast_to(labels, (K, labels.shape[0]))
        self.data, self.labels = data, labels
        self.shared_data = bool(data.strides[0] == 0)
        Kd, n, d = data.shape
        self.shifts = _centred_shifts(shifts, K, d)
        self.n = n
        # spectral norms ||A_k||_2 (one for shared data); per-worker smoothness:
        # G2 ||A_k||_2^2 / n + sup |r''|
        norms = np.array([np.linalg.norm(data[k], 2) for k in range(1 if self.shared_data else K)])
        L = float(self.G2 * np.max(norms) ** 2 / n + reg_curv)
        row_sq = np.sum(data * data, axis=-1)  # (K, n)
        if noise == "finite_sum":
            if sigma2 is not None:
                raise UserInputError(
                    f"for {name} with noise='finite_sum', sigma^2 is set by the data and "
                    "'batch'; do not pass sigma"
                )
            # Var of a batch mean <= (1/B) (1/n) sum_i ||dell_i a_i||^2 <= G^2 mean ||a_i||^2 / B
            sigma2 = float(self.G**2 * np.max(np.mean(row_sq, axis=1)) / _batch_arg(batch))
            exactness = {**exactness, "sigma2": "upper bound"}
        if self.shared_data or K == 1:
            zeta2 = float(np.mean(np.sum(self.shifts**2, axis=-1)))
        else:
            # (1/K) sum_k ||v_k - vbar||^2 <= (1/K) sum_k ||v_k||^2 (plus the linear terms,
            # which are zero for shards), ||grad of data part_k|| <= G min(mean_i ||a_i||,
            # ||A_k||_2 / sqrt(n))
            mean_norm = np.mean(np.sqrt(row_sq), axis=1)
            spec = norms / math.sqrt(n)
            zeta2 = float(np.mean((self.G * np.minimum(mean_norm, spec)) ** 2))
            exactness = {**exactness, "zeta2": "upper bound"}
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=L,
            sigma2=0.0 if noise == "none" else float(sigma2),
            zeta2=zeta2,
            f_star=f_star,
            noise=noise,
            x0=x0,
            exactness=exactness,
        )
        self.info.update({"n_samples": n, "batch": int(batch), "shards": not self.shared_data})

    # loss pieces
    @abstractmethod
    def ell(self, z: Array, y: Array) -> Array: ...

    @abstractmethod
    def dell(self, z: Array, y: Array) -> Array: ...

    def reg(self, x: Array) -> Array:
        return np.zeros(np.shape(x)[:-1])

    def dreg(self, x: Array) -> Array:
        return np.zeros_like(x)

    def _margins(self, X: Array) -> Array:
        # (..., K, d) x (K, n, d) -> (..., K, n)
        return np.matmul(self.data, X[..., :, :, None])[..., 0]

    def local_fs(self, X: Array) -> Array:
        X = np.asarray(X, dtype=float)
        Z = self._margins(X)
        return (
            self.ell(Z, self.labels).mean(axis=-1) + self.reg(X) + np.sum(X * self.shifts, axis=-1)
        )

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        X = np.asarray(X, dtype=float)
        D = self.dell(self._margins(X), self.labels) / self.n  # (..., K, n)
        res = np.matmul(D[..., :, None, :], self.data)[..., 0, :]
        res += self.dreg(X)
        res += self.shifts
        if out is None:
            return res
        out[...] = res
        return out

    def f(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        if self.shared_data:
            z = x @ self.data[0].T
            return self.ell(z, self.labels[0]).mean(axis=-1) + self.reg(x)
        return super().f(x)

    def grad(self, x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        if self.shared_data:
            D = self.dell(x @ self.data[0].T, self.labels[0]) / self.n
            return D @ self.data[0] + self.dreg(x)
        return super().grad(x)

    def _draw_finite_sum(self, rng: np.random.Generator, prefix: tuple[int, ...]) -> Array:
        B = int(self.info["batch"])
        return rng.integers(0, self.n, size=(*prefix, self.K, B))

    def stochastic_grads_from(
        self, X: Array, draw: Array | None, out: Array | None = None
    ) -> Array:
        if draw is None or np.issubdtype(draw.dtype, np.floating):
            return super().stochastic_grads_from(X, draw, out)
        X = np.asarray(X, dtype=float)
        k = np.arange(self.K)[:, None]
        rows = self.data[k, draw]  # (..., K, B, d)
        y = self.labels[k, draw]  # (..., K, B)
        z = np.matmul(rows, X[..., :, :, None])[..., 0]
        D = self.dell(z, y) / draw.shape[-1]
        res = np.matmul(D[..., :, None, :], rows)[..., 0, :]
        res += self.dreg(X)
        res += self.shifts
        if out is None:
            return res
        out[...] = res
        return out


class RobustRegressionProblem(_DataProblem):
    """Robust regression ``ell(z; y) = rho(z - y)`` with a bounded, nonconvex ``rho``.

    ``rho`` (``scale`` = ``c``):

    * Geman-McClure ``rho(r) = (c^2/2) r^2/(c^2 + r^2)``: ``rho'' = c^4 (c^2 - 3 r^2)/(c^2 + r^2)^3``
      in ``[-1/4, 1]``, ``|rho'| <= (3 sqrt(3)/16) c``.
    * Cauchy ``rho(r) = (c^2/2) log(1 + r^2/c^2)``: ``rho'' = c^2 (c^2 - r^2)/(c^2 + r^2)^2``
      in ``[-1/8, 1]``, ``|rho'| <= c/2``.

    Hence the Hessian ``(1/n) A_k^T diag(rho''(r)) A_k + 0`` has norm at most
    ``L = max_k ||A_k||_2^2 / n``, attained at zero residuals (exact when the data are
    realisable, i.e. no outliers, else an upper bound). ``rho >= 0`` gives
    ``f_star = 0`` as a valid lower bound (exact for realisable shared data).
    """

    def __init__(self, *, loss: str = "geman_mcclure", scale: float = 1.0, **kw: Any) -> None:
        if loss not in ("geman_mcclure", "cauchy"):
            raise UserInputError(f"unknown robust loss {loss!r}: 'geman_mcclure' or 'cauchy'")
        if not (math.isfinite(scale) and scale > 0):
            raise ParameterError("scale", scale, "(0, inf)")
        self.loss, self.scale = loss, float(scale)
        self.G = (3 * math.sqrt(3) / 16 if loss == "geman_mcclure" else 0.5) * self.scale
        self.G2 = 1.0
        super().__init__(reg_curv=0.0, **kw)
        self.info.update({"loss": loss, "scale": self.scale})

    def ell(self, z: Array, y: Array) -> Array:
        r, c2 = z - y, self.scale**2
        if self.loss == "geman_mcclure":
            return 0.5 * c2 * r * r / (c2 + r * r)
        return 0.5 * c2 * np.log1p(r * r / c2)

    def dell(self, z: Array, y: Array) -> Array:
        r, c2 = z - y, self.scale**2
        if self.loss == "geman_mcclure":
            return c2 * c2 * r / (c2 + r * r) ** 2
        return c2 * r / (c2 + r * r)

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        xt = self.info.get("_x_true")
        if xt is not None:
            pts[0] = xt
        return pts


class LogisticProblem(_DataProblem):
    """Logistic regression with the nonconvex regulariser ``lambda sum_i x_i^2/(1 + x_i^2)``.

    ``ell(z; y) = log(1 + exp(-y z))``, ``y in {-1, +1}``: ``|ell'| <= 1``,
    ``0 < ell'' <= 1/4`` with equality at ``z = 0``. The regulariser's second derivative
    ``(2 - 6 t^2)/(1 + t^2)^3`` lies in ``[-1/2, 2]`` with 2 at ``t = 0``. So
    ``L = max_k ||A_k||_2^2/(4n) + 2 lambda``, exact (attained at ``x = 0``);
    ``f_star = 0`` is a valid lower bound (both parts are nonnegative).
    """

    def __init__(self, *, lam: float = 0.1, **kw: Any) -> None:
        if not (math.isfinite(lam) and lam >= 0):
            raise ParameterError("lam", lam, "[0, inf)")
        self.lam = float(lam)
        self.G, self.G2 = 1.0, 0.25
        super().__init__(reg_curv=2.0 * self.lam, **kw)
        self.info["lam"] = self.lam

    def ell(self, z: Array, y: Array) -> Array:
        return np.logaddexp(0.0, -y * z)

    def dell(self, z: Array, y: Array) -> Array:
        return -y * special.expit(-y * z)

    def reg(self, x: Array) -> Array:
        x2 = x * x
        return self.lam * np.sum(x2 / (1.0 + x2), axis=-1)

    def dreg(self, x: Array) -> Array:
        return self.lam * 2.0 * x / (1.0 + x * x) ** 2

    def probe_points(self, rng: np.random.Generator, n: int) -> Array:
        pts = super().probe_points(rng, n)
        pts[0] = 0.0
        return pts


def _data_matrix(
    rng: np.random.Generator, K: int, n: int, d: int, shards: bool, spread: float
) -> tuple[Array, Array]:
    """Gaussian design; with shards each worker's rows get their own mean (covariate shift)."""
    if shards:
        means = spread * rng.standard_normal((K, 1, d)) / math.sqrt(d)
        A = rng.standard_normal((K, n, d)) + means
        return A, means
    return rng.standard_normal((n, d)), np.zeros((1, 1, d))


def make_robust_regression(
    *,
    K: int,
    d: int = 10,
    noise: str = "gaussian",
    sigma: float | None = None,
    zeta: float = 0.0,
    seed: int = 0,
    loss: str = "geman_mcclure",
    scale: float = 1.0,
    n_samples: int = 256,
    outliers: float = 0.1,
    outlier_scale: float = 10.0,
    shards: bool = False,
    shard_spread: float = 1.0,
    batch: int = 1,
    **kw: Any,
) -> RobustRegressionProblem:
    """Robust regression (see :class:`RobustRegressionProblem`).

    Rows ``a_i ~ N(0, I_d)``, ``y_i = a_i^T x_true`` plus, on a fraction ``outliers`` of the
    rows, ``outlier_scale * scale * N(0, 1)``. Heterogeneity: linear terms with
    ``zeta2 = zeta^2`` exactly (``shards=False``, shared data), or per-worker data shards
    with their own ``x_true_k`` and covariate shift (``shards=True``; ``zeta2`` is then the
    upper bound ``G^2 mean_k min(mean_i ||a_{k,i}||, ||A_k||_2/sqrt(n))^2`` and ``zeta``
    must be 0). ``x0 = 0``.
    """
    _no_extra(kw, "robust_regression")
    rng = np.random.default_rng(seed)
    sigma2 = _data_sigma2_arg(noise, sigma)
    if not 0 <= outliers <= 1:
        raise ParameterError("outliers", outliers, "[0, 1]")
    if n_samples < 1:
        raise ParameterError("n_samples", n_samples, "integer in [1, inf)")
    A, _ = _data_matrix(rng, K, n_samples, d, shards, shard_spread)
    x_true = rng.standard_normal(d) / math.sqrt(d) * 2.0
    if shards:
        xt = x_true + shard_spread * rng.standard_normal((K, d)) / math.sqrt(d)
        y = np.einsum("knd,kd->kn", A, xt)
    else:
        y = A @ x_true
    mask = rng.random(y.shape) < outliers
    y = y + mask * outlier_scale * scale * rng.standard_normal(y.shape)
    realisable = not mask.any()
    shifts = _shifts(rng, K, d, zeta, shards)
    exact = {
        "L": "exact" if realisable else "upper bound",
        "f_star": "exact" if realisable and not shards else "lower bound",
    }
    prob = RobustRegressionProblem(
        name="robust_regression",
        K=K,
        data=A,
        labels=y,
        shifts=shifts,
        noise=noise,
        sigma2=sigma2,
        batch=batch,
        f_star=0.0,
        exactness=exact,
        loss=loss,
        scale=scale,
    )
    if not shards:
        prob.info["_x_true"] = x_true
    prob.info.update({"outliers": float(outliers), "realisable": realisable})
    return prob


def make_logistic(
    *,
    K: int,
    d: int = 10,
    noise: str = "gaussian",
    sigma: float | None = None,
    zeta: float = 0.0,
    seed: int = 0,
    lam: float = 0.1,
    n_samples: int = 256,
    label_noise: float = 0.1,
    shards: bool = False,
    shard_spread: float = 1.0,
    batch: int = 1,
    **kw: Any,
) -> LogisticProblem:
    """Logistic regression with nonconvex regulariser (see :class:`LogisticProblem`).

    Rows ``a_i ~ N(0, I_d)`` (plus a per-worker mean with ``shards``), labels
    ``sign(a_i^T x_true)`` flipped with probability ``label_noise``. Heterogeneity as in
    :func:`make_robust_regression`. ``x0 = 0``.
    """
    _no_extra(kw, "logistic")
    rng = np.random.default_rng(seed)
    sigma2 = _data_sigma2_arg(noise, sigma)
    if not 0 <= label_noise <= 1:
        raise ParameterError("label_noise", label_noise, "[0, 1]")
    if n_samples < 1:
        raise ParameterError("n_samples", n_samples, "integer in [1, inf)")
    A, _ = _data_matrix(rng, K, n_samples, d, shards, shard_spread)
    x_true = 2.0 * rng.standard_normal(d) / math.sqrt(d)
    if shards:
        xt = x_true + shard_spread * rng.standard_normal((K, d)) / math.sqrt(d)
        m = np.einsum("knd,kd->kn", A, xt)
    else:
        m = A @ x_true
    y = np.where(m >= 0, 1.0, -1.0)
    y = np.where(rng.random(y.shape) < label_noise, -y, y)
    shifts = _shifts(rng, K, d, zeta, shards)
    return LogisticProblem(
        name="logistic",
        K=K,
        data=A,
        labels=y,
        shifts=shifts,
        noise=noise,
        sigma2=sigma2,
        batch=batch,
        f_star=0.0,
        exactness={"f_star": "lower bound"},
        lam=lam,
    )


def _shifts(rng: np.random.Generator, K: int, d: int, zeta: float, shards: bool) -> Array:
    if shards:
        if zeta != 0:
            raise UserInputError(
                "with shards=True the heterogeneity comes from the data (zeta2 is computed); "
                "leave zeta = 0"
            )
        return np.zeros((K, d))
    return _center_and_scale(rng.standard_normal((K, d)), zeta * zeta, "zeta")


def _sigma2_arg(noise: str, sigma: float | None) -> float:
    _check_noise(noise)
    if noise == "none":
        if sigma not in (None, 0, 0.0):
            raise UserInputError(f"noise='none' has sigma = 0; got sigma = {sigma}")
        return 0.0
    s = 1.0 if sigma is None else sigma
    validate(sigma=s)
    return float(s) ** 2


def _data_sigma2_arg(noise: str, sigma: float | None) -> float | None:
    if noise == "finite_sum":
        return sigma  # checked (must be None) by _DataProblem
    return _sigma2_arg(noise, sigma)


def _no_extra(kw: dict[str, Any], name: str) -> None:
    if kw:
        raise UserInputError(f"unknown option(s) {sorted(kw)} for problem {name!r}")


# --------------------------------------------------------------------------------------
# user-defined problems
# --------------------------------------------------------------------------------------


class FunctionProblem(Problem):
    """A problem from vectorised callables with user-declared constants.

    ``local_f(X) -> (..., K)`` and ``local_grad(X) -> (..., K, d)`` for ``X`` (..., K, d).
    Noise is ``"gaussian"``, ``"rademacher"`` or ``"none"`` with actual variance
    ``noise_sigma2`` (default: the declared ``sigma2``), or a callable
    ``noise(rng, shape) -> array`` of that shape. Run :func:`check_constants` on it.
    """

    def __init__(
        self,
        name: str,
        *,
        K: int,
        d: int,
        local_f: Callable[[Array], Array],
        local_grad: Callable[[Array], Array],
        L: float,
        sigma2: float,
        zeta2: float,
        f_star: float,
        noise: str | Callable[[np.random.Generator, tuple[int, ...]], Array] = "gaussian",
        noise_sigma2: float | None = None,
        x0: Array | None = None,
        exactness: dict[str, str] | None = None,
    ) -> None:
        self._noise_fn = noise if callable(noise) else None
        super().__init__(
            name=name,
            K=K,
            d=d,
            L=L,
            sigma2=sigma2,
            zeta2=zeta2,
            f_star=f_star,
            noise="gaussian" if callable(noise) else noise,
            x0=x0,
            exactness=exactness,
        )
        if self.noise_model == "finite_sum":
            raise UserInputError("FunctionProblem supports 'gaussian', 'rademacher', 'none'")
        self._local_f, self._local_grad = local_f, local_grad
        if noise_sigma2 is not None:
            self._noise_var = float(noise_sigma2)

    def local_fs(self, X: Array) -> Array:
        return np.asarray(self._local_f(np.asarray(X, dtype=float)), dtype=float)

    def local_grads(self, X: Array, out: Array | None = None) -> Array:
        res = np.asarray(self._local_grad(np.asarray(X, dtype=float)), dtype=float)
        if out is None:
            return res
        out[...] = res
        return out

    def draw_randomness(
        self, rng: np.random.Generator, shape_prefix: Sequence[int] = (), out: Array | None = None
    ) -> Array | None:
        shape = (*tuple(shape_prefix), self.K, self.d)
        if self._noise_fn is not None:
            res = np.asarray(self._noise_fn(rng, shape), dtype=float)
            if res.shape != shape:
                raise UserInputError(f"noise callable returned shape {res.shape}, expected {shape}")
            return res
        return super().draw_randomness(rng, shape_prefix, out)


# --------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------

ProblemFactory = Callable[..., Problem]

PROBLEMS: dict[str, ProblemFactory] = {
    "quadratic": make_quadratic,
    "cosine": make_cosine,
    "robust_regression": make_robust_regression,
    "logistic": make_logistic,
}


def register_problem(name: str, factory: ProblemFactory, *, replace: bool = False) -> None:
    """Register ``factory(K=..., d=..., noise=..., sigma=..., zeta=..., seed=..., **kw)``."""
    if not callable(factory):
        raise TypeError("factory must be callable")
    if name in PROBLEMS and not replace and PROBLEMS[name] is not factory:
        raise UserInputError(f"a problem named {name!r} is already registered (pass replace=True)")
    PROBLEMS[name] = factory


def problem_names() -> list[str]:
    """Registered problem names."""
    return sorted(PROBLEMS)


def _problem_bytes(factory: Any, K: float, d: float, noise: str, kw: dict[str, Any]) -> float:
    """An estimate of the bytes a problem's arrays take: a K x d array of shifts, the
    K x n x d samples of a finite sum or of a data problem (``n_samples``, the factory's
    default when not given), a d x d rotation."""
    import inspect

    try:
        default = inspect.signature(factory).parameters.get("n_samples")
    except (TypeError, ValueError):
        default = None
    n = kw.get("n_samples", None if default is None else default.default)
    if n is None or n is inspect.Parameter.empty:
        n = 32 if noise == "finite_sum" else 0
    try:
        n = float(n)
    except (TypeError, ValueError):
        n = 0.0
    return 8.0 * (2.0 * K * d + K * n * d + (d * d if kw.get("rotate") else 0.0))


def make_problem(
    name: str,
    *,
    K: int,
    d: int = 10,
    noise: str = "gaussian",
    sigma: float | None = None,
    zeta: float = 0.0,
    seed: int = 0,
    **kw: Any,
) -> Problem:
    """Build a registered problem.

    ``sigma`` defaults to 1 for additive noise and finite sums of offsets; for the data
    problems with ``noise='finite_sum'`` it is set by the data and ``batch`` (leave it
    ``None``). ``zeta`` is the requested heterogeneity (``zeta2 = zeta^2`` where exact).
    ``seed`` seeds the problem's data only (not the simulation).
    """
    if name not in PROBLEMS:
        raise UserInputError(f"unknown problem {name!r}: registered problems are {problem_names()}")
    validate(K=K, d=d, zeta=zeta)
    _check_noise(noise)
    check_memory(
        _problem_bytes(PROBLEMS[name], float(K), float(d), noise, kw),
        f"make_problem({name!r}): K = {K} workers x d = {d} coordinates",
    )
    if int(seed) < 0:
        raise ParameterError("seed", seed, "integer in [0, inf)")
    prob = PROBLEMS[name](
        K=int(K), d=int(d), noise=noise, sigma=sigma, zeta=zeta, seed=int(seed), **kw
    )
    if not isinstance(prob, Problem):
        raise TypeError(f"factory of {name!r} returned {type(prob).__name__}, not a Problem")
    return prob


# --------------------------------------------------------------------------------------
# checking declared constants by sampling
# --------------------------------------------------------------------------------------


@dataclass
class ConstantsReport:
    """What :func:`check_constants` measured.

    ``L_measured`` and ``zeta2_measured`` never exceed the suprema they estimate (up to
    finite-difference error) and ``f_min_found`` is never below the infimum, so a value past
    the declared one contradicts the declaration. ``sigma2_measured`` is the largest sample
    mean of ``||g_k - grad f_k||^2`` over points and workers (biased upwards by the
    maximum), ``sigma2_pooled`` their average, ``sigma2_lower_conf`` the largest
    Bonferroni lower confidence bound (the quantity tested). ``noise_mean_max_z`` is nan
    when the zero-mean test does not apply (finite-sum index draws).
    """

    problem: str
    n_points: int
    L_declared: float
    L_measured: float
    sigma2_declared: float
    sigma2_measured: float
    sigma2_pooled: float
    sigma2_lower_conf: float
    zeta2_declared: float
    zeta2_measured: float
    f_star_declared: float
    f_min_found: float
    grad_rel_error: float
    local_mean_rel_error: float
    noise_mean_max_z: float
    exactness: dict[str, str] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def ratios(self) -> dict[str, float]:
        """measured / declared for L, sigma2, zeta2 (nan when the declared value is 0)."""

        def r(a: float, b: float) -> float:
            return a / b if b > 0 else (math.nan if a == 0 else math.inf)

        return {
            "L": r(self.L_measured, self.L_declared),
            "sigma2": r(self.sigma2_measured, self.sigma2_declared),
            "zeta2": r(self.zeta2_measured, self.zeta2_declared),
        }

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratios"] = self.ratios()
        out["ok"] = self.ok
        return out


def check_constants(
    problem: Problem,
    n: int = 24,
    rng: np.random.Generator | int = 0,
    *,
    n_noise: int = 400,
    power_iters: int = 40,
    gd_steps: int = 300,
    tol: float = 1e-4,
    z_crit: float | None = None,
    raise_on_violation: bool = True,
) -> ConstantsReport:
    """Sample ``problem`` and test every declared constant; raise when one is false.

    * ``L``: at ``n`` probe points, for every worker, power iteration on the
      central-difference Hessian (``||H v||`` for unit ``v`` never exceeds ``||H||_2``) and
      secant ratios ``||grad f_k(x) - grad f_k(y)|| / ||x - y||``; violation if the largest
      exceeds ``L (1 + tol)``.
    * ``sigma2``: ``n_noise`` oracle calls at a few points; violation if a one-sided lower
      confidence bound (Bonferroni over points and workers) of ``E||g_k - grad f_k||^2``
      exceeds ``sigma2 (1 + tol)``. The noise mean is tested with per-coordinate z-scores.
    * ``zeta2``: exact at each point; violation if it exceeds ``zeta2 (1 + tol)``.
    * ``f_star``: minimum of ``f`` over the points and over gradient-descent runs (step
      ``1/L``) from them; violation if below ``f_star - tol (1 + |f_star|)``.
    * consistency: ``grad`` against central differences of ``f``, and ``f``/``grad``
      against the means of ``local_fs``/``local_grads``.
    """
    rng = _rng(rng)
    if n < 4:
        raise ParameterError("n", n, "integer in [4, inf)")
    K, d = problem.K, problem.d
    P = np.asarray(problem.probe_points(rng, n), dtype=float)
    viol: list[str] = []
    scale_x = 1.0 + np.linalg.norm(P, axis=-1, keepdims=True) / math.sqrt(d)

    # ---- L: power iteration on finite-difference Hessians of every f_k -----------------
    Xp = np.broadcast_to(P[:, None, :], (n, K, d)).copy()
    h = 1e-5 * scale_x[:, :, None]
    v = rng.standard_normal((n, K, d))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    hv_norm = np.zeros((n, K))
    for _ in range(power_iters):
        Hv = (problem.local_grads(Xp + h * v) - problem.local_grads(Xp - h * v)) / (2 * h)
        hv_norm = np.linalg.norm(Hv, axis=-1)
        nz = hv_norm > 0
        v = np.where(nz[..., None], Hv / np.where(nz, hv_norm, 1.0)[..., None], v)
    L_pow = float(np.max(hv_norm))
    # secants at several distances
    L_sec = 0.0
    for dist in (1e-2, 1e-1, 1.0, 3.0):
        step = dist * scale_x[:, :, None] * rng.standard_normal((n, K, d)) / math.sqrt(d)
        dg = problem.local_grads(Xp + step) - problem.local_grads(Xp)
        ratio = np.linalg.norm(dg, axis=-1) / np.linalg.norm(step, axis=-1)
        L_sec = max(L_sec, float(np.max(ratio)))
    L_meas = max(L_pow, L_sec)
    if L_meas > problem.L * (1 + tol):
        viol.append(f"L: measured smoothness {L_meas:.6g} exceeds the declared L = {problem.L:.6g}")

    # ---- consistency of f, grad, local_fs, local_grads ---------------------------------
    u = rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    hh = 1e-5 * scale_x
    fv, gv = problem.f(P), problem.grad(P)
    fd = (problem.f(P + hh * u) - problem.f(P - hh * u)) / (2 * hh[:, 0])
    gd = np.sum(gv * u, axis=-1)
    g_scale = 1.0 + np.linalg.norm(gv, axis=-1)
    grad_err = float(np.max(np.abs(fd - gd) / g_scale))
    if grad_err > 1e-5:
        viol.append(f"grad is not the gradient of f (relative error {grad_err:.3g})")
    local_g = problem.local_grads(Xp)
    lf = problem.local_fs(Xp).mean(axis=-1)
    lg = local_g.mean(axis=-2)
    mean_err = float(
        max(
            np.max(np.abs(lf - fv) / (1 + np.abs(fv))),
            np.max(np.linalg.norm(lg - gv, axis=-1) / g_scale),
        )
    )
    if mean_err > 1e-8:
        viol.append(f"f/grad differ from the means of local_fs/local_grads ({mean_err:.3g})")

    # ---- zeta2 -------------------------------------------------------------------------
    dev = local_g - gv[:, None, :]
    zeta_meas = float(np.max(np.mean(np.sum(dev * dev, axis=-1), axis=-1)))
    if zeta_meas > problem.zeta2 * (1 + tol) + 1e-12 * (1 + float(np.max(g_scale)) ** 2):
        viol.append(
            f"zeta2: measured heterogeneity {zeta_meas:.6g} exceeds the declared "
            f"zeta2 = {problem.zeta2:.6g}"
        )

    # ---- sigma2 ------------------------------------------------------------------------
    n_sp = min(n, 6)
    Xs = Xp[:n_sp]
    true = problem.local_grads(Xs)
    sq = np.empty((n_noise, n_sp, K))
    sums = np.zeros((n_sp, K, d))
    sums2 = np.zeros((n_sp, K, d))
    for i in range(n_noise):
        e = problem.stochastic_grads(Xs, rng) - true
        sq[i] = np.sum(e * e, axis=-1)
        sums += e
        sums2 += e * e
    m_sq = sq.mean(axis=0)
    se = sq.std(axis=0, ddof=1) / math.sqrt(n_noise)
    zc = z_crit if z_crit is not None else float(stats.norm.isf(1e-4 / (n_sp * K)))
    lcb = m_sq - zc * se
    sigma_meas, sigma_lcb = float(np.max(m_sq)), float(np.max(lcb))
    if sigma_lcb > problem.sigma2 * (1 + tol) + 1e-12:
        viol.append(
            f"sigma2: measured noise variance {sigma_meas:.6g} (lower confidence bound "
            f"{sigma_lcb:.6g}) exceeds the declared sigma2 = {problem.sigma2:.6g}"
        )
    # zero mean: per-coordinate z-scores, for additive noise (minibatch index draws are
    # unbiased by construction, and their skewed discrete laws defeat a normal z-test)
    probe = problem.draw_randomness(rng, (1,))
    z_max = math.nan
    if probe is not None and np.issubdtype(probe.dtype, np.floating):
        mean_e = sums / n_noise
        var_e = sums2 / n_noise - mean_e**2
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(var_e > 1e-300, np.abs(mean_e) / np.sqrt(var_e / n_noise), 0.0)
        z_max = float(np.max(z))
        z_lim = float(stats.norm.isf(1e-6 / (2 * z.size))) + 1.0
        if z_max > z_lim:
            viol.append(
                f"noise is not zero-mean (max coordinate z-score {z_max:.3g} > {z_lim:.3g})"
            )

    # ---- f_star ------------------------------------------------------------------------
    f_min = float(np.min(fv))
    x = P.copy()
    lr = 1.0 / problem.L
    with np.errstate(all="ignore"):
        for _ in range(gd_steps):
            x = x - lr * problem.grad(x)
        fx = problem.f(x)
    fx = fx[np.isfinite(fx)]
    if fx.size:
        f_min = min(f_min, float(np.min(fx)))
    if f_min < problem.f_star - tol * (1 + abs(problem.f_star)):
        viol.append(
            f"f_star: found f = {f_min:.6g} below the declared f_star = {problem.f_star:.6g}"
        )

    report = ConstantsReport(
        problem=problem.name,
        n_points=n,
        L_declared=problem.L,
        L_measured=L_meas,
        sigma2_declared=problem.sigma2,
        sigma2_measured=sigma_meas,
        sigma2_pooled=float(np.mean(m_sq)),
        sigma2_lower_conf=sigma_lcb,
        zeta2_declared=problem.zeta2,
        zeta2_measured=zeta_meas,
        f_star_declared=problem.f_star,
        f_min_found=f_min,
        grad_rel_error=grad_err,
        local_mean_rel_error=mean_err,
        noise_mean_max_z=z_max,
        exactness=dict(problem.exactness),
        violations=viol,
    )
    if viol and raise_on_violation:
        raise UserInputError(
            f"problem {problem.name!r}: declared constants contradicted by sampling: "
            + "; ".join(viol)
        )
    return report


def with_declared(problem: Problem, **constants: float) -> Problem:
    """A shallow copy of ``problem`` with some declared constants replaced (for what-ifs)."""
    allowed = {"L", "sigma2", "zeta2", "f_star"}
    bad = set(constants) - allowed
    if bad:
        raise UserInputError(f"unknown constant(s) {sorted(bad)}: choose from {sorted(allowed)}")
    new = copy.copy(problem)
    for k, val in constants.items():
        setattr(new, k, float(val))
    return new

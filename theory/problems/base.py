"""The base class :class:`Problem`: declared constants, noise models, oracle calls."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError
from theory.validation import validate

NOISE_MODELS = ("gaussian", "rademacher", "finite_sum", "none")
#: the constants a problem declares (A1-A4 of ``theory.assumptions``)
CONSTANTS = ("L", "sigma2", "zeta2", "f_star")

Array = np.ndarray


def into(out: Array | None, res: Array) -> Array:
    """``res``, or ``res`` written into ``out`` (the ``out=`` convention of the gradients)."""
    if out is None:
        return res
    out[...] = res
    return out


def check_noise(noise: str) -> str:
    if noise not in NOISE_MODELS:
        raise UserInputError(f"unknown noise model {noise!r}: choose one of {list(NOISE_MODELS)}")
    return noise


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
        self.noise_model = check_noise(noise)
        # the actual variance of the additive noise, fixed here: changing the declared
        # ``sigma2`` afterwards (e.g. with :func:`with_declared`) does not change the noise
        self._noise_var = self.sigma2
        self._x0 = np.zeros(self.d) if x0 is None else np.asarray(x0, dtype=float).copy()
        if self._x0.shape != (self.d,):
            raise UserInputError(f"x0 must have shape ({self.d},), got {self._x0.shape}")
        self.exactness = dict.fromkeys(CONSTANTS, "exact")
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
        out = {k: getattr(self, k) for k in (*CONSTANTS, "F0")}
        out.update(sigma=math.sqrt(self.sigma2), zeta=math.sqrt(self.zeta2))
        return out

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

"""Problems from user callables with user-declared constants."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from core.errors import UserInputError
from theory.problems.base import Array, Problem, into


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
        return into(out, res)

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

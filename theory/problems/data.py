"""Problems on a data matrix: the shared base of robust regression and logistic regression."""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from core.errors import UserInputError
from theory.problems.args import batch_arg, centred_shifts
from theory.problems.base import Array, Problem, into


class DataProblem(Problem):
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
        self.shifts = centred_shifts(shifts, K, d)
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
            sigma2 = float(self.G**2 * np.max(np.mean(row_sq, axis=1)) / batch_arg(batch))
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
        return self._finish(res, X, out)

    def _finish(self, res: Array, X: Array, out: Array | None) -> Array:
        """The data part ``res`` of the gradients plus the regulariser's and the linear
        terms' (into ``out`` if given)."""
        res += self.dreg(X)
        res += self.shifts
        return into(out, res)

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
        return self._finish(res, X, out)

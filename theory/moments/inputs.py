"""The quadratics the exact recursions take, reduced to A's eigenbasis.

:class:`MatrixQuadratic` (``A``, ``b``, a noise covariance) and :func:`as_eig`, which also
accepts the quadratics of :mod:`theory.problems` and any object or dict with ``A`` and ``b``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.validation import validate_one


@dataclass(frozen=True)
class MatrixQuadratic:
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
        b = check_b(self.b, d)
        x0 = check_x0(self.x0, d)
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
        object.__setattr__(self, "_s2", noise_in_eigenbasis(self.noise, U))

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
class EigenQuadratic:
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


def check_b(b: Any, d: int) -> np.ndarray:
    b = np.asarray(b, dtype=float)
    if b.ndim == 1 and d == 1:
        b = b.reshape(-1, 1)
    if b.ndim != 2 or b.shape[1] != d:
        raise UserInputError(f"b must have shape (K, {d}), got {b.shape}")
    validate_one("K", b.shape[0])
    if not np.all(np.isfinite(b)):
        raise UserInputError("b has NaN or infinite entries")
    return b


def check_x0(x0: Any, d: int) -> np.ndarray:
    x0 = np.zeros(d) if x0 is None else np.asarray(x0, dtype=float).reshape(-1)
    if x0.shape != (d,) or not np.all(np.isfinite(x0)):
        raise UserInputError(f"x0 must be a finite vector of length {d}")
    return x0


def noise_in_eigenbasis(noise: Any, U: np.ndarray) -> np.ndarray:
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


def as_eig(problem: Any) -> EigenQuadratic:
    """The quadratic in its eigenbasis, from a :class:`MatrixQuadratic`, a
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
    if isinstance(problem, MatrixQuadratic):
        return EigenQuadratic(
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
        qp = MatrixQuadratic(A=A, b=b, noise=0.0, x0=x0)
        lam, U, d = qp.eigenvalues, qp.eigenvectors, qp.d
    b = check_b(b, d)
    K = b.shape[0]
    x0 = check_x0(x0, d)
    s2 = _noise_of(problem, get, U, d, K)
    return EigenQuadratic(lam=lam, U=U, b=b, s2=s2, x0=x0)


def _noise_of(problem: Any, get: Any, U: np.ndarray | None, d: int, K: int) -> np.ndarray:
    """Noise variance ``(d, K)`` per eigendirection and worker (see :func:`as_eig`)."""
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
    s2 = noise_in_eigenbasis(noise, np.eye(d) if U is None else U)
    return np.repeat(s2[:, None], K, axis=1)


def _first(get: Any, names: Sequence[str]) -> Any:
    for name in names:
        val = get(name)
        if val is not None and not callable(val):
            return val
    return None

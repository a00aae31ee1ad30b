"""Argument helpers of the problem factories: noise variance, heterogeneity and finite-sum
scaling, unknown-option checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

import numpy as np

from core.errors import UserInputError
from core.validation import ParameterError
from theory.problems.base import Array, check_noise
from theory.validation import validate

T = TypeVar("T")


def take_fields(cls: type[T], kw: dict[str, Any]) -> T:
    """The dataclass ``cls`` built from its fields found in ``kw`` (popped from it)."""
    return cls(**{f.name: kw.pop(f.name) for f in fields(cls) if f.name in kw})


@dataclass(frozen=True)
class ProblemArgs:
    """The keywords every problem factory takes (the protocol of :data:`PROBLEMS`).

    ``K`` workers (required), ``d`` coordinates, the noise model (see
    :data:`~theory.problems.base.NOISE_MODELS`), ``sigma`` the noise level (``None``: the
    problem's default), ``zeta`` the requested heterogeneity, ``seed`` the seed of the
    problem's data only (not of a simulation).
    """

    K: int
    d: int = 10
    noise: str = "gaussian"
    sigma: float | None = None
    zeta: float = 0.0
    seed: int = 0

    @classmethod
    def take(cls, kw: dict[str, Any]) -> ProblemArgs:
        """Pop these keywords from a factory's ``kw``, leaving its own options."""
        if "K" not in kw:
            raise TypeError("a problem factory needs the keyword argument K (workers)")
        return take_fields(cls, kw)

    def keywords(self) -> dict[str, Any]:
        """The keywords as a dict, to pass on to a factory."""
        return asdict(self)

    def rng(self) -> np.random.Generator:
        """The generator of the problem's data."""
        return np.random.default_rng(self.seed)


def center_and_scale(u: Array, target_sq: float, what: str) -> Array:
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


def centred_shifts(shifts: Any, K: int, d: int) -> Array:
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


def offset_finite_sum(
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


def batch_arg(batch: Any) -> int:
    """The minibatch size ``B`` of a finite sum, an integer ``>= 1``."""
    B = int(batch)
    if B < 1:
        raise ParameterError("batch", B, "integer in [1, inf)")
    return B


def finite_sum_args(kw: dict[str, Any]) -> tuple[int, int]:
    n = int(kw.pop("n_samples", 32))
    batch = kw.pop("batch", 1)
    if n < 2:
        raise ParameterError("n_samples", n, "integer in [2, inf)")
    return n, batch_arg(batch)


def shifts_arg(rng: np.random.Generator, K: int, d: int, zeta: float, shards: bool) -> Array:
    if shards:
        if zeta != 0:
            raise UserInputError(
                "with shards=True the heterogeneity comes from the data (zeta2 is computed); "
                "leave zeta = 0"
            )
        return np.zeros((K, d))
    return center_and_scale(rng.standard_normal((K, d)), zeta * zeta, "zeta")


def sigma2_arg(noise: str, sigma: float | None) -> float:
    check_noise(noise)
    if noise == "none":
        if sigma not in (None, 0, 0.0):
            raise UserInputError(f"noise='none' has sigma = 0; got sigma = {sigma}")
        return 0.0
    s = 1.0 if sigma is None else sigma
    validate(sigma=s)
    return float(s) ** 2


def data_sigma2_arg(noise: str, sigma: float | None) -> float | None:
    if noise == "finite_sum":
        return sigma  # checked (must be None) by DataProblem
    return sigma2_arg(noise, sigma)


def no_extra(kw: dict[str, Any], name: str) -> None:
    if kw:
        raise UserInputError(f"unknown option(s) {sorted(kw)} for problem {name!r}")

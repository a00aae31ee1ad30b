"""The map of the guarantees: Theorem 2's pull-aware bound against the best Local SGD bound.

A comparison of upper bounds says which *guarantee* is smaller, not which algorithm reaches a
target cheaper: the exact comparison of the algorithms, every method tuned alike, is
:mod:`theory.compare` (``palsgd map``), which finds the opposite of this map's "wins"
(docs/when_pulling_pays.md).

:func:`rounds_map` evaluates, on a grid of sync intervals ``H`` and pull rates ``eta``
(pull probability ``p`` fixed), the communication rounds each bound needs to guarantee
``eps`` (:meth:`theory.bound.Bound.rounds_to_eps`, optimal inner step at each ``T``):

* ``palsgd_pull_aware`` at the best outer learning rate of a small grid (plain averaging
  ``gamma = 1`` and ``gamma = c eta/(16 L)`` for ``c`` in 1/2, 1, 2, 4; ``mu = 0``);
* the best Local SGD bound at the same ``H``: the smallest of ``local_sgd_ours``,
  ``local_sgd_noniid`` and ``local_sgd_outer`` (``gamma = 1``, ``mu = 0``); and the same at
  equal gradient evaluations per round (a PALSGD step computes a gradient with probability
  ``1 - p``, so Local SGD gets ``round((1-p) H)`` steps per round).

The two kinds of bound measure different averages (the pull-aware bound: the anchors
``z_r``; the Local SGD bounds: every step's averaged iterate); both are guarantees on an
average squared gradient norm of the model the method returns.

:func:`exact_map` runs the exact moment recursions (:mod:`theory.moments`) on a
heterogeneous quadratic on the same grid: end-of-round consensus error and anchor
gradient norm of PALSGD and of Local SGD.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from theory import bounds as registry
from theory.moments import MatrixQuadratic as QuadraticProblem
from theory.moments import exact_moments

__all__ = ["LOCAL_SGD_BOUNDS", "rounds_map", "exact_map", "heterogeneous_quadratic"]

#: the Local SGD bounds the pull-aware bound is compared with (the best of them is used)
LOCAL_SGD_BOUNDS = ("local_sgd_ours", "local_sgd_noniid", "local_sgd_outer")
_GAMMA_FACTORS = (0.5, 1.0, 2.0, 4.0)


def _local_best(eps: float, H: np.ndarray, consts: dict[str, float]) -> np.ndarray:
    out = np.full(np.shape(H), np.inf)
    for name in LOCAL_SGD_BOUNDS:
        extra = {"gamma": 1.0, "mu": 0.0} if name == "local_sgd_outer" else {}
        b = registry.get(name)
        out = np.minimum(out, b.rounds_to_eps(eps, H=H, **consts, **extra, t_max=10**13))
    return out


def rounds_map(
    *,
    L: float,
    sigma: float,
    zeta: float,
    K: int,
    F0: float,
    eps: float,
    p: float,
    H_values: Sequence[int],
    eta_values: Sequence[float],
) -> dict[str, Any]:
    """Rounds to ``eps`` on the ``(H, eta)`` grid (rows ``H``, columns ``eta``).

    Returns ``H``, ``eta``, ``pull`` (pull-aware bound, best outer rate), ``pull_gamma``
    (that rate), ``local`` (best Local SGD bound at the same ``H``, one value per row),
    ``local_equal_grads`` (at ``round((1-p) H)`` steps per round), ``ratio`` =
    ``pull/local`` (< 1: the pull-aware guarantee needs fewer rounds) and
    ``ratio_equal_grads``. ``inf`` where a bound cannot reach ``eps``.
    """
    consts = dict(L=L, sigma=sigma, zeta=zeta, K=K, F0=F0)
    H = np.asarray(H_values, dtype=float)[:, None]
    eta = np.asarray(eta_values, dtype=float)[None, :]
    pa = registry.get("palsgd_pull_aware")
    best = np.full(np.broadcast_shapes(H.shape, eta.shape), np.inf)
    best_gamma = np.full(best.shape, np.nan)
    gammas = [np.ones_like(eta)] + [c * eta / (16 * L) for c in _GAMMA_FACTORS]
    for g in gammas:
        r = pa.rounds_to_eps(eps, H=H, eta=eta, p=p, gamma=g, mu=0.0, **consts, t_max=10**13)
        better = r < best
        best = np.where(better, r, best)
        best_gamma = np.where(better, np.broadcast_to(g, best.shape), best_gamma)
    local = _local_best(eps, H[:, 0], consts)
    h_eq = np.maximum(1.0, np.round((1 - p) * H[:, 0]))
    local_eq = _local_best(eps, h_eq, consts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "H": H[:, 0],
            "eta": eta[0],
            "pull": best,
            "pull_gamma": best_gamma,
            "local": local,
            "local_equal_grads": local_eq,
            "ratio": best / local[:, None],
            "ratio_equal_grads": best / local_eq[:, None],
        }


def heterogeneous_quadratic(K: int = 4, seed: int = 0, noise: float = 0.0) -> QuadraticProblem:
    """``f_k = 1/2 (x - b_k)^T diag(1, 1/4) (x - b_k)`` with centred Gaussian ``b_k`` (L = 1)."""
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(K, 2))
    b -= b.mean(axis=0)
    return QuadraticProblem(A=np.diag([1.0, 0.25]), b=b, noise=noise)


def exact_map(
    problem: QuadraticProblem,
    *,
    alpha: float,
    p: float,
    H_values: Sequence[int],
    eta_values: Sequence[float],
    rounds: int = 4,
) -> dict[str, Any]:
    """Exact end-of-round consensus error and anchor gradient norm on the ``(H, eta)`` grid.

    ``consensus[i, j]``: ``E (1/K) sum_k ||x_k - xbar||^2`` before the last local step of
    the last round, PALSGD with ``H_values[i]`` and ``eta_values[j]``; ``grad[i, j]``:
    ``E||grad f(z_R)||^2`` after the last sync. ``local_consensus[i]``, ``local_grad[i]``:
    the same for Local SGD at the same ``alpha`` and ``H``. Starts at ``x0 = 0``.
    """
    Hs, etas = list(H_values), list(eta_values)
    cons = np.zeros((len(Hs), len(etas)))
    grad = np.zeros_like(cons)
    lcons = np.zeros(len(Hs))
    lgrad = np.zeros(len(Hs))
    for i, H in enumerate(Hs):
        T = rounds * int(H)
        loc = exact_moments(problem, dict(kind="local_sgd", alpha=alpha, H=H), T=T)
        lcons[i], lgrad[i] = loc.consensus[T - 1], loc.final_grad_norm_sq
        for j, eta in enumerate(etas):
            spec = dict(kind="palsgd", alpha=alpha, H=H, p=p, eta=eta)
            c = exact_moments(problem, spec, T=T)
            cons[i, j], grad[i, j] = c.consensus[T - 1], c.final_grad_norm_sq
    return {
        "H": np.asarray(Hs),
        "eta": np.asarray(etas),
        "consensus": cons,
        "grad": grad,
        "local_consensus": lcons,
        "local_grad": lgrad,
    }

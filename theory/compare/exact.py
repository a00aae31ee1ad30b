"""Exact first-passage rounds of many configurations of one method on one quadratic.

:func:`exact_rounds` evaluates configurations ``(eta, p, alpha, gamma)`` of a
:class:`~theory.compare.methods.Method` at one sync interval ``H`` on a
:class:`~theory.problems.hessians.HeteroHessianQuadratic`: the within-round moments
(:func:`theory.compare.pairs.round_moments`), the anchor's round map
(:func:`theory.compare.scan.anchor_map`) and the first round at which
``E||grad f(z_r)||^2 <= eps`` (:func:`theory.compare.scan.first_passage`). Minibatch SGD is
Local SGD with ``H = 1`` and averaging (one local step then the mean is exactly a
minibatch-SGD step: the workers' mean gradient at a common point is ``grad f``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.algorithm import DILOCO_DEFAULT_MU
from theory.compare.methods import Method
from theory.compare.pairs import round_moments
from theory.compare.scan import anchor_map, early_values, first_passage, start_vector
from theory.problems.hessians import HeteroHessianQuadratic

__all__ = ["Quadratic", "exact_rounds", "exact_values", "CHUNK"]

#: configurations evaluated per batch (bounds the memory of the stacked maps)
CHUNK = 4096


@dataclass(frozen=True)
class Quadratic:
    """What the exact recursions read from a :class:`HeteroHessianQuadratic`, per coordinate:
    curvatures ``lam`` and shifted minimisers ``delta`` ``(d, K)``, noise variance ``s2``
    ``(d,)``, shifted start ``y0`` ``(d,)``, gradient weight ``lbar^2`` ``(d,)``."""

    lam: np.ndarray
    delta: np.ndarray
    s2: np.ndarray
    y0: np.ndarray
    weight: np.ndarray
    K: int

    @classmethod
    def of(cls, problem: HeteroHessianQuadratic) -> Quadratic:
        return cls(
            lam=problem.eigenvalues.T.copy(),
            delta=problem.delta.T.copy(),
            s2=np.full(problem.d, problem.sigma2 / problem.d),
            y0=problem.x0() - problem.x_star,
            weight=problem.lbar**2,
            K=problem.K,
        )

    def initial_value(self) -> float:
        """``||grad f(x0)||^2``."""
        return float(np.sum(self.weight * self.y0**2))


def exact_rounds(
    q: Quadratic,
    m: Method,
    *,
    H: int,
    eta: np.ndarray,
    p: np.ndarray,
    alpha: np.ndarray,
    gamma: np.ndarray,
    eps: np.ndarray,
    cap: np.ndarray,
    group: np.ndarray,
    mu: float = DILOCO_DEFAULT_MU,
    sustained: bool = False,
    known: np.ndarray | None = None,
    values: int = 0,
) -> tuple[np.ndarray, ...]:
    """First rounds ``(N, E)`` reaching each ``eps`` (-1: not by ``cap``, -2: skipped, see
    :func:`theory.compare.scan.first_passage`) and the diverged flags ``(N,)``; with
    ``sustained``, ``(N, 2E)``: then also the rounds from which the value stays at or
    below each ``eps``. ``known`` ``(N, E or 2E)``: the answers each configuration's group
    already has (:func:`theory.compare.scan.first_passage`).

    ``eta, p, alpha, gamma, cap, group``: ``(N,)`` per configuration (``eta, p`` ignored
    unless ``m`` pulls; ``gamma`` ignored without an outer rate); ``mu``: the outer momentum
    of the Nesterov methods. ``values > 0``: also the values ``E||grad f||^2`` of rounds
    ``1 .. values`` ``(N, values)`` (NaN where the scan did not examine them).
    """
    N = np.asarray(alpha).size
    eps = np.asarray(eps, dtype=float).reshape(-1)
    out = np.empty((N, eps.size * (2 if sustained else 1)), dtype=np.int64)
    div = np.empty(N, dtype=bool)
    early = np.full((N, values), np.nan)
    # a group's configurations stay in one chunk so that the group's skipping stays exact
    order = np.argsort(group, kind="stable")
    bounds = _chunks(np.asarray(group)[order], CHUNK)
    for lo, hi in bounds:
        idx = order[lo:hi]
        res = _evaluate(
            q, m, H, *(np.asarray(x, dtype=float)[idx] for x in (eta, p, alpha, gamma)),
            eps, np.asarray(cap)[idx], np.asarray(group)[idx], mu, sustained,
            None if known is None else np.asarray(known)[idx], values,
        )  # fmt: skip
        out[idx], div[idx] = res[0], res[1]
        if values > 0:
            early[idx] = res[2]
    return (out, div, early) if values > 0 else (out, div)


def exact_values(
    q: Quadratic,
    m: Method,
    *,
    H: int,
    eta: np.ndarray,
    p: np.ndarray,
    alpha: np.ndarray,
    gamma: np.ndarray,
    mu: float = DILOCO_DEFAULT_MU,
    rounds: int,
) -> np.ndarray:
    """``(N, rounds)`` the values ``E||grad f(z_r)||^2`` of rounds ``1 .. rounds`` of ``N``
    configurations (arguments as :func:`exact_rounds`'s; ``inf`` past a blow-up)."""
    N = np.asarray(alpha).size
    out = np.empty((N, rounds))
    for lo in range(0, N, CHUNK):
        sl = slice(lo, min(N, lo + CHUNK))
        a, e, pp, g = (np.asarray(x, dtype=float).reshape(-1)[sl] for x in (alpha, eta, p, gamma))
        M = _round_maps(q, m, H, e, pp, a, g, mu)
        out[sl] = early_values(M, start_vector(q.y0, a.size), q.weight, rounds)
    return out


def _chunks(sorted_groups: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Cut points near every ``size`` rows that never split a group."""
    out, lo, n = [], 0, sorted_groups.size
    while lo < n:
        hi = min(n, lo + size)
        while hi < n and sorted_groups[hi] == sorted_groups[hi - 1]:
            hi += 1
        out.append((lo, hi))
        lo = hi
    return out


def _round_maps(q, m, H, eta, p, alpha, gamma, mu) -> np.ndarray:
    """The anchor's round maps ``(N, d, 6, 6)`` of ``N`` configurations of ``m``."""
    n = np.asarray(alpha).size
    if not m.local:  # a minibatch step: one local step, then the mean (outer SGD, gamma 1)
        Hn, p_, eta_, outer, g, mu_ = 1, np.zeros(n), np.zeros(n), "sgd", np.ones(n), 0.0
    else:
        Hn = H
        p_, eta_ = (p, eta) if m.pulls else (np.zeros(n), np.zeros(n))
        outer, g, mu_ = m.outer, gamma, m.outer_momentum(mu)
    with np.errstate(all="ignore"):
        mom = round_moments(
            q.lam, q.delta, q.s2, alpha=alpha, eta=eta_, p=p_, H=np.full(n, Hn), shared=m.shared
        )
        return anchor_map(mom, outer, g, np.full(n, mu_))


def _evaluate(q, m, H, eta, p, alpha, gamma, eps, cap, group, mu, sustained, known, values):
    M = _round_maps(q, m, H, eta, p, alpha, gamma, mu)
    v0 = start_vector(q.y0, alpha.size)
    return first_passage(M, v0, q.weight, eps, cap, group=group, sustained=sustained,
                         known=known, values=values)  # fmt: skip

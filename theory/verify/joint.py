"""Two-curvature instances with every source at once: initial gap, heterogeneity and noise.

The instances of :mod:`theory.lower.hetero` (one dimension; ``j`` workers with
``f_A'(x) = L x + c``, ``j`` with ``f_B'(x) = b x - c``, one more with ``f_N'(x) = m x`` when
``K = 2j + 1``, ``m = (L + b)/2``, all of them continued with slope ``m`` outside
``[-R, R]``) start at the optimum and have no noise: each measures the heterogeneity alone.
Here the same family also carries

- **an initial gap**: the run starts at ``x0 = start * c``; ``f = m x^2/2`` everywhere, so
  ``F0 = m x0^2/2`` exactly;
- **noise**: every gradient of every worker gets an independent Rademacher ``+-s``
  (``s = noise * c``): mean zero, variance ``s^2``, so A2 holds with ``sigma = s``; being
  bounded, it leaves every path inside a region that can be computed.

Inside ``[-R, R]`` each ``f_k`` is a quadratic with its own curvature, so the run is Local
SGD / PALSGD on a quadratic with per-worker Hessians and noise, and its exact
``(1/T) sum_t E||grad f(xbar_t)||^2`` (or the anchors' average) is what the map's engine
computes (:func:`theory.compare.averages.exact_averages`; the second moments depend on the
noise only through its variance, so the engine's value is exact for Rademacher noise too).
The region, in units of ``c``, is ``U = U_det + U_noise``: the reach of the noise-free run
from ``start`` (:func:`theory.lower.region.reach_history`: the one path without coins, an
interval propagation over every coin path with them) plus the largest ``|noise-driven
part|`` over every coin path and every sign sequence of the noise (:func:`noise_reach`).
Then ``c = zeta sqrt(K/(2j)) / (1 + (L - b) U/2)`` makes the heterogeneity
``(1/K) sum_k |f_k' - f'|^2 <= (2j/K) ((L - b) R/2 + c)^2`` equal ``zeta^2`` at its
largest: the instance satisfies A1-A4 with ``L``, ``sigma = s``, ``zeta`` and ``F0``.

With coins the region is propagated over at most :data:`MAX_COIN_STEPS` steps; only the
rounds inside are counted (the later terms are ``>= 0``, so the value is still a lower
bound on the run's average).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.algorithm import AlgorithmSpec, pull_coefficient
from theory.compare.averages import exact_averages
from theory.compare.exact import Quadratic
from theory.compare.methods import Method
from theory.lower.region import MAX_COIN_STEPS, reach_history
from theory.lower.two_curvature import _groups
from theory.moments.rounds import outer_coefficients

__all__ = [
    "JointInstance", "StartProfile", "counted_rounds", "heterogeneity_scale", "joint_instance",
    "noise_reach", "start_profile",
]  # fmt: skip


@dataclass(frozen=True)
class JointInstance:
    """One instance: its constants (``c``, region ``R``, start ``x0``, noise ``sigma``, gap
    ``F0``, heterogeneity ``zeta``) and its exact ``value`` (0 with ``c = 0``: no instance,
    e.g. a run that diverges)."""

    L: float
    b: float
    K: int
    c: float
    R: float
    x0: float
    sigma: float
    F0: float
    zeta: float
    value: float


def counted_rounds(H: int, T: int, p: float) -> int:
    """The full rounds whose steps are counted: all ``T // H`` without coins, at most
    :data:`MAX_COIN_STEPS` steps' worth (at least one round) with them."""
    rounds = T // H
    return rounds if p == 0 else min(rounds, max(1, MAX_COIN_STEPS // H))


def _worker_ranges(h: float, alpha: float, p: float, eta: float, H: int) -> np.ndarray:
    """``(3, H + 1)``: over every coin path, the least and largest coefficient ``A_j`` of the
    anchor in a worker's iterate after ``j`` steps, and the largest ``|noise part|`` per unit
    of noise (a gradient step adds ``+-alpha/(1-p)``, a pull none)."""
    a = alpha / (1.0 - p)
    q = 1.0 - a * h
    out = np.zeros((3, H + 1))
    lo, hi, n = 1.0, 1.0, 0.0
    out[:, 0] = lo, hi, n
    beta = pull_coefficient(alpha, eta, p) if p > 0 else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(1, H + 1):
            g = sorted((q * lo, q * hi))
            if p > 0:  # the pull (1 - beta) A + beta, either sign of 1 - beta
                u = sorted(((1 - beta) * lo + beta, (1 - beta) * hi + beta))
                lo, hi = min(g[0], u[0]), max(g[1], u[1])
                n = max(abs(q) * n + a, abs(1 - beta) * n)
            else:
                lo, hi = g
                n = abs(q) * n + a
            out[:, j] = lo, hi, n
    return out


def noise_reach(
    groups, H: int, rounds: int, alpha: float, p: float, eta: float, outer: str,
    gamma: float, mu: float, s: float,
) -> float:  # fmt: skip
    """The largest ``|noise-driven part|`` of any worker or anchor over ``rounds`` rounds,
    every coin path and every noise sequence in ``[-s, s]`` (``inf``: none found).

    The noise-driven part is linear in the noise; per round a worker's is ``A z_n + N``
    (``z_n`` the anchor's, ``A`` in the range of :func:`_worker_ranges`, ``|N| <= n_j s``).
    With ``Delta = (1 - Abar) z - Nbar`` the sync's radii ``r = (|z_n|, |buf_n|)`` obey
    ``r' <= M r + v`` with ``M >= 0`` the largest absolute coefficients over the range of
    ``Abar``; from ``r = 0`` the radii grow monotonically, so after ``n`` rounds every
    earlier one is below ``sum_{i<n} M^i v``.
    """
    if s == 0:
        return 0.0
    ranges = [(w, _worker_ranges(h, alpha, p, eta, H)) for w, h, _ in groups]
    a_lo = sum(w * r[0, H] for w, r in ranges)
    a_hi = sum(w * r[1, H] for w, r in ranges)
    nbar = s * sum(w * r[2, H] for w, r in ranges)
    zc, bc = outer_coefficients(outer, gamma, mu)
    M = np.zeros((3, 3))
    for i, c in enumerate((zc, bc)):
        M[i, 0] = max(abs(c[0] + c[2] * (1 - a_lo)), abs(c[0] + c[2] * (1 - a_hi)))
        M[i, 1] = abs(c[1])
        M[i, 2] = abs(c[2]) * nbar
    M[2, 2] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.linalg.matrix_power(M, int(rounds)) @ np.array([0.0, 0.0, 1.0])
        rz = float(r[0])
        inner = max(
            float(np.max(np.maximum(abs(rg[0]), abs(rg[1])) * rz + rg[2] * s)) for _, rg in ranges
        )
    out = max(rz, inner)
    return out if math.isfinite(out) else math.inf


def _method(algorithm: str, outer: str, mu: float, coins: str) -> Method:
    """The engine's method for one outer update of ``algorithm``."""
    kw = {"outer": outer, "coins": coins}
    if outer != "average":
        kw["mu"] = mu
    return Method("joint", AlgorithmSpec.of(algorithm, **kw))


def _unit(
    *, alpha: float, L: float, b: float, K: int, H: int, T: int, rounds: int, start: float,
    noise: float, offset: float, p: float, eta: float, outer: str, gamma: float, mu: float,
    measured: str, algorithm: str, coins: str,
) -> float:  # fmt: skip
    """The measured value of the run with ``c = offset`` (1, or 0: no linear terms), started
    at ``start``, with noise ``+-noise``, over the counted ``rounds`` (the engine's)."""
    m = 0.5 * (L + b)
    bb = b if abs(b) > 1e-12 * L else math.copysign(1e-12 * L, b or 1.0)  # b = 0: -c/b
    lam = np.array([L] * (K // 2) + [bb] * (K // 2) + [m] * (K % 2), dtype=float)
    lin = offset * np.array([1.0] * (K // 2) + [-1.0] * (K // 2) + [0.0] * (K % 2))
    q = Quadratic(
        lam=lam[None, :], delta=(-lin / lam)[None, :], s2=np.array([noise * noise]),
        y0=np.array([float(start)]), weight=np.array([m * m]), K=K,
    )  # fmt: skip
    with np.errstate(all="ignore"):
        avg = exact_averages(
            q, _method(algorithm, outer, mu, coins), H=H, eta=eta, p=p, alpha=alpha,
            gamma=gamma, mu=mu, R=rounds,
        )  # fmt: skip
    if measured == "iterates":
        return float(avg["iterates"][0]) * rounds * H / T
    return float(avg["anchors"][0]) * rounds / max(T // H, 1)


@dataclass(frozen=True)
class StartProfile:
    """How the ``c = 1`` run depends on its start ``s`` (no noise): the measured value is
    ``A s^2 + 2 B s + C`` exactly (the iterates are ``s P_t + Q_t``), and its reach is at
    most ``|s| UP + UQ`` (``UP``: the run from 1 without linear terms, ``UQ``: from 0)."""

    A: float
    B: float
    C: float
    UP: float
    UQ: float


def start_profile(
    *, alpha: float, L: float, K: int, H: int, T: int, b: float, p: float = 0.0,
    eta: float = 0.0, outer: str = "average", gamma: float = 1.0, mu: float = 0.0,
    measured: str = "iterates", algorithm: str = "palsgd", coins: str = "independent",
) -> StartProfile | None:  # fmt: skip
    """The :class:`StartProfile` of the instance at these values (``None``: no instance),
    from three runs of the engine and two regions; :func:`joint_instance` at the chosen
    start is exact, with its own (smaller or equal) region."""
    K, H, T = int(K), int(H), int(T)
    rounds = counted_rounds(H, T, p)
    if K < 2 or rounds < 1:
        return None
    kw = dict(
        alpha=alpha, L=L, b=b, K=K, H=H, T=T, rounds=rounds, noise=0.0, p=p, eta=eta,
        outer=outer, gamma=gamma, mu=mu, measured=measured, algorithm=algorithm, coins=coins,
    )  # fmt: skip
    A = _unit(start=1.0, offset=0.0, **kw)
    C = _unit(start=0.0, offset=1.0, **kw)
    B = 0.5 * (_unit(start=1.0, offset=1.0, **kw) - A - C)
    groups = _groups(K, L, b)
    quiet = [(w, h, 0.0) for w, h, _ in groups]
    lengths = [(rounds, H)]
    UP = float(reach_history(quiet, lengths, alpha, p, eta, outer, gamma, mu, 1.0)[-1])
    UQ = float(reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu, 0.0)[-1])
    out = StartProfile(A, B, C, UP, UQ)
    return out if all(math.isfinite(v) for v in (A, B, C, UP, UQ)) else None


def joint_instance(
    *, alpha: float, L: float, zeta: float, K: int, H: int, T: int, b: float,
    start: float = 0.0, noise: float = 0.0, p: float = 0.0, eta: float = 0.0,
    outer: str = "average", gamma: float = 1.0, mu: float = 0.0,
    measured: str = "iterates", algorithm: str = "palsgd", coins: str = "independent",
) -> JointInstance:  # fmt: skip
    """The instance of the module docstring and its exact value.

    ``b`` the second group's curvature (``-L < b <= L``, absolute), ``start = x0/c``,
    ``noise = s/c``; ``algorithm``: a local method of the algorithm table (``local_sgd``,
    ``diloco``, ``palsgd``) run with ``outer`` (``gamma``, ``mu``), ``p``, ``eta`` and
    ``coins``; ``measured``: ``"iterates"`` or ``"anchors"``.
    """
    if not -L < b <= L:
        raise UserInputError(f"b = {b} must lie in (-L, L] = (-{L}, {L}]")
    K, H, T = int(K), int(H), int(T)
    m = 0.5 * (L + b)
    none = JointInstance(L, b, K, 0.0, math.inf, 0.0, 0.0, 0.0, zeta, 0.0)
    rounds = counted_rounds(H, T, p)
    if K < 2 or zeta == 0 or rounds < 1:
        return none
    groups = _groups(K, L, b)
    det = reach_history(groups, [(rounds, H)], alpha, p, eta, outer, gamma, mu, start)[-1]
    U = float(det) + noise_reach(groups, H, rounds, alpha, p, eta, outer, gamma, mu, noise)
    if not math.isfinite(U):
        return none
    unit = _unit(
        alpha=alpha, L=L, b=b, K=K, H=H, T=T, rounds=rounds, start=start, noise=noise,
        offset=1.0, p=p, eta=eta, outer=outer, gamma=gamma, mu=mu, measured=measured,
        algorithm=algorithm, coins=coins,
    )  # fmt: skip
    if not math.isfinite(unit):
        return none
    c = heterogeneity_scale(zeta, K, L, b, U)
    x0 = start * c
    return JointInstance(L, b, K, c, c * U, x0, noise * c, 0.5 * m * x0 * x0, zeta, c * c * unit)


def heterogeneity_scale(zeta: Any, K: int, L: float, b: float, U: Any) -> Any:
    """The largest ``c`` whose instance has heterogeneity at most ``zeta^2`` everywhere, for
    a ``c = 1`` run of reach ``U``: ``zeta sqrt(K/(2j)) / (1 + (L - b) U/2)``."""
    return zeta * math.sqrt(K / (2 * (K // 2))) / (1.0 + 0.5 * (L - b) * U)

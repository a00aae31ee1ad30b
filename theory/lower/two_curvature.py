"""The two-curvature heterogeneous instances and their exact value (derived here).

Instance (one dimension, ``sigma = 0``, ``F0 = 0``). For ``K = 2j`` workers, ``j`` workers
have ``f_A`` and ``j`` have ``f_B``; for ``K = 2j + 1`` one more worker has ``f_N``:

    f_A'(x) = L x + c,    f_B'(x) = b x - c,    f_N'(x) = m x          for |x| <= R,

with ``-L < b <= L``, ``m = (L + b)/2``, ``c > 0``, and for ``|x| > R`` every worker's
gradient continues with slope ``m`` (so each gradient is continuous and piecewise linear
with slopes in ``[-L, L]``: every ``f_k`` is ``L``-smooth and bounded below). The sum of the
gradients is ``K m x`` everywhere, so ``f(x) = m x^2/2``, ``f_star = 0 = f(0)``, and with
``x_0 = 0`` the initial gap is 0. ``||f_A' - f'||`` and ``||f_B' - f'||`` both equal
``|(L - b) x/2 + c|`` inside and keep the value at ``x = +-R`` outside, and ``f_N' = f'``, so
the heterogeneity ``(1/K) sum_k ||f_k'(x) - f'(x)||^2 <= zeta^2`` holds for every ``x`` when
``(2j/K) ((L - b) R/2 + c)^2 <= zeta^2``. The instance is in the class of A1 (L-smooth),
A2 (noise variance <= sigma^2, any sigma >= 0), A3 (heterogeneity <= zeta^2) and A4 (lower
bounded, gap <= F0, any F0 >= 0) for every ``sigma`` and ``F0``.

Exact value. Started at 0, every iterate of Local SGD / PALSGD (independent or shared coins;
outer averaging, SGD with momentum or Nesterov) is ``c`` times the iterate of the ``c = 1``
run, and as long as every worker stays in ``[-R, R]`` each step is affine in the state. Per
round a worker ends at ``A z + B`` with ``(A, B)`` depending on the coins only: with
independent coins each worker's own, independent of the others' given ``z``; with shared
coins one path for every worker, so the groups' ``(A, B)`` are moved together
(:func:`_shared_mean_moments`). Either way the moments ``E z^2, E z`` and the per-step
``E xbar_t^2`` follow an exact recursion over the rounds (:func:`unit_value`). The region ``R`` is the largest
``|x|`` any worker or anchor reaches on any coin path (interval propagation; exact for
``p = 0``), scaled by ``c``; ``c`` is then the largest value the heterogeneity constraint
allows. The value

    (1/T) sum_{t<T} E||grad f(xbar_t)||^2 = c^2 (1/T) sum_t m^2 E ubar_t^2

is exact on an instance of the class, so it is a lower bound on the worst case over the
class at the same ``(alpha, K, H, T, L, zeta, p, eta, gamma, mu)``. The registered bound
(:mod:`theory.lower.hetero`) takes the largest value over a fixed grid of ``b`` (each grid
point is an instance, so the maximum is still a lower bound). At ``H = 1`` and ``p = 0`` the average follows gradient
descent on ``f`` from its minimiser and the value is 0: heterogeneity costs nothing there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.algorithm import pull_coefficient
from theory.lower.region import MAX_COIN_STEPS, no_coin_path, reach_history, sync_maps

__all__ = [
    "COINS",
    "MEASURED",
    "HeteroInstance",
    "horizons",
    "instance_value",
    "unit_value",
]


@dataclass(frozen=True)
class HeteroInstance:
    """The instance of the module docstring at one ``b``: ``c``, ``R`` and its exact value."""

    L: float
    b: float
    K: int
    c: float
    R: float
    value: float


def _groups(K: int, L: float, b: float) -> list[tuple[float, float, float]]:
    """``(weight n_g/K, curvature, sign of the linear term)`` of each worker group."""
    j = K // 2
    out = [(j / K, L, 1.0), (j / K, b, -1.0)]
    if K % 2:
        out.append((1.0 / K, 0.5 * (L + b), 0.0))
    return out


def _worker_moments(
    h: float, s: float, n: int, alpha: float, p: float, eta: float
) -> tuple[np.ndarray, ...]:
    """Moments of one worker's ``x_t = A_t z + B_t`` over its coins, ``t = 0..n``.

    Returns ``(EA, EB, EA2, EAB, EB2)``, each of length ``n + 1``. A gradient step (prob.
    ``1 - p``) is ``x <- x - (alpha/(1-p)) (h x + s)``; a pull (prob. ``p``) is
    ``x <- x - (alpha eta/p)(x - z)``: both map ``(A, B)`` to ``(u A + v, u B + w)``.
    """
    if p == 0:  # no coins: x_t = q^t z + b_t exactly
        qt, bt = no_coin_path(h, s, n, alpha)
        with np.errstate(over="ignore", invalid="ignore"):
            return qt, bt, qt * qt, qt * bt, bt * bt
    u0, w0 = 1.0 - alpha * h / (1.0 - p), -alpha * s / (1.0 - p)
    beta = pull_coefficient(alpha, eta, p)
    branches = ((1.0 - p, u0, 0.0, w0), (p, 1.0 - beta, beta, 0.0))
    out = np.zeros((5, n + 1))
    ea, eb, ea2, eab, eb2 = 1.0, 0.0, 1.0, 0.0, 0.0  # at t = 0 (x = z)
    out[:, 0] = (ea, eb, ea2, eab, eb2)
    for t in range(n):
        new = [0.0] * 5
        for prob, u, v, w in branches:
            new[0] += prob * (u * ea + v)
            new[1] += prob * (u * eb + w)
            new[2] += prob * (u * u * ea2 + 2 * u * v * ea + v * v)
            new[3] += prob * (u * u * eab + u * w * ea + u * v * eb + v * w)
            new[4] += prob * (u * u * eb2 + 2 * u * w * eb + w * w)
        ea, eb, ea2, eab, eb2 = new
        out[:, t + 1] = new
    return tuple(out)


def _mean_moments(groups, K: int, per_group) -> tuple[np.ndarray, ...]:
    """Moments of ``Abar_t, Bbar_t`` (the workers' mean) from each group's worker moments:
    means weighted by the group sizes, (co)variances by ``weight/K`` (independent workers)."""
    w = np.array([g[0] for g in groups])
    P = np.array(per_group)  # (groups, 5, n + 1): EA, EB, EA2, EAB, EB2
    eA, eB = np.tensordot(w, P[:, 0], 1), np.tensordot(w, P[:, 1], 1)
    cov = np.tensordot(
        w / K, P[:, 2:] - np.stack([P[:, 0] ** 2, P[:, 0] * P[:, 1], P[:, 1] ** 2], 1), 1
    )
    return eA, eB, eA**2 + cov[0], eA * eB + cov[1], eB**2 + cov[2]


def _shared_mean_moments(groups, n: int, alpha: float, p: float, eta: float):
    """Moments of ``Abar_t, Bbar_t`` (the workers' mean) with shared coins, ``t = 0..n``.

    One coin per step for every worker: the vector ``v = (A_1..A_G, B_1..B_G, 1)`` of the
    groups' coefficients moves by one of two linear maps (gradient step with probability
    ``1 - p``, pull with probability ``p``), so ``S = E v v^T`` follows
    ``S <- (1 - p) M_0 S M_0^T + p M_1 S M_1^T`` exactly; ``Abar = w . A``, ``Bbar = w . B``.
    """
    G = len(groups)
    w = np.array([g[0] for g in groups])
    beta = pull_coefficient(alpha, eta, p)
    maps = []
    for gradient in (True, False):
        M = np.zeros((2 * G + 1, 2 * G + 1))
        M[-1, -1] = 1.0
        for i, (_, h, s) in enumerate(groups):
            if gradient:  # x <- (1 - alpha h/(1-p)) x - alpha s/(1-p)
                u = 1.0 - alpha * h / (1.0 - p)
                M[i, i], M[G + i, G + i], M[G + i, -1] = u, u, -alpha * s / (1.0 - p)
            else:  # x <- (1 - beta) x + beta z: A gains beta
                M[i, i], M[i, -1], M[G + i, G + i] = 1.0 - beta, beta, 1.0 - beta
        maps.append(M)
    a = np.concatenate([w, np.zeros(G), [0.0]])
    b = np.concatenate([np.zeros(G), w, [0.0]])
    S = np.zeros((2 * G + 1, 2 * G + 1))
    S[:G, :G] = S[:G, -1] = S[-1, :G] = S[-1, -1] = 1.0  # A = 1, B = 0 at t = 0
    out = np.zeros((5, n + 1))
    for t in range(n + 1):
        Sa, Sb = S @ a, S @ b
        out[:, t] = (Sa[-1], Sb[-1], a @ Sa, a @ Sb, b @ Sb)
        if t < n:
            with np.errstate(over="ignore", invalid="ignore"):
                S = (1.0 - p) * maps[0] @ S @ maps[0].T + p * maps[1] @ S @ maps[1].T
    return tuple(out)


def _round_lengths(H: int, T: int) -> list[tuple[int, int]]:
    """``(rounds, steps per round)``: the full rounds, then the final partial one."""
    return ([(T // H, H)] if T >= H else []) + ([(1, T % H)] if T % H else [])


def _round_matrix(moments, n: int, Gs, count: str) -> np.ndarray:
    """The 11 x 11 map of ``(vec E s s^T, sum, 1)`` over one round of ``n`` steps.

    ``s = (z, buf, 1)`` goes through the sync. ``sum`` gains ``sum_{t<n} E ubar_t^2``
    (``count = "iterates"``), ``E z^2`` at the round's start (``"anchor"``, a full round),
    or nothing (``"none"``, the final partial round when anchors are measured).
    """
    eA, eB, eA2, eAB, eB2 = moments
    C = np.array([[1, eA[n], eB[n]], [eA[n], eA2[n], eAB[n]], [eB[n], eAB[n], eB2[n]]])
    Phi = np.zeros((11, 11))
    Phi[:9, :9] = sum(C[i, j] * np.kron(Gs[i], Gs[j]) for i in range(3) for j in range(3))
    Phi[9, 9] = Phi[10, 10] = 1.0
    if count == "anchor":
        Phi[9, 0] = 1.0
    elif count == "iterates":
        Phi[9, 0] = np.sum(eA2[:n])  # E z^2 = M[0, 0]
        Phi[9, 2] = Phi[9, 6] = np.sum(eAB[:n])  # E z = M[0, 2] = M[2, 0]
        Phi[9, 10] = np.sum(eB2[:n])
    return Phi


MEASURED = ("iterates", "anchors")
#: the coin modes: each worker its own coin, or one coin for every worker (the authors' code)
COINS = ("independent", "shared")


def unit_value(
    *, alpha: float, L: float, b: float, K: int, H: int, T: int, p: float = 0.0,
    eta: float = 0.0, outer: str = "average", gamma: float = 1.0, mu: float = 0.0,
    measured: str = "iterates", reach: float | None = None, coins: str = "independent",
) -> tuple[float, float]:  # fmt: skip
    """``(value, U)`` for the ``c = 1`` run, ``U`` its reach (``reach``: a known bound on it,
    e.g. from the history of a longer run, :func:`reach_history`). ``value`` is
    ``(1/T) sum_{t<T} m^2 E ubar_t^2`` (``measured = "iterates"``) or, over the anchors of
    the ``R = T // H`` full rounds, ``(1/R) sum_{r<R} m^2 E z_r^2`` (``"anchors"``).

    Per round the second moments of ``s = (z, buf, 1)`` map linearly, so the full rounds
    are one matrix power. ``coins``: ``"independent"`` or ``"shared"`` (:data:`COINS`).
    """
    check_choice("measured", measured, MEASURED)
    shared = check_choice("coins", coins, COINS) == "shared" and p > 0
    groups = _groups(K, L, b)
    lengths = _round_lengths(H, T)
    if reach is None:
        reach = float(reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu)[-1])
    if not math.isfinite(reach):  # a diverging run leaves every region: no instance here
        return math.inf, reach
    Gs = sync_maps(outer, gamma, mu)
    y = np.zeros(11)
    y[8] = y[10] = 1.0  # M = E s s^T with s = (0, 0, 1); the running sum 0
    for rounds, n in lengths:
        count = "iterates" if measured == "iterates" else "anchor" if n == H else "none"
        if shared:
            mean = _shared_mean_moments(groups, n, alpha, p, eta)
        else:
            per = [_worker_moments(h, s, n, alpha, p, eta) for _, h, s in groups]
            mean = _mean_moments(groups, K, per)
        Phi = _round_matrix(mean, n, Gs, count)
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.linalg.matrix_power(Phi, rounds) @ y
    denom = T if measured == "iterates" else T // H
    # m^2 y / denom as products (never a power): a product beyond the float range is inf,
    # never an OverflowError; y is the smaller factor, so it goes first
    m = 0.5 * (L + b)
    value = float(y[9]) / denom * m * m if denom else 0.0
    return value, reach


def instance_value(
    *, alpha: float, L: float, zeta: float, K: int, H: int, T: int, b: float,
    p: float = 0.0, eta: float = 0.0, outer: str = "average", gamma: float = 1.0,
    mu: float = 0.0, horizon: int | None = None, measured: str = "iterates",
    reach: float | None = None, coins: str = "independent", charge_region: bool = True,
) -> HeteroInstance:  # fmt: skip
    """The instance at curvature ``b`` (``-L < b <= L``) with the largest ``c`` allowed.

    ``horizon`` ``T' <= T`` (default ``T``): the region covers the first ``T'`` steps only,
    and the value counts only them, ``(1/T) sum_{t<T'}``: the later terms are ``>= 0``, so
    it is still a lower bound on the average over ``T`` steps. With coins the region must
    hold for every coin path, which widens with the horizon; a shorter one can give more.
    ``charge_region = False`` drops the region's term ``(L - b) R/2`` from the heterogeneity
    budget: the instance then leaves the class (only a negative control of the verifier
    asks for it, :mod:`theory.verify.lower`).
    """
    if not -L < b <= L:
        raise UserInputError(f"b = {b} must lie in (-L, L] = (-{L}, {L}]")
    Tp = T if horizon is None else min(int(horizon), T)
    if K < 2 or zeta == 0:
        return HeteroInstance(L, b, K, 0.0, 0.0, 0.0)
    unit, U = unit_value(
        alpha=alpha, L=L, b=b, K=K, H=H, T=Tp, p=p, eta=eta, outer=outer, gamma=gamma, mu=mu,
        measured=measured, reach=reach, coins=coins,
    )  # fmt: skip
    if not (math.isfinite(U) and math.isfinite(unit)):
        return HeteroInstance(L, b, K, 0.0, math.inf, 0.0)
    c = zeta * math.sqrt(K / (2 * (K // 2))) / (1.0 + charge_region * 0.5 * (L - b) * U)
    share = Tp / T if measured == "iterates" else (Tp // H) / max(T // H, 1)
    return HeteroInstance(L, b, K, c, c * U, c * c * unit * share)


def horizons(H: int, T: int, p: float) -> list[int]:
    """``T`` without coins; with coins ``H 2^k < T`` and then ``T`` (see
    :func:`instance_value`), shortest first, none beyond :data:`MAX_COIN_STEPS` (then
    that many steps, part of the first round)."""
    if p == 0:
        return [T]
    out, n = [], H
    while n < T:
        out.append(n)
        n *= 2
    out.append(T)
    short = [h for h in out if h <= MAX_COIN_STEPS]
    return short or [MAX_COIN_STEPS]  # H beyond the cap: part of the first round

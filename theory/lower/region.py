"""The region of the heterogeneity lower bound: how far any worker or anchor can reach.

The instances of :mod:`theory.lower.hetero` are affine only inside ``[-R, R]``, so ``R`` must
contain every iterate of every coin path of the ``c = 1`` run. Without coins there is one
path: it is followed round by round in closed form, and once it has settled (or after
:data:`MAX_ROUNDS` rounds) the rest is bounded by the contraction of the round map
(:func:`tail_reach`). With coins every step takes the hull of the two branches' images of
an interval (:func:`reach_history`), for at most :data:`MAX_COIN_STEPS` steps.

``groups`` is a list of ``(weight, curvature, sign of the linear term)``; ``lengths`` a list
of ``(rounds, steps per round)``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from theory.algorithm import outer_step, pull_coefficient

__all__ = [
    "MAX_COIN_STEPS", "MAX_ROUNDS", "no_coin_path", "reach_history", "sync_maps", "tail_reach",
]  # fmt: skip


def _filled(hist: list[float], total: int) -> np.ndarray:
    """``hist`` (cumulative reach per round) continued to ``total`` rounds: after a fixed
    point every later round repeats the last one."""
    last = hist[-1] if hist else 0.0
    return np.array(hist + [last] * (total - len(hist)))


#: rounds a deterministic path is followed before its tail is bounded in closed form
MAX_ROUNDS = 4096
#: steps of interval propagation at most (with coins), the longest horizon tried
MAX_COIN_STEPS = 2**15


def no_coin_path(h: float, s: float, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """``(q^t, b_t)``, ``t = 0..n``: without coins a worker of curvature ``h`` and linear term
    ``s`` started at ``z`` is at ``x_t = q^t z + b_t``, ``q = 1 - alpha h``."""
    t = np.arange(n + 1)
    q = 1.0 - alpha * h
    with np.errstate(over="ignore", invalid="ignore"):  # divergence: inf, the reach says so
        qt = q**t
        return qt, -alpha * s * (t if q == 1 else (1 - qt) / (1 - q))


def sync_maps(outer: str, gamma: float, mu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``G0, G1, G2`` with ``(z', buf', 1) = (G0 + Abar G1 + Bbar G2) (z, buf, 1)`` when the
    workers' mean ends the round at ``Abar z + Bbar`` (:func:`theory.algorithm.outer_step`)."""
    e = np.eye(3)
    zero = np.zeros(3)
    parts = [(e[0], e[1], e[0]), (zero, zero, -e[0]), (zero, zero, -e[2])]
    maps = []
    for i, (z, buf, delta) in enumerate(parts):
        z2, b2 = outer_step(z, buf, delta, outer=outer, gamma=gamma, mu=mu)
        maps.append(np.stack([z2, b2, e[2] if i == 0 else zero]))
    return maps[0], maps[1], maps[2]


def _round_affine(groups, n, alpha, outer, gamma, mu):
    """Without coins one round is affine: ``(z', buf') = G (z, buf) + g``; and each group's
    path from ``z`` is ``x_t = q^t z + b_t`` (``t = 1..n``). Returns ``G, g, paths``."""
    paths = [tuple(a[1:] for a in no_coin_path(h, s, n, alpha)) for _, h, s in groups]
    a_end = sum(w * qt[-1] for (w, _, _), (qt, _) in zip(groups, paths, strict=True))
    b_end = sum(w * bt[-1] for (w, _, _), (_, bt) in zip(groups, paths, strict=True))
    G0, G1, G2 = sync_maps(outer, gamma, mu)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging path: inf or nan
        M = G0 + a_end * G1 + b_end * G2
    return M[:2, :2], M[:2, 2], paths


def _contraction(G, g, buf0: float):
    """``(s*, C, reduce)`` of the round map ``s -> G s + g``: its fixed point, a ``C >=
    max_k ||G^k||`` and whether ``buf`` is dropped (no momentum: it stays at ``buf0 = 0``);
    ``None`` when it does not contract (or is not finite, or contracts too slowly to tell)."""
    if not (np.all(np.isfinite(G)) and np.all(np.isfinite(g))):
        return None
    reduce = G[1, 0] == 0 and G[1, 1] == 1 and g[1] == 0 and buf0 == 0
    if reduce:
        G, g = G[:1, :1], g[:1]
    if max(abs(np.linalg.eigvals(G))) >= 1.0:
        return None
    star = np.linalg.solve(np.eye(len(g)) - G, g)
    if reduce:
        return star, 1.0, reduce  # |G| < 1: every power is a contraction
    # max_k ||G^k||_F (>= the spectral norm) over the powers until they are small
    C = _power_bound_of(*(float(x) for x in np.asarray(G, dtype=float).ravel()))
    return None if C is None else (star, C, reduce)


@functools.lru_cache(maxsize=1024)
def _power_bound_of(a: float, b: float, c: float, d: float) -> float | None:
    """:func:`_power_bound` of ``[[a, b], [c, d]]``, remembered (the runs of one design
    with other starts or offsets share their round map's linear part)."""
    return _power_bound(np.array([[a, b], [c, d]]))


def _power_bound(G: np.ndarray, small: float = 1e-3, limit: int = 10**6) -> float | None:
    """``max(1, max_{1 <= k <= k*} ||G^k||_F)``, ``k*`` the first power whose norm is below
    ``small`` (every later power is then below that maximum: the norm is
    submultiplicative); ``None`` when no power up to ``limit`` is. The powers are built in
    blocks that double (``G^{n+1..2n} = G^n G^{1..n}``, entrywise on the four entries), so
    a slow contraction costs ``log2(k*)`` vector operations rather than ``k*`` steps."""
    (a, b), (c, d) = np.asarray(G, dtype=float).tolist()
    E = np.empty((4, 1 << (limit - 1).bit_length()))  # entries (0,0), (0,1), (1,0), (1,1)
    E[:, 0] = a, b, c, d
    n, C = 1, 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        while True:
            lo = n // 2 if n > 1 else 0
            blk = E[:, lo:n]
            norms = np.sqrt(np.sum(blk * blk, axis=0))
            below = np.flatnonzero(norms < small)
            if below.size:
                return max(C, float(norms[: below[0] + 1].max())) if lo + below[0] < limit else None
            if not np.all(np.isfinite(norms)) or n >= limit:
                return None
            C = max(C, float(norms.max()))
            p, q, r, t = E[:, n - 1]  # G^n times G^1 .. G^n
            P = E[:, :n]
            E[0, n : 2 * n] = p * P[0] + q * P[2]
            E[1, n : 2 * n] = p * P[1] + q * P[3]
            E[2, n : 2 * n] = r * P[0] + t * P[2]
            E[3, n : 2 * n] = r * P[1] + t * P[3]
            n *= 2


def tail_reach(fixed, paths, state) -> float:
    """A bound on ``|x|`` over every later round of the same length, from ``state``.

    ``fixed = (s*, C, reduce)`` of :func:`_contraction` (``None``: no bound, ``inf``). The
    state tends to ``s*`` with ``||s_r - s*|| <= C ||state - s*||``, so every later anchor has
    ``|z| <= Z = |z*| + C ||state - s*||`` and every iterate ``|q^t| Z + |b_t|``.
    """
    if fixed is None:
        return math.inf
    star, C, reduce = fixed
    st = np.asarray(state)[: len(star)]
    Z = abs(float(star[0])) + C * float(np.linalg.norm(st - star))
    inner = max(float(np.max(np.abs(qt) * Z + np.abs(bt))) for qt, bt in paths)
    return max(Z, inner)


def _inner_reach(paths, zlo: float, zhi: float) -> float:
    """The largest ``|q^t z + b_t|`` over every path and every anchor ``z`` in
    ``[zlo, zhi]``: convex in ``z``, so attained at an end (``inf`` if not finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        vals = [float(np.max(np.abs(qt * z + bt))) for qt, bt in paths for z in (zlo, zhi)]
    return max(vals) if all(math.isfinite(v) for v in vals) else math.inf


#: rounds of one length followed at once (:func:`_reach_points`)
_BLOCK = 64


def _block_maps(G: np.ndarray, g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``P[j] = G^(j+1)`` and ``S[j] = sum_{i<=j} G^i g``, ``j < n``: ``j + 1`` rounds after
    the state ``s`` the state is ``P[j] s + S[j]``."""
    P, S = np.empty((n, 2, 2)), np.empty((n, 2))
    P[0], S[0] = G, g
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(1, n):
            P[j], S[j] = G @ P[j - 1], G @ S[j - 1] + g
    return P, S


def _reach_points(groups, lengths, alpha, outer, gamma, mu, start=0.0) -> np.ndarray:
    """:func:`reach_history` for ``p = 0`` (one entry, the whole run): one deterministic
    path, each round in closed form; after :data:`MAX_ROUNDS` rounds of one length, or
    once the path has settled, the rest of them are bounded by :func:`tail_reach`.

    The workers' reach within a round is convex in the round's anchor, so over the rounds
    of one length it is the larger of its values at the least and the largest anchor
    (:func:`_inner_reach`); the anchors are followed :data:`_BLOCK` rounds at a time
    (:func:`_block_maps`), the paths evaluated at their ends only."""
    state = np.array([float(start), 0.0])  # (z, buf)
    reach = abs(float(start))
    for rounds, n in lengths:
        G, g, paths = _round_affine(groups, n, alpha, outer, gamma, mu)
        fixed = _contraction(G, g, 0.0) if rounds > 64 else None
        P, S = _block_maps(G, g, min(_BLOCK, rounds))
        lo = hi = float(state[0])  # the anchors that start a round of this length
        done = 0
        while done < rounds:
            k = min(_BLOCK, rounds - done)
            with np.errstate(over="ignore", invalid="ignore"):
                states = P[:k] @ state + S[:k]  # after rounds done + 1 .. done + k
            if not np.all(np.isfinite(states)):
                return np.array([math.inf])
            starts = states[:-1, 0]
            lo = min(lo, float(state[0]), float(starts.min()) if k > 1 else lo)
            hi = max(hi, float(state[0]), float(starts.max()) if k > 1 else hi)
            reach = max(reach, float(np.max(np.abs(states[:, 0]))))
            state, done = states[-1], done + k
            if done < rounds and (done >= MAX_ROUNDS or done % _BLOCK == 0):
                reach = max(reach, _inner_reach(paths, lo, hi))
                if not math.isfinite(reach):
                    return np.array([math.inf])
                tail = tail_reach(fixed, paths, state)
                if done >= MAX_ROUNDS or tail <= reach * (1 + 1e-9):
                    # the bound covers the remaining full rounds and the final partial one:
                    # its anchor obeys the same |z| <= Z, its path is a prefix of a round's
                    return np.array([max(reach, tail)])
        reach = max(reach, _inner_reach(paths, lo, hi))
        if not math.isfinite(reach):
            return np.array([math.inf])
    return np.array([reach])


def _sync_box(box, xlo, xhi, outer, gamma, mu):
    """The box of ``(z', buf')`` over ``z, buf`` in ``box`` and ``xbar`` in ``[xlo, xhi]``.

    The outer step is linear in ``(z, buf, xbar)``, so the image of the box is the convex
    hull of the images of its corners.
    """
    zlo, zhi, blo, bhi = box
    if outer == "average" or (gamma == 1.0 and mu == 0.0):
        return xlo, xhi, blo, bhi
    corners = [
        outer_step(z, bf, z - x, outer=outer, gamma=gamma, mu=mu)
        for z in (zlo, zhi) for bf in (blo, bhi) for x in (xlo, xhi)
    ]  # fmt: skip
    zs, bs = [c[0] for c in corners], [c[1] for c in corners]
    return min(zs), max(zs), min(bs), max(bs)


def _interval_steps(
    lo: float, hi: float, n: int, q: float, off: float, keep: float, pull_lo: float,
    pull_hi: float, reach: float,
) -> tuple[float, float, float]:  # fmt: skip
    """``n`` steps of interval propagation of one worker: each step the hull of the gradient
    branch ``q x + off`` and the pull ``keep x + beta z`` (``pull_lo``, ``pull_hi``: ``beta``
    times the anchor's interval) of ``[lo, hi]``; returns the interval and the reach.

    The image of ``[lo, hi]`` under ``x -> c x`` is ``[c lo, c hi]`` for ``c >= 0`` and
    swapped for ``c < 0`` (1 - beta < 0 when the pull overshoots, ``alpha eta/p > 1``, and
    then ``lo`` maps to the top); floating-point products and sums are monotone, so this is
    the ordering ``sorted`` gave, the same values without sorting (the hot loop of ``palsgd
    check``; tests/test_lower_region_fast.py compares it with the plain loop).
    """
    up_q, up_keep = q >= 0, keep >= 0
    for _ in range(n):
        if up_q:
            g0, g1 = q * lo + off, q * hi + off
        else:
            g0, g1 = q * hi + off, q * lo + off
        if up_keep:
            x0, x1 = keep * lo + pull_lo, keep * hi + pull_hi
        else:
            x0, x1 = keep * hi + pull_lo, keep * lo + pull_hi
        lo = x0 if x0 < g0 else g0  # min(g0, x0), max(g1, x1), NaN included
        hi = x1 if x1 > g1 else g1
        a, b = abs(lo), abs(hi)
        if a > reach:
            reach = a
        if b > reach:
            reach = b
    return lo, hi, reach


def reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu, start=0.0) -> np.ndarray:
    """After each round, the largest ``|x|`` any worker or the anchor has reached so far on
    any coin path of the ``c = 1`` run (one entry per round, the partial one included;
    without coins one entry, for the whole run).

    Computed once per set of arguments (the instances of every lower bound at one
    configuration share it; ``palsgd check`` asks for them beside every upper bound); the
    caller gets its own copy.

    ``p = 0``: the one path, exactly. ``p > 0``: interval propagation, each step the hull of
    the gradient branch's and the pull branch's images of the current interval (the pull
    mixes with the anchor's interval, with either sign of ``1 - alpha eta/p``), and at each
    sync the box of :func:`_sync_box`: every coin path's iterates lie inside.
    ``start``: the first anchor (0 for the instances of :mod:`theory.lower.hetero`; the
    instances started away from the optimum of :mod:`theory.verify.joint` set it).
    """
    args = (groups, lengths, alpha, p, eta, outer, gamma, mu, start)
    try:
        # the types too: equal values of different types (np.float32, float) may compute
        # differently
        key = tuple(map(_typed, args))
        hash(key)
    except TypeError:  # an unhashable argument (an array): computed, not cached
        return _reach_history(*args)
    hist = _REACH_CACHE.get(key)
    if hist is None:
        hist = _reach_history(*args)
        hist.setflags(write=False)
        if len(_REACH_CACHE) >= _REACH_CACHE_SIZE:
            _REACH_CACHE.pop(next(iter(_REACH_CACHE)))  # the oldest entry
        _REACH_CACHE[key] = hist
    return hist.copy()


#: reach histories computed in this process, by their typed arguments (oldest first)
_REACH_CACHE: dict[tuple, np.ndarray] = {}
_REACH_CACHE_SIZE = 512


def _typed(x: Any) -> Any:
    """A hashable key of ``x`` that tells types apart (nested lists and tuples as tuples)."""
    if isinstance(x, (list, tuple)):
        return tuple(map(_typed, x))
    return (type(x), x)


def _reach_history(groups, lengths, alpha, p, eta, outer, gamma, mu, start) -> np.ndarray:
    """:func:`reach_history`, computed."""
    if p == 0:
        return _reach_points(groups, lengths, alpha, outer, gamma, mu, start)
    beta = pull_coefficient(alpha, eta, p)
    box = (float(start), float(start), 0.0, 0.0)  # z and buf intervals
    reach, hist = abs(float(start)), []
    # per group: the gradient branch x -> q x + off and the pull's factor 1 - beta on x
    maps = [(1.0 - alpha * h / (1.0 - p), -alpha * s / (1.0 - p), 1 - beta) for _, h, s in groups]
    for k, (rounds, n) in enumerate(lengths):
        for _ in range(rounds):
            zlo, zhi = box[0], box[1]
            ends = []
            for q, off, keep in maps:
                lo, hi, reach = _interval_steps(
                    zlo, zhi, n, q, off, keep, beta * zlo, beta * zhi, reach
                )
                ends.append((lo, hi))
            xlo = sum(w * e[0] for (w, _, _), e in zip(groups, ends, strict=True))
            xhi = sum(w * e[1] for (w, _, _), e in zip(groups, ends, strict=True))
            new = _sync_box(box, xlo, xhi, outer, gamma, mu)
            reach = max(reach, abs(new[0]), abs(new[1])) if math.isfinite(reach) else math.inf
            hist.append(reach)
            if new == box or not math.isfinite(reach):
                break
            box = new
        hist = list(_filled(hist, sum(r for r, _ in lengths[: k + 1])))
    return np.array(hist)

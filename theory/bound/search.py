"""The vectorised searches behind the bounds' numerics, free of any bound.

Each search takes a predicate or objective that evaluates a whole grid of candidates at
once (a trailing array axis after the broadcast shape of the inputs), so a search costs
about ten calls instead of hundreds of scalar calls. Used by
:class:`theory.bound.numeric.CompiledBound`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping

import numpy as np

__all__ = [
    "GRID",
    "ext",
    "first_true_count",
    "largest_feasible",
    "largest_true_integer",
    "last_true_int",
    "log_minimiser",
    "shape_of",
]

#: candidates per round of the vectorised searches
GRID = 64

Pred = Callable[[np.ndarray], np.ndarray]


def shape_of(arr: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    """The broadcast shape of the arrays (``()`` for none)."""
    return np.broadcast_shapes(*(a.shape for a in arr.values())) if arr else ()


def ext(arr: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array with a trailing axis of length 1 (room for a candidate grid)."""
    return {k: v[..., None] for k, v in arr.items()}


def _log_grid(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """``n`` points strictly inside ``[log lo, log hi]`` (given as logs), trailing axis."""
    j = np.arange(1, n + 1) / (n + 1)
    return lo[..., None] + (hi - lo)[..., None] * j


def _pick(g: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``g[..., k]`` for an index array ``k`` of the leading shape."""
    return np.take_along_axis(g, k[..., None], -1)[..., 0]


def last_true_int(pred: Pred, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Largest integer in ``[lo, hi)`` with ``pred`` true, for ``pred`` true then false.

    ``pred(lo)`` is taken as true and ``pred(hi)`` as false; ``pred`` gets integer
    candidates with a trailing grid axis and returns booleans of that shape.
    """
    lo, hi = lo.copy(), hi.copy()
    while True:
        gap = hi - lo > 1
        if not gap.any():
            return lo
        width = np.where(gap, hi - lo, 2.0)
        j = np.arange(1, GRID + 1) / (GRID + 1)
        cand = np.clip(lo[..., None] + np.ceil(width[..., None] * j), lo[..., None] + 1,
                       hi[..., None] - 1)  # fmt: skip
        cand = np.where(gap[..., None], cand, lo[..., None])
        ok = pred(cand) & gap[..., None]
        lo = np.maximum(lo, np.max(np.where(ok, cand, -np.inf), axis=-1))
        hi = np.minimum(hi, np.min(np.where(~ok & gap[..., None], cand, np.inf), axis=-1))


def largest_true_integer(pred: Pred, shape: tuple[int, ...], h_max: float) -> np.ndarray:
    """Largest integer ``h`` in ``[1, h_max]`` with ``pred(h)`` (pred monotone: true then false).

    NaN where ``pred(1)`` is false; ``h_max`` where ``pred(h_max)`` is true. ``pred`` takes
    candidates with a trailing grid axis: one call on the powers of two, then the refinement.
    """
    n = max(1, int(math.ceil(math.log2(h_max))) + 1)
    cand = np.minimum(2.0 ** np.arange(n), h_max)
    cand = np.append(cand, h_max)
    okc = pred(np.broadcast_to(cand, (*shape, cand.size)).copy())
    ok1, ok_top = okc[..., 0], okc[..., -1]
    k = np.sum(np.cumprod(okc, axis=-1), axis=-1)  # leading true candidates
    grid = np.broadcast_to(cand, okc.shape)
    lo = np.where(ok1 & ~ok_top, _pick(grid, np.maximum(k - 1, 0)), 1.0)
    hi = np.where(ok1 & ~ok_top, _pick(grid, np.minimum(k, cand.size - 1)), 1.0)
    best = last_true_int(pred, lo, hi)
    best = np.where(ok_top, h_max, best)
    return np.where(ok1, best, np.nan)


def largest_feasible(ok: Pred, shape: tuple[int, ...]) -> np.ndarray:
    """Largest ``x`` in ``[1e-14, 1e12]`` with ``ok(x)``, for ``ok`` true on ``(0, x_max]``.

    ``inf`` where ``ok(1e12)``, NaN where not ``ok(1e-14)``. Decades, then rounds of log
    grids down to a relative width of about 1e-14; the result is stepped down until ``ok``
    holds at it (``exp(log(x))`` may round above the boundary).
    """
    decades = 10.0 ** np.arange(-14.0, 13.0)  # 1e-14 ... 1e12
    okd = ok(np.broadcast_to(decades, (*shape, decades.size)))
    ok_lo, ok_hi = okd[..., 0], okd[..., -1]
    # last feasible decade (feasible sets are (0, x_max]): bracket [10^i, 10^(i+1)]
    i = np.clip(np.sum(np.cumprod(okd, axis=-1), axis=-1) - 1, 0, decades.size - 2)
    lo, hi = np.log(decades[i]), np.log(decades[i + 1])
    active = ok_lo & ~ok_hi
    for _ in range(12):
        if not active.any():
            break
        g = _log_grid(lo, hi, GRID)
        good = ok(np.exp(g)) & active[..., None]
        k = np.sum(np.cumprod(good, axis=-1), axis=-1)  # feasible prefix length
        new_lo = np.where(k > 0, _pick(g, np.maximum(k - 1, 0)), lo)
        new_hi = np.where(k < GRID, _pick(g, np.minimum(k, GRID - 1)), hi)
        lo, hi = np.where(active, new_lo, lo), np.where(active, new_hi, hi)
        active &= hi - lo > 4 * sys.float_info.epsilon * np.maximum(1.0, np.abs(lo))
    out = np.where(ok_hi, np.inf, np.exp(lo))
    for _ in range(4):
        bad = np.isfinite(out) & ~ok(out[..., None])[..., 0]
        if not bad.any():
            break
        out = np.where(bad, np.nextafter(out, 0.0) * (1 - 2 * sys.float_info.epsilon), out)
    return np.where(ok_lo, out, np.nan)


def log_minimiser(f: Pred, top: np.ndarray, decades: np.ndarray, on_top: np.ndarray) -> np.ndarray:
    """Minimiser of ``f`` (taking logs; unimodal) over ``[top 10^-decades, top]``.

    Rounds of log grids keeping the two cells around the best point, to a relative width of
    about 1e-15; where ``on_top``, the upper end ``top`` is taken when it is no worse.
    """
    b = np.log(top)
    a = b - decades * np.log(10.0)
    for _ in range(14):
        g = np.concatenate([a[..., None], _log_grid(a, b, GRID), b[..., None]], axis=-1)
        j = np.clip(np.argmin(f(g), axis=-1), 1, GRID)
        a, b = _pick(g, j - 1), _pick(g, j + 1)
        if np.all(b - a <= 1e-15 * np.maximum(1.0, np.abs(a))):
            break
    mid = (a + b) / 2
    pair = f(np.stack([mid, np.log(top)], axis=-1))
    return np.where((pair[..., 1] <= pair[..., 0]) & on_top, top, np.exp(mid))


def first_true_count(not_ok: Pred, r_max: np.ndarray) -> np.ndarray:
    """Smallest integer ``r`` in ``[1, r_max]`` with ``not not_ok(r)`` (``not_ok`` true then
    false); ``inf`` where there is none. A doubling grid 1, 2, 4, ... (one call), then integer
    refinement of the bracket."""
    pw = 2.0 ** np.arange(0, 64)
    cand = np.minimum(pw, r_max[..., None])
    bad = not_ok(cand)
    reach = ~bad[..., -1] & (r_max >= 1)
    k = np.sum(np.cumprod(bad, axis=-1), axis=-1)  # leading infeasible candidates
    k = np.minimum(k, pw.size - 1)
    hi = _pick(cand, k)
    lo = np.where(k > 0, _pick(cand, np.maximum(k - 1, 0)), 0.0)
    lo = np.where(reach, lo, 0.0)
    hi = np.where(reach, hi, 1.0)
    last_bad = last_true_int(not_ok, lo, hi)
    return np.where(reach, last_bad + 1, np.inf)

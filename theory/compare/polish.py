"""The tuner's last stage: a continuous polish of the best grid points (Nelder–Mead in logs).

The rounds to a target are integers: the tuner's score is flat on plateaus of equal rounds,
and a window of one round fewer can be thinner than any grid's spacing (first passage under
a Nesterov outer step dips below ``eps`` on needles a few percent wide in ``gamma``; the
sustained passage of a fast map holds from round 2 only on a sliver beside the stability
edge). An outside search of finer grids found such windows where the grid stages had not
(``benchmarks/bench_map_tuning_gap.py``: up to 2x the rounds).

Inside a plateau the values themselves are continuous. The exact engine returns, with every
configuration's rounds, its values ``V_j = E||grad f(z_j)||^2`` of the first rounds
(:func:`theory.compare.scan.first_passage`'s ``values``), and the polish minimises the
score of reaching one round fewer than the cell's best ``r`` for the target, ``t = r - 1``:

* first passage: ``log(min_{1 <= j <= t} V_j / eps)`` (at most 0: reached by round ``t``);
* sustained: ``log(max_{t <= j <= W} V_j / eps)`` over the returned rounds ``W``
  (at most 0: below ``eps`` from round ``t`` as far as they go; the engine's own sustained
  test decides).

Rule, the same in every cell of every method (after the grid stages of
:func:`theory.compare.tune.tune`): for every target whose best takes ``2 .. FEW`` rounds,
from the :data:`STARTS` evaluated configurations of best score (at least
:data:`MIN_SEP` apart in log), a Nelder–Mead search in ``(log alpha, log gamma)``
(``log alpha`` alone without outer rates) within the inner steps evaluated and
``[GAMMA_MIN, GAMMA_MAX]``: at most ``Grid.polish`` steps, each evaluating the reflection,
the expansion and both contractions at once (4 configurations, ``D`` more on a shrink),
until the simplex is smaller than :data:`XTOL` or the best score stalls
(:data:`STALL_STEPS`). A point is evaluated by its values alone (the engine's
:func:`theory.compare.exact.exact_values`, without the passage search: counted in
``Tuned.polished``); one whose score says it reaches the target joins its cell as an
ordinary configuration (exact rounds, the precision guard), and when its exact rounds are
fewer the target moves down with them and the search goes on.

On the held-out problems of the benchmark (seeds 1-3, 864 method-cells per criterion) this
stage took the cells above 1.25x of the outside search from 4 (first passage) and 8
(sustained) to none: PALSGD-Nesterov's 2-round window at ``gamma ~ 0.69-0.76`` (problem 1,
``H = 64``), its 1-round one at ``alpha gamma ~ 0.1``, ``gamma ~ 900`` (problem 2,
``H = 16``) and DiLoCo's sustained 2-round sliver beside the stability edge (problem 2,
``H = 64``, ``gamma ~ 1.1``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from theory.compare.refine import FEW, GAMMA_MAX, GAMMA_MIN, Cell

__all__ = ["STARTS", "MIN_SEP", "score", "starts", "Search", "polish"]

#: searches per target and cell
STARTS = 2
#: the least distance (natural log, max over the coordinates) between two starts
MIN_SEP = 0.5
#: the initial simplex: the start and one step of this (natural log) along each coordinate
INIT_STEP = float(np.log(2.0))
#: a search stops once its simplex is this small (natural log)
XTOL = 1e-3
#: ... or once its best score has fallen by less than ``STALL_REL`` of itself over the last
#: ``STALL_STEPS`` steps (a score within ``NEAR_ZERO`` of the target's is never stalled:
#: a thin window is approached slowly)
STALL_STEPS, STALL_REL, NEAR_ZERO = 8, 0.05, 0.02


def score(V: np.ndarray, t, sustained, eps) -> np.ndarray:
    """``(n,)`` the log score of reaching the target ``eps`` in ``t`` rounds from the
    values ``V`` ``(n, W)`` of rounds ``1 .. W`` (module docstring): at most 0 where reached
    (as far as ``V`` goes); ``inf`` where nothing tells (no value, a blow-up, ``t`` outside
    ``1 .. W``). ``t``, ``sustained``, ``eps``: scalars or ``(n,)``."""
    V = np.asarray(V, dtype=float)
    n, W = V.shape
    t, sus, eps = (np.broadcast_to(np.asarray(x), (n,)) for x in (t, sustained, eps))
    with np.errstate(all="ignore"):
        L = np.log(np.where(np.isfinite(V) | np.isnan(V), V, np.inf) / eps[:, None])
    j = np.arange(1, W + 1)[None, :]  # the round of each column
    first = np.where((j <= t[:, None]) & ~np.isnan(L), L, np.inf).min(axis=1, initial=np.inf)
    later = (j >= t[:, None]) & ~np.isnan(L)  # sustained: rounds t .. W seen
    held = np.where(later, L, -np.inf).max(axis=1, initial=-np.inf)
    held = np.where(later.any(axis=1), held, np.inf)
    out = np.where(sus, held, first)
    return np.where((t >= 1) & (t <= W), out, np.inf)


def starts(c: Cell, col: int, t: int, sustained: bool, eps: float, n: int = STARTS,
           outer: bool = True) -> list[tuple[float, float]]:  # fmt: skip
    """Up to ``n`` evaluated configurations of ``c`` of least finite score for target column
    ``col`` at ``t`` rounds, each at least :data:`MIN_SEP` (log) from those before it."""
    s = np.where(c.ok, score(c.V, t, sustained, eps), np.inf)
    pts: list[tuple[float, float]] = []
    for j in np.argsort(s, kind="stable"):
        if not np.isfinite(s[j]) or len(pts) == n:
            break
        a, g = c.keys[j]
        x = np.log([a, g])
        if all(np.abs(x - np.log(p))[: 2 if outer else 1].max() >= MIN_SEP for p in pts):
            pts.append((a, g))
    return pts


#: ``values(cell (n,), alpha (n,), gamma (n,))`` -> ``(n, W)``: the values of rounds
#: ``1 .. W`` of configurations of the cells (the polish's evaluation)
Values = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class Search:
    """Nelder–Mead searches in lockstep, one per (cell, target column, start), in
    ``D = 2`` (``log alpha, log gamma``) or ``D = 1`` (``log alpha``) coordinates. A point
    is evaluated by its values (``values``); one whose score says it takes fewer rounds is
    added to its cell and evaluated by the tuner (``run``), whose exact rounds decide."""

    def __init__(self, state: list[Cell], run: Callable[[], None], values: Values, *,
                 eps: np.ndarray, T: int, outer: bool) -> None:  # fmt: skip
        self.state, self.run, self.values = state, run, values
        self.eps = np.asarray(eps, dtype=float).reshape(-1)
        self.E, self.T, self.D = self.eps.size, T, 2 if outer else 1
        self.cell: list[int] = []
        self.col: list[int] = []
        self.X = np.zeros((0, self.D + 1, self.D))
        self.lo = np.zeros((0, self.D))
        self.hi = np.zeros((0, self.D))
        self.seen: dict[tuple[int, float, float], np.ndarray] = {}  # values off the cells

    def sustained(self, col: int) -> bool:
        """Whether target column ``col`` is a sustained passage (``T = 2E``: the last ``E``)."""
        return self.T == 2 * self.E and col >= self.E

    def targets(self) -> np.ndarray:
        """``(S,)`` the rounds each search aims at: one fewer than its cell's best (0: none)."""
        best = [c.best(self.T) for c in self.state]
        b = np.array([best[i][col] for i, col in zip(self.cell, self.col, strict=True)])
        return np.where(b >= 2, b - 1, 0)

    def add(self, i: int, col: int, start: tuple[float, float]) -> None:
        c = self.state[i]
        lo = [np.log(min(k[0] for k in c.keys)), np.log(GAMMA_MIN)][: self.D]
        hi = [np.log(max(c.alphas)), np.log(GAMMA_MAX)][: self.D]
        x0 = np.clip(np.log(start)[: self.D], lo, hi)
        simplex = [x0]
        for d in range(self.D):  # one step along each coordinate, inward
            x = x0.copy()
            x[d] += INIT_STEP if x0[d] + INIT_STEP <= hi[d] else -INIT_STEP
            simplex.append(x)
        self.cell.append(i)
        self.col.append(col)
        self.X = np.concatenate([self.X, np.array(simplex)[None]])
        self.lo = np.concatenate([self.lo, np.array(lo)[None]])
        self.hi = np.concatenate([self.hi, np.array(hi)[None]])

    def _key(self, s: int, x: np.ndarray) -> tuple[float, float]:
        a = float(np.exp(x[0]))
        return (a, float(np.exp(x[1]))) if self.D == 2 else (a, self.state[self.cell[s]].gammas[0])

    def _row(self, s: int, k: tuple[float, float]) -> np.ndarray | None:
        c = self.state[self.cell[s]]
        j = c.index.get(k)
        return c.V[j] if j is not None else self.seen.get((self.cell[s], *k))

    def scores(self, who, pts: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The scores at the targets ``t`` ``(S,)`` of the points ``pts`` ``(k, D)`` of the
        searches ``who``; the points whose score is at most 0 go to their cells."""
        keys = [self._key(s, x) for s, x in zip(who, pts, strict=True)]
        new = {(self.cell[s], *k): k for s, k in zip(who, keys, strict=True)
               if self._row(s, k) is None}  # fmt: skip
        if new:
            ci = np.array([i for i, _, _ in new])
            V = self.values(ci, np.array([k[0] for k in new.values()]),
                            np.array([k[1] for k in new.values()]))  # fmt: skip
            self.seen.update(zip(new, V, strict=True))
            for i in ci:
                self.state[i].polished += 1
        who = np.asarray(who, dtype=np.int64)
        col = np.asarray(self.col)[who]
        V = np.stack([self._row(s, k) for s, k in zip(who, keys, strict=True)])
        out = score(V, t[who], (self.T == 2 * self.E) & (col >= self.E), self.eps[col % self.E])
        sent = False
        for s, k in (z for z, f in zip(zip(who, keys, strict=True), out, strict=True) if f <= 0):
            c = self.state[self.cell[s]]
            if k not in c.index:
                c.extra.append(k)
                sent = True
        if sent:
            self.run()
        return out


def polish(state: list[Cell], run: Callable[[], None], values: Values, *, eps: np.ndarray,
           T: int, budget: int, outer: bool) -> int:  # fmt: skip
    """The polish of the module docstring over every cell of ``state`` (``run()``: evaluate
    every cell's pending configurations, storing their rounds and values; ``values``: the
    values of any configurations); the number of searches."""
    eps = np.asarray(eps, dtype=float).reshape(-1)
    sr = Search(state, run, values, eps=eps, T=T, outer=outer)
    for i, c in enumerate(state):
        best = c.best(T)
        for col in range(T):
            r = int(best[col])
            if 2 <= r <= FEW:
                e = eps[col % eps.size]
                for st in starts(c, col, r - 1, sr.sustained(col), e, outer=outer):
                    sr.add(i, col, st)
    S, D = len(sr.cell), sr.D
    if S == 0:
        return 0
    who = np.repeat(np.arange(S), D + 1)
    steps = np.zeros(S, dtype=np.int64)
    alive = np.ones(S, dtype=bool)
    hist = np.full((S, STALL_STEPS + 1), np.inf)  # the best scores of the last steps
    aim = sr.targets()
    while True:
        t = sr.targets()
        hist[t != aim] = np.inf  # a new target: a new history
        aim = t
        F = sr.scores(who, sr.X.reshape(-1, D), t).reshape(S, D + 1)
        order = np.argsort(F, axis=1, kind="stable")
        sr.X = np.take_along_axis(sr.X, order[..., None], axis=1)
        F = np.take_along_axis(F, order, axis=1)
        size = np.abs(sr.X - sr.X[:, :1]).max(axis=(1, 2))
        hist = np.concatenate([hist[:, 1:], F[:, :1]], axis=1)
        with np.errstate(invalid="ignore"):  # inf - inf: no history yet, not stalled
            stalled = (F[:, 0] > NEAR_ZERO) & (hist[:, 0] - F[:, 0] < STALL_REL * hist[:, 0])
        # a best score at most 0 that the exact rounds did not confirm: nothing more to find
        alive &= (steps < budget) & (t >= 1) & (F[:, 0] > 0) & np.isfinite(F[:, 0])
        alive &= (size > XTOL) & ~stalled
        if not alive.any():
            return S
        A = np.flatnonzero(alive)
        _step(sr, A, F, t)
        steps[A] += 1


def _step(sr: Search, A: np.ndarray, F: np.ndarray, t: np.ndarray) -> None:
    """One Nelder–Mead step of the searches ``A`` (vertices sorted by score ``F``): the
    reflection, the expansion and both contractions evaluated at once (one evaluation call
    a step), then a shrink where none is taken."""
    X = sr.X[A]
    lo, hi = sr.lo[A], sr.hi[A]
    Fb, Fsw, Fw = F[A, 0], F[A, -2], F[A, -1]
    xw = X[:, -1]
    cen = X[:, :-1].mean(axis=1)
    xr = np.clip(2 * cen - xw, lo, hi)
    xe = np.clip(3 * cen - 2 * xw, lo, hi)
    xo, xi = (cen + xr) / 2, (cen + xw) / 2  # the outside and inside contractions
    n, D = A.size, X.shape[2]
    f = sr.scores(np.tile(A, 4), np.concatenate([xr, xe, xo, xi]), t).reshape(4, n)
    fr, fe, fo, fi = f
    grow = fr < Fb
    take_r = ~grow & (fr < Fsw)
    out_c = ~grow & ~take_r & (fr < Fw) & (fo <= fr)
    in_c = ~grow & ~take_r & (fr >= Fw) & (fi < Fw)
    new = np.where((grow & (fe < fr))[:, None], xe, xr)
    new = np.where(out_c[:, None], xo, np.where(in_c[:, None], xi, new))
    move = grow | take_r | out_c | in_c
    X[move, -1] = new[move]
    shrink = ~move
    if shrink.any():
        X[shrink, 1:] = (X[shrink, :1] + X[shrink, 1:]) / 2
        sr.scores(np.repeat(A[shrink], D), X[shrink, 1:].reshape(-1, D), t)
    sr.X[A] = X

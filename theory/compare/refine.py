"""The tuner's search along the ``alpha * gamma`` diagonal and around every tied optimum.

Two rules of :func:`theory.compare.tune.tune`, the same in every cell of every method with
outer rates, split out of :mod:`theory.compare.tune`:

* **The diagonal** (:func:`diagonal`). For small inner steps a round of ``H`` local steps
  moves the anchor by about ``alpha * H`` times a gradient, and the outer step scales that by
  ``gamma``: what matters is ``c = alpha * gamma``. At large outer rates the best
  configurations lie on thin diagonals ``alpha * gamma ~ const`` (an outside search found one
  round at ``gamma ~ 256-23,000`` where the axis-aligned grid found two at ``gamma ~ 45``).
  Around each target's optima (up to :data:`SPREAD` of a tie, spread over it) the
  configurations ``(alpha / F, gamma * F)`` and ``(alpha * F, gamma / F)``, ``F`` =
  :data:`DIAGONAL_FACTOR`, are evaluated, and again around every new optimum: the optimum is
  extended along its diagonal until interior there (or ``gamma`` leaves
  ``[GAMMA_MIN, GAMMA_MAX]``, or ``alpha`` passes the top of the grid).
* **Every tied optimum** (:func:`tie_points`): the refinement patch is taken around up to
  :data:`SPREAD` configurations of the tie of optima (not only its middle): the rounds are
  integers, so a wide plateau of equal rounds can hide a narrow window of one round fewer
  (and first passage's transient dips are isolated needles) that only a finer look around
  the whole plateau finds.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DIAGONAL_FACTOR",
    "SPREAD",
    "FEW",
    "GAMMA_MIN",
    "GAMMA_MAX",
    "spread_for",
    "tie_points",
    "diagonal",
    "Cell",
    "argmins",
    "diagonal_step",
    "refine_patch",
]

#: the step along the diagonal: ``gamma`` up (``alpha`` down) by this factor, or the reverse
DIAGONAL_FACTOR = 4.0
#: at most this many configurations of a tie of optima are searched around, spread over it
SPREAD = 4
#: ... where the optimum takes at most this many rounds (a plateau of equal rounds is wide
#: only where they are few, and there a configuration is cheap: its search stops early);
#: above it only the middle of the tie, as before
FEW = 8


def spread_for(rounds: int) -> int:
    """How many tied optima are searched around at an optimum of ``rounds`` rounds."""
    return SPREAD if rounds <= FEW else 1


def tie_points(arg: list[tuple[float, float]], n: int = SPREAD) -> list[tuple[float, float]]:
    """Up to ``n`` of the tied optima ``arg``, evenly spread over their sorted order (the
    middle one, the reported optimum, always among them)."""
    arg = sorted(arg)
    if len(arg) <= n:
        return arg
    if n <= 2:
        return [arg[len(arg) // 2]]
    mid = len(arg) // 2
    pick = {round(i * (len(arg) - 1) / (n - 2)) for i in range(n - 1)} | {mid}
    return [arg[i] for i in sorted(pick)]


def diagonal(
    arg: list[tuple[float, float]],
    rows: dict[float, list[float]],
    top: float,
    g_min: float,
    g_max: float,
    n: int = SPREAD,
) -> list[tuple[float, float]]:
    """The diagonal neighbours ``(a / F, g * F)`` and ``(a * F, g / F)`` of the tie points of
    ``arg``, with those of ``a``'s nearest inner steps below and above in its row (``rows``:
    outer rate -> its sorted inner steps), so that the new row can be refined in ``alpha``;
    only outer rates in ``[g_min, g_max]`` and inner steps at most ``top``."""
    F = DIAGONAL_FACTOR
    out = []
    for a, g in tie_points(arg, n):
        row = rows.get(g, [a])
        i = row.index(a) if a in row else 0
        near = row[max(i - 1, 0) : i + 2]
        for f in (F, 1.0 / F):
            if not g_min <= g * f <= g_max:
                continue
            out += [(x / f, g * f) for x in near if x / f <= top]
    return out


#: the outer rates are extended while the optimum sits on their edge and inside these
GAMMA_MIN, GAMMA_MAX = 2.0**-10, 2.0**14


class Cell:
    """The evaluated configurations of one cell: their ``(alpha, gamma)`` keys, rounds
    ``R`` ``(n, T)`` and diverged flags, and the configurations refused or verified."""

    def __init__(self, alphas: np.ndarray, gammas: np.ndarray) -> None:
        self.alphas, self.gammas = [float(a) for a in alphas], [float(g) for g in gammas]
        self.keys: list[tuple[float, float]] = []
        self.index: dict[tuple[float, float], int] = {}
        self.R = np.zeros((0, 0), dtype=np.int64)
        self.V = np.zeros((0, 0))  # values of the first rounds (NaN: none), for the polish
        self.div = np.zeros(0, dtype=bool)
        self.ok = np.zeros(0, dtype=bool)  # not refused
        self.ext_alpha = 0
        self.extended = 0
        self.verified: set[tuple[float, float]] = set()
        self.extra: list[tuple[float, float]] = []  # refinement points off the product grid
        self.diag_steps = 0
        self.polished = 0  # configurations the polish evaluated by their values alone
        self.probed: set[tuple[float, float]] = set()  # the global probe's configurations
        self.ratio = float(gammas[1] / gammas[0]) if len(gammas) > 1 else 1.0  # rows apart

    def pending(self) -> list[tuple[float, float]]:
        grid = [(a, g) for a in self.alphas for g in self.gammas if (a, g) not in self.index]
        return grid + [
            k for k in dict.fromkeys(self.extra) if k not in self.index and k not in grid
        ]

    def add(
        self, keys: list[tuple[float, float]], R: np.ndarray, div: np.ndarray,
        V: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        for k in keys:
            self.index[k] = len(self.keys)
            self.keys.append(k)
        if V is None:
            V = np.full((len(keys), self.V.shape[1]), np.nan)
        self.V = V if self.R.size == 0 else np.concatenate([self.V, V])
        self.R = R if self.R.size == 0 else np.concatenate([self.R, R])
        self.div = np.concatenate([self.div, div])
        self.ok = np.concatenate([self.ok, np.ones(len(keys), dtype=bool)])

    def refuse(self, k: tuple[float, float]) -> None:
        self.ok[self.index[k]] = False

    def best(self, T: int) -> np.ndarray:
        """``(T,)`` the least rounds per target so far (-1: none)."""
        if self.R.size == 0:
            return np.full(T, -1, dtype=np.int64)
        R = np.where((self.R >= 0) & self.ok[:, None], self.R, np.iinfo(np.int64).max)
        b = R.min(axis=0)
        return np.where(b == np.iinfo(np.int64).max, -1, b)


def argmins(c: Cell, e: int) -> list[tuple[float, float]]:
    """The configurations attaining the least rounds for target ``e`` (empty if none)."""
    if c.R.size == 0:
        return []
    col = c.R[:, e]
    use = (col >= 0) & c.ok
    if not use.any():
        return []
    best = col[use].min()
    return [c.keys[j] for j in np.flatnonzero(use & (col == best))]


#: at most this many diagonal steps per cell (each one step along every optimum's diagonal)
MAX_DIAGONAL = 16


def diagonal_step(c: Cell, T: int) -> bool:
    """One step along the ``alpha * gamma`` diagonal around every target's optima
    (:func:`diagonal`); whether any configuration is new."""
    if c.diag_steps >= MAX_DIAGONAL:
        return False
    top = max(c.alphas)
    rows: dict[float, list[float]] = {}
    for a, g in c.keys:
        rows.setdefault(g, []).append(a)
    rows = {g: sorted(xs) for g, xs in rows.items()}
    new = []
    for e in range(T):
        arg = argmins(c, e)
        if arg:
            n = spread_for(int(c.R[c.index[arg[0]], e]))
            new += diagonal(arg, rows, top, GAMMA_MIN, GAMMA_MAX, n)
    new = [k for k in dict.fromkeys(new) if k not in c.index]
    c.extra += new
    c.diag_steps += 1
    return bool(new)


def _midpoints(values: list[float], x: float) -> list[float]:
    """``x`` and the geometric midpoints between ``x`` and its nearest neighbours in
    ``values`` (below and above, where they exist)."""
    below = [v for v in values if v < x]
    above = [v for v in values if v > x]
    out = [x]
    if below:
        out.append(float(np.sqrt(max(below) * x)))
    if above:
        out.append(float(np.sqrt(min(above) * x)))
    return out


#: refinement also searches every outer rate whose best is within this factor of the optimum
NEAR = 2.0


def _row_optima(c: Cell, e: int, within: float, n: int) -> dict[float, list[float]]:
    """Per outer rate whose least rounds for target ``e`` is at most ``within``: the inner
    steps attaining it (a tie: up to :data:`SPREAD`, spread)."""
    col = c.R[:, e]
    out: dict[float, tuple[int, list[float]]] = {}
    for j, (a, g) in enumerate(c.keys):
        r = int(col[j])
        if r < 0 or not c.ok[j] or r > within:
            continue
        if g not in out or r < out[g][0]:
            out[g] = (r, [a])
        elif r == out[g][0]:
            out[g][1].append(a)
    return {g: [a for a, _ in tie_points([(a, g) for a in xs], n)] for g, (_, xs) in out.items()}


def refine_patch(c: Cell, T: int) -> bool:
    """Add the refinement patch around every target's reported optimum (:mod:`theory.compare.tune`'s docstring);
    whether any configuration is new."""
    alphas = sorted({k[0] for k in c.keys})
    gammas = sorted({k[1] for k in c.keys})
    new = []
    for e in range(T):
        arg = argmins(c, e)
        if not arg:
            continue
        best = int(c.R[c.index[arg[0]], e])
        n = spread_for(best)
        for k in tie_points(arg, n):  # around the whole tie, not only its middle
            for a in _midpoints(alphas, k[0]):
                for g in _midpoints(gammas, k[1]) if len(gammas) > 1 else [k[1]]:
                    new.append((a, g))
        for g, xs in _row_optima(c, e, NEAR * best, n).items():  # every near row's cliff
            row = sorted(x for x, y in c.keys if y == g)
            new += [(x, g) for a in xs for x in _midpoints(row, a)]
    new = [k for k in dict.fromkeys(new) if k not in c.index]
    c.extra += new
    return bool(new)

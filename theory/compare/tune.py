"""Tuning every method alike: grids of one size, extended when the optimum sits on an edge.

:func:`tune` takes one method at one sync interval ``H`` and a list of cells ``(eta, p)``
(PALSGD's pull settings; one cell for the methods without pulls) and returns, per cell and
target ``eps``, the least number of rounds over the method's grid (:mod:`theory.compare.
methods`) and the configuration that attains it. Within one cell every configuration pays
the same per round, so the least rounds is the least cost in every budget.

Edges: when every configuration attaining the least rounds lies on the lowest inner step of
the grid (or no configuration reaches a target and the lowest steps did not all diverge),
or on its lowest or highest outer rate, the grid is extended past that edge (by
``ceil(n_alpha/2)`` inner steps over ``max(span/2, 1)`` decades, or by one outer-rate step)
and the new configurations are evaluated, up to ``max_extend`` times. The top inner step is the stability edge (98% of it)
and is never extended; a result there says ``alpha_edge = "stability"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from core.validation import check_fraction, check_int, check_number
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.methods import Method, alpha_edge, default_outer_grid

__all__ = ["Grid", "Tuned", "tune", "exact_evaluator", "Evaluator"]


@dataclass(frozen=True)
class Grid:
    """The tuning grid's size and range: ``n_alpha x n_outer`` configurations per method,
    inner steps over ``span`` decades below the stability edge, extended at most
    ``max_extend`` times per edge; ``mu``: Nesterov's outer momentum."""

    n_alpha: int = 25
    n_outer: int = 4
    span: float = 4.0
    max_extend: int = 3
    mu: float = 0.9

    def __post_init__(self) -> None:
        check_int("n_alpha", self.n_alpha, 2)
        check_int("n_outer", self.n_outer, 1)
        check_int("max_extend", self.max_extend, 0)
        check_number("span", self.span, low=0.0, low_open=True)
        check_fraction("mu", self.mu, allow_zero=True, allow_one=False)

    def alphas(self, m: Method, L: float, eta: float, p: float) -> np.ndarray:
        n = self.n_alpha if m.has_outer else self.n_alpha * self.n_outer
        top = alpha_edge(m, L, p, eta)
        return top * 10.0 ** (-self.span * np.linspace(1.0, 0.0, n))

    def gammas(self, m: Method) -> np.ndarray:
        return default_outer_grid(m, self.n_outer)


@dataclass
class Tuned:
    """The tuned result of one method in one cell for one target ``eps``.

    ``rounds``: least rounds to ``E||grad f(z_r)||^2 <= eps`` over the grid (``None``: no
    configuration reached it by its cap); ``alpha``, ``gamma``, ``mu``: the configuration;
    ``alpha_edge``: ``"interior"``, ``"lower"`` (still at the lowest step after every
    extension) or ``"stability"`` (the top of the grid, 98% of the stability edge);
    ``gamma_edge``: ``"interior"``, ``"lower"`` or ``"upper"``; ``configs``: configurations
    evaluated in this cell; ``diverged``: how many of them diverged.
    """

    rounds: int | None
    alpha: float | None = None
    gamma: float | None = None
    mu: float | None = None
    alpha_edge: str = "interior"
    gamma_edge: str = "interior"
    configs: int = 0
    diverged: int = 0
    extended: int = 0
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


Evaluator = Callable[..., tuple[np.ndarray, np.ndarray]]


def exact_evaluator(q: Quadratic) -> Evaluator:
    """The exact first passage on the quadratic ``q`` (:func:`exact_rounds`)."""
    return partial(exact_rounds, q)


class _Cell:
    """The evaluated configurations of one cell: alpha and gamma values and their rounds."""

    def __init__(self, alphas: np.ndarray, gammas: np.ndarray) -> None:
        self.alphas, self.gammas = list(alphas), list(gammas)
        self.results: dict[tuple[float, float], tuple[np.ndarray, bool]] = {}
        self.extended = 0

    def pending(self) -> list[tuple[float, float]]:
        return [(a, g) for a in self.alphas for g in self.gammas if (a, g) not in self.results]


def tune(
    evaluate: Evaluator,
    m: Method,
    *,
    H: int,
    cells: list[tuple[float, float]],
    eps: np.ndarray,
    caps: np.ndarray,
    grid: Grid,
    L: float,
) -> list[list[Tuned]]:
    """Tune ``m`` at sync interval ``H`` in every cell ``(eta, p)``: ``[cell][eps] -> Tuned``.

    ``evaluate(m, H=, eta=, p=, alpha=, gamma=, eps=, cap=, group=, mu=)`` returns the first
    rounds ``(N, E)`` (negative: not reached) and the diverged flags ``(N,)`` of ``N``
    configurations: :func:`exact_evaluator` (exact, quadratics) or
    :func:`theory.compare.montecarlo.mc_evaluator`. ``caps``: ``(len(cells),)`` the last round worth examining per cell (the largest budget
    divided by the cost of a round).
    """
    eps = np.asarray(eps, dtype=float).reshape(-1)
    state = [_Cell(grid.alphas(m, L, eta, p), grid.gammas(m)) for eta, p in cells]
    for _ in range(grid.max_extend + 1):
        _run_pending(evaluate, m, H, cells, state, eps, caps, grid.mu)
        if not any(_extend(c, eps, grid) for c in state):
            break
    return [[_best(c, e, m, grid) for e in range(eps.size)] for c in state]


def _run_pending(evaluate, m, H, cells, state, eps, caps, mu) -> None:
    rows = [(i, a, g) for i, c in enumerate(state) for a, g in c.pending()]
    if not rows:
        return
    ci = np.array([r[0] for r in rows])
    eta = np.array([cells[i][0] for i in ci], dtype=float)
    p = np.array([cells[i][1] for i in ci], dtype=float)
    alpha = np.array([r[1] for r in rows])
    gamma = np.array([r[2] for r in rows])
    rounds, div = evaluate(
        m, H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, eps=eps,
        cap=np.asarray(caps)[ci], group=ci, mu=mu,
    )  # fmt: skip
    for (i, a, g), r, dv in zip(rows, rounds, div, strict=True):
        state[i].results[a, g] = (r, bool(dv))


def _argmins(c: _Cell, e: int) -> list[tuple[float, float]]:
    """The configurations attaining the least rounds for target ``e`` (empty if none)."""
    got = {k: int(r[e]) for k, (r, _) in c.results.items() if r[e] >= 0}
    if not got:
        return []
    best = min(got.values())
    return [k for k, v in got.items() if v == best]


def _extend(c: _Cell, eps: np.ndarray, grid: Grid) -> bool:
    """Extend ``c``'s grid past an edge that an optimum sits on (or, when a target is not
    reached at all, below its smallest inner step unless every configuration there
    diverged); each edge at most once per call. Whether anything was added."""
    if c.extended >= grid.max_extend:
        return False
    lo_a = min(c.alphas)
    gs = sorted(c.gammas)
    down = up_g = down_g = False
    for e in range(eps.size):
        arg = _argmins(c, e)
        if not arg:
            lowest = [c.results[k] for k in c.results if k[0] == lo_a]
            down |= not all(dv for _, dv in lowest)
            continue
        down |= all(a == lo_a for a, _ in arg)
        if len(gs) > 1:
            down_g |= all(g == gs[0] for _, g in arg)
            up_g |= all(g == gs[-1] for _, g in arg)
    if down:
        n_new = max(1, int(np.ceil(grid.n_alpha / 2)))
        decades = max(grid.span / 2.0, 1.0)
        c.alphas = [lo_a * 10.0 ** (-decades * k / n_new) for k in range(n_new, 0, -1)] + c.alphas
    if down_g or up_g:
        step = gs[1] / gs[0]
        c.gammas = ([gs[0] / step] if down_g else []) + gs + ([gs[-1] * step] if up_g else [])
    added = down or down_g or up_g
    c.extended += int(added)
    return added


def _best(c: _Cell, e: int, m: Method, grid: Grid) -> Tuned:
    configs = len(c.results)
    diverged = sum(int(dv) for _, dv in c.results.values())
    arg = _argmins(c, e)
    if not arg:
        return Tuned(None, configs=configs, diverged=diverged, extended=c.extended)
    arg = sorted(arg)
    rounds = int(c.results[arg[0]][0][e])
    a, g = arg[len(arg) // 2]  # the middle of a tie
    alphas, gammas = sorted(c.alphas), sorted(c.gammas)
    a_edge = "interior"
    if all(x == alphas[-1] for x, _ in arg):
        a_edge = "stability"
    elif all(x == alphas[0] for x, _ in arg):
        a_edge = "lower"
    g_edge = "interior"
    if len(gammas) > 1 and all(y == gammas[0] for _, y in arg):
        g_edge = "lower"
    elif len(gammas) > 1 and all(y == gammas[-1] for _, y in arg):
        g_edge = "upper"
    return Tuned(
        rounds=rounds,
        alpha=float(a),
        gamma=float(g) if m.has_outer else None,
        mu=(grid.mu if m.nesterov else 0.0) if m.has_outer else None,
        alpha_edge=a_edge,
        gamma_edge=g_edge,
        configs=configs,
        diverged=diverged,
        extended=c.extended,
    )

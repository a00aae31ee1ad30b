"""Tuning every method alike: grids of one size, extended when the optimum sits on an edge.

:func:`tune` takes one method at one sync interval ``H`` and a list of cells ``(eta, p)``
(PALSGD's pull settings; one cell for the methods without pulls) and returns, per cell and
target, the least number of rounds over the method's grid (:mod:`theory.compare.methods`)
and the configuration that attains it. Within one cell every configuration pays the same
per round, so the least rounds is the least cost in every budget. The targets are the
evaluator's columns: with the exact engine the first passage below each ``eps``, then the
sustained one (the value stays below it), each tuned on its own.

Edges, the same rule in every cell of every unit: after each evaluation, every cell whose
optimum (for any target) lies on an edge of what it has evaluated is extended past that edge,
and the new configurations are evaluated, until every optimum is interior or a cap is
reached:

* the lowest inner step (or a target reached by no configuration while the lowest steps did
  not all diverge): ``ceil(n_alpha/2)`` more steps over ``max(span/2, 1)`` decades below,
  at most ``Grid.max_extend`` times per cell (the top inner step is the stability edge, 98%
  of it, never extended: ``alpha_edge = "stability"``);
* an outer rate with no row within the grid's ratio below (above), the lowest (highest) of
  a grid without gaps: ``ceil(n_outer/2)`` more rates at that ratio, until the rates pass
  ``[GAMMA_MIN, GAMMA_MAX]`` (PALSGD's useful outer rate grows like ``(l + eta)/l``).

Refinement, the same rule in every cell (after the extensions): ``Grid.refine`` times, around
each target's reported optimum ``(a, g)``, the geometric midpoints between ``a`` and its
nearest evaluated inner steps below and above, and likewise for ``g``, are evaluated on the
``3 x 3`` patch they span (at most 8 new configurations per optimum and level; the spacing
near the optimum halves in log at each level), and around the best inner step of every outer
rate whose best is within ``NEAR`` (2x) of the optimum's rounds, the midpoints in the inner
step alone. The optimum often sits on a cliff (the last stable inner step of an outer rate),
which a fixed log grid straddles by chance (up to 2.25x the rounds of the outside search of
``benchmarks/bench_map_tuning_gap.py`` before this step). The patch and the near rows are
taken around up to :data:`~theory.compare.refine.SPREAD` configurations of a tie of optima
where the optimum takes at most :data:`~theory.compare.refine.FEW` rounds (only the middle
above), and with outer rates each optimum is also extended along its ``alpha * gamma``
diagonal until interior there (:mod:`theory.compare.refine`). ``max_extend = 0`` refines
nothing either, nor does the Monte-Carlo engine (a sampled value's cliff is noise).

Probe, the same in every cell with outer rates (once, before the extensions): outer rates
every factor 4 over ``[GAMMA_MIN, GAMMA_MAX]`` at each optimum's inner step and along its
``alpha * gamma`` diagonal (:mod:`theory.compare.probe`): far basins no local stage reaches.

Polish, the same in every cell (last): where a target's best takes at most
:data:`~theory.compare.refine.FEW` rounds, Nelder–Mead searches in ``(log alpha, log gamma)``
from the best configurations minimise a continuous score, the values of the first rounds
against ``eps`` (:mod:`theory.compare.polish`): among equal rounds it tells which
configuration is closest to one round fewer, which the integer rounds cannot (a needle of a
transient dip, a sliver beside the stability edge). Only an evaluator that returns those
values (``values``, ``early``: :class:`ExactEvaluator`) is polished; ``Grid.polish = 0``
polishes nothing, nor does ``max_extend = 0``.

A result still on an edge says so (``alpha_edge = "lower"``, ``gamma_edge = "lower"`` or
``"upper"``); the map counts them. Precision guard: with a ``verify`` callback (the exact
engine's :func:`theory.compare.precision.longdouble_verifier`) every configuration that
becomes an optimum is rechecked in extended precision at its answer; one whose float64
value disagrees is refused (dropped, ``Tuned.refused`` counts them) and the next best taken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np

from core.validation import check_fraction, check_int, check_number
from theory.compare.exact import Quadratic, exact_rounds, exact_values
from theory.compare.methods import Method, alpha_edge, default_outer_grid
from theory.compare.polish import polish
from theory.compare.probe import adopt_rows, extend_rows, global_probe
from theory.compare.refine import (
    GAMMA_MAX,
    GAMMA_MIN,
    Cell,
    argmins,
    diagonal_step,
    refine_patch,
)

__all__ = [
    "Grid",
    "Tuned",
    "tune",
    "exact_evaluator",
    "ExactEvaluator",
    "Evaluator",
    "Verifier",
    "GAMMA_MIN",
    "GAMMA_MAX",
]


@dataclass(frozen=True)
class Grid:
    """The tuning grid's size and range: ``n_alpha x n_outer`` configurations per method,
    inner steps over ``span`` decades below the stability edge, extended below at most
    ``max_extend`` times per cell (outer rates: until interior or past
    ``[GAMMA_MIN, GAMMA_MAX]``; ``max_extend = 0``: no extension and no refinement at all);
    ``refine``: refinement levels around each optimum (module docstring); ``polish``:
    the most Nelder–Mead steps of each continuous search of the last stage (up to 4
    configurations each, :mod:`theory.compare.polish`; 0: none); ``mu``: Nesterov's outer momentum."""

    n_alpha: int = 25
    n_outer: int = 4
    span: float = 4.0
    max_extend: int = 3
    mu: float = 0.9
    refine: int = 3
    polish: int = 30

    def __post_init__(self) -> None:
        check_int("refine", self.refine, 0)
        check_int("polish", self.polish, 0)
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
    """The tuned result of one method in one cell for one target.

    ``rounds``: least rounds to the target over the grid (``None``: no configuration reached
    it by its cap); ``alpha``, ``gamma``, ``mu``: the configuration; ``alpha_edge``:
    ``"interior"``, ``"lower"`` (still at the lowest step after every extension) or
    ``"stability"`` (the top of the grid, 98% of the stability edge); ``gamma_edge``:
    ``"interior"``, ``"lower"`` or ``"upper"`` (still there at the cap); ``configs``:
    configurations evaluated in this cell; ``diverged``: how many of them diverged;
    ``extended``: extensions of the cell; ``refused``: configurations the precision guard
    refused in this cell; ``rechecked``: optima it confirmed in extended precision;
    ``polished``: configurations the polish (:mod:`theory.compare.polish`) evaluated by their
    values alone (not in ``configs``; those it took in are).
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
    refused: int = 0
    rechecked: int = 0
    polished: int = 0

    @property
    def on_edge(self) -> bool:
        """Whether the optimum still sits on an extendable edge (not the stability edge)."""
        return self.rounds is not None and (
            self.alpha_edge == "lower" or self.gamma_edge != "interior"
        )

    def to_dict(self) -> dict:
        return asdict(self)


#: ``evaluate(m, H=, eta=, p=, alpha=, gamma=, eps=, cap=, group=, mu=[, known=])`` ->
#: ``(rounds (N, T), diverged (N,))``; ``known`` ``(N, T)``: the answers each configuration's
#: cell already has (-1: none), which an evaluator may use to stop early (or ignore)
Evaluator = Callable[..., tuple[np.ndarray, np.ndarray]]
#: ``verify(m, H=, eta=, p=, alpha=, gamma=, mu=, rounds=(N, T), eps=)`` -> ``(N,)`` whether
#: each configuration's values at its answers are resolved in float64
Verifier = Callable[..., np.ndarray]


#: the values of rounds ``1 .. VALUES`` the exact evaluator returns with the rounds (the
#: polish's continuous score)
VALUES = 64


class ExactEvaluator:
    """The exact first and sustained passages on the quadratic ``q`` (:func:`exact_rounds`):
    ``T = 2E`` targets, the first passage below each ``eps`` then the sustained one. An
    :data:`Evaluator`; called with ``values=W`` it also returns the values of rounds
    ``1 .. W`` (``values``: the ``W`` the tuner asks for)."""

    values = VALUES

    def __init__(self, q: Quadratic) -> None:
        self.q = q

    def __call__(self, m: Method, **kw):
        return exact_rounds(self.q, m, sustained=True, **kw)

    def early(self, m: Method, **kw) -> np.ndarray:
        """The values of rounds ``1 .. rounds`` alone (:func:`exact_values`)."""
        return exact_values(self.q, m, **kw)


def exact_evaluator(q: Quadratic) -> Evaluator:
    """The exact evaluator of ``q`` (:class:`ExactEvaluator`)."""
    return ExactEvaluator(q)


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
    verify: Verifier | None = None,
) -> list[list[Tuned]]:
    """Tune ``m`` at sync interval ``H`` in every cell ``(eta, p)``: ``[cell][target] -> Tuned``.

    ``evaluate(m, H=, eta=, p=, alpha=, gamma=, eps=, cap=, group=, mu=)`` returns the rounds
    ``(N, T)`` of ``N`` configurations for ``T`` targets (negative: not reached) and their
    diverged flags ``(N,)``: :func:`exact_evaluator` (exact, quadratics; ``T = 2E``) or
    :func:`theory.compare.montecarlo.mc_evaluator`. ``caps``: ``(len(cells),)`` the last
    round worth examining per cell (the largest budget divided by the cost of a round).
    ``verify``: the precision guard of the module docstring (``None``: none).
    """
    eps = np.asarray(eps, dtype=float).reshape(-1)
    state = [Cell(grid.alphas(m, L, eta, p), grid.gammas(m)) for eta, p in cells]
    W = int(getattr(evaluate, "values", 0)) if grid.max_extend > 0 and grid.polish > 0 else 0
    run = partial(_run_pending, evaluate, m, H, cells, state, eps, caps, grid.mu, W)
    T = run()
    levels = grid.refine if grid.max_extend > 0 else 0
    diag = m.has_outer and levels > 0 and len(grid.gammas(m)) > 1
    if diag and any([global_probe(c, T) for c in state]):  # every cell alike
        run()
    while True:
        while True:
            grown = [adopt_rows(c, T) | _extend(c, T, grid) for c in state]  # every cell
            if diag:
                grown += [diagonal_step(c, T) for c in state]
            if not any(grown):
                break
            run()
        # a refined optimum can land on an edge again: then extend again
        if levels == 0 or not any([refine_patch(c, T) for c in state]):
            break
        levels -= 1
        run()
    if W > 0:

        def values(ci: np.ndarray, alpha: np.ndarray, gamma: np.ndarray) -> np.ndarray:
            eta, p = (np.array([cells[i][k] for i in ci], dtype=float) for k in (0, 1))
            return evaluate.early(m, H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, mu=grid.mu,
                                  rounds=W)  # fmt: skip

        polish(state, run, values, eps=eps, T=T, budget=grid.polish, outer=m.has_outer)
    if verify is not None:
        _guard(verify, m, H, cells, state, eps, T, grid.mu)
    return [[_best(c, e, m, grid) for e in range(T)] for c in state]


def _run_pending(evaluate, m, H, cells, state, eps, caps, mu, W=0) -> int:
    """Evaluate every cell's pending configurations (each cell's answers so far passed as
    ``known``, so that a new configuration is searched only as far as it can still tie or
    win; ``W > 0``: with the values of their first ``W`` rounds); the number of targets
    ``T``."""
    per = [(i, c.pending()) for i, c in enumerate(state)]
    rows = [(i, a, g) for i, ks in per for a, g in ks]
    if not rows:
        return 0
    ci = np.array([r[0] for r in rows])
    eta = np.array([cells[i][0] for i in ci], dtype=float)
    p = np.array([cells[i][1] for i in ci], dtype=float)
    alpha = np.array([r[1] for r in rows])
    gamma = np.array([r[2] for r in rows])
    kw = {}
    if state[0].R.size:  # not the first evaluation
        T = state[0].R.shape[1]
        bests = np.stack([c.best(T) for c in state])
        kw["known"] = bests[ci]
    if W > 0:
        kw["values"] = W
    res = evaluate(
        m, H=H, eta=eta, p=p, alpha=alpha, gamma=gamma, eps=eps,
        cap=np.asarray(caps)[ci], group=ci, mu=mu, **kw,
    )  # fmt: skip
    rounds, div = np.asarray(res[0], dtype=np.int64), np.asarray(res[1])
    V = np.asarray(res[2], dtype=float) if W > 0 else None
    lo = 0
    for i, ks in per:
        if ks:
            sl = slice(lo, lo + len(ks))
            state[i].add(ks, rounds[sl], div[sl], None if V is None else V[sl])
            lo += len(ks)
    return int(rounds.shape[1])


def _extend(c: Cell, T: int, grid: Grid) -> bool:
    """Extend ``c``'s grid past every edge an optimum sits on (or, when a target is not
    reached at all, below its smallest inner step unless every configuration there
    diverged), within the caps of the module docstring. Whether anything was added."""
    lo_a = min(c.alphas)
    down, args = False, []
    for e in range(T):
        arg = argmins(c, e)
        if not arg:
            lowest = [c.div[j] for j, k in enumerate(c.keys) if k[0] == lo_a]
            down |= not all(lowest)
            continue
        down |= all(a == lo_a for a, _ in arg)
        args.append(arg)
    down &= c.ext_alpha < grid.max_extend
    added = False
    if down:
        n_new = max(1, int(np.ceil(grid.n_alpha / 2)))
        decades = max(grid.span / 2.0, 1.0)
        c.alphas = [lo_a * 10.0 ** (-decades * k / n_new) for k in range(n_new, 0, -1)] + c.alphas
        c.ext_alpha += 1
        added = True
    if grid.max_extend > 0 and extend_rows(c, args, grid.n_outer):
        added = True
    c.extended += int(added)
    return added


def _guard(verify: Verifier, m, H, cells, state, eps, T, mu) -> None:
    """Recheck every reported optimum (:func:`_pick`) in extended precision; refuse the
    unresolved and take the next best until each target's optimum is confirmed (or none is
    left)."""
    while True:
        rows = sorted(
            {(i, k) for i, c in enumerate(state) for e in range(T)
             if (k := _pick(c, e)) is not None and k not in c.verified}
        )  # fmt: skip
        if not rows:
            return
        ci = np.array([i for i, _ in rows])
        ok = verify(
            m, H=H, eta=np.array([cells[i][0] for i in ci], dtype=float),
            p=np.array([cells[i][1] for i in ci], dtype=float),
            alpha=np.array([k[0] for _, k in rows]), gamma=np.array([k[1] for _, k in rows]),
            mu=mu, rounds=np.array([state[i].R[state[i].index[k]] for i, k in rows]), eps=eps,
        )  # fmt: skip
        for (i, k), good in zip(rows, ok, strict=True):
            if good:
                state[i].verified.add(k)
            else:
                state[i].refuse(k)


def _pick(c: Cell, e: int) -> tuple[float, float] | None:
    """The configuration reported for target ``e``: the middle of the tie of optima."""
    arg = sorted(argmins(c, e))
    return arg[len(arg) // 2] if arg else None


def _best(c: Cell, e: int, m: Method, grid: Grid) -> Tuned:
    common = dict(configs=len(c.keys), diverged=int(c.div.sum()), extended=c.extended,
                  refused=int((~c.ok).sum()), rechecked=len(c.verified),
                  polished=c.polished)  # fmt: skip
    arg = argmins(c, e)
    if not arg:
        return Tuned(None, **common)
    arg = sorted(arg)
    rounds = int(c.R[c.index[arg[0]], e])
    a, g = arg[len(arg) // 2]  # the middle of a tie
    # edges of what was evaluated (an extension is always evaluated before this)
    alphas = sorted({k[0] for k in c.keys})
    gammas = sorted({k[1] for k in c.keys})
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
        mu=m.outer_momentum(grid.mu) if m.has_outer else None,
        alpha_edge=a_edge,
        gamma_edge=g_edge,
        **common,
    )

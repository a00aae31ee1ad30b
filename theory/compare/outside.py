"""An outside check of the map's tuner: wide grids searched with the exact engine, no extensions.

The acceptance asked of the tuner: on held-out problem files every method's tuned cost is
within 1.25x of the best cost a search with much wider grids finds (first passage, the same
cells; docs/when_pulling_pays.md reports where it is not).
:func:`outside_rounds` is that search for one method at one ``H`` and one cell ``(eta, p)``:
every configuration of a fixed wide log grid (:class:`WideGrid`: inner steps over
``alpha_decades`` decades below the stability edge, outer rates over
``[gamma_min, gamma_max]``) evaluated by the exact engine's per-configuration evaluation
(:func:`theory.compare.exact.exact_rounds`, first passage), the optimum of each target
rechecked in long double (:func:`theory.compare.precision.longdouble_verifier`; an
unresolved configuration is dropped and the search repeated without it). Nothing of
:mod:`theory.compare.tune` is used: the grid is not extended, not centred on the tuner's,
and its spacing is its own.

:func:`held_out_problem` writes a problem file from a generator that is not the map's
default family (:func:`theory.problems.hessians.make_hetero_hessian`): curvatures, spread of
the minimisers, start and noise each drawn from a seeded generator of its own.
:func:`tuning_gap` compares a map's tuned rounds (:func:`theory.compare.run.run_map` with
``criterion = "first"``) with the outside search cell by cell.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from core.io import atomic_write_json
from core.records import JsonObject
from theory.compare.exact import Quadratic, exact_rounds
from theory.compare.methods import METHODS, Method, alpha_edge, round_cost
from theory.compare.precision import longdouble_verifier
from theory.compare.records import MapResult
from theory.compare.spec import MapSpec

__all__ = ["WideGrid", "GapRow", "outside_rounds", "held_out_problem", "tuning_gap"]


@dataclass(frozen=True)
class WideGrid:
    """The outside search's grid: ``per_decade`` inner steps a decade over ``alpha_decades``
    decades below the stability edge (98% of it at the top, as the map's), outer rates
    ``per_octave`` an octave over ``[gamma_min, gamma_max]`` (every outer family alike);
    minibatch SGD gets ``sgd_factor`` times the inner steps. ``mu``: Nesterov's momentum."""

    alpha_decades: float = 9.0
    per_decade: int = 8
    gamma_min: float = 2.0**-8
    gamma_max: float = 2.0**15
    per_octave: int = 2
    sgd_factor: int = 4
    mu: float = 0.9

    def alphas(self, m: Method, L: float, eta: float, p: float) -> np.ndarray:
        n = int(round(self.alpha_decades * self.per_decade)) + 1
        n *= 1 if m.has_outer else self.sgd_factor
        return alpha_edge(m, L, p, eta) * 10.0 ** (-self.alpha_decades * np.linspace(1, 0, n))

    def gammas(self, m: Method) -> np.ndarray:
        if not m.has_outer:
            return np.ones(1)
        lo, hi = math.log2(self.gamma_min), math.log2(self.gamma_max)
        return 2.0 ** np.linspace(lo, hi, int(round((hi - lo) * self.per_octave)) + 1)

    def size(self, m: Method) -> int:
        return self.alphas(m, 1.0, 0.0, 0.0).size * self.gammas(m).size


def outside_rounds(
    q: Quadratic,
    m: Method,
    *,
    H: int,
    eta: float,
    p: float,
    eps: np.ndarray,
    cap: int,
    L: float,
    grid: WideGrid,
    criterion: str = "first",
) -> tuple[np.ndarray, int]:
    """The least rounds ``(E,)`` of ``m`` over ``grid`` at ``H``, ``(eta, p)`` to each eps
    under ``criterion`` (``"first"`` passage or ``"sustained"``, as the map's; -1: no
    configuration reaches that eps by ``cap``), each optimum resolved in long double; and the
    number of configurations the precision check refused."""
    eps = np.asarray(eps, dtype=float).reshape(-1)
    sustained = criterion == "sustained"
    E = eps.size
    targets = np.concatenate([eps, eps]) if sustained else eps
    A, G = np.meshgrid(grid.alphas(m, L, eta, p), grid.gammas(m), indexing="ij")
    alpha, gamma = A.ravel(), G.ravel()
    keep = np.ones(alpha.size, dtype=bool)
    verify = longdouble_verifier(q)
    refused = 0
    while True:
        idx = np.flatnonzero(keep)
        n = idx.size
        R, _ = exact_rounds(
            q, m, H=H, eta=np.full(n, eta), p=np.full(n, p), alpha=alpha[idx],
            gamma=gamma[idx], eps=eps, cap=np.full(n, cap), group=np.zeros(n, dtype=np.int64),
            mu=grid.mu, sustained=sustained,
        )  # fmt: skip
        best = np.full(targets.size, -1, dtype=np.int64)
        rows: list[int] = []
        for e in range(E if sustained else 0, targets.size):
            ok = R[:, e] >= 0
            if ok.any():
                best[e] = R[ok, e].min()
                rows.append(int(np.flatnonzero(ok & (R[:, e] == best[e]))[0]))
        if not rows:
            return best[-E:], refused
        rows = sorted(set(rows))
        # each optimum rechecked at every target's own answer (-1: that target not asked)
        at = np.full((len(rows), targets.size), -1, dtype=np.int64)
        for i, r in enumerate(rows):
            at[i] = np.where(R[r] == best, best, -1)
        good = verify(
            m, H=H, eta=np.full(len(rows), eta), p=np.full(len(rows), p),
            alpha=alpha[idx[rows]], gamma=gamma[idx[rows]], mu=grid.mu, rounds=at, eps=eps,
        )  # fmt: skip
        if good.all():
            return best[-E:], refused
        keep[idx[np.asarray(rows)[~good]]] = False
        refused += int((~good).sum())


def held_out_problem(path: str | Path, seed: int) -> Path:
    """Write a held-out problem file (JSON) drawn from ``seed``: ``K`` in 3..6 workers,
    ``d`` in 2..4 coordinates, curvatures log-uniform in ``[lam_min, L]`` with ``lam_min``
    in ``[0.01, 0.2]`` and ``L`` in ``[0.5, 4]``, minimisers Gaussian with a spread in
    ``[0.3, 3]``, a start at distance ``[2, 6]`` from the optimum, noise ``sigma2`` in
    ``[0.1, 2]``: not the map's default family."""
    rng = np.random.default_rng(np.random.SeedSequence([27, seed]))
    K, d = int(rng.integers(3, 7)), int(rng.integers(2, 5))
    L = float(np.exp(rng.uniform(math.log(0.5), math.log(4.0))))
    lam_min = float(np.exp(rng.uniform(math.log(0.01), math.log(0.2))))
    lam = np.exp(rng.uniform(math.log(lam_min), math.log(L), size=(K, d)))
    lam.flat[int(np.argmax(lam))] = L
    spread = float(np.exp(rng.uniform(math.log(0.3), math.log(3.0))))
    minimisers = spread * rng.standard_normal((K, d))
    v = rng.standard_normal(d)
    x_star = (lam * minimisers).sum(axis=0) / lam.sum(axis=0)
    x0 = x_star + float(rng.uniform(2.0, 6.0)) * v / np.linalg.norm(v)
    data = {
        "name": f"held_out_{seed}",
        "eigenvalues": lam.tolist(),
        "minimisers": minimisers.tolist(),
        "x0": x0.tolist(),
        "sigma2": float(np.exp(rng.uniform(math.log(0.1), math.log(2.0)))),
    }
    path = Path(path)
    atomic_write_json(path, data)
    return path


@dataclass(frozen=True)
class GapRow:
    """One method in one cell: the map's tuned first-passage rounds and cost, the outside
    search's, and ``ratio = tuned / outside`` (the cost ratio; ``inf`` where only the outside
    search reaches eps within the budget, ``None`` where neither does)."""

    problem: str
    method: str
    H: int
    eta: float
    p: float
    eps: float
    budget: str
    tuned_rounds: int | None
    outside_rounds: int | None
    tuned_cost: float | None
    outside_cost: float | None
    ratio: float | None
    refused: int

    def to_dict(self) -> JsonObject:
        return asdict(self)


def tuning_gap(
    spec: MapSpec, result: MapResult, q: Quadratic, L: float, grid: WideGrid, problem: str
) -> list[GapRow]:
    """Every method of every cell of ``result`` (the map of ``spec``, one ``zeta``: the
    problem's own) against :func:`outside_rounds` on the same cell, budget and criterion."""
    from theory.compare.run import caps_for

    eps = np.asarray(spec.eps)
    seen: dict[tuple, tuple[np.ndarray, int]] = {}
    rows = []
    for c in result.cells:
        for name in spec.methods:
            m = METHODS[name]
            H = c.H if m.local else 1
            eta, p = (c.eta, c.p) if m.pulls else (0.0, 0.0)
            key = (name, H, eta, p)
            if key not in seen:
                (cap,) = caps_for(spec, m, H, [(eta, p)])
                seen[key] = outside_rounds(
                    q,
                    m,
                    H=H,
                    eta=eta,
                    p=p,
                    eps=eps,
                    cap=int(cap),
                    L=L,
                    grid=grid,
                    criterion=spec.criterion,
                )
            best, refused = seen[key]
            r_out = int(best[list(spec.eps).index(c.eps)])
            price = round_cost(m, c.budget, c.H, c.p, spec.prices)
            cost_out = r_out * price if r_out >= 0 and r_out * price <= c.B * (1 + 1e-12) else None
            cost_in = c.cost[name]
            if cost_in is None:  # only the outside search reaches eps: unbounded gap
                ratio = None if cost_out is None else math.inf
            elif cost_out is None:  # only the tuner reaches eps: no gap
                ratio = 0.0
            elif cost_out == 0:
                ratio = 1.0 if cost_in == 0 else math.inf
            else:
                ratio = cost_in / cost_out
            rows.append(
                GapRow(problem, name, c.H, c.eta, c.p, c.eps, c.budget, c.rounds[name],
                       r_out if r_out >= 0 else None, cost_in, cost_out, ratio, refused)
            )  # fmt: skip
    return rows

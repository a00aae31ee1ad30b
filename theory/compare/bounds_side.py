"""The bounds scored against the exact answer of a map.

For every cell of a :class:`~theory.compare.records.MapResult`:

* **the bound map**: the cost each method's best guarantee needs to reach ``eps``
  (:meth:`theory.bound.Bound.rounds_to_eps` at the optimal inner step, outer rates tuned over
  the method's own grid, times the cost of a round; ``guaranteed_cost``, and ``cost`` where
  it fits the budget), and the same ratio as the truth's: the best PALSGD guarantee over
  the best baseline guarantee, whatever the budget (``bounds["ratio"]``);
* **the tuned point**: for each method's tuned configuration and each of its bounds, whether
  the configuration lies inside the bound's conditions, the bound's value there against the
  exact value it bounds (its ``measured`` time average over the rounds the method needed:
  :func:`theory.compare.averages.exact_parts`), and the term family that makes it miss:
  its ``F0``, noise (``sigma``) and heterogeneity (``zeta``) terms each against the exact
  part from the start, the noise and the heterogeneity.

The problem constants given to the bounds are exact: ``L``, ``sigma``, ``F0``, ``K``, and
``zeta`` the heterogeneity over the problem's declared region (per-worker Hessians satisfy
A3 on bounded regions only; :mod:`theory.problems.hessians`).

:func:`agreement` scores the bound map against the truth: the share of decided cells whose
winner agrees, and Spearman's rank correlation of the log ratios.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.records import JsonRow
from theory.assumptions import A3_IID
from theory.bound import Bound
from theory.bounds import all_bounds, get
from theory.compare.averages import exact_parts
from theory.compare.exact import Quadratic
from theory.compare.methods import BASELINES, METHODS, PALSGD_METHODS, Method, round_cost
from theory.compare.records import CellResult, best_of
from theory.compare.spec import MapSpec

__all__ = ["Agreement", "bounds_for", "speaks_for", "score_bounds", "agreement", "term_family"]


def speaks_for(bound: Bound, m: Method) -> bool:
    """Whether the registered upper bound ``bound`` is a statement about the compared method
    ``m`` on the map's problems, read from the bound's own spec (:attr:`Bound.algorithm`,
    :attr:`Bound.outers`, :attr:`Bound.assumptions`): it does not assume i.i.d. data (the
    map's workers are heterogeneous), it assumes ``m``'s coin model, and it is stated for
    ``m``'s algorithm with ``m``'s outer update, or for plain averaging when ``m``'s grid of
    outer rates contains it (an outer SGD step without momentum at ``gamma = 1``), where the
    bound's algorithm is ``m``'s or runs ``m``'s rounds with averaging (the table's
    ``outer_name``: Local SGD's rounds are DiLoCo's)."""
    spec, ms = bound.algorithm, m.spec
    if spec is None or A3_IID in bound.assumptions or spec.coins != ms.coins:
        return False
    averages = not ms.nesterov and ms.mu == 0.0  # an outer SGD step at gamma = 1, or none
    if spec.kind == ms.kind:
        return ms.outer in bound.outers or (bound.outers == ("average",) and averages)
    return spec.definition.outer_name == ms.kind and bound.outers == ("average",) and averages


@functools.cache
def bounds_for(name: str) -> tuple[str, ...]:
    """The registered upper bounds that speak for the method ``name``
    (:func:`speaks_for`), in the registry's order."""
    return tuple(b.name for b in all_bounds() if speaks_for(b, METHODS[name]))


_T_MAX = 10**13


def term_family(term: str) -> str:
    """``"heterogeneity"``, ``"noise"``, ``"F0"`` or ``"other"``: the constant a term of a
    bound carries (heterogeneity first: a term with ``zeta`` bounds the drift)."""
    if hasattr(term, "free_symbols"):
        names = {s.name for s in term.free_symbols}
    else:
        names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(term)))
    if "zeta" in names:
        return "heterogeneity"
    if "sigma" in names:
        return "noise"
    if "F0" in names:
        return "F0"
    return "other"


def guaranteed_rounds(
    bound,
    values: Mapping[str, float | np.ndarray],
    eps: np.ndarray,
    *,
    H: Any = 1.0,
    t_max: float = _T_MAX,
    rtol: float = 1e-3,
) -> np.ndarray:
    """Rounds ``R`` (``T = R H``) the bound needs to guarantee ``<= eps`` at its optimal inner
    step, for every target at once: shape ``values' shape + (len(eps),)``, ``inf`` where even
    ``T = t_max`` is not enough.

    The same quantity as :meth:`theory.bound.Bound.rounds_to_eps` (which assumes the optimised
    bound decreases in ``T``) to a relative precision ``rtol`` (the smallest grid value
    reaching ``eps``, always a guarantee): one evaluation on a geometric grid of ``R``, then
    bisection of every bracket at once. ``H``: steps per round (given to the bound too when it
    takes ``H``).
    """
    eps = np.asarray(eps, dtype=float)
    H = np.asarray(H, dtype=float)
    if "H" in bound.parameters:
        values = {**values, "H": H}
    r_max = np.floor(t_max / H)
    grid = np.unique(np.round(np.geomspace(1.0, float(np.max(r_max)), 80)))

    def optimised(R: np.ndarray) -> np.ndarray:
        vals = {**{k: np.asarray(v, dtype=float)[..., None] for k, v in values.items()},
                "T": R * H[..., None]}  # fmt: skip
        v = bound.at_optimal_step(**vals).value
        return np.where(np.isnan(v) | (R > r_max[..., None]), np.inf, v)

    v = optimised(np.broadcast_to(grid, np.shape(H) + grid.shape))  # (..., G)
    shape = np.broadcast_shapes(v.shape[:-1], *(np.shape(x) for x in values.values()))
    v = np.broadcast_to(v, shape + grid.shape)
    ok = v[..., None, :] <= eps[:, None]  # (..., E, G)
    reach = ok.any(axis=-1)
    k = np.argmax(ok, axis=-1)
    hi = grid[k]
    lo = np.where(k > 0, grid[np.maximum(k - 1, 0)], 0.0)
    for _ in range(64):
        open_ = reach & (hi - lo > np.maximum(1.0, rtol * hi))
        if not open_.any():
            break
        mid = np.where(open_, np.maximum(1.0, np.floor((lo + hi) / 2.0)), hi)
        vm = _at(optimised, mid, eps, shape)
        good = vm <= eps
        hi = np.where(open_ & good, mid, hi)
        lo = np.where(open_ & ~good, mid, lo)
    return np.where(reach, hi, np.inf)


def _at(optimised, R: np.ndarray, eps: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The optimised bound at per-target rounds ``R`` ``(..., E)``."""
    return np.broadcast_to(optimised(R), shape + (eps.size,))


def _guarantee_rounds(m, consts, H, eta, p, eps, grid) -> dict[str, np.ndarray]:
    """Rounds each of ``m``'s bounds needs on the ``(H, eta)`` grid for every target,
    ``(nH, nEta, E)``, at its best outer rate over ``m``'s grid (a trailing axis)."""
    out = {}
    shape = np.broadcast_shapes(np.shape(H), np.shape(eta))
    for name in bounds_for(m.name):
        b = get(name)
        vals: dict[str, float | np.ndarray] = dict(consts)
        Hb = np.asarray(H, dtype=float)[..., None] if "H" in b.parameters else np.ones(1)
        if "p" in b.parameters:
            vals.update(p=p, eta=np.asarray(eta, dtype=float)[..., None])
        if "gamma" in b.parameters:
            vals.update(
                gamma=np.asarray(grid.gammas(m), dtype=float),
                mu=m.outer_momentum(grid.mu),
            )
        vals = {k: v for k, v in vals.items() if k in b.parameters}
        r = guaranteed_rounds(b, vals, np.asarray(eps, dtype=float), H=Hb)  # (..., G?, E)
        r = r.min(axis=-2) if r.ndim == len(shape) + 2 else r
        out[name] = np.broadcast_to(r, shape + (np.size(eps),))
    return out


def _bound_map(spec: MapSpec, cells: list[CellResult], consts_by_zeta) -> None:
    Hs = np.asarray(sorted({c.H for c in cells}), dtype=float)[:, None]
    etas = np.asarray(sorted({c.eta for c in cells}), dtype=float)[None, :]
    groups = defaultdict(list)
    for c in cells:
        groups[c.zeta, c.p].append(c)
    eps_all = np.asarray(sorted({c.eps for c in cells}), dtype=float)
    for (zeta, p), cs in groups.items():
        consts = consts_by_zeta[zeta]
        rounds = {
            n: _guarantee_rounds(METHODS[n], consts, Hs, etas, p, eps_all, spec.grid)
            for n in cs[0].cost
        }
        for c in cs:
            i, j = list(Hs[:, 0]).index(c.H), list(etas[0]).index(c.eta)
            e = list(eps_all).index(c.eps)
            guaranteed: dict[str, float | None] = {}
            per_bound: dict[str, dict[str, float | None]] = {}
            for n, by_bound in rounds.items():
                m = METHODS[n]
                price = round_cost(m, c.budget, c.H, c.p, spec.prices)
                vals = {b: float(r[i, j, e]) * price for b, r in by_bound.items()}
                per_bound[n] = {b: (v if math.isfinite(v) else None) for b, v in vals.items()}
                best = min(vals.values()) if vals else math.inf
                guaranteed[n] = best if math.isfinite(best) else None
            pal, base = best_of(guaranteed, PALSGD_METHODS), best_of(guaranteed, BASELINES)
            ratio = None
            if math.isfinite(pal[1]) or math.isfinite(base[1]):
                ratio = 0.0 if math.isinf(base[1]) else pal[1] / base[1]
            within = {n: (v if v is not None and v <= c.B else None) for n, v in guaranteed.items()}
            c.bounds.update(
                guaranteed_cost=guaranteed, cost=within, by_bound=per_bound, ratio=ratio
            )


def _tuned_points(cells: list[CellResult], q: Quadratic, consts: dict[str, float]) -> None:
    """``cell.bounds["tuned_point"]`` for cells of one problem, batched per method."""
    for c in cells:
        c.bounds["tuned_point"] = {}
    names = list(cells[0].tuned) if cells else []
    for n in names:
        m = METHODS[n]
        todo = [c for c in cells if (c.tuned[n].get("rounds") or 0) > 0]
        if not todo:
            continue
        H = np.array([c.H if m.local else 1 for c in todo])
        R = np.array([c.tuned[n]["rounds"] for c in todo])
        cfg = {
            "H": H, "R": R, "eta": np.array([c.eta for c in todo]),
            "p": np.array([c.p for c in todo]),
            "alpha": np.array([c.tuned[n]["alpha"] for c in todo]),
            "gamma": np.array([c.tuned[n]["gamma"] or 1.0 for c in todo]),
            "mu": np.array([c.tuned[n]["mu"] or 0.0 for c in todo]),
        }  # fmt: skip
        parts = exact_parts(q, m, **cfg)
        for name in bounds_for(n):
            b = get(name)
            vals = {**consts, "alpha": cfg["alpha"], "T": R * H, "H": H}
            if m.pulls:
                vals.update(p=cfg["p"], eta=cfg["eta"])
            if "gamma" in b.parameters:
                vals.update(gamma=cfg["gamma"], mu=cfg["mu"])
            vals = {k: v for k, v in vals.items() if k in b.parameters}
            inside = np.broadcast_to(b.conditions_hold(**vals), R.shape)
            value = np.broadcast_to(b.evaluate(**vals), R.shape)
            fam = {f: np.zeros(R.shape) for f in ("F0", "noise", "heterogeneity", "other")}
            for term, v in b.term_values(**vals):
                fam[term_family(term)] = fam[term_family(term)] + np.broadcast_to(v, R.shape)
            measured = parts["total"][b.measured]
            for i, c in enumerate(todo):
                misses = {
                    f: {"bound": float(fam[f][i]), "exact": float(parts[f][b.measured][i])}
                    for f in ("F0", "noise", "heterogeneity")
                }
                worst = max(misses, key=lambda f: misses[f]["bound"] - misses[f]["exact"])
                v = float(value[i])
                c.bounds["tuned_point"].setdefault(n, {})[name] = {
                    "inside_conditions": bool(inside[i]),
                    "bound": v,
                    "exact": float(measured[i]),
                    "tightness": float(measured[i]) / v if v > 0 else None,
                    "terms": misses,
                    "miss": worst,
                }


def score_bounds(
    spec: MapSpec,
    cells: list[CellResult],
    quadratics: dict[Any, Quadratic],
    consts_by_zeta: dict[Any, dict[str, float]],
    *,
    tuned_points: bool = True,
    progress: bool = False,
) -> None:
    """Fill ``cell.bounds`` of every cell (see the module docstring), in place;
    ``progress``: a line per stage and a bar over the problems on standard error."""

    def say(text: str) -> None:
        if progress:
            print(f"palsgd map: {text}", file=sys.stderr, flush=True)

    with np.errstate(all="ignore"):
        say(f"the bound map: every registered bound's guarantee in {len(cells)} cells ...")
        t0 = time.perf_counter()
        _bound_map(spec, cells, consts_by_zeta)
        say(f"the bound map done in {time.perf_counter() - t0:.1f} s")
        if tuned_points:
            by_zeta = defaultdict(list)
            for c in cells:
                by_zeta[c.zeta].append(c)
            bar = tqdm(by_zeta.items(), desc="palsgd map: bounds at the tuned points",
                       unit="problem", disable=not progress)  # fmt: skip
            for zeta, cs in bar:
                _tuned_points(cs, quadratics[zeta], consts_by_zeta[zeta])


@dataclass(frozen=True)
class Agreement(JsonRow):
    """The bound map against the truth over the cells where both give a ratio: ``cells``
    (how many), ``winner_agreement`` (fraction of the cells both decide, ratio != 1, where
    they name the same winner; None without such cells), ``spearman_log_ratio`` (Spearman's
    rank correlation of the log ratios; None below 3 finite cells or without spread),
    ``palsgd_wins_truth`` / ``palsgd_wins_bounds`` (cells each calls PALSGD cheaper) and
    ``bound_wins_contradicted`` (cells the bounds call PALSGD cheaper and the truth
    dearer)."""

    cells: int
    winner_agreement: float | None
    spearman_log_ratio: float | None
    palsgd_wins_truth: int
    palsgd_wins_bounds: int
    bound_wins_contradicted: int


def agreement(cells: list[CellResult]) -> Agreement:
    """Winner agreement and Spearman's rank correlation of the log ratios, truth vs bounds,
    over the cells where both ratios are finite and positive."""
    from scipy.stats import spearmanr

    pairs = [
        (c.ratio, c.bounds.get("ratio"))
        for c in cells
        if c.ratio is not None and c.bounds.get("ratio") is not None
    ]
    both = [(a, b) for a, b in pairs if 0 < a < math.inf and 0 < b < math.inf]
    decided = [(a, b) for a, b in pairs if a != 1 and b != 1]
    agree = sum(1 for a, b in decided if (a < 1) == (b < 1))
    rho = None
    if len(both) >= 3:
        x, y = np.log([a for a, _ in both]), np.log([b for _, b in both])
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            rho = float(spearmanr(x, y).statistic)
    truth_wins = sum(1 for a, _ in decided if a < 1)
    bound_wins = sum(1 for _, b in decided if b < 1)
    return Agreement(
        cells=len(pairs),
        winner_agreement=agree / len(decided) if decided else None,
        spearman_log_ratio=rho,
        palsgd_wins_truth=truth_wins,
        palsgd_wins_bounds=bound_wins,
        bound_wins_contradicted=sum(1 for a, b in decided if b < 1 and a > 1),
    )

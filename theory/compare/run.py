"""Run a map: every method tuned in every cell, exactly, with a resumable cache.

The work is cut into units ``(zeta, method, H)``: one call of :func:`theory.compare.tune.tune`
over PALSGD's ``(eta, p)`` cells (one cell for the methods without pulls, whose result
serves every ``(eta, p)``; minimisers SGD's one unit serves every ``H``). A unit's result is
stored as JSON under ``cache_dir``, keyed by everything it depends on (the problem's arrays,
the method, ``H``, the cells, the targets, the round caps, the grid and the engine's
sources), so an interrupted map resumes where it stopped and a changed input recomputes only
what it changes.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from core.errors import UserInputError
from core.io import atomic_write_json
from core.records import Json, JsonRow
from theory.compare.bounds_side import agreement, score_bounds
from theory.compare.exact import Quadratic
from theory.compare.methods import METHODS, Method, round_cost
from theory.compare.precision import longdouble_verifier
from theory.compare.records import CellResult, MapResult
from theory.compare.spec import MapSpec, ProblemSource
from theory.compare.summary import summarize
from theory.compare.tune import Tuned, exact_evaluator, tune
from theory.problems.hessians import HeteroHessianQuadratic

__all__ = [
    "run_map", "ProblemConstants", "problem_constants", "bound_constants", "map_units",
    "caps_for", "columns",
]  # fmt: skip

_SOURCES = ("pairs.py", "scan.py", "exact.py", "tune.py", "refine.py", "polish.py", "probe.py",
            "methods.py", "precision.py")  # fmt: skip


def _engine_hash() -> str:
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    h.update((here.parent / "moments" / "rounds.py").read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class ProblemConstants(JsonRow):
    """A quadratic's exact constants, as ``problems[str(zeta)]`` of ``map.json``: ``K``
    workers, dimension ``d``, largest curvature ``L``, gradient-noise variance ``sigma2``
    (one worker, total), initial gap ``F0 = f(x0) - f*``, heterogeneity ``zeta2_region``
    (the supremum of ``(1/K) sum_k ||grad f_k - grad f||^2`` on the declared region) and
    ``zeta2_star`` (at the optimum), ``grad_norm_sq_x0 = ||grad f(x0)||^2``, and the arrays
    ``eigenvalues`` (``K x d``), ``minimisers`` (``K x d``) and the start ``x0`` (``d``)."""

    K: int
    d: int
    L: float
    sigma2: float
    F0: float
    zeta2_region: float
    zeta2_star: float
    grad_norm_sq_x0: float
    eigenvalues: list[list[float]]
    minimisers: list[list[float]]
    x0: list[float]


def problem_constants(prob: HeteroHessianQuadratic) -> ProblemConstants:
    """The problem's exact constants (``zeta2`` on its declared region, ``zeta2_star`` at
    the optimum) and arrays, for the map's JSON."""
    return ProblemConstants(
        K=prob.K, d=prob.d, L=prob.L, sigma2=prob.sigma2, F0=prob.F0,
        zeta2_region=prob.zeta2, zeta2_star=prob.zeta2_star,
        grad_norm_sq_x0=float(np.sum(prob.grad(prob.x0()) ** 2)),
        eigenvalues=prob.eigenvalues.tolist(), minimisers=prob.minimisers.tolist(),
        x0=prob.x0().tolist(),
    )  # fmt: skip


def bound_constants(prob: HeteroHessianQuadratic) -> dict[str, float]:
    """The constants the bounds take: exact ``L, sigma, F0, K`` and ``zeta`` over the
    problem's declared region (A3 holds on bounded regions only when Hessians differ)."""
    return {
        "L": prob.L, "sigma": math.sqrt(prob.sigma2), "zeta": math.sqrt(prob.zeta2),
        "K": prob.K, "F0": prob.F0,
    }  # fmt: skip


def caps_for(spec: MapSpec, m: Method, H: int, cells: list[tuple[float, float]]) -> np.ndarray:
    caps = []
    for _, p in cells:
        c = max(
            math.floor(B / round_cost(m, kind, H, p, spec.prices) + 1e-9)
            if round_cost(m, kind, H, p, spec.prices) > 0 else spec.max_rounds
            for kind, B in spec.budgets.items()
        )  # fmt: skip
        caps.append(min(c, spec.max_rounds))
    return np.asarray(caps, dtype=np.int64)


def _unit(
    spec: MapSpec, q: Quadratic, prob: HeteroHessianQuadratic, m: Method, H: int, cache: Path | None
) -> list[list[Tuned]]:
    cells = spec.cells if m.pulls else [(0.0, 0.0)]
    caps = caps_for(spec, m, H, cells)
    path = None
    if cache is not None:
        key = json.dumps(
            [problem_constants(prob).to_dict(), m.name, H, cells, list(spec.eps), caps.tolist(),
             asdict(spec.grid), _engine_hash()], sort_keys=True,
        )  # fmt: skip
        path = cache / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                return [[Tuned(**t) for t in row] for row in data]
            except (ValueError, TypeError):
                pass  # a corrupt entry is recomputed
    res = tune(exact_evaluator(q), m, H=H, cells=cells, eps=np.asarray(spec.eps), caps=caps,
               grid=spec.grid, L=prob.L, verify=longdouble_verifier(q))  # fmt: skip
    if path is not None:
        atomic_write_json(path, [[t.to_dict() for t in row] for row in res])
    return res


def map_units(spec: MapSpec, methods: list[Method]) -> list[tuple[float | None, Method, int]]:
    """The units ``(zeta, method, H)`` of a map (minibatch SGD: one unit per ``zeta``)."""
    return [(z, m, H) for z in spec.zetas for m in methods for H in (spec.H if m.local else (1,))]


def run_map(
    spec: MapSpec,
    source: ProblemSource | None = None,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = False,
    bounds: bool = True,
    tuned_points: bool = True,
) -> MapResult:
    """Compute every cell of ``spec`` exactly (:mod:`theory.compare.exact`).

    ``source``: the problem (default: the generated heterogeneous-Hessian family);
    ``cache_dir``: where unit results are kept between runs (``None``: no cache);
    ``progress``: a bar over the units; ``bounds``: score the registered bounds against the
    result (:mod:`theory.compare.bounds_side`; ``tuned_points``: also at every tuned point).
    """
    if spec.sync_delay:
        raise UserInputError(
            "sync_delay needs the Monte-Carlo engine: the exact engine's round maps have no "
            "overlapped sync"
        )
    source = ProblemSource() if source is None else source
    cache = None if cache_dir is None else Path(cache_dir)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    methods = [METHODS[n] for n in spec.methods]
    units = map_units(spec, methods)
    results: dict[tuple, list[list[Tuned]]] = {}
    problems: dict[str, Mapping[str, Json]] = {}
    built: dict[float | None, tuple[HeteroHessianQuadratic, Quadratic]] = {}
    for z, m, H in tqdm(units, desc="palsgd map", unit="unit", disable=not progress):
        if z not in built:
            prob = source.build(z)
            built[z] = (prob, Quadratic.of(prob))
            problems[str(z)] = problem_constants(prob)
        prob, q = built[z]
        results[z, m.name, H] = _unit(spec, q, prob, m, H, cache)
    cells = _assemble(spec, methods, results)
    quads = {z: q for z, (_, q) in built.items()}
    if bounds:
        consts = {z: bound_constants(prob) for z, (prob, _) in built.items()}
        score_bounds(spec, cells, quads, consts, tuned_points=tuned_points, progress=progress)
    summary = summarize(cells, quads)
    if bounds:
        summary = replace(summary, agreement=agreement(cells))
    return MapResult(
        cells=cells,
        spec=spec,
        problems={**problems, "source": source.describe()},
        engine="exact",
        elapsed_s=time.perf_counter() - t0,
        summary=summary,
    )


def columns(spec: MapSpec, e: int) -> tuple[int, int]:
    """The tuned targets of ``eps[e]`` under ``spec.criterion`` and under the other one
    (the evaluators' columns: first passage ``0 .. E-1``, sustained ``E .. 2E-1``)."""
    E = len(spec.eps)
    first, sustained = e, E + e
    return (sustained, first) if spec.criterion == "sustained" else (first, sustained)


def _costs(spec, methods, per, est, kind, B, H, p):
    """``(cost, rounds, intervals)`` of every method in one budget from its tuned result
    ``per[name]`` (or its Monte-Carlo re-estimate ``est[name]`` when given)."""
    cost, rounds, iv = {}, {}, {}
    for m in methods:
        price = round_cost(m, kind, H, p, spec.prices)
        r = per[m.name].rounds
        if est is not None:
            h = est[m.name]
            r = None if h is None else h[0]
            lo = None if h is None or h[1] is None else h[1] * price
            hi = math.inf if h is None or h[2] is None else h[2] * price
            iv[m.name] = None if lo is None else (lo, hi)
        c = None if r is None else r * price
        cost[m.name] = c if c is not None and c <= B * (1 + 1e-12) else None
        rounds[m.name] = r
    return cost, rounds, iv


def _assemble(
    spec: MapSpec, methods: list[Method], results, holdouts: dict | None = None
) -> list[CellResult]:
    """The cells from the units' results. ``holdouts[(zeta, method, H, cell, target)]``: a
    Monte-Carlo re-estimate ``(rounds, lo, hi)`` of the tuned configuration, which then
    gives the cost and its interval."""
    out = []
    for z in spec.zetas:
        for H in spec.H:
            for ci, (eta, p) in enumerate(spec.cells):
                for e, eps in enumerate(spec.eps):
                    views = []
                    for col in columns(spec, e):
                        per, est = {}, None if holdouts is None else {}
                        for m in methods:
                            Hm = H if m.local else 1
                            cj = ci if m.pulls else 0
                            row = results[z, m.name, Hm][cj]
                            # a start that already meets eps is a 0-round answer whatever
                            # follows: return x0 (first passage at round 0)
                            per[m.name] = row[e] if row[e].rounds == 0 else row[col]
                            if est is not None:
                                est[m.name] = holdouts.get((z, m.name, Hm, cj, col))
                        views.append((per, est))
                    (per, est), (_, other_est) = views
                    for kind, B in spec.budgets.items():
                        cost, rounds, iv = _costs(spec, methods, per, est, kind, B, H, p)
                        o_cost, o_rounds, o_iv = _costs(
                            spec, methods, views[1][0], other_est, kind, B, H, p
                        )
                        out.append(
                            CellResult(
                                H=H,
                                eta=eta,
                                p=p,
                                zeta=z,
                                eps=eps,
                                budget=kind,
                                B=B,
                                cost=cost,
                                rounds=rounds,
                                tuned={n: t.to_dict() for n, t in per.items()},
                                intervals=iv,
                                criterion=spec.criterion,
                                other_cost=o_cost,
                                other_rounds=o_rounds,
                                other_intervals=o_iv,
                            )  # fmt: skip
                        )
    return out

"""Run a map by Monte Carlo (:mod:`theory.compare.montecarlo`): every method tuned alike on a
nonconvex heterogeneous family, the tuned configurations re-estimated on fresh seeds, and a
cell won only where the cost intervals separate."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from core.errors import UserInputError
from core.validation import check_int
from theory.compare.family_file import ProblemFamily
from theory.compare.methods import METHODS
from theory.compare.montecarlo import build_family, estimate, mc_evaluator
from theory.compare.records import MapResult
from theory.compare.run import _assemble, caps_for, map_units
from theory.compare.spec import MapSpec
from theory.compare.summary import summarize
from theory.compare.tune import tune

__all__ = ["run_mc_map"]


def run_mc_map(
    spec: MapSpec,
    *,
    family: str | ProblemFamily = "hetero_cosine",
    K: int = 4,
    d: int = 2,
    sigma: float = 1.0,
    seed: int = 0,
    replicas: int = 64,
    holdout_replicas: int = 256,
    progress: bool = False,
) -> MapResult:
    """Every cell of ``spec`` by Monte Carlo on ``family``: a name of
    :data:`theory.compare.montecarlo.FAMILIES` (``K`` workers, dimension ``d``, noise
    ``sigma``, problem ``seed``) or a user's :class:`~theory.compare.family_file.
    ProblemFamily` (a family file's, or any object with ``build(zeta)`` and ``describe()``;
    ``K, d, sigma`` unused, ``spec.zeta = None``: its own heterogeneity).

    Tuning uses ``replicas`` simulations per configuration on seed ``seed + 1``; each tuned
    configuration is then simulated ``holdout_replicas`` times on seed ``seed + 2``, which
    gives the reported cost and its interval. ``spec.zeta`` must be given for a named family
    (its heterogeneity).
    """
    replicas = check_int("replicas", replicas, 2, integral_floats=True)
    holdout_replicas = check_int("holdout_replicas", holdout_replicas, 2, integral_floats=True)
    named = isinstance(family, str)
    if spec.zeta is None and named:
        raise UserInputError("a Monte-Carlo map needs the family's heterogeneity: give zeta")
    t0 = time.perf_counter()
    methods = [
        replace(METHODS[n], sync_delay=spec.sync_delay) if METHODS[n].local else METHODS[n]
        for n in spec.methods
    ]
    problems: dict[str, Any] = {}
    built = {}
    results, holdouts = {}, {}
    for z, m, H in tqdm(map_units(spec, methods), desc="palsgd map (Monte Carlo)",
                        unit="unit", disable=not progress):  # fmt: skip
        if z not in built:
            if named:
                built[z] = build_family(family, zeta=z, K=K, d=d, sigma=sigma, seed=seed)
            else:
                built[z] = family.build(z)
            problems[str(z)] = built[z].describe()
        prob = built[z]
        cells = spec.cells if m.pulls else [(0.0, 0.0)]
        caps = caps_for(spec, m, H, cells)
        # no refinement: on a sampled value a cliff's midpoints chase the sampling noise
        grid = replace(spec.grid, refine=0)
        res = tune(mc_evaluator(prob, replicas=replicas, seed=seed + 1), m, H=H, cells=cells,
                   eps=np.asarray(spec.eps), caps=caps, grid=grid, L=prob.L)  # fmt: skip
        results[z, m.name, H] = res
        for ci, row in enumerate(res):
            eta, p = cells[ci]
            seen: dict[tuple, list] = {}
            for e, t in enumerate(row):
                if t.rounds is None:
                    continue
                key = (t.alpha, t.gamma)
                if key not in seen:
                    seen[key] = estimate(
                        prob, m, H=H, eta=eta, p=p, alpha=t.alpha, gamma=t.gamma or 1.0,
                        mu=t.mu or 0.0, eps=np.asarray(spec.eps), cap=int(caps[ci]),
                        replicas=holdout_replicas, seed=seed + 2, sustained=True,
                    )  # fmt: skip
                est = seen[key][e]
                holdouts[z, m.name, H, ci, e] = (est.rounds, est.lo, est.hi)
    cells = _assemble(spec, methods, results, holdouts)
    source: dict[str, Any] = (
        {"family": family, "K": K, "d": d, "sigma": sigma, "seed": seed}
        if named else family.describe()
    )  # fmt: skip
    source.update(replicas=replicas, holdout_replicas=holdout_replicas)
    summary = summarize(cells)  # its verdicts count the cells the intervals decide
    return MapResult(
        cells=cells,
        spec=spec.to_dict(),
        problems={**problems, "source": source},
        engine="montecarlo",
        elapsed_s=time.perf_counter() - t0,
        summary=summary,
    )  # fmt: skip

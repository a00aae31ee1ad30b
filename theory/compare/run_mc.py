"""Run a map by Monte Carlo (:mod:`theory.compare.montecarlo`): every method tuned alike on a
nonconvex heterogeneous family, the tuned configurations re-estimated on fresh seeds, and a
cell won only where the cost intervals separate."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from tqdm.auto import tqdm

from core.errors import UserInputError
from core.records import Json, JsonObject, JsonRow, plain
from core.validation import check_int
from theory.compare.family_file import ProblemFamily
from theory.compare.methods import METHODS, Method
from theory.compare.montecarlo import build_family, estimate, mc_evaluator
from theory.compare.records import MapResult
from theory.compare.run import _assemble, caps_for, map_units
from theory.compare.spec import MapSpec
from theory.compare.summary import summarize
from theory.compare.tune import Tuned, tune
from theory.problems import Problem

__all__ = ["run_mc_map", "NamedFamilySource", "UserFamilySource"]

#: ``holdouts[(zeta, method, H, cell, target)]``: a tuned configuration's re-estimate
#: ``(rounds, lo, hi)`` on fresh seeds (rounds; ``None``: not reached by the cap)
Holdouts = dict[tuple[float | None, str, int, int, int], tuple[int | None, int | None, int | None]]


@dataclass(frozen=True)
class NamedFamilySource(JsonRow):
    """A Monte-Carlo map's problem from the named ``family``
    (:data:`theory.compare.montecarlo.FAMILIES`): ``K`` workers, dimension ``d``,
    gradient-noise std ``sigma``, problem ``seed``; ``replicas`` simulations per
    configuration while tuning, ``holdout_replicas`` per tuned configuration (counts)."""

    family: str
    K: int
    d: int
    sigma: float
    seed: int
    replicas: int
    holdout_replicas: int


@dataclass(frozen=True)
class UserFamilySource(JsonRow):
    """A Monte-Carlo map's problem from a user's family: its ``description``
    (``ProblemFamily.describe()``, written flat) with the ``replicas`` and
    ``holdout_replicas`` of :class:`NamedFamilySource`."""

    description: Mapping[str, Json]
    replicas: int
    holdout_replicas: int

    def to_dict(self) -> JsonObject:
        d = plain(self.description)
        assert isinstance(d, dict)
        return {**d, "replicas": self.replicas, "holdout_replicas": self.holdout_replicas}


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
    if spec.zeta is None and isinstance(family, str):
        raise UserInputError("a Monte-Carlo map needs the family's heterogeneity: give zeta")
    t0 = time.perf_counter()
    methods = [
        replace(METHODS[n], sync_delay=spec.sync_delay) if METHODS[n].local else METHODS[n]
        for n in spec.methods
    ]
    problems: dict[str, Mapping[str, Json]] = {}
    built: dict[float | None, Problem] = {}
    results: dict[tuple[float | None, str, int], list[list[Tuned]]] = {}
    holdouts: Holdouts = {}
    for z, m, H in tqdm(map_units(spec, methods), desc="palsgd map (Monte Carlo)",
                        unit="unit", disable=not progress):  # fmt: skip
        if z not in built:
            if isinstance(family, str):
                built[z] = build_family(family, zeta=z, K=K, d=d, sigma=sigma, seed=seed)
            else:
                built[z] = family.build(z)
            problems[str(z)] = built[z].describe()
        cells = spec.cells if m.pulls else [(0.0, 0.0)]
        caps = caps_for(spec, m, H, cells)
        # no refinement: on a sampled value a cliff's midpoints chase the sampling noise
        grid = replace(spec.grid, refine=0)
        res = tune(mc_evaluator(built[z], replicas=replicas, seed=seed + 1), m, H=H,
                   cells=cells, eps=np.asarray(spec.eps), caps=caps, grid=grid,
                   L=built[z].L)  # fmt: skip
        results[z, m.name, H] = res
        _holdouts(holdouts, spec, built[z], m, z, H, cells, caps, res,
                  replicas=holdout_replicas, seed=seed + 2)  # fmt: skip
    source: NamedFamilySource | UserFamilySource = (
        NamedFamilySource(family, K, d, sigma, seed, replicas, holdout_replicas)
        if isinstance(family, str)
        else UserFamilySource(family.describe(), replicas, holdout_replicas)
    )  # fmt: skip
    cells_out = _assemble(spec, methods, results, holdouts)
    return MapResult(
        cells=cells_out,
        spec=spec,
        problems={**problems, "source": source},
        engine="montecarlo",
        elapsed_s=time.perf_counter() - t0,
        summary=summarize(cells_out),  # its verdicts count the cells the intervals decide
    )  # fmt: skip


def _holdouts(
    out: Holdouts,
    spec: MapSpec,
    prob: Problem,
    m: Method,
    z: float | None,
    H: int,
    cells: list[tuple[float, float]],
    caps: np.ndarray,
    res: list[list[Tuned]],
    *,
    replicas: int,
    seed: int,
) -> None:
    """Re-estimate every distinct tuned configuration of one unit on ``replicas`` fresh
    replicas of ``seed`` (sustained and first passages), into ``out``."""
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
                    replicas=replicas, seed=seed, sustained=True,
                )  # fmt: skip
            est = seen[key][e]
            out[z, m.name, H, ci, e] = (est.rounds, est.lo, est.hi)

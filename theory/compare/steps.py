"""The step ratio a map measures: PALSGD's steps to the target over minibatch SGD's (DDP's).

The paper-scale prediction (:func:`empirical.cost.paper_scale_prediction`,
:func:`empirical.cost.mechanisms.mechanism_table`) prices "the pull itself" through the
ratio of steps to the target, 1 unless told. :func:`step_ratio` reads it from a map: in every
cell where both reach eps, the best PALSGD's steps (its rounds times ``H``, pull steps
included, as the cost model counts steps) over minibatch SGD's steps (its rounds), per coin
model; the median and range over the cells. :func:`empirical.cost.mechanisms.format_mechanisms`
prints the mechanism table at that ratio, every profile row with the link each gain needs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from core.records import JsonObject
from theory.compare.methods import PALSGD_METHODS, SHARED_METHODS
from theory.compare.records import MapResult

__all__ = ["StepRatio", "step_ratio"]


@dataclass(frozen=True)
class StepRatio:
    """PALSGD's steps to eps over minibatch SGD's, over the cells where both reach it."""

    coins: str
    cells: int
    median: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> JsonObject:
        return asdict(self)


def _best_steps(c: Any, names: tuple[str, ...]) -> int | None:
    steps = [c.rounds[n] * c.H for n in names if c.rounds.get(n) is not None]
    return min(steps) if steps else None


def step_ratio(result: MapResult, budget: str | None = None) -> dict[str, StepRatio]:
    """Per coin model (``independent``: PALSGD with either outer family; ``shared``), the
    step ratio over the cells of ``budget`` (default: the map's first) where PALSGD and
    minibatch SGD both reach eps within it (``result``: anything with ``cells`` of
    :class:`~theory.compare.records.CellResult` attributes ``budget``, ``H``, ``rounds``)."""
    budget = budget or result.cells[0].budget
    cells = [c for c in result.cells if c.budget == budget and "sgd" in c.rounds]
    out = {}
    for coins, names in (("independent", PALSGD_METHODS), ("shared", SHARED_METHODS)):
        r = []
        for c in cells:
            mine, sgd = _best_steps(c, names), c.rounds["sgd"]
            if mine is not None and sgd:
                r.append(mine / sgd)
        out[coins] = StepRatio(coins, len(r), float(np.median(r)) if r else None,
                               min(r) if r else None, max(r) if r else None)  # fmt: skip
    return out

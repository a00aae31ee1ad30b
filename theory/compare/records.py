"""The typed results of a map: one :class:`CellResult` per cell, serialised in one place.

A cell is ``(H, eta, p, zeta, eps, budget)``. Its ``cost`` maps every method to the least
cost at which it reaches ``E||grad f||^2 <= eps`` at the model it returns (the anchor after a
sync; minibatch SGD: the model after a step) within the budget ``B`` (``None``: not within
it), each method tuned over its own grid (:mod:`theory.compare.tune`). ``ratio`` is the best
PALSGD cost (independent coins, either outer family) over the best baseline cost (minibatch
SGD, Local SGD, DiLoCo): below 1 the pull pays.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.io import atomic_write_json, write_csv
from theory.compare.methods import BASELINES, PALSGD_METHODS, SHARED_METHODS

__all__ = ["MEASURED_AT", "PALSGD_SIDE", "BASELINE_SIDE", "CellResult", "MapResult", "best_of"]

#: the two sides of a cell's comparison (:attr:`CellResult.winner`): the best PALSGD method
#: against the best baseline
PALSGD_SIDE, BASELINE_SIDE = "palsgd", "baseline"

MEASURED_AT = (
    "E||grad f||^2 at the model each method returns: the anchor z_r after a sync "
    "(minibatch SGD: the model after a step)"
)


def best_of(cost: dict[str, float | None], names: tuple[str, ...]) -> tuple[str | None, float]:
    """The cheapest of ``names`` in ``cost`` (``(None, inf)`` when none is within budget)."""
    best, val = None, math.inf
    for n in names:
        c = cost.get(n)
        if c is not None and c < val:
            best, val = n, c
    return best, val


@dataclass
class CellResult:
    """One cell of a map (see the module docstring). ``tuned[method]``: the tuned
    configuration and its edges (:class:`theory.compare.tune.Tuned` as a dict);
    ``bounds``: the bound map's view of the cell, when computed
    (:mod:`theory.compare.bounds_side`). ``criterion``: what "reaches eps" means for
    ``cost`` and ``rounds`` (``"sustained"``: the value stays at or below eps from that round
    on; ``"first"``: first passage); ``other_cost``, ``other_rounds``,
    ``other_intervals``: the same under the other criterion (each method tuned for it)."""

    H: int
    eta: float
    p: float
    zeta: float | None
    eps: float
    budget: str
    B: float
    cost: dict[str, float | None]
    rounds: dict[str, int | None]
    tuned: dict[str, dict[str, Any]]
    bounds: dict[str, Any] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    criterion: str = "sustained"
    other_cost: dict[str, float | None] = field(default_factory=dict)
    other_rounds: dict[str, int | None] = field(default_factory=dict)
    other_intervals: dict[str, tuple[float, float] | None] = field(default_factory=dict)

    @property
    def best_palsgd(self) -> tuple[str | None, float]:
        return best_of(self.cost, tuple(m for m in PALSGD_METHODS if m in self.cost))

    @property
    def best_baseline(self) -> tuple[str | None, float]:
        return best_of(self.cost, tuple(m for m in BASELINES if m in self.cost))

    @property
    def ratio(self) -> float | None:
        """Best PALSGD cost / best baseline cost (``inf``: only the baseline reaches eps;
        ``0``: only PALSGD does; ``None``: neither, or a side not in the map)."""
        _, a = self.best_palsgd
        _, b = self.best_baseline
        if math.isinf(a) and math.isinf(b):
            return None
        if math.isinf(b):
            return 0.0
        if b == 0.0:  # the start already meets eps: a 0-round answer
            return 1.0 if a == 0.0 else math.inf
        return a / b

    @property
    def winner(self) -> str:
        """``"palsgd"``, ``"baseline"``, ``"tie"`` or ``"neither"`` (no method within budget);
        with Monte-Carlo ``intervals``, a side wins only when the cost intervals of the two
        best methods separate (else ``"undecided"``)."""
        return self.winner_of(PALSGD_METHODS)

    @property
    def shared_winner(self) -> str | None:
        """:attr:`winner` for PALSGD with the authors' shared coins (``palsgd_shared``)
        against the same baselines; ``None`` when the map did not run it."""
        return self.winner_of(SHARED_METHODS) if "palsgd_shared" in self.cost else None

    @property
    def other_winner(self) -> str | None:
        """:attr:`winner` under the other criterion (``None``: not computed)."""
        if not self.other_cost:
            return None
        return self.winner_of(PALSGD_METHODS, other=True)

    @property
    def other_shared_winner(self) -> str | None:
        """:attr:`shared_winner` under the other criterion (``None``: not computed)."""
        if not self.other_cost or "palsgd_shared" not in self.other_cost:
            return None
        return self.winner_of(SHARED_METHODS, other=True)

    def winner_of(self, palsgd_methods: tuple[str, ...], *, other: bool = False) -> str:
        """The winner of the best of ``palsgd_methods`` against the best baseline (``other``:
        under the other criterion)."""
        cost = self.other_cost if other else self.cost
        intervals = self.other_intervals if other else self.intervals
        _, a = pal = best_of(cost, tuple(m for m in palsgd_methods if m in cost))
        _, b = base = best_of(cost, tuple(m for m in BASELINES if m in cost))
        if math.isinf(a) and math.isinf(b):
            return "neither"
        if a == b == 0.0:  # both answer at the start (0 rounds): no interval can split them
            return "tie"
        if intervals:
            inf = (math.inf, math.inf)
            ia = (intervals.get(pal[0]) if pal[0] else None) or inf
            ib = (intervals.get(base[0]) if base[0] else None) or inf
            if ia[1] < ib[0]:
                return PALSGD_SIDE
            if ib[1] < ia[0]:
                return BASELINE_SIDE
            return "undecided"
        return PALSGD_SIDE if a < b else BASELINE_SIDE if a > b else "tie"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        pal, base = self.best_palsgd, self.best_baseline
        out.update(
            ratio=self.ratio, winner=self.winner, best_palsgd=pal[0], best_baseline=base[0],
            measured_at="anchor after a sync",
        )  # fmt: skip
        if self.shared_winner is not None:
            out["shared_winner"] = self.shared_winner
        if self.other_winner is not None:
            out["other_winner"] = self.other_winner
        return out

    def row(self) -> dict[str, Any]:
        """A flat CSV row: the cell, every method's cost and tuned step, the ratio."""
        row: dict[str, Any] = {
            "H": self.H, "eta": self.eta, "p": self.p, "zeta": self.zeta, "eps": self.eps,
            "budget": self.budget, "B": self.B,
        }  # fmt: skip
        for m in self.cost:
            t = self.tuned.get(m, {})
            row[f"cost_{m}"] = self.cost[m]
            if self.intervals:
                iv = self.intervals.get(m)
                row[f"cost_lo_{m}"], row[f"cost_hi_{m}"] = iv if iv else (None, None)
            row[f"rounds_{m}"] = self.rounds[m]
            row[f"alpha_{m}"] = t.get("alpha")
            row[f"gamma_{m}"] = t.get("gamma")
        row.update(ratio=self.ratio, winner=self.winner)
        for key, val in self.bounds.items():
            if not isinstance(val, dict | list):
                row[f"bound_{key}"] = val
        return row


@dataclass
class MapResult:
    """Every cell of a map with what produced it: the spec, the problems' constants per
    ``zeta``, the engine (``"exact"`` or ``"montecarlo"``) and the run time."""

    cells: list[CellResult]
    spec: dict[str, Any]
    problems: dict[str, dict[str, Any]]
    engine: str = "exact"
    elapsed_s: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "measured_at": MEASURED_AT,
            "spec": self.spec,
            "problems": self.problems,
            "elapsed_s": self.elapsed_s,
            "summary": self.summary,
            "cells": [c.to_dict() for c in self.cells],
        }

    def write(self, json_path: str | Path | None = None, csv_path: str | Path | None = None):
        """Write the JSON (one entry per cell) and/or the flat CSV."""
        if json_path is not None:
            atomic_write_json(json_path, self.to_dict())
        if csv_path is not None:
            rows = [c.row() for c in self.cells]
            cols = list(dict.fromkeys(k for r in rows for k in r))
            write_csv(csv_path, rows, cols)

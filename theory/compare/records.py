"""The typed results of a map: one :class:`CellResult` per cell, serialised in one place.

A cell is ``(H, eta, p, zeta, eps, budget)``. Its ``cost`` maps every method to the least
cost at which it reaches ``E||grad f||^2 <= eps`` at the model it returns (the anchor after a
sync; minibatch SGD: the model after a step) within the budget ``B`` (``None``: not within
it), each method tuned over its own grid (:mod:`theory.compare.tune`). ``ratio`` is the best
PALSGD cost (independent coins, either outer family) over the best baseline cost (minibatch
SGD, Local SGD, DiLoCo): below 1 the pull pays.

Every result is a frozen, typed record; dicts appear only where ``map.json``
(:meth:`CellResult.to_dict`, :meth:`MapResult.to_dict`) and ``map.csv`` (:class:`CellRow`)
are written, and :meth:`CellResult.from_dict` rebuilds a cell from its JSON object. The
parts of a cell that other modules fill or read by key (``tuned``, ``bounds``) are typed
dicts (:class:`TunedDict`, :class:`CellBounds`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from core.io import atomic_write_json, write_csv
from core.records import Json, JsonObject, plain
from theory.compare.methods import BASELINES, PALSGD_METHODS, SHARED_METHODS

if TYPE_CHECKING:
    from theory.compare.spec import MapSpec
    from theory.compare.summary_records import MapSummary

__all__ = [
    "MEASURED_AT", "PALSGD_SIDE", "BASELINE_SIDE", "CellResult", "CellRow", "MethodColumns",
    "MapResult", "TunedDict", "CellBounds", "TunedPointScore", "TermScore", "Interval",
    "best_of",
]  # fmt: skip

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


class TunedDict(TypedDict):
    """One method's tuned result in a cell as the map keeps and writes it
    (:meth:`theory.compare.tune.Tuned.to_dict`): ``rounds`` the least rounds to the target
    over the grid (``None``: not by the cap); ``alpha`` the inner step, ``gamma`` the outer
    rate, ``mu`` the outer momentum (``None``: the method has none); ``alpha_edge``,
    ``gamma_edge`` where the optimum sits on its grid (``"interior"``, ``"lower"``,
    ``"upper"``, ``"stability"``); ``configs`` configurations evaluated, ``diverged`` of them
    diverged, ``extended`` grid extensions, ``refused`` configurations the precision guard
    refused, ``rechecked`` optima it confirmed (counts, per cell)."""

    rounds: int | None
    alpha: float | None
    gamma: float | None
    mu: float | None
    alpha_edge: str
    gamma_edge: str
    configs: int
    diverged: int
    extended: int
    refused: int
    rechecked: int


class TermScore(TypedDict):
    """A term family of a bound at a tuned point: the bound's terms of that family and the
    exact part of the value they bound (both in ``E||grad f||^2`` units)."""

    bound: float
    exact: float


class TunedPointScore(TypedDict):
    """One bound at one method's tuned point (:mod:`theory.compare.bounds_side`):
    ``inside_conditions`` whether the configuration meets the bound's conditions; ``bound``
    its value and ``exact`` the exact time average it bounds (``E||grad f||^2``);
    ``tightness`` ``exact / bound`` (``None``: a bound of 0); ``terms`` per term family
    (``F0``, ``noise``, ``heterogeneity``); ``miss`` the family whose terms miss most."""

    inside_conditions: bool
    bound: float
    exact: float
    tightness: float | None
    terms: dict[str, TermScore]
    miss: str


class CellBounds(TypedDict, total=False):
    """The bound map's view of a cell, filled in place by
    :func:`theory.compare.bounds_side.score_bounds` (empty when the bounds were skipped):
    per method the cost its best guarantee needs (``guaranteed_cost``; ``cost``: where that
    fits the budget; ``by_bound``: per bound; in the budget's units, ``None``: never), the
    guarantees' ratio best PALSGD / best baseline (``ratio``), and per method and bound the
    score at the tuned point (``tuned_point``)."""

    guaranteed_cost: dict[str, float | None]
    cost: dict[str, float | None]
    by_bound: dict[str, dict[str, float | None]]
    ratio: float | None
    tuned_point: dict[str, dict[str, TunedPointScore]]


#: a cost interval ``(lo, hi)`` in the budget's units (Monte Carlo, 99%)
Interval = tuple[float, float]


@dataclass(frozen=True)
class CellResult:
    """One cell of a map (see the module docstring).

    The cell: ``H`` local steps per round, ``eta`` the pull rate and ``p`` the pull
    probability (PALSGD's), ``zeta`` the heterogeneity at the optimum (``None``: the
    problem's own), ``eps`` the target on ``E||grad f||^2``, ``budget`` its kind (``grads``:
    gradient evaluations per worker, ``rounds``: communication rounds, ``time``: modelled
    seconds) and ``B`` its size in those units. Per method: ``cost`` in the budget's units
    (``None``: not within ``B``), ``rounds`` to eps (``None``: not by the cap), ``tuned``
    its tuned configuration (:class:`TunedDict`), ``intervals`` the Monte-Carlo cost
    interval (empty for the exact engine; ``None`` for a method: not reached). ``bounds``:
    the bound map's view of the cell, when computed (:class:`CellBounds`). ``criterion``:
    what "reaches eps" means for ``cost`` and ``rounds`` (``"sustained"``: the value stays
    at or below eps from that round on; ``"first"``: first passage); ``other_cost``,
    ``other_rounds``, ``other_intervals``: the same under the other criterion (each method
    tuned for it)."""

    H: int
    eta: float
    p: float
    zeta: float | None
    eps: float
    budget: str
    B: float
    cost: dict[str, float | None]
    rounds: dict[str, int | None]
    tuned: dict[str, TunedDict]
    bounds: CellBounds = field(default_factory=lambda: CellBounds())
    intervals: dict[str, Interval | None] = field(default_factory=dict)
    criterion: str = "sustained"
    other_cost: dict[str, float | None] = field(default_factory=dict)
    other_rounds: dict[str, int | None] = field(default_factory=dict)
    other_intervals: dict[str, Interval | None] = field(default_factory=dict)

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

    def to_dict(self) -> JsonObject:
        """The cell's object in ``map.json``: every field, then the verdicts."""
        out: JsonObject = asdict(self)
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

    @classmethod
    def from_dict(cls, row: Mapping[str, Json]) -> CellResult:
        """The cell of one object of ``map.json`` (:meth:`to_dict`, as read back with
        :func:`core.io.from_json_safe`); the verdicts written beside are recomputed."""
        kw = {f.name: copy.deepcopy(row[f.name]) for f in fields(cls) if f.name in row}
        for name in ("intervals", "other_intervals"):
            if name in kw:
                kw[name] = {m: None if v is None else tuple(v) for m, v in kw[name].items()}
        return cls(**kw)

    def row(self) -> CellRow:
        """The cell's flat row of ``map.csv`` (:class:`CellRow`)."""
        methods = []
        for m in self.cost:
            t = self.tuned.get(m, {})
            interval = None
            if self.intervals:
                interval = self.intervals.get(m) or (None, None)
            methods.append(
                MethodColumns(
                    method=m,
                    cost=self.cost[m],
                    interval=interval,
                    rounds=self.rounds[m],
                    alpha=t.get("alpha"),
                    gamma=t.get("gamma"),
                )
            )
        scalars = {k: v for k, v in self.bounds.items() if not isinstance(v, dict | list)}
        return CellRow(
            H=self.H, eta=self.eta, p=self.p, zeta=self.zeta, eps=self.eps,
            budget=self.budget, B=self.B, methods=tuple(methods), ratio=self.ratio,
            winner=self.winner, bound_columns=scalars,
        )  # fmt: skip


@dataclass(frozen=True)
class MethodColumns:
    """One method's columns of a :class:`CellRow`, each named ``<field>_<method>``:
    ``cost`` in the budget's units (``None``: not within it), ``interval`` its Monte-Carlo
    interval, written as ``cost_lo`` and ``cost_hi`` (``None``: the engine gives none, no
    such columns; ``(None, None)``: not reached), ``rounds`` to eps, ``alpha`` the tuned
    inner step, ``gamma`` the tuned outer rate (``None``: none)."""

    method: str
    cost: float | None
    interval: tuple[float | None, float | None] | None
    rounds: int | None
    alpha: float | None
    gamma: float | None

    @property
    def cost_lo(self) -> float | None:
        return None if self.interval is None else self.interval[0]

    @property
    def cost_hi(self) -> float | None:
        return None if self.interval is None else self.interval[1]

    def columns(self) -> dict[str, float | int | None]:
        """``{"<field>_<method>": value}`` in the order of ``map.csv``."""
        m = self.method
        out: dict[str, float | int | None] = {f"cost_{m}": self.cost}
        if self.interval is not None:
            out[f"cost_lo_{m}"], out[f"cost_hi_{m}"] = self.interval
        out.update({f"rounds_{m}": self.rounds, f"alpha_{m}": self.alpha,
                    f"gamma_{m}": self.gamma})  # fmt: skip
        return out


@dataclass(frozen=True)
class CellRow:
    """One flat row of ``map.csv``: the cell (``H, eta, p, zeta, eps, budget, B`` as in
    :class:`CellResult`), every method's columns (:class:`MethodColumns`), the true cost
    ratio best PALSGD / best baseline and the ``winner`` (:attr:`CellResult.ratio`,
    :attr:`CellResult.winner`), and the scalar entries of the bound map's view, each
    written as ``bound_<key>`` (``bound_ratio``: the guarantees' ratio)."""

    H: int
    eta: float
    p: float
    zeta: float | None
    eps: float
    budget: str
    B: float
    methods: tuple[MethodColumns, ...]
    ratio: float | None
    winner: str
    bound_columns: Mapping[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, float | int | str | None]:
        """The row as written, columns in the order of ``map.csv``."""
        out: dict[str, float | int | str | None] = {
            "H": self.H, "eta": self.eta, "p": self.p, "zeta": self.zeta, "eps": self.eps,
            "budget": self.budget, "B": self.B,
        }  # fmt: skip
        for m in self.methods:
            out.update(m.columns())
        out.update(ratio=self.ratio, winner=self.winner)
        out.update({f"bound_{k}": v for k, v in self.bound_columns.items()})
        return out


@dataclass(frozen=True)
class MapResult:
    """Every cell of a map with what produced it: the ``spec``, the problems' descriptions
    (``problems[str(zeta)]``: the problem's constants, ``problems["source"]``: where it came
    from), the ``engine`` (``"exact"`` or ``"montecarlo"``), the run time ``elapsed_s`` in
    seconds and the :class:`~theory.compare.summary_records.MapSummary`."""

    cells: list[CellResult]
    spec: MapSpec | None = None
    problems: Mapping[str, Mapping[str, Json]] = field(default_factory=dict)
    engine: str = "exact"
    elapsed_s: float = 0.0
    summary: MapSummary | None = None

    def to_dict(self) -> JsonObject:
        """The object of ``map.json``."""
        return {
            "engine": self.engine,
            "measured_at": MEASURED_AT,
            "spec": {} if self.spec is None else plain(self.spec),
            "problems": plain(self.problems),
            "elapsed_s": self.elapsed_s,
            "summary": {} if self.summary is None else self.summary.to_dict(),
            "cells": [c.to_dict() for c in self.cells],
        }

    def write(
        self, json_path: str | Path | None = None, csv_path: str | Path | None = None
    ) -> None:
        """Write the JSON (one entry per cell) and/or the flat CSV."""
        if json_path is not None:
            atomic_write_json(json_path, self.to_dict())
        if csv_path is not None:
            rows = [c.row().to_dict() for c in self.cells]
            cols = list(dict.fromkeys(k for r in rows for k in r))
            write_csv(csv_path, rows, cols)

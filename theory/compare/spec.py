"""What a map computes: the problem, the grid of cells, the budgets and the tuning grid.

:class:`ProblemSource` builds the heterogeneous quadratic of each cell (a generated family or
a user's problem file, its heterogeneity set by the cell's ``zeta``); :class:`MapSpec` holds
the axes ``H x eta x p x zeta x eps``, the budgets ``{kind: B}``, the methods and the
:class:`~theory.compare.tune.Grid`. Both validate on construction and name the offending
field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from core.errors import UserInputError
from core.validation import check_choice, check_int, check_number
from theory.compare.methods import BUDGET_KINDS, METHODS, Prices
from theory.compare.tune import Grid
from theory.problems.hessians import (
    HeteroHessianQuadratic,
    load_hetero_hessian,
    make_hetero_hessian,
    with_zeta,
)

__all__ = ["ProblemSource", "MapSpec", "DEFAULT_METHODS", "CRITERIA"]

#: what "reaches eps" means: the value stays at or below eps from that round on
#: (``sustained``, :func:`theory.compare.scan.first_passage`), or first passage
CRITERIA = ("sustained", "first")

#: every method of :data:`theory.compare.methods.METHODS`, in table order
DEFAULT_METHODS = tuple(METHODS)


@dataclass(frozen=True)
class ProblemSource:
    """Where a cell's problem comes from.

    ``path`` given: the :class:`HeteroHessianQuadratic` of that problem file
    (:func:`~theory.problems.hessians.load_hetero_hessian`); else the generated family
    :func:`~theory.problems.hessians.make_hetero_hessian` with ``K, d, L, lam_min, sigma, F0,
    seed``. A cell's ``zeta`` rescales the minimisers about ``x*``
    (:func:`~theory.problems.hessians.with_zeta`); ``zeta = None`` keeps the problem's own.
    """

    path: str | None = None
    K: int = 4
    d: int = 2
    L: float = 1.0
    lam_min: float = 0.1
    sigma: float = 1.0
    F0: float = 1.0
    seed: int = 0

    def build(self, zeta: float | None) -> HeteroHessianQuadratic:
        if self.path is not None:
            prob = load_hetero_hessian(self.path)
            return prob if zeta is None else with_zeta(prob, zeta)
        return make_hetero_hessian(
            K=self.K, d=self.d, L=self.L, lam_min=self.lam_min,
            zeta=1.0 if zeta is None else zeta, sigma=self.sigma, F0=self.F0, seed=self.seed,
        )  # fmt: skip

    def describe(self) -> dict[str, Any]:
        if self.path is not None:
            return {"file": self.path}
        return {
            "family": "hetero_hessian",
            **{k: v for k, v in asdict(self).items() if k != "path"},
        }


def _positive_ints(name: str, values: Any) -> tuple[int, ...]:
    out = []
    for v in values:
        out.append(check_int(name, v, 1, integral_floats=True))
    if not out:
        raise UserInputError(f"'{name}' needs at least one value")
    return tuple(out)


def _floats(name: str, values: Any, low: float, high: float, *, open_low: bool) -> tuple:
    out = []
    for v in values:
        out.append(check_number(name, v, low, high, low_open=open_low, high_open=True))
    if not out:
        raise UserInputError(f"'{name}' needs at least one value")
    return tuple(out)


@dataclass(frozen=True)
class MapSpec:
    """The cells of a map and how each is computed.

    Axes: ``H`` sync intervals, ``eta`` pull rates, ``p`` pull probabilities (PALSGD's cell
    values; the other methods do not depend on them), ``zeta`` heterogeneity at the optimum
    (``None``: the problem's own), ``eps`` targets on ``E||grad f||^2`` at the returned model.
    ``budgets``: ``{kind: B}`` with ``kind`` in ``grads`` (gradient evaluations per worker),
    ``rounds`` (communication rounds) and ``time`` (modelled seconds; needs ``prices``).
    ``max_rounds`` caps the rounds examined per configuration whatever the budget.
    ``sync_delay``: the overlapped sync of every method with rounds (its outer step lands
    ``sync_delay`` local steps after the sync starts, :mod:`theory.algorithm`; ``0``: the
    blocking sync). Monte Carlo only (the exact engine's round maps have no overlapped sync);
    the anchor measured at the end of round ``r`` then holds the outer steps that have
    landed, round ``r``'s landing ``sync_delay`` steps into round ``r + 1``. Compare a map at
    ``sync_delay = 0`` with one at ``tau`` to read what the delay costs in convergence.
    ``criterion``: ``"sustained"`` (default: the value stays at or below eps from the
    counted round on) or ``"first"`` (first passage); every method is tuned for both and the
    other is kept beside (:attr:`theory.compare.records.CellResult.other_cost`).
    """

    H: tuple[int, ...] = (16, 64, 256, 1024)
    eta: tuple[float, ...] = (5.0, 20.0, 50.0, 200.0)
    p: tuple[float, ...] = (0.5,)
    zeta: tuple[float, ...] | None = (0.3, 3.0, 10.0)
    eps: tuple[float, ...] = (0.05, 0.01, 0.002)
    budgets: dict[str, float] = field(default_factory=lambda: {"grads": 2e5})
    methods: tuple[str, ...] = DEFAULT_METHODS
    grid: Grid = field(default_factory=Grid)
    prices: Prices | None = None
    max_rounds: int = 10**6
    sync_delay: int = 0
    criterion: str = "sustained"

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "H", _positive_ints("H", self.H))
        s(self, "eta", _floats("eta", self.eta, 0.0, math.inf, open_low=True))
        s(self, "p", _floats("p", self.p, 0.0, 1.0, open_low=True))
        if self.zeta is not None:
            s(self, "zeta", _floats("zeta", self.zeta, 0.0, math.inf, open_low=False))
        s(self, "eps", _floats("eps", self.eps, 0.0, math.inf, open_low=True))
        if not self.budgets:
            raise UserInputError("'budget' needs at least one KIND:B")
        budgets = {}
        for kind, B in dict(self.budgets).items():
            check_choice("budget", kind, BUDGET_KINDS)
            (budgets[kind],) = _floats(f"budget {kind}", [B], 0.0, math.inf, open_low=True)
        s(self, "budgets", budgets)
        if "time" in budgets and self.prices is None:
            raise UserInputError("the 'time' budget needs prices: give a cluster profile")
        for name in self.methods:
            check_choice("method", name, tuple(METHODS))
        s(self, "methods", tuple(dict.fromkeys(self.methods)))
        (mr,) = _positive_ints("max_rounds", [self.max_rounds])
        s(self, "max_rounds", mr)
        tau = check_int("sync_delay", self.sync_delay, 0, integral_floats=True)
        if tau and tau > min(self.H) - 1:
            raise UserInputError(
                f"sync_delay = {tau} must be at most H - 1 = {min(self.H) - 1} for every H of "
                "the map (the outer step lands before the next sync starts)"
            )
        if tau and "time" in budgets:
            raise UserInputError(
                "the 'time' budget prices blocking syncs only: with sync_delay use the "
                "grads or rounds budget (benchmarks/bench_overlap.py measures the time an "
                "overlapped sync hides, beside the cost model)"
            )
        s(self, "sync_delay", tau)
        check_choice("criterion", self.criterion, CRITERIA)

    @property
    def zetas(self) -> tuple[float | None, ...]:
        return (None,) if self.zeta is None else self.zeta

    @property
    def cells(self) -> list[tuple[float, float]]:
        """PALSGD's ``(eta, p)`` cells."""
        return [(e, p) for e in self.eta for p in self.p]

    def n_cells(self) -> int:
        """Cells of the map: ``H x eta x p x zeta x eps x budgets``."""
        return (
            len(self.H) * len(self.eta) * len(self.p) * len(self.zetas) * len(self.eps)
            * len(self.budgets)
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["grid"] = asdict(self.grid)
        return out

"""The typed summary of a map (:func:`theory.compare.summary.summarize`), written as the
``summary`` object of ``map.json``.

Every record is a frozen :class:`~core.records.JsonRow`: ``to_dict()`` gives the
object as written and the record reads like it (``summary["verdicts"]``). Costs and ratios
are in the units of the cell's budget (``grads``: gradient evaluations per worker,
``rounds``: communication rounds, ``time``: modelled seconds); a ratio is the best PALSGD
cost over the best baseline cost (below 1: the pull pays).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from core.records import Json, JsonObject, JsonRow, plain
from theory.compare.diagnose import Diagnosis
from theory.compare.records import BASELINE_SIDE, PALSGD_SIDE

__all__ = [
    "Verdicts", "RatioStats", "Win", "LargestH", "WhyCell", "SideDiagnosis", "Why",
    "GroupSummary", "TuningCount", "Fewest", "MapSummary",
]  # fmt: skip


@dataclass(frozen=True)
class Verdicts(JsonRow):
    """How many cells each verdict of :attr:`theory.compare.records.CellResult.winner`
    got: PALSGD cheaper (``palsgd``), the best baseline cheaper (``baseline``), equal
    costs (``tie``), Monte-Carlo cost intervals that overlap (``undecided``), no method
    within the budget (``neither``)."""

    palsgd: int = 0
    baseline: int = 0
    tie: int = 0
    undecided: int = 0
    neither: int = 0

    @property
    def decided(self) -> int:
        """Cells with a verdict: won, lost or tied."""
        return self.palsgd + self.baseline + self.tie


@dataclass(frozen=True)
class RatioStats(JsonRow):
    """The cost ratios of ``cells`` cells: the smallest, median and largest finite one
    (left out when none is finite) and how many are infinite (``unreached_by_palsgd``:
    only the baseline reaches eps)."""

    omit_none: ClassVar[frozenset[str]] = frozenset({"min", "median", "max"})

    cells: int
    min: float | None = None
    median: float | None = None
    max: float | None = None
    unreached_by_palsgd: int = 0


@dataclass(frozen=True)
class Win(JsonRow):
    """A cell PALSGD wins: its ``H``, ``eta``, ``p``, the cost ``ratio`` and the best
    method of each side (``palsgd``, ``baseline``; ``None``: none within budget)."""

    H: int
    eta: float
    p: float
    ratio: float | None
    palsgd: str | None
    baseline: str | None


@dataclass(frozen=True)
class LargestH(JsonRow):
    """Per method the largest ``H`` of the grid at which it reaches eps within budget
    (``None``: at none), PALSGD at its best ``(eta, p)``; ``per_pull[method][(eta, p)]``:
    a PALSGD method's at each ``(eta, p)`` (written as ``<method>_per_pull`` after the
    method, keyed ``"eta=<eta>,p=<p>"``)."""

    methods: Mapping[str, int | None]
    per_pull: Mapping[str, Mapping[tuple[float, float], int | None]]

    def to_dict(self) -> JsonObject:
        out: JsonObject = {}
        for m, h in self.methods.items():
            out[m] = h
            if m in self.per_pull:
                out[m + "_per_pull"] = {
                    f"eta={eta:g},p={p:g}": v for (eta, p), v in self.per_pull[m].items()
                }
        return out


@dataclass(frozen=True)
class WhyCell(JsonRow):
    """The cell a :class:`Why` diagnoses (as in :class:`~theory.compare.records.CellResult`)."""

    H: int
    eta: float
    p: float
    zeta: float | None
    eps: float


@dataclass(frozen=True)
class SideDiagnosis(JsonRow):
    """One side's best ``method`` at its tuned inner step ``alpha`` and outer rate
    ``gamma`` (``None``: none), with its :class:`~theory.compare.diagnose.Diagnosis`
    (written flat beside them)."""

    method: str
    alpha: float | None
    gamma: float | None
    diagnosis: Diagnosis

    def to_dict(self) -> JsonObject:
        return {"method": self.method, "alpha": self.alpha, "gamma": self.gamma,
                **self.diagnosis.to_dict()}  # fmt: skip


@dataclass(frozen=True)
class Why(JsonRow):
    """The long-run picture of both tuned sides at the cell where PALSGD comes closest (or
    wins by most); a side without a method within budget is left out."""

    omit_none: ClassVar[frozenset[str]] = frozenset({PALSGD_SIDE, BASELINE_SIDE})

    cell: WhyCell
    palsgd: SideDiagnosis | None = None
    baseline: SideDiagnosis | None = None


@dataclass(frozen=True)
class GroupSummary(JsonRow):
    """The answer for one ``(zeta, eps, budget)`` with budget size ``B``: the largest
    ``H`` per method, PALSGD's ``wins``, the ratios of its ``losses`` (ratio > 1) and of
    every cell (``ratio``), the ``verdicts`` (under the other criterion and with shared
    coins where computed) and ``why`` (exact engine)."""

    omit_none: ClassVar[frozenset[str]] = frozenset({"other_verdicts", "shared_verdicts", "why"})

    zeta: float | None
    eps: float
    budget: str
    B: float
    largest_H: LargestH
    wins: tuple[Win, ...]
    losses: RatioStats
    verdicts: Verdicts
    other_verdicts: Verdicts | None
    shared_verdicts: Verdicts | None
    ratio: RatioStats
    why: Why | None = None


@dataclass(frozen=True)
class TuningCount(JsonRow):
    """One method's distinct tuned results (``results``), those still on an extendable
    grid edge after every extension (``on_edge``), the configurations the precision guard
    refused and the optima it confirmed in extended precision (counts)."""

    results: int = 0
    on_edge: int = 0
    refused: int = 0
    rechecked: int = 0


@dataclass(frozen=True)
class Fewest(JsonRow):
    """The sync question of one ``(zeta, eps, budget)``: ``method``'s fewest rounds to eps
    within the budget over every ``H`` of the grid (PALSGD: and every ``(eta, p)``), the
    cell that gives them, and its cost there in the budget (``None`` everywhere: never)."""

    zeta: float | None
    eps: float
    budget: str
    method: str
    rounds: int | None
    H: int | None = None
    eta: float | None = None
    p: float | None = None
    cost: float | None = None


@dataclass(frozen=True)
class MapSummary(JsonRow):
    """The summary of a map: per ``(zeta, eps, budget)`` the :class:`GroupSummary`; over
    every cell PALSGD's wins, the cells, those decided, the verdicts (shared coins, the
    other criterion, where computed), the ``criterion``, the cells whose start already
    meets eps, the tuning counts per method, each method's fewest rounds, and the bound
    map's agreement with the truth (:func:`theory.compare.bounds_side.agreement`, when
    scored)."""

    omit_none: ClassVar[frozenset[str]] = frozenset(
        {"shared_verdicts", "criterion", "other_verdicts", "other_shared_verdicts", "agreement"}
    )

    groups: tuple[GroupSummary, ...]
    palsgd_wins: int
    cells: int
    decided: int
    verdicts: Verdicts
    shared_verdicts: Verdicts | None
    criterion: str | None
    other_verdicts: Verdicts | None
    other_shared_verdicts: Verdicts | None
    start_meets_eps: int
    tuning: Mapping[str, TuningCount]
    fewest_rounds: tuple[Fewest, ...]
    agreement: Mapping[str, Json] | None = None

    @property
    def agreement_dict(self) -> JsonObject | None:
        """:attr:`agreement` as a plain dict (``None``: not scored)."""
        a = plain(self.agreement)
        return a if isinstance(a, dict) else None

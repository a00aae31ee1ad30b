"""The state one run of ``palsgd verify`` hands from stage to stage.

:class:`RunContext` is the plan (settings, the resolved bounds and problems, the problem
cache); :class:`StageResults` collects what each stage found, typed (the stages' result
records, :mod:`theory.verify.records`); :class:`Stage` is one entry of the stage loop
(:data:`theory.verify.stages.STAGES`). The report edge (:mod:`theory.verify.report_edge`)
reads both and writes the tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from theory.verify.records import (
    AgreementRow,
    AgreementSummary,
    ConsensusRow,
    CrossingRow,
    MonteCarloResult,
    NotVerifiable,
    RateRow,
    Row,
    SkippedBound,
    SpeedupRow,
)

if TYPE_CHECKING:
    from theory.verify.classstage import ClassResult
    from theory.verify.combined import JointResult
    from theory.verify.controls import Control
    from theory.verify.exact import ExactResult
    from theory.verify.hetero import HeteroResult
    from theory.verify.lower import LowerResult
    from theory.verify.report_types import Statistics
    from theory.verify.sampling import ProblemCache
    from theory.verify.settings import VerifySettings

__all__ = ["RunContext", "StageResults", "MonteCarloOutcome", "Stage", "is_lower"]


def is_lower(bound: Any) -> bool:
    """Whether ``bound`` is a lower bound (:mod:`theory.lower`, ``kind = "lower"``)."""
    return getattr(bound, "kind", "upper") == "lower"


@dataclass
class MonteCarloOutcome:
    """The Monte-Carlo stage: the tested configurations (``results``, the not-verifiable
    bounds last), rates in ``T``, speed-up in ``K``, exact vs Monte Carlo, consensus vs
    ``H``, and how the tests decided (``statistics``)."""

    results: list[MonteCarloResult | NotVerifiable]
    rates: list[RateRow]
    speedup: list[SpeedupRow]
    exact_vs_mc: list[AgreementRow]
    exact_vs_mc_summary: list[AgreementSummary]
    consensus: list[ConsensusRow]
    statistics: Statistics


@dataclass
class StageResults:
    """What the stages found, in their own records (``klass``: the class stage's per-bound
    results, ``class_designs`` its design rows; ``monte_carlo``: ``None`` without that
    stage). ``results["exact"]`` reads a field by name."""

    exact: list[ExactResult] = field(default_factory=list)
    controls: list[Control] = field(default_factory=list)
    hetero: list[HeteroResult] = field(default_factory=list)
    hetero_skipped: list[SkippedBound] = field(default_factory=list)
    combined: list[JointResult] = field(default_factory=list)
    lower: list[LowerResult] = field(default_factory=list)
    crossings: list[CrossingRow] = field(default_factory=list)
    klass: list[ClassResult] = field(default_factory=list)
    class_designs: list[Row] = field(default_factory=list)
    monte_carlo: MonteCarloOutcome | None = None

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)


@dataclass
class RunContext:
    """One run: ``settings``, the resolved ``bounds`` (upper and lower) and ``problems``,
    the problem ``cache``, whether to show progress bars, the start time and what the
    stages found so far (``found``)."""

    settings: VerifySettings
    bounds: Sequence[Any]
    problems: Sequence[str]
    cache: ProblemCache
    progress: bool = True
    t_start: float = field(default_factory=time.perf_counter)
    found: StageResults = field(default_factory=StageResults)

    @property
    def uppers(self) -> list[Any]:
        return [b for b in self.bounds if not is_lower(b)]

    @property
    def lowers(self) -> list[Any]:
        return [b for b in self.bounds if is_lower(b)]

    @property
    def exact_bounds(self) -> list[Any]:
        """The upper bounds the exact quadratic oracle verifies (none without the search)."""
        from theory.verify.oracle import family_of

        if not self.settings.search:
            return []
        return [b for b in self.uppers if family_of(b).exact]


@dataclass(frozen=True)
class Stage:
    """One stage of the loop: ``run(ctx)`` fills ``ctx.found`` when ``enabled(ctx)``."""

    name: str
    run: Callable[[RunContext], None]
    enabled: Callable[[RunContext], bool] = lambda ctx: True

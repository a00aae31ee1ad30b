"""The typed records of ``palsgd verify``: what each stage hands to the next.

Every table of the report is a list of one of these frozen records while the run is
going; :meth:`Record.to_row` turns a record into the JSON-ready row that ``results.json``
and the CSV files hold (the report edge, :mod:`theory.verify.run`), its keys in the
order of the record's fields (some records leave out what does not apply, which keeps the
written files as they were when the rows were plain mappings).

Units: ``measured*`` and ``bound*`` values are the bound's left-hand side, the average
squared gradient norm ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` (or at the anchors for an
``anchors`` bound), in the problem's own units; ``ratio`` is measured / bound
(dimensionless, above 1 a violation); ``p*`` are probabilities; ``alpha``, ``eta``,
``gamma``, ``mu`` the step sizes and momentum of :class:`theory.algorithm.AlgorithmSpec`;
``K`` workers, ``H`` local steps per round, ``T`` steps, ``R`` replicas.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol, Union

from core.io import json_safe as jsonable
from core.records import JsonRow

__all__ = [
    "JSON",
    "Row",
    "Record",
    "DesignPoint",
    "LowerDesign",
    "PointValue",
    "BoundEntry",
    "NotVerifiable",
    "MonteCarloResult",
    "RateRow",
    "SpeedupRow",
    "AgreementRow",
    "AgreementSummary",
    "ConsensusRow",
    "TightnessRow",
    "CrossingRow",
    "FindingDesign",
    "Finding",
    "ConstantCheck",
    "SkippedBound",
    "rows_of",
]

#: a JSON value (what :func:`theory.check.jsonable` returns)
JSON = Union[None, bool, int, float, str, list["JSON"], dict[str, "JSON"]]  # noqa: UP007
#: one row of a report table at the report edge (a CSV row, a ``results.json`` entry)
Row = dict[str, JSON]
#: one design point: parameter name -> number (``alpha``, ``L``, ``K``, ...) or label
#: (``outer``, ``coins``, ``measured``)
DesignPoint = dict[str, float | int | str]
#: one design of a lower bound's instance family (:mod:`theory.verify.lower_designs`)
LowerDesign = DesignPoint
#: what a one-design evaluation (the ``at`` helpers) returns: name -> number, flag or label
PointValue = dict[str, float | bool | str | None]
#: one entry of a ``--bound-file`` (parsed YAML/JSON, not yet checked)
BoundEntry = Mapping[str, object]


@dataclass(frozen=True)
class Record(JsonRow):
    """A typed row of verify's report (:class:`core.records.JsonRow`: read like its JSON
    object, ``omit_none`` the fields left out when ``None``); :meth:`to_row` is its one
    conversion to the JSON-ready mapping the report writes."""

    def to_row(self) -> Row:
        return jsonable(self.to_dict())


class _ToDict(Protocol):
    """A stage's result class (``ExactResult``, ``Control``, ...): ``to_dict()`` its row."""

    def to_dict(self) -> Mapping[str, object]: ...


def rows_of(records: Iterable[Record | _ToDict]) -> list[Row]:
    """``records`` (records, or stage results with ``to_dict``) as JSON-ready rows."""
    return [r.to_row() if isinstance(r, Record) else jsonable(r.to_dict()) for r in records]


@dataclass(frozen=True)
class NotVerifiable(Record):
    """A bound the Monte-Carlo stage cannot test (``note`` says why), a ``results`` row."""

    bound: str
    problem: str
    algorithm: str
    verdict: str
    note: str
    index: int = -1


@dataclass(frozen=True)
class MonteCarloResult(Record):
    """One configuration simulated ``R`` times and its mean tested against the bound (a
    ``results`` row). ``ci``: the one-sided confidence bounds of
    :meth:`theory.verify.stats.MeanTest.confidence_bounds` (empty when not computed);
    ``tested``: inside the conditions, so in the family-wise correction (the p-values then
    follow the verdict in the row, else they precede it)."""

    bound: str
    problem: str
    algorithm: str
    outer: str
    coins: str
    K: int
    d: int
    noise: str
    H: int
    p: float
    eta: float
    gamma: float
    alpha: float
    alpha_role: str
    alpha_max: float | None
    T: int
    R: int
    seed: int
    L: float
    sigma2: float
    zeta2: float
    F0: float
    conditions_hold: bool
    failed_conditions: str
    measured_mean: float
    measured_sd: float
    measured_se: float
    skewness: float
    diverged: int
    bound_value: float
    ratio: float
    consensus_mean: float
    summary: str
    note: str
    verdict: str
    p_adjusted: float
    ci_level_one_sided: float
    ci: Mapping[str, float]
    p_holds: float
    p_violated: float
    p_value: float
    ratio_ucb: float
    tested: bool
    index: int = -1

    _HEAD: ClassVar[int] = 34  # the fields up to ``note``

    def __getitem__(self, key: str) -> object:
        return self.ci[key] if key in self.ci else super().__getitem__(key)

    def to_row(self) -> Row:
        names = [f.name for f in dataclasses.fields(self)]
        head = {k: getattr(self, k) for k in names[: self._HEAD]}
        verdict = {
            "verdict": self.verdict,
            "p_adjusted": self.p_adjusted,
            "ci_level_one_sided": self.ci_level_one_sided,
            **self.ci,
        }
        p = {"p_holds": self.p_holds, "p_violated": self.p_violated, "p_value": self.p_value}
        tail = {"ratio_ucb": self.ratio_ucb, "index": self.index}
        body = {**verdict, **p} if self.tested else {**p, **verdict}
        return jsonable({**head, **body, **tail})


@dataclass(frozen=True)
class RateRow(Record):
    """One horizon ``T`` of the rate check: the measured mean (``R`` replicas) at the step
    ``alpha`` of ``step_rule``, the bound there, and the fitted exponents of ``T``
    (``fitted_slope`` with its confidence interval, ``bound_slope``, the bound's
    ``bound_leading_exponent``) with the ``rate_verdict`` shared by the rows of a bound."""

    bound: str
    problem: str
    algorithm: str
    K: int
    H: int
    p: float
    eta: float
    step_rule: str
    T: int
    alpha: float
    R: int
    measured_mean: float
    measured_se: float
    bound_value: float
    fitted_slope: float
    slope_ci_low: float
    slope_ci_high: float
    bound_slope: float
    bound_leading_exponent: float
    rate_verdict: str
    conditions_hold: bool


@dataclass(frozen=True)
class SpeedupRow(Record):
    """The speed-up check of one bound: the measured ``Y(K=1)/Y(K)`` (with a delta-method
    interval) against the bound's ``B(1)/B(K)`` and the linear ``K``."""

    bound: str
    problem: str
    algorithm: str
    K1: int
    K: int
    H: int
    p: float
    eta: float
    alpha: float
    T: int
    R: int
    measured_K1: float
    measured_K: float
    measured_speedup: float
    speedup_ci_low: float
    speedup_ci_high: float
    bound_K1: float
    bound_K: float
    predicted_speedup: float
    linear_speedup: int
    conditions_hold: bool


@dataclass(frozen=True)
class AgreementRow(Record):
    """One step of one metric: the exact expectation against the Monte-Carlo mean
    (standard error ``mc_se``, standardised deviation ``z``)."""

    algorithm: str
    label: str
    metric: str
    step: int
    exact: float
    mc_mean: float
    mc_se: float
    z: float


@dataclass(frozen=True)
class AgreementSummary(Record):
    """One algorithm of the exact-vs-Monte-Carlo comparison: the largest ``|z|`` against
    the Bonferroni ``threshold``; only ``algorithm`` and ``status`` when it was skipped."""

    omit_none: ClassVar[frozenset[str]] = frozenset({"spec", "T", "R", "max_abs_z", "threshold"})

    algorithm: str
    spec: Mapping[str, object] | None = None
    T: int | None = None
    R: int | None = None
    max_abs_z: float | None = None
    threshold: float | None = None
    status: str = ""


@dataclass(frozen=True)
class ConsensusRow(Record):
    """Time-averaged consensus error ``(1/K) sum_k ||x_k - xbar||^2`` and average squared
    gradient norm (mean and standard error over ``R`` replicas) at one ``H``."""

    problem: str
    algorithm: str
    K: int
    H: int
    p: float
    eta: float
    alpha: float
    T: int
    R: int
    consensus_mean: float
    consensus_se: float
    grad_norm_sq_mean: float
    grad_norm_sq_se: float


@dataclass(frozen=True)
class TightnessRow(Record):
    """One (bound, term): the designs where the term is at least half the bound, the
    largest measured/bound among them, the command reproducing it, and the class stage's
    tightness and verdict of the bound (``None`` without a class stage)."""

    bound: str
    term_index: int
    term: str
    designs: int
    max_ratio: float | None
    status: str
    command: str
    class_tightness: float | None = None
    class_verdict: str | None = None


@dataclass(frozen=True)
class CrossingRow(Record):
    """A lower bound above an upper bound on a design both are stated for: how many
    designs, the worst ``lower_over_upper``, the exact value there and which is refuted."""

    upper: str
    lower: str
    designs: int
    lower_over_upper: float
    upper_value: float
    lower_value: float
    exact: float
    refuted: str
    upper_refuted_at: int
    design: LowerDesign
    command: str


@dataclass(frozen=True)
class FindingDesign(Record):
    """One recorded design of a known finding evaluated exactly."""

    label: str
    inside: bool
    measured: float
    bound_value: float
    ratio: float
    diverged: bool
    reproduced: bool
    command: str


@dataclass(frozen=True)
class Finding(Record):
    """A known finding (:mod:`theory.verify.findings`) with its designs re-evaluated."""

    bound: str
    statement: str
    source: str
    summary: str
    corrected: str | None
    corrected_reading: str
    docs: str
    designs: tuple[FindingDesign, ...]
    reproduced: bool

    def to_row(self) -> Row:
        row = super().to_row()
        row["designs"] = [d.to_row() for d in self.designs]
        return row


@dataclass(frozen=True)
class ConstantCheck(Record):
    """A user-declared constant of a problem checked by sampling."""

    problem: str
    K: int
    declared: Mapping[str, float]
    result: str
    check: object


@dataclass(frozen=True)
class SkippedBound(Record):
    """A bound left out of a stage, with the reason."""

    bound: str
    reason: str

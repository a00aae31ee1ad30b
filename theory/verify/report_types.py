"""The report of ``palsgd verify`` as typed sections, serialised to JSON in one place.

:class:`VerifyReport` holds the run's sections: the resolved settings (the
:class:`~theory.verify.settings.VerifySettings` object), the installed versions, the row
tables (one mapping per CSV row, columns in :mod:`theory.verify.settings` and
:mod:`theory.verify.exact_report`), :class:`Power` (the negative controls),
:class:`Statistics` (how the Monte-Carlo tests decide) and :class:`Summary` (verdict
counts, violated bounds, the exit code). :meth:`VerifyReport.to_json` is the one place that
turns it into ``results.json``: the sections in a fixed order, each row table next to its
CSV columns, NaN as ``null`` and infinities as ``"inf"`` (:func:`theory.check.jsonable`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from theory.check import jsonable
from theory.verify.records import Row
from theory.verify.settings import VerifySettings

__all__ = ["Power", "Statistics", "Summary", "VerifyReport", "Row", "ROW_TABLES"]


#: the row tables of the report, in the order of ``results.json`` (before and after the
#: sections that are not tables)
ROW_TABLES = (
    "exact",
    "hetero",
    "hetero_skipped",
    "combined",
    "lower",
    "crossings",
    "findings",
    "tightness",
    "controls",
    "class_results",
    "class_designs",
)
_MC_TABLES = ("rates", "speedup", "exact_vs_mc", "exact_vs_mc_summary", "consensus")


@dataclass
class Power:
    """Detection power of the negative controls: rejected / run, per bound and per kind of
    statement (:func:`theory.verify.controls.power`)."""

    controls: int = 0
    rejected: int = 0
    power: float | None = None
    per_bound: dict[str, dict[str, int]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> Row:
        return dataclasses.asdict(self)


@dataclass
class Statistics:
    """How the Monte-Carlo tests measure and decide; without a Monte-Carlo stage only the
    correction and the family-wise level (the other fields ``None``, left out of the JSON)."""

    correction: str
    family_wise_level: float
    measured: str | None = None
    tests: str | None = None
    p_value: str | None = None
    family_size: int | None = None
    bootstrap_resamples: int | None = None
    confidence_bounds: str | None = None

    _ORDER = (
        "measured",
        "tests",
        "p_value",
        "correction",
        "family_wise_level",
        "family_size",
        "bootstrap_resamples",
        "confidence_bounds",
    )

    def to_dict(self) -> Row:
        return {k: getattr(self, k) for k in self._ORDER if getattr(self, k) is not None}


@dataclass
class Summary:
    """The closing summary: exact verdicts, verdict counts, violated bounds, the exit code
    (built by :func:`theory.verify.report.summary_of`)."""

    exact_bounds: int
    exact_violated: list[str]
    hetero_worst: dict[str, float | None]
    exact_worst: dict[str, float | None]
    vacuous_share: dict[str, float | None]
    untested_terms: list[str]
    power: Power
    lower_violated: list[str]
    violated_bounds: list[str]
    new_violations: list[str]
    stale_findings: list[str]
    counts: dict[str, int]
    per_bound: dict[str, dict[str, int]]
    violated: list[Row]
    max_tightness_ratio: float | None
    median_tightness_ratio: float | None
    exact_vs_mc_disagreements: list[str]
    not_verifiable: list[str]
    correction: str
    family_wise_level: float
    exit_code: int
    #: bounds tested on no design inside their conditions in any stage
    #: (:mod:`theory.verify.untested`)
    untested: list[str] = field(default_factory=list)

    def to_dict(self) -> Row:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["power"] = self.power.to_dict()
        return out


@dataclass
class VerifyReport:
    """Everything ``palsgd verify`` found (see the module docstring); ``summary`` is set
    once the sections are complete."""

    settings: VerifySettings
    versions: dict[str, str]
    exact: list[Row]
    hetero: list[Row]
    hetero_skipped: list[Any]
    lower: list[Row]
    crossings: list[Row]
    findings: list[Row]
    tightness: list[Row]
    controls: list[Row]
    power: Power
    bounds: list[Row]
    constant_checks: list[Row]
    statistics: Statistics
    elapsed_s: float
    class_results: list[Row] = field(default_factory=list)
    combined: list[Row] = field(default_factory=list)  # the joint stages (combined.csv)
    class_designs: list[Row] = field(default_factory=list)
    results: list[Row] = field(default_factory=list)
    rates: list[Row] = field(default_factory=list)
    speedup: list[Row] = field(default_factory=list)
    exact_vs_mc: list[Row] = field(default_factory=list)
    exact_vs_mc_summary: list[Row] = field(default_factory=list)
    consensus: list[Row] = field(default_factory=list)
    summary: Summary | None = None
    tool: str = "palsgd verify"

    def table(self, name: str) -> list[Row]:
        """The row table ``name`` (``"exact"``, ``"results"``, ``"rates"``, ...)."""
        if name not in (*ROW_TABLES, "results", *_MC_TABLES):
            raise KeyError(name)
        return getattr(self, name)

    def to_json(self, columns: Mapping[str, Any]) -> str:
        """``results.json``: every section in a fixed order, then ``columns`` (CSV file ->
        its columns); the one serialisation of the report."""
        payload: dict[str, object] = {
            "tool": self.tool,
            "settings": dataclasses.asdict(self.settings),
            "versions": self.versions,
            **{name: getattr(self, name) for name in ROW_TABLES},
            "power": self.power.to_dict(),
            "bounds": self.bounds,
            "constant_checks": self.constant_checks,
            "results": self.results,
            **{name: getattr(self, name) for name in _MC_TABLES},
            "statistics": self.statistics.to_dict(),
            "elapsed_s": self.elapsed_s,
            "summary": None if self.summary is None else self.summary.to_dict(),
            "columns": {name: list(cols) for name, cols in columns.items()},
        }
        return json.dumps(jsonable(payload), indent=1, allow_nan=False)

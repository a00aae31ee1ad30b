"""The report types of ``palsgd check`` (:func:`theory.check.check`) and their JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.io import json_safe
from theory.check.render import render

__all__ = [
    "BoundCheck",
    "CheckReport",
    "ConditionCheck",
    "ConfigWarning",
    "LowerValue",
    "TermShare",
    "jsonable",
]

jsonable = json_safe  # the name the reports of check and verify import


@dataclass
class ConditionCheck:
    """One condition at the checked configuration; ``margin = big - small`` (>= 0 holds)."""

    name: str
    relation: str
    description: str
    holds: bool
    margin: float


@dataclass
class TermShare:
    """One additive term of a bound: its value and its share of the bound (percent)."""

    term: str
    value: float
    share: float


@dataclass
class ConfigWarning:
    """A configuration-level finding; ``level`` is ``"warning"`` or ``"info"``."""

    level: str
    code: str
    message: str
    margin: float | None = None


@dataclass
class LowerValue:
    """A lower bound at a checked bound's ``alpha``: its ``value``, or why it has none."""

    name: str
    title: str
    provenance: str
    value: float | None = None
    reason: str = ""


@dataclass
class BoundCheck:
    """The check of one bound. ``status`` is ``"evaluated"`` or ``"skipped"`` (see ``reason``).

    ``alpha_source`` is ``"given"`` (the configuration's ``alpha``) or ``"optimal"`` (no
    ``alpha`` given: the bound is evaluated at :meth:`Bound.optimal_step`). ``max_H_speedup``
    and ``max_H_conditions`` are ``None`` when the bound does not depend on ``H``;
    ``max_H_step`` says at which step size they were computed (the bound's closed-form
    speed-up schedule, whose value at the configuration is ``schedule_alpha``).
    ``max_H_conditions_given`` / ``max_H_conditions_recommended``: the largest ``H`` whose
    conditions hold at the configuration's ``alpha`` (``None`` when none was given) and at
    the recommended ``alpha`` (``optimal_alpha``, the step that minimises the bound under
    the conditions at the configuration), each held fixed while ``H`` varies.
    ``lower_bounds``: each registered lower bound covering the run, at the same ``alpha``
    (a valid bound is never below one of them inside its conditions).
    """

    name: str
    title: str
    provenance: str
    derived_here: bool
    algorithms: list[str]
    assumptions: list[str]
    notes: str
    status: str
    reason: str = ""
    applicable: bool = True
    caveats: list[str] = field(default_factory=list)
    alpha: float | None = None
    alpha_source: str | None = None
    conditions: list[ConditionCheck] = field(default_factory=list)
    conditions_hold: bool | None = None
    value: float | None = None
    terms: list[TermShare] = field(default_factory=list)
    dominant_term: str | None = None
    optimal_alpha: float | None = None
    max_alpha: float | None = None
    uses_H: bool = False
    max_H_speedup: float | None = None
    max_H_conditions: float | None = None
    max_H_step: str | None = None
    schedule_alpha: float | None = None
    max_H_conditions_given: float | None = None
    max_H_conditions_recommended: float | None = None
    rounds_to_eps: float | None = None
    lower_bounds: list[LowerValue] = field(default_factory=list)


@dataclass
class CheckReport:
    """Everything :func:`check` found. ``to_dict()`` for JSON, ``to_text()`` for people.

    ``verdict`` is one line answering "does a theorem cover this configuration?";
    ``verdict_code`` is ``"covered"`` (an applicable bound without caveats whose conditions
    hold), ``"conditions_hold"`` (they hold but a caveat says the bound does not cover the
    run as configured), ``"conditions_fail"``, ``"contradiction"`` (an upper bound claiming
    the run is below a lower bound: at least one is false, :mod:`theory.check.contradiction`;
    the CLI exits with 5) or ``"nothing_evaluated"`` (every bound skipped: the CLI then
    exits with 2, since nothing was checked).
    """

    inputs: dict[str, float]
    algorithm: str
    algorithm_reason: str
    eps: float | None
    preset: str | None
    warnings: list[ConfigWarning]
    bounds: list[BoundCheck]
    verdict: str = ""
    verdict_code: str = ""

    def bound(self, name: str) -> BoundCheck:
        """The check of the bound called ``name``."""
        for b in self.bounds:
            if b.name == name:
                return b
        raise KeyError(f"no bound {name!r} in this report: {[b.name for b in self.bounds]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``inf`` becomes the string ``"inf"`` and NaN becomes ``None``."""
        return jsonable(asdict(self))

    def to_text(self, verbose: bool = True) -> str:
        """The report as text: in full (``verbose``, as ``palsgd check --verbose`` prints
        it) or the brief answer ``palsgd check`` prints by default."""
        return render(self, verbose)

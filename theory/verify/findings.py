"""Known findings: registered statements the verifier is expected to refute.

A known finding is a published statement that ``palsgd verify`` shows false inside its own
conditions, recorded with its source, the designs that reproduce the refutation exactly
(each a ``--at`` design), the likely corrected statement (registered beside it and verified
like every bound) and the section of the docs that explains it. A run checks that each
finding whose bound it verifies still reproduces: every recorded design is inside the
statement's conditions and the exact value is above the bound there. The exit code of
``palsgd verify`` (:func:`classify`) is 0 when every violated bound is a known finding and
every such finding reproduced, and 1 when a bound that is not a known finding is violated
or a known finding stopped reproducing (the registry must then be updated).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from theory import bounds as registry
from theory.verify.oracle import REL_TOL, evaluate, family_of, parse_design, reproduce_command
from theory.verify.records import Finding, FindingDesign

__all__ = [
    "Design", "KnownFinding", "KNOWN_FINDINGS", "classify", "findings_report", "known",
    "reproduce",
]  # fmt: skip


@dataclass(frozen=True)
class Design:
    """A design that reproduces a finding: what it is, in plain words, and its ``--at``."""

    label: str
    at: str


@dataclass(frozen=True)
class KnownFinding:
    """A registered bound expected to be violated (see the module docstring)."""

    bound: str
    statement: str
    source: str
    summary: str
    designs: tuple[Design, ...]
    corrected: str
    corrected_reading: str
    docs: str


KNOWN_FINDINGS: tuple[KnownFinding, ...] = (
    KnownFinding(
        bound="slowmo_ar_sgd",
        statement="SlowMo over all-reduce SGD, Theorem 1, eq. (5)",
        source=(
            "Wang, Tantia, Ballas & Rabbat, SlowMo: Improving Communication-Efficient "
            "Distributed SGD with Slow Momentum, ICLR 2020, main text (the horizon condition "
            "without a square, no condition on the slow rate)"
        ),
        summary=(
            "the published theorem, as printed, is false inside its own conditions: at the "
            "step it prescribes, runs it covers have a larger average squared gradient than "
            "it allows. This is a finding about a published statement, expected on every run, "
            "not a fault of this toolkit"
        ),
        designs=(
            Design(
                "heavy-ball gradient descent (one worker, H = 1, no noise) on f = x^2/2 from "
                "F0 = 1, mu = 0.95, gamma = 0.05, T = 133 (the horizon asks T >= 132.6)",
                "L=1 lam_F=1 F0=1 H=1 K=1 T=133 gamma=0.05 mu=0.95 heavy_ball=1 "
                "alpha=0.08671099695241208",
            ),
            Design(
                "H = 2 noisy steps, gamma = 0.01, mu = 0, T = 1030 (the horizon asks "
                "T >= 1029.8): the prescribed step has alpha L = 3.1 and the inner steps diverge",
                "L=1 lam_s=1 sigma2=1 H=2 K=1 T=1030 gamma=0.01 mu=0.0 heavy_ball=1 "
                "alpha=3.1158847642487792",
            ),
        ),
        corrected="slowmo_ar_sgd_corrected",
        corrected_reading=(
            "a typo plus an implicit condition: the horizon condition squared, "
            "T >= K L^2 (1 + sqrt(3) max{...})^2, and the slow rate gamma <= 1 (with the square "
            "alone the outer step overshoots for gamma near 2)"
        ),
        docs="docs/verification.md, section 7",
    ),
)


def known(name: str) -> KnownFinding | None:
    """The known finding about the registered bound ``name``, if any."""
    return next((f for f in KNOWN_FINDINGS if f.bound == name), None)


def reproduce(finding: KnownFinding) -> list[FindingDesign]:
    """Each recorded design evaluated exactly: inside the conditions, measured, bound,
    ratio, whether the iterates diverged, whether it reproduces, the command."""
    bound = registry.get(finding.bound)
    fam = family_of(bound)
    rows = []
    for d in finding.designs:
        design = parse_design(d.at)
        ev = evaluate(bound, fam, design)
        measured, value = float(ev.measured[0]), float(ev.bound[0])
        ratio = measured / value if value > 0 else math.inf
        inside = bool(ev.inside[0])
        rows.append(
            FindingDesign(
                label=d.label,
                inside=inside,
                measured=measured,
                bound_value=value,
                ratio=ratio,
                diverged=not math.isfinite(measured),
                reproduced=inside and ratio > 1 + REL_TOL,
                command=reproduce_command(finding.bound, ev.row(0), None),
            )
        )
    return rows


def findings_report(names: Iterable[str]) -> list[Finding]:
    """The known findings among the bounds ``names`` of a run, each with its recorded
    designs evaluated exactly (:func:`reproduce`) and ``reproduced`` (all of them)."""
    entries = []
    for name in names:
        f = known(name)
        if f is None:
            continue
        designs = tuple(reproduce(f))
        entries.append(
            Finding(
                bound=f.bound,
                statement=f.statement,
                source=f.source,
                summary=f.summary,
                corrected=f.corrected,
                corrected_reading=f.corrected_reading,
                docs=f.docs,
                designs=designs,
                reproduced=all(d["reproduced"] for d in designs),
            )
        )
    return entries


def classify(
    entries: Sequence[Mapping[str, Any]], violated: Sequence[str]
) -> dict[str, list[str] | int]:
    """``new_violations`` (violated bounds that are no known finding of the run), ``stale``
    (known findings that no longer reproduce) and the run's ``exit_code``: 1 when either is
    not empty, else 0."""
    names = {e["bound"] for e in entries}
    new = [v for v in dict.fromkeys(violated) if v not in names]
    stale = [e["bound"] for e in entries if not e["reproduced"]]
    return {"new_violations": new, "stale": stale, "exit_code": 1 if new or stale else 0}

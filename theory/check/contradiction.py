"""Contradictions in a check: an upper bound below a lower bound where both apply.

A valid upper bound is never below a valid lower bound inside its conditions. When an
evaluated upper bound that covers the run and whose conditions hold is below one of the
lower bounds listed beside it (:mod:`theory.check.lower`), at least one of the two
statements is false at this configuration, and the checker cannot tell which: the verdict
names both, says so, and does not call the run covered by either. ``palsgd check`` then exits
with :data:`core.exitcodes.CONTRADICTION`; ``palsgd verify --bounds UPPER LOWER`` runs
both against the exact oracle and reports which one it refutes
(:mod:`theory.verify.crossings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from theory.check.render import fmt
from theory.check.report import BoundCheck, LowerValue

__all__ = ["ATOL", "CODE", "REL_TOL", "contradictions", "verdict"]

#: the ``verdict_code`` of a report with a contradiction
CODE = "contradiction"
#: a lower bound counts as above an upper bound beyond this relative margin (rounding) plus
#: ``ATOL`` times the scale ``2 L F0 + sigma^2 + zeta^2`` (a value that is 0 in exact
#: arithmetic may come out as 1e-33)
REL_TOL = 1e-9
ATOL = 1e-12


def _claims_the_run(b: BoundCheck) -> bool:
    """Whether ``b`` states a bound for this run: it covers the algorithm, its conditions hold
    at the checked step and no caveat takes the run out of its statement (a caveat that the
    statement was shown false elsewhere does not: it still claims the run)."""
    if b.status != "evaluated" or not b.applicable or not b.conditions_hold or b.value is None:
        return False
    return all("shown false inside its conditions" in c for c in b.caveats)


def contradictions(
    checks: Sequence[BoundCheck], values: Mapping[str, float] | None = None
) -> list[tuple[BoundCheck, LowerValue]]:
    """Every (upper bound, lower bound) pair of the report where the upper bound, claiming the
    run, is below the lower bound evaluated at the same step. ``values``: the configuration
    (its ``L, F0, sigma, zeta`` set the scale of the absolute margin)."""
    v = values or {}
    scale = 2 * v.get("L", 0.0) * v.get("F0", 0.0) + v.get("sigma", 0.0) ** 2
    scale += v.get("zeta", 0.0) ** 2
    out = []
    for b in checks:
        if not _claims_the_run(b):
            continue
        for lo in b.lower_bounds:
            if lo.value is not None and lo.value > b.value * (1 + REL_TOL) + ATOL * scale:
                out.append((b, lo))
    return out


def verdict(pairs: Sequence[tuple[BoundCheck, LowerValue]]) -> str:
    """The verdict line: the widest contradiction, both names, what it means, what settles
    it (and how many more pairs there are)."""
    b, lo = max(pairs, key=lambda p: p[1].value / p[0].value if p[0].value else float("inf"))
    more = f" ({len(pairs) - 1} more pair(s) below)" if len(pairs) > 1 else ""
    return (
        f"contradiction: the upper bound {b.name} ({fmt(b.value)}, conditions hold at alpha = "
        f"{fmt(b.alpha)}) is below the lower bound {lo.name} ({fmt(lo.value)}): at least one "
        f"of them is false here, so neither covers this run; `palsgd verify --bounds {b.name} "
        f"{lo.name}` checks both against the exact oracle and says which one it refutes{more}"
    )

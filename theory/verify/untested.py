"""A run that tests no design inside a bound's conditions is no pass.

Every stage of ``palsgd verify`` counts the designs it tested inside a bound's conditions
(``inside`` of the exact, heterogeneous and lower-bound rows; the Monte-Carlo
configurations that reached a verdict). A stage with none reports the verdict
:data:`UNTESTED` instead of "not shown false"; a bound with none in **every** stage is
listed as untested in the summary (:func:`untested_bounds`), and a run that violates nothing
but leaves a bound untested exits with :data:`core.exitcodes.UNTESTED` (never 0,
:func:`exit_code`). Example: a bound whose conditions pin the step, where no design meets
both sides (before the verifier solved for the pinned step, :mod:`theory.verify.pinned`, a
SlowMo-like statement false by a factor 2.2 was tested on 0 of 600 designs and passed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.exitcodes import OK
from core.exitcodes import UNTESTED as UNTESTED_CODE

__all__ = ["UNTESTED", "untested_bounds", "exit_code", "untested_line"]

#: the verdict of a stage (and of a bound, in the summary) that tested no design inside the
#: bound's conditions
UNTESTED = "untested: no design inside its conditions"
#: Monte-Carlo verdicts that count as a test inside the conditions
_MC_TESTED = ("holds", "violated", "inconclusive")


def _tested(rows: Iterable[Mapping[str, Any]]) -> set[str]:
    """Bounds with a row that tested at least one design inside (``inside > 0``)."""
    out = set()
    for r in rows:
        inside = r.get("inside")
        if isinstance(inside, int | float) and not isinstance(inside, bool) and inside > 0:
            out.add(str(r.get("bound")))
    return out


def untested_bounds(
    names: Sequence[str],
    stage_rows: Iterable[Iterable[Mapping[str, Any]]],
    mc_rows: Iterable[Mapping[str, Any]] = (),
) -> list[str]:
    """The bounds among ``names`` that no stage tested inside their conditions.

    ``stage_rows``: the row tables of the stages that count designs (each row with
    ``bound`` and ``inside``: exact, heterogeneous, lower bounds, or any later stage with
    the same columns); ``mc_rows``: the Monte-Carlo rows (``bound``, ``verdict``)."""
    tested: set[str] = set()
    for rows in stage_rows:
        tested |= _tested(rows)
    tested |= {str(r.get("bound")) for r in mc_rows if r.get("verdict") in _MC_TESTED}
    return [n for n in dict.fromkeys(names) if n not in tested]


def exit_code(code: int, untested: Sequence[str]) -> int:
    """The run's exit code: ``code`` (0 nothing violated, 1 a violation) unless it is 0 and
    some bound went untested, then :data:`core.exitcodes.UNTESTED`."""
    return UNTESTED_CODE if code == OK and untested else code


def untested_line(untested: Sequence[str]) -> str:
    """The summary's line on the untested bounds (empty when none)."""
    if not untested:
        return ""
    return (
        f"UNTESTED: {', '.join(untested)}: no design inside its conditions in any stage; "
        "nothing was shown either way (widen its conditions, give a recommended_step, or "
        "check that its conditions can hold together)"
    )

"""One-call shortcuts for notebooks and scripts: ``theory.at_optimal_step`` and
``theory.verify_bound``.

Each takes a bound as a :class:`~theory.bound.Bound` (registered or not) or a registered
name, and validates its inputs the way the methods it wraps do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import UserInputError
from theory import bounds as registry
from theory.bound import Bound
from theory.bound.numeric import CompiledBound, OptimalStep

if TYPE_CHECKING:  # the verifier is imported when a bound is verified (scipy, matplotlib)
    from theory.verify.report_types import VerifyReport

__all__ = ["at_optimal_step", "verify_bound"]


def _bound(bound: Bound | CompiledBound | str) -> Bound | CompiledBound:
    if isinstance(bound, Bound | CompiledBound):
        return bound
    if isinstance(bound, str):
        return registry.get(bound)
    raise UserInputError(f"expected a Bound or a bound name, got {type(bound).__name__}")


def at_optimal_step(bound: Bound | CompiledBound | str, **values: Any) -> OptimalStep:
    """``bound`` at its optimal step at ``values`` (vectorised): the step minimising it under
    the conditions and the value there, both NaN where no step is feasible
    (:meth:`theory.bound.Bound.at_optimal_step`)."""
    return _bound(bound).at_optimal_step(**values)


def verify_bound(
    bound: Bound | str, *, quick: bool = True, progress: bool = False, **settings: Any
) -> VerifyReport:
    """Verify one bound as ``palsgd verify --bounds NAME`` does; returns the
    :class:`~theory.verify.report_types.VerifyReport` of
    :func:`theory.verify.run_verification` (``report.summary`` holds the verdicts).

    ``quick`` starts from the settings of ``palsgd verify --quick`` (seconds per bound);
    ``settings`` are fields of :class:`theory.verify.VerifySettings` and override them. A
    :class:`~theory.bound.Bound` not in the registry is registered for the run only.
    """
    from theory.verify import VerifySettings, run_verification
    from theory.verify.cli import QUICK

    if "bounds" in settings or "bound_file" in settings:
        raise UserInputError("verify_bound verifies the bound it is given: drop 'bounds'")
    b = _bound(bound)
    if not isinstance(b, Bound):
        raise UserInputError("verify_bound needs a theory.bound.Bound or a registered name")
    fields = {**(QUICK if quick else {}), **settings}
    try:
        vs = VerifySettings(bounds=(b.name,), quick=quick, **fields)
    except TypeError as exc:
        raise UserInputError(f"verify_bound: {exc}") from None
    with registry.registered(b):
        return run_verification(vs, progress=progress)

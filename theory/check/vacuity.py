"""Whether a bound can say anything where it meets a run: the vacuity test.

A bound ``B`` on ``(1/T) sum_t E||grad f(xbar_t)||^2`` set beside a run says nothing there
(is *vacuous*) when any of these holds; each is a reason, and all that hold are reported:

* ``start``: ``B >= ||grad f(x0)||^2``, the run's own starting squared gradient norm
  (same units: squared gradient norm of the objective). Any run whose gradient norm does
  not grow above its starting value satisfies the bound, trained or not.
* ``dominant``: one additive term is more than :data:`DOMINANCE` (99%) of ``B``. The
  comparison then tests that term alone (typically the initial gap ``4 F0/(alpha T)``),
  not the bound's dependences on ``H``, ``p``, ``K`` (the drift and noise terms).
* ``infinite``: ``B`` is not finite (or not positive): it bounds nothing.

A vacuous comparison is reported as ``"vacuous (reason; ...)"``, never as covered. The
test is a statement about the comparison, not a proof that the bound is loose: a bound
that passes it can still be loose, and a vacuous one is still a valid bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from theory.check.render import fmt, term_label
from theory.check.report import TermShare

__all__ = ["DOMINANCE", "Vacuity", "VacuityReason", "vacuity"]

#: a term above this fraction of the bound makes the comparison test that term alone
DOMINANCE = 0.99


@dataclass(frozen=True)
class VacuityReason:
    """One reason a bound says nothing at a run: ``code`` (``start``, ``dominant`` or
    ``infinite``) and a one-line ``message`` with the numbers."""

    code: str
    message: str


@dataclass(frozen=True)
class Vacuity:
    """The vacuity of one bound at one run: ``reasons`` (empty: the bound can say
    something); ``bound``, ``start_grad_sq`` (``||grad f(x0)||^2``, ``None`` when not
    measured) and the largest term's share of the bound (a fraction in [0, 1])."""

    bound: float
    start_grad_sq: float | None
    top_term: str | None
    top_share: float | None
    reasons: tuple[VacuityReason, ...]

    @property
    def vacuous(self) -> bool:
        return bool(self.reasons)

    @property
    def label(self) -> str:
        """``"vacuous (reason; ...)"`` or ``"informative"``."""
        if not self.reasons:
            return "informative"
        return "vacuous (" + "; ".join(r.message for r in self.reasons) + ")"


def vacuity(
    bound: float,
    terms: Sequence[TermShare] = (),
    start_grad_sq: float | None = None,
    *,
    dominance: float = DOMINANCE,
) -> Vacuity:
    """The vacuity of a bound of value ``bound`` with additive ``terms`` (shares in percent,
    as :class:`theory.check.TermShare` holds them) at a run whose starting squared gradient
    norm is ``start_grad_sq`` (``None``: not measured, that reason is not tested)."""
    reasons: list[VacuityReason] = []
    value = float(bound)
    if not math.isfinite(value) or value <= 0:
        reasons.append(VacuityReason("infinite", f"the bound is {fmt(value)}: it bounds nothing"))
    top = max(terms, key=lambda t: t.value, default=None)
    share = None
    if top is not None and math.isfinite(value) and value > 0:
        share = float(top.value) / value
        if share > dominance:
            reasons.append(
                VacuityReason(
                    "dominant",
                    f"its {term_label(top.term)} term {top.term} is {100 * share:.4g}% of it "
                    f"(over {100 * dominance:g}%): the comparison tests that term alone, "
                    "none of the bound's other dependences",
                )
            )
    if start_grad_sq is not None and math.isfinite(value) and value >= start_grad_sq:
        times = value / start_grad_sq if start_grad_sq > 0 else math.inf
        reasons.append(
            VacuityReason(
                "start",
                f"the bound {fmt(value)} is {fmt(times)}x the run's own starting "
                f"||grad f(x0)||^2 = {fmt(start_grad_sq)}: any run whose gradient does not "
                "grow satisfies it",
            )
        )
    return Vacuity(value, start_grad_sq, None if top is None else top.term, share, tuple(reasons))

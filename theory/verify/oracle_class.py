"""The class oracle (``"class"``): the worst case of a design over every problem of its
class (:mod:`theory.worstcase`: ``L``-smooth, initial gap ``F0``, heterogeneity ``zeta``),
by a performance-estimation SDP (:func:`theory.worstcase.pep.solve`)."""

from __future__ import annotations

import numpy as np

from theory.verify.pipeline import Design, Measurement, register_oracle
from theory.worstcase.design import ClassDesign
from theory.worstcase.pep import solve

__all__ = ["ClassOracle", "design_of"]


def design_of(d: ClassDesign, relaxation: str = "compact") -> Design:
    """The pipeline design of the class design ``d`` (``relaxation``: ``"compact"`` or
    ``"full"``, :mod:`theory.worstcase.pep`)."""
    return Design(d.spec, f"class:{relaxation}", {}, instance=d)


@register_oracle
class ClassOracle:
    """``measured``: the class worst case of ``design.instance`` (a
    :class:`~theory.worstcase.design.ClassDesign`, in its units), shape ``(1,)``, ``nan``
    when the solver failed; ``companions["solution"]``: the
    :class:`~theory.worstcase.pep.WorstCase` (status, dual residual, wall time)."""

    name = "class"

    def measure(self, design: Design) -> Measurement:
        relaxation = design.problem.partition(":")[2] or "compact"
        wc = solve(design.instance, relaxation)
        value = np.array([wc.value if wc.ok else np.nan], dtype=float)
        return Measurement(self.name, design, value, np.zeros(1, bool), companions={"solution": wc})

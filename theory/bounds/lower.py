"""Symbolic lower bounds: :class:`LowerBound`, a :class:`~theory.bound.Bound` with
``kind = "lower"``, for lower bounds written as formulas in :mod:`theory.symbols`.

The registered lower bounds and their registry live in :mod:`theory.lower` (no sympy); the
names below are re-exported from there. A :class:`LowerBound` is registered with
:func:`theory.lower.register_lower` like any other lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from core.errors import UserInputError
from theory.bound import Bound
from theory.lower import get_lower, lower_bounds, register_lower
from theory.lower.quadratic import LOCAL_SGD_QUADRATIC_LOWER

__all__ = [
    "LowerBound",
    "LOCAL_SGD_QUADRATIC_LOWER",
    "register_lower",
    "get_lower",
    "lower_bounds",
    "quadratic_lower_expression",
]


@dataclass(frozen=True, eq=False)
class LowerBound(Bound):
    """A lower bound on the worst case of ``(1/T) sum_t E||grad f(xbar_t)||^2`` over the
    assumption class: a valid upper bound is never below it inside its own conditions."""

    kind: str = "lower"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind != "lower":
            raise UserInputError(f"lower bound {self.name!r}: kind must be 'lower'")


def quadratic_lower_expression() -> sp.Expr:
    """The exact average gradient norm of Local SGD / minibatch SGD on the isotropic quadratic."""
    return LOCAL_SGD_QUADRATIC_LOWER.expression()

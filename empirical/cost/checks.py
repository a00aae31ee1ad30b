"""Checks of the cost model's inputs that :mod:`theory.validation` has no entry for: a
nonnegative (or positive) float with a unit, a choice from a list, a worker count."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from theory.validation import ParameterError, UserInputError, validate_one

__all__ = ["check_number", "check_choice", "check_workers"]


def check_number(
    name: str,
    value: Any,
    *,
    low: float = 0.0,
    low_open: bool = False,
    allow_inf: bool = False,
    unit: str = "",
) -> float:
    """``value`` as a float in ``[low, inf)`` (or ``(low, inf)``); ParameterError otherwise."""
    bracket = "(" if low_open else "["
    allowed = f"{bracket}{low:g}, inf)" + (f" {unit}" if unit else "")
    if isinstance(value, bool) or value is None:
        raise ParameterError(name, value, allowed, "expected a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed, "expected a number") from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf) or x < low or (low_open and x == low):
        raise ParameterError(name, value, allowed)
    return x


def check_choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``; UserInputError naming ``name`` otherwise."""
    if value not in allowed:
        raise UserInputError(
            f"'{name}' = {value!r} is not one of {', '.join(repr(a) for a in allowed)}"
        )
    return str(value)


def check_workers(K: Any) -> int:
    """The worker count ``K`` as an int (:func:`theory.validation.validate_one`)."""
    validate_one("K", K)
    return int(K)

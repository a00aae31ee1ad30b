"""The typed results of a bound's numerics: :class:`ConditionResult` (one condition's verdict
and margin), :class:`OptimalStep` (a bound at its optimal step) and :class:`MaxH` (the
largest sync interval and which limit sets it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ConditionResult", "MaxH", "OptimalStep", "binding"]


@dataclass(frozen=True)
class ConditionResult:
    """Verdict of one condition: ``holds`` (bool array) and ``margin = big - small``."""

    name: str
    text: str
    holds: np.ndarray
    margin: np.ndarray
    description: str


@dataclass(frozen=True, eq=False)
class OptimalStep:
    """A bound at its optimal step: ``alpha`` (the minimiser under the conditions) and the
    bound's ``value`` there; both NaN where no step meets the conditions (arrays of the
    broadcast shape of the inputs)."""

    alpha: np.ndarray
    value: np.ndarray


@dataclass(frozen=True, eq=False)
class MaxH:
    """The largest sync interval ``H`` of :meth:`CompiledBound.max_H` (arrays of the broadcast
    shape of the inputs).

    ``speedup``: the largest ``H`` keeping linear speed-up; ``conditions``: the largest ``H``
    at which the step-size conditions hold; ``H``: the smaller of the two (NaN where ``H = 1``
    already fails one of them). ``binding`` says which limit sets ``H``: ``"speedup"``,
    ``"conditions"``, ``"both"`` (equal limits) or ``"none"`` (no limit below ``h_max``).
    ``step`` is the step rule used (``"recommended"``, ``"optimal"`` or the given number) and
    ``alpha`` the step it gives at ``H`` (NaN where ``H`` is NaN).
    """

    H: np.ndarray
    speedup: np.ndarray
    conditions: np.ndarray
    binding: np.ndarray
    step: str | float
    alpha: np.ndarray

    def __getitem__(self, key: str) -> Any:
        """``result["speedup"]`` is ``result.speedup`` (any field by name)."""
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def as_dict(self) -> dict[str, Any]:
        """The fields by name."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def binding(speedup: np.ndarray, conditions: np.ndarray, h_max: float) -> np.ndarray:
    """Which of the two limits sets ``H`` (see :class:`MaxH`), elementwise."""
    s_nan, c_nan = np.isnan(speedup), np.isnan(conditions)
    out = np.where(speedup < conditions, "speedup", "conditions").astype(object)
    out = np.where(speedup == conditions, "both", out)
    out = np.where((speedup == h_max) & (conditions == h_max), "none", out)
    out = np.where(s_nan & ~c_nan, "speedup", out)
    out = np.where(c_nan & ~s_nan, "conditions", out)
    out = np.where(s_nan & c_nan, "both", out)
    return out.astype(str)

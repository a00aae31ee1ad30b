"""The cost model's former one-module path: every name of :mod:`empirical.cost`, which holds
the model (profiles, all-reduce formulas, step traces, wall-clock, paper-scale prediction,
calibration, the end-to-end check and ``palsgd cost``)."""

from __future__ import annotations

from typing import Any

import empirical.cost as _cost

__all__ = list(_cost.__all__)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_cost, name)

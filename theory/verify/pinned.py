"""Bounds stated at one step only: the step is pinned, not searched.

A theorem may hold at a single step (SlowMo, Wang, Tantia, Ballas, Rabbat, ICLR 2020,
Theorem 1: ``alpha gamma/(1 - mu) = sqrt(K/T)``), encoded as two conditions ``a <= b`` and
``b <= a`` together with that step as the bound's ``recommended_step``. Its verification
designs take the recommended step (:func:`theory.verify.designs.decode`).
"""

from __future__ import annotations

import functools

import sympy as sp

from theory.bound import Bound

__all__ = ["pinned_step"]


@functools.lru_cache(maxsize=512)
def pinned_step(bound: Bound) -> bool:
    """Whether ``bound`` is stated at one step only: its recommended step.

    True when the bound has a ``recommended_step`` and two of its conditions read
    ``a <= b`` and ``b <= a`` (an equality ``a = b`` written as two conditions) with ``a - b``
    depending on the step and vanishing identically at the recommended step (SlowMo,
    Theorem 1: ``alpha gamma/(1 - mu) = sqrt(K/T)``). Such a bound has no step interval to
    search: its designs take the recommended step and keep the conditions as they are."""
    rec = bound.recommended_step
    if rec is None:
        return False
    step = bound.step_symbol
    weak = [c for c in bound.conditions if not c.strict]
    sides = [c.sides for c in weak]
    for i, (a, b) in enumerate(sides):
        if step not in (a - b).free_symbols:
            continue
        if any(sp.simplify(a - b2) == 0 and sp.simplify(b - a2) == 0 for a2, b2 in sides[i + 1 :]):
            return sp.simplify((a - b).subs(step, rec)) == 0
    return False

"""Bounds stated at one step only: the step is pinned, not searched.

A theorem may hold at a single step (SlowMo, Wang, Tantia, Ballas, Rabbat, ICLR 2020,
Theorem 1: ``alpha gamma/(1 - mu) = sqrt(K/T)``), encoded as two conditions ``a <= b`` and
``b <= a``. Its verification designs take that step (:func:`theory.verify.designs.decode`):
the bound's ``recommended_step`` when it solves ``a = b``, otherwise the positive real
root of ``a = b`` in the step, solved for with sympy (:func:`pinned_roots`), so a bound file
that pins the step without a ``recommended_step`` line is tested at its step instead of at
sampled steps that never meet both conditions.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import sympy as sp

from theory.bound import Bound, Condition
from theory.bound.compiled_fn import CompiledFn
from theory.bound.compiler import compile_formula

__all__ = ["pinned_roots", "pinned_step", "pinned_values"]

#: functions a solved step may contain (they compile to numpy, as a bound's formulas do)
_NUMERIC = (sp.exp, sp.log, sp.Abs, sp.Min, sp.Max)


def _equalities(conditions: tuple[Condition, ...], step: sp.Symbol) -> list[sp.Expr]:
    """``a - b`` for each pair of weak conditions ``a <= b`` and ``b <= a`` in the step."""
    sides = [c.sides for c in conditions if not c.strict]
    out = []
    for i, (a, b) in enumerate(sides):
        if step not in (a - b).free_symbols:
            continue
        if any(sp.simplify(a - b2) == 0 and sp.simplify(b - a2) == 0 for a2, b2 in sides[i + 1 :]):
            out.append(a - b)
    return out


def _solve(eq: sp.Expr, step: sp.Symbol) -> list[sp.Expr]:
    """The roots of ``eq = 0`` in ``step`` that may be positive and real (the step symbol is
    declared positive, so sympy drops the roots it can show are not) and that compile to
    numpy; none when sympy cannot solve it (then the step is not pinned, the designs sample
    it, and a bound no design meets is reported untested, :mod:`theory.verify.untested`)."""
    try:
        roots = sp.solve(sp.Eq(eq, 0), step, dict=False)
    except (NotImplementedError, ValueError, TypeError):  # sympy gives up: nothing pinned
        return []
    ok = []
    for r in roots if isinstance(roots, list) else [roots]:
        if not isinstance(r, sp.Expr) or step in r.free_symbols:
            continue
        if r.is_extended_real is False or r.is_positive is False:
            continue
        if any(type(f) not in _NUMERIC for f in r.atoms(sp.Function)):
            continue  # e.g. LambertW: no numpy form
        ok.append(r)
    return ok


def pinned_roots(bound: Bound) -> tuple[sp.Expr, ...]:
    """The step(s) ``bound`` is stated at: ``()`` when it is not pinned.

    Its ``recommended_step`` when two of its conditions read ``a <= b`` and ``b <= a`` with
    ``a - b`` depending on the step and vanishing identically at the recommended step
    (SlowMo, Theorem 1); otherwise the roots of ``a = b`` in the step that may be positive
    and real (:func:`_solve`; at a design the first positive finite one inside every
    condition is taken, :func:`pinned_values`). Cached on the conditions (a bound's
    negative controls share them)."""
    return _roots(tuple(bound.conditions), bound.step_symbol, bound.recommended_step)


@functools.lru_cache(maxsize=512)
def _roots(
    conditions: tuple[Condition, ...], step: sp.Symbol, rec: sp.Expr | None
) -> tuple[sp.Expr, ...]:
    for eq in _equalities(conditions, step):
        if rec is not None and sp.simplify(eq.subs(step, rec)) == 0:
            return (rec,)
        roots = _solve(eq, step)
        if roots:
            return tuple(roots)
    return ()


def pinned_step(bound: Bound) -> bool:
    """Whether ``bound`` is stated at one step only (:func:`pinned_roots`): such a bound has
    no step interval to search; its designs take that step and keep the conditions."""
    return bool(pinned_roots(bound))


@functools.lru_cache(maxsize=512)
def _compiled(roots: tuple[sp.Expr, ...], owner: str) -> tuple[CompiledFn, ...]:
    return tuple(compile_formula(r, owner) for r in roots)


def pinned_values(bound: Bound, vals: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """The pinned step at each of ``n`` designs (the bound's parameter values ``vals``, the
    step's own ignored): the first root that is finite, positive and inside every condition
    there, else the first finite positive one, else ``nan``."""
    out = np.full(n, np.nan)
    found = np.zeros(n, dtype=bool)
    fallback = np.full(n, np.nan)
    for f in _compiled(pinned_roots(bound), bound.name.split("~")[0]):
        with np.errstate(all="ignore"):
            a = np.asarray(f({k: vals[k] for k in f.names}, (n,)), dtype=complex)
            a = np.where(np.abs(a.imag) <= 1e-12 * np.abs(a.real), a.real, np.nan)
            a = np.broadcast_to(np.real(a), (n,)).astype(float)
            good = np.isfinite(a) & (a > 0)
            holds = np.asarray(
                bound.conditions_hold(**{**vals, bound.step_name: np.where(good, a, 1.0)}),
                dtype=bool,
            ) * np.ones(n, dtype=bool)
        fallback = np.where(np.isnan(fallback) & good, a, fallback)
        take = good & holds & ~found
        out = np.where(take, a, out)
        found |= take
    return np.where(found, out, fallback)

"""From a bound's sympy statement to its sympy-free compiled forms.

:func:`compile_formula` lambdifies expressions into :class:`~theory.bound.compiled_fn.CompiledFn`
(the Python source over numpy kept, so that it can be cached); :func:`compile_entry` is the
input-independent symbolic work of a :class:`~theory.bound.Bound` as the JSON-ready entry of
the on-disk cache (:mod:`theory.bound.cache`); :func:`cache_text` is the statement as text,
what that entry depends on.
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sympy as sp

from core.errors import UserInputError
from theory.bound.compiled_fn import CompiledFn, resolve_globals
from theory.bound.rates import speedup_exprs

if TYPE_CHECKING:
    from theory.bound import Bound

__all__ = ["cache_text", "compile_entry", "compile_formula", "param_name"]


def param_name(sym: sp.Symbol) -> str:
    """Parameter name of a symbol (``epsilon`` is the parameter ``eps``)."""
    return "eps" if sym.name == "epsilon" else sym.name


def compile_formula(exprs: sp.Expr | Sequence[sp.Expr], owner: str) -> CompiledFn:
    """Lambdify ``exprs`` (one expression or a list) into a :class:`CompiledFn` (source kept)."""
    multi = isinstance(exprs, list | tuple)
    items = list(exprs) if multi else [exprs]
    syms = sorted(set().union(*(sp.sympify(e).free_symbols for e in items)), key=lambda s: s.name)
    fn = sp.lambdify(syms, items if multi else items[0], "numpy")
    source = inspect.getsource(fn)
    free = set()
    stack = [fn.__code__]
    while stack:
        code = stack.pop()
        free |= set(code.co_names)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    globals_ = resolve_globals(fn.__globals__, sorted(free))
    if globals_ is None:
        raise UserInputError(
            f"bound {owner!r}: a formula compiles to names outside numpy/functools/math"
        )
    return CompiledFn([param_name(x) for x in syms], source, globals_, owner, multi)


def compile_entry(bound: Bound) -> dict[str, Any]:
    """The input-independent symbolic work, as the JSON-ready cache entry.

    Compiled expression, terms, condition sides, recommended step, and the expanded
    speed-up split of :meth:`~theory.bound.Bound.max_H` at the recommended step (the costly part: sympy
    expansion of the bound at that step).
    """
    speedup = None
    if bound.recommended_step is not None and bound.uses_H:
        lead, rest = speedup_exprs(bound, bound.recommended_step)
        speedup = [
            compile_formula(lead, bound.name).to_dict(),
            compile_formula(rest, bound.name).to_dict(),
        ]
    sides = [e for c in bound.conditions for e in c.sides]
    return {
        "parameters": list(bound.parameters),
        "uses_H": bound.uses_H,
        "terms": [str(t) for t in bound.terms],
        "conditions": [[c.name, str(c.relation), c.strict] for c in bound.conditions],
        "f_expression": compile_formula(bound.expression, bound.name).to_dict(),
        "f_terms": compile_formula(list(bound.terms), bound.name).to_dict(),
        "f_conditions": compile_formula(sides, bound.name).to_dict() if sides else None,
        "f_recommended": None
        if bound.recommended_step is None
        else compile_formula(bound.recommended_step, bound.name).to_dict(),
        "speedup": speedup,
    }


def cache_text(bound: Bound) -> str:
    """The statement as text (sympy ``srepr`` of the expression, the conditions, the
    recommended step and the step symbol): what the compiled forms depend on."""
    parts = [
        sp.srepr(bound.expression),
        [[c.name, sp.srepr(c.relation)] for c in bound.conditions],
        None if bound.recommended_step is None else sp.srepr(bound.recommended_step),
        sp.srepr(bound.step_symbol),
    ]
    return json.dumps(parts)

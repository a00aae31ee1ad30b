"""Lower bounds: what no valid upper bound may go below. Kept apart from the upper bounds.

Files: ``quadratic.py`` (the exact value on the isotropic quadratic, a closed form:
``local_sgd_quadratic_lower``), ``hetero.py`` (the exact value on two-curvature
heterogeneous instances: ``local_sgd_heterogeneity_lower``), ``region.py`` (how far the
iterates of those instances reach, which sizes them). This package imports
neither sympy nor the upper-bound registry, so ``palsgd check`` shows the lower bounds
without loading sympy.

A lower bound has ``kind = "lower"``, ``name``, ``title``, ``provenance``, ``algorithms``
(names of the algorithm table, :mod:`theory.algorithm`, checked on registration; the
heterogeneous instances' are derived from the table), ``parameters`` and
``evaluate(**values)``. It lives in a registry of its own
(:func:`register_lower`): :func:`theory.bounds.all_bounds`, :func:`theory.bounds.names` and
:func:`theory.bounds.get` never return one, so nothing that iterates the upper bounds can
treat it as one, and :func:`theory.bounds.register` refuses one.
"""

from __future__ import annotations

from typing import Any

from core.errors import UserInputError
from core.validation import check_choice
from theory.algorithm import lookup
from theory.lower.hetero import LOCAL_SGD_HETEROGENEITY_LOWER, InstanceLowerBound
from theory.lower.quadratic import LOCAL_SGD_QUADRATIC_LOWER, ClosedFormLowerBound

__all__ = [
    "ClosedFormLowerBound",
    "InstanceLowerBound",
    "register_lower",
    "get_lower",
    "lower_bounds",
    "describe_lower",
]

_LOWER: dict[str, Any] = {}


def register_lower(bound: Any) -> Any:
    """Add ``bound`` (``kind = "lower"``) to the lower-bound registry, never to the upper one."""
    if getattr(bound, "kind", None) != "lower" or not callable(getattr(bound, "evaluate", None)):
        raise TypeError("register_lower() takes a lower bound (kind = 'lower', with evaluate)")
    for name in bound.algorithms:  # names of the algorithm table, as a bound's spec has them
        if lookup(name, "algorithm").name != name:
            raise UserInputError(
                f"lower bound {bound.name!r}: write {lookup(name).name!r} for {name!r}"
            )
    if bound.name in _LOWER and _LOWER[bound.name] is not bound:
        raise UserInputError(f"a lower bound named {bound.name!r} is already registered")
    _LOWER[bound.name] = bound
    return bound


def get_lower(name: str) -> Any:
    """The registered lower bound called ``name``."""
    return _LOWER[check_choice("lower bound", name, sorted(_LOWER))]


def lower_bounds() -> list[Any]:
    """Every registered lower bound (sorted by name)."""
    return [_LOWER[n] for n in sorted(_LOWER)]


def describe_lower(bound: Any) -> dict[str, Any]:
    """JSON-ready description of a lower bound (for ``palsgd bounds``): name, title,
    ``kind = "lower"``, algorithms, parameters, provenance, notes, and the LaTeX of a closed
    form (``None`` for a bound evaluated on instances)."""
    latex = None
    if callable(getattr(bound, "expression", None)):
        import sympy  # only here: palsgd bounds reads the cached description

        latex = sympy.latex(bound.expression())
    return {
        "name": bound.name,
        "title": bound.title,
        "kind": "lower",
        "derived_here": bool(bound.derived_here),
        "algorithms": list(bound.algorithms),
        "parameters": list(bound.parameters),
        "optional": dict(getattr(bound, "optional", {})),
        "provenance": bound.provenance,
        "notes": bound.notes,
        "latex": latex,
    }


register_lower(LOCAL_SGD_QUADRATIC_LOWER)
register_lower(LOCAL_SGD_HETEROGENEITY_LOWER)

"""The bound machinery: a symbolic bound, its compiled numerics and their caches.

``core`` (:class:`Bound`, :class:`Condition`: a bound's formula, conditions, assumptions and
algorithm spec), ``compiler`` (sympy to compiled formulas), ``compiled_fn`` (a compiled
formula), ``rates`` (the rate in ``T``), ``numeric`` (:class:`CompiledBound`, the sympy-free
numerics, validated once at its edge), ``search`` (grid searches), ``results`` (``MaxH``,
``OptimalStep``, ``ConditionResult``), ``cache`` (each bound's compiled formulas on disk) and
``registry`` (the registered bounds without sympy, from a snapshot; it reads
:mod:`theory.bounds`, which never imports it).

The names below are imported on first access (:func:`core.lazy.lazy_exports`): ``import
theory.bound.numeric`` costs no sympy.
"""

from __future__ import annotations

from core.lazy import lazy_exports

#: the names of :mod:`theory.bound.core` the package re-exports
_CORE = (
    "Bound",
    "Condition",
    "ConditionResult",
    "CompiledFn",
    "MaxH",
    "OptimalStep",
    "RateTerm",
    "param_name",
    "RTOL",
)
__getattr__, __dir__ = lazy_exports(__name__, {"theory.bound.core": _CORE})
__all__ = list(_CORE)

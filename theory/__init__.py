"""Convergence theory of PALSGD and its baselines.

Symbolic bounds with their step-size conditions (:mod:`theory.bound`, numerics in
:mod:`theory.bound_numeric`; the registry :mod:`theory.bounds`), machine-checked proof
steps (:mod:`theory.proofs`), a hyperparameter checker (:mod:`theory.check`), synthetic
problems with exact constants (:mod:`theory.problems`), a vectorised simulator
(:mod:`theory.simulate`), exact quadratic moment recursions (:mod:`theory.quadratic`),
Monte-Carlo and exact verification (:mod:`theory.verify`) and parameter checks
(:mod:`theory.validation`).

For notebooks: ``theory.bounds``, ``theory.Bound`` (a bound is callable:
``b(L=1, sigma=1, ...)`` is its value), ``theory.at_optimal_step(b, ...)`` and
``theory.verify_bound(b)`` (:mod:`theory.shortcuts`), ``theory.MaxH`` and
``theory.OptimalStep`` (results of ``Bound.max_H`` and ``Bound.at_optimal_step``). They
are imported on first use, so ``palsgd check`` does not import sympy.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: attribute -> (module, name in it; None: the module itself), imported on first access
_LAZY = {
    "bounds": ("theory.bounds", None),
    "Bound": ("theory.bound", "Bound"),
    "MaxH": ("theory.bound_numeric", "MaxH"),
    "OptimalStep": ("theory.bound_numeric", "OptimalStep"),
    "at_optimal_step": ("theory.shortcuts", "at_optimal_step"),
    "verify_bound": ("theory.shortcuts", "verify_bound"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'theory' has no attribute {name!r}")
    module, attr = _LAZY[name]
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value

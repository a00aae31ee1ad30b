"""Convergence theory of PALSGD and its baselines.

Errors, the value checks, files, writers, limits and exit codes are the base layer's
(:mod:`core`), which this package imports and which imports nothing of it.

Files: ``bound/`` (the bound machinery: the symbolic :class:`~theory.bound.Bound`, its
compiled sympy-free numerics, grid searches, results and on-disk caches, and the registry
snapshot), ``bounds/`` (the registry),
``proofs/`` (machine-checked lemma chains), ``check/`` and ``check_bounds_cmd.py``
(``palsgd check`` / ``bounds``), ``presets.py``, ``validation.py`` (the table of the
notation's parameters and the checks against it), ``problems/`` (synthetic
problems with exact constants), ``algorithm/`` (the one table of algorithm definitions and
the :class:`~theory.algorithm.AlgorithmSpec` every layer takes; docs/algorithms.md),
``sync.py`` (the sync rule and the outer update), ``simulate/``
(vectorised simulators), ``moments/`` (exact moment recursions), ``verify/``
(``palsgd verify``), ``shortcuts.py`` and ``nbtools.py`` (for notebooks), ``commands.py``
(the subcommands of :mod:`palsgd.cli`); ``symbols.py``, ``assumptions.py``,
``safe_parse.py``, ``coins.py``.

For notebooks: ``theory.bounds``, ``theory.Bound`` (a bound is callable:
``b(L=1, sigma=1, ...)`` is its value), ``theory.at_optimal_step(b, ...)`` and
``theory.verify_bound(b)``, ``theory.MaxH`` and ``theory.OptimalStep`` (results of
``Bound.max_H`` and ``Bound.at_optimal_step``). They are imported on first use, so
``palsgd check`` does not import sympy.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: attribute -> (module, name in it; None: the module itself), imported on first access
_LAZY = {
    "bounds": ("theory.bounds", None),
    "Bound": ("theory.bound", "Bound"),
    "MaxH": ("theory.bound.results", "MaxH"),
    "OptimalStep": ("theory.bound.results", "OptimalStep"),
    "at_optimal_step": ("theory.shortcuts", "at_optimal_step"),
    "verify_bound": ("theory.shortcuts", "verify_bound"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'theory' has no attribute {name!r}")
    module, attr = _LAZY[name]
    # stays lazy (PEP 562): the attributes pull in sympy, which `palsgd check` never loads
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value

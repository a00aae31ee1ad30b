"""Lazy re-exports for a package's ``__init__`` (PEP 562).

A package that re-exports names from its modules imports all of them, and with them torch,
sympy or scipy, as soon as any one of its modules is imported: ``palsgd train --help`` would
pay for torch (about a second) before it prints anything. :func:`lazy_exports` gives such a
package a module ``__getattr__`` that imports a name's module on the first access of the
name, so that ``from empirical.data import build_dataset`` still works while ``import
empirical.data.common`` costs only that module::

    __getattr__, __dir__ = lazy_exports(__name__, {
        "empirical.data.cifar": ("CIFAR10_MEAN", "CIFAR10_STD", "load_cifar10"),
        ...
    })

A resolved name is stored in the package's namespace: the next access costs nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package ``package`` (its ``__name__``).

    ``table`` maps a module (absolute name) to the names it provides to the package.
    """
    where: dict[str, str] = {}
    for module, names in table.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: '{name}' is exported by two modules")
            where[name] = module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__

"""Registry of encoded convergence bounds.

Each module in this package defines one theorem family and registers its
:class:`~theory.bound.Bound` objects; :func:`get` and :func:`all_bounds` give access.
Users add their own with :func:`register` (e.g. a bound built with
:meth:`theory.bound.Bound.from_strings`).
"""

from __future__ import annotations

import importlib

from theory.bound import Bound
from theory.validation import UserInputError

__all__ = ["register", "get", "all_bounds", "names", "BUILTIN_MODULES"]

_REGISTRY: dict[str, Bound] = {}

#: modules whose bounds are registered on first use
BUILTIN_MODULES = ("sgd", "local_sgd", "easgd", "palsgd", "outer", "slowmo", "lower")
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in BUILTIN_MODULES:
        importlib.import_module(f"theory.bounds.{mod}")


def register(bound: Bound, *, replace: bool = False) -> Bound:
    """Add ``bound`` to the registry under ``bound.name`` (error on a clash unless ``replace``)."""
    if not isinstance(bound, Bound):
        raise TypeError("register() takes a theory.bound.Bound")
    if getattr(bound, "kind", "upper") != "upper":
        raise TypeError("register() takes upper bounds; use theory.bounds.lower.register_lower")
    if bound.name in _REGISTRY and not replace and _REGISTRY[bound.name] is not bound:
        raise UserInputError(f"a bound named {bound.name!r} is already registered")
    _REGISTRY[bound.name] = bound
    return bound


def get(name: str) -> Bound:
    """The registered bound called ``name``; unknown names list the known ones."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        from theory.bounds.lower import lower_bounds

        if name in {b.name for b in lower_bounds()}:
            raise UserInputError(
                f"{name!r} is a lower bound (kind = 'lower'), not an upper bound: use "
                "theory.bounds.lower.get_lower"
            ) from None
        raise UserInputError(f"unknown bound {name!r}; known bounds: {names()}") from None


def names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def all_bounds() -> list[Bound]:
    _load_builtins()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]

"""Registry of encoded convergence bounds.

Each module in this package defines one theorem family and registers its
:class:`~theory.bound.Bound` objects, each holding the algorithm spec it is stated for
(``Bound.algorithm``: a row of :mod:`theory.algorithm` with its coin model and outer
updates); :func:`get` and :func:`all_bounds` give access.
Users add their own with :func:`register` (e.g. a bound built with
:meth:`theory.bound.Bound.from_strings`).

Files: ``sgd.py`` (minibatch SGD), ``local_sgd.py`` (Local SGD, Wang-Joshi), ``easgd.py``
(EASGD), ``palsgd.py`` (Theorem 1), ``outer.py`` (Theorem 2: outer SGD and momentum, the
pull-aware horizon), ``slowmo.py`` (SlowMo over all-reduce SGD), ``lower.py`` (symbolic
lower bounds; the registered ones are in :mod:`theory.lower`), ``maps.py`` (the map of the guarantees: the pull-aware bound against the Local SGD bounds; a comparison of bounds only, the algorithms are compared by :mod:`theory.compare`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.errors import UserInputError
from core.validation import check_choice
from theory.bound import Bound
from theory.lower import lower_bounds

__all__ = [
    "register",
    "registered",
    "theorem_bound",
    "get",
    "all_bounds",
    "names",
    "BUILTIN_MODULES",
]

_REGISTRY: dict[str, Bound] = {}

#: modules whose bounds are registered on first use (the ones :func:`_load_builtins` imports)
BUILTIN_MODULES = ("sgd", "local_sgd", "easgd", "palsgd", "outer", "slowmo")
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    # imported on first use rather than at the top: each of them imports this package to
    # register its bounds (the registry lists them sorted by name, whatever the order)
    from theory.bounds import easgd, local_sgd, outer, palsgd, sgd, slowmo  # noqa: F401


def register(bound: Bound, *, replace: bool = False) -> Bound:
    """Add ``bound`` to the registry under ``bound.name`` (error on a clash unless ``replace``)."""
    if not isinstance(bound, Bound):
        raise TypeError("register() takes a theory.bound.Bound")
    if getattr(bound, "kind", "upper") != "upper":
        raise TypeError("register() takes upper bounds; use theory.lower.register_lower")
    if bound.name in _REGISTRY and not replace and _REGISTRY[bound.name] is not bound:
        raise UserInputError(f"a bound named {bound.name!r} is already registered")
    _REGISTRY[bound.name] = bound
    return bound


def theorem_bound(th: Any, *, provenance: str, **fields: Any) -> Bound:
    """A bound derived here from a machine-checked theorem object ``th``: its ``expression``
    and ``conditions`` are the theorem's, ``provenance`` names the proof; ``fields`` are the
    other :class:`~theory.bound.Bound` fields (name, title, assumptions, ...)."""
    return Bound(
        expression=th.expression,
        conditions=th.conditions,
        provenance=provenance,
        derived_here=True,
        **fields,
    )


@contextmanager
def registered(bound: Bound) -> Iterator[Bound]:
    """``with registered(b):`` ``b`` is registered inside the block and removed after it,
    unless it was registered before (a different bound of the same name is refused)."""
    _load_builtins()
    before = _REGISTRY.get(bound.name)
    register(bound)
    try:
        yield bound
    finally:
        if before is None:
            _REGISTRY.pop(bound.name, None)


def get(name: str) -> Bound:
    """The registered bound called ``name``; unknown names list the known ones."""
    _load_builtins()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in {b.name for b in lower_bounds()}:
        raise UserInputError(
            f"{name!r} is a lower bound (kind = 'lower'), not an upper bound: use "
            "theory.lower.get_lower"
        )
    return _REGISTRY[check_choice("bound", name, names())]


def names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)


def all_bounds() -> list[Bound]:
    _load_builtins()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]

"""A compiled formula without sympy: :class:`CompiledFn`, the Python source of a lambdified
expression over numpy with its parameter names, and its JSON form (source and bytecode) for
the on-disk cache of :mod:`theory.bound.cache`."""

from __future__ import annotations

import base64
import functools
import marshal
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError

__all__ = ["CODE_TAG", "MODULES", "CompiledFn", "resolve_globals"]


#: the interpreter's bytecode tag: cached code objects are used only by the same one
CODE_TAG = f"{sys.implementation.cache_tag}-{sys.version_info[0]}.{sys.version_info[1]}"
#: modules the free names of a compiled formula may come from (``"module.name"`` entries)
MODULES = {"numpy": np, "functools": functools, "math": math}


def resolve_globals(namespace: Mapping[str, Any], names: Sequence[str]) -> list[str] | None:
    """``"module.name"`` for each free name, from :data:`MODULES`; ``None`` if one is not there."""
    out = []
    for n in names:
        if n not in namespace:
            continue  # a builtin
        val = namespace[n]
        for mod_name, mod in MODULES.items():
            cand = getattr(mod, n, None)
            if cand is val or (isinstance(val, float) and cand == val):
                out.append(f"{mod_name}.{n}")
                break
        else:
            return None
    return out


class CompiledFn:
    """A compiled formula (or list of formulas): Python source over numpy, and its parameters.

    ``names``: the parameter names in argument order; ``source``: the text of a function
    ``def _lambdifygenerated(<names>)``; ``globals_``: its free names as ``"module.name"``
    (modules of :data:`MODULES`).
    """

    __slots__ = ("names", "source", "globals_", "_fn", "_code", "owner", "multi")

    def __init__(
        self,
        names: Sequence[str],
        source: str,
        globals_: Sequence[str],
        owner: str,
        multi: bool,
        code: bytes | None = None,
    ):
        self.names, self.source, self.globals_ = tuple(names), str(source), tuple(globals_)
        self.owner, self.multi, self._code = owner, bool(multi), code
        for g in self.globals_:
            mod, _, attr = g.partition(".")
            if mod not in MODULES or not hasattr(MODULES[mod], attr):
                raise ValueError(f"bound {owner!r}: unknown global {g!r} in a compiled formula")
        self._fn: Callable[..., Any] | None = None

    @property
    def fn(self) -> Callable[..., Any]:
        """The Python function (compiled from :attr:`source` on first use)."""
        if self._fn is None:
            ns: dict[str, Any] = {}
            for g in self.globals_:
                mod, _, attr = g.partition(".")
                ns[attr] = getattr(MODULES[mod], attr)
            exec(self._code_object(), ns)  # noqa: S102 (the project's own formula)
            self._fn = ns["_lambdifygenerated"]
        return self._fn

    def _code_object(self) -> Any:
        if self._code is not None:
            try:
                return marshal.loads(self._code)
            except (ValueError, EOFError, TypeError):
                self._code = None
        return compile(self.source, f"<bound {self.owner}>", "exec")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the source, and its bytecode for this interpreter (:data:`CODE_TAG`)."""
        code = marshal.dumps(compile(self.source, f"<bound {self.owner}>", "exec"))
        return {"names": list(self.names), "source": self.source, "globals": list(self.globals_),
                "multi": self.multi, "code_tag": CODE_TAG,
                "code": base64.b64encode(code).decode("ascii")}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], owner: str) -> CompiledFn:
        """Inverse of :meth:`to_dict`; the bytecode is used only by the interpreter that wrote it."""
        code = base64.b64decode(d["code"]) if d.get("code_tag") == CODE_TAG else None
        return cls(d["names"], d["source"], d["globals"], owner, d["multi"], code)

    def __call__(self, arr: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> Any:
        try:
            args = [arr[n] for n in self.names]
        except KeyError:
            missing = sorted(set(self.names) - set(arr))
            raise UserInputError(f"bound {self.owner!r} needs parameter(s) {missing}") from None
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = self.fn(*args)
        if self.multi:
            return [_shaped(o, shape) for o in out]
        return _shaped(out, shape)


def _shaped(out: Any, shape: tuple[int, ...]) -> np.ndarray:
    out = np.asarray(out, dtype=float)
    if out.shape != shape:
        out = np.array(np.broadcast_to(out, shape))
    return out

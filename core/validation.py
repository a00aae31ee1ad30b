"""The value checks every layer uses, with one message format.

A bad number raises :class:`ParameterError`: ``parameter 'name' = value is invalid: allowed
range is [low, high] (detail)``, with the authors'-code alias of a parameter of the
project's notation named when one is registered (:func:`register_aliases`, called by
:mod:`theory.validation`, which holds the parameter table). A bad choice raises
:class:`~core.errors.UserInputError`: ``unknown name 'value'; known names: [...]``.

* :class:`ParamSpec`: the allowed range of one number (the rows of the parameter tables);
  :func:`check_spec` checks a value (scalar or array) against it;
* :func:`check_int`, :func:`check_number`, :func:`check_fraction`: a setting without a
  table row (a seed, a count, a factor); ``bool`` is never a number;
* :func:`check_choice`, :func:`check_type`, :func:`with_flag`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError

__all__ = [
    "ParameterError",
    "ParamSpec",
    "register_aliases",
    "check_spec",
    "check_int",
    "check_fraction",
    "check_number",
    "check_choice",
    "check_type",
    "with_flag",
]

#: parameter name -> the authors'-code alias named in its messages; filled once by the
#: layer that owns the parameter table (:mod:`theory.validation`)
_ALIAS_OF: dict[str, str] = {}


def register_aliases(alias_of: Mapping[str, str]) -> None:
    """Name ``alias_of[name]`` as the authors'-code alias in every message about ``name``."""
    _ALIAS_OF.update(alias_of)


class ParameterError(UserInputError):
    """A parameter outside its allowed range; the message names parameter, value and range."""

    def __init__(self, name: str, value: Any, allowed: str, detail: str = ""):
        self.name, self.value, self.allowed = name, value, allowed
        alias = _ALIAS_OF.get(name)
        label = f"'{name}'" + (f" (authors' code: '{alias}')" if alias else "")
        shown = _show(value)
        msg = f"parameter {label} = {shown} is invalid: allowed range is {allowed}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


@dataclass(frozen=True)
class ParamSpec:
    """Allowed range of one parameter.

    ``low``/``high`` are bounds; ``low_open``/``high_open`` make them strict.
    ``integer`` requires whole numbers. ``meaning`` and ``unit`` are for help texts.
    """

    name: str
    meaning: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    unit: str = ""

    @property
    def allowed(self) -> str:
        lo = "(" if self.low_open else "["
        hi = ")" if self.high_open or math.isinf(self.high) else "]"
        lo_s = "-inf" if math.isinf(self.low) else _num(self.low)
        hi_s = "inf" if math.isinf(self.high) else _num(self.high)
        kind = "integer in " if self.integer else ""
        return f"{kind}{lo}{lo_s}, {hi_s}{hi}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _show(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.size > 1:
        return f"array(shape={value.shape})"
    return repr(value.item() if isinstance(value, np.ndarray | np.generic) else value)


def check_spec(spec: ParamSpec, value: Any) -> Any:
    """Check one value (scalar or array) against ``spec``; return it as given.

    Arrays are checked element-wise (all elements must be valid). ``bool``, ``None``, text
    that is not a number, NaN and infinities are refused.
    """
    name = spec.name
    if isinstance(value, bool) or value is None:
        raise ParameterError(name, value, spec.allowed, "expected a number")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(name, value, spec.allowed, "expected a number") from None
    if arr.size == 0:
        raise ParameterError(name, value, spec.allowed, "empty array")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, value, spec.allowed, "NaN or infinite value")
    bad = (arr < spec.low) | (arr > spec.high)
    if spec.low_open:
        bad |= arr == spec.low
    if spec.high_open:
        bad |= arr == spec.high
    if spec.integer:
        bad_int = arr != np.round(arr)
        if np.any(bad_int):
            first = arr[bad_int].ravel()[0] if arr.ndim else arr
            raise ParameterError(name, float(first), spec.allowed, "must be a whole number")
    if np.any(bad):
        first = arr[bad].ravel()[0] if arr.ndim else arr
        raise ParameterError(name, float(first), spec.allowed)
    return value


def check_int(
    name: str, value: Any, low: int = 0, high: int | None = None, *, integral_floats: bool = False
) -> int:
    """Validate an integer setting that has no :class:`ParamSpec` (a seed, a count, ...).

    Accepts Python and numpy integers (and, with ``integral_floats``, floats with an integer
    value such as ``3.0``) in ``[low, high]``; returns the value as ``int``. Anything else,
    ``bool`` included, raises :class:`ParameterError` naming ``name`` and the range.
    """
    ok = not isinstance(value, bool)
    if ok and isinstance(value, int | np.integer):
        value = int(value)
    elif ok and integral_floats and isinstance(value, float | np.floating):
        ok = math.isfinite(value) and float(value).is_integer()
        value = int(value) if ok else value
    else:
        ok = False
    ok = ok and value >= low and (high is None or value <= high)
    if not ok:
        hi = "inf)" if high is None else f"{high}]"
        raise ParameterError(name, value, f"integer in [{low}, {hi}")
    return value


def check_number(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
    unit: str = "",
    text: bool = False,
) -> float:
    """Validate a real setting that has no :class:`ParamSpec` (a factor, a level, ...).

    ``value`` must be a number (not ``bool``, not text) in ``[low, high]``, the ends excluded with
    ``low_open`` / ``high_open``; NaN is refused, and infinities unless ``allow_inf``. Returns
    it as ``float``; otherwise raises :class:`ParameterError` naming ``name`` and the range
    (followed by ``unit`` when given). With ``text``, a number written as text is read too
    (a YAML 1.1 reader leaves ``2.5e10`` a string: values read from a user's file).
    """
    allowed = ParamSpec(name, "", low, high, low_open, high_open).allowed
    allowed += f" {unit}" if unit else ""
    if isinstance(value, bool | bytes) or value is None or (isinstance(value, str) and not text):
        raise ParameterError(name, value, allowed, "expected a number")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, value, allowed, "expected a number") from None
    ok = not math.isnan(v) and (allow_inf or math.isfinite(v))
    ok = (
        ok
        and (v > low or (not low_open and v == low))
        and (v < high or (not high_open and v == high))
    )
    if not ok:
        raise ParameterError(name, value, allowed)
    return v


def check_fraction(name: str, value: Any, *, allow_zero: bool, allow_one: bool) -> float:
    """Validate a fraction in ``(0, 1)``, with ``0`` and/or ``1`` allowed on request."""
    return check_number(name, value, 0.0, 1.0, low_open=not allow_zero, high_open=not allow_one)


def check_choice(name: str, value: Any, allowed: Iterable[Any], *, plural: str = "") -> Any:
    """``value`` if it is one of ``allowed``; otherwise :class:`UserInputError`
    ``"unknown <name> 'value'; known <plural>: [...]"`` (``plural`` defaults to
    ``name + "s"``)."""
    options = list(allowed)
    try:
        if value in options:
            return value
    except TypeError:  # an unhashable or incomparable value is not a choice
        pass
    raise UserInputError(f"unknown {name} {value!r}; known {plural or name + 's'}: {options}")


def check_type(name: str, value: Any, types: type | tuple[type, ...], expected: str) -> Any:
    """``value`` if it is an instance of ``types``; otherwise :class:`UserInputError`
    ``"argument 'name' must be <expected>, got <type>"`` (a public function's guard against
    ``None`` or a wrong type, instead of an AttributeError deep inside)."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)):
        return value
    raise UserInputError(f"argument '{name}' must be {expected}, got {type(value).__name__}")


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def with_flag(exc: ParameterError) -> UserInputError:
    """``exc`` with the command-line flag of its parameter named (``steps_scale`` is typed
    as ``--steps-scale``), for commands whose flags are their parameters' names."""
    flag = "--" + exc.name.replace("_", "-")
    if flag in str(exc):
        return exc
    return UserInputError(f"{exc} (option {flag})")

"""Validation of every user-facing parameter, in one place.

The API, the CLI and the distributed trainer all call :func:`validate` (or
:func:`canonical_name`), so a bad value gets the same message everywhere: the
parameter's name (and its authors'-code alias), the value, and the allowed range.

The project uses the authors' notation (see README): ``alpha`` inner learning rate
(code ``lr``), ``eta`` pull/mixing rate, ``p`` pull probability (``prob_no_grad``),
``H`` local steps between syncs (``sync_interval``), ``gamma`` outer learning rate
(``outer_lr``), ``mu`` outer momentum, ``T0`` warm-up steps (``local_sgd_start_iter``).

This file holds the parameter table (:data:`PARAMS`, :data:`ALIASES`) and the value checks
(:func:`validate`, :func:`check_int`, :func:`check_number`, :func:`check_fraction`,
:func:`check_choice`); the file readers, output-path
and memory checks are :mod:`theory.validation_files` and the error class is
:mod:`theory.errors`, both re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from theory.errors import UserInputError
from theory.validation_files import (
    MAX_INPUT_BYTES,
    MEMORY_FRACTION,
    check_input_file,
    check_memory,
    check_output_dir,
    check_output_file,
    output_file_target,
    read_input_bytes,
    read_mapping_file,
)

__all__ = [
    "UserInputError",
    "ParameterError",
    "ParamSpec",
    "PARAMS",
    "ALIASES",
    "canonical_name",
    "canonicalize",
    "validate",
    "validate_one",
    "check_int",
    "check_fraction",
    "check_number",
    "check_choice",
    "check_type",
    "with_flag",
    "read_mapping_file",
    "read_input_bytes",
    "check_input_file",
    "MAX_INPUT_BYTES",
    "output_file_target",
    "check_output_dir",
    "check_output_file",
    "check_memory",
    "MEMORY_FRACTION",
]


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


_INF = math.inf
PARAMS: dict[str, ParamSpec] = {
    s.name: s
    for s in [
        ParamSpec(
            "L", "smoothness constant of every f_k", 0, _INF, low_open=True, unit="1/length^2"
        ),
        ParamSpec("sigma", "std of the stochastic-gradient noise per worker", 0, _INF),
        ParamSpec("zeta", "heterogeneity: sqrt of mean ||grad f_k - grad f||^2", 0, _INF),
        ParamSpec("F0", "initial gap f(x0) - f_star", 0, _INF),
        ParamSpec("beta", "relative-variance coefficient (Cooperative SGD A4)", 0, _INF),
        ParamSpec("K", "number of workers", 1, _INF, integer=True),
        ParamSpec("H", "local steps between syncs (pull steps count)", 1, _INF, integer=True),
        ParamSpec("T", "total local steps", 1, _INF, integer=True),
        ParamSpec("T0", "DDP warm-up steps", 0, _INF, integer=True),
        ParamSpec("p", "probability of a pull step", 0, 1, high_open=True),
        ParamSpec("alpha", "inner learning rate", 0, _INF, low_open=True),
        ParamSpec("eta", "pull (mixing) rate", 0, _INF),
        ParamSpec("gamma", "outer learning rate", 0, _INF, low_open=True),
        ParamSpec("mu", "outer momentum", 0, 1, high_open=True),
        ParamSpec("eps", "target accuracy for (1/T) sum E||grad f||^2", 0, _INF, low_open=True),
        ParamSpec("A", "gradient-accumulation micro-batches per step", 1, _INF, integer=True),
        ParamSpec(
            "R",
            "a count: rounds (T = R*H) in bounds, Monte-Carlo replicas in verify",
            1,
            _INF,
            integer=True,
        ),
        ParamSpec("d", "problem dimension", 1, _INF, integer=True),
    ]
}

#: authors'-code flag names (and a few common synonyms) -> project names
ALIASES: dict[str, str] = {
    "lr": "alpha",
    "prob_no_grad": "p",
    "sync_interval": "H",
    "outer_lr": "gamma",
    "outer_momentum": "mu",
    "local_sgd_start_iter": "T0",
    "world_size": "K",
    "num_gpus": "K",
    "grad_accu_step": "A",
    "steps": "T",
}
_ALIAS_OF = {
    "alpha": "lr",
    "p": "prob_no_grad",
    "H": "sync_interval",
    "gamma": "outer_lr",
    "T0": "local_sgd_start_iter",
    "A": "grad_accu_step",
}


def canonical_name(name: str) -> str:
    """Map an authors'-code alias (``lr``, ``prob_no_grad``, ...) to the project name."""
    if name in PARAMS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    raise UserInputError(
        f"unknown parameter '{name}': known parameters are {sorted(PARAMS)}; "
        f"aliases {sorted(ALIASES)}"
    )


def canonicalize(values: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
    """Rename aliases to project names; reject a parameter given twice under two names."""
    out: dict[str, Any] = {}
    for key, val in values.items():
        if allow_unknown and key not in PARAMS and key not in ALIASES:
            out[key] = val
            continue
        name = canonical_name(key)
        if name in out:
            raise UserInputError(f"parameter '{name}' given twice (as '{key}' and another alias)")
        out[name] = val
    return out


def validate_one(name: str, value: Any) -> Any:
    """Check one value (scalar or array) against its :class:`ParamSpec`; return it as given.

    Arrays are checked element-wise (all elements must be valid). NaN and inf are rejected,
    except ``+inf`` where the range allows it (never, for the parameters above).
    """
    name = canonical_name(name)
    spec = PARAMS[name]
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


def validate(values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
    """Canonicalise aliases and validate every known parameter.

    Returns a new dict keyed by project names. Unknown names raise :class:`UserInputError`.
    Cross-parameter rules (e.g. ``p = 0`` with ``eta > 0`` is Local SGD, fine) are not
    checked here; stability conditions such as ``alpha*eta/p < 2`` are the algorithm spec's
    (:func:`theory.algorithm.pull_stability`), reported by the checker with margins and
    refused by ``palsgd train``, because they are properties of a configuration.
    """
    merged = dict(values or {})
    merged.update(kwargs)
    out = canonicalize(merged)
    for name, val in out.items():
        validate_one(name, val)
    return out


def check_int(
    name: str, value: Any, low: int = 0, high: int | None = None, *, integral_floats: bool = False
) -> int:
    """Validate an integer setting that is not one of :data:`PARAMS` (a seed, a count, ...).

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
) -> float:
    """Validate a real setting that is not one of :data:`PARAMS` (a factor, a level, ...).

    ``value`` must be a number (not ``bool``, not text) in ``[low, high]``, the ends excluded with
    ``low_open`` / ``high_open``; NaN is refused, and infinities unless ``allow_inf``. Returns
    it as ``float``; otherwise raises :class:`ParameterError` naming ``name`` and the range.
    """
    allowed = ParamSpec(name, "", low, high, low_open, high_open).allowed
    if isinstance(value, bool | str | bytes) or value is None:
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

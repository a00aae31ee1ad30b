"""Validation of every user-facing parameter, in one place.

The API, the CLI and the distributed trainer all call :func:`validate` (or
:func:`canonical_name`), so a bad value gets the same message everywhere: the
parameter's name (and its authors'-code alias), the value, and the allowed range.

The project uses the authors' notation (see README): ``alpha`` inner learning rate
(code ``lr``), ``eta`` pull/mixing rate, ``p`` pull probability (``prob_no_grad``),
``H`` local steps between syncs (``sync_interval``), ``gamma`` outer learning rate
(``outer_lr``), ``mu`` outer momentum, ``T0`` warm-up steps (``local_sgd_start_iter``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
    "read_mapping_file",
    "check_output_dir",
    "check_output_file",
    "check_memory",
]


class UserInputError(ValueError):
    """Bad input from a user (parameter, file, name). The CLI prints it and exits with 2."""


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
    checked here; stability conditions such as ``alpha*eta/p <= 2`` are reported by the
    theory checker with margins, because they are properties of a configuration, not
    input errors.
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


def check_fraction(name: str, value: Any, *, allow_zero: bool, allow_one: bool) -> float:
    """Validate a fraction in ``(0, 1)``, with ``0`` and/or ``1`` allowed on request."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    ok = (
        math.isfinite(v)
        and (v > 0 or (allow_zero and v == 0))
        and (v < 1 or (allow_one and v == 1))
    )
    if not ok:
        lo, hi = ("[" if allow_zero else "("), ("]" if allow_one else ")")
        raise ParameterError(name, value, f"{lo}0, 1{hi}")
    return v


def _no_duplicate_keys_json(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise ValueError(f"key '{key}' appears twice")
        out[key] = val
    return out


def _yaml_loader():
    """A ``yaml.SafeLoader`` that rejects a mapping key given twice (PyYAML keeps the last)."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' appears twice", key_node.start_mark
                )
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return _StrictLoader


def read_mapping_file(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML file (JSON when the suffix is ``.json``) that holds a mapping.

    An empty file gives ``{}``. A missing or unreadable file, a directory, a binary file
    (not UTF-8 text), a parse error, a key given twice or a top level that is not a mapping
    raises :class:`UserInputError` naming ``what`` and the path.
    """
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"cannot read {what} '{path}': it is a directory, not a file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = "it does not exist" if not path.exists() else exc.strerror
        raise UserInputError(f"cannot read {what} '{path}': {reason}") from None
    try:
        text = raw.decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", raw, text.index("\x00"), text.index("\x00") + 1, "")
    except UnicodeDecodeError as exc:
        raise UserInputError(
            f"{what} '{path}' is not a text file (byte {exc.start} is not UTF-8 text); "
            "expected YAML or JSON"
        ) from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys_json)
        else:
            import yaml

            data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except Exception as exc:  # json.JSONDecodeError, yaml.YAMLError, a duplicate key
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(f"{what} '{path}' is malformed: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserInputError(f"{what} '{path}' must hold a mapping, not {type(data).__name__}")
    return data


def _probe_writable(directory: Path) -> str | None:
    """``None`` when a file can be created in ``directory``, else the reason."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_output_dir(path: str | Path, flag: str) -> Path:
    """Make sure ``path`` is (or can become) a writable directory, before any work starts.

    Creates the directory (and its parents) and writes a temporary file into it. A path
    that is an existing file, a parent that is a file, or a read-only location raises
    :class:`UserInputError` naming ``flag`` (the option the user typed, e.g. ``"--out"``).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{flag} '{path}' is an existing file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(
            f"{flag} '{path}': cannot create the directory: {exc.strerror}"
        ) from None
    reason = _probe_writable(path)
    if reason:
        raise UserInputError(f"{flag} '{path}': the directory is not writable: {reason}")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """Make sure the file ``path`` can be written, before any work starts.

    An existing directory, a parent that is a file, a read-only parent or a read-only
    existing file raises :class:`UserInputError` naming ``flag``. The parent directory is
    created; the file itself is not touched.
    """
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"{flag} '{path}' is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise UserInputError(f"{flag} '{path}': '{parent}' is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserInputError(f"{flag} '{path}': cannot create '{parent}': {exc.strerror}") from None
    reason = _probe_writable(parent)
    if reason is None and path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    if reason:
        raise UserInputError(f"{flag} '{path}': cannot write the file: {reason}")
    return path


#: fraction of the machine's memory a request may plan to use before it is refused
MEMORY_FRACTION = 0.8


def _available_memory() -> int | None:
    """Bytes of memory available to this process (Linux ``MemAvailable``), or ``None``."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes: float, what: str, *, available: int | None = None) -> None:
    """Refuse up front a request whose arrays would take more than
    :data:`MEMORY_FRACTION` of the available memory.

    ``nbytes``: the estimate (e.g. ``8 * K * d * replicas`` for float64 iterates); ``what``
    names the sizes the user chose (``"K = 10^9 workers x d = 10 x R = 64 replicas"``), so
    the message says which flag to lower. Raises :class:`UserInputError`.
    """
    avail = _available_memory() if available is None else available
    if math.isfinite(nbytes) and (avail is None or nbytes <= MEMORY_FRACTION * avail):
        return
    have = "an unknown amount" if avail is None else f"{avail / 2**30:.3g} GiB"
    need = f"{nbytes / 2**30:.3g} GiB" if math.isfinite(nbytes) else "an unbounded amount"
    raise UserInputError(
        f"{what} needs about {need} of memory, but {have} is available: ask for smaller sizes"
    )

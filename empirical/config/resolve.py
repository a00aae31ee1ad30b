"""Building a :class:`~empirical.config.fields.TrainConfig`: preset < config file <
overrides, keys under project names or aliases, values coerced to the field types; the
names a resume may change; the dict form of ``config.json`` and checkpoints."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, get_type_hints

from core.errors import UserInputError
from core.files import read_mapping_file
from core.validation import ParameterError
from empirical.config.checks import validate_config
from empirical.config.fields import TrainConfig
from empirical.config.presets import TRAIN_PRESETS
from empirical.config.tables import _FIELDS, _canonical_key
from theory.validation import canonicalize

__all__ = [
    "load_config_file",
    "resolve_config",
    "config_to_dict",
    "config_from_dict",
]

_HINTS = get_type_hints(TrainConfig)


def _canonical_mapping(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Rename aliases (theory.validation's and the trainer's) to field names."""
    renamed: dict[str, Any] = {}
    for key, val in values.items():
        k = key.replace("-", "_")
        if k in renamed:
            raise UserInputError(f"option '{k}' given twice in {source}")
        renamed[k] = val
    # theory aliases (lr, prob_no_grad, ...) and double-definition check
    out = canonicalize(renamed, allow_unknown=True)
    final: dict[str, Any] = {}
    for key, val in out.items():
        name = _canonical_key(key)
        if name not in _FIELDS:
            raise UserInputError(
                f"unknown training option '{key}' in {source}: known options are "
                f"{sorted(_FIELDS)} (and the authors' aliases lr, prob_no_grad, "
                f"sync_interval, outer_lr, outer_momentum, local_sgd_start_iter, "
                f"grad_accu_step, steps)"
            )
        if name in final:
            raise UserInputError(f"option '{name}' given twice in {source} (as '{key}' too)")
        final[name] = val
    return final


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert a config-file value to the field's type; bad types name the field."""
    hint = _HINTS[name]
    if value is None:
        if type(None) in getattr(hint, "__args__", ()):
            return None
        raise UserInputError(f"option '{name}' in {source} may not be null")
    base = [a for a in getattr(hint, "__args__", (hint,)) if a is not type(None)][0]
    try:
        if base is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            raise ValueError
        if base is int:
            if isinstance(value, bool):
                raise ValueError
            as_float = float(value)
            if not as_float.is_integer():
                raise ParameterError(name, value, "a whole number")
            return int(as_float)
        if base is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if base is str:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UserInputError):
            raise
        raise UserInputError(
            f"option '{name}' in {source} = {value!r} has the wrong type (expected {base.__name__})"
        ) from None
    return value  # pragma: no cover


def load_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML or JSON mapping of training options (keys: fields or aliases)."""
    return read_mapping_file(path, "config file")


def resolve_config(
    preset: str | None = None,
    file: str | os.PathLike | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Build a :class:`TrainConfig` from preset < file < overrides, then validate it."""
    name = preset or "tiny"
    if name not in TRAIN_PRESETS:
        raise UserInputError(_unknown_preset(name))
    values: dict[str, Any] = {}
    layers: list[tuple[str, Mapping[str, Any]]] = [(f"preset '{name}'", TRAIN_PRESETS[name])]
    if file is not None:
        layers.append((f"config file '{file}'", load_config_file(file)))
    if overrides:
        layers.append(("command line", overrides))
    for source, layer in layers:
        for key, val in _canonical_mapping(layer, source).items():
            values[key] = _coerce(key, val, source)
    cfg = TrainConfig(**values)
    validate_config(cfg)
    return cfg


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """A JSON-serialisable dict of every field."""
    return dataclasses.asdict(cfg)


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """Inverse of :func:`config_to_dict` (keys checked, values coerced, then validated)."""
    out = {}
    for key, val in _canonical_mapping(values, "saved configuration").items():
        out[key] = _coerce(key, val, "saved configuration")
    return validate_config(TrainConfig(**out))


def _unknown_preset(name: str) -> str:
    """Why ``palsgd train`` has no preset ``name``: a preset of the one list
    (:mod:`theory.presets`) that the trainer cannot run, or an unknown name."""
    from theory.presets import PRESETS as ALL_PRESETS

    known = f"the presets palsgd train runs are {sorted(TRAIN_PRESETS)}"
    if name in ALL_PRESETS and ALL_PRESETS[name].not_trained:
        return (
            f"--preset '{name}' is for palsgd check only: {ALL_PRESETS[name].not_trained}; {known}"
        )
    return f"unknown preset '{name}' (--preset): {known}"

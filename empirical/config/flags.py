"""How one training option is declared: :func:`flag` gives a
:class:`~empirical.config.fields.TrainConfig` field its default and a :class:`Flag` (its
help, what ``None`` means, its range, its choices, its rule on resume and the
:class:`~empirical.algorithms.AlgorithmConfig` keyword it sets); :func:`flag_of` reads it
back. Every table of the options (the flags of ``palsgd train``, the trainer's ranges, the
fields a resume must match or may change) is derived from these declarations
(:mod:`empirical.config.fields`). A range is a :class:`~core.validation.ParamSpec`
(:class:`Range`: one declared without the name and meaning its field gives it)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from core.validation import ParamSpec

__all__ = [
    "Flag",
    "Range",
    "flag",
    "flag_of",
    "MATCH",
    "FREE",
    "CHANGE",
    "NO_DEFAULT",
    "COUNT",
    "POSITIVE",
    "NON_NEGATIVE",
    "BELOW_ONE",
    "UNIT_INTERVAL",
]

#: resume rules: the checkpoint must hold the same value (model, data, algorithm, sync
#: schedule, coins: another value is another run) ...
MATCH = "match"
#: ... the value may differ freely (how this invocation runs and where it writes) ...
FREE = "free"
#: ... or a hyperparameter: a change is refused unless ``allow_changed`` names it (then it
#: is applied from the resumed step on and recorded)
CHANGE = "change"
_RULES = (MATCH, FREE, CHANGE)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: ``Flag.match_default`` of a field that checkpoints have recorded from the start
NO_DEFAULT: Any = _NoDefault()


class Range(ParamSpec):
    """The allowed values of a numeric option: a :class:`~core.validation.ParamSpec` (its
    fields and their defaults, declared there once: ``low``, ``high``, ``low_open``,
    ``high_open``, ``integer``, ``unit``) written without the name and meaning, which the
    field it ranges supplies (:data:`empirical.config.checks.TRAINER_PARAMS`):
    ``Range(0, 1, high_open=True)``."""

    def __init__(self, *bounds: Any, name: str = "", meaning: str = "", **kw: Any) -> None:
        # ParamSpec's own fields and defaults, after the name and meaning
        super().__init__(name, meaning, *bounds, **kw)


#: the ranges most options share
COUNT = Range(0, math.inf, integer=True)
POSITIVE = Range(1, math.inf, integer=True)
NON_NEGATIVE = Range(0, math.inf)
BELOW_ONE = Range(0, 1, high_open=True)
UNIT_INTERVAL = Range(0, 1)


@dataclass(frozen=True)
class Flag:
    """One option of ``palsgd train``, declared once.

    ``help``: what it sets (the flag's help, and the meaning of its range); ``none_means``:
    what an unset (``None``) value means; ``range``: the trainer's own range (the theory's
    parameters, ``theory=True``, are ranged by :data:`theory.validation.PARAMS`);
    ``choices``: the values it takes, when the configuration owns them (names owned by a
    registry, such as models or algorithms, are checked against that registry);
    ``resume``: :data:`MATCH`, :data:`FREE` or :data:`CHANGE`; ``match_default``: for a
    :data:`MATCH` field added after checkpoints were first written, the value a manifest
    that lacks it was written with; ``algorithm``: the
    :class:`~empirical.algorithms.AlgorithmConfig` keyword it sets.
    """

    help: str
    resume: str = CHANGE
    none_means: str = "none"
    range: ParamSpec | None = None
    theory: bool = False
    choices: tuple[str, ...] | None = None
    algorithm: str | None = None
    match_default: Any = NO_DEFAULT

    def __post_init__(self) -> None:
        if self.resume not in _RULES:
            raise ValueError(f"resume rule {self.resume!r} is not one of {_RULES}")
        if self.match_default is not NO_DEFAULT and self.resume != MATCH:
            raise ValueError("match_default belongs to a field that a resume must match")


def flag(default: Any, help: str, **declared: Any) -> Any:
    """A :class:`~empirical.config.fields.TrainConfig` field with ``default`` and the
    :class:`Flag` ``Flag(help, **declared)``."""
    return dataclasses.field(default=default, metadata={"flag": Flag(help, **declared)})


def flag_of(f: dataclasses.Field) -> Flag:
    """The :class:`Flag` declared with the field ``f``."""
    return f.metadata["flag"]

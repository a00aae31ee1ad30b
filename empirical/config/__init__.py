"""Configuration of ``palsgd train``: one dataclass, presets, config files, CLI overrides.

Files: ``flags.py`` (how an option is declared: :class:`~empirical.config.flags.Flag`, its
help, range, choices and rule on resume), ``fields.py`` (:class:`TrainConfig`: every field
declared once, with its flag), ``tables.py`` (the tables derived from the declarations:
:data:`FLAGS`, :data:`CHOICES`, :data:`MATCH_FIELDS`, :data:`RUN_ONLY_FIELDS`,
:data:`CHANGE_FIELDS`, ...), ``presets.py`` (:data:`TRAIN_PRESETS`, :data:`README_8M_RUN`),
``checks.py`` (:func:`validate_config`, :data:`TRAINER_PARAMS`, derived from the
declarations too), ``resolve.py`` (:func:`resolve_config`, config files, the dict form,
:func:`allowed_changes`).

Precedence (later wins): the preset (``tiny`` unless ``--preset`` names another), then
the ``--config`` file (YAML or JSON, a flat mapping), then command-line flags.

Every key may be given under the project's name or the authors'-code alias, through
:func:`theory.validation.canonicalize` (``lr`` -> ``alpha``, ``prob_no_grad`` -> ``p``,
``sync_interval`` -> ``H``, ``outer_lr`` -> ``gamma``, ``outer_momentum`` -> ``mu``,
``local_sgd_start_iter`` -> ``T0``, ``grad_accu_step`` -> ``A``, ``steps`` -> ``T``); the
same parameter under two names is an error. Numeric ranges are checked by
:func:`theory.validation.validate` for the theory's parameters and by the same
:class:`~core.validation.ParameterError` for the trainer's own ones
(:data:`TRAINER_PARAMS`), so every bad value is reported the same way: name, value, range.

Algorithm fields left at ``None`` take :class:`empirical.algorithms.AlgorithmConfig`'s
defaults (or those of ``AlgorithmConfig.reference_faithful`` with
``reference_faithful=True``).
"""

from __future__ import annotations

from empirical.config.checks import (
    TRAINER_PARAMS,
    allowed_changes,
    check_workers_per_process,
    validate_config,
)
from empirical.config.fields import BACKENDS, OPTIMIZERS, PRECISIONS, TrainConfig
from empirical.config.flags import Flag
from empirical.config.presets import README_8M_RUN, TRAIN_PRESETS
from empirical.config.resolve import (
    config_from_dict,
    config_to_dict,
    load_config_file,
    resolve_config,
)
from empirical.config.tables import (
    ALGORITHM_FIELDS,
    CHANGE_FIELDS,
    CHOICES,
    FIELD_ALIASES,
    FLAGS,
    MATCH_DEFAULTS,
    MATCH_FIELDS,
    RUN_ONLY_FIELDS,
    THEORY_FIELDS,
)

__all__ = [
    "TrainConfig",
    "TRAIN_PRESETS",
    "README_8M_RUN",
    "PRECISIONS",
    "BACKENDS",
    "Flag",
    "FLAGS",
    "CHOICES",
    "CHANGE_FIELDS",
    "TRAINER_PARAMS",
    "THEORY_FIELDS",
    "ALGORITHM_FIELDS",
    "MATCH_FIELDS",
    "MATCH_DEFAULTS",
    "RUN_ONLY_FIELDS",
    "FIELD_ALIASES",
    "allowed_changes",
    "check_workers_per_process",
    "OPTIMIZERS",
    "load_config_file",
    "resolve_config",
    "validate_config",
    "config_to_dict",
    "config_from_dict",
]

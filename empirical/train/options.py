"""The options of ``palsgd train``: one flag per :class:`~empirical.config.TrainConfig`
field (its help, range, default and choices from the field's declaration,
:data:`empirical.config.FLAGS`), the authors' flag names as aliases, and their resolution
(preset < ``--config`` file < flags) into a validated configuration. The flags are
:class:`~core.options.Option` records (:data:`OPTIONS`), declared by
:func:`core.options.declare`; their values are checked when the configuration is resolved
(:func:`empirical.config.validate_config`), which names the parameter and the flag as
typed."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import Field, fields
from typing import Any

from core.errors import UserInputError
from core.limits import MAX_STEPS, process_cap
from core.options import SUPPRESS, Option, declare, option
from core.validation import ParameterError
from empirical.algorithms.config import BUFFERS, SYNC_SCHEDULES
from empirical.config import (
    CHOICES,
    FIELD_ALIASES,
    FLAGS,
    TRAIN_PRESETS,
    TRAINER_PARAMS,
    TrainConfig,
    load_config_file,
    resolve_config,
)
from empirical.data.names import DATASET_NAMES
from empirical.models.names import MODEL_NAMES
from theory.algorithm import COINS, OUTERS, fields_fixed, lookup
from theory.presets import preset_names
from theory.validation import ALIASES, PARAMS, canonicalize

__all__ = ["PROG", "OPTIONS", "add_arguments", "config_from_args"]

PROG = "palsgd train"

_FIELD_TYPES = {f.name: f.type for f in fields(TrainConfig)}

#: flag names of the authors' code (theory.validation.ALIASES of a trainer field) and a few
#: trainer synonyms accepted on the command line, with the field they set
_CLI_ALIASES: dict[str, str] = {
    **{k: v for k, v in ALIASES.items() if v in _FIELD_TYPES},
    **{k: FIELD_ALIASES[k] for k in ("bs_per_gpu", "clip_gradnorm", "wd", "max_length")},
}

#: the fields with a fixed set of values (argparse choices): those the configuration owns
#: (declared with their fields) and those owned by a registry
_CHOICES: dict[str, tuple[str, ...]] = {
    "model": tuple(MODEL_NAMES),
    "dataset": tuple(DATASET_NAMES),
    **CHOICES,
    "outer": OUTERS,
    "coins": COINS,
    "buffers": BUFFERS,
    "sync_schedule": SYNC_SCHEDULES,
}
#: the field defaults of the ``tiny`` preset (the dataclass's)
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(TrainConfig)}


def _optional(base: type):
    def parse(text: str):
        if text.lower() in ("none", "null"):
            return None
        return base(text)

    parse.__name__ = base.__name__
    return parse


def _arg_type(typ: str) -> Any:
    """argparse ``type`` for a TrainConfig field annotated ``typ`` (a string such as
    ``"int"`` or ``"float | None"``): int, float or str, accepting 'none'/'null' when the
    field is optional."""
    base = int if typ.startswith("int") else float if typ.startswith("float") else str
    return _optional(base) if "None" in typ else base


def _flag_names(name: str) -> list[str]:
    dashed = "--" + name.replace("_", "-")
    under = "--" + name
    return [dashed] if dashed == under else [dashed, under]


def _field_option(f: Field) -> Option:
    """The flag of the field ``f``: ``--name`` (and ``--under_score`` when the dashed name
    differs), its help, type and choices from the field's declaration; a switch for a
    ``bool`` field (``--name`` / ``--no-name``). Unset, it sets nothing (``SUPPRESS``): the
    preset and the ``--config`` file supply the value."""
    typ = str(f.type)
    names = _flag_names(f.name)
    text = _help_text(f.name, f.default)
    kw: dict[str, Any] = {"dest": f"opt:{f.name}", "default": SUPPRESS}
    if "bool" in typ:
        return option(names[0], help=text, action=argparse.BooleanOptionalAction, **kw)
    kw["type"] = _arg_type(typ)
    kw["metavar"] = f.name.upper() if len(f.name) > 2 else f.name
    if f.name in _CHOICES:  # the metavar lists them ('none' unsets an optional one)
        kw["choices"] = (*_CHOICES[f.name], None) if "None" in typ else _CHOICES[f.name]
        kw["metavar"] = "{" + ",".join(_CHOICES[f.name]) + "}"
    return option(*names, help=text, **kw)


def _alias_option(alias: str, target: str) -> Option:
    """The flag ``--alias`` of the field ``target`` (an authors'-code name): its own
    destination, so that a bad value is reported under the name the user typed."""
    return option(
        *_flag_names(alias),
        dest=f"opt:{alias}",
        type=_arg_type(str(_FIELD_TYPES[target])),
        default=SUPPRESS,
        metavar=target.upper() if len(target) > 2 else target,
        help=f"alias of --{target.replace('_', '-')} (authors' code); "
        + _range_and_default(target, _DEFAULTS[target]),
    )


def _range_and_default(name: str, default: Any) -> str:
    """``"allowed [0, 1) (default: 0.2)"`` for the field ``name`` (without the range when it
    has none): the range of theory.validation's or the trainer's table, the cap of
    core.limits where one applies; the default of the ``tiny`` preset (the dataclass)."""
    spec = PARAMS.get(name) or TRAINER_PARAMS.get(name)
    allowed = ""
    if name == "T":
        allowed = f"allowed integer in [1, {MAX_STEPS:.0e}]; "
    elif name == "nproc":
        allowed = f"allowed integer in [1, {process_cap()}] on the CPU of this machine; "
    elif spec is not None:
        allowed = f"allowed {spec.allowed}; "
    shown = FLAGS[name].none_means if default is None else default
    if isinstance(default, bool):
        shown = "on" if default else "off"
    return f"{allowed}default: {shown}".replace("%", "%%")


def _help_text(name: str, default: Any) -> str:
    """The help of the flag of field ``name``: what it sets (its declaration's help), its
    range and its default."""
    return f"{FLAGS[name].help.replace('%', '%%')} ({_range_and_default(name, default)})"


#: the options of the command itself, not fields of the configuration
COMMAND_OPTIONS: tuple[Option, ...] = (
    option(
        "--config",
        dest="cfg:config",
        default=SUPPRESS,
        metavar="FILE",
        help="YAML or JSON file of options, at most 4 MiB (flags override it) (default: none)",
    ),
    option(
        "--preset",
        dest="cfg:preset",
        default=SUPPRESS,
        choices=tuple(preset_names()),
        metavar="NAME",
        help="named preset, one of the list of every command (--list-presets; the "
        f"trainer runs {', '.join(sorted(TRAIN_PRESETS))}) (default: tiny)",
    ),
    option(
        "--list-presets",
        dest="cfg:list_presets",
        action="store_true",
        default=SUPPRESS,
        help="list the presets of every command and exit (default: train)",
    ),
    option(
        "--print-config",
        dest="cfg:print_config",
        action="store_true",
        default=SUPPRESS,
        help="print the resolved configuration as JSON and exit (default: train)",
    ),
)
#: one flag per TrainConfig field, in field order
FIELD_OPTIONS: tuple[Option, ...] = tuple(_field_option(f) for f in fields(TrainConfig))
#: the authors'-code names and trainer synonyms of fields
ALIAS_OPTIONS: tuple[Option, ...] = tuple(_alias_option(a, t) for a, t in _CLI_ALIASES.items())
#: every option of ``palsgd train`` (and of ``python -m empirical.train``), in --help order
OPTIONS: tuple[Option, ...] = (*COMMAND_OPTIONS, *FIELD_OPTIONS, *ALIAS_OPTIONS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd train``: :data:`OPTIONS`."""
    declare(parser, OPTIONS)


def _as_typed(exc: ParameterError, overrides: dict[str, Any]) -> UserInputError:
    """``exc`` with the flag the user typed (an alias such as ``--steps``) named."""
    typed = [k for k in overrides if k != exc.name and _CLI_ALIASES.get(k) == exc.name]
    if not typed:
        return exc
    return UserInputError(f"{exc} (given as --{typed[0]})")


def _user_keys(args: argparse.Namespace) -> set[str]:
    """Project names of the options the user set (flags and the --config file)."""
    ns = vars(args)
    keys = [k[4:] for k in ns if k.startswith("opt:")]
    if ns.get("cfg:config"):
        keys += [str(k) for k in load_config_file(ns["cfg:config"])]
    keys = [_CLI_ALIASES.get(k, k) for k in keys]
    return set(canonicalize(dict.fromkeys(keys), allow_unknown=True))


#: datasets generated or shipped with Python: they read no --data-path
_EMBEDDED = ("embedded-text", "embedded-images")
#: options read by one inner optimizer only
_OPTIMIZER_ONLY = {"momentum": ("sgd_momentum",), "beta1": ("adamw",), "beta2": ("adamw",)}


def unused_option_notes(cfg: TrainConfig, user: set[str]) -> list[str]:
    """One line per setting the run will not use as the user may expect: an option given
    but not read (``--data-path`` with an embedded dataset, ``--momentum`` without
    ``sgd_momentum``), a sync interval beyond the run (``H > T``) or a warm-up covering it
    (``T0 >= T``)."""
    notes = []
    if "data_path" in user and cfg.dataset in _EMBEDDED:
        notes.append(f"--data-path is not read: dataset {cfg.dataset!r} is embedded")
    for name, optimizers in _OPTIMIZER_ONLY.items():
        if name in user and cfg.optimizer not in optimizers:
            notes.append(
                f"--{name} is not read: it belongs to --optimizer {' / '.join(optimizers)}, "
                f"not {cfg.optimizer}"
            )
    if lookup(cfg.algorithm).local:
        T0 = cfg.T0 or 0
        if T0 >= cfg.T:
            notes.append(
                f"T0 = {T0} >= T = {cfg.T}: the whole run is DDP warm-up, no local step is taken"
            )
        elif cfg.H is not None and cfg.H > cfg.T - T0:
            notes.append(
                f"H = {cfg.H} > T - T0 = {cfg.T - T0}: no sync happens after the warm-up "
                "(the workers are never averaged)"
            )
    return notes


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Resolve preset < --config file < flags into a validated :class:`TrainConfig`.

    Choosing an algorithm drops the settings that it fixes itself
    (:func:`theory.algorithm.fields_fixed`: ``p`` and ``eta`` without pull steps, the
    outer optimiser without one, what a preset such as ``slowmo`` sets) when the preset or
    the defaults (not the user) set them to other values, with a note on stderr; a value the
    user set is checked by the algorithm's validation (``--algorithm local_sgd --p 0.2`` is
    refused, naming ``p``).
    """
    ns = vars(args)
    overrides = {k[4:]: v for k, v in ns.items() if k.startswith("opt:")}
    preset, file = ns.get("cfg:preset"), ns.get("cfg:config")
    try:
        cfg = resolve_config(preset=preset, file=file, overrides=overrides)
    except ParameterError as exc:
        raise _as_typed(exc, overrides) from None
    user = _user_keys(args)
    if "WORLD_SIZE" not in os.environ:  # once, by the command (a rank reads the full config)
        for note in unused_option_notes(cfg, user):
            print(f"{PROG}: note: {note}", file=sys.stderr)
    fixed = fields_fixed(cfg.algorithm)
    dropped = {
        k: getattr(cfg, k)
        for k, own in fixed.items()
        if k not in user and getattr(cfg, k) is not None and getattr(cfg, k) != own
    }
    if not dropped:
        return cfg
    why = ["has no pull steps"] if {"p", "eta"} & set(dropped) else []
    if {"outer", "gamma", "mu"} & set(dropped):
        averages = lookup(cfg.algorithm).outers == ("average",)
        why.append("has no outer optimiser" if averages else "sets its outer optimiser itself")
    shown = ", ".join(
        f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in dropped.items()
    )
    print(
        f"{PROG}: note: --algorithm {cfg.algorithm} {' and '.join(why)}; the "
        f"preset's {shown} {'is' if len(dropped) == 1 else 'are'} not used",
        file=sys.stderr,
    )
    overrides.update(dict.fromkeys(dropped))
    return resolve_config(preset=preset, file=file, overrides=overrides)

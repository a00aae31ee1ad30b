"""The command line of ``palsgd check``: its flags (:data:`OPTIONS`, declared once as
:class:`~core.options.Option` records; the notation's parameters are
:func:`theory.options.notation_option` flags, range checked at parse time), the ``--config``
file reader and :func:`run` (which calls :func:`theory.check.evaluate.check`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.exitcodes import CONTRADICTION
from core.files import read_mapping_file
from core.options import Group, Option, declare, option
from theory.check import contradiction, evaluate
from theory.check.evaluate import ALGORITHMS
from theory.options import notation_option
from theory.presets import PRESETS, preset_names, render_presets
from theory.validation import ALIASES, PARAMS, canonicalize, validate

__all__ = ["OPTIONS", "PARAMETERS", "add_arguments", "load_config", "run"]


#: the parameters of the notation that ``palsgd check`` takes, in the order of its usage line
#: (each flag with its authors'-code aliases: :func:`theory.options.notation_option`)
PARAMETERS: tuple[str, ...] = (
    "L", "sigma", "zeta", "F0", "K", "H", "T", "T0", "p", "alpha", "eta", "gamma", "mu", "A",
    "eps",
)  # fmt: skip
_CONFIG_EXTRA_KEYS = ("algorithm", "bound", "bounds", "preset")
#: what an unset parameter means, where it is not simply "unset"
_DEFAULTS = {
    "alpha": "each bound at its recommended step",
    "gamma": "1, plain averaging",
    "mu": "0, plain averaging",
    "eps": "unset, no rounds-to-eps",
}


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON mapping of parameters (project or authors' names) and options.

    Allowed keys: every parameter, its aliases, and ``algorithm``, ``bound``/``bounds``,
    ``preset``. A malformed file or an unknown key raises :class:`UserInputError` naming
    the file (and the key).
    """
    path = Path(path)
    data = read_mapping_file(path, "config file")
    out: dict[str, Any] = {}
    for key, val in data.items():
        key = str(key)
        if key in _CONFIG_EXTRA_KEYS:
            out[key] = val
            continue
        if key not in PARAMS and key not in ALIASES:
            raise UserInputError(
                f"config file '{path}': unknown key '{key}'; allowed keys are the parameters "
                f"{sorted(PARAMS)}, their aliases {sorted(ALIASES)}, and {list(_CONFIG_EXTRA_KEYS)}"
            )
        if isinstance(val, str):
            try:
                val = float(val)
            except ValueError:
                raise UserInputError(
                    f"config file '{path}': key '{key}' has the non-numeric value {val!r}"
                ) from None
        out[key] = val
    return out


# --------------------------------------------------------------------------- CLI
def _number(text: str) -> float:
    """A parameter as ``palsgd check`` reads it: a float (``--T 1e5`` is 100000.0; an
    integer parameter must be a whole number, which its range checks)."""
    return float(text)


_number.__name__ = "float"  # argparse and the help's checks name the type by it

EPILOG = (
    "Tightness: check prints none (a bound's value is not compared with a measured one "
    "here); palsgd verify reports two: the instance tightness (measured / bound on its "
    "own exact instances, tightness.csv) and the class tightness (worst case over every "
    "problem of the class / bound, class.csv; palsgd worst-case for one design)."
)

#: the notation's parameters (:data:`PARAMETERS`), unset unless given
PARAMETER_OPTIONS = Group(
    "parameters",
    tuple(
        notation_option(
            name, type=_number, metavar="X", help=f"default: {_DEFAULTS.get(name, 'unset')}"
        )
        for name in PARAMETERS
    ),
    description="problem constants and hyperparameters (authors' flag names accepted)",
)

#: every option of ``palsgd check``
OPTIONS: tuple[Option | Group, ...] = (
    PARAMETER_OPTIONS,
    option(
        "--config",
        metavar="FILE",
        help="YAML or JSON file of parameters, at most 4 MiB (flags override it) (default: none)",
    ),
    option(
        "--preset",
        choices=preset_names(),
        help="named hyperparameter setting (the presets of every command, --list-presets), "
        "overridden by the file and flags (default: none)",
    ),
    option(
        "--bound",
        action="append",
        metavar="NAME",
        help="check this bound (repeatable); default: every bound covering the "
        "configuration's algorithm",
    ),
    option(
        "--algorithm",
        choices=ALGORITHMS,
        help="the algorithm the configuration runs (default: inferred from p and H)",
    ),
    option("--json", action="store_true", help="print the full report as JSON (default: text)"),
    option(
        "--verbose",
        "-v",
        action="store_true",
        help="the full text: every condition with its margin, every term, the lower bounds, "
        "the largest H, the sources and notes (default: the brief answer, about 20 lines)",
    ),
    option(
        "--list-presets",
        action="store_true",
        help="list the presets of every command and exit (default: check)",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``palsgd check`` (:data:`OPTIONS`)."""
    parser.epilog = EPILOG
    declare(parser, OPTIONS)


def run(args: argparse.Namespace) -> int:
    """Run ``palsgd check``: 0 when some bound was evaluated, 2 when every bound was skipped
    (the report is printed, then the reason), 5 when an upper bound is below a lower bound
    where both apply (:mod:`theory.check.contradiction`)."""
    if args.list_presets:
        _print_presets(args.json)
        return 0
    values, preset, bounds, algorithm = (
        _from_config(args.config) if args.config else ({}, None, None, None)
    )
    for name in PARAMETERS:
        val = getattr(args, name)
        if val is not None:
            values[name] = val
    preset = args.preset or preset
    bounds = args.bound or bounds
    algorithm = args.algorithm or algorithm
    report = evaluate.check(values, bounds, algorithm=algorithm, preset=preset)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text(verbose=args.verbose))
    if report.verdict_code == "nothing_evaluated":
        missing = sorted(
            {m for b in report.bounds for m in _missing_names(b.reason)},
        )
        hint = f": give {', '.join('--' + m for m in missing)}" if missing else ""
        raise UserInputError(f"{report.verdict}{hint}")
    if report.verdict_code == contradiction.CODE:
        return CONTRADICTION
    return 0


def _print_presets(as_json: bool) -> None:
    """``palsgd check --list-presets``."""
    if as_json:
        print(json.dumps([p.to_dict() for p in PRESETS.values()], indent=2))
        return
    print(render_presets())


def _from_config(
    path: str,
) -> tuple[dict[str, Any], str | None, list[str] | None, str | None]:
    """``--config FILE``: (parameters, preset, bounds, algorithm) of the file."""
    cfg = load_config(path)
    preset = cfg.pop("preset", None)
    algorithm = cfg.pop("algorithm", None)
    b = cfg.pop("bounds", None)
    b1 = cfg.pop("bound", None)
    if b is not None and b1 is not None:
        raise UserInputError(f"config file '{path}': give 'bound' or 'bounds', not both")
    b = b if b is not None else b1
    bounds = None if b is None else [b] if isinstance(b, str) else [str(x) for x in b]
    try:
        values = canonicalize(cfg)
        validate(values)
    except UserInputError as exc:
        raise UserInputError(f"config file '{path}': {exc}") from None
    return values, preset, bounds, algorithm


def _missing_names(reason: str) -> list[str]:
    """The names in a ``"missing parameter(s) ['zeta']"`` reason."""
    if not reason.startswith("missing parameter(s) "):
        return []
    return [
        x.strip(" '[]")
        for x in reason[len("missing parameter(s) ") :].split(",")
        if x.strip(" '[]")
    ]

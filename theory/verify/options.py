"""The options of ``palsgd verify``, declared once as :class:`~core.options.Option` records
(:data:`OPTIONS`, in five parts: :data:`SAMPLING`, :data:`PROBLEM`, :data:`STATISTICS`,
:data:`EXACT`, :data:`OUTPUT`); :func:`add_arguments` hands them to
:func:`core.options.declare`. The notation's ``--T``, ``--K``, ``--sigma`` and ``--zeta`` are
:func:`theory.options.notation_option` flags (their ranges checked at parse time, the authors'
aliases accepted); :func:`settings_from_args` makes the settings of a run and :data:`QUICK`
are those of ``--quick``. :mod:`theory.verify.cli` runs the command."""

from __future__ import annotations

import argparse
import math

from core.errors import UserInputError
from core.options import Option, declare, option
from core.validation import ParamSpec
from theory import verify as V
from theory.options import notation_option
from theory.problems.base import NOISE_MODELS
from theory.validation import PARAMS
from theory.verify.settings import CORRECTIONS, DEFAULT_PROBLEMS, VerifySettings

__all__ = [
    "add_arguments",
    "settings_from_args",
    "QUICK",
    "OPTIONS",
    "SAMPLING",
    "PROBLEM",
    "STATISTICS",
    "EXACT",
    "OUTPUT",
    "EPILOG",
]


#: settings of ``--quick`` (a smoke run: every file is written, little statistical power)
QUICK: dict[str, int | tuple[int, ...]] = dict(
    replicas=12,
    configs=2,
    outside=1,
    T=(48,),
    K=(2,),
    rate_T=(16, 32, 64),
    rate_replicas=8,
    exact_T=12,
    exact_replicas=300,
    consensus_H=(1, 4, 16),
    consensus_T=32,
)


def _count(name: str, low: int, meaning: str) -> ParamSpec:
    """The range of a count that is not a parameter of the notation: integers from ``low``."""
    return ParamSpec(name, meaning, low, math.inf, integer=True)


_D = VerifySettings()  # the defaults the help texts state

EPILOG = (
    "exit codes: 0 nothing violated beyond the known findings (each reproduced), 1 a new "
    "violation or a known finding that no longer reproduces, 2 bad input, 6 nothing "
    "violated but a bound tested on no design inside its conditions in any stage "
    "('untested: no design inside its conditions'), 130 interrupted. "
    f"Default problems: {' '.join(DEFAULT_PROBLEMS)}."
)

#: which bounds and problems, how many configurations and replicas, which T and K
SAMPLING: tuple[Option, ...] = (
    option(
        "--bounds",
        nargs="+",
        metavar="NAME",
        help="bounds to verify (default: every registered bound)",
    ),
    option(
        "--problems",
        nargs="+",
        metavar="NAME",
        help=f"problems (default: {' '.join(DEFAULT_PROBLEMS)})",
    ),
    option(
        "--replicas",
        "-R",
        range=_count("replicas", 2, "Monte-Carlo replicas (a test needs a variance)"),
        metavar="R",
        help=f"Monte-Carlo replicas per configuration, integer in [2, inf) (default {_D.replicas})",
    ),
    option(
        "--configs",
        range=_count("configs", 0, "configurations inside the conditions"),
        metavar="N",
        help="configurations inside the conditions per (bound, problem), integer in [0, inf); "
        f"0 leaves only the exact part (default {_D.configs})",
    ),
    option(
        "--outside",
        range=_count("outside", 0, "configurations outside the conditions"),
        metavar="N",
        help="configurations outside the conditions per (bound, problem), integer in "
        f"[0, inf) (default {_D.outside})",
    ),
    option(
        "--seed",
        range=_count("seed", 0, "master seed"),
        default=0,
        help="master seed, integer in [0, inf) (default 0)",
    ),
    notation_option(
        "T",
        nargs="+",
        metavar="T",
        help=f"the horizons to sample from (default {' '.join(map(str, _D.T))})",
    ),
    notation_option(
        "K",
        nargs="+",
        metavar="K",
        help=f"the worker counts to sample from (default {' '.join(map(str, _D.K))})",
    ),
)

#: the problems' dimension, noise, heterogeneity and declared constants
PROBLEM: tuple[Option, ...] = (
    option(
        "--d",
        range=PARAMS["d"],
        metavar="D",
        help=f"problem dimension, integer in [1, inf) (default {_D.d})",
    ),
    option(
        "--noise", choices=NOISE_MODELS, help=f"noise model of the problems (default {_D.noise})"
    ),
    notation_option(
        "sigma",
        metavar="SIGMA",
        help="the problems' noise level (default: the problem's, 1 for additive noise)",
    ),
    notation_option(
        "zeta", metavar="ZETA", help=f"the problems' heterogeneity (default {_D.zeta})"
    ),
    option(
        "--declare",
        nargs="+",
        metavar="[PROBLEM.]NAME=VALUE",
        default=[],
        help="declare a constant (L, sigma2, zeta2, f_star) for every problem or "
        "for one; it is checked by sampling and used in the bounds (default: none)",
    ),
)

#: level and multiple-testing correction of the Monte-Carlo verdicts
STATISTICS: tuple[Option, ...] = (
    option(
        "--level",
        range=ParamSpec("level", "family-wise error level", 0, 1, low_open=True, high_open=True),
        default=0.05,
        metavar="LEVEL",
        help="family-wise error level of the verdicts, in (0, 1) (default 0.05)",
    ),
    option(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="multiple-testing correction (default holm)",
    ),
)

#: user bounds, negative controls, the exact search's budget, one design (--at)
EXACT: tuple[Option, ...] = (
    option(
        "--bound-file",
        metavar="FILE",
        help="YAML/JSON file with your own bound(s): name, expression, conditions, "
        "algorithm, coins, assumptions, measured (iterates or anchors), kind (upper or lower; "
        "docs/verification.md, section 10) (read without evaluating any code; at most 4 MiB; a "
        "relative path missing here is also looked up in the toolkit's directory) "
        "(default: none)",
    ),
    option(
        "--controls",
        action="store_true",
        help="negative-control mode: exact verification and the false variants of every "
        "selected bound only (no Monte Carlo); prints the detection power",
    ),
    option("--no-controls", action="store_true", help="skip the negative controls"),
    option(
        "--no-class",
        action="store_true",
        help="skip the class stage (every bound against the worst case over its whole class)",
    ),
    option(
        "--class-designs",
        range=_count("class_designs", 1, "designs per bound in the class stage"),
        metavar="N",
        help="designs per bound in the class stage, in [1, inf) (default: 4; --quick: 2)",
    ),
    option(
        "--budget",
        range=ParamSpec("budget", "scale of the exact search", 0, 100, low_open=True),
        metavar="X",
        help=f"scale of the exact search per bound, in (0, 100] (default {_D.budget}; controls "
        f"{_D.control_budget})",
    ),
    option(
        "--at",
        metavar="DESIGN",
        help="evaluate one design exactly and print measured, bound, ratio and conditions "
        "(the 'key=value ...' text of a reproduce command, each key once); needs one "
        "--bounds NAME (default: none)",
    ),
)

#: report directory and format, simulator backend, plots and progress
OUTPUT: tuple[Option, ...] = (
    option("--out", default="reports/verify", help="report directory (default reports/verify)"),
    option(
        "--quick", action="store_true", help="a small smoke run (few replicas and configurations)"
    ),
    option("--json", action="store_true", help="print the summary as JSON on stdout (no table)"),
    option(
        "--backend",
        choices=("numpy", "torch"),
        default="numpy",
        help="simulator backend of the Monte-Carlo part (default numpy)",
    ),
    option(
        "--device",
        metavar="DEV",
        help="torch device of the Monte-Carlo part: cpu, cuda or cuda:N; torch only (default: cpu)",
    ),
    option("--no-plots", action="store_true", help="skip the plots"),
    option("--no-progress", action="store_true", help="no progress bar"),
)

#: every option of ``palsgd verify``, in the order of its usage line
OPTIONS: tuple[Option, ...] = (*SAMPLING, *PROBLEM, *STATISTICS, *EXACT, *OUTPUT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd verify`` (:data:`OPTIONS`)."""
    parser.epilog = EPILOG
    declare(parser, OPTIONS)


def _parse_declared(items: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise UserInputError(
                f"--declare expects NAME=VALUE or PROBLEM.NAME=VALUE, got {item!r}"
            )
        prob, dot, name = key.rpartition(".")
        try:
            value = float(val)
        except ValueError:
            raise UserInputError(f"--declare {item!r}: {val!r} is not a number") from None
        out.setdefault(prob if dot else "*", {})[name] = value
    return out


def settings_from_args(args: argparse.Namespace) -> V.VerifySettings:
    """Build and validate :class:`theory.verify.VerifySettings` from parsed options."""
    kw: dict[str, object] = dict(QUICK) if args.quick else {}
    for name in ("replicas", "configs", "outside", "d", "noise", "sigma", "zeta"):
        val = getattr(args, name)
        if val is not None:
            kw[name] = val
    if args.T:
        kw["T"] = tuple(args.T)
    if args.K:
        kw["K"] = tuple(args.K)
    if args.problems:
        kw["problems"] = tuple(args.problems)
    kw.update(
        bounds=tuple(args.bounds) if args.bounds else None,
        seed=args.seed,
        level=args.level,
        correction=args.correction,
        quick=args.quick,
        declared=_parse_declared(args.declare),
        bound_file=args.bound_file,
        controls=not args.no_controls,
        class_stage=not args.no_class,
        controls_only=args.controls,
        backend=args.backend,
        device=args.device,
    )
    if args.controls and args.no_controls:
        raise UserInputError("--controls and --no-controls exclude each other")
    if args.class_designs is not None:
        kw["class_designs"] = args.class_designs
    if args.budget is not None:  # in (0, 100]: checked at parse time
        kw["budget"] = args.budget
    settings = V.VerifySettings(**kw)  # checked on construction
    declared_problems = set(settings.declared) - {"*"}
    unknown = sorted(declared_problems - set(settings.problems))
    if unknown:
        raise UserInputError(
            f"--declare names problem(s) {unknown} that are not selected "
            f"(selected: {list(settings.problems)})"
        )
    return settings

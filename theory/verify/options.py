"""The options of ``palsgd verify``: its flags (:func:`add_arguments`), the settings they
make (:func:`settings_from_args`) and those of ``--quick`` (:data:`QUICK`).
:mod:`theory.verify.cli` runs the command."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from core.errors import UserInputError
from theory import verify as V
from theory.problems.base import NOISE_MODELS

__all__ = ["add_arguments", "settings_from_args", "QUICK"]


#: settings of ``--quick`` (a smoke run: every file is written, little statistical power)
QUICK: dict[str, Any] = dict(
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


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, inf)``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{low}, inf), got {text!r}"
            ) from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, inf), got {v}")
        return v

    parse.__name__ = "int"
    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)
#: a Monte-Carlo test needs a variance: two replicas at least
_at_least_two = _int_at_least(2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd verify``."""
    d = V.VerifySettings()
    parser.epilog = (
        "exit codes: 0 nothing violated beyond the known findings (each reproduced), 1 a new "
        "violation or a known finding that no longer reproduces, 2 bad input, 6 nothing "
        "violated but a bound tested on no design inside its conditions in any stage "
        "('untested: no design inside its conditions'), 130 interrupted. "
        f"Default problems: {' '.join(V.DEFAULT_PROBLEMS)}."
    )
    _add_sampling_arguments(parser, d)
    _add_problem_arguments(parser, d)
    _add_statistics_arguments(parser)
    _add_exact_arguments(parser, d)
    _add_output_arguments(parser)


def _add_sampling_arguments(parser: argparse.ArgumentParser, d: V.VerifySettings) -> None:
    """Which bounds and problems, how many configurations and replicas, which T and K."""
    parser.add_argument(
        "--bounds",
        nargs="+",
        metavar="NAME",
        help="bounds to verify (default: every registered bound)",
    )
    parser.add_argument(
        "--problems",
        nargs="+",
        metavar="NAME",
        help=f"problems (default: {' '.join(V.DEFAULT_PROBLEMS)})",
    )
    parser.add_argument(
        "--replicas",
        "-R",
        type=_at_least_two,
        metavar="R",
        help=f"Monte-Carlo replicas per configuration, integer in [2, inf) (default {d.replicas})",
    )
    parser.add_argument(
        "--configs",
        type=_nonneg_int,
        metavar="N",
        help="configurations inside the conditions per (bound, problem), integer in [0, inf); "
        f"0 leaves only the exact part (default {d.configs})",
    )
    parser.add_argument(
        "--outside",
        type=_nonneg_int,
        metavar="N",
        help="configurations outside the conditions per (bound, problem), integer in "
        f"[0, inf) (default {d.outside})",
    )
    parser.add_argument(
        "--seed",
        type=_nonneg_int,
        default=0,
        help="master seed, integer in [0, inf) (default 0)",
    )
    parser.add_argument(
        "--T",
        type=_positive_int,
        nargs="+",
        metavar="T",
        help=f"horizons to sample from, integers in [1, inf) (default {' '.join(map(str, d.T))})",
    )
    parser.add_argument(
        "--K",
        type=_positive_int,
        nargs="+",
        metavar="K",
        help="worker counts to sample from, integers in [1, inf) "
        f"(default {' '.join(map(str, d.K))})",
    )


def _add_problem_arguments(parser: argparse.ArgumentParser, d: V.VerifySettings) -> None:
    """The problems' dimension, noise, heterogeneity and declared constants."""
    parser.add_argument(
        "--d",
        type=_positive_int,
        metavar="D",
        help=f"problem dimension, integer in [1, inf) (default {d.d})",
    )
    parser.add_argument(
        "--noise", choices=NOISE_MODELS, help=f"noise model of the problems (default {d.noise})"
    )
    parser.add_argument(
        "--sigma",
        type=float,
        metavar="SIGMA",
        help="noise level sigma, in [0, inf) (default: the problem's, 1 for additive noise)",
    )
    parser.add_argument(
        "--zeta",
        type=float,
        metavar="ZETA",
        help=f"heterogeneity zeta of the problems, in [0, inf) (default {d.zeta})",
    )
    parser.add_argument(
        "--declare",
        nargs="+",
        metavar="[PROBLEM.]NAME=VALUE",
        default=[],
        help="declare a constant (L, sigma2, zeta2, f_star) for every problem or "
        "for one; it is checked by sampling and used in the bounds (default: none)",
    )


def _add_statistics_arguments(parser: argparse.ArgumentParser) -> None:
    """Level and multiple-testing correction of the Monte-Carlo verdicts."""
    parser.add_argument(
        "--level",
        type=float,
        default=0.05,
        metavar="LEVEL",
        help="family-wise error level of the verdicts, in (0, 1) (default 0.05)",
    )
    parser.add_argument(
        "--correction",
        choices=V.CORRECTIONS,
        default="holm",
        help="multiple-testing correction (default holm)",
    )


def _add_exact_arguments(parser: argparse.ArgumentParser, d: V.VerifySettings) -> None:
    """User bounds, negative controls, the exact search's budget, one design (--at)."""
    parser.add_argument(
        "--bound-file",
        metavar="FILE",
        help="YAML/JSON file with your own bound(s): name, expression, conditions, "
        "algorithm, coins, assumptions, measured (iterates or anchors), kind (upper or lower; "
        "docs/verification.md, section 10) (read without evaluating any code; at most 4 MiB; a "
        "relative path missing here is also looked up in the toolkit's directory) "
        "(default: none)",
    )
    parser.add_argument(
        "--controls",
        action="store_true",
        help="negative-control mode: exact verification and the false variants of every "
        "selected bound only (no Monte Carlo); prints the detection power",
    )
    parser.add_argument("--no-controls", action="store_true", help="skip the negative controls")
    parser.add_argument(
        "--no-class",
        action="store_true",
        help="skip the class stage (every bound against the worst case over its whole class)",
    )
    parser.add_argument(
        "--class-designs",
        type=_positive_int,
        metavar="N",
        help="designs per bound in the class stage, in [1, inf) (default: 4; --quick: 2)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="X",
        help=f"scale of the exact search per bound, in (0, 100] (default {d.budget}; controls "
        f"{d.control_budget})",
    )
    parser.add_argument(
        "--at",
        metavar="DESIGN",
        help="evaluate one design exactly and print measured, bound, ratio and conditions "
        "(the 'key=value ...' text of a reproduce command, each key once); needs one "
        "--bounds NAME (default: none)",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Report directory and format, simulator backend, plots and progress."""
    parser.add_argument(
        "--out", default="reports/verify", help="report directory (default reports/verify)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small smoke run (few replicas and configurations)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as JSON on stdout (no table)"
    )
    parser.add_argument(
        "--backend",
        choices=("numpy", "torch"),
        default="numpy",
        help="simulator backend of the Monte-Carlo part (default numpy)",
    )
    parser.add_argument(
        "--device",
        metavar="DEV",
        help="torch device of the Monte-Carlo part: cpu, cuda or cuda:N; torch only (default: cpu)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


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
    kw: dict[str, Any] = dict(QUICK) if args.quick else {}
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
    if args.budget is not None:
        if not 0 < args.budget <= 100:  # NaN fails too
            raise UserInputError(f"--budget must be a number in (0, 100], got {args.budget}")
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

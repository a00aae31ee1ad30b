"""``palsgd verify``: verification of every encoded bound (the main job).

1. **Exact, on quadratics** (every bound whose algorithm has an exact oracle: minibatch SGD,
   Local SGD, PALSGD): term-isolating designs, a sample of the design box and an
   adversarial search of measured/bound inside the bound's own conditions
   (:mod:`theory.verify.exact`). One design above the bound makes it violated; the report
   gives the worst ratio with a one-line command that reproduces it (``--at``), each term's
   tightness, the share of vacuous designs, and the verdicts on the bound's negative
   controls (each term halved, each removed, the bound x 0.9), i.e. the run's detection
   power. ``--controls`` runs this part alone.
2. **Monte Carlo** where no exact recursion exists: the nonconvex problems (``--problems``)
   and bounds without an exact oracle (EASGD), on a seeded sample of configurations per
   (bound, problem) (``--configs`` inside the conditions, ``--outside`` beyond them), each
   simulated with ``--replicas`` replicas and tested against the bound (t and bootstrap-t,
   the more conservative; Holm or Bonferroni correction at family-wise ``--level``), plus
   the rate in ``T``, the speed-up in ``K``, exact vs Monte Carlo and consensus vs ``H``.

``--bound-file F`` verifies your own bound(s) (:mod:`theory.verify.bound_file`).

Output (``--out``, default ``reports/verify``; written to a temporary sibling directory and
renamed at the end, so a failed run leaves nothing behind): ``results.json`` (everything),
``exact.csv``, ``tightness.csv``, ``controls.csv``, ``hetero.csv``, ``lower.csv``,
``results.csv``, ``rates.csv``,
``speedup.csv``, ``exact_vs_mc.csv``, ``consensus.csv``, ``summary.txt`` (the exact verdicts,
tightness and power first) and the plots (PNG and PDF).

Lower bounds are verified too (:mod:`theory.verify.lower`), and contradictions between
upper and lower bounds settled (:mod:`theory.verify.crossings`); known findings
(:mod:`theory.verify.findings`) are checked to still reproduce.

Exit codes: 0 nothing violated beyond the known findings, each of which reproduced; 1 a
bound that is not a known finding is violated, or a known finding no longer reproduces
(listed prominently at the end); 2 bad input (unknown bound or problem, invalid numbers, a
declared constant that sampling shows false, an unwritable output directory, a run that
would check nothing); 6 nothing violated, but a bound was tested on no design inside its
conditions in any stage (its verdict "untested: no design inside its conditions",
:mod:`theory.verify.untested`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from core.errors import UserInputError
from core.exitcodes import OK, UNTESTED
from theory import verify as V
from theory.check import jsonable
from theory.problems.base import NOISE_MODELS
from theory.verify.at import run_at
from theory.verify.exact_report import format_exact
from theory.verify.oracle import family_of
from theory.verify.report import _fmt
from theory.verify.report_types import VerifyReport
from theory.verify.run import is_lower

__all__ = ["add_arguments", "run", "settings_from_args", "QUICK"]

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


def _checked_anything(report: VerifyReport) -> bool:
    """True when the run reached at least one verdict (exact, or a decided MC test)."""
    c = report.summary.counts
    exact = bool(report.exact or report.lower)
    return exact or c.get("holds", 0) + c.get("violated", 0) > 0


def _print_report(report: VerifyReport, out: str, total_s: float) -> None:
    """The text report of ``palsgd verify``: exact verdicts, Monte-Carlo table, checks."""
    text = format_exact(report)
    if text:
        print(text)
        print()
    if report.results:
        print(V.format_table(report.results))
        print()
    for s in report.exact_vs_mc_summary:
        if "max_abs_z" in s:
            print(
                f"exact vs MC {s['algorithm']:<22} max|z| = {s['max_abs_z']:.2f} "
                f"(threshold {s['threshold']:.2f}): {s['status']}"
            )
        else:
            print(f"exact vs MC {s['algorithm']:<22} {s['status']}")
    seen = set()
    for r in report.rates:
        if r["bound"] in seen:
            continue
        seen.add(r["bound"])
        print(
            f"rate {r['bound']:<22} slope {_fmt(r['fitted_slope'])} "
            f"[{_fmt(r['slope_ci_low'])}, {_fmt(r['slope_ci_high'])}] vs bound "
            f"{_fmt(r['bound_slope'])} (leading {_fmt(r['bound_leading_exponent'])}, "
            f"{r['step_rule']}): {r['rate_verdict']}"
        )
    for s in report.speedup:
        print(
            f"speed-up {s['bound']:<18} K=1 -> K={s['K']}: measured "
            f"{_fmt(s['measured_speedup'])} [{_fmt(s['speedup_ci_low'])}, "
            f"{_fmt(s['speedup_ci_high'])}], bound predicts "
            f"{_fmt(s['predicted_speedup'])}"
        )
    cons = report.consensus
    if cons:
        hs = sorted({r["H"] for r in cons})
        by = {(r["algorithm"], r["H"]): r["consensus_mean"] for r in cons}
        cells = [
            f"H={h}: {_fmt(by.get(('local_sgd', h)))} vs {_fmt(by.get(('palsgd', h)))}" for h in hs
        ]
        print("consensus error, Local SGD vs PALSGD: " + "; ".join(cells))
    print()
    print(V.format_summary(report))
    print(
        f"report written to {out} (simulation and tests {report.elapsed_s:.1f} s, "
        f"total {total_s:.1f} s)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the verification; exit code 0 (nothing violated beyond the known findings, each
    reproduced), 1 (a new violation, or a known finding that no longer reproduces), 2 (bad
    input), 6 (nothing violated, but a bound tested on no design inside its conditions)."""
    t0 = time.perf_counter()
    settings = settings_from_args(args)
    if args.configs == 0 and not settings.controls_only:
        print(
            "palsgd verify: warning: --configs 0: no Monte-Carlo configuration inside the "
            "conditions is tested; only the exact part checks the bounds",
            file=sys.stderr,
        )
    if args.at is not None:
        return run_at(settings, args.at, as_json=args.json)
    # resolved once, before anything is written; the run takes them as they are
    bounds = V.resolve_bounds(settings.bounds, settings.bound_file)
    if settings.controls_only and not any(is_lower(b) or family_of(b).exact for b in bounds):
        raise UserInputError(
            "--controls needs a lower bound or a bound with an exact oracle (algorithm sgd, "
            f"local_sgd or palsgd); selected: {[b.name for b in bounds]}"
        )
    problems = V.resolve_problems(settings.problems)
    with V.AtomicDirectory(args.out) as tmp:
        report = V.run_verification(
            settings, progress=not args.no_progress, bounds=bounds, problems=problems
        )
        V.write_report_files(report, tmp, plots=not args.no_plots)
    summary = report.summary
    if summary.exit_code in (OK, UNTESTED) and not _checked_anything(report):
        raise UserInputError(
            "these settings check nothing: no bound has an exact oracle and no Monte-Carlo "
            "configuration reached a verdict (raise --configs / --replicas, or select bounds "
            "or problems that can be tested)"
        )
    if args.json:
        print(
            json.dumps(
                jsonable(
                    {
                        "out": str(args.out),
                        **summary.to_dict(),
                        "elapsed_s": time.perf_counter() - t0,
                    }
                ),
                indent=1,
            )
        )
    else:
        _print_report(report, args.out, time.perf_counter() - t0)
    sys.stdout.flush()
    return int(summary.exit_code)

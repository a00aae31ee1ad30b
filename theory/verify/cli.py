"""``palsgd verify``: Monte-Carlo verification of every encoded bound (the main job).

Runs every registered bound (or ``--bounds``) on a heterogeneous quadratic and nonconvex
problem families with exactly known constants (or ``--problems``), on a seeded sample of
configurations per (bound, problem): ``--configs`` with the step inside the bound's
conditions (fractions of the largest feasible step, or the bound's recommended step) and
``--outside`` beyond them. Each configuration is simulated with ``--replicas`` replicas and
tested against the bound (t and bootstrap-t, the more conservative; Holm or Bonferroni
correction at family-wise ``--level``); see :mod:`theory.verify` for the statistics.

Output (``--out``, default ``reports/verify``; written to a temporary sibling directory and
renamed at the end, so a failed run leaves nothing behind):

* ``results.json``: everything (settings, seed, versions, statistics and correction method,
  every table below, per-bound summaries, column lists);
* ``results.csv``: one row per configuration (columns: :data:`theory.verify.RESULTS_COLUMNS`);
* ``rates.csv``: measured vs bound exponent of ``T`` (:data:`theory.verify.RATES_COLUMNS`);
* ``speedup.csv``: ``K = 1`` vs ``K`` workers (:data:`theory.verify.SPEEDUP_COLUMNS`);
* ``exact_vs_mc.csv``: exact quadratic curves vs Monte Carlo (:data:`theory.verify.EXACT_COLUMNS`);
* ``consensus.csv``: consensus error vs ``H`` (:data:`theory.verify.CONSENSUS_COLUMNS`);
* ``summary.txt``: the terminal table and summary;
* plots, PNG and PDF: ``measured_vs_bound``, ``rates``, ``consensus_vs_H``, ``exact_vs_mc``.

Exit codes: 0 when no bound is violated, 1 when some configuration violates its bound
(listed prominently at the end), 2 on bad input (unknown bound or problem, invalid
numbers, a declared constant that sampling shows false, an unwritable output directory).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from theory import verify as V
from theory.check import jsonable
from theory.validation import UserInputError
from theory.verify.report import _fmt

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


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a nonnegative integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a nonnegative integer, got {v}")
    return v


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd verify``."""
    d = V.VerifySettings()
    parser.epilog = (
        "exit codes: 0 no bound violated, 1 some bound violated, 2 bad input. "
        f"Default problems: {' '.join(V.DEFAULT_PROBLEMS)}."
    )
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
        type=_positive_int,
        metavar="R",
        help=f"Monte-Carlo replicas per configuration (default {d.replicas})",
    )
    parser.add_argument(
        "--configs",
        type=_nonneg_int,
        metavar="N",
        help=f"configurations inside the conditions per (bound, problem) (default {d.configs})",
    )
    parser.add_argument(
        "--outside",
        type=_nonneg_int,
        metavar="N",
        help=f"configurations outside the conditions per (bound, problem) (default {d.outside})",
    )
    parser.add_argument("--seed", type=_nonneg_int, default=0, help="master seed (default 0)")
    parser.add_argument(
        "--T",
        type=_positive_int,
        nargs="+",
        metavar="T",
        help=f"horizons to sample from (default {' '.join(map(str, d.T))})",
    )
    parser.add_argument(
        "--K",
        type=_positive_int,
        nargs="+",
        metavar="K",
        help=f"worker counts to sample from (default {' '.join(map(str, d.K))})",
    )
    parser.add_argument(
        "--d", type=_positive_int, metavar="D", help=f"problem dimension (default {d.d})"
    )
    parser.add_argument("--noise", help=f"noise model of the problems (default {d.noise})")
    parser.add_argument(
        "--sigma",
        type=float,
        help="noise level sigma (default: the problem's, 1 for additive noise)",
    )
    parser.add_argument(
        "--zeta", type=float, help=f"heterogeneity zeta of the problems (default {d.zeta})"
    )
    parser.add_argument(
        "--declare",
        nargs="+",
        metavar="[PROBLEM.]NAME=VALUE",
        default=[],
        help="declare a constant (L, sigma2, zeta2, f_star) for every problem or "
        "for one; it is checked by sampling and used in the bounds",
    )
    parser.add_argument(
        "--level",
        type=float,
        default=0.05,
        help="family-wise error level of the verdicts (default 0.05)",
    )
    parser.add_argument(
        "--correction",
        choices=V.CORRECTIONS,
        default="holm",
        help="multiple-testing correction (default holm)",
    )
    parser.add_argument(
        "--out", default="reports/verify", help="report directory (default reports/verify)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small smoke run (few replicas and configurations)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as JSON on stdout (no table)"
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
    )
    settings = V.VerifySettings(**kw).validated()
    declared_problems = set(settings.declared) - {"*"}
    unknown = sorted(declared_problems - set(settings.problems))
    if unknown:
        raise UserInputError(
            f"--declare names problem(s) {unknown} that are not selected "
            f"(selected: {list(settings.problems)})"
        )
    return settings


def run(args: argparse.Namespace) -> int:
    """Run the verification; exit code 0 (no violation), 1 (a bound violated), 2 (bad input)."""
    t0 = time.perf_counter()
    settings = settings_from_args(args)
    V.resolve_bounds(settings.bounds)  # bad names fail before anything is written
    V.resolve_problems(settings.problems)
    with V.AtomicDirectory(args.out) as tmp:
        report = V.run_verification(settings, progress=not args.no_progress)
        V.write_report_files(report, tmp, plots=not args.no_plots)
    summary = report["summary"]
    if args.json:
        print(
            json.dumps(
                jsonable({"out": str(args.out), **summary, "elapsed_s": time.perf_counter() - t0}),
                indent=1,
            )
        )
    else:
        print(V.format_table(report["results"]))
        print()
        for s in report["exact_vs_mc_summary"]:
            if "max_abs_z" in s:
                print(
                    f"exact vs MC {s['algorithm']:<22} max|z| = {s['max_abs_z']:.2f} "
                    f"(threshold {s['threshold']:.2f}): {s['status']}"
                )
            else:
                print(f"exact vs MC {s['algorithm']:<22} {s['status']}")
        seen = set()
        for r in report["rates"]:
            if r["bound"] in seen:
                continue
            seen.add(r["bound"])
            print(
                f"rate {r['bound']:<22} slope {_fmt(r['fitted_slope'])} "
                f"[{_fmt(r['slope_ci_low'])}, {_fmt(r['slope_ci_high'])}] vs bound "
                f"{_fmt(r['bound_slope'])} (leading {_fmt(r['bound_leading_exponent'])}, "
                f"{r['step_rule']}): {r['rate_verdict']}"
            )
        for s in report["speedup"]:
            print(
                f"speed-up {s['bound']:<18} K=1 -> K={s['K']}: measured "
                f"{_fmt(s['measured_speedup'])} [{_fmt(s['speedup_ci_low'])}, "
                f"{_fmt(s['speedup_ci_high'])}], bound predicts "
                f"{_fmt(s['predicted_speedup'])}"
            )
        cons = report["consensus"]
        if cons:
            hs = sorted({r["H"] for r in cons})
            by = {(r["algorithm"], r["H"]): r["consensus_mean"] for r in cons}
            cells = [
                f"H={h}: {_fmt(by.get(('local_sgd', h)))} vs {_fmt(by.get(('palsgd', h)))}"
                for h in hs
            ]
            print("consensus error, Local SGD vs PALSGD: " + "; ".join(cells))
        print()
        print(V.format_summary(report))
        print(
            f"report written to {args.out} (simulation and tests {report['elapsed_s']:.1f} s, "
            f"total {time.perf_counter() - t0:.1f} s)"
        )
    sys.stdout.flush()
    return int(summary["exit_code"])

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
from typing import TYPE_CHECKING

from core.errors import UserInputError
from core.exitcodes import OK, UNTESTED
from theory import verify as V
from theory.verify.options import QUICK, add_arguments, settings_from_args

if TYPE_CHECKING:
    from theory.verify.report_types import VerifyReport

# The modules that verify (sympy, scipy) are imported by `run`, not here: `palsgd verify
# --help` and a bad flag answer before they load (tests/test_cli_startup.py).

__all__ = ["add_arguments", "run", "settings_from_args", "QUICK"]


def _checked_anything(report: VerifyReport) -> bool:
    """True when the run reached at least one verdict (exact, or a decided MC test)."""
    c = report.summary.counts
    exact = bool(report.exact or report.lower)
    return exact or c.get("holds", 0) + c.get("violated", 0) > 0


def _print_report(report: VerifyReport, out: str, total_s: float) -> None:
    """The text report of ``palsgd verify``: exact verdicts, Monte-Carlo table, checks."""
    from theory.verify.exact_report import format_exact
    from theory.verify.report import _fmt

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
    from theory.check import jsonable
    from theory.verify.at import run_at
    from theory.verify.oracle import family_of
    from theory.verify.run import is_lower

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

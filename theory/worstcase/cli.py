"""``palsgd worst-case``: the worst case of a method over the whole class, and a bound
against it.

Prints the class worst case of the measured quantity (an upper bound on it: the SDP over
the relaxed class, :mod:`theory.worstcase.pep`), the solver's status and residuals and the
time; with ``--bound NAME`` also the bound's value at the design and the verdict
(:mod:`theory.worstcase.judge`): certified, exceeded on the relaxed class, or refuted by an
explicit instance (``--lift`` builds one whatever the verdict). ``--json`` prints one
object (key ``value``: the worst case). Exit codes: 0 (any verdict but refuted), 1 the
bound is refuted (an upper bound by an explicit instance, a lower bound by the class
value), 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from core.errors import UserInputError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd worst-case`` (the notation's names; the authors' aliases too)."""
    from theory.algorithm.table import COINS, NAMES, PRESETS
    from theory.sync import OUTERS
    from theory.worstcase.pep import CLASS_TEXT, RELAXATIONS
    from theory.worstcase.trajectory import MEASURED

    parser.epilog = (
        f"The class: {CLASS_TEXT}. Exit codes: 0 done (certified, exceeded on the relaxed class "
        "or no --bound), 1 the --bound is refuted, 2 bad input, 130 interrupted."
    )
    from theory.validation import PARAMS

    def a(*flags: str, help: str, **kw) -> None:
        name = kw.get("dest") or flags[0].lstrip("-")
        if kw.get("type") in (int, float) and name in PARAMS:
            help = f"{help}, in {PARAMS[name].allowed}"
        if kw.get("default") is None and not kw.get("required") and "default" not in help:
            help += " (default: none)"
        parser.add_argument(*flags, help=help, **kw)

    names = [*NAMES, *PRESETS]
    a(
        "--algorithm",
        required=True,
        choices=names,
        metavar="NAME",
        help=f"the method (required, no default): one of {', '.join(names)}",
    )
    a("--K", type=int, default=2, help="workers")
    a("--H", "--sync_interval", dest="H", type=int, default=1, help="local steps per round")
    a("--R", type=int, help="rounds (T = R*H); or give --T")
    a("--T", type=int, help="steps (instead of --R)")
    a("--L", type=float, default=1.0, help="smoothness of every f_k")
    a(
        "--alpha",
        "--lr",
        dest="alpha",
        type=float,
        required=True,
        help="inner learning rate (required, no default)",
    )
    a("--zeta", type=float, default=0.0, help="heterogeneity (A3)")
    a("--F0", type=float, default=1.0, help="initial gap f(x0) - inf f (A4)")
    a("--outer", choices=OUTERS, help="outer update (default: the algorithm's)")
    a(
        "--gamma",
        "--outer_lr",
        dest="gamma",
        type=float,
        help="outer learning rate (default: the algorithm's)",
    )
    a("--mu", type=float, help="outer momentum (default: the algorithm's)")
    a("--p", "--prob_no_grad", dest="p", type=float, help="pull probability (default: 0)")
    a("--eta", type=float, help="pull (mixing) rate (default: 0)")
    a("--T0", "--local_sgd_start_iter", dest="T0", type=int, help="DDP warm-up steps (default: 0)")
    a("--coins", choices=COINS, help="coin model of the pull steps (default: independent)")
    a(
        "--pulls",
        metavar="ROWS",
        help="a fixed pull pattern instead of every coin path: one 0/1 row per worker, rows "
        "separated by commas (e.g. 0100,1000 for K = 2, T = 4; default: every coin path)",
    )
    a(
        "--measured",
        choices=MEASURED,
        default="iterates",
        help="iterates: (1/T) sum_t ||grad f(xbar_t)||^2; anchors: (1/R) sum_r ||grad f(z_r)||^2",
    )
    a(
        "--relaxation",
        choices=RELAXATIONS,
        default="full",
        help="where A3 and A4 are imposed: full (every visited point) or compact (the shared "
        "points; the same value for every K >= 2)",
    )
    a(
        "--bound",
        metavar="NAME",
        help="judge this bound (upper or lower) at the design (default: none)",
    )
    a(
        "--lift",
        action="store_true",
        help="build an explicit worst instance (1-D) and report its value",
    )
    a("--json", action="store_true", help="print one JSON object (key 'value')")


def _pattern(text: str | None) -> Any:
    if text is None:
        return None
    rows = [r.strip() for r in text.split(",")]
    if not rows or any(not r or set(r) - {"0", "1"} for r in rows):
        raise UserInputError(f"--pulls: rows of 0/1 separated by commas, got {text!r}")
    return [[int(c) for c in r] for r in rows]


def _design(args: argparse.Namespace) -> Any:
    from theory.worstcase import design_of

    params = {k: getattr(args, k) for k in ("H", "outer", "gamma", "mu", "p", "eta", "T0", "coins")
              if getattr(args, k) is not None}  # fmt: skip
    from theory.algorithm import lookup

    if not lookup(args.algorithm).rounds and args.H == 1:
        params.pop("H", None)
    try:
        return design_of(args.algorithm, K=args.K, L=args.L, alpha=args.alpha, zeta=args.zeta,
                         F0=args.F0, T=args.T, R=args.R, measured=args.measured,
                         pulls=_pattern(args.pulls), **params)  # fmt: skip
    except UserInputError as exc:
        text = str(exc).replace("T (steps) or R (rounds)", "--T (steps) or --R (rounds)")
        raise UserInputError(text) from None


def run(args: argparse.Namespace) -> int:
    """Solve, print, judge; the exit code (module docstring)."""
    from core import exitcodes
    from theory.verify.run import resolve_bounds
    from theory.worstcase.judge import REFUTED, covers, inside, judge_lower, judge_upper
    from theory.worstcase.lift import lift
    from theory.worstcase.pep import solve

    design = _design(args)
    bound = resolve_bounds([args.bound])[0] if args.bound else None
    if bound is not None and not covers(bound, design):
        raise UserInputError(
            f"--bound {bound.name}: a statement about {list(bound.algorithms)}, not about "
            f"--algorithm {args.algorithm} ({design.spec.kind})"
        )
    wc = solve(design, args.relaxation)
    out: dict[str, Any] = {**wc.to_dict(), "relaxation": args.relaxation}
    code = exitcodes.OK
    if bound is not None:
        lower = getattr(bound, "kind", "upper") == "lower"
        v = (judge_lower(bound, design, relaxation=args.relaxation, wc=wc) if lower else
             judge_upper(bound, design, relaxation=args.relaxation, wc=wc))  # fmt: skip
        out.update(bound=bound.name, bound_kind=v.kind, bound_value=v.bound_value,
                   verdict=v.verdict, class_tightness=v.tightness, lifted=v.lifted,
                   inside_conditions=inside(bound, design))  # fmt: skip
        code = exitcodes.BOUND_VIOLATED if v.verdict == REFUTED else code
    if args.lift and out.get("lifted") is None:
        out["lifted"] = lift(design).value
    if args.json:
        print(json.dumps(out, allow_nan=False, default=str))
    else:
        _print(out)
    return code


def _print(out: dict[str, Any]) -> None:
    w = sys.stdout.write
    d = ", ".join(f"{k} {out[k]}" for k in ("algorithm", "K", "T", "H", "R", "L", "alpha",
                                          "zeta", "F0", "measured") if out.get(k) is not None)  # fmt: skip
    w(f"design: {d}\n")
    w(f"class worst case ({out['relaxation']} relaxation): {out['value']:.6g}  "
      f"[solver {out['status']}, dual residual {out['dual_residual']:.1e}, "
      f"{out['points']} points per function, {out['elapsed_s']:.2f} s]\n")  # fmt: skip
    if out.get("bound"):
        where = "" if out["inside_conditions"] else " (outside its conditions: not a statement)"
        w(
            f"bound {out['bound']}: {out['bound_value']:.6g}{where}; class tightness "
            f"(worst case / bound) {out['class_tightness']:.4g}; verdict: {out['verdict']}\n"
        )
    if out.get("lifted") is not None:
        w(f"explicit 1-D instance (lifted): {out['lifted']:.6g}\n")

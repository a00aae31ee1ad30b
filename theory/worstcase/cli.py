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
from core.options import Option, declare, option
from theory.algorithm.table import COINS, NAMES, VARIANTS
from theory.options import notation_option
from theory.sync import OUTERS
from theory.validation import PARAMS
from theory.worstcase.pep import CLASS_TEXT, RELAXATIONS
from theory.worstcase.trajectory import MEASURED

__all__ = ["OPTIONS", "DESIGN", "JUDGE", "EPILOG", "add_arguments", "run"]


def _n(name: str, help: str | None = None, **kw: Any) -> Option:  # noqa: A002
    """The notation's flag ``--name`` (its range, its authors' aliases) with this command's
    metavar (the name in capitals) and words."""
    return notation_option(name, help=help, metavar=name.upper(), **kw)


_METHODS = (*NAMES, *VARIANTS)

EPILOG = (
    f"The class: {CLASS_TEXT}. Exit codes: 0 done (certified, exceeded on the relaxed class "
    "or no --bound), 1 the --bound is refuted, 2 bad input, 130 interrupted."
)

#: the method and its design (the notation's names; the authors' aliases too)
DESIGN: tuple[Option, ...] = (
    option(
        "--algorithm",
        required=True,
        choices=_METHODS,
        metavar="NAME",
        help=f"the method (required, no default): one of {', '.join(_METHODS)}",
    ),
    _n("K", default=2),
    _n("H", default=1, help="the steps of a round"),
    option(
        "--R",
        range=PARAMS["R"],
        help="rounds (T = R*H); or give --T, in integer in [1, inf) (default: none)",
    ),
    _n("T", help="instead of --R (default: none)"),
    _n("L", default=1.0),
    _n("alpha", required=True, help="required, no default"),
    _n("zeta", default=0.0, help="assumption A3"),
    _n("F0", default=1.0, help="assumption A4"),
    option("--outer", choices=OUTERS, help="outer update (default: the algorithm's)"),
    _n("gamma", help="default: the algorithm's"),
    _n("mu", help="default: the algorithm's"),
    _n("p", help="default: 0"),
    _n("eta", help="default: 0"),
    _n("T0", help="default: 0"),
    option("--coins", choices=COINS, help="coin model of the pull steps (default: independent)"),
    option(
        "--pulls",
        metavar="ROWS",
        help="a fixed pull pattern instead of every coin path: one 0/1 row per worker, rows "
        "separated by commas (e.g. 0100,1000 for K = 2, T = 4; default: every coin path)",
    ),
)

#: what is measured, the relaxation, the bound judged and the output
JUDGE: tuple[Option, ...] = (
    option(
        "--measured",
        choices=MEASURED,
        default="iterates",
        help="iterates: (1/T) sum_t ||grad f(xbar_t)||^2; anchors: (1/R) sum_r ||grad "
        "f(z_r)||^2 (default: iterates)",
    ),
    option(
        "--relaxation",
        choices=RELAXATIONS,
        default="full",
        help="where A3 and A4 are imposed: full (every visited point) or compact (the shared "
        "points; the same value for every K >= 2) (default: full)",
    ),
    option(
        "--bound",
        metavar="NAME",
        help="judge this bound (upper or lower) at the design (default: none)",
    ),
    option(
        "--lift",
        action="store_true",
        help="build an explicit worst instance (1-D) and report its value (default: none)",
    ),
    option(
        "--json", action="store_true", help="print one JSON object (key 'value') (default: none)"
    ),
)

#: every option of ``palsgd worst-case``
OPTIONS: tuple[Option, ...] = (*DESIGN, *JUDGE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``palsgd worst-case`` (:data:`OPTIONS`)."""
    parser.epilog = EPILOG
    declare(parser, OPTIONS)


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

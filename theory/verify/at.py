"""One design evaluated exactly (``palsgd verify --bounds NAME --at DESIGN``).

``DESIGN`` is the ``key=value`` text that every reproduce command of a report carries
(:func:`theory.verify.oracle.design_text`); the measured value, the bound, its terms and
its conditions are printed. For a lower bound (:mod:`theory.verify.lower`) the design is
``alpha, L, sigma, F0, zeta, K, H, T, p, eta, gamma, mu, outer, measured, coins`` and the
claim, its own instances' exact value and the known worst case are printed.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

from core.errors import UserInputError
from theory.check import jsonable
from theory.verify import lower as lower_check
from theory.verify.findings import known
from theory.verify.oracle import (
    REL_TOL,
    bound_params,
    design_text,
    evaluate,
    family_of,
    parse_design,
)
from theory.verify.report import _fmt
from theory.verify.run import is_lower, resolve_bounds
from theory.verify.settings import VerifySettings

__all__ = ["run_at"]


def run_at(settings: VerifySettings, at: str, *, as_json: bool = False) -> int:
    """``palsgd verify --bounds NAME --at DESIGN``: one design evaluated exactly, printed;
    returns 1 if the bound is violated there, else 0."""
    bounds = resolve_bounds(settings.bounds, settings.bound_file)
    if not settings.bounds or len(bounds) != 1:
        raise UserInputError("--at needs exactly one --bounds NAME")
    bound = bounds[0]
    if is_lower(bound):
        return _run_at_lower(bound, at, as_json)
    fam = family_of(bound)
    if not fam.exact:
        raise UserInputError(
            f"--at: bound {bound.name!r} (algorithm {fam.algorithm}) has no exact oracle"
        )
    design = parse_design(at)
    ev = evaluate(bound, fam, design)
    vals = bound_params(bound, design)
    rows = bound.condition_report(**vals)
    out = {
        "bound": bound.name,
        "design": ev.row(0),
        "measured": float(ev.measured[0]),
        "bound_value": float(ev.bound[0]),
        "ratio": float(ev.measured[0] / ev.bound[0]) if ev.bound[0] > 0 else None,
        "conditions": {r.name: bool(r.holds) for r in rows},
        "inside": bool(ev.inside[0]),
        "terms": {str(t): float(v) for t, v in zip(bound.terms, ev.terms[0], strict=True)},
    }
    violated = out["inside"] and out["ratio"] is not None and out["ratio"] > 1 + REL_TOL
    if as_json:
        print(json.dumps(jsonable({**out, "violated": violated}), indent=1))
    else:
        print(f"bound {bound.name} at {design_text(out['design'])}")
        print(f"  measured (exact) {out['measured']:.10g}")
        print(f"  bound            {out['bound_value']:.10g}")
        print(f"  ratio            {_fmt(out['ratio'], '.6g')}")
        for name, ok in out["conditions"].items():
            print(f"  condition {name}: {'holds' if ok else 'FAILS'}")
        for t, v in out["terms"].items():
            print(f"  term {t} = {v:.6g}")
        finding = known(bound.name)
        note = f" (a known finding: {finding.docs})" if violated and finding else ""
        print(("  VIOLATED" if violated else "  not violated here") + note)
    return 1 if violated else 0


def _run_at_lower(bound: Any, at: str, as_json: bool) -> int:
    """``--at`` for a lower bound (:func:`theory.verify.lower.at`): 1 if refuted there."""
    name = bound.name
    design = lower_check.parse_at(at)
    mine = bound if hasattr(bound, "bound_file") else None  # a lower bound of a bound file
    if as_json:
        with contextlib.redirect_stdout(io.StringIO()):
            out = lower_check.at(name, mine, **design)
        print(json.dumps(jsonable({"bound": name, "design": design, **out}), indent=1))
    else:
        out = lower_check.at(name, mine, **design)
    return 1 if out["violated"] else 0

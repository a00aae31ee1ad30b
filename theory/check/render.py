"""The text of a ``palsgd check`` report (:meth:`theory.check.CheckReport.to_text`) and the
number formats every message of the checker uses.

Two forms: the brief answer ``palsgd check`` prints by default (the verdict, the
configuration, the warnings, one table row per bound and a line per bound the numbers do
not describe; about 20 lines), and the full report (``--verbose``, and ``to_text()``'s
default): every condition with its margin, every term with its share, the lower bounds,
the largest ``H``, the notes.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from theory.check.report import BoundCheck, CheckReport

__all__ = ["fmt", "fmt_h", "h_limit", "render", "term_label"]


def fmt(x: float | None) -> str:
    """A number as the checker prints it: integers without a point, else 4 significant
    digits; ``n/a`` for ``None`` and NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


def fmt_h(x: float | None, h_max: float = 1e9) -> str:
    """A largest ``H`` as a number: ``none`` when the conditions fail at ``H = 1`` (NaN),
    ``any`` when no limit was found up to ``h_max``."""
    if x is None or math.isnan(x):
        return "none"
    if x >= h_max:
        return "any"
    return fmt(x)


def h_limit(x: float | None, h_max: float = 1e9) -> str:
    """Where the conditions hold in ``H``, as a phrase: ``"for H <= 36"``, ``"at no H (they
    fail already at H = 1)"``, ``"for every H tried (up to 1e+09)"``."""
    if x is None or math.isnan(x):
        return "at no H (they fail already at H = 1)"
    if x >= h_max:
        return f"for every H tried (up to {h_max:g})"
    return f"for H <= {fmt(x)}"


def term_label(term: str) -> str:
    """A short name of a bound's term by the constant it carries: ``F0``, ``zeta^2``,
    ``sigma^2``, with ``drift`` when it grows with ``H``."""
    names = set(re.findall(r"[A-Za-z_]\w*", term))
    label = next((lab for key, lab in _TERM_KINDS if key in names), "other")
    return f"{label} drift" if label != "F0" and "H" in names else label


_TERM_KINDS = (("F0", "F0"), ("zeta", "zeta^2"), ("sigma", "sigma^2"))


def render(r: CheckReport, verbose: bool = True) -> str:
    """The report as text: the verdict, the configuration, the warnings, then the bounds:
    each in full (``verbose``) or one table row each (the brief answer)."""
    out = []
    shown = " ".join(f"{k}={fmt(val)}" for k, val in r.inputs.items())
    out.append(f"configuration: {shown or '(no parameters given)'}")
    pre = f" (preset {r.preset})" if r.preset else ""
    out.append(f"algorithm: {r.algorithm} ({r.algorithm_reason}){pre}")
    if r.verdict:
        out.insert(0, f"verdict: {r.verdict}")
    infos = 0
    for w in r.warnings:
        if w.level != "warning" and not verbose:
            infos += 1
            continue
        tag = "WARNING" if w.level == "warning" else "info"
        margin = "" if w.margin is None else f" [margin {fmt(w.margin)}]"
        out.append(f"  {tag} {w.code}: {w.message}{margin}")
    if not verbose:
        return "\n".join(out + _brief_lines(r, infos))
    for b in r.bounds:
        out.append("")
        out += _bound_lines(b, r.eps)
    return "\n".join(out)


_BRIEF_COLUMNS = ("bound", "conditions", "value", "alpha", "rec. alpha", "max H", "speed-up H")


def _brief_lines(r: CheckReport, infos: int) -> list[str]:
    """One row per bound (conditions, value at alpha, the recommended alpha, the largest H
    at the checked alpha and for linear speed-up, the dominant term, against the lower
    bounds), a line per bound the row cannot describe, and where the details are."""
    rows, notes = [], []
    for b in r.bounds:
        if b.status == "skipped" or b.alpha is None:
            notes.append(f"{b.name}: skipped: {b.reason}")
            continue
        failed = [c.name for c in b.conditions if not c.holds]
        conds = "hold" if not failed else "FAIL " + ",".join(failed)
        if b.caveats and not failed:
            conds += " (caveat)"
        max_h = b.max_H_conditions_given
        if max_h is None:
            max_h = b.max_H_conditions_recommended
        rows.append(
            (
                b.name,
                conds,
                fmt(b.value),
                fmt(b.alpha),
                "none"
                if b.optimal_alpha is None or math.isnan(b.optimal_alpha)
                else fmt(b.optimal_alpha),
                fmt_h(max_h) if b.uses_H else "-",
                fmt_h(b.max_H_speedup) if b.uses_H else "-",
                _dominant(b),
                _against_lower(b),
            )
        )
        if b.value is not None and not math.isfinite(b.value):
            notes.append(
                f"{b.name}: the bound is not finite at these values (a term overflows double "
                "precision): it says nothing here"
            )
    out = [""]
    if rows:
        head = (*_BRIEF_COLUMNS, "dominant term", "bound / lower bound")
        widths = [max(len(str(x[i])) for x in (head, *rows)) for i in range(len(head))]
        for row in (head, *rows):
            line = "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True))
            out.append(line.rstrip())
        out.append(
            "(value: the bound at alpha; rec. alpha: the step minimising it under the "
            "conditions; max H: the largest H meeting them at alpha; speed-up H: the "
            "largest H with linear speed-up)"
        )
    out += notes
    more = f"{infos} info line(s), " if infos else ""
    out.append(
        f"(--verbose: {more}every condition with its margin, every term, the lower bounds, "
        "the sources and notes)"
    )
    return out


def _dominant(b: BoundCheck) -> str:
    """The dominant term by its constant and share; ``-`` when the shares mean nothing
    (a negative term outside the conditions, a bound that is not finite)."""
    if not b.terms or not _shares_meaningful(b):
        return "-"
    top = max(b.terms, key=lambda t: t.value)
    return f"{term_label(top.term)} {top.share:.0f}%"


def _shares_meaningful(b: BoundCheck) -> bool:
    return (
        b.value is not None
        and math.isfinite(b.value)
        and b.value > 0
        and all(math.isfinite(t.value) and t.value >= 0 for t in b.terms)
    )


def _against_lower(b: BoundCheck) -> str:
    """The bound over the largest lower bound at the same alpha, ``BELOW`` when a bound
    whose conditions hold is under it (false there), ``-`` when there is none to compare."""
    vals = [lo.value for lo in b.lower_bounds if lo.value is not None and math.isfinite(lo.value)]
    vals = [v for v in vals if v > 0]
    if not vals or b.value is None or not math.isfinite(b.value):
        return "-"
    lo = max(vals)
    if b.conditions_hold and b.value < lo:
        return "BELOW: false here"
    return f"{fmt(b.value / lo)}x"


def _bound_lines(b: BoundCheck, eps: float | None) -> list[str]:
    flag = "derived here" if b.derived_here else "published"
    out = [f"== {b.name}: {b.title} [{flag}]", f"   source: {b.provenance}"]
    out += [f"   caveat: {c}" for c in b.caveats]
    if b.status == "skipped":
        return [*out, f"   SKIPPED: {b.reason}"]
    if b.reason:
        out.append(f"   {b.reason}")
    if b.alpha is not None:
        out += _value_lines(b)
    out.append(
        f"   recommended alpha (minimises the bound under the conditions): "
        f"{fmt(b.optimal_alpha)}; largest alpha meeting the conditions: {fmt(b.max_alpha)}"
    )
    out += _max_H_lines(b)
    if b.rounds_to_eps is not None:
        out.append(
            f"   communication rounds to reach eps = {fmt(eps)} (optimal alpha): "
            f"{fmt(b.rounds_to_eps)}"
        )
    if b.notes:
        out.append(f"   notes: {b.notes}")
    return out


def _value_lines(b: BoundCheck) -> list[str]:
    """The conditions, the value and the terms at the checked ``alpha``."""
    out = ["   conditions:"]
    for c in b.conditions:
        out.append(
            f"     [{'pass' if c.holds else 'FAIL'}] {c.name}: {c.relation}  "
            f"(margin {fmt(c.margin)})"
        )
    if not b.conditions:
        out.append("     (none)")
    src = "given" if b.alpha_source == "given" else "optimal, alpha not given"
    verdict = "" if b.conditions_hold else "  -- conditions FAIL: the bound does not apply"
    out.append(f"   bound at alpha = {fmt(b.alpha)} ({src}): {fmt(b.value)}{verdict}")
    width = max(len(t.term) for t in b.terms)
    meaningful = _shares_meaningful(b)
    for t in b.terms:
        share = f"{t.share:6.1f}%" if meaningful else "      -"
        out.append(f"     {t.term:<{width}}  {fmt(t.value):>10}  {share}")
    if not meaningful:
        out.append(
            "     (shares not shown: a term is negative or not finite here; outside the "
            "conditions or beyond double precision the terms mean nothing)"
        )
    else:
        out.append(f"   dominant term: {b.dominant_term}")
    return out + _lower_lines(b)


def _lower_lines(b: BoundCheck) -> list[str]:
    """The lower bounds at the same ``alpha`` and where this bound stands against them."""
    if not b.lower_bounds:
        return []
    out = [f"   lower bounds at alpha = {fmt(b.alpha)} (no valid bound is below them):"]
    for lo in b.lower_bounds:
        if lo.value is None or not math.isfinite(lo.value):
            why = lo.reason or "its value is not finite at these values"
            out.append(f"     {lo.name}: not evaluated ({why})")
            continue
        if not lo.value:
            note = "no constraint here"
        elif b.value is None or not math.isfinite(b.value):
            note = "no comparison: this bound is not finite here"
        else:
            note = f"this bound is {fmt(b.value / lo.value)} x it"
        if b.conditions_hold and b.value is not None and b.value < lo.value:
            note = "CONTRADICTION: this bound is below it, so at least one of the two is false"
        out.append(f"     {lo.name}: {fmt(lo.value)}  ({note})")
    return out


def _max_H_lines(b: BoundCheck) -> list[str]:
    if not b.uses_H:
        return ["   max H: not applicable (the bound does not depend on H)"]
    out, at = [], []
    if b.max_H_conditions_given is not None:
        at.append(f"{fmt_h(b.max_H_conditions_given)} at the given alpha = {fmt(b.alpha)}")
    if b.max_H_conditions_recommended is not None:
        at.append(
            f"{fmt_h(b.max_H_conditions_recommended)} at the recommended alpha = "
            f"{fmt(b.optimal_alpha)}"
        )
    if at:
        out.append(f"   max H meeting the conditions: {'; '.join(at)}")
    sched = (
        f"the speed-up schedule alpha = {fmt(b.schedule_alpha)}"
        if b.schedule_alpha is not None
        else "the bound-minimising alpha at each H"
    )
    if b.max_H_speedup is None or math.isnan(b.max_H_speedup):
        out.append(f"   max H for linear speed-up: none: at {sched} the conditions hold "
                   f"{h_limit(b.max_H_conditions)}")  # fmt: skip
    else:
        out.append(
            f"   max H for linear speed-up: {fmt_h(b.max_H_speedup)} (at {sched}; the "
            f"conditions hold {h_limit(b.max_H_conditions)})"
        )
    return out

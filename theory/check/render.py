"""The text of a ``palsgd check`` report (:meth:`theory.check.CheckReport.to_text`) and the
number formats every message of the checker uses."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from theory.check.report import BoundCheck, CheckReport

__all__ = ["fmt", "fmt_h", "render"]


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
    """A largest ``H``: NaN means the conditions fail at ``H = 1``, ``h_max`` no limit found."""
    if x is None or math.isnan(x):
        return "none (fails already at H = 1)"
    if x >= h_max:
        return f">= {fmt(h_max)}"
    return fmt(x)


def render(r: CheckReport) -> str:
    """The report as text: the verdict, the configuration, the warnings, then each bound."""
    out = []
    shown = " ".join(f"{k}={fmt(val)}" for k, val in r.inputs.items())
    out.append(f"configuration: {shown or '(no parameters given)'}")
    pre = f" (preset {r.preset})" if r.preset else ""
    out.append(f"algorithm: {r.algorithm} ({r.algorithm_reason}){pre}")
    if r.verdict:
        out.insert(0, f"verdict: {r.verdict}")
    for w in r.warnings:
        tag = "WARNING" if w.level == "warning" else "info"
        margin = "" if w.margin is None else f" [margin {fmt(w.margin)}]"
        out.append(f"  {tag} {w.code}: {w.message}{margin}")
    for b in r.bounds:
        out.append("")
        out += _bound_lines(b, r.eps)
    return "\n".join(out)


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
    for t in b.terms:
        out.append(f"     {t.term:<{width}}  {fmt(t.value):>10}  {t.share:6.1f}%")
    out.append(f"   dominant term: {b.dominant_term}")
    return out + _lower_lines(b)


def _lower_lines(b: BoundCheck) -> list[str]:
    """The lower bounds at the same ``alpha`` and where this bound stands against them."""
    if not b.lower_bounds:
        return []
    out = [f"   lower bounds at alpha = {fmt(b.alpha)} (no valid bound is below them):"]
    for lo in b.lower_bounds:
        if lo.value is None:
            out.append(f"     {lo.name}: not evaluated ({lo.reason})")
            continue
        if not lo.value or b.value is None:
            note = "no constraint here"
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
    out.append(
        f"   max H for linear speed-up: {fmt_h(b.max_H_speedup)} (at {sched}, which "
        f"allows H <= {fmt_h(b.max_H_conditions)} under the conditions)"
    )
    return out

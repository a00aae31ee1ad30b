"""The exact part of the report: per-bound verdicts, per-term tightness, controls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from theory.verify.report_types import VerifyReport

__all__ = [
    "EXACT_COLUMNS_CSV",
    "TIGHTNESS_COLUMNS",
    "CONTROLS_COLUMNS",
    "HETERO_COLUMNS",
    "LOWER_COLUMNS",
    "exact_summary",
    "format_exact",
    "ratio_text",
]

#: columns of ``exact.csv`` (one row per bound verified exactly)
EXACT_COLUMNS_CSV = (
    "bound", "algorithm", "coins", "verdict", "designs", "inside", "violations",
    "worst_ratio", "worst_measured", "worst_bound", "worst_term", "vacuous_share",
    "elapsed_s", "worst_command",
)  # fmt: skip
#: columns of ``tightness.csv`` (one row per bound and term)
TIGHTNESS_COLUMNS = (
    "bound", "term_index", "term", "designs", "max_ratio", "status", "command",
    "class_tightness", "class_verdict",
)  # fmt: skip
#: columns of ``controls.csv`` (one row per negative control)
CONTROLS_COLUMNS = (
    "bound", "control", "kind", "term", "status", "rejected_by", "worst_ratio", "command",
    "class_verdict", "class_tightness",
)  # fmt: skip
#: columns of ``hetero.csv`` (one row per bound checked on the heterogeneous instances)
HETERO_COLUMNS = (
    "bound", "verdict", "designs", "inside", "worst_ratio", "elapsed_s", "worst_command",
)  # fmt: skip
#: columns of ``lower.csv`` (one row per lower bound; ratio = claimed / attained exactly)
LOWER_COLUMNS = (
    "bound", "verdict", "designs", "inside", "worst_ratio", "worst_claimed", "worst_attained",
    "refuted_by", "elapsed_s", "worst_command",
)  # fmt: skip


def ratio_text(x: Any, spec: str = ".4g") -> str:
    """A ratio measured/bound as the report prints it; ``inf`` (the exact second moment
    overflowed) reads "inf (the iterates diverge)"."""
    if x is None:
        return "-"
    v = float(x)
    return "inf (the iterates diverge)" if v == float("inf") else format(v, spec)


def exact_summary(report: VerifyReport) -> dict[str, object]:
    """Bounds violated exactly, the controls' detection power, the vacuous shares (the first
    fields of :class:`~theory.verify.report_types.Summary`)."""
    exact = report.exact
    return {
        "exact_bounds": len(exact),
        "exact_violated": list(  # by either exact oracle, each bound once
            dict.fromkeys(
                r["bound"] for r in (*exact, *report.hetero) if r["verdict"] == "violated"
            )
        ),
        "hetero_worst": {r["bound"]: r["worst_ratio"] for r in report.hetero},
        "exact_worst": {r["bound"]: r["worst_ratio"] for r in exact},
        "vacuous_share": {r["bound"]: r["vacuous_share"] for r in exact},
        "untested_terms": [
            f"{t['bound']}: {t['term']}" for t in report.tightness if t["status"] == "untested"
        ],
        "power": report.power,
    }


def _f(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    try:
        return format(float(x), spec)
    except (TypeError, ValueError):
        return str(x)


def _table(head: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(head)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return out


def format_exact(report: VerifyReport, *, width: int = 60) -> str:
    """The exact verdicts, the per-term tightness table and the controls, as text."""
    exact = report.exact
    if not exact:
        return "\n".join(_lower_lines(report.lower)[1:] + _power_lines(report))
    lines = ["exact verification on quadratics (no statistics: the measured value is exact)"]
    known = {f["bound"] for f in report.findings}
    body = [
        (
            r["bound"],
            (
                ("violated (known finding)" if r["bound"] in known else "!! VIOLATED !!")
                if r["verdict"] == "violated"
                else r["verdict"]
            ),
            ratio_text(r["worst_ratio"]),
            f"{r['inside']}/{r['designs']}",
            _f(r["vacuous_share"], ".0%") if r["vacuous_share"] is not None else "-",
        )
        for r in exact
    ]
    lines += _table(("bound", "verdict", "worst ratio", "inside/designs", "vacuous"), body)
    lines.append("")
    lines.append("worst design per bound (reproduce with the command):")
    for r in exact:
        lines.append(f"  {r['bound']}: ratio {ratio_text(r['worst_ratio'])}")
        if r["worst_command"]:
            lines.append(f"    {r['worst_command']}")
    lines.append("")
    lines.append("per-term tightness: largest measured/bound where the term is >= half the bound")
    body = []
    for t in report.tightness:
        term = t["term"] if len(t["term"]) <= width else t["term"][: width - 3] + "..."
        body.append(
            (
                t["bound"],
                term,
                str(t["designs"]),
                ratio_text(t["max_ratio"], ".3g") if t["status"] == "tested" else "untested",
            )
        )
    lines += _table(("bound", "term", "designs", "max ratio"), body)
    lines += _hetero_lines(report.hetero, report.hetero_skipped)
    lines += _lower_lines(report.lower)
    lines += _power_lines(report)
    return "\n".join(lines)


def _lower_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lower-bound verdicts (:mod:`theory.verify.lower`)."""
    if not rows:
        return []
    lines = [
        "",
        "lower bounds (claimed / attained exactly by their own instances or by the known "
        "worst case of the class; above 1 refutes):",
    ]
    body = [
        (
            r["bound"],
            "!! VIOLATED !!" if r["verdict"] == "violated" else r["verdict"],
            ratio_text(r["worst_ratio"]),
            f"{r['inside']}/{r['designs']}",
            r["refuted_by"] or "-",
        )
        for r in rows
    ]
    lines += _table(("bound", "verdict", "worst ratio", "tested/designs", "refuted by"), body)
    for r in rows:
        if r["worst_command"]:
            lines.append(f"  {r['bound']}: {r['worst_command']}")
    return lines


def _hetero_lines(
    rows: Sequence[Mapping[str, Any]], skipped: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """The heterogeneous-instance verdicts (:mod:`theory.verify.hetero`) and the bounds they
    do not test, with the reason."""
    if not rows and not skipped:
        return []
    if not rows:
        return ["", "heterogeneous instances: no bound of this run is tested on them"] + [
            f"  {r['bound']}: not tested ({r['reason']})" for r in skipped
        ]
    lines = [
        "",
        "heterogeneous instances (two curvatures, sigma = 0, F0 = 0; exact value / bound):",
    ]
    body = [
        (
            r["bound"],
            "!! VIOLATED !!" if r["verdict"] == "violated" else r["verdict"],
            ratio_text(r["worst_ratio"]),
            f"{r['inside']}/{r['designs']}",
        )
        for r in rows
    ]
    lines += _table(("bound", "verdict", "worst ratio", "inside/designs"), body)
    for r in rows:
        if r["worst_command"]:
            lines.append(f"  {r['bound']}: {r['worst_command']}")
    lines += [f"  {r['bound']}: not tested ({r['reason']})" for r in skipped]
    return lines


def _power_lines(report: VerifyReport) -> list[str]:
    """The negative controls' detection power: overall, per kind of statement, per bound."""
    lines: list[str] = []
    pw = report.power
    if pw.controls:
        lines.append("")
        lines.append(
            f"negative controls (upper bounds: each term halved, each removed, bound x 0.9; "
            f"lower bounds: x 1.5, x 2, each term removed that raises it): "
            f"{pw.rejected}/{pw.controls} rejected, detection power {pw.power:.0%}"
        )
        for kind, d in pw.by_kind.items():
            lines.append(
                f"  {kind} bounds: {d['rejected']}/{d['controls']} rejected ({d['power']:.0%})"
            )
        for name, d in pw.per_bound.items():
            lines.append(f"  {name}: {d['rejected']}/{d['controls']} rejected")
        lines.append(
            "  'not shown false' = the exact oracle never exceeded it on the searched designs "
            "(it may be true); never counted as a pass"
        )
    return lines

"""The closing lines of a ``palsgd verify`` summary: contradictions between upper and lower
bounds, the known findings in plain words, and the run's outcome (what its exit code says)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from theory.verify.exact_report import ratio_text
from theory.verify.report_types import Summary
from theory.verify.untested import untested_line

__all__ = ["crossing_lines", "findings_lines", "result_line"]


def crossing_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Upper bounds below lower bounds, and which of the two the exact oracle refutes."""
    lines = []
    for c in rows:
        lines += [
            "",
            f"CONTRADICTION: {c['upper']} (upper) is below {c['lower']} (lower) at "
            f"{c['designs']} design(s) inside both; at least one of them is false. At the "
            f"widest ({ratio_text(c['lower_value'])} > {ratio_text(c['upper_value'])}) the exact value of "
            f"the lower bound's own instance is {ratio_text(c['exact'])}: the exact oracle refutes "
            f"{c['refuted']}.",
            f"  {c['command']}",
        ]
    return lines


def findings_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The known findings of the run in plain words: what was found, the source, each
    reproducing design with its exact ratio, the likely corrected statement, where to read."""
    lines = []
    for f in findings:
        ok = f["reproduced"]
        lines += [
            "",
            "=" * 78,
            f"KNOWN FINDING ({'reproduced' if ok else 'NO LONGER REPRODUCES'}): {f['bound']} "
            f"= {f['statement']}",
            f"  source: {f['source']}",
            f"  what: {f['summary']}.",
            f"  {'reproduced exactly at' if ok else 'recorded'} {len(f['designs'])} design(s) "
            "inside its conditions (each evaluated exactly in this run):",
        ]
        for i, d in enumerate(f["designs"], 1):
            what = "REPRODUCES" if d["reproduced"] else "does NOT reproduce"
            lines += [
                f"   {i}. {d['label']}",
                f"      measured {ratio_text(d['measured'])} vs bound "
                f"{ratio_text(d['bound_value'])}: ratio {ratio_text(d['ratio'])}, {what}",
                f"      {d['command']}",
            ]
        lines += [
            f"  likely corrected statement: {f['corrected']} ({f['corrected_reading']}); "
            f"registered beside it and verified like every bound (palsgd verify --bounds "
            f"{f['corrected']})",
            f"  more: {f['docs']}",
            "=" * 78,
        ]
    return lines


def result_line(s: Summary) -> str:
    """The run's outcome in one line: what the exit code says."""
    parts = []
    if s.new_violations:
        parts.append(f"NEW VIOLATION(S): {', '.join(s.new_violations)}")
    if s.stale_findings:
        parts.append(
            f"known finding(s) NO LONGER REPRODUCE: {', '.join(s.stale_findings)} "
            "(update theory/verify/findings.py)"
        )
    if parts:
        return f"result: {'; '.join(parts)} (exit code 1)"
    known = [b for b in s.violated_bounds if b not in s.new_violations]
    tail = f" beyond the known finding(s) {', '.join(known)}, reproduced" if known else ""
    if s.untested:
        return f"result: no bound violated{tail}; {untested_line(s.untested)} (exit code 6)"
    return f"result: no bound violated{tail} (exit code 0)"

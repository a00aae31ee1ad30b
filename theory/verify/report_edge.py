"""The report edge of ``palsgd verify``: the stages' typed records
(:class:`~theory.verify.context.StageResults`) become the JSON-ready rows of the
:class:`~theory.verify.report_types.VerifyReport` here and only here
(:meth:`~theory.verify.records.Record.to_row`, or ``to_dict`` of the stages' result
classes), with the run's provenance (installed versions, the bounds' descriptions)."""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import theory
from core.io import package_versions
from theory.check import jsonable
from theory.verify.classstage import ClassResult
from theory.verify.context import RunContext, is_lower
from theory.verify.controls import power
from theory.verify.exact import ExactResult
from theory.verify.findings import findings_report
from theory.verify.records import Row, TightnessRow, rows_of
from theory.verify.report import summary_of
from theory.verify.report_types import Power, Statistics, VerifyReport

__all__ = ["build_report", "tightness_rows"]


def build_report(ctx: RunContext) -> VerifyReport:
    """The report of the run ``ctx`` (the Monte-Carlo tables empty without that stage)."""
    settings, found = ctx.settings, ctx.found
    report = VerifyReport(
        settings=settings,
        versions=_versions(),
        exact=rows_of(found.exact),
        hetero=rows_of(found.hetero),
        hetero_skipped=rows_of(found.hetero_skipped),
        combined=rows_of(found.combined),
        lower=rows_of(found.lower),
        crossings=rows_of(found.crossings),
        findings=rows_of(findings_report(r.bound for r in found.exact)),
        tightness=rows_of(tightness_rows(found.exact, found.klass)),
        class_results=rows_of(found.klass),
        class_designs=jsonable(found.class_designs),
        controls=rows_of(found.controls),
        power=Power(**jsonable(power(found.controls))),
        bounds=[_describe(b) for b in ctx.bounds],
        constant_checks=rows_of(ctx.cache.checks),
        statistics=Statistics(correction=settings.correction, family_wise_level=settings.level),
        elapsed_s=0.0,
    )
    mc = found.monte_carlo
    if mc is not None:
        report.statistics = mc.statistics
        report.results = rows_of(mc.results)
        for name in ("rates", "speedup", "consensus", "exact_vs_mc", "exact_vs_mc_summary"):
            setattr(report, name, rows_of(getattr(mc, name)))
    report.elapsed_s = time.perf_counter() - ctx.t_start
    report.summary = summary_of(report)
    return report


def _versions() -> dict[str, str]:
    out: dict[str, str] = package_versions(("numpy", "scipy", "sympy", "matplotlib"))
    out.update(theory=theory.__version__, platform=platform.platform())
    try:
        root = Path(__file__).resolve().parent.parent
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _describe(bound: Any) -> Row:
    """:meth:`Bound.describe`, or the description of a lower bound."""
    if not is_lower(bound):
        return bound.describe()
    return {
        "name": bound.name,
        "kind": "lower",
        "title": bound.title,
        "provenance": bound.provenance,
        "algorithms": list(bound.algorithms),
        "parameters": list(bound.parameters),
        "attained_on": getattr(bound, "attained_on", ""),
        "notes": bound.notes,
    }


def tightness_rows(
    results: Sequence[ExactResult], klass: Sequence[ClassResult] = ()
) -> list[TightnessRow]:
    """One row per (bound, term): designs where the term is at least half of the bound,
    the largest ratio measured/bound among them, the command that reproduces it, and the
    class stage's tightness and verdict of the bound (``klass``)."""
    by_bound = {r.bound: r for r in klass}
    rows = []
    for r in results:
        c = by_bound.get(r.bound)
        for i, t in enumerate(r.terms):
            rows.append(
                TightnessRow(
                    r.bound, i, t.term, t.designs, t.max_ratio, t.status, t.command,
                    class_tightness=None if c is None else c.class_tightness,
                    class_verdict=None if c is None else c.verdict,
                )
            )  # fmt: skip
    return rows

"""Report: the summary of a :class:`~theory.verify.report_types.VerifyReport`, the terminal
table, the report files written atomically."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.io import write_csv
from theory.verify.class_report import CLASS_COLUMNS, CLASS_DESIGN_COLUMNS, class_lines
from theory.verify.combined import COMBINED_COLUMNS, combined_lines
from theory.verify.exact_report import (
    CONTROLS_COLUMNS,
    EXACT_COLUMNS_CSV,
    HETERO_COLUMNS,
    LOWER_COLUMNS,
    TIGHTNESS_COLUMNS,
    exact_summary,
    format_exact,
    ratio_text,
)
from theory.verify.findings import classify
from theory.verify.outcome import crossing_lines, findings_lines, result_line
from theory.verify.report_types import ROW_TABLES, Summary, VerifyReport
from theory.verify.settings import (
    CONSENSUS_COLUMNS,
    EXACT_COLUMNS,
    HOLDS,
    INCONCLUSIVE,
    NOT_VERIFIABLE,
    OUTSIDE,
    RATES_COLUMNS,
    RESULTS_COLUMNS,
    SPEEDUP_COLUMNS,
    VERDICTS,
    VIOLATED,
)
from theory.verify.untested import exit_code as untested_exit_code
from theory.verify.untested import untested_bounds


def summary_of(report: VerifyReport) -> Summary:
    """Verdict counts, the violated configurations, exact-vs-MC disagreements, exit code."""
    rows = report.results
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        counts[r.get("verdict", INCONCLUSIVE)] = counts.get(r.get("verdict", INCONCLUSIVE), 0) + 1
    violated = [
        {
            k: r.get(k)
            for k in (
                "index",
                "bound",
                "problem",
                "summary",
                "measured_mean",
                "lcb",
                "bound_value",
                "ratio",
                "p_adjusted",
            )
        }
        for r in rows
        if r.get("verdict") == VIOLATED
    ]
    per_bound: dict[str, dict[str, int]] = {}
    for r in rows:
        d = per_bound.setdefault(r["bound"], {v: 0 for v in VERDICTS})
        d[r.get("verdict", INCONCLUSIVE)] += 1
    ratios = [
        r["ratio"]
        for r in rows
        if r.get("verdict") in (HOLDS, INCONCLUSIVE, VIOLATED) and isinstance(r.get("ratio"), float)
    ]
    disagree = [
        s["algorithm"] for s in report.exact_vs_mc_summary if s.get("status") == "DISAGREES"
    ]
    ex = exact_summary(report)
    lower_violated = [r["bound"] for r in report.lower if r["verdict"] == VIOLATED]
    crossed = [c["refuted"] for c in report.crossings]
    refuted = [r["bound"] for r in report.class_results if r["verdict"] == "refuted"]
    every = [*ex["exact_violated"], *lower_violated, *crossed, *refuted]
    every += [r["bound"] for r in report.combined if r["verdict"] == VIOLATED]
    every += [v["bound"] for v in violated]
    verdict = classify(report.findings, every)
    untested = untested_bounds(
        [b["name"] for b in report.bounds],
        [getattr(report, t) for t in ROW_TABLES],  # the rows with "inside" count
        rows,
    )
    return Summary(
        **ex,
        lower_violated=lower_violated,
        violated_bounds=list(dict.fromkeys(every)),
        new_violations=verdict["new_violations"],
        stale_findings=verdict["stale"],
        counts=counts,
        per_bound=per_bound,
        violated=violated,
        max_tightness_ratio=max(ratios) if ratios else None,
        median_tightness_ratio=float(np.median(ratios)) if ratios else None,
        exact_vs_mc_disagreements=disagree,
        not_verifiable=[r["note"] for r in rows if r.get("verdict") == NOT_VERIFIABLE],
        correction=report.statistics.correction,
        family_wise_level=report.statistics.family_wise_level,
        exit_code=untested_exit_code(verdict["exit_code"], untested),
        untested=untested,
    )


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(xf):
        return "-"
    if math.isinf(xf):
        return "inf" if xf > 0 else "-inf"
    return format(xf, spec)


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The terminal table: bound, problem, configuration, measured [lcb, ucb], bound, ratio,
    verdict. Violated rows are marked with ``!!``."""
    head = ("bound", "problem", "configuration", "measured [lcb, ucb]", "bound", "ratio", "verdict")
    body = []
    for r in rows:
        if r.get("verdict") == NOT_VERIFIABLE:
            body.append((r["bound"], "-", "-", "-", "-", "-", r.get("note", NOT_VERIFIABLE)))
            continue
        meas = f"{_fmt(r.get('measured_mean'))} [{_fmt(r.get('lcb'))}, {_fmt(r.get('ucb'))}]"
        verdict = r.get("verdict", "")
        if verdict == VIOLATED:
            verdict = "!! VIOLATED !!"
        body.append(
            (
                r["bound"],
                r["problem"],
                r.get("summary", ""),
                meas,
                _fmt(r.get("bound_value")),
                _fmt(r.get("ratio"), ".2f"),
                verdict,
            )
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return "\n".join(out)


def format_summary(report: VerifyReport) -> str:
    """Human-readable closing summary; violated bounds are listed prominently."""
    s = report.summary
    assert s is not None, "the report's summary is set by summary_of"
    c = s.counts
    lines = []
    lower = report.lower
    if s.exact_bounds or lower:
        pw = s.power
        kinds = "; ".join(f"{k} {d['rejected']}/{d['controls']}" for k, d in pw.by_kind.items())
        ctrl = (
            f"; negative controls: {pw.rejected}/{pw.controls} rejected "
            f"(detection power {pw.power:.0%}: {kinds})"
            if pw.controls
            else ""
        )
        low = f", {len(lower)} lower bound(s), {len(s.lower_violated)} violated" if lower else ""
        lines.append(
            f"exact: {s.exact_bounds} bound(s) verified on quadratics, "
            f"{len(s.exact_violated)} violated{low}{ctrl}"
        )
    mc_ran = bool(report.results) or not (s.exact_bounds or lower)
    lines += (
        []
        if not mc_ran
        else [
            f"Monte Carlo: tested {sum(c[v] for v in (HOLDS, VIOLATED, INCONCLUSIVE))} configurations "
            f"({s.correction} correction, family-wise level {s.family_wise_level}): "
            f"{c[HOLDS]} hold, {c[VIOLATED]} violated, {c[INCONCLUSIVE]} inconclusive; "
            f"{c[OUTSIDE]} outside conditions; {c[NOT_VERIFIABLE]} not verifiable",
        ]
    )
    if s.median_tightness_ratio is not None:
        lines.append(
            f"tightness measured/bound: median {s.median_tightness_ratio:.3g}, "
            f"max {s.max_tightness_ratio:.3g}"
        )
    for note in s.not_verifiable:
        lines.append(f"note: {note}")
    for a in s.exact_vs_mc_disagreements:
        lines.append(f"WARNING: exact moments and Monte Carlo disagree for {a}")
    known = {f["bound"] for f in report.findings}
    for r in report.exact:
        if r["verdict"] == "violated" and r["bound"] not in known:
            lines.append("")
            lines.append("!" * 78)
            lines.append(
                f"BOUND VIOLATED (exact): {r['bound']}: measured/bound = "
                f"{ratio_text(r['worst_ratio'])} at the design (largest term {r['worst_term']}):"
            )
            lines.append(f"  {r['worst_command']}")
            lines.append("!" * 78)
    for r in report.lower:
        if r["verdict"] == "violated":
            lines.append("")
            lines.append("!" * 78)
            lines.append(
                f"LOWER BOUND VIOLATED (exact): {r['bound']} claims {_fmt(r['worst_claimed'])} "
                f"where {r['refuted_by']} attain(s) {_fmt(r['worst_attained'])} "
                f"(claimed/attained {ratio_text(r['worst_ratio'])}):"
            )
            lines.append(f"  {r['worst_command']}")
            lines.append("!" * 78)
    lines += crossing_lines(report.crossings)
    if s.violated:
        lines.append("")
        lines.append("!" * 78)
        lines.append(f"BOUND VIOLATED in {len(s.violated)} configuration(s):")
        for v in s.violated:
            lines.append(
                f"  [{v['index']}] {v['bound']} on {v['problem']} ({v['summary']}): "
                f"measured {_fmt(v['measured_mean'])} (lcb {_fmt(v['lcb'])}) > bound "
                f"{_fmt(v['bound_value'])}, ratio {_fmt(v['ratio'], '.2f')}"
            )
        lines.append("!" * 78)
    lines += findings_lines(report.findings)
    lines.append("")
    lines.append(result_line(s))
    return "\n".join(lines)


class AtomicDirectory:
    """Write a directory atomically: files go to a temporary sibling, renamed at the end.

    On success an existing target (a previous report: it must contain ``results.json`` or be
    empty) is replaced; on failure the temporary directory and any parent directories
    created for it are removed, so nothing half-written is left behind. An unwritable
    target raises :class:`UserInputError` before any work is done.
    """

    def __init__(self, target: str | os.PathLike[str]):
        # a symbolic link is followed (core.files' rule): its target directory
        # is replaced, the link itself stays
        self.target = Path(os.path.realpath(Path(target).expanduser()))
        self.tmp: Path | None = None
        self._created: list[Path] = []

    def __enter__(self) -> Path:
        t = self.target
        if t.exists() and not t.is_dir():
            raise UserInputError(f"output path {str(t)!r} exists and is not a directory")
        if t.is_dir() and any(t.iterdir()) and not (t / "results.json").exists():
            raise UserInputError(
                f"output directory {str(t)!r} is not empty and holds no "
                "previous report (results.json); refusing to replace it"
            )
        missing = []
        p = t.parent
        while not p.exists():
            missing.append(p)
            p = p.parent
        if not p.is_dir():
            raise UserInputError(
                f"cannot write the report to {str(t)!r}: {str(p)!r} is not a directory"
            )
        try:
            for d in reversed(missing):
                d.mkdir()
                self._created.append(d)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{t.name}.tmp-", dir=t.parent))
        except OSError as exc:
            self._cleanup()
            raise UserInputError(f"cannot write the report to {str(t)!r}: {exc.strerror}") from None
        return self.tmp

    def _cleanup(self) -> None:
        if self.tmp is not None and self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        for d in reversed(self._created):
            try:
                d.rmdir()
            except OSError:
                pass
        self._created.clear()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._cleanup()
            return
        assert self.tmp is not None
        t = self.target
        old = None
        try:
            if t.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{t.name}.old-", dir=t.parent))
                os.rmdir(old)
                os.rename(t, old)
            os.rename(self.tmp, t)
        except OSError as exc:
            if old is not None and old.exists() and not t.exists():
                os.rename(old, t)
            self._cleanup()
            raise UserInputError(f"cannot write the report to {str(t)!r}: {exc.strerror}") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


#: (file name, report table, columns) of each CSV file of the report directory
_CSV_FILES = (
    ("exact.csv", "exact", EXACT_COLUMNS_CSV),
    ("tightness.csv", "tightness", TIGHTNESS_COLUMNS),
    ("controls.csv", "controls", CONTROLS_COLUMNS),
    ("hetero.csv", "hetero", HETERO_COLUMNS),
    ("combined.csv", "combined", COMBINED_COLUMNS),
    ("lower.csv", "lower", LOWER_COLUMNS),
    ("class.csv", "class_results", CLASS_COLUMNS),
    ("class_designs.csv", "class_designs", CLASS_DESIGN_COLUMNS),
    ("results.csv", "results", RESULTS_COLUMNS),
    ("rates.csv", "rates", RATES_COLUMNS),
    ("exact_vs_mc.csv", "exact_vs_mc", EXACT_COLUMNS),
    ("speedup.csv", "speedup", SPEEDUP_COLUMNS),
    ("consensus.csv", "consensus", CONSENSUS_COLUMNS),
)


def summary_text(report: VerifyReport) -> str:
    """``summary.txt``: the exact verdicts, tightness and power first, then the
    Monte-Carlo table and the closing summary."""
    parts = [format_exact(report), "\n".join(combined_lines(report.combined)).lstrip("\n")]
    if report.results:
        parts.append("Monte-Carlo tests (problems without an exact oracle)")
        parts.append(format_table(report.results))
    parts.append("\n".join(class_lines(report.class_results)))
    parts.append(format_summary(report))
    return "\n\n".join(p for p in parts if p)


def write_report_files(report: VerifyReport, directory: Path, *, plots: bool = True) -> list[str]:
    """Write every report file into an existing ``directory``; returns the file names."""
    directory = Path(directory)
    files = []
    with open(directory / "results.json", "w") as fh:
        fh.write(report.to_json({name: cols for name, _, cols in _CSV_FILES}))
    files.append("results.json")
    for name, key, cols in _CSV_FILES:
        write_csv(directory / name, report.table(key), cols)
        files.append(name)
    with open(directory / "summary.txt", "w") as fh:
        fh.write(summary_text(report) + "\n")
    files.append("summary.txt")
    if plots:
        from theory.verify import plots as report_plots

        files += report_plots.plot_report(report, directory)
    return files


def write_report(
    report: VerifyReport, out: str | os.PathLike[str], *, plots: bool = True
) -> list[str]:
    """Write the report directory ``out`` atomically; returns the file names written."""
    with AtomicDirectory(out) as tmp:
        return write_report_files(report, tmp, plots=plots)

"""Figure ``theory``: the plots of a ``palsgd verify`` report, redrawn from its CSV files.

The panels are the verifier's own (:mod:`theory.verify.plots`,
:mod:`theory.verify.plots_exact`), written into ``OUT/theory/``: per-term tightness, bound
vs measured, rates in ``T``, consensus error vs ``H``, and exact quadratic curves of the
expected loss gap vs the Monte-Carlo mean. ``OUT/theory.json`` holds the data drawn.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from core.errors import UserInputError
from core.io import atomic_write_json
from paper_figures.figures.common import FigureOutput
from theory.verify.plots import (
    plot_consensus,
    plot_exact_vs_mc,
    plot_measured_vs_bound,
    plot_rates,
)
from theory.verify.plots_exact import plot_tightness

__all__ = ["theory"]

#: the verdicts of a tested configuration (results.csv)
_VERDICTS = ("holds", "inconclusive", "violated", "outside conditions")
#: the metric of the exact-vs-Monte-Carlo panel
_METRIC = "loss_gap"
#: columns of the report's CSV files that hold names, never numbers
_TEXT = frozenset(
    ("bound", "term", "label", "algorithm", "problem", "verdict", "rate_verdict", "status")
    + ("metric", "step_rule", "note", "command", "kind", "control", "designs")
)


def _cell(column: str, text: str) -> Any:
    """A CSV cell as written by :func:`core.io.write_csv`: ``""`` -> None, numbers
    (``"inf"`` included) -> int or float, names and anything else the string."""
    if text == "":
        return None
    if column in _TEXT:
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _read_csv(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [{k: _cell(k, v) for k, v in row.items()} for row in csv.DictReader(fh)]


def theory(report_dir: str | Path, out: str | Path) -> FigureOutput:
    """Figure: the theory checks of a ``palsgd verify`` report directory.

    Drawn by the verifier's plot functions into ``out/theory/``: ``tightness`` (exact
    per-term ratios), ``measured_vs_bound`` (measured ``(1/T) sum_t E||grad f||^2`` with
    confidence bounds against the bound, log-log, ``y = x``: points above violate),
    ``rates`` (measured value and bound against ``T`` per bound), ``consensus_vs_H`` and
    ``exact_vs_mc`` (exact expected loss gap on a quadratic, :mod:`theory.moments`,
    against the Monte-Carlo mean).
    """
    rd = Path(report_dir)
    if not (rd / "results.json").is_file():
        raise UserInputError(f"'{rd}' is not a palsgd verify report (no results.json)")
    out = Path(out)
    res = FigureOutput("theory")
    results = _read_csv(rd / "results.csv")
    rates = _read_csv(rd / "rates.csv")
    consensus = _read_csv(rd / "consensus.csv")
    exact = [r for r in _read_csv(rd / "exact_vs_mc.csv") if r.get("metric") == _METRIC]
    tightness = _read_csv(rd / "tightness.csv")
    tested = [r for r in results if r.get("verdict") in _VERDICTS]
    panels = out / "theory"
    panels.mkdir(parents=True, exist_ok=True)
    files = plot_tightness(tightness, panels)
    files += plot_measured_vs_bound(tested, panels)
    files += plot_rates(rates, panels)
    files += plot_consensus(consensus, panels)
    files += plot_exact_vs_mc(exact, panels, metric=_METRIC)
    res.files += [f"{panels.name}/{f}" for f in files]
    counts: dict[str, int] = {}
    for r in results:
        counts[r.get("verdict") or ""] = counts.get(r.get("verdict") or "", 0) + 1
    meta = {
        "report": str(rd.resolve()),
        "verdict_counts": counts,
        "measured_vs_bound": tested,
        "rates": rates,
        "consensus": consensus,
        "exact_vs_mc": exact,
        "tightness": tightness,
    }
    res.data_files.append(atomic_write_json(out / "theory.json", meta).name)
    res.summary = {"verdict_counts": counts}
    if counts.get("violated"):
        res.notes.append(f"{counts['violated']} configuration(s) violate their bound")
    return res

"""The class stage's report: the columns of ``class.csv`` and ``class_designs.csv`` and the
summary's lines (:mod:`theory.verify.classstage` computes the rows)."""

from __future__ import annotations

from collections.abc import Sequence

from theory.verify.classstage import KS
from theory.verify.records import Row
from theory.worstcase.judge import CERTIFIED, EXCEEDED, REFUTED

__all__ = ["CLASS_COLUMNS", "CLASS_DESIGN_COLUMNS", "class_lines"]

#: columns of ``class.csv`` (one row per bound) and ``class_designs.csv`` (one per design)
CLASS_COLUMNS = (
    "bound", "kind", "verdict", "designs", "inside", "certified", "exceeded", "refuted",
    "class_tightness", "relaxation", "note", "elapsed_s",
)  # fmt: skip
CLASS_DESIGN_COLUMNS = (
    "bound", "kind", "verdict", "bound_value", "class_value", "tightness", "relaxation",
    "lifted", "dual_residual", "status", "elapsed_s", "design",
)  # fmt: skip


def class_lines(results: Sequence[Row]) -> list[str]:
    """The summary's lines on the class stage (one per bound it judged)."""
    judged = [r for r in results if r["designs"]]
    if not results:
        return []
    counts = {v: sum(r["verdict"] == v for r in judged) for v in (CERTIFIED, EXCEEDED, REFUTED)}
    lines = [
        f"class stage (worst case over every L-smooth problem of the class, sigma = 0, "
        f"compact relaxation at K = 2 judged at K in {list(KS)}): {len(judged)} bound(s) "
        f"judged, {counts[CERTIFIED]} certified at every design, {counts[EXCEEDED]} exceeded on "
        f"the relaxed class only, {counts[REFUTED]} refuted by an explicit instance",
        "  class tightness = class worst case / bound (1: some problem of the class attains it)",
    ]
    for r in results:
        t = "-" if r["class_tightness"] is None else f"{r['class_tightness']:.3g}"
        lines.append(f"  {r['bound']}: {r['verdict']}, {r['designs']} design(s), class tightness "
                     f"{t}; {r['note']}")  # fmt: skip
    return lines

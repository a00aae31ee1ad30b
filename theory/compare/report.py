"""The plain-text summary of a map (what ``palsgd map`` prints and writes to summary.txt)."""

from __future__ import annotations

import math

from theory.compare.methods import BASELINES, PALSGD_METHODS
from theory.compare.records import MEASURED_AT, MapResult
from theory.compare.summary_records import Fewest, GroupSummary, MapSummary, Verdicts

__all__ = ["format_summary"]

#: the header of the per-group table
_TABLE = "zeta    eps      budget  largest H: baseline / PALSGD   wins  ratio min / median / max"
_CRITERION = {
    "sustained": "sustained (the value stays <= eps from the counted round on)",
    "first": "first passage (the first round the value is <= eps)",
}


def _other_lines(s: MapSummary) -> list[str]:
    """The verdicts under the other criterion, where they differ."""
    other = "first" if s.criterion == "sustained" else "sustained"
    out = []
    for who, v, ov in (
        ("PALSGD", s.verdicts, s.other_verdicts),
        ("PALSGD, shared coins", s.shared_verdicts, s.other_shared_verdicts),
    ):
        if ov is not None and ov != v:
            out.append(f"  under {other}: " + _verdict_line(who, ov))
    return out  # fmt: skip


def _fewest_lines(rows: tuple[Fewest, ...]) -> list[str]:
    """The sync question: each method's fewest rounds to eps at any H (and that H)."""
    if not rows:
        return []
    methods = list(dict.fromkeys(r.method for r in rows))
    out = [
        "",
        "fewest rounds to eps at any H of the grid (rounds@H; cost at that H in the budget):",
        (f"{'zeta':<7} {'eps':<8} {'budget':<7} " + " ".join(f"{m:<18}" for m in methods)).rstrip(),
    ]
    by: dict[tuple, dict[str, Fewest]] = {}
    for r in rows:
        by.setdefault((r.zeta, r.eps, r.budget), {})[r.method] = r
    for (zeta, eps, budget), per in by.items():
        cells = []
        for m in methods:
            f = per.get(m)
            text = "-" if not f or f.rounds is None else f"{f.rounds}@{f.H} ({_fmt(f.cost)})"
            cells.append(f"{text:<18}")
        z = "own" if zeta is None else _fmt(zeta)
        out.append((f"{z:<7} {_fmt(eps):<8} {budget:<7} " + " ".join(cells)).rstrip())
    return out


def _fmt(x: float | str | None, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return format(x, spec) if isinstance(x, float) else str(x)


def _group_line(g: GroupSummary) -> str:
    """One ``(zeta, eps, budget)``: the largest ``H`` of each side, PALSGD's wins, the
    ratio's range."""
    lh = g.largest_H.methods
    base = max((v for k, v in lh.items() if k in BASELINES and v), default=None)
    pal = max((v for k, v in lh.items() if k in PALSGD_METHODS and v), default=None)
    r = g.ratio
    z = "own" if g.zeta is None else _fmt(g.zeta)
    return (
        f"{z:<7} {_fmt(g.eps):<8} {g.budget:<7} {_fmt(base):>9} / {_fmt(pal):<15}"
        f"{len(g.wins):>4}   {_fmt(r.min)} / {_fmt(r.median)} / {_fmt(r.max)}"
    )


def _tuning_lines(s: MapSummary, engine: str) -> list[str]:
    """The tuned optima still on a grid edge, and the precision guard's counts (exact)."""
    tn = s.tuning
    if not tn:
        return []
    edge = sum(v.on_edge for v in tn.values())
    total = sum(v.results for v in tn.values())
    refused = sum(v.refused for v in tn.values())
    rechecked = sum(v.rechecked for v in tn.values())
    per = ", ".join(f"{k} {v.on_edge}" for k, v in tn.items() if v.on_edge)
    guard = (
        f"; precision guard: {rechecked} optima confirmed in long double, {refused} "
        "configurations refused"
        if engine == "exact"
        else ""
    )
    return [
        "",
        f"tuning: {edge} of {total} tuned optima still on a grid edge at its cap"
        + (f" ({per})" if per else "")
        + guard,
    ]


def _agreement_lines(s: MapSummary) -> list[str]:
    """The bound map scored against the truth, when scored."""
    ag = s.agreement_dict
    if not ag:
        return []
    return [
        "",
        f"bound map vs truth: winner agreement {_fmt(ag['winner_agreement'])}, Spearman "
        f"{_fmt(ag['spearman_log_ratio'])} over {ag['cells']} cells; the bounds call "
        f"PALSGD cheaper in {ag['palsgd_wins_bounds']} cells, the truth in "
        f"{ag['palsgd_wins_truth']}; bound wins the truth contradicts: "
        f"{ag['bound_wins_contradicted']}",
    ]


def format_summary(result: MapResult) -> str:
    """A short report: what was compared, then per ``(zeta, eps, budget)`` the largest ``H``
    each method still reaches ``eps`` at, PALSGD's wins and the ratio's range, and the
    agreement of the bound map with the truth."""
    s = result.summary
    head = [
        f"palsgd map ({result.engine}): {len(result.cells) if s is None else s.cells} cells, "
        f"{result.elapsed_s:.1f} s",
        f"measured: {MEASURED_AT}",
        "ratio = best PALSGD cost / best baseline cost (minibatch SGD, Local SGD, DiLoCo); "
        "< 1: the pull pays",
    ]
    if s is None:  # a result without its summary: nothing decided
        return "\n".join([*head, f"criterion: {_CRITERION['first']}",
                          "PALSGD cheaper in 0 of 0 cells", "", _TABLE])  # fmt: skip
    lines = [
        *head,
        f"criterion: {_CRITERION.get(s.criterion or 'first', s.criterion)}",
        _verdict_line("PALSGD", s.verdicts),
        *(
            [_verdict_line("PALSGD, shared coins", s.shared_verdicts)]
            if s.shared_verdicts is not None
            else []
        ),
        *_other_lines(s),
        "",
        _TABLE,
        *(_group_line(g) for g in s.groups),
    ]
    lines += _fewest_lines(s.fewest_rounds)
    lines += _tuning_lines(s, result.engine)
    if s.start_meets_eps:
        lines.append(
            f"{s.start_meets_eps} cells: the start already meets eps (0 rounds for every method)"
        )
    lines += _agreement_lines(s)
    return "\n".join(lines)


def _verdict_line(who: str, v: Verdicts) -> str:
    """``who``'s wins and losses against the best baseline, with the undecided cells."""
    line = f"{who} cheaper in {v.palsgd} of {v.decided} decided cells, dearer in {v.baseline}"
    if v.tie:
        line += f", tied in {v.tie}"
    if v.undecided:
        line += f"; {v.undecided} undecided (the 99% cost intervals overlap)"
    if v.neither:
        line += f"; {v.neither} where no method reaches eps"
    return line

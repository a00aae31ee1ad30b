"""The plain-text summary of a map (what ``palsgd map`` prints and writes to summary.txt)."""

from __future__ import annotations

import math
from typing import Any

from theory.compare.methods import BASELINES, PALSGD_METHODS
from theory.compare.records import MEASURED_AT, MapResult

__all__ = ["format_summary"]

_CRITERION = {
    "sustained": "sustained (the value stays <= eps from the counted round on)",
    "first": "first passage (the first round the value is <= eps)",
}


def _other_lines(s: dict[str, Any]) -> list[str]:
    """The verdicts under the other criterion, where they differ."""
    other = "first" if s.get("criterion") == "sustained" else "sustained"
    out = []
    for who, key, okey in (
        ("PALSGD", "verdicts", "other_verdicts"),
        ("PALSGD, shared coins", "shared_verdicts", "other_shared_verdicts"),
    ):
        if s.get(okey) and s[okey] != s.get(key):
            out.append(f"  under {other}: " + _verdict_line(who, s[okey], s))
    return out  # fmt: skip


def _fewest_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The sync question: each method's fewest rounds to eps at any H (and that H)."""
    if not rows:
        return []
    methods = list(dict.fromkeys(r["method"] for r in rows))
    out = [
        "",
        "fewest rounds to eps at any H of the grid (rounds@H; cost at that H in the budget):",
        (f"{'zeta':<7} {'eps':<8} {'budget':<7} " + " ".join(f"{m:<18}" for m in methods)).rstrip(),
    ]
    by: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["zeta"], r["eps"], r["budget"]), {})[r["method"]] = r
    for (zeta, eps, budget), per in by.items():
        cells = []
        for m in methods:
            r = per.get(m)
            text = "-" if not r or r["rounds"] is None else (
                f"{r['rounds']}@{r['H']} ({_fmt(r['cost'])})"
            )  # fmt: skip
            cells.append(f"{text:<18}")
        z = "own" if zeta is None else _fmt(zeta)
        out.append((f"{z:<7} {_fmt(eps):<8} {budget:<7} " + " ".join(cells)).rstrip())
    return out


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    if isinstance(x, int) and not isinstance(x, bool):
        return str(x)
    return format(x, spec) if isinstance(x, float) else str(x)


def format_summary(result: MapResult) -> str:
    """A short report: what was compared, then per ``(zeta, eps, budget)`` the largest ``H``
    each method still reaches ``eps`` at, PALSGD's wins and the ratio's range, and the
    agreement of the bound map with the truth."""
    s = result.summary
    lines = [
        f"palsgd map ({result.engine}): {s.get('cells', len(result.cells))} cells, "
        f"{result.elapsed_s:.1f} s",
        f"measured: {MEASURED_AT}",
        "ratio = best PALSGD cost / best baseline cost (minibatch SGD, Local SGD, DiLoCo); "
        "< 1: the pull pays",
        f"criterion: {_CRITERION.get(s.get('criterion', 'first'), s.get('criterion'))}",
        _verdict_line("PALSGD", s.get("verdicts"), s),
        *(
            [_verdict_line("PALSGD, shared coins", s["shared_verdicts"], s)]
            if s.get("shared_verdicts")
            else []
        ),
        *_other_lines(s),
        "",
        "zeta    eps      budget  largest H: baseline / PALSGD   wins  ratio min / median / max",
    ]
    for g in s.get("groups", []):
        lh = g["largest_H"]
        base = max((v for k, v in lh.items() if k in BASELINES and v), default=None)
        pal = max((v for k, v in lh.items() if k in PALSGD_METHODS and v), default=None)
        r = g["ratio"]
        z = "own" if g["zeta"] is None else _fmt(g["zeta"])
        lines.append(
            f"{z:<7} {_fmt(g['eps']):<8} {g['budget']:<7} {_fmt(base):>9} / {_fmt(pal):<15}"
            f"{len(g['wins']):>4}   {_fmt(r.get('min'))} / {_fmt(r.get('median'))} / {_fmt(r.get('max'))}"
        )
    lines += _fewest_lines(s.get("fewest_rounds", []))
    tn = s.get("tuning")
    if tn:
        edge = sum(v["on_edge"] for v in tn.values())
        total = sum(v["results"] for v in tn.values())
        refused = sum(v["refused"] for v in tn.values())
        rechecked = sum(v["rechecked"] for v in tn.values())
        per = ", ".join(f"{k} {v['on_edge']}" for k, v in tn.items() if v["on_edge"])
        guard = (
            f"; precision guard: {rechecked} optima confirmed in long double, {refused} "
            "configurations refused"
            if result.engine == "exact"
            else ""
        )
        lines += [
            "",
            f"tuning: {edge} of {total} tuned optima still on a grid edge at its cap"
            + (f" ({per})" if per else "")
            + guard,
        ]
    if s.get("start_meets_eps"):
        lines.append(
            f"{s['start_meets_eps']} cells: the start already meets eps (0 rounds for every method)"
        )
    ag = s.get("agreement")
    if ag:
        lines += [
            "",
            f"bound map vs truth: winner agreement {_fmt(ag['winner_agreement'])}, Spearman "
            f"{_fmt(ag['spearman_log_ratio'])} over {ag['cells']} cells; the bounds call "
            f"PALSGD cheaper in {ag['palsgd_wins_bounds']} cells, the truth in "
            f"{ag['palsgd_wins_truth']}; bound wins the truth contradicts: "
            f"{ag['bound_wins_contradicted']}",
        ]
    return "\n".join(lines)


def _verdict_line(who: str, v: dict[str, int] | None, s: dict[str, Any]) -> str:
    """``who``'s wins and losses against the best baseline, with the undecided cells."""
    if v is None:  # a summary written before the verdicts were recorded
        return f"{who} cheaper in {s.get('palsgd_wins', 0)} of {s.get('decided', 0)} cells"
    decided = v["palsgd"] + v["baseline"] + v["tie"]
    line = f"{who} cheaper in {v['palsgd']} of {decided} decided cells, dearer in {v['baseline']}"
    if v["tie"]:
        line += f", tied in {v['tie']}"
    if v["undecided"]:
        line += f"; {v['undecided']} undecided (the 99% cost intervals overlap)"
    if v["neither"]:
        line += f"; {v['neither']} where no method reaches eps"
    return line

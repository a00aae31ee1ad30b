"""The tables of ``docs/when_pulling_pays.md`` section 3 from a map's ``map.json``.

Reads the JSON ``palsgd map --out DIR`` wrote and prints, as Markdown: the verdict counts
(PALSGD cheaper / dearer / tied) for both coin models under both criteria (the map tunes
both; the other is kept beside in ``other_cost``); the ratio table (best PALSGD with
independent coins over the best baseline, min / median / max per ``zeta`` and budget,
"never" where PALSGD reaches eps in no cell of the group); and the fewest-syncs table
(``summary.fewest_rounds``: each method's fewest rounds to the smallest eps at any ``H``, on
the rounds budget); and the map's step ratio (:func:`theory.compare.steps.step_ratio`).

    python benchmarks/map_study_tables.py reports/map-d10/map.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from core.options import declare, option

INDEPENDENT = ("palsgd", "palsgd_nesterov")
SHARED = ("palsgd_shared",)
BASELINES = ("sgd", "local_sgd", "diloco")
ORDER = ("sgd", "local_sgd", "diloco", "palsgd", "palsgd_nesterov", "palsgd_shared")


def _best(cost: dict[str, float | None], names: tuple[str, ...]) -> float | None:
    vals = [cost[n] for n in names if cost.get(n) is not None]
    return min(vals) if vals else None


def verdict(cost: dict[str, float | None], names: tuple[str, ...]) -> str:
    """``cheaper`` / ``dearer`` / ``tied`` / ``neither`` of the best of ``names`` against the
    best baseline in one cell (exact costs: ties are equal numbers)."""
    mine, base = _best(cost, names), _best(cost, BASELINES)
    if mine is None and base is None:
        return "neither"
    if mine is None or (base is not None and mine > base * (1 + 1e-12)):
        return "dearer"
    if base is None or mine < base * (1 - 1e-12):
        return "cheaper"
    return "tied"


def counts(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per criterion and coin model: the verdict counts over the cells."""
    rows = []
    for crit_key, label in (("cost", cells[0]["criterion"]), ("other_cost", "other")):
        if label == "other":
            label = "first" if cells[0]["criterion"] == "sustained" else "sustained"
        for coins, names in (("independent", INDEPENDENT), ("shared", SHARED)):
            c = Counter(verdict(x[crit_key], names) for x in cells)
            rows.append({"criterion": label, "coins": coins, **{k: c.get(k, 0) for k in
                         ("cheaper", "dearer", "tied", "neither")}})  # fmt: skip
    return rows


def ratios(cells: list[dict[str, Any]], key: str = "cost") -> list[dict[str, Any]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for x in cells:
        mine, base = _best(x[key], INDEPENDENT), _best(x[key], BASELINES)
        if base is not None:
            groups[x["zeta"], x["budget"]].append(math.inf if mine is None else mine / base)
    rows = []
    for (z, b), r in sorted(groups.items()):
        fin = [v for v in r if math.isfinite(v)]
        rows.append({"zeta": z, "budget": b, "min": min(fin) if fin else None,
                     "median": float(np.median(r)), "max": max(r),
                     "unreached": sum(math.isinf(v) for v in r)})  # fmt: skip
    return rows


def fewest(summary: dict[str, Any], eps: float, budget: str = "rounds") -> list[dict[str, Any]]:
    """Per ``zeta``: each method's fewest rounds to ``eps`` at any ``H`` (``rounds@H``)."""
    rows: dict[Any, dict[str, Any]] = {}
    for f in summary["fewest_rounds"]:
        if f["eps"] == eps and f["budget"] == budget:
            r = rows.setdefault(f["zeta"], {"zeta": f["zeta"]})
            r[f["method"]] = "never" if f["rounds"] is None else f"{f['rounds']}@{f['H']}"
    return list(rows.values())


def per_H(cells: list[dict[str, Any]], eps: float, key: str = "cost") -> list[dict[str, Any]]:
    """Per ``zeta`` and ``H`` on the rounds budget at ``eps``: PALSGD's fewest rounds (either
    outer family, independent coins, best ``eta`` and ``p``) / the Local SGD family's."""
    best: dict[tuple, list[float]] = defaultdict(lambda: [math.inf, math.inf])
    for x in cells:
        if x["budget"] != "rounds" or x["eps"] != eps:
            continue
        b = best[x["zeta"], x["H"]]
        rounds = x["rounds"] if key == "cost" else x["other_rounds"]
        for i, names in enumerate((INDEPENDENT, ("local_sgd", "diloco"))):
            for n in names:
                if rounds.get(n) is not None:
                    b[i] = min(b[i], rounds[n])
    rows: dict[Any, dict[str, Any]] = {}
    for (z, H), (a, b) in sorted(best.items()):
        rows.setdefault(z, {"zeta": z})[f"H = {H}"] = f"{_g(float(a))} / {_g(float(b))}"
    return list(rows.values())


def _g(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "never" if math.isinf(x) else f"{x:.3g}"
    return str(x)


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_g(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(out)


#: the command's options (:func:`core.options.declare`)
OPTIONS = (option("map_json", type=Path),)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    declare(ap, OPTIONS)
    args = ap.parse_args(argv)
    data = json.loads(args.map_json.read_text())
    cells = data["cells"]
    print(f"{len(cells)} cells, criterion {cells[0]['criterion']}, {data['elapsed_s']:.1f} s\n")
    print(_table(counts(cells), ["criterion", "coins", "cheaper", "dearer", "tied", "neither"]))
    for key in ("cost", "other_cost"):
        print(f"\nratio best PALSGD (independent coins) / best baseline ({key}):")
        print(_table(ratios(cells, key), ["zeta", "budget", "min", "median", "max", "unreached"]))
    eps = min(c["eps"] for c in cells)
    rows = fewest(data["summary"], eps)
    if rows:
        print(f"\nfewest rounds to eps = {eps:g} at any H (rounds budget, rounds@H):")
        print(_table(rows, ["zeta", *[m for m in ORDER if m in rows[0]]]))
    for key in ("cost", "other_cost"):
        rows = per_H(cells, eps, key)
        print(f"\nrounds to eps = {eps:g} per H, PALSGD / Local SGD family ({key}):")
        print(_table(rows, list(rows[0])))
    from types import SimpleNamespace

    from empirical.cost.mechanisms import format_mechanisms
    from theory.compare.steps import step_ratio

    measured = step_ratio(SimpleNamespace(cells=[SimpleNamespace(**c) for c in cells]), "rounds")
    print()
    print(format_mechanisms(measured))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

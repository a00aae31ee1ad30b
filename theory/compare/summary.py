"""The paper's question answered from a map: where PALSGD wins, by how much, and why.

:func:`summarize` reads the cells of a :class:`~theory.compare.records.MapResult` and gives,
per ``(zeta, eps, budget)``:

* ``largest_H``: for each method the largest ``H`` of the grid at which it still reaches
  ``eps`` within the budget (PALSGD: at its best ``(eta, p)``, and per ``(eta, p)``);
* ``wins`` and ``losses``: the cells where the best PALSGD is cheaper (dearer) than the best
  baseline, with the ratio's range; ``verdicts``: how many cells PALSGD wins, loses, ties,
  leaves undecided (Monte Carlo: the cost intervals overlap) or where no method reaches
  ``eps``; ``shared_verdicts``: the same for PALSGD with the authors' shared coins;
* ``why``: at the cell where PALSGD comes closest (or wins by most), the long-run picture of
  both tuned methods (:func:`theory.compare.diagnose.diagnose`): progress per step, the
  floor split into drift bias, coin variance and noise, the consensus error.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from theory.compare.diagnose import diagnose
from theory.compare.exact import Quadratic
from theory.compare.methods import METHODS, PALSGD_METHODS
from theory.compare.records import BASELINE_SIDE, PALSGD_SIDE, CellResult

__all__ = ["summarize", "largest_H"]


def largest_H(cells: list[CellResult], method: str) -> int | None:
    """The largest ``H`` among ``cells`` at which ``method`` reaches the target in budget."""
    Hs = [c.H for c in cells if c.cost.get(method) is not None]
    return max(Hs) if Hs else None


def _stats(ratios: list[float]) -> dict[str, Any]:
    finite = [r for r in ratios if math.isfinite(r)]
    out: dict[str, Any] = {"cells": len(ratios)}
    if finite:
        out.update(min=min(finite), median=float(np.median(finite)), max=max(finite))
    out["unreached_by_palsgd"] = sum(1 for r in ratios if math.isinf(r))
    return out


def _why(c: CellResult, q: Quadratic) -> dict[str, Any]:
    out = {"cell": {"H": c.H, "eta": c.eta, "p": c.p, "zeta": c.zeta, "eps": c.eps}}
    for side, (name, _) in ((PALSGD_SIDE, c.best_palsgd), (BASELINE_SIDE, c.best_baseline)):
        if name is None:
            continue
        t = c.tuned[name]
        d = diagnose(
            q, METHODS[name], H=c.H, eta=c.eta, p=c.p, alpha=t["alpha"], gamma=t["gamma"],
            mu=t["mu"],
        )  # fmt: skip
        out[side] = {"method": name, "alpha": t["alpha"], "gamma": t["gamma"], **d.to_dict()}
    return out


def summarize(
    cells: list[CellResult], quadratics: dict[Any, Quadratic] | None = None
) -> dict[str, Any]:
    """The summary of the module docstring; ``quadratics`` (per ``zeta``) enables ``why``."""
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[c.zeta, c.eps, c.budget].append(c)
    out = []
    for (zeta, eps, budget), cs in groups.items():
        methods = list(cs[0].cost)
        entry: dict[str, Any] = {"zeta": zeta, "eps": eps, "budget": budget, "B": cs[0].B}
        lh = {m: largest_H(cs, m) for m in methods if m not in PALSGD_METHODS}
        for m in methods:
            if m in PALSGD_METHODS:
                lh[m] = largest_H(cs, m)
                lh[m + "_per_pull"] = {
                    f"eta={eta:g},p={p:g}": largest_H(
                        [c for c in cs if (c.eta, c.p) == (eta, p)], m
                    )
                    for eta, p in sorted({(c.eta, c.p) for c in cs})
                }
        entry["largest_H"] = lh
        ratios = [c.ratio for c in cs if c.ratio is not None]
        wins = [c for c in cs if c.winner == PALSGD_SIDE]
        entry["wins"] = [
            {"H": c.H, "eta": c.eta, "p": c.p, "ratio": c.ratio, PALSGD_SIDE: c.best_palsgd[0],
             BASELINE_SIDE: c.best_baseline[0]}
            for c in wins
        ]  # fmt: skip
        entry["losses"] = _stats([r for r in ratios if r > 1])
        entry["verdicts"] = _verdicts(c.winner for c in cs)
        shared = [c.shared_winner for c in cs if c.shared_winner is not None]
        if shared:
            entry["shared_verdicts"] = _verdicts(shared)
        entry["ratio"] = _stats(ratios)
        if quadratics is not None and ratios:
            decided = [c for c in cs if c.ratio is not None and math.isfinite(c.ratio)]
            if decided:
                best = min(decided, key=lambda c: c.ratio)
                entry["why"] = _why(best, quadratics[zeta])
        out.append(entry)
    wins_total = sum(len(e["wins"]) for e in out)
    verdicts = _verdicts(c.winner for c in cells)
    out_all: dict[str, Any] = {
        "groups": out,
        "palsgd_wins": wins_total,
        "cells": len(cells),
        "decided": verdicts[PALSGD_SIDE] + verdicts[BASELINE_SIDE] + verdicts["tie"],
        "verdicts": verdicts,
    }
    shared = [c.shared_winner for c in cells if c.shared_winner is not None]
    if shared:
        out_all["shared_verdicts"] = _verdicts(shared)
    return out_all


def _verdicts(winners: Any) -> dict[str, int]:
    """How many cells each verdict of :attr:`CellResult.winner` got."""
    counts = dict.fromkeys((PALSGD_SIDE, BASELINE_SIDE, "tie", "undecided", "neither"), 0)
    for w in winners:
        counts[w] += 1
    return counts

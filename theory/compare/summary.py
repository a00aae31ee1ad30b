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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from theory.compare.diagnose import diagnose
from theory.compare.exact import Quadratic
from theory.compare.methods import METHODS, PALSGD_METHODS
from theory.compare.records import BASELINE_SIDE, PALSGD_SIDE, CellResult

__all__ = ["summarize", "largest_H", "tuning_counts", "fewest_rounds", "Fewest"]


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
        if any(c.other_cost for c in cs):
            entry["other_verdicts"] = _verdicts(c.other_winner for c in cs)
        shared = [c.shared_winner for c in cs if c.shared_winner is not None]
        if shared:
            entry["shared_verdicts"] = _verdicts(shared)
        entry["ratio"] = _stats(ratios)
        if quadratics is not None and ratios:
            decided = [
                c
                for c in cs
                if c.ratio is not None and math.isfinite(c.ratio) and c.best_baseline[1] > 0
            ]  # fmt: skip (a 0-round answer has nothing to diagnose)
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
    if cells:
        out_all["criterion"] = cells[0].criterion
    other = [c.other_winner for c in cells if c.other_winner is not None]
    if other:
        out_all["other_verdicts"] = _verdicts(other)
        o_shared = [c.other_shared_winner for c in cells if c.other_shared_winner is not None]
        if o_shared:
            out_all["other_shared_verdicts"] = _verdicts(o_shared)
    out_all["start_meets_eps"] = sum(
        1 for c in cells if c.rounds and all(r == 0 for r in c.rounds.values())
    )
    out_all["tuning"] = tuning_counts(cells)
    out_all["fewest_rounds"] = [f.to_dict() for f in fewest_rounds(cells)]
    return out_all


def _verdicts(winners: Any) -> dict[str, int]:
    """How many cells each verdict of :attr:`CellResult.winner` got."""
    counts = dict.fromkeys((PALSGD_SIDE, BASELINE_SIDE, "tie", "undecided", "neither"), 0)
    for w in winners:
        counts[w] += 1
    return counts


def tuning_counts(cells: list[CellResult]) -> dict[str, Any]:
    """Per method, over its distinct tuned results (one per unit cell and target): how many,
    how many still sit on an extendable edge after every extension (``on_edge``: the
    lowest inner step, or the lowest or highest outer rate at the cap), and the
    configurations the precision guard refused and the optima it confirmed (per cell)."""
    seen: dict[tuple, dict[str, Any]] = {}
    for c in cells:
        for name, t in c.tuned.items():
            m = METHODS[name]
            key = (name, c.zeta, c.H if m.local else 1, (c.eta, c.p) if m.pulls else None, c.eps)
            seen[key] = t
    out: dict[str, dict[str, int]] = {}
    counted: set[tuple] = set()  # the guard's counts are per cell of a unit, not per target
    for (name, *unit, _), t in seen.items():
        o = out.setdefault(name, dict(results=0, on_edge=0, refused=0, rechecked=0))
        o["results"] += 1
        reached = t.get("rounds") is not None
        edge = t.get("alpha_edge") == "lower" or t.get("gamma_edge", "interior") != "interior"
        o["on_edge"] += int(reached and edge)
        if (name, *unit) not in counted:
            counted.add((name, *unit))
            o["refused"] += int(t.get("refused", 0))
            o["rechecked"] += int(t.get("rechecked", 0))
    return out


@dataclass(frozen=True)
class Fewest:
    """The sync question of one ``(zeta, eps, budget)``: ``method``'s fewest rounds to eps
    within the budget over every ``H`` of the grid (PALSGD: and every ``(eta, p)``), the
    cell that gives them, and its cost there in the budget (``None`` everywhere: never)."""

    zeta: float | None
    eps: float
    budget: str
    method: str
    rounds: int | None
    H: int | None = None
    eta: float | None = None
    p: float | None = None
    cost: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fewest_rounds(cells: list[CellResult]) -> list[Fewest]:
    """:class:`Fewest` of every method in every ``(zeta, eps, budget)`` (ties: the cheaper
    cell in the budget, then the larger ``H``)."""
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[c.zeta, c.eps, c.budget].append(c)
    out = []
    for (zeta, eps, budget), cs in groups.items():
        for name in cs[0].cost:
            pulls = METHODS[name].pulls
            cand = [c for c in cs if c.cost.get(name) is not None]
            if not cand:
                out.append(Fewest(zeta, eps, budget, name, None))
                continue
            b = min(cand, key=lambda c: (_or_inf(c.rounds.get(name)), c.cost[name], -c.H))
            H = b.H if METHODS[name].local else 1  # minibatch SGD: every step a sync
            out.append(Fewest(zeta, eps, budget, name, b.rounds.get(name), H,
                              b.eta if pulls else None, b.p if pulls else None,
                              b.cost[name]))  # fmt: skip
    return out


def _or_inf(x: float | None) -> float:
    return math.inf if x is None else x

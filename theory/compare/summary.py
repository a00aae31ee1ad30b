"""The paper's question answered from a map: where PALSGD wins, by how much, and why.

:func:`summarize` reads the cells of a :class:`~theory.compare.records.MapResult` and gives a
:class:`~theory.compare.summary_records.MapSummary` with, per ``(zeta, eps, budget)``:

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
from collections.abc import Iterable, Mapping

import numpy as np

from theory.compare.diagnose import diagnose
from theory.compare.exact import Quadratic
from theory.compare.methods import METHODS, PALSGD_METHODS
from theory.compare.records import BASELINE_SIDE, PALSGD_SIDE, CellResult
from theory.compare.summary_records import (
    Fewest,
    GroupSummary,
    LargestH,
    MapSummary,
    RatioStats,
    SideDiagnosis,
    TuningCount,
    Verdicts,
    Why,
    WhyCell,
    Win,
)

__all__ = ["summarize", "largest_H", "tuning_counts", "fewest_rounds", "Fewest", "MapSummary"]


def largest_H(cells: list[CellResult], method: str) -> int | None:
    """The largest ``H`` among ``cells`` at which ``method`` reaches the target in budget."""
    Hs = [c.H for c in cells if c.cost.get(method) is not None]
    return max(Hs) if Hs else None


def _stats(ratios: list[float]) -> RatioStats:
    finite = [r for r in ratios if math.isfinite(r)]
    unreached = sum(1 for r in ratios if math.isinf(r))
    if not finite:
        return RatioStats(cells=len(ratios), unreached_by_palsgd=unreached)
    return RatioStats(
        cells=len(ratios), min=min(finite), median=float(np.median(finite)), max=max(finite),
        unreached_by_palsgd=unreached,
    )  # fmt: skip


def _why(c: CellResult, q: Quadratic) -> Why:
    sides: dict[str, SideDiagnosis] = {}
    for side, (name, _) in ((PALSGD_SIDE, c.best_palsgd), (BASELINE_SIDE, c.best_baseline)):
        if name is None:
            continue
        t = c.tuned[name]
        d = diagnose(
            q, METHODS[name], H=c.H, eta=c.eta, p=c.p, alpha=t["alpha"], gamma=t["gamma"],
            mu=t["mu"],
        )  # fmt: skip
        sides[side] = SideDiagnosis(method=name, alpha=t["alpha"], gamma=t["gamma"], diagnosis=d)
    cell = WhyCell(H=c.H, eta=c.eta, p=c.p, zeta=c.zeta, eps=c.eps)
    return Why(cell=cell, **sides)


def _largest(cs: list[CellResult]) -> LargestH:
    """:class:`LargestH` of one group: the baselines first, then each PALSGD method."""
    methods = list(cs[0].cost)
    lh = {m: largest_H(cs, m) for m in methods if m not in PALSGD_METHODS}
    per_pull: dict[str, dict[tuple[float, float], int | None]] = {}
    pulls = sorted({(c.eta, c.p) for c in cs})
    for m in methods:
        if m in PALSGD_METHODS:
            lh[m] = largest_H(cs, m)
            per_pull[m] = {
                (eta, p): largest_H([c for c in cs if (c.eta, c.p) == (eta, p)], m)
                for eta, p in pulls
            }
    return LargestH(methods=lh, per_pull=per_pull)


def _group(
    zeta: float | None, eps: float, budget: str, cs: list[CellResult], q: Quadratic | None
) -> GroupSummary:
    """:class:`GroupSummary` of the cells ``cs`` of one ``(zeta, eps, budget)`` (``q``: the
    problem, for ``why``)."""
    ratios = [c.ratio for c in cs if c.ratio is not None]
    wins = tuple(
        Win(H=c.H, eta=c.eta, p=c.p, ratio=c.ratio, palsgd=c.best_palsgd[0],
            baseline=c.best_baseline[0])
        for c in cs
        if c.winner == PALSGD_SIDE
    )  # fmt: skip
    shared = [c.shared_winner for c in cs if c.shared_winner is not None]
    why = None
    if q is not None and ratios:
        decided = [
            c
            for c in cs
            if c.ratio is not None and math.isfinite(c.ratio) and c.best_baseline[1] > 0
        ]  # fmt: skip (a 0-round answer has nothing to diagnose)
        if decided:
            why = _why(min(decided, key=lambda c: c.ratio), q)
    return GroupSummary(
        zeta=zeta, eps=eps, budget=budget, B=cs[0].B, largest_H=_largest(cs), wins=wins,
        losses=_stats([r for r in ratios if r > 1]), verdicts=_verdicts(c.winner for c in cs),
        other_verdicts=(
            _verdicts(c.other_winner for c in cs) if any(c.other_cost for c in cs) else None
        ),
        shared_verdicts=_verdicts(shared) if shared else None, ratio=_stats(ratios), why=why,
    )  # fmt: skip


def _groups(cells: list[CellResult]) -> dict[tuple, list[CellResult]]:
    """The cells per ``(zeta, eps, budget)``, in the order they first appear."""
    groups: dict[tuple, list[CellResult]] = defaultdict(list)
    for c in cells:
        groups[c.zeta, c.eps, c.budget].append(c)
    return groups


def summarize(
    cells: list[CellResult], quadratics: Mapping[float | None, Quadratic] | None = None
) -> MapSummary:
    """The summary of the module docstring; ``quadratics`` (per ``zeta``) enables ``why``."""
    groups = tuple(
        _group(zeta, eps, budget, cs, None if quadratics is None else quadratics[zeta])
        for (zeta, eps, budget), cs in _groups(cells).items()
    )
    verdicts = _verdicts(c.winner for c in cells)
    shared = [c.shared_winner for c in cells if c.shared_winner is not None]
    other = [c.other_winner for c in cells if c.other_winner is not None]
    o_shared = [c.other_shared_winner for c in cells if c.other_shared_winner is not None]
    return MapSummary(
        groups=groups,
        palsgd_wins=sum(len(g.wins) for g in groups),
        cells=len(cells),
        decided=verdicts.decided,
        verdicts=verdicts,
        shared_verdicts=_verdicts(shared) if shared else None,
        criterion=cells[0].criterion if cells else None,
        other_verdicts=_verdicts(other) if other else None,
        other_shared_verdicts=_verdicts(o_shared) if other and o_shared else None,
        start_meets_eps=sum(
            1 for c in cells if c.rounds and all(r == 0 for r in c.rounds.values())
        ),
        tuning=tuning_counts(cells),
        fewest_rounds=tuple(fewest_rounds(cells)),
    )


def _verdicts(winners: Iterable[str | None]) -> Verdicts:
    """How many cells each verdict of :attr:`CellResult.winner` got."""
    counts = dict.fromkeys((PALSGD_SIDE, BASELINE_SIDE, "tie", "undecided", "neither"), 0)
    for w in winners:
        counts[w] += 1  # type: ignore[index]  # a winner is never None here
    return Verdicts(**counts)


def tuning_counts(cells: list[CellResult]) -> dict[str, TuningCount]:
    """Per method, over its distinct tuned results (one per unit cell and target): how many,
    how many still sit on an extendable edge after every extension (``on_edge``: the
    lowest inner step, or the lowest or highest outer rate at the cap), and the
    configurations the precision guard refused and the optima it confirmed (per cell)."""
    seen: dict[tuple, Mapping[str, object]] = {}
    for c in cells:
        for name, t in c.tuned.items():
            m = METHODS[name]
            key = (name, c.zeta, c.H if m.local else 1, (c.eta, c.p) if m.pulls else None, c.eps)
            seen[key] = t
    out: dict[str, list[int]] = {}  # results, on_edge, refused, rechecked
    counted: set[tuple] = set()  # the guard's counts are per cell of a unit, not per target
    for (name, *unit, _), t in seen.items():
        o = out.setdefault(name, [0, 0, 0, 0])
        o[0] += 1
        reached = t.get("rounds") is not None
        edge = t.get("alpha_edge") == "lower" or t.get("gamma_edge", "interior") != "interior"
        o[1] += int(reached and edge)
        if (name, *unit) not in counted:
            counted.add((name, *unit))
            o[2] += int(t.get("refused", 0))  # type: ignore[call-overload]
            o[3] += int(t.get("rechecked", 0))  # type: ignore[call-overload]
    return {name: TuningCount(*o) for name, o in out.items()}


def fewest_rounds(cells: list[CellResult]) -> list[Fewest]:
    """:class:`Fewest` of every method in every ``(zeta, eps, budget)`` (ties: the cheaper
    cell in the budget, then the larger ``H``)."""
    out = []
    for (zeta, eps, budget), cs in _groups(cells).items():
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

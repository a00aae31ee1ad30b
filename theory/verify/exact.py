"""Exact verification of one bound on quadratics: designs -> oracle -> search -> verdict.

For a bound whose algorithm has an exact oracle (minibatch SGD, Local SGD, PALSGD, with
outer averaging or outer SGD), :func:`verify_exact` evaluates the term-isolating designs
and a uniform sample of the design box (:mod:`theory.verify.designs`), then climbs
adversarially from the worst of them, once for the whole bound and once per term
(:mod:`theory.verify.search`). No statistics are involved: the measured value is exact, so
one design inside the conditions whose ratio measured/bound exceeds ``1 + REL_TOL`` makes
the bound **violated**. Otherwise the bound is **not shown false** on the designs tried
(which is evidence, not proof). Reported with it: the worst ratio and the command that
reproduces it, each term's tightness (the largest ratio among designs where that term is at
least half of the bound; "untested" when no design got there) and the share of vacuous
designs (bound at least ``2 L F0 + sigma^2 + zeta^2``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from theory.bound import Bound
from theory.verify.designs import isolating, random_points, space_of
from theory.verify.oracle import (
    REL_TOL,
    Evaluation,
    family_of,
    reproduce_command,
)
from theory.verify.records import Row
from theory.verify.search import Pool, climb, evaluate_points, score
from theory.verify.untested import UNTESTED

__all__ = ["Budget", "TermTightness", "ExactResult", "verify_exact", "QUICK_BUDGET"]

HOLDS_EXACT = "not shown false"
VIOLATED = "violated"


@dataclass(frozen=True)
class Budget:
    """Work spent on one bound: ``isolating`` + ``random`` designs, then for the whole bound
    and for each term ``chains`` hill-climbs of ``iters`` iterations with ``batch``
    proposals each."""

    isolating: int = 240
    random: int = 360
    chains: int = 3
    iters: int = 30
    batch: int = 8

    def scaled(self, factor: float) -> Budget:
        return Budget(
            max(8, int(self.isolating * factor)),
            max(8, int(self.random * factor)),
            self.chains,
            max(2, int(self.iters * factor)),
            self.batch,
        )


#: the budget of ``palsgd verify --quick``
QUICK_BUDGET = Budget(isolating=60, random=60, chains=2, iters=6, batch=6)


@dataclass
class TermTightness:
    """One term: ``designs`` where it is at least half of the bound, the largest ratio
    measured/bound among them and the command reproducing it (``status`` "untested" when
    no design reached it)."""

    term: str
    designs: int
    max_ratio: float | None
    status: str
    command: str = ""


@dataclass
class ExactResult:
    """The exact verification of one bound (see the module docstring)."""

    bound: str
    algorithm: str
    coins: str
    verdict: str
    designs: int
    inside: int
    worst_ratio: float | None
    worst_measured: float | None
    worst_bound: float | None
    worst_design: dict[str, float] = field(default_factory=dict)
    worst_command: str = ""
    worst_term: str = ""
    terms: list[TermTightness] = field(default_factory=list)
    vacuous_share: float | None = None
    violations: int = 0
    elapsed_s: float = 0.0

    def to_dict(self) -> Row:
        return asdict(self)


def _seeds(ev: Evaluation, x: np.ndarray, m: np.ndarray, term: int | None, k: int):
    s = score(ev, term)
    order = np.argsort(-np.where(np.isfinite(s), s, -np.inf))
    order = [i for i in order if np.isfinite(s[i])][:k]
    return x[order], m[order]


def verify_exact(
    bound: Bound,
    *,
    budget: Budget | None = None,
    seed: int = 0,
    bound_file: str | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> ExactResult:
    """Verify ``bound`` exactly on quadratics (see the module docstring).

    ``start``: points and masks to evaluate instead of drawing a fresh initial sample
    (the negative controls of a bound reuse their parent's, so every control is tried on
    the same designs and then searched on its own)."""
    t0 = time.perf_counter()
    budget = budget or Budget()
    fam = family_of(bound)
    space = space_of(fam)
    rng = np.random.default_rng(seed)
    if start is None:
        xi, mi = isolating(space, rng, budget.isolating)
        xr, mr = random_points(space, rng, budget.random)
        x, m = np.concatenate([xi, xr]), np.concatenate([mi, mr])
    else:
        x, m = start
    pool = Pool()
    ev0 = evaluate_points(bound, space, x, m)
    pool.add(x, m, ev0)
    n_terms = len(bound.terms)
    seeds_x, seeds_m, seeds_t = [], [], []
    for term in [None, *range(n_terms)] if n_terms > 1 else [None]:
        sx, sm = _seeds(ev0, x, m, term, budget.chains)
        seeds_x.append(sx)
        seeds_m.append(sm)
        seeds_t.append(np.full(len(sx), -1 if term is None else term))
    climb(
        bound, space, np.concatenate(seeds_x), np.concatenate(seeds_m),
        np.concatenate(seeds_t), rng, iters=budget.iters, batch=budget.batch, pool=pool,
    )  # fmt: skip
    _, _, ev = pool.merged()
    return _result(bound, fam, ev, bound_file, time.perf_counter() - t0)


def _result(bound: Bound, fam: Any, ev: Evaluation, bound_file: str | None, dt: float):
    inside = ev.inside
    r = np.where(inside, ev.ratio, -np.inf)
    r = np.where(np.isnan(r), -np.inf, r)
    n_in = int(inside.sum())
    res = ExactResult(
        bound=bound.name,
        algorithm=fam.algorithm,
        coins=fam.coins,
        verdict=HOLDS_EXACT,
        designs=len(ev),
        inside=n_in,
        worst_ratio=None,
        worst_measured=None,
        worst_bound=None,
        elapsed_s=dt,
    )
    labels = [str(t) for t in bound.terms]
    with np.errstate(all="ignore"):
        share = ev.terms / ev.bound[:, None]
    if n_in:
        i = int(np.argmax(r))
        row = ev.row(i)
        res.worst_ratio = float(r[i])
        res.worst_measured = float(ev.measured[i])
        res.worst_bound = float(ev.bound[i])
        res.worst_design = row
        res.worst_command = reproduce_command(bound.name, row, bound_file)
        res.worst_term = labels[int(np.nanargmax(share[i]))] if len(labels) else ""
        res.violations = int(np.sum(r > 1 + REL_TOL))
        res.verdict = VIOLATED if res.violations else HOLDS_EXACT
        res.vacuous_share = float(np.sum(ev.vacuous & inside) / n_in)
    else:  # no design inside its conditions: nothing tested (theory.verify.untested)
        res.verdict = UNTESTED
    for j, label in enumerate(labels):
        dom = inside & (np.nan_to_num(share[:, j]) >= 0.5)
        if not dom.any():
            res.terms.append(TermTightness(label, 0, None, "untested"))
            continue
        rj = np.where(dom, r, -np.inf)
        k = int(np.argmax(rj))
        res.terms.append(
            TermTightness(
                label,
                int(dom.sum()),
                float(rj[k]),
                "tested",
                reproduce_command(bound.name, ev.row(k), bound_file),
            )
        )
    return res

"""Adversarial search: maximise measured/bound inside the bound's conditions.

The objective of a design is its exact ratio measured/bound (:mod:`theory.verify.oracle`);
outside the conditions it is ``-inf``. Term ``i``'s objective is the same ratio, damped by
``min(1, 2 share_i)^4`` where ``share_i`` is the term's fraction of the bound, so that the
search for a term climbs towards designs where that term is at least half of the bound.

:func:`climb` runs seeded parallel hill-climbs (one chain per seed design, ``batch``
Gaussian proposals per chain and iteration in the design box, a random subset of the
coordinates moved, the step shrinking geometrically, plus moves that snap a coordinate to
an end of its range, where extremes are often worst) and keeps every evaluated design in a
:class:`Pool`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from theory.bound import Bound
from theory.verify.designs import HIGH, LOW, Space, clip, decode
from theory.verify.oracle import Evaluation, evaluate

__all__ = ["Pool", "score", "climb", "evaluate_points"]


@dataclass
class Pool:
    """Every design evaluated for one bound: points ``x``, source ``masks`` and their
    :class:`~theory.verify.oracle.Evaluation` batches (concatenated on demand)."""

    xs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    evals: list[Evaluation] = field(default_factory=list)

    def add(self, x: np.ndarray, m: np.ndarray, ev: Evaluation) -> None:
        self.xs.append(x)
        self.masks.append(m)
        self.evals.append(ev)

    def merged(self) -> tuple[np.ndarray, np.ndarray, Evaluation]:
        ev = self.evals
        cat = {k: np.concatenate([e.designs[k] for e in ev]) for k in ev[0].designs}
        return (
            np.concatenate(self.xs),
            np.concatenate(self.masks),
            Evaluation(
                designs=cat,
                **{
                    name: np.concatenate([getattr(e, name) for e in ev])
                    for name in ("measured", "bound", "terms", "inside", "ratio", "vacuous")
                },
                initial=np.concatenate([e.initial for e in ev]),
            ),
        )


def evaluate_points(bound: Bound, space: Space, x: np.ndarray, masks: np.ndarray) -> Evaluation:
    """Decode and evaluate points; a point without a feasible step is outside."""
    d, ok = decode(bound, space, x, masks)
    ev = evaluate(bound, space.family, d)
    ev.inside &= ok
    ev.ratio = np.where(ev.inside, ev.ratio, np.nan)
    ev.vacuous &= ok
    return ev


def score(ev: Evaluation, term: int | None | np.ndarray) -> np.ndarray:
    """Objective of each design: the ratio (``-inf`` outside), damped for a term search.

    ``term``: ``None`` (the ratio itself), a term index, or one index per design with
    ``-1`` for the ratio itself."""
    r = np.where(ev.inside, ev.ratio, -np.inf)
    r = np.where(np.isnan(r), -np.inf, r)
    if term is None:
        return r
    idx = np.broadcast_to(np.asarray(term), r.shape)
    if ev.terms.shape[1] == 0:
        return r
    with np.errstate(all="ignore"):
        t = ev.terms[np.arange(len(r)), np.clip(idx, 0, None)]
        share = np.where(ev.bound > 0, t / ev.bound, 0.0)
    damp = np.where(idx < 0, 1.0, np.clip(2 * np.nan_to_num(share), 0.0, 1.0) ** 4)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(r), r * damp, r)


def climb(
    bound: Bound,
    space: Space,
    x0: np.ndarray,
    m0: np.ndarray,
    terms: np.ndarray,
    rng: np.random.Generator,
    *,
    iters: int,
    batch: int,
    pool: Pool,
) -> None:
    """Parallel hill-climbs from the seeds ``(x0, m0)``, chain ``c`` on the objective of
    term ``terms[c]`` (``-1``: the ratio itself); every evaluation is added to ``pool``.
    All chains advance together, one batch of ``chains x batch`` designs per iteration."""
    if len(x0) == 0 or iters <= 0:
        return
    width = HIGH - LOW
    free = np.flatnonzero(space.free)
    cur = np.array(x0, dtype=float)
    mask = np.array(m0, dtype=bool)
    terms = np.asarray(terms, dtype=int)
    cur_ev = evaluate_points(bound, space, cur, mask)
    pool.add(cur, mask, cur_ev)
    cur_s = score(cur_ev, terms)
    C, n = cur.shape
    pt = np.repeat(terms, batch)
    pm = np.repeat(mask, batch, axis=0)
    for it in range(iters):
        step = 0.3 * (0.02 / 0.3) ** (it / max(1, iters - 1))
        prop = np.repeat(cur, batch, axis=0)
        moved = rng.random((C * batch, n)) < 0.35
        moved[:, ~space.free] = False
        noise = rng.normal(size=prop.shape) * width * step
        prop = prop + np.where(moved, noise, 0.0)
        snap = rng.random(C * batch) < 0.2
        j = rng.choice(free, size=C * batch)
        ends = np.where(rng.random(C * batch) < 0.5, LOW[j], HIGH[j])
        prop[snap, j[snap]] = ends[snap]
        prop = clip(prop, space)
        ev = evaluate_points(bound, space, prop, pm)
        pool.add(prop, pm, ev)
        s = score(ev, pt).reshape(C, batch)
        best = np.argmax(s, axis=1)
        bs = s[np.arange(C), best]
        better = bs > cur_s
        cur[better] = prop.reshape(C, batch, n)[np.flatnonzero(better), best[better]]
        cur_s = np.where(better, bs, cur_s)

"""Contradictions between an upper bound and a lower bound, settled by the exact oracle.

An upper bound that lies below a lower bound at a design inside both statements' conditions
contradicts it: at least one of the two is false. ``palsgd check`` reports such a pair
(:mod:`theory.check.contradiction`); ``palsgd verify`` runs both and, at each such design,
evaluates the lower bound's own instance exactly (:mod:`theory.verify.lower_witness`).
That instance belongs to the upper bound's class too, so the exact value decides: below the
lower bound's claim, the **lower** bound is refuted there (its own instance attains less);
at or above it, the instance attains more than the **upper** bound allows and the upper
bound is refuted there.

Which designs: those of the lower bound's verification (:mod:`theory.verify.lower`) that
the upper bound covers: the same algorithm (Local SGD or minibatch SGD without pulls,
PALSGD with pulls and the same coins), the same outer optimiser (averaging, or for a bound
with an outer learning rate SGD with momentum and Nesterov) and the same measured quantity
(iterates or anchors); on the two-curvature instances only upper bounds that admit
heterogeneous workers (:func:`theory.verify.hetero.coverage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from theory.bound import Bound
from theory.verify.hetero import coverage
from theory.verify.lower import ATOL, command, scale_of
from theory.verify.oracle import REL_TOL, family_of
from theory.verify.records import CrossingRow, LowerDesign

__all__ = ["crossings"]

#: upper-bound parameters a design gives (``R = T/H``, relative-noise ``beta = 0``)
_FROM_DESIGN = ("L", "sigma", "zeta", "F0", "K", "H", "T", "p", "eta", "gamma", "mu", "alpha")


def _covered(upper: Bound, lower: Any, d: LowerDesign) -> bool:
    """Whether the design ``d`` of ``lower`` is a run ``upper`` is stated for."""
    fam = family_of(upper)
    if fam.all_reduce or not set(upper.algorithms) & set(lower.algorithms):
        return False
    if getattr(upper, "measured", "iterates") != d["measured"]:
        return False
    if d["p"] > 0 and (not fam.uses_p or fam.coins != d["coins"]):
        return False  # a design with pulls is a run of an algorithm with pulls, these coins
    if fam.uses_gamma:
        return d["outer"] in upper.outers or (d["gamma"] == 1 and d["mu"] == 0)
    return d["outer"] == "average"


def _values(upper: Bound, ds: Sequence[LowerDesign]) -> tuple[np.ndarray, np.ndarray]:
    """``upper`` and whether its conditions hold, at each design."""
    cols = {k: np.array([float(d[k]) for d in ds]) for k in _FROM_DESIGN}
    cols["R"] = cols["T"] / cols["H"]
    cols["beta"] = np.zeros(len(ds))
    args = {k: cols[k] for k in upper.parameters if k in cols}
    with np.errstate(all="ignore"):
        value = np.asarray(upper.evaluate(**args), dtype=float) * np.ones(len(ds))
        holds = np.asarray(upper.conditions_hold(**args), dtype=bool) * np.ones(len(ds), bool)
    return value, holds & np.isfinite(value)


def crossings(
    lower: Any,
    uppers: Sequence[Bound],
    ds: Sequence[LowerDesign],
    claimed: np.ndarray,
    attained: np.ndarray,
) -> list[CrossingRow]:
    """One row per upper bound that ``lower`` contradicts at a design of ``ds``: how many
    designs, the worst (largest lower/upper), the exact value there and which of the two the
    oracle refutes (module docstring). ``claimed``: ``lower`` at the designs; ``attained``:
    the smaller of its own instances' exact value and the known worst case."""
    rows = []
    hetero = getattr(lower, "attained_on", "") == "two_curvature"
    for upper in uppers:
        if hetero and coverage(upper):
            continue
        mask = np.array([_covered(upper, lower, d) for d in ds], dtype=bool)
        if not mask.any():
            continue
        value, inside = _values(upper, ds)
        margin = ATOL * scale_of(list(ds))
        hit = mask & inside & (value >= 0) & (claimed > value * (1 + REL_TOL) + margin)
        if not hit.any():
            continue
        with np.errstate(all="ignore"):
            gap = np.where(hit, claimed / value, np.nan)
        i = int(np.nanargmax(gap))
        above = claimed > attained * (1 + REL_TOL) + margin  # the lower bound's claim fails
        lower_false = bool(above[i])
        refuted_upper = hit & ~above
        rows.append(
            CrossingRow(
                upper=upper.name,
                lower=lower.name,
                designs=int(hit.sum()),
                lower_over_upper=float(gap[i]),
                upper_value=float(value[i]),
                lower_value=float(claimed[i]),
                exact=float(attained[i]),
                refuted=lower.name if lower_false else upper.name,
                upper_refuted_at=int(refuted_upper.sum()),
                design=dict(ds[i]),
                command=command(lower.name, ds[i]),
            )
        )
    return rows

"""The tuner's global probe of the outer rate: one coarse look over the whole allowed range.

The grid stages of :func:`theory.compare.tune.tune` are local: the base grid covers a small
range of outer rates (Nesterov: DiLoCo's ``[0.1, 1]``), it is extended only while an optimum
sits on its edge, the diagonal stage walks along one ``alpha * gamma`` diagonal and the
refinement and the polish look around the optima found. A second basin of the
``(alpha, gamma)`` landscape that none of them touches stays unseen: on held-out problem 4
of ``benchmarks/bench_map_tuning_gap.py`` (``H = 256, eta = 20, p = 0.5``, 2% target)
PALSGD-Nesterov's grid optimum was 19 rounds at ``gamma ~ 4``, ``alpha gamma ~ 6e-4``,
interior in its own basin, while ``gamma >= 11`` holds a basin of 8 rounds at
``alpha gamma ~ 8e-3`` (the outside search's answer).

Rule, the same in every cell of every method with outer rates, once, after the base grid
and before the extensions: around each target's reported optimum ``(a, g)`` (the middle of
its tie), the outer rates :func:`probe_gammas` (every :data:`PROBE_RATIO` over
``[GAMMA_MIN, GAMMA_MAX]``) are evaluated at the inner step ``a`` (the row: ``alpha gamma``
sweeps every scale) and on the diagonal ``alpha = a g / gamma`` (the diagonal of
:mod:`theory.compare.refine`, over the whole range at once), inner steps at most the top of
the grid. At most ``2 * len(probe_gammas())`` new configurations per distinct optimum; a
configuration that cannot beat the cell's best is searched only that far (the evaluator's
``known``). An optimum the probe found makes its outer rate a row of the grid
(:func:`adopt_rows`), and the outer rates' edge rule (:func:`extend_rows`) extends past any
optimum's row that has no row within the grid's ratio below or above it: on a grid without
gaps the old rule (past its lowest or highest rate), around a probe's row a walk of full
rows until the optimum is interior (without it the far basin is seen only along two lines:
on held-out problem 6, ``H = 16``, the 0.2% target, 7 rounds where the walk from the base
grid had found 5). The later stages (diagonal, refinement, polish) are unchanged.
"""

from __future__ import annotations

import numpy as np

from theory.compare.refine import GAMMA_MAX, GAMMA_MIN, Cell, argmins

__all__ = [
    "PROBE_RATIO",
    "probe_gammas",
    "probe_points",
    "global_probe",
    "adopt_rows",
    "extend_rows",
]

#: the probe's outer rates are this factor apart
PROBE_RATIO = 4.0


def probe_gammas() -> np.ndarray:
    """The probe's outer rates: ``GAMMA_MIN * PROBE_RATIO^k`` up to ``GAMMA_MAX``."""
    n = int(np.floor(np.log(GAMMA_MAX / GAMMA_MIN) / np.log(PROBE_RATIO) + 1e-9)) + 1
    return GAMMA_MIN * PROBE_RATIO ** np.arange(n)


def probe_points(a: float, g: float, top: float) -> list[tuple[float, float]]:
    """The row ``(a, gamma)`` and the diagonal ``(a g / gamma, gamma)`` over
    :func:`probe_gammas`, inner steps at most ``top``."""
    out = []
    for G in probe_gammas():
        G = float(G)
        out += [(x, G) for x in (a, a * g / G) if x <= top]
    return out


def global_probe(c: Cell, T: int) -> bool:
    """Add the probe around every target's reported optimum in ``c`` (module docstring);
    whether any configuration is new."""
    top = max(c.alphas)
    new = []
    for e in range(T):
        arg = sorted(argmins(c, e))
        if arg:
            new += probe_points(*arg[len(arg) // 2], top)
    new = [k for k in dict.fromkeys(new) if k not in c.index]
    c.extra += new
    c.probed.update(new)
    return bool(new)


def adopt_rows(c: Cell, T: int) -> bool:
    """Every target's reported optimum that the probe found joins the grid as a row of its
    outer rate (then :func:`extend_rows` walks around it); whether any row is new."""
    added = False
    for e in range(T):
        arg = sorted(argmins(c, e))
        k = arg[len(arg) // 2] if arg else None
        if k in c.probed and k[1] not in c.gammas:
            c.gammas.append(k[1])
            added = True
    return added


def extend_rows(c: Cell, args: list[list[tuple[float, float]]], n_outer: int) -> bool:
    """The outer rates' edges: for each target's optima ``args`` all on one row of the grid
    with no row within the grid's ratio ``c.ratio`` below (above) it, ``ceil(n_outer/2)`` rows
    at that ratio below (above) it, within ``[GAMMA_MIN, GAMMA_MAX]``. On a grid without gaps
    these are the rows past its lowest (highest) rate; around a row the probe added
    (:func:`adopt_rows`), a walk away from it until the optimum is interior. Whether any row
    is new."""
    gs = sorted(c.gammas)
    if len(gs) < 2:
        return False
    r, tol = c.ratio, 1.0 + 1e-9
    k = range(1, max(1, int(np.ceil(n_outer / 2))) + 1)
    new: list[float] = []
    for arg in args:
        rows = {g for _, g in arg}
        if len(rows) != 1 or (g := rows.pop()) not in gs:
            continue
        i = gs.index(g)
        if i == 0 or gs[i - 1] * r * tol < g:  # no row within the ratio below
            new += [g / r**j for j in k if g / r**j >= GAMMA_MIN]
        if i == len(gs) - 1 or gs[i + 1] > g * r * tol:  # ... above
            new += [g * r**j for j in k if g * r**j <= GAMMA_MAX]
    new = [x for x in dict.fromkeys(new) if x not in gs]
    c.gammas = sorted(gs + new)
    return bool(new)

"""The tuner's search along the ``alpha * gamma`` diagonal and around every tied optimum.

Two rules of :func:`theory.compare.tune.tune`, the same in every cell of every method with
outer rates, split out of :mod:`theory.compare.tune`:

* **The diagonal** (:func:`diagonal`). For small inner steps a round of ``H`` local steps
  moves the anchor by about ``alpha * H`` times a gradient, and the outer step scales that by
  ``gamma``: what matters is ``c = alpha * gamma``. At large outer rates the best
  configurations lie on thin diagonals ``alpha * gamma ~ const`` (an outside search found one
  round at ``gamma ~ 256-23,000`` where the axis-aligned grid found two at ``gamma ~ 45``).
  Around each target's optima (up to :data:`SPREAD` of a tie, spread over it) the
  configurations ``(alpha / F, gamma * F)`` and ``(alpha * F, gamma / F)``, ``F`` =
  :data:`DIAGONAL_FACTOR`, are evaluated, and again around every new optimum: the optimum is
  extended along its diagonal until interior there (or ``gamma`` leaves
  ``[GAMMA_MIN, GAMMA_MAX]``, or ``alpha`` passes the top of the grid).
* **Every tied optimum** (:func:`tie_points`): the refinement patch is taken around up to
  :data:`SPREAD` configurations of the tie of optima (not only its middle): the rounds are
  integers, so a wide plateau of equal rounds can hide a narrow window of one round fewer
  (and first passage's transient dips are isolated needles) that only a finer look around
  the whole plateau finds.
"""

from __future__ import annotations

__all__ = ["DIAGONAL_FACTOR", "SPREAD", "FEW", "spread_for", "tie_points", "diagonal"]

#: the step along the diagonal: ``gamma`` up (``alpha`` down) by this factor, or the reverse
DIAGONAL_FACTOR = 4.0
#: at most this many configurations of a tie of optima are searched around, spread over it
SPREAD = 4
#: ... where the optimum takes at most this many rounds (a plateau of equal rounds is wide
#: only where they are few, and there a configuration is cheap: its search stops early);
#: above it only the middle of the tie, as before
FEW = 8


def spread_for(rounds: int) -> int:
    """How many tied optima are searched around at an optimum of ``rounds`` rounds."""
    return SPREAD if rounds <= FEW else 1


def tie_points(arg: list[tuple[float, float]], n: int = SPREAD) -> list[tuple[float, float]]:
    """Up to ``n`` of the tied optima ``arg``, evenly spread over their sorted order (the
    middle one, the reported optimum, always among them)."""
    arg = sorted(arg)
    if len(arg) <= n:
        return arg
    if n <= 2:
        return [arg[len(arg) // 2]]
    mid = len(arg) // 2
    pick = {round(i * (len(arg) - 1) / (n - 2)) for i in range(n - 1)} | {mid}
    return [arg[i] for i in sorted(pick)]


def diagonal(
    arg: list[tuple[float, float]],
    rows: dict[float, list[float]],
    top: float,
    g_min: float,
    g_max: float,
    n: int = SPREAD,
) -> list[tuple[float, float]]:
    """The diagonal neighbours ``(a / F, g * F)`` and ``(a * F, g / F)`` of the tie points of
    ``arg``, with those of ``a``'s nearest inner steps below and above in its row (``rows``:
    outer rate -> its sorted inner steps), so that the new row can be refined in ``alpha``;
    only outer rates in ``[g_min, g_max]`` and inner steps at most ``top``."""
    F = DIAGONAL_FACTOR
    out = []
    for a, g in tie_points(arg, n):
        row = rows.get(g, [a])
        i = row.index(a) if a in row else 0
        near = row[max(i - 1, 0) : i + 2]
        for f in (F, 1.0 / F):
            if not g_min <= g * f <= g_max:
                continue
            out += [(x / f, g * f) for x in near if x / f <= top]
    return out

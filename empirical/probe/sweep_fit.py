"""The sweep's statistics: the fitted exponent of a measured change, with a seed interval,
and its verdict against a predicted curve (the bound's, or an exact one).

Measured: ``r[s, i]``, the rate ``(1/T) sum_t ||grad f(xbar_t)||^2`` of seed ``s`` at the
swept value ``v_i`` (``v_1`` the smallest). The *change* is
``D[s, i] = r[s, i] - r[s, 1]`` (paired: the same seed at every value), its mean over the
seeds ``Dbar_i``; the exponent ``beta`` is the least-squares slope of ``log Dbar_i`` on
``log(v_i - v_1)`` over ``i >= 2`` (``D ~ c (v - v_1)^beta``: the bounds' drift terms go as
``(H - 1)`` for the noise and about ``(H - 1) H`` for the heterogeneity). Its interval is
a jackknife over the seeds (leave one seed out; Student-t with ``n - 1`` degrees of
freedom; Efron and Stein, Ann. Statist. 9(3), 1981); it is undefined when a left-out mean
change is not positive (no measurable change). The change at the largest value has a
paired Student-t interval. The predicted curve ``P_i`` gives ``P_i - P_1`` and its exponent
the same way.

Verdict (in this order): the prediction changes by nothing while the measured change's
interval is above 0: *contradicts*; the measured change's interval is above the predicted
change, or the exponent's interval is above the predicted exponent: *contradicts* (the
measurement grows faster than the prediction's shape allows); the measured change's
interval is below the predicted change: *too pessimistic by x* (``x`` = predicted change
/ measured mean change); the predicted change inside the measured interval and the
predicted exponent inside its interval: *agrees*; anything else: *undecided* (the
intervals overlap or the exponent is undefined).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from empirical.probe.estimate import _t_quantile

__all__ = ["ChangeFit", "Verdict", "compare_change", "fit_change", "fit_exponent"]


def fit_exponent(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Least-squares slope of ``log y`` on ``log x``; ``None`` unless every ``x, y > 0`` and
    there are two distinct ``x``."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xa) < 2 or np.any(xa <= 0) or np.any(ya <= 0) or not np.all(np.isfinite(ya)):
        return None
    lx, ly = np.log(xa), np.log(ya)
    if np.ptp(lx) == 0:
        return None
    return float(np.polyfit(lx, ly, 1)[0])


@dataclass(frozen=True)
class ChangeFit:
    """The measured change over the swept values (module docstring): ``exponent`` and its
    interval (``None``: undefined), the mean change at the largest value with its
    interval, the number of seeds and the confidence level."""

    exponent: float | None
    exponent_ci: tuple[float, float] | None
    change: float
    change_ci: tuple[float, float]
    seeds: int
    confidence: float


def fit_change(values: Sequence[float], rates: np.ndarray, confidence: float = 0.95) -> ChangeFit:
    """Fit ``rates`` (``(seeds, len(values))``, values ascending) as the module docstring says."""
    v = np.asarray(values, dtype=float)
    r = np.asarray(rates, dtype=float)
    n = r.shape[0]
    D = r[:, 1:] - r[:, :1]
    dx = v[1:] - v[0]
    exponent = fit_exponent(dx, D.mean(0))
    tq = _t_quantile(confidence, n - 1)
    last = D[:, -1]
    se = float(last.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    change = float(last.mean())
    ci_ex = None
    if exponent is not None and n > 2:
        jack = [fit_exponent(dx, np.delete(D, s, axis=0).mean(0)) for s in range(n)]
        if all(j is not None for j in jack):
            ja = np.asarray(jack, dtype=float)
            se_j = math.sqrt((n - 1) / n * float(np.sum((ja - ja.mean()) ** 2)))
            ci_ex = (exponent - tq * se_j, exponent + tq * se_j)
    return ChangeFit(exponent, ci_ex, change, (change - tq * se, change + tq * se), n, confidence)


@dataclass(frozen=True)
class Verdict:
    """A dependence's verdict: ``code`` (``agrees``, ``too_pessimistic``, ``contradicts``,
    ``undecided``), ``factor`` (predicted / measured change, for ``too_pessimistic``) and
    the one-line ``text``."""

    code: str
    text: str
    factor: float | None = None


def compare_change(
    fit: ChangeFit, predicted_change: float, predicted_exponent: float | None, name: str
) -> Verdict:
    """The verdict of ``fit`` against a prediction called ``name`` (module docstring)."""
    lo, hi = fit.change_ci
    pc = float(predicted_change)
    ex_ci = fit.exponent_ci
    if pc <= 0 and lo > 0:
        return Verdict(
            "contradicts",
            f"contradicts: the measured change {fit.change:.4g} [{lo:.4g}, {hi:.4g}] is above "
            f"0, {name} predicts none",
        )
    if lo > pc:
        return Verdict(
            "contradicts",
            f"contradicts: the measured change {fit.change:.4g} [{lo:.4g}, {hi:.4g}] is above "
            f"{name}'s {pc:.4g}",
        )
    if ex_ci is not None and predicted_exponent is not None and ex_ci[0] > predicted_exponent:
        return Verdict(
            "contradicts",
            f"contradicts: the measured change grows with exponent {fit.exponent:.3g} "
            f"[{ex_ci[0]:.3g}, {ex_ci[1]:.3g}], faster than {name}'s {predicted_exponent:.3g}",
        )
    if hi < pc:
        x = pc / fit.change if fit.change > 0 else math.inf
        by = f"{x:.3g}" if math.isfinite(x) else f"more than {pc / hi:.3g}" if hi > 0 else "inf"
        return Verdict(
            "too_pessimistic",
            f"{name} too pessimistic by {by}x: it predicts a change of {pc:.4g}, measured "
            f"{fit.change:.4g} [{lo:.4g}, {hi:.4g}]",
            x,
        )
    shape_ok = (
        ex_ci is not None
        and predicted_exponent is not None
        and ex_ci[0] <= predicted_exponent <= ex_ci[1]
    )
    if pc <= 0 or shape_ok:
        return Verdict(
            "agrees",
            f"agrees: {name}'s change {pc:.4g} is inside the measured [{lo:.4g}, {hi:.4g}]"
            + (
                ""
                if pc <= 0
                else f", its exponent {predicted_exponent:.3g} inside the measured "
                f"[{ex_ci[0]:.3g}, {ex_ci[1]:.3g}]"
            ),  # fmt: skip
        )
    why = (
        "the measured exponent is undefined (no measurable change at some value)"
        if ex_ci is None
        else f"the measured exponent [{ex_ci[0]:.3g}, {ex_ci[1]:.3g}] excludes {name}'s "
        f"{predicted_exponent if predicted_exponent is None else round(predicted_exponent, 3)}"
    )
    return Verdict(
        "undecided",
        f"undecided: {name}'s change {pc:.4g} is inside the measured [{lo:.4g}, {hi:.4g}], but "
        + why,
    )

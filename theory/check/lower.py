"""The lower bounds beside each checked upper bound: what no valid bound may go below at the
same configuration and step (:mod:`theory.lower`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from core.errors import UserInputError
from theory.algorithm import lookup
from theory.check.report import LowerValue
from theory.check.warnings import outer_not_averaging
from theory.lower import lower_bounds

__all__ = ["LowerValue", "lower_values"]

#: the outer optimisers a lower bound is taken over when the configuration says only gamma, mu
_OUTER_KINDS = ("sgd", "nesterov")


def _applies(algorithms: tuple[str, ...], algorithm: str, v: Mapping[str, float]) -> bool:
    """Whether a lower bound stated for ``algorithms`` covers the configured run: its table
    row (DDP is minibatch SGD), or with an outer optimizer other than averaging the algorithm
    that runs the same rounds with one (Local SGD's is DiLoCo)."""
    row = lookup(algorithm)
    if row.outer_name and outer_not_averaging(v):
        return row.outer_name in algorithms
    return row.name in algorithms


def _evaluate(lb, args: dict[str, float], v: Mapping[str, float]) -> float:
    """The lower bound's value; with an outer optimiser other than averaging (whose kind the
    configuration does not say) the smaller of its values under SGD and Nesterov momentum,
    a lower bound whichever of the two the run uses."""
    if "gamma" in getattr(lb, "optional", {}) and outer_not_averaging(v):
        extra = {k: v[k] for k in ("gamma", "mu") if k in v}
        return min(float(lb.evaluate(**args, **extra, outer=o)) for o in _OUTER_KINDS)
    return float(lb.evaluate(**args))


def lower_values(
    algorithm: str,
    v: Mapping[str, float],
    alpha: float | None,
    measured: str = "iterates",
    coins: str = "independent",
) -> list[LowerValue]:
    """Every registered lower bound that covers ``algorithm``, at step ``alpha``.

    ``measured``: what the upper bound averages (``"iterates"`` or ``"anchors"``); a lower
    bound is compared only on the same quantity. ``coins``: the upper bound's coin mode
    (``"independent"`` or ``"shared"``), which the instances take when the run has pulls. A
    lower bound whose parameters the configuration lacks, or that cannot measure the same
    quantity, is listed with the reason.
    """
    out = []
    for lb in lower_bounds():
        if not _applies(tuple(lb.algorithms), algorithm, v):
            continue
        row = LowerValue(lb.name, lb.title, lb.provenance)
        optional = getattr(lb, "optional", {})
        need = [k for k in lb.parameters if k != "alpha"]
        missing = sorted(set(need) - set(v))
        if alpha is None or not math.isfinite(alpha):
            row.reason = "no alpha to evaluate it at"
        elif missing:
            row.reason = f"missing parameter(s) {missing}"
        elif measured != "iterates" and not optional:
            row.reason = f"it averages the iterates, this bound the {measured}"
        else:
            args = {k: v[k] for k in need}
            args.update({k: v[k] for k in optional if k in v and k not in ("gamma", "mu")})
            if optional:
                args["measured"] = measured
                if v.get("p", 0) > 0:
                    args["coins"] = coins
            try:
                row.value = _evaluate(lb, {"alpha": alpha, **args}, v)
            except UserInputError as exc:
                row.reason = str(exc)
        out.append(row)
    return out

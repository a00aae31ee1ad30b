"""The exact judge (``"exact"``): a statement against exact measured values on the
eigen-designs of :mod:`theory.verify.oracle`; a run inside the conditions whose measured
value exceeds the bound by more than the relative tolerance ``REL_TOL`` violates it."""

from __future__ import annotations

from typing import Any

import numpy as np

from theory.verify.pipeline import Judgement, Measurement, register_judge

__all__ = ["ExactJudge"]


@register_judge
class ExactJudge:
    """The bound's value and conditions at ``measurement.design.params`` (through
    :func:`theory.verify.oracle.bound_params`); inside: the conditions hold and the bound is
    finite and positive (and, for an all-reduce algorithm, ``T`` is a multiple of ``H``)."""

    name = "exact"

    def judge(self, bound: Any, measurement: Measurement) -> Judgement:
        from theory.verify.oracle import REL_TOL, bound_params, family_of

        design = measurement.design
        d = design.params
        fam = design.family if design.family is not None else family_of(bound)
        vals = bound_params(bound, d)
        n = len(d["L"])
        with np.errstate(all="ignore"):
            B = np.asarray(bound.evaluate(**vals), dtype=float) * np.ones(n)
            holds = np.asarray(bound.conditions_hold(**vals), dtype=bool) * np.ones(n, bool)
        inside = holds & np.isfinite(B) & (B > 0)
        if fam.all_reduce:  # the statement counts full outer iterations
            inside &= d["T"] % d["H"] == 0
        with np.errstate(all="ignore"):
            ratio = np.where(measurement.diverged, np.inf, measurement.measured / B)
        ratio = np.where(inside, ratio, np.nan)
        violated = inside & (ratio > 1 + REL_TOL)
        return Judgement(bound.name, self.name, B, inside, ratio, violated)

"""The exact stages of ``palsgd verify``: upper bounds on quadratics (with their negative
controls), on the heterogeneous instances, and the lower bounds with their controls and
their contradictions with the upper bounds of the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from theory.bound import Bound
from theory.verify import combined as joint_oracle
from theory.verify import hetero as hetero_oracle
from theory.verify import lower as lower_check
from theory.verify.controls import Control, controls_of, run_controls
from theory.verify.crossings import crossings
from theory.verify.exact import QUICK_BUDGET, Budget, ExactResult, verify_exact
from theory.verify.sampling import _child_seed
from theory.verify.settings import VerifySettings

__all__ = ["exact_stage", "lower_stage", "hetero_stage", "joint_stage", "progress_bar"]


def exact_stage(bounds: Sequence[Bound], settings: VerifySettings, progress: bool) -> dict:
    """Exact verification of every bound with an exact oracle, then its negative controls;
    a bound that admits heterogeneous workers and its controls also on the heterogeneous
    instances (:func:`theory.verify.hetero.coverage`) and on the joint instances
    (:mod:`theory.verify.combined`). Returns ``exact`` (results), ``controls``, ``hetero``
    (results), ``hetero_skipped`` (the others, with the reason) and ``combined`` (the joint
    stages' results)."""
    budget = Budget().scaled(settings.budget) if not settings.quick else QUICK_BUDGET
    cbudget = Budget().scaled(settings.control_budget) if not settings.quick else QUICK_BUDGET
    variants = {b.name: controls_of(b) for b in bounds} if settings.controls else {}
    n_ctrl = sum(len(v) for v in variants.values())
    bar = progress_bar(len(bounds) + n_ctrl, progress, "exact + controls")
    results: list[ExactResult] = []
    ctrls: list[Control] = []
    hetero: list[hetero_oracle.HeteroResult] = []
    joint: list[joint_oracle.JointResult] = []
    skipped: list[dict[str, str]] = []
    try:
        for bi, bound in enumerate(bounds):
            seed = _child_seed(settings.seed, 20, bi)
            results.append(
                verify_exact(bound, budget=budget, seed=seed, bound_file=settings.bound_file)
            )
            if bar is not None:
                bar.update(1)
            if settings.controls:
                ctrls += run_controls(
                    bound, budget=cbudget, seed=seed, progress=bar, controls=variants[bound.name]
                )
            why = hetero_oracle.coverage(bound)
            if why:
                skipped.append({"bound": bound.name, "reason": why})
            else:
                hetero.append(hetero_stage(bound, variants.get(bound.name, []), settings, seed))
                joint += joint_stage(bound, variants.get(bound.name, []), settings, seed)
    finally:
        if bar is not None:
            bar.close()
    return {
        "exact": results, "controls": ctrls, "hetero": hetero, "hetero_skipped": skipped,
        "combined": joint,
    }  # fmt: skip


def lower_stage(
    lowers: Sequence[Any], uppers: Sequence[Bound], settings: VerifySettings, stages: dict
) -> list[lower_check.LowerResult]:
    """Every lower bound on its designs (:mod:`theory.verify.lower`), its controls judged on
    the same designs (added to ``stages["controls"]``), and its contradictions with the
    upper bounds of the run (``stages["crossings"]``, :mod:`theory.verify.crossings`)."""
    size = lower_check.QUICK if settings.quick else {}
    results, crossed = [], []
    for i, lb in enumerate(lowers):
        res, ds, (own, known) = lower_check.verify_lower(
            lb, seed=_child_seed(settings.seed, 21, i), **size
        )
        results.append(res)
        claimed = lower_check.evaluate_claims(lb, ds)
        if settings.controls:
            for c in lower_check.controls_of(lb, ds):
                scaled = isinstance(c.bound, lower_check.ScaledLower) and c.bound.drop is None
                mine = c.bound.factor * claimed if scaled else None
                c.result = lower_check.judge(c.bound, ds, own, known, mine)
                stages["controls"].append(c)
        crossed += crossings(lb, uppers, ds, claimed, np.fmin(own, known))
    stages["crossings"] = crossed
    return results


def hetero_stage(
    bound: Bound, controls: Sequence[Control], settings: VerifySettings, seed: int
) -> hetero_oracle.HeteroResult:
    """``bound`` on the heterogeneous instances; its controls judged on the same designs."""
    size = hetero_oracle.QUICK if settings.quick else {}
    res, designs, lower = hetero_oracle.verify_hetero(bound, seed=seed, **size)
    for c in controls:
        c.hetero = hetero_oracle.judge(c.bound, designs, lower)
    return res


def joint_stage(
    bound: Bound, controls: Sequence[Control], settings: VerifySettings, seed: int
) -> list[joint_oracle.JointResult]:
    """``bound`` in each joint stage (:data:`theory.verify.combined.STAGES`: initial gap and
    heterogeneity together, noise with per-worker Hessians); its controls judged on the same
    rows (``Control.joint``)."""
    size = joint_oracle.QUICK if settings.quick else {}
    out = []
    for k, stage in enumerate(joint_oracle.STAGES):
        res, rows, exact = joint_oracle.verify_joint(bound, stage, seed=seed + k, **size)
        for c in controls:
            c.joint.append(joint_oracle.judge(c.bound, rows, exact, stage))
        out.append(res)
    return out


def progress_bar(total: int, enabled: bool, desc: str = "palsgd verify") -> Any:
    if not enabled or total == 0:
        return None
    return tqdm(total=total, desc=desc, unit="step", leave=False, dynamic_ncols=True)

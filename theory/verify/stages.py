"""The stage loop of ``palsgd verify`` (:data:`STAGES`, in order) and its exact stages: upper
bounds on quadratics (with their negative controls), on the heterogeneous and joint
instances; the lower bounds with their controls and their contradictions with the upper
bounds of the run; every bound against the worst case over its class; then the
Monte-Carlo stage (:mod:`theory.verify.stage_montecarlo`). Each stage reads the
:class:`~theory.verify.context.RunContext` and adds its records to ``ctx.found``; a new
stage is one :class:`~theory.verify.context.Stage` passed to :func:`register_stage`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from theory.bound import Bound
from theory.verify import combined as joint_oracle
from theory.verify import hetero as hetero_oracle
from theory.verify import lower as lower_check
from theory.verify import stage_montecarlo
from theory.verify.classstage import QUICK as QUICK_CLASS
from theory.verify.classstage import class_stage
from theory.verify.context import RunContext, Stage, StageResults
from theory.verify.controls import Control, controls_of, run_controls
from theory.verify.crossings import crossings
from theory.verify.exact import QUICK_BUDGET, Budget, ExactResult, verify_exact
from theory.verify.progress import progress_bar
from theory.verify.records import SkippedBound
from theory.verify.sampling import _child_seed
from theory.verify.settings import VerifySettings

__all__ = [
    "STAGES",
    "register_stage",
    "run_stages",
    "exact_stage",
    "lower_stage",
    "hetero_stage",
    "joint_stage",
    "progress_bar",
]


def exact_stage(bounds: Sequence[Bound], settings: VerifySettings, progress: bool) -> StageResults:
    """Exact verification of every bound with an exact oracle, then its negative controls;
    a bound that admits heterogeneous workers and its controls also on the heterogeneous
    instances (:func:`theory.verify.hetero.coverage`) and on the joint instances
    (:mod:`theory.verify.combined`). Returns ``exact`` (results), ``controls``, ``hetero``
    (results), ``hetero_skipped`` (the others, with the reason) and ``combined`` (the joint
    stages' results), as a :class:`~theory.verify.context.StageResults`."""
    budget = Budget().scaled(settings.budget) if not settings.quick else QUICK_BUDGET
    cbudget = Budget().scaled(settings.control_budget) if not settings.quick else QUICK_BUDGET
    variants = {b.name: controls_of(b) for b in bounds} if settings.controls else {}
    n_ctrl = sum(len(v) for v in variants.values())
    bar = progress_bar(len(bounds) + n_ctrl, progress, "exact + controls")
    results: list[ExactResult] = []
    ctrls: list[Control] = []
    hetero: list[hetero_oracle.HeteroResult] = []
    joint: list[joint_oracle.JointResult] = []
    skipped: list[SkippedBound] = []
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
                skipped.append(SkippedBound(bound.name, why))
            else:
                hetero.append(hetero_stage(bound, variants.get(bound.name, []), settings, seed))
                joint += joint_stage(bound, variants.get(bound.name, []), settings, seed)
    finally:
        if bar is not None:
            bar.close()
    return StageResults(results, ctrls, hetero, skipped, joint)


def lower_stage(
    lowers: Sequence[Any], uppers: Sequence[Bound], settings: VerifySettings, found: StageResults
) -> None:
    """Every lower bound on its designs (:mod:`theory.verify.lower`, ``found.lower``), its
    controls judged on the same designs (added to ``found.controls``), and its
    contradictions with the upper bounds of the run (``found.crossings``,
    :mod:`theory.verify.crossings`)."""
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
                found.controls.append(c)
        crossed += crossings(lb, uppers, ds, claimed, np.fmin(own, known))
    found.lower, found.crossings = results, crossed


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


def _exact(ctx: RunContext) -> None:
    got, found = exact_stage(ctx.exact_bounds, ctx.settings, ctx.progress), ctx.found
    found.exact, found.hetero, found.hetero_skipped = got.exact, got.hetero, got.hetero_skipped
    found.controls += got.controls
    found.combined += got.combined


def _lower(ctx: RunContext) -> None:
    lower_stage(ctx.lowers, ctx.uppers, ctx.settings, ctx.found)


def _class(ctx: RunContext) -> None:
    """Every bound against the worst case over its class (:mod:`theory.verify.classstage`),
    its controls judged on the same values."""
    n = QUICK_CLASS if ctx.settings.quick else ctx.settings.class_designs
    bar = progress_bar(len(ctx.bounds), ctx.progress, "class stage")
    try:
        ctx.found.klass, ctx.found.class_designs = class_stage(
            ctx.bounds, ctx.found.controls, n=n, seed=ctx.settings.seed, progress=bar
        )
    finally:
        if bar is not None:
            bar.close()


#: the stage loop of :func:`theory.verify.run.run_verification`, in order
STAGES: list[Stage] = [
    Stage("exact", _exact),
    Stage("lower", _lower),
    Stage("class", _class, lambda ctx: ctx.settings.class_stage),
    Stage("monte_carlo", stage_montecarlo.monte_carlo_stage, stage_montecarlo.enabled),
]


def register_stage(stage: Stage, *, before: str | None = None) -> None:
    """Add ``stage`` to the loop, before the stage named ``before`` (default: last)."""
    names = [s.name for s in STAGES]
    STAGES.insert(names.index(before) if before else len(STAGES), stage)


def run_stages(ctx: RunContext) -> None:
    """Every enabled stage of :data:`STAGES` on ``ctx``, in order."""
    for stage in STAGES:
        if stage.enabled(ctx):
            stage.run(ctx)

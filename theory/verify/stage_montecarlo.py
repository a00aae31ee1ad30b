"""The Monte-Carlo stage of ``palsgd verify``: where no exact recursion exists (nonconvex
problems, algorithms the exact oracles lack), configurations sampled inside (and outside)
each bound's conditions are simulated (the ``"monte_carlo"`` oracle) and their means tested
against the bound as one family; then rates in ``T``, speed-up in ``K``, exact vs Monte
Carlo and consensus vs ``H``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.errors import UserInputError
from theory.bound import Bound
from theory.verify.agreement import consensus_vs_H, exact_specs, exact_vs_mc
from theory.verify.checks import rate_check, speedup_check
from theory.verify.context import MonteCarloOutcome, RunContext
from theory.verify.montecarlo import _family_resamples, _test_family
from theory.verify.progress import progress_bar
from theory.verify.records import (
    AgreementRow,
    AgreementSummary,
    ConsensusRow,
    NotVerifiable,
    RateRow,
    SpeedupRow,
)
from theory.verify.report_types import Statistics
from theory.verify.sampling import (
    ProblemCache,
    _child_seed,
    _needs_iid,
    bound_spec,
    bound_values,
    problem_constants,
    sample_configs,
)
from theory.verify.settings import (
    HOLDS,
    INCONCLUSIVE,
    NOT_VERIFIABLE,
    VIOLATED,
    Config,
    VerifySettings,
)

__all__ = ["monte_carlo_stage", "enabled"]


def enabled(ctx: RunContext) -> bool:
    """The stage runs unless ``--controls`` or no upper bound is selected."""
    return not ctx.settings.controls_only and bool(ctx.uppers)


def monte_carlo_stage(ctx: RunContext) -> None:
    """Plan, simulate and test; sets ``ctx.found.monte_carlo``."""
    settings, pnames = ctx.settings, list(ctx.problems)
    done_exactly = {b.name for b in ctx.exact_bounds}
    items, skipped, verifiable = _monte_carlo_plan(
        ctx.uppers, pnames, ctx.cache, settings, done_exactly
    )
    n_rate = len(verifiable) * len(settings.rate_T) if settings.rates else 0
    n_speed = 2 * len(verifiable) if settings.speedup else 0
    n_exact = len(exact_specs()) if settings.exact else 0
    n_cons = 2 * len(settings.consensus_H) if settings.consensus else 0
    total = len(items) + n_rate + n_speed + n_exact + n_cons
    bar = progress_bar(total, ctx.progress)
    try:
        rows = _test_family(
            items,
            R=settings.replicas,
            level=settings.level,
            correction=settings.correction,
            n_boot=settings.n_boot,
            seed=settings.seed,
            progress=bar,
            not_verifiable=skipped,
        )
        extra = _monte_carlo_stages(verifiable, pnames, ctx.cache, settings, bar)
    finally:
        if bar is not None:
            bar.close()
    n_tested = sum(1 for r in rows if r.get("verdict") in (HOLDS, VIOLATED, INCONCLUSIVE))
    stats = _statistics(settings, n_tested, len(items))
    ctx.found.monte_carlo = MonteCarloOutcome(rows, *extra, statistics=stats)


def _monte_carlo_plan(
    bounds: Sequence[Bound],
    pnames: Sequence[str],
    cache: ProblemCache,
    settings: VerifySettings,
    done_exactly: set[str],
) -> tuple[list[tuple[Bound, Any, Config]], list[NotVerifiable], list[Bound]]:
    """The Monte-Carlo tests to run: ``(items, skipped, verifiable)``.

    A bound whose algorithm the simulator lacks, or whose formulas cannot be evaluated on a
    problem's constants, is skipped with the reason; a bound verified exactly is not sampled
    again on the quadratic.
    """
    items: list[tuple[Bound, Any, Config]] = []
    skipped: list[NotVerifiable] = []
    verifiable: list[Bound] = []
    exact_only = [pn for pn in pnames if pn != "quadratic"]
    for bi, bound in enumerate(bounds):
        spec = bound_spec(bound)
        algo, simulated = spec.kind, spec.definition.simulated
        reason = None
        if not simulated and bound.name in done_exactly:
            if not exact_only:
                continue  # verified exactly on every quadratic of the class above
            reason = (
                f"{NOT_VERIFIABLE}: Monte Carlo on {', '.join(exact_only)}: simulator lacks "
                f"{algo} (verified exactly on quadratics)"
            )
        elif not simulated:
            reason = f"{NOT_VERIFIABLE}: simulator lacks {algo}"
        else:
            consts = [
                problem_constants(cache.get(pn, min(settings.K), iid=_needs_iid(bound)))
                for pn in pnames
            ]  # a problem that cannot be built is bad input
            try:
                for c in consts:
                    bound_values(
                        bound,
                        c,
                        {"K": 1, "H": 1, "T": 1, "p": 0.1, "eta": 0.0, "gamma": 1.0, "alpha": 1.0},
                    )
            except UserInputError as exc:
                reason = f"{NOT_VERIFIABLE}: {exc}"
        if reason:
            skipped.append(NotVerifiable(bound.name, "", algo, NOT_VERIFIABLE, reason))
            continue
        verifiable.append(bound)
        for pi, pn in enumerate(pnames):
            if pn == "quadratic" and bound.name in done_exactly:
                continue  # verified exactly on every quadratic of the class above
            cfgs = sample_configs(
                bound, pn, cache, settings, seed=_child_seed(settings.seed, 0, bi, pi)
            )
            for cfg in cfgs:
                items.append((bound, cache.get(pn, cfg.K, iid=_needs_iid(bound)), cfg))

    return items, skipped, verifiable


def _monte_carlo_stages(
    verifiable: Sequence[Bound],
    pnames: Sequence[str],
    cache: ProblemCache,
    settings: VerifySettings,
    bar: Any,
) -> tuple[
    list[RateRow],
    list[SpeedupRow],
    list[AgreementRow],
    list[AgreementSummary],
    list[ConsensusRow],
]:
    """Rates in T, speed-up in K, exact vs Monte Carlo and consensus vs H."""
    rates: list[RateRow] = []
    speed: list[SpeedupRow] = []
    if settings.rates:
        for bi, bound in enumerate(verifiable):
            prob = cache.get(pnames[0], int(min(settings.K)), iid=_needs_iid(bound))
            rates += rate_check(
                bound, prob, settings, seed=_child_seed(settings.seed, 11, bi), progress=bar
            )
    if settings.speedup:
        for bi, bound in enumerate(verifiable):
            speed.append(
                speedup_check(
                    bound,
                    pnames[0],
                    cache,
                    settings,
                    seed=_child_seed(settings.seed, 12, bi),
                    progress=bar,
                )
            )
    exact_rows, exact_sum = ([], [])
    if settings.exact:
        try:
            exact_rows, exact_sum = exact_vs_mc(
                settings, seed=_child_seed(settings.seed, 13), progress=bar
            )
        except ModuleNotFoundError as exc:
            exact_sum = [AgreementSummary("*", status=f"skipped: {exc}")]
    cons = []
    if settings.consensus:
        cons = consensus_vs_H(
            settings, pnames[0], cache, seed=_child_seed(settings.seed, 14), progress=bar
        )
    return rates, speed, exact_rows, exact_sum, cons


def _statistics(settings: VerifySettings, n_tested: int, n_items: int) -> Statistics:
    """The ``statistics`` section of the report: what the Monte-Carlo tests measure and how."""
    return Statistics(
        measured="(1/T) sum_{t<T} ||grad f(xbar_t)||^2 per replica; replicas i.i.d.",
        tests="one-sided Student t and bootstrap-t (studentised bootstrap) p-values; "
        "verdicts use the larger p-value (the wider confidence bound); diverged "
        "replicas by a Markov-inequality binomial test",
        p_value="two-sided 2*min(p_holds, p_violated)",
        correction=settings.correction,
        family_wise_level=settings.level,
        family_size=n_tested,
        bootstrap_resamples=_family_resamples(settings.n_boot, settings.level, n_items),
        confidence_bounds="one-sided at level_i/2, level_i the per-test level of the "
        "correction; 'holds' iff ucb < bound, 'violated' iff lcb > bound",
    )

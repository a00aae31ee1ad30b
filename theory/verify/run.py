"""The main job: settings -> designs -> oracle -> tests -> report."""

from __future__ import annotations

import dataclasses
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import theory
from core.errors import UserInputError
from core.io import package_versions
from theory import bounds as bound_registry
from theory import problems
from theory.bound import Bound
from theory.check import jsonable
from theory.lower import lower_bounds
from theory.verify.agreement import consensus_vs_H, exact_specs, exact_vs_mc
from theory.verify.bound_file import load_bound_file
from theory.verify.checks import rate_check, speedup_check
from theory.verify.classstage import QUICK as QUICK_CLASS
from theory.verify.classstage import class_stage
from theory.verify.controls import power
from theory.verify.exact import ExactResult
from theory.verify.findings import findings_report
from theory.verify.montecarlo import _family_resamples, _test_family
from theory.verify.oracle import family_of
from theory.verify.report import summary_of
from theory.verify.report_types import Power, Statistics, VerifyReport
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
from theory.verify.stages import exact_stage, lower_stage, progress_bar


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = package_versions(("numpy", "scipy", "sympy", "matplotlib"))
    out.update(theory=theory.__version__, platform=platform.platform())
    try:
        root = Path(__file__).resolve().parent.parent
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def is_lower(bound: Any) -> bool:
    """Whether ``bound`` is a lower bound (:mod:`theory.lower`, ``kind = "lower"``)."""
    return getattr(bound, "kind", "upper") == "lower"


def resolve_bounds(names: Sequence[str] | None, bound_file: str | None = None) -> list[Any]:
    """The bounds called ``names`` among the registered upper and lower bounds and those of
    ``bound_file`` (:mod:`theory.verify.bound_file`); ``None`` selects every registered
    bound, upper and lower, or every bound of the file when a file is given."""
    user = load_bound_file(bound_file) if bound_file else []
    by_name = {b.name: b for b in user}
    lower = {lb.name: lb for lb in lower_bounds()}
    clash = sorted(set(by_name) & (set(bound_registry.names()) | set(lower)))
    if clash:
        raise UserInputError(f"--bound-file: bound name(s) {clash} are already registered")
    if not names:
        return user if user else [*bound_registry.all_bounds(), *lower.values()]
    return [
        by_name[n] if n in by_name else lower[n] if n in lower else bound_registry.get(n)
        for n in names
    ]


def resolve_problems(names: Sequence[str]) -> list[str]:
    """Check problem names against :data:`theory.problems.PROBLEMS` (error lists the known)."""
    known = sorted(problems.PROBLEMS)
    if not names:
        raise UserInputError(f"no problem selected; known problems: {known}")
    bad = [n for n in names if n not in problems.PROBLEMS]
    if bad:
        raise UserInputError(f"unknown problem(s) {bad}; known problems: {known}")
    return list(dict.fromkeys(names))


def _monte_carlo_plan(
    bounds: Sequence[Bound],
    pnames: Sequence[str],
    cache: ProblemCache,
    settings: VerifySettings,
    done_exactly: set[str],
) -> tuple[list[tuple[Bound, Any, Config]], list[dict[str, Any]], list[Bound]]:
    """The Monte-Carlo tests to run: ``(items, skipped, verifiable)``.

    A bound whose algorithm the simulator lacks, or whose formulas cannot be evaluated on a
    problem's constants, is skipped with the reason; a bound verified exactly is not sampled
    again on the quadratic.
    """
    items: list[tuple[Bound, Any, Config]] = []
    skipped: list[dict[str, Any]] = []
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
            skipped.append(
                {
                    "bound": bound.name,
                    "problem": "",
                    "algorithm": algo,
                    "verdict": NOT_VERIFIABLE,
                    "note": reason,
                }
            )
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


def run_verification(
    settings: VerifySettings,
    *,
    progress: bool = True,
    bounds: Sequence[Bound] | None = None,
    problems: Sequence[str] | None = None,
) -> VerifyReport:
    """The main job: every selected bound on every selected problem; returns the
    :class:`~theory.verify.report_types.VerifyReport`.

    The report holds ``settings``, ``versions``, ``statistics`` (methods, correction, level),
    ``results`` (one row per configuration, :data:`RESULTS_COLUMNS`), ``rates``,
    ``speedup``, ``exact_vs_mc`` (+ ``exact_vs_mc_summary``), ``consensus``,
    ``constant_checks`` and ``summary`` (verdict counts, the violated configurations).
    ``bounds`` and ``problems``: the selection already resolved from ``settings`` (by
    :func:`resolve_bounds` and :func:`resolve_problems`, as the command line does before it
    writes anything); otherwise the settings are checked and resolved here.
    """
    if bounds is None or problems is None:
        settings.validated()
        bounds = resolve_bounds(settings.bounds, settings.bound_file)
        problems = resolve_problems(settings.problems)
    t_start = time.perf_counter()
    uppers = [b for b in bounds if not is_lower(b)]
    pnames = list(problems)
    cache = ProblemCache(settings)
    exact_bounds = [b for b in uppers if family_of(b).exact] if settings.search else []
    stages = exact_stage(exact_bounds, settings, progress)
    stages["lower"] = lower_stage([b for b in bounds if is_lower(b)], uppers, settings, stages)
    if settings.class_stage:
        n = QUICK_CLASS if settings.quick else settings.class_designs
        bar = progress_bar(len(bounds), progress, "class stage")
        try:
            stages["class"] = class_stage(bounds, stages["controls"], n=n, seed=settings.seed,
                                          progress=bar)  # fmt: skip
        finally:
            if bar is not None:
                bar.close()
    if settings.controls_only or not uppers:
        return _report(settings, bounds, cache, stages, t_start)
    done_exactly = {b.name for b in exact_bounds}

    items, skipped, verifiable = _monte_carlo_plan(uppers, pnames, cache, settings, done_exactly)
    n_rate = len(verifiable) * len(settings.rate_T) if settings.rates else 0
    n_speed = 2 * len(verifiable) if settings.speedup else 0
    n_exact = len(exact_specs()) if settings.exact else 0
    n_cons = 2 * len(settings.consensus_H) if settings.consensus else 0
    total = len(items) + n_rate + n_speed + n_exact + n_cons
    bar = progress_bar(total, progress)
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
        extra = _monte_carlo_stages(verifiable, pnames, cache, settings, bar)
    finally:
        if bar is not None:
            bar.close()
    n_tested = sum(1 for r in rows if r.get("verdict") in (HOLDS, VIOLATED, INCONCLUSIVE))
    report = _report(settings, bounds, cache, stages, t_start)
    report.statistics = _statistics(settings, n_tested, len(items))
    report.constant_checks = cache.checks
    report.results = jsonable(rows)
    report.rates, report.speedup, report.consensus = extra.rates, extra.speedup, extra.consensus
    report.exact_vs_mc, report.exact_vs_mc_summary = extra.exact_vs_mc, extra.exact_vs_mc_summary
    report.elapsed_s = time.perf_counter() - t_start
    report.summary = summary_of(report)
    return report


@dataclasses.dataclass
class _MonteCarloTables:
    """The row tables of the Monte-Carlo stages (JSON-ready)."""

    rates: list[dict[str, Any]]
    speedup: list[dict[str, Any]]
    exact_vs_mc: list[dict[str, Any]]
    exact_vs_mc_summary: list[dict[str, Any]]
    consensus: list[dict[str, Any]]


def _monte_carlo_stages(
    verifiable: Sequence[Bound],
    pnames: Sequence[str],
    cache: ProblemCache,
    settings: VerifySettings,
    bar: Any,
) -> _MonteCarloTables:
    """Rates in T, speed-up in K, exact vs Monte Carlo and consensus vs H, as report rows."""
    rates: list[dict[str, Any]] = []
    speed: list[dict[str, Any]] = []
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
            exact_sum = [{"algorithm": "*", "status": f"skipped: {exc}"}]
    cons = []
    if settings.consensus:
        cons = consensus_vs_H(
            settings, pnames[0], cache, seed=_child_seed(settings.seed, 14), progress=bar
        )
    return _MonteCarloTables(*jsonable([rates, speed, exact_rows, exact_sum, cons]))


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


def _describe(bound: Any) -> dict[str, Any]:
    """:meth:`Bound.describe`, or the description of a lower bound."""
    if not is_lower(bound):
        return bound.describe()
    return {
        "name": bound.name,
        "kind": "lower",
        "title": bound.title,
        "provenance": bound.provenance,
        "algorithms": list(bound.algorithms),
        "parameters": list(bound.parameters),
        "attained_on": getattr(bound, "attained_on", ""),
        "notes": bound.notes,
    }


def _report(settings, bounds, cache, stages, t_start) -> VerifyReport:
    """The report of the exact stages (the Monte-Carlo tables empty)."""
    exact_results = stages["exact"]
    controls = stages["controls"]
    klass, klass_rows = stages.get("class", ([], []))
    tight = tightness_rows(exact_results)
    by_bound = {r.bound: r for r in klass}
    for row in tight:
        r = by_bound.get(row["bound"])
        row["class_tightness"] = None if r is None else r.class_tightness
        row["class_verdict"] = None if r is None else r.verdict
    report = VerifyReport(
        settings=settings,
        versions=_versions(),
        exact=jsonable([r.to_dict() for r in exact_results]),
        hetero=jsonable([r.to_dict() for r in stages["hetero"]]),
        hetero_skipped=stages["hetero_skipped"],
        combined=jsonable([r.to_dict() for r in stages.get("combined", [])]),
        lower=jsonable([r.to_dict() for r in stages["lower"]]),
        crossings=jsonable(stages.get("crossings", [])),
        findings=jsonable(findings_report(r.bound for r in exact_results)),
        tightness=jsonable(tight),
        class_results=jsonable([r.to_dict() for r in klass]),
        class_designs=jsonable(klass_rows),
        controls=jsonable([c.to_dict() for c in controls]),
        power=Power(**jsonable(power(controls))),
        bounds=[_describe(b) for b in bounds],
        constant_checks=cache.checks,
        statistics=Statistics(correction=settings.correction, family_wise_level=settings.level),
        elapsed_s=time.perf_counter() - t_start,
    )
    report.summary = summary_of(report)
    return report


def tightness_rows(results: Sequence[ExactResult]) -> list[dict[str, Any]]:
    """One row per (bound, term): designs where the term is at least half of the bound,
    the largest ratio measured/bound among them, and the command that reproduces it."""
    rows = []
    for r in results:
        for i, t in enumerate(r.terms):
            rows.append(
                {
                    "bound": r.bound,
                    "term_index": i,
                    "term": t.term,
                    "designs": t.designs,
                    "max_ratio": t.max_ratio,
                    "status": t.status,
                    "command": t.command,
                }
            )
    return rows

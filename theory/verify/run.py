"""The main job, one straight line: resolve the selection (the plan), run the stage loop
(:data:`theory.verify.stages.STAGES`: designs, measured by the oracles of
:mod:`theory.verify.pipeline`, judged), then the report edge
(:mod:`theory.verify.report_edge`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.errors import UserInputError
from theory import bounds as bound_registry
from theory import problems
from theory.bound import Bound
from theory.lower import lower_bounds
from theory.verify.bound_file import load_bound_file
from theory.verify.context import RunContext, is_lower
from theory.verify.report_edge import build_report
from theory.verify.report_types import VerifyReport
from theory.verify.sampling import ProblemCache
from theory.verify.settings import VerifySettings
from theory.verify.stages import run_stages

__all__ = ["is_lower", "resolve_bounds", "resolve_problems", "run_verification"]


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
    ctx = RunContext(settings, list(bounds), list(problems), ProblemCache(settings), progress)
    run_stages(ctx)
    return build_report(ctx)

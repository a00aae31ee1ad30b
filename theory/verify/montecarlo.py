"""Monte-Carlo tests of a bound: simulate configurations and test the mean against the bound."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from theory.bound import Bound
from theory.validation import validate_one
from theory.verify import pipeline
from theory.verify.oracle_montecarlo import design_of
from theory.verify.records import MonteCarloResult, NotVerifiable
from theory.verify.sampling import _child_seed, bound_values, problem_constants
from theory.verify.settings import OUTSIDE, Config
from theory.verify.stats import BootstrapPlan, MeanTest, decide, mean_test


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float | np.floating):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


@dataclasses.dataclass(frozen=True)
class _Evaluated:
    """One configuration simulated: the row's measured fields, the test, the replicas."""

    fields: dict[str, object]
    test: MeanTest
    inside: bool
    values: np.ndarray


def _evaluate_config(
    bound: Bound, problem: Any, cfg: Config, R: int, plan: BootstrapPlan
) -> _Evaluated:
    consts = problem_constants(problem)
    vals = bound_values(bound, consts, dataclasses.asdict(cfg))
    value = float(bound.evaluate(**vals))
    report = bound.condition_report(**vals)
    failed = [r.name for r in report if not bool(np.all(r.holds))]
    inside = not failed
    m = pipeline.measure(design_of(problem, cfg, R), "monte_carlo")
    trace, y = m.companions["trace"], m.measured
    test = mean_test(y, value, plan)
    cons = np.asarray(trace.consensus, dtype=float)
    noise = getattr(problem, "noise_model", getattr(problem, "noise", ""))
    row = {
        "bound": bound.name,
        "problem": cfg.problem,
        "algorithm": cfg.kind,
        "outer": cfg.outer,
        "coins": cfg.coins,
        "K": cfg.K,
        "d": int(getattr(problem, "d", 0)),
        "noise": noise if isinstance(noise, str) else str(noise),
        "H": cfg.H,
        "p": cfg.p,
        "eta": cfg.eta,
        "gamma": cfg.gamma,
        "alpha": cfg.alpha,
        "alpha_role": cfg.alpha_role,
        "alpha_max": cfg.alpha_max,
        "T": cfg.T,
        "R": R,
        "seed": cfg.seed,
        "L": consts["L"],
        "sigma2": consts["sigma2"],
        "zeta2": consts["zeta2"],
        "F0": consts["F0"],
        "conditions_hold": inside,
        "failed_conditions": ";".join(failed),
        "measured_mean": test.mean,
        "measured_sd": test.sd,
        "measured_se": test.se,
        "skewness": test.skew,
        "diverged": test.n_diverged,
        "bound_value": value,
        "ratio": test.mean / value if value > 0 else math.inf,
        "consensus_mean": float(np.nanmean(cons.mean(axis=-1))) if cons.size else math.nan,
        "summary": cfg.summary(),
    }
    return _Evaluated(row, test, inside, y)


def verify_configs(
    bound: Bound,
    problems: Mapping[str, Any] | Callable[[Config], Any],
    configs: Iterable[Config],
    *,
    R: int,
    level: float = 0.05,
    correction: str = "holm",
    n_boot: int | None = None,
    seed: int = 0,
    progress: Any = None,
) -> list[MonteCarloResult | NotVerifiable]:
    """Simulate and test ``configs`` of one bound; returns one result row per configuration.

    ``problems`` maps a problem name to a :class:`theory.problems.Problem` (or is a function
    of the configuration returning one). Configurations outside the bound's conditions are
    reported with verdict "outside conditions" and excluded from the family-wise correction.
    """
    validate_one("R", R)
    entries = []
    for cfg in configs:
        prob = problems(cfg) if callable(problems) else problems[cfg.problem]
        entries.append((cfg, prob))
    return _test_family(
        [(bound, prob, cfg) for cfg, prob in entries],
        R=R,
        level=level,
        correction=correction,
        n_boot=n_boot,
        seed=seed,
        progress=progress,
    )


def _family_resamples(n_boot: int | None, level: float, n_tests: int) -> int:
    """Bootstrap resamples for a family of ``n_tests``: ``n_boot`` if given, else enough for
    the smallest per-test level (Bonferroni's ``level / n_tests``), two-sided."""
    return n_boot or BootstrapPlan.resamples_for(level / (2 * max(1, n_tests)))


def _test_family(
    items: Sequence[tuple[Bound, Any, Config]],
    *,
    R: int,
    level: float,
    correction: str,
    n_boot: int | None,
    seed: int,
    progress: Any = None,
    not_verifiable: Sequence[NotVerifiable] = (),
) -> list[MonteCarloResult | NotVerifiable]:
    """Simulate and test ``items``; the tests inside the conditions form one family
    (``correction`` at family-wise ``level``); the ``not_verifiable`` rows follow."""
    plan = BootstrapPlan(_family_resamples(n_boot, level, len(items)), seed=_child_seed(seed, 4))
    evaluated = []
    for bound, prob, cfg in items:
        evaluated.append(_evaluate_config(bound, prob, cfg, R, plan))
        if progress is not None:
            progress.update(1)
    tested = [e for e in evaluated if e.inside]
    verdicts, corr = decide([e.test for e in tested], level, correction)
    judged = {
        id(e): (v, float(adj), float(tl) / 2)
        for e, v, adj, tl in zip(tested, verdicts, corr.adjusted, corr.test_level, strict=True)
    }
    rows: list[MonteCarloResult | NotVerifiable] = []
    for e in evaluated:
        rows.append(_result(e, judged.get(id(e)), level, len(rows)))
    rows += [dataclasses.replace(r, index=len(evaluated) + i) for i, r in enumerate(not_verifiable)]
    return rows


def _result(
    e: _Evaluated, judged: tuple[str, float, float] | None, level: float, index: int
) -> MonteCarloResult:
    """The ``results`` row of ``e``: ``judged`` (verdict, adjusted p-value, one-sided level)
    for a tested configuration, ``None`` for one outside the conditions."""
    t = e.test
    note = ""
    if judged is not None:
        verdict, p_adjusted, ci_level = judged
        ci = t.confidence_bounds(ci_level)
    else:
        verdict, p_adjusted, ci_level = OUTSIDE, math.nan, level / 2
        ci = t.confidence_bounds(level / 2) if t.n > 1 else {}
        note = f"not tested: condition(s) {e.fields['failed_conditions']} fail"
    if t.n_diverged:
        note = (note + "; " if note else "") + f"{t.n_diverged}/{t.n} replicas diverged"
    bv = float(e.fields["bound_value"])  # type: ignore[arg-type]
    ucb = ci.get("ucb", math.nan)
    return MonteCarloResult(
        **e.fields,  # type: ignore[arg-type]
        note=note,
        verdict=verdict,
        p_adjusted=p_adjusted,
        ci_level_one_sided=ci_level,
        ci=ci,
        p_holds=t.p_holds,
        p_violated=t.p_violated,
        p_value=t.p_value,
        ratio_ucb=ucb / bv if bv > 0 else math.inf,
        tested=judged is not None,
        index=index,
    )

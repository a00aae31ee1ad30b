"""Monte-Carlo tests of a bound: simulate configurations and test the mean against the bound."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory import simulate as sim
from theory.bound import Bound
from theory.validation import validate_one
from theory.verify.sampling import _child_seed, bound_values, problem_constants
from theory.verify.settings import OUTSIDE, Config
from theory.verify.stats import BootstrapPlan, MeanTest, decide, mean_test


def simulate_config(problem: Any, cfg: Config, R: int, **extra: Any) -> Any:
    """Run the simulator on one configuration; returns its ``Trace``."""
    if int(problem.K) != int(cfg.K):
        raise UserInputError(
            f"inconsistent dimensions: problem {cfg.problem!r} has K = "
            f"{problem.K} workers but the configuration has K = {cfg.K}"
        )
    spec = cfg.spec().replace(**extra) if extra else cfg.spec()
    with np.errstate(all="ignore"):
        return sim.simulate(
            problem, spec, T=cfg.T, R=R, seed=cfg.seed, backend=cfg.backend, device=cfg.device
        )


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float | np.floating):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def _evaluate_config(
    bound: Bound, problem: Any, cfg: Config, R: int, plan: BootstrapPlan
) -> dict[str, Any]:
    consts = problem_constants(problem)
    vals = bound_values(bound, consts, dataclasses.asdict(cfg))
    value = float(bound.evaluate(**vals))
    report = bound.condition_report(**vals)
    failed = [r.name for r in report if not bool(np.all(r.holds))]
    inside = not failed
    trace = simulate_config(problem, cfg, R)
    y = np.asarray(trace.mean_grad_norm_sq(), dtype=float)
    test = mean_test(y, value, plan)
    cons = np.asarray(trace.consensus, dtype=float)
    row = {
        "bound": bound.name,
        "problem": cfg.problem,
        "algorithm": cfg.kind,
        "outer": cfg.outer,
        "coins": cfg.coins,
        "K": cfg.K,
        "d": int(getattr(problem, "d", 0)),
        "noise": getattr(problem, "noise_model", getattr(problem, "noise", "")),
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
        "note": "",
    }
    if not isinstance(row["noise"], str):
        row["noise"] = str(row["noise"])
    return {"row": row, "test": test, "inside": inside, "values": y}


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
) -> list[dict[str, Any]]:
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
    not_verifiable: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    plan = BootstrapPlan(_family_resamples(n_boot, level, len(items)), seed=_child_seed(seed, 4))
    evaluated = []
    for bound, prob, cfg in items:
        evaluated.append(_evaluate_config(bound, prob, cfg, R, plan))
        if progress is not None:
            progress.update(1)
    tested = [e for e in evaluated if e["inside"]]
    verdicts, corr = decide([e["test"] for e in tested], level, correction)
    for e, v, adj, tl in zip(tested, verdicts, corr.adjusted, corr.test_level, strict=True):
        ci = e["test"].confidence_bounds(float(tl) / 2)
        e["row"].update(verdict=v, p_adjusted=float(adj), ci_level_one_sided=float(tl) / 2, **ci)
    for e in evaluated:
        t: MeanTest = e["test"]
        e["row"].update(p_holds=t.p_holds, p_violated=t.p_violated, p_value=t.p_value)
        if not e["inside"]:
            ci = t.confidence_bounds(level / 2) if t.n > 1 else {}
            e["row"].update(
                verdict=OUTSIDE,
                p_adjusted=math.nan,
                ci_level_one_sided=level / 2,
                note=f"not tested: condition(s) {e['row']['failed_conditions']} fail",
                **ci,
            )
        if t.n_diverged:
            e["row"]["note"] = (
                e["row"]["note"] + "; " if e["row"]["note"] else ""
            ) + f"{t.n_diverged}/{t.n} replicas diverged"
        bv = e["row"]["bound_value"]
        ucb = e["row"].get("ucb", math.nan)
        e["row"]["ratio_ucb"] = ucb / bv if bv > 0 else math.inf
    rows = [e["row"] for e in evaluated] + [dict(r) for r in not_verifiable]
    for i, r in enumerate(rows):
        r["index"] = i
    return rows

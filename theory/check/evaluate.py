"""The check itself: :func:`check` evaluates one configuration against the bounds that cover
its algorithm and returns a :class:`~theory.check.report.CheckReport` with its verdict."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice, check_type
from theory.algorithm import NAMES, VARIANTS, lookup
from theory.assumptions import A3_IID, OUTER_AVERAGING
from theory.bound import registry as bound_registry
from theory.bound.numeric import CompiledBound
from theory.check import contradiction
from theory.check.lower import lower_values
from theory.check.render import fmt as _fmt
from theory.check.render import h_limit as _h_limit
from theory.check.report import BoundCheck, CheckReport, ConditionCheck, ConfigWarning, TermShare
from theory.check.warnings import (
    config_warnings,
    outer_coverage,
    outer_not_averaging,
    usage_warnings,
)
from theory.presets import get_preset
from theory.validation import canonicalize, validate

__all__ = ["ALGORITHMS", "check", "infer_algorithm"]

#: algorithms a configuration can name (``--algorithm``): the names of the algorithm table
#: (:data:`theory.algorithm.NAMES`) and its variants (:data:`theory.algorithm.VARIANTS`,
#: checked as their base with the variant's outer settings); a bound covers the names of its
#: spec (``algorithms``)
ALGORITHMS = (*NAMES, *VARIANTS)

#: outer-optimizer values assumed when a configuration does not give them (plain averaging)
_OUTER_DEFAULTS = {"gamma": 1.0, "mu": 0.0}


def infer_algorithm(values: Mapping[str, float]) -> tuple[str, str]:
    """The algorithm a configuration implies, and why.

    ``p > 0``: PALSGD. Otherwise ``H > 1``: Local SGD (``p = 0``, any outer optimizer).
    Otherwise (``H`` absent or 1): minibatch SGD / DDP.
    """
    p, H = values.get("p"), values.get("H")
    if p is not None and p > 0:
        return "palsgd", f"p = {_fmt(p)} > 0"
    if H is not None and H > 1:
        why = "p = 0" if p is not None else "p not given"
        return "local_sgd", f"{why} and H = {_fmt(H)} > 1"
    return "sgd", "H not given" if H is None else "H = 1 and no pull steps"


def _with_variant(v: dict[str, float], algorithm: str) -> dict[str, float]:
    """``v`` with the numeric settings a variant fixes (SlowMo's ``gamma``, ``mu``) where
    the configuration does not give them; ``v`` itself for a table name."""
    if algorithm not in VARIANTS:
        return v
    fixed = {k: float(x) for k, x in VARIANTS[algorithm].values if isinstance(x, int | float)}
    return {**fixed, **v}


def _scalar_inputs(values: Mapping[str, Any]) -> dict[str, float]:
    vals = validate(values)
    out = {}
    for k, v in vals.items():
        arr = np.asarray(v, dtype=float)
        if arr.size != 1:
            raise UserInputError(f"check takes one configuration: parameter '{k}' must be a scalar")
        out[k] = float(arr.reshape(()))
    return out


def _resolve_bounds(bounds: Iterable[Any] | None) -> list[CompiledBound] | None:
    """Names, :class:`~theory.bound.Bound` or compiled bounds, as compiled bounds."""
    if bounds is None:
        return None
    if isinstance(bounds, str):  # one name
        bounds = [bounds]
    check_type("bounds", bounds, Iterable, "a list of bound names or bounds")
    out = []
    known = None
    for b in bounds:
        if isinstance(b, CompiledBound):
            out.append(b)
        elif hasattr(b, "compiled"):  # a theory.bound.Bound
            out.append(b.compiled)
        else:
            known = bound_registry.registered() if known is None else known
            out.append(known[check_choice("bound", str(b), known)])
    return out


def _covers(b: CompiledBound, algorithm: str, v: Mapping[str, float]) -> bool:
    """Whether ``b`` is stated for ``algorithm`` (its table row: DDP is minibatch SGD), or,
    with an outer optimizer other than averaging, for the algorithm that runs the same rounds
    with one (:attr:`theory.algorithm.Algorithm.outer_name`: Local SGD's is DiLoCo)."""
    row = lookup(algorithm)
    names = {row.name}
    if row.outer_name and outer_not_averaging(v):
        names.add(row.outer_name)
    return bool(names & set(b.algorithms))


def _f(x: np.ndarray | float) -> float:
    return float(np.asarray(x, dtype=float).reshape(()))


def _check_bound(
    b: CompiledBound, v: Mapping[str, float], algorithm: str, eps: float | None
) -> BoundCheck:
    rep = BoundCheck(
        name=b.name,
        title=b.title,
        provenance=b.provenance,
        derived_here=b.derived_here,
        algorithms=list(b.algorithms),
        assumptions=[str(a) for a in b.assumptions],
        notes=b.notes,
        status="skipped",
    )
    step = b.step_name
    if not _covers(b, algorithm, v):
        rep.applicable = False
        rep.caveats.append(
            f"this bound covers {list(b.algorithms)}, the configuration is {algorithm!r}: "
            "evaluated because it was asked for"
        )
    if b.refuted:
        rep.caveats.append(f"shown false inside its conditions: {b.refuted}")
    if OUTER_AVERAGING in b.assumptions and outer_not_averaging(v):
        rep.caveats.append(
            "assumes plain averaging (gamma = 1, mu = 0); the configured outer optimizer is "
            "not covered"
        )
    # an outer optimizer not given is plain averaging (gamma = 1, mu = 0)
    v = {**{k: d for k, d in _OUTER_DEFAULTS.items() if k in b.parameters}, **v}
    missing = sorted(set(b.parameters) - set(v) - {step})
    if missing:
        rep.reason = f"missing parameter(s) {missing}"
        return rep
    if A3_IID in b.assumptions and v.get("zeta", 0.0) > 0:
        rep.reason = f"assumes i.i.d. data (zeta = 0) but zeta = {_fmt(v['zeta'])}"
        return rep
    rep.status = "evaluated"
    base = {k: x for k, x in v.items() if k not in (step, "eps")}
    rep.optimal_alpha = _f(b.optimal_step(**base))
    rep.max_alpha = _f(b.max_step(**base))
    if step in v:
        alpha, rep.alpha_source = v[step], "given"
    elif math.isfinite(rep.optimal_alpha):
        alpha, rep.alpha_source = rep.optimal_alpha, "optimal"
    else:
        alpha = None
        rep.reason = f"{step} not given and no {step} satisfies the conditions"
    if alpha is not None:
        _at_alpha(rep, b, base, alpha)
        coins = b.algorithm.coins if b.algorithm is not None else "independent"
        rep.lower_bounds = lower_values(algorithm, base, alpha, b.measured, coins)
    rep.uses_H = "H" in b.parameters
    if rep.uses_H:
        _max_H(rep, b, base)
    if eps is not None:
        rep.rounds_to_eps = _f(b.rounds_to_eps(eps, **base))
    return rep


def _at_alpha(rep: BoundCheck, b: CompiledBound, base: Mapping[str, float], alpha: float) -> None:
    """The conditions, the value and the terms' shares at ``alpha``, into ``rep``."""
    rep.alpha = alpha
    at = {**base, b.step_name: alpha}
    for c in b.condition_report(**at):
        rep.conditions.append(
            ConditionCheck(c.name, c.text, c.description, bool(c.holds), _f(c.margin))
        )
    rep.conditions_hold = all(c.holds for c in rep.conditions)
    rep.value = _f(b.evaluate(**at))
    for term, val in b.term_values(**at):
        val = _f(val)
        share = 100.0 * val / rep.value if rep.value else float("nan")
        rep.terms.append(TermShare(term, val, share))
    if rep.terms:
        rep.dominant_term = max(rep.terms, key=lambda t: t.value).term


def _max_H(rep: BoundCheck, b: CompiledBound, base: Mapping[str, float]) -> None:
    """The largest ``H`` (speed-up; conditions at the schedule, the given and the
    recommended ``alpha``), into ``rep``."""
    mode = "recommended" if b.recommended_step is not None else "optimal"
    mh = b.max_H(step=mode, **base)
    rep.max_H_speedup = _f(mh.speedup)
    rep.max_H_conditions = _f(mh.conditions)
    rep.max_H_step = (
        f"speed-up schedule alpha = {b.recommended_step}"
        if mode == "recommended"
        else "the bound-minimising alpha at each H"
    )
    if mode == "recommended":
        sched = b.recommended_step_value(**base)
        rep.schedule_alpha = None if sched is None else _f(sched)
    if rep.alpha_source == "given":
        rep.max_H_conditions_given = _f(b.max_H(step=rep.alpha, **base).conditions)
    if math.isfinite(rep.optimal_alpha) and rep.optimal_alpha > 0:
        rep.max_H_conditions_recommended = _f(b.max_H(step=rep.optimal_alpha, **base).conditions)


def check(
    values: Mapping[str, Any],
    bounds: Iterable[Any] | None = None,
    *,
    algorithm: str | None = None,
    preset: str | None = None,
    notes: Sequence[str] = (),
) -> CheckReport:
    """Check one configuration against encoded bounds.

    ``values``: parameters by project name or the authors' alias (scalars); ``eps`` among
    them asks for the rounds to reach ``eps``. ``bounds``: names (or
    :class:`~theory.bound.Bound` or :class:`~theory.bound.numeric.CompiledBound` objects);
    default: every registered bound whose ``algorithms`` include the algorithm implied by the
    inputs (:func:`infer_algorithm`, or ``algorithm`` if given). ``preset``: a
    :mod:`theory.presets` name whose values ``values`` override; its caveats are reported.
    ``notes``: extra caveats to include as warnings.

    A bound missing a parameter (other than ``alpha``) is skipped with the reason; without
    ``alpha`` a bound is evaluated at its optimal step. Raises
    :class:`~core.errors.UserInputError` on bad input.
    """
    check_type("values", values, Mapping, "a mapping of parameter names to values")
    merged: dict[str, Any] = {}
    warnings: list[ConfigWarning] = []
    if preset is not None:
        pre = get_preset(preset)
        merged.update(pre.values)
        warnings += [ConfigWarning("warning", f"preset:{pre.name}", n) for n in pre.notes]
    merged.update(canonicalize(values))
    v = _scalar_inputs(merged)
    eps = v.get("eps")
    if algorithm is None:
        algorithm, why = infer_algorithm(v)
    else:
        algorithm, why = check_choice("algorithm", algorithm, (*NAMES, *VARIANTS)), "given"
        v = _with_variant(v, algorithm)
    warnings = config_warnings(v, algorithm) + warnings
    warnings += [ConfigWarning("warning", "note", str(n)) for n in notes]
    chosen = _resolve_bounds(bounds)
    if chosen is None:
        known = bound_registry.registered()
        chosen = [b for b in known.values() if _covers(b, algorithm, v)]
        if not chosen:
            warnings.append(
                ConfigWarning(
                    "warning",
                    "no_bound",
                    f"no registered bound covers algorithm {algorithm!r}; registered bounds: "
                    f"{list(known)} (ask for one with --bound NAME)",
                )
            )
    warnings += outer_coverage(v, chosen)
    checks = [_check_bound(b, v, algorithm, eps) for b in chosen]
    usage = usage_warnings(v, chosen)
    warnings += usage
    verdict_code, verdict = _verdict(checks, algorithm, v)
    if any(w.code == "ignored_parameters" for w in usage) and verdict_code != "nothing_evaluated":
        verdict += " (some given parameters are not used by the checked bounds: see warnings)"
    return CheckReport(
        inputs=v,
        algorithm=algorithm,
        algorithm_reason=why,
        eps=eps,
        preset=preset,
        warnings=warnings,
        bounds=checks,
        verdict=verdict,
        verdict_code=verdict_code,
    )


def _verdict(
    checks: Sequence[BoundCheck], algorithm: str, values: Mapping[str, float] | None = None
) -> tuple[str, str]:
    """The one-line answer of :class:`CheckReport` (see ``verdict_code`` there)."""
    done = [b for b in checks if b.status == "evaluated" and b.alpha is not None]
    if not done:
        why = "; ".join(f"{b.name}: {b.reason}" for b in checks) or "no bound selected"
        return "nothing_evaluated", f"nothing checked: every bound was skipped ({why})"
    pairs = contradiction.contradictions(done, values)
    if pairs:
        return contradiction.CODE, contradiction.verdict(pairs)
    holding = [b for b in done if b.conditions_hold]
    clean = [b for b in holding if b.applicable and not b.caveats]
    if clean:
        b = min(clean, key=lambda b: b.value if b.value is not None else math.inf)
        return (
            "covered",
            f"covered: the conditions of {b.name} hold at alpha = {_fmt(b.alpha)} "
            f"({'given' if b.alpha_source == 'given' else 'recommended'}); "
            f"(1/T) sum E||grad f||^2 <= {_fmt(b.value)}",
        )
    if holding:
        b = holding[0]
        why = b.caveats[0] if b.caveats else "not covered"
        return (
            "conditions_hold",
            f"conditions of {b.name} hold at alpha = {_fmt(b.alpha)} (bound {_fmt(b.value)}), "
            f"but the bound does not cover this run: {why}",
        )
    b = done[0]
    failed = ", ".join(c.name for c in b.conditions if not c.holds)
    where = (
        f"conditions fail for every evaluated bound ({b.name}: {failed} at alpha = {_fmt(b.alpha)}"
    )
    if b.max_alpha is not None and math.isfinite(b.max_alpha):
        where += f"; they hold for alpha <= {_fmt(b.max_alpha)}"
    elif b.max_alpha is not None and math.isnan(b.max_alpha):
        where += "; no alpha meets them at this configuration"
    if b.max_H_conditions_given is not None:
        where += f"; at this alpha they hold {_h_limit(b.max_H_conditions_given)}"
    return "conditions_fail", where + ")"

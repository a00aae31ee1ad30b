"""The hyperparameter checker behind ``palsgd check``.

Given problem constants (``L``, ``sigma``, ``zeta``, ``F0``) and hyperparameters (``K``,
``H``, ``p``, ``alpha``, ``eta``, ``gamma``, ``mu``, ``T``, ...), :func:`check` reports for
every applicable encoded bound: each condition with pass/fail and margin, the bound's value
and each term's share, the dominant term, the step ``alpha`` that minimises the bound, the
largest ``H`` that keeps linear speed-up, and the communication rounds to reach ``eps``.
It also flags configuration-level stability problems of the PALSGD step (pull coefficient
``alpha*eta/p``: a pull multiplies ``x - z`` by ``1 - alpha*eta/p``; gradient-branch step
``alpha L/(1-p)``: a step of size ``alpha/(1-p)`` on an L-smooth quadratic is stable for
``alpha L/(1-p) <= 2``). The report is a :class:`CheckReport`; ``to_dict()`` is JSON-ready and
``to_text()`` is what the CLI prints.

Python use (notebooks, the probe)::

    from theory.check import check
    rep = check({"L": 1.0, "sigma": 1.0, "F0": 1.0, "K": 4, "H": 32, "T": 10**5,
                 "alpha": 0.01})
    rep.bounds[0].value, rep.to_dict()

CLI: ``palsgd check --L 1 --sigma 1 --F0 1 --K 4 --H 32 --T 100000 --lr 0.01 [--json]``,
``--config run.yaml`` (keys: parameter names or the authors' flag names; flags override the
file), ``--preset NAME`` (:mod:`theory.presets`), ``--bound NAME`` (repeatable), ``--eps``.
Exit status 0 whether or not conditions hold (it is a report); 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from theory import bound_cache
from theory.assumptions import A3_IID, OUTER_AVERAGING
from theory.bound_numeric import CompiledBound
from theory.io import json_safe
from theory.presets import get_preset, preset_names
from theory.validation import (
    ALIASES,
    PARAMS,
    UserInputError,
    canonicalize,
    read_mapping_file,
    validate,
)

__all__ = [
    "ALGORITHMS",
    "BoundCheck",
    "CheckReport",
    "ConditionCheck",
    "ConfigWarning",
    "TermShare",
    "add_arguments",
    "check",
    "infer_algorithm",
    "jsonable",
    "load_config",
    "run",
]

#: algorithms a configuration can name (``--algorithm``); bounds list theirs in ``algorithms``
ALGORITHMS = ("sgd", "ddp", "local_sgd", "easgd", "palsgd")

#: (project name, extra option strings) for every parameter flag of ``palsgd check``
_FLAGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("L", ()),
    ("sigma", ()),
    ("zeta", ()),
    ("F0", ()),
    ("K", ("--world_size", "--num_gpus")),
    ("H", ("--sync_interval",)),
    ("T", ("--steps",)),
    ("T0", ("--local_sgd_start_iter",)),
    ("p", ("--prob_no_grad",)),
    ("alpha", ("--lr",)),
    ("eta", ()),
    ("gamma", ("--outer_lr",)),
    ("mu", ("--outer_momentum",)),
    ("A", ("--grad_accu_step",)),
    ("eps", ()),
)
_CONFIG_EXTRA_KEYS = ("algorithm", "bound", "bounds", "preset")


# --------------------------------------------------------------------------- report types
@dataclass
class ConditionCheck:
    """One condition at the checked configuration; ``margin = big - small`` (>= 0 holds)."""

    name: str
    relation: str
    description: str
    holds: bool
    margin: float


@dataclass
class TermShare:
    """One additive term of a bound: its value and its share of the bound (percent)."""

    term: str
    value: float
    share: float


@dataclass
class ConfigWarning:
    """A configuration-level finding; ``level`` is ``"warning"`` or ``"info"``."""

    level: str
    code: str
    message: str
    margin: float | None = None


@dataclass
class BoundCheck:
    """The check of one bound. ``status`` is ``"evaluated"`` or ``"skipped"`` (see ``reason``).

    ``alpha_source`` is ``"given"`` (the configuration's ``alpha``) or ``"optimal"`` (no
    ``alpha`` given: the bound is evaluated at :meth:`Bound.optimal_step`). ``max_H_speedup``
    and ``max_H_conditions`` are ``None`` when the bound does not depend on ``H``;
    ``max_H_step`` says at which step size they were computed (the bound's closed-form
    speed-up schedule, whose value at the configuration is ``schedule_alpha``).
    ``max_H_conditions_given`` / ``max_H_conditions_recommended``: the largest ``H`` whose
    conditions hold at the configuration's ``alpha`` (``None`` when none was given) and at
    the recommended ``alpha`` (``optimal_alpha``, the step that minimises the bound under
    the conditions at the configuration), each held fixed while ``H`` varies.
    """

    name: str
    title: str
    provenance: str
    derived_here: bool
    algorithms: list[str]
    assumptions: list[str]
    notes: str
    status: str
    reason: str = ""
    applicable: bool = True
    caveats: list[str] = field(default_factory=list)
    alpha: float | None = None
    alpha_source: str | None = None
    conditions: list[ConditionCheck] = field(default_factory=list)
    conditions_hold: bool | None = None
    value: float | None = None
    terms: list[TermShare] = field(default_factory=list)
    dominant_term: str | None = None
    optimal_alpha: float | None = None
    max_alpha: float | None = None
    uses_H: bool = False
    max_H_speedup: float | None = None
    max_H_conditions: float | None = None
    max_H_step: str | None = None
    schedule_alpha: float | None = None
    max_H_conditions_given: float | None = None
    max_H_conditions_recommended: float | None = None
    rounds_to_eps: float | None = None


@dataclass
class CheckReport:
    """Everything :func:`check` found. ``to_dict()`` for JSON, ``to_text()`` for people.

    ``verdict`` is one line answering "does a theorem cover this configuration?";
    ``verdict_code`` is ``"covered"`` (an applicable bound without caveats whose conditions
    hold), ``"conditions_hold"`` (they hold but a caveat says the bound does not cover the
    run as configured), ``"conditions_fail"`` or ``"nothing_evaluated"`` (every bound
    skipped: the CLI then exits with 2, since nothing was checked).
    """

    inputs: dict[str, float]
    algorithm: str
    algorithm_reason: str
    eps: float | None
    preset: str | None
    warnings: list[ConfigWarning]
    bounds: list[BoundCheck]
    verdict: str = ""
    verdict_code: str = ""

    def bound(self, name: str) -> BoundCheck:
        """The check of the bound called ``name``."""
        for b in self.bounds:
            if b.name == name:
                return b
        raise KeyError(f"no bound {name!r} in this report: {[b.name for b in self.bounds]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``inf`` becomes the string ``"inf"`` and NaN becomes ``None``."""
        return jsonable(asdict(self))

    def to_text(self) -> str:
        return _render(self)


jsonable = json_safe  # the name the reports of check and verify import


# --------------------------------------------------------------------------- the check
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
    out = []
    known = None
    for b in bounds:
        if isinstance(b, CompiledBound):
            out.append(b)
        elif hasattr(b, "compiled"):  # a theory.bound.Bound
            out.append(b.compiled)
        else:
            known = bound_cache.registered() if known is None else known
            if str(b) not in known:
                raise UserInputError(f"unknown bound {str(b)!r}; known bounds: {list(known)}")
            out.append(known[str(b)])
    return out


def _config_warnings(v: Mapping[str, float], algorithm: str) -> list[ConfigWarning]:
    w: list[ConfigWarning] = []
    p, eta, alpha, L = v.get("p"), v.get("eta"), v.get("alpha"), v.get("L")
    if p is not None and p > 0 and eta is not None:
        if alpha is None:
            w.append(
                ConfigWarning(
                    "info",
                    "pull_coefficient",
                    "alpha not given: the pull coefficient alpha*eta/p is not checked",
                )
            )
        else:
            c = alpha * eta / p
            if c > 2:
                w.append(
                    ConfigWarning(
                        "warning",
                        "pull_unstable",
                        f"pull coefficient alpha*eta/p = {_fmt(c)} > 2: a pull step moves x "
                        "past the "
                        "anchor by more than its distance, so repeated pulls diverge",
                        2 - c,
                    )
                )
            elif c > 1:
                w.append(
                    ConfigWarning(
                        "warning",
                        "pull_overshoot",
                        f"pull coefficient alpha*eta/p = {_fmt(c)} in (1, 2]: a pull step "
                        "overshoots "
                        "the anchor (stable, but oscillating around it)",
                        1 - c,
                    )
                )
            else:
                w.append(
                    ConfigWarning(
                        "info",
                        "pull_coefficient",
                        f"pull coefficient alpha*eta/p = {_fmt(c)} <= 1: each pull moves x "
                        "a fraction "
                        "of the way to the anchor (no overshoot)",
                        1 - c,
                    )
                )
    if p is not None and alpha is not None and L is not None:
        g = alpha * L / (1 - p)
        if g > 2:
            w.append(
                ConfigWarning(
                    "warning",
                    "gradient_step_unstable",
                    f"gradient branch alpha*L/(1-p) = {_fmt(g)} > 2: a gradient step of size "
                    "alpha/(1-p) diverges along the sharpest direction of an L-smooth quadratic",
                    2 - g,
                )
            )
        else:
            w.append(
                ConfigWarning(
                    "info",
                    "gradient_step",
                    f"gradient branch alpha*L/(1-p) = {_fmt(g)} <= 2",
                    2 - g,
                )
            )
    if p is not None and p == 0 and eta is not None and eta > 0:
        w.append(
            ConfigWarning("info", "eta_unused", "p = 0: there are no pull steps, eta has no effect")
        )
    if p is not None and p > 0 and eta is not None and eta == 0:
        w.append(
            ConfigWarning(
                "info",
                "pull_noop",
                "eta = 0: pull steps do nothing; a worker skips a fraction p of its gradient "
                "steps and scales the others by 1/(1-p)",
            )
        )
    gamma, mu = v.get("gamma"), v.get("mu")
    if _outer_not_averaging(v):
        w.append(
            ConfigWarning(
                "warning",
                "outer_optimizer",
                f"outer step gamma = {_fmt(gamma)}, mu = {_fmt(mu)}: bounds that assume plain "
                "averaging (gamma = 1, mu = 0) do not cover this outer optimizer",
            )
        )
    T0 = v.get("T0")
    if T0 is not None and T0 > 0:
        w.append(
            ConfigWarning(
                "info",
                "warm_up",
                f"T0 = {_fmt(T0)} DDP warm-up steps are not part of the bounds; they cover the "
                "local phase (give its length as T)",
            )
        )
    if v.get("A") is not None and v["A"] > 1:
        w.append(
            ConfigWarning(
                "info",
                "accumulation",
                f"A = {_fmt(v['A'])} micro-batches per step: sigma^2 must be the noise variance of "
                "one step's accumulated gradient",
            )
        )
    return w


#: outer-optimizer values assumed when a configuration does not give them (plain averaging)
_OUTER_DEFAULTS = {"gamma": 1.0, "mu": 0.0}

#: assumption key of the bounds that cover an outer learning rate and outer momentum
_OUTER_COVERED = "S2o"


def _outer_coverage(v: Mapping[str, float], chosen: Sequence[CompiledBound]) -> list[ConfigWarning]:
    """An info line naming the chosen bounds that cover a non-averaging outer optimizer."""
    if not _outer_not_averaging(v):
        return []
    names = [b.name for b in chosen if any(a.key == _OUTER_COVERED for a in b.assumptions)]
    if not names:
        return []
    return [
        ConfigWarning(
            "info",
            "outer_covered",
            f"outer SGD/momentum (gamma = {_fmt(v.get('gamma', 1.0))}, mu = "
            f"{_fmt(v.get('mu', 0.0))}) is covered by {', '.join(names)} (Theorem 2, "
            "docs/anchor_theorem.md; heavy-ball or PyTorch-Nesterov momentum, SGD inner steps)",
        )
    ]


def _covers(b: CompiledBound, algorithm: str, v: Mapping[str, float]) -> bool:
    """Whether ``b`` is stated for ``algorithm``: DDP is minibatch SGD, and Local SGD with an
    outer optimizer other than averaging is DiLoCo."""
    return (
        algorithm in b.algorithms
        or (algorithm == "ddp" and "sgd" in b.algorithms)
        or (algorithm == "local_sgd" and "diloco" in b.algorithms and _outer_not_averaging(v))
    )


def _outer_not_averaging(v: Mapping[str, float]) -> bool:
    gamma, mu = v.get("gamma"), v.get("mu")
    return (gamma is not None and gamma != 1) or (mu is not None and mu != 0)


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
    if OUTER_AVERAGING in b.assumptions and _outer_not_averaging(v):
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
        rep.alpha = alpha
        at = {**base, step: alpha}
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
    rep.uses_H = "H" in b.parameters
    if rep.uses_H:
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
            rep.max_H_conditions_recommended = _f(
                b.max_H(step=rep.optimal_alpha, **base).conditions
            )
    if eps is not None:
        rep.rounds_to_eps = _f(b.rounds_to_eps(eps, **base))
    return rep


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
    :class:`~theory.bound.Bound` or :class:`~theory.bound_numeric.CompiledBound` objects);
    default: every registered bound whose ``algorithms`` include the algorithm implied by the
    inputs (:func:`infer_algorithm`, or ``algorithm`` if given). ``preset``: a
    :mod:`theory.presets` name whose values ``values`` override; its caveats are reported.
    ``notes``: extra caveats to include as warnings.

    A bound missing a parameter (other than ``alpha``) is skipped with the reason; without
    ``alpha`` a bound is evaluated at its optimal step. Raises
    :class:`~theory.validation.UserInputError` on bad input.
    """
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
        if algorithm not in ALGORITHMS:
            raise UserInputError(f"unknown algorithm {algorithm!r}; known: {list(ALGORITHMS)}")
        why = "given"
    warnings = _config_warnings(v, algorithm) + warnings
    warnings += [ConfigWarning("warning", "note", str(n)) for n in notes]
    chosen = _resolve_bounds(bounds)
    if chosen is None:
        known = bound_cache.registered()
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
    warnings += _outer_coverage(v, chosen)
    checks = [_check_bound(b, v, algorithm, eps) for b in chosen]
    usage = _usage_warnings(v, chosen)
    warnings += usage
    verdict_code, verdict = _verdict(checks, algorithm)
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


#: parameters read by the configuration-level warnings, not only by the bounds
_READ_BY_WARNINGS = frozenset({"gamma", "mu", "T0", "A", "eps", "eta", "p", "alpha", "L"})


def _usage_warnings(v: Mapping[str, float], chosen: Sequence[CompiledBound]) -> list[ConfigWarning]:
    """H > T, and parameters that no checked bound reads (given, then ignored)."""
    w: list[ConfigWarning] = []
    H, T = v.get("H"), v.get("T")
    if H is not None and T is not None and H > T:
        w.append(
            ConfigWarning(
                "warning",
                "H_exceeds_T",
                f"H = {_fmt(H)} > T = {_fmt(T)}: no synchronisation happens within the T "
                "steps, so the workers never average",
            )
        )
    read = set().union(*(map(str, b.parameters) for b in chosen)) if chosen else set()
    read |= {b.step_name for b in chosen}
    unused = [k for k in v if k not in read and (k not in _READ_BY_WARNINGS or k in ("p", "eta"))]
    if chosen and unused:
        names = ", ".join(f"{k} = {_fmt(v[k])}" for k in unused)
        w.append(
            ConfigWarning(
                "warning",
                "ignored_parameters",
                f"{names} given but not used by any checked bound "
                f"({', '.join(b.name for b in chosen)})",
            )
        )
    return w


def _verdict(checks: Sequence[BoundCheck], algorithm: str) -> tuple[str, str]:
    """The one-line answer of :class:`CheckReport` (see ``verdict_code`` there)."""
    done = [b for b in checks if b.status == "evaluated" and b.alpha is not None]
    if not done:
        why = "; ".join(f"{b.name}: {b.reason}" for b in checks) or "no bound selected"
        return "nothing_evaluated", f"nothing checked: every bound was skipped ({why})"
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
        where += f"; at this alpha they hold for H <= {_fmt_h(b.max_H_conditions_given)}"
    return "conditions_fail", where + ")"


# --------------------------------------------------------------------------- text output
def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


def _fmt_h(x: float | None, h_max: float = 1e9) -> str:
    if x is None or math.isnan(x):
        return "none (fails already at H = 1)"
    if x >= h_max:
        return f">= {_fmt(h_max)}"
    return _fmt(x)


def _render(r: CheckReport) -> str:
    out = []
    shown = " ".join(f"{k}={_fmt(val)}" for k, val in r.inputs.items())
    out.append(f"configuration: {shown or '(no parameters given)'}")
    pre = f" (preset {r.preset})" if r.preset else ""
    out.append(f"algorithm: {r.algorithm} ({r.algorithm_reason}){pre}")
    if r.verdict:
        out.insert(0, f"verdict: {r.verdict}")
    for w in r.warnings:
        tag = "WARNING" if w.level == "warning" else "info"
        margin = "" if w.margin is None else f" [margin {_fmt(w.margin)}]"
        out.append(f"  {tag} {w.code}: {w.message}{margin}")
    for b in r.bounds:
        out.append("")
        flag = "derived here" if b.derived_here else "published"
        out.append(f"== {b.name}: {b.title} [{flag}]")
        out.append(f"   source: {b.provenance}")
        for c in b.caveats:
            out.append(f"   caveat: {c}")
        if b.status == "skipped":
            out.append(f"   SKIPPED: {b.reason}")
            continue
        if b.reason:
            out.append(f"   {b.reason}")
        if b.alpha is not None:
            out.append("   conditions:")
            for c in b.conditions:
                out.append(
                    f"     [{'pass' if c.holds else 'FAIL'}] {c.name}: {c.relation}  "
                    f"(margin {_fmt(c.margin)})"
                )
            if not b.conditions:
                out.append("     (none)")
            src = "given" if b.alpha_source == "given" else "optimal, alpha not given"
            verdict = "" if b.conditions_hold else "  -- conditions FAIL: the bound does not apply"
            out.append(f"   bound at alpha = {_fmt(b.alpha)} ({src}): {_fmt(b.value)}{verdict}")
            width = max(len(t.term) for t in b.terms)
            for t in b.terms:
                out.append(f"     {t.term:<{width}}  {_fmt(t.value):>10}  {t.share:6.1f}%")
            out.append(f"   dominant term: {b.dominant_term}")
        out.append(
            f"   recommended alpha (minimises the bound under the conditions): "
            f"{_fmt(b.optimal_alpha)}; largest alpha meeting the conditions: {_fmt(b.max_alpha)}"
        )
        if b.uses_H:
            at = []
            if b.max_H_conditions_given is not None:
                at.append(
                    f"{_fmt_h(b.max_H_conditions_given)} at the given alpha = {_fmt(b.alpha)}"
                )
            if b.max_H_conditions_recommended is not None:
                at.append(
                    f"{_fmt_h(b.max_H_conditions_recommended)} at the recommended alpha = "
                    f"{_fmt(b.optimal_alpha)}"
                )
            if at:
                out.append(f"   max H meeting the conditions: {'; '.join(at)}")
            sched = (
                f"the speed-up schedule alpha = {_fmt(b.schedule_alpha)}"
                if b.schedule_alpha is not None
                else "the bound-minimising alpha at each H"
            )
            out.append(
                f"   max H for linear speed-up: {_fmt_h(b.max_H_speedup)} (at {sched}, which "
                f"allows H <= {_fmt_h(b.max_H_conditions)} under the conditions)"
            )
        else:
            out.append("   max H: not applicable (the bound does not depend on H)")
        if b.rounds_to_eps is not None:
            out.append(
                f"   communication rounds to reach eps = {_fmt(r.eps)} (optimal alpha): "
                f"{_fmt(b.rounds_to_eps)}"
            )
        if b.notes:
            out.append(f"   notes: {b.notes}")
    return "\n".join(out)


# --------------------------------------------------------------------------- config files
def load_config(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON mapping of parameters (project or authors' names) and options.

    Allowed keys: every parameter, its aliases, and ``algorithm``, ``bound``/``bounds``,
    ``preset``. A malformed file or an unknown key raises :class:`UserInputError` naming
    the file (and the key).
    """
    path = Path(path)
    data = read_mapping_file(path, "config file")
    out: dict[str, Any] = {}
    for key, val in data.items():
        key = str(key)
        if key in _CONFIG_EXTRA_KEYS:
            out[key] = val
            continue
        if key not in PARAMS and key not in ALIASES:
            raise UserInputError(
                f"config file '{path}': unknown key '{key}'; allowed keys are the parameters "
                f"{sorted(PARAMS)}, their aliases {sorted(ALIASES)}, and {list(_CONFIG_EXTRA_KEYS)}"
            )
        if isinstance(val, str):
            try:
                val = float(val)
            except ValueError:
                raise UserInputError(
                    f"config file '{path}': key '{key}' has the non-numeric value {val!r}"
                ) from None
        out[key] = val
    return out


# --------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``palsgd check``."""
    g = parser.add_argument_group(
        "parameters", "problem constants and hyperparameters (authors' flag names accepted)"
    )
    for name, extra in _FLAGS:
        spec = PARAMS[name]
        g.add_argument(
            f"--{name}",
            *extra,
            dest=name,
            type=float,
            default=None,
            metavar="X",
            help=f"{spec.meaning}; allowed {spec.allowed}",
        )
    parser.add_argument(
        "--config", metavar="FILE", help="YAML or JSON file of parameters (flags override it)"
    )
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help=f"named hyperparameter setting, overridden by the file and flags: {preset_names()}",
    )
    parser.add_argument(
        "--bound",
        action="append",
        metavar="NAME",
        help="check this bound (repeatable); default: every bound covering the "
        "configuration's algorithm",
    )
    parser.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        help="the algorithm the configuration runs (default: inferred from p and H)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--list-presets", action="store_true", help="list the presets and exit")


def run(args: argparse.Namespace) -> int:
    """Run ``palsgd check``: 0 when some bound was evaluated (whatever the report says),
    2 when every bound was skipped (the report is printed, then the reason)."""
    if args.list_presets:
        from theory.presets import PRESETS

        if args.json:
            print(json.dumps([p.to_dict() for p in PRESETS.values()], indent=2))
        else:
            for p in PRESETS.values():
                vals = " ".join(f"{k}={_fmt(float(x))}" for k, x in p.values.items())
                print(f"{p.name}: {p.title}\n  {vals}\n  source: {p.source}")
        return 0
    values: dict[str, Any] = {}
    preset, bounds, algorithm = None, None, None
    if args.config:
        cfg = load_config(args.config)
        preset = cfg.pop("preset", None)
        algorithm = cfg.pop("algorithm", None)
        b = cfg.pop("bounds", None)
        b1 = cfg.pop("bound", None)
        if b is not None and b1 is not None:
            raise UserInputError(f"config file '{args.config}': give 'bound' or 'bounds', not both")
        b = b if b is not None else b1
        if b is not None:
            bounds = [b] if isinstance(b, str) else [str(x) for x in b]
        try:
            values.update(canonicalize(cfg))
            validate(values)
        except UserInputError as exc:
            raise UserInputError(f"config file '{args.config}': {exc}") from None
    for name, _ in _FLAGS:
        val = getattr(args, name)
        if val is not None:
            values[name] = val
    preset = args.preset or preset
    bounds = args.bound or bounds
    algorithm = args.algorithm or algorithm
    report = check(values, bounds, algorithm=algorithm, preset=preset)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text())
    if report.verdict_code == "nothing_evaluated":
        missing = sorted(
            {m for b in report.bounds for m in _missing_names(b.reason)},
        )
        hint = f": give {', '.join('--' + m for m in missing)}" if missing else ""
        raise UserInputError(f"{report.verdict}{hint}")
    return 0


def _missing_names(reason: str) -> list[str]:
    """The names in a ``"missing parameter(s) ['zeta']"`` reason."""
    if not reason.startswith("missing parameter(s) "):
        return []
    return [
        x.strip(" '[]")
        for x in reason[len("missing parameter(s) ") :].split(",")
        if x.strip(" '[]")
    ]

"""Configuration-level findings of ``palsgd check``: stability of the PALSGD steps (pull
coefficient ``alpha*eta/p``, gradient branch ``alpha L/(1-p)``), parameters without effect,
the outer optimizer, warm-up, accumulation, ``H > T`` and parameters no checked bound reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from theory.algorithm import PULL_EDGE, pull_stability
from theory.bound.numeric import CompiledBound
from theory.check.render import fmt as _fmt
from theory.check.report import ConfigWarning

__all__ = ["config_warnings", "outer_coverage", "usage_warnings", "outer_not_averaging"]


def config_warnings(v: Mapping[str, float], algorithm: str) -> list[ConfigWarning]:
    """Configuration-level findings: the pull and gradient steps' stability, parameters
    without effect, the outer optimizer, warm-up and accumulation."""
    return [*_pull_warnings(v), *_gradient_warnings(v), *_setting_warnings(v)]


#: the check's code of each verdict on the pull coefficient (theory.algorithm.pull_stability)
_PULL_CODES = {
    "unstable": ("warning", "pull_unstable"),
    "overshoot": ("warning", "pull_overshoot"),
    "ok": ("info", "pull_coefficient"),
}


def _pull_warnings(v: Mapping[str, float]) -> list[ConfigWarning]:
    """The pull coefficient ``alpha*eta/p`` and the algorithm's verdict on it
    (:func:`theory.algorithm.pull_stability`, the verdict ``palsgd train`` takes too)."""
    p, eta, alpha = v.get("p"), v.get("eta"), v.get("alpha")
    if p is None or not p > 0 or eta is None:
        return []
    if alpha is None:
        return [
            ConfigWarning(
                "info",
                "pull_coefficient",
                "alpha not given: the pull coefficient alpha*eta/p is not checked",
            )
        ]
    verdict = pull_stability(alpha, eta, p)
    c = verdict.coefficient
    level, code = _PULL_CODES[verdict.status]
    margin = PULL_EDGE - c if verdict.status == "unstable" else 1 - c
    return [ConfigWarning(level, code, verdict.message, margin)]


def _gradient_warnings(v: Mapping[str, float]) -> list[ConfigWarning]:
    """The gradient branch ``alpha L/(1-p)``: stable on an L-smooth quadratic iff <= 2."""
    w: list[ConfigWarning] = []
    p, alpha, L = v.get("p"), v.get("alpha"), v.get("L")
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
    return w


def _setting_warnings(v: Mapping[str, float]) -> list[ConfigWarning]:
    """Parameters without effect, the outer optimizer, warm-up and accumulation."""
    w: list[ConfigWarning] = []
    p, eta = v.get("p"), v.get("eta")
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
    if outer_not_averaging(v):
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


#: assumption key of the bounds that cover an outer learning rate and outer momentum
_OUTER_COVERED = "S2o"


def outer_coverage(v: Mapping[str, float], chosen: Sequence[CompiledBound]) -> list[ConfigWarning]:
    """An info line naming the chosen bounds that cover a non-averaging outer optimizer."""
    if not outer_not_averaging(v):
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


def outer_not_averaging(v: Mapping[str, float]) -> bool:
    gamma, mu = v.get("gamma"), v.get("mu")
    return (gamma is not None and gamma != 1) or (mu is not None and mu != 0)


#: parameters read by the configuration-level warnings, not only by the bounds
_READ_BY_WARNINGS = frozenset({"gamma", "mu", "T0", "A", "eps", "eta", "p", "alpha", "L"})


def usage_warnings(v: Mapping[str, float], chosen: Sequence[CompiledBound]) -> list[ConfigWarning]:
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

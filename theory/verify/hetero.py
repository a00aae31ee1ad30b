"""The verifier's second exact oracle: heterogeneous instances (:mod:`theory.lower.hetero`).

On quadratics that share one Hessian the workers' mean under Local SGD is minibatch SGD, so
the heterogeneity and drift terms of a Local SGD bound cannot be shown false there
(:mod:`theory.verify.exact`). The two-curvature instances of :mod:`theory.lower.hetero` have
different Hessians and bounded heterogeneity, with ``sigma = 0`` and initial gap 0; their
exact value is a lower bound on the worst case over the class. A bound (or a negative
control) that is below it by more than ``REL_TOL`` at a design inside its conditions is
**violated** there; otherwise it is **not shown false** on these instances.

Which bounds (:func:`coverage`): decided by the bound's assumptions, never by the symbols of
its formula. A bound admits heterogeneous workers unless it declares identical workers
explicitly (the i.i.d. assumption ``A3iid``); every such bound for Local SGD, DiLoCo or
PALSGD (independent or shared coins) is checked here, whether or not its formula mentions
``zeta``: a bound that drops its heterogeneity terms is then compared with instances whose
heterogeneity it ignores. Minibatch SGD and all-reduce algorithms are not: their workers
take every gradient at one common point, so the mean step is ``grad f`` plus noise on any
instance and heterogeneity has no effect to test.

Designs (:mod:`theory.verify.hetero_designs`): ``sigma = 0``, ``F0 = 0`` (every term
without ``zeta`` vanishes), random ``L``, ``K``, ``H``, ``T``, ``p``, ``eta``, ``gamma``,
``mu``, a step up to the bound's largest and the curvature ``b`` of the second group drawn
freely (not from the grid of the registered lower bound), a block of long-horizon designs
where the family is worst (``T`` up to ``2^22``, small steps, ``b`` near ``-L``), then a
few rounds of perturbing the worst ones (step, ``b``, ``H``, ``T``, ``p``, ``eta``). A bound
with an outer optimiser is checked under SGD momentum and under Nesterov (it claims both);
one that averages the anchors is compared on the anchors. Reproduce a design with
:func:`at` (the command in the report).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.bound import Bound
from theory.bounds import get
from theory.lower import get_lower
from theory.verify import hetero_designs, pipeline
from theory.verify.controls import controls_of
from theory.verify.oracle import REL_TOL, family_of
from theory.verify.pipeline import Design
from theory.verify.records import DesignPoint, PointValue, Row
from theory.verify.untested import UNTESTED

__all__ = [
    "HeteroResult", "QUICK", "applies", "at", "coverage", "designs_for", "lower_at", "judge",
    "verify_hetero",
]  # fmt: skip

LOWER = "local_sgd_heterogeneity_lower"
VIOLATED, NOT_SHOWN_FALSE = "violated", "not shown false"
#: the sizes of :func:`verify_hetero` for ``palsgd verify --quick``
QUICK = {"n": 8, "free": 4, "long": 4, "rounds": 1, "top": 2, "k": 2}
#: the design keys passed to the lower bound (besides ``alpha``)
_KEYS = ("L", "zeta", "K", "H", "T", "p", "eta", "gamma", "mu")


@dataclass
class HeteroResult:
    """The check of one bound (or control) on the heterogeneous instances."""

    bound: str
    verdict: str
    designs: int
    inside: int
    worst_ratio: float | None
    worst_design: DesignPoint = field(default_factory=dict)
    worst_command: str = ""
    elapsed_s: float = 0.0

    def to_dict(self) -> Row:
        return asdict(self)


def coverage(bound: Bound) -> str:
    """``""`` when the heterogeneous instances test ``bound``, else why not (module docstring).

    Decided from the assumptions and the bound's algorithm: a bound declaring identical
    workers (``A3iid``) is not tested; any other bound for an algorithm the instances run
    (the algorithms of their lower bound, whose workers take local steps) is, whatever its
    formula."""
    fam = family_of(bound)
    if fam.iid:
        return "declares identical workers (assumption A3iid)"
    if fam.algorithm not in get_lower(LOWER).algorithms:
        if fam.spec.local:
            return f"the heterogeneous instances do not run its algorithm ({fam.algorithm})"
        return (
            f"its algorithm ({fam.algorithm}) takes every gradient at one common point, so "
            "heterogeneity has no effect on the iterates"
        )
    return ""


def applies(bound: Bound) -> bool:
    """Whether the heterogeneous instances test ``bound`` (:func:`coverage` is empty)."""
    return not coverage(bound)


def _args(bound: Bound, d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The bound's parameters at the designs; a design without a step gets a placeholder
    (and is outside by :func:`_inside`)."""
    args = {k: v for k, v in d.items() if k in bound.parameters}
    args["alpha"] = np.where(np.isfinite(d["alpha"]), d["alpha"], 1.0)
    return args


def _inside(bound: Bound, d: dict[str, np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        held = np.asarray(bound.conditions_hold(**_args(bound, d)), dtype=bool)
    return held & np.isfinite(d["alpha"])


def _value(bound: Bound, d: dict[str, np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(bound.evaluate(**_args(bound, d)), dtype=float)


def designs_for(
    bound: Bound, n: int, rng: np.random.Generator, *, free: int = 0, long: int = 0
) -> dict[str, np.ndarray]:
    """``n`` random designs for ``bound`` (``sigma = F0 = 0``) on the registered grid of
    ``b``, ``free`` more with ``b`` free and ``long`` long-horizon ones
    (:mod:`theory.verify.hetero_designs`), each with its step."""
    parts = [
        hetero_designs.draw(bound, n, rng, grid=True),
        hetero_designs.draw(bound, free, rng),
        hetero_designs.long_horizon(bound, long, rng),
    ]
    parts = [p for p in parts if p]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def lower_at(bound: Bound, d: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
    """The exact value on the instances at each design in ``mask`` (NaN elsewhere); the
    larger over the outer optimisers the bound claims (the ``"hetero"`` oracle,
    :mod:`theory.verify.oracle_hessians`)."""
    design = Design(family_of(bound).spec, "two_curvature", d, bound=bound, active=mask)
    return pipeline.measure(design, "hetero").measured


def judge(bound: Bound, d: dict[str, np.ndarray], lower: np.ndarray) -> HeteroResult:
    """The verdict of ``bound`` against the exact values ``lower`` at the designs ``d``."""
    inside = _inside(bound, d) & np.isfinite(lower)
    value = _value(bound, d)
    ratio = np.where(inside & (value > 0), lower / np.where(value > 0, value, 1.0), 0.0)
    ratio = np.where(inside & (value <= 0) & (lower > 0), np.inf, ratio)
    res = HeteroResult(bound.name, NOT_SHOWN_FALSE, int(lower.size), int(inside.sum()), None)
    if not inside.any():
        res.verdict = UNTESTED
    else:
        i = int(np.argmax(ratio))
        res.worst_ratio = float(ratio[i])
        keys = ("alpha", *_KEYS, *(("b",) if "b" in d else ()))
        res.worst_design = {k: float(d[k][i]) for k in keys}
        shown = ", ".join(f"{k}={v:.6g}" for k, v in res.worst_design.items())
        res.worst_command = (
            f"python -c \"from theory.verify.hetero import at; at('{bound.name}', {shown})\""
        )
        if res.worst_ratio > 1.0 + REL_TOL:
            res.verdict = VIOLATED
    return res


def verify_hetero(
    bound: Bound, *, n: int = 24, free: int = 12, long: int = 12, rounds: int = 2,
    top: int = 4, k: int = 3, seed: int = 0,
) -> tuple[HeteroResult, dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """Check ``bound`` on ``n`` random designs on the grid of ``b``, ``free`` with ``b``
    free and ``long`` long-horizon ones, plus ``rounds`` of ``top x k`` perturbations of the
    worst; returns the result, the designs and the exact values (for the controls)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    d = designs_for(bound, n, rng, free=free, long=long)
    lower = lower_at(bound, d, _inside(bound, d))
    for _ in range(rounds):
        value = _value(bound, d)
        score = np.where(
            np.isfinite(lower) & (value > 0), lower / np.where(value > 0, value, 1), -1
        )
        worst = np.argsort(-score)[:top]
        worst = worst[score[worst] > 0]
        if worst.size == 0:  # no design with a finite ratio to climb from
            break
        new = hetero_designs.perturb(bound, d, worst, rng, k)
        if new["alpha"].size == 0:
            break
        low_new = lower_at(bound, new, _inside(bound, new))
        d = {key: np.concatenate([d[key], new[key]]) for key in d}
        lower = np.concatenate([lower, low_new])
    res = judge(bound, d, lower)
    res.elapsed_s = time.perf_counter() - t0
    return res, d, lower


def at(name: str, **design: float) -> PointValue:
    """Print and return the exact value, the bound, their ratio and whether the design is
    inside the bound's conditions, at one design (the command of the report).

    ``name``: a registered bound or a negative control of one (``parent~kind[i]``).
    ``design``: ``alpha, L, zeta, K, H, T`` and, where the bound uses them, ``p, eta, gamma,
    mu`` (``sigma`` and ``F0`` are 0 on these instances); ``b``: the second group's
    curvature as a fraction of ``L`` (without it, the largest value over the grid
    :data:`theory.lower.hetero.B_GRID`).
    """
    parent = name.split("~", 1)[0]
    bound = get(parent)
    if name != parent:
        controls = {c.bound.name: c.bound for c in controls_of(bound)}
        bound = controls[check_choice("control", name, sorted(controls))]
    missing = sorted({"alpha", "L", "zeta", "K", "H", "T"} - set(design))
    if missing:
        raise UserInputError(f"at({name!r}): missing design value(s) {missing}")
    d = {k: np.array([float(v)]) for k, v in design.items()}
    d.setdefault("sigma", np.zeros(1))
    d.setdefault("F0", np.zeros(1))
    for key, default in (("p", 0.0), ("eta", 0.0), ("gamma", 1.0), ("mu", 0.0)):
        d.setdefault(key, np.array([default]))
    exact = float(lower_at(bound, d, np.ones(1, dtype=bool))[0])
    value = float(_value(bound, d)[0])
    inside = bool(_inside(bound, d)[0])
    ratio = exact / value if value > 0 else math.inf
    out = {"exact": exact, "bound": value, "ratio": ratio, "inside": inside}
    where = "" if inside else " (outside the bound's conditions: not a test of it)"
    print(f"{name}: exact {exact:.6g}, bound {value:.6g}, ratio {ratio:.6g}{where}")
    return out

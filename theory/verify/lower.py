"""Lower bounds as statements the verifier can refute (``palsgd verify --bounds NAME``).

A lower bound ``LB`` (:mod:`theory.lower`) claims that the worst case of
``(1/T) sum_t E||grad f(xbar_t)||^2`` over its assumption class is at least ``LB``, and it
is proved by the instances it is attained on. At each design
(:mod:`theory.verify.lower_designs`) the verifier computes what is attained exactly
(:mod:`theory.verify.lower_witness`): the value of the bound's own instances, by code of
its own, and the worst case of the whole class where it is known (the descent lemma; 0 at
a minimiser). The ratio claimed/attained above ``1 + REL_TOL`` at one design makes the
lower bound **violated** there: its own instances attain less than it claims, or no
instance of the class can attain it. Otherwise it is **not shown false**. A search
perturbs the worst designs for a few rounds.

Negative controls (:func:`controls_of`): the bound x 1.5, x 2, and each term removed whose
removal makes it larger (a term that is negative somewhere: removing a nonnegative term of a
lower bound only weakens it, so that is no false variant); for a bound attained on the
two-curvature instances, the region's share of the heterogeneity budget removed (the
instances then leave the class). They are judged on the parent's designs; the detection
power counts them with the upper bounds' (:func:`theory.verify.controls.power`).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.lower import get_lower
from theory.verify.controls import Control
from theory.verify.lower_designs import designs, perturb
from theory.verify.lower_witness import hetero_witness, known_worst_case, quadratic_witness
from theory.verify.oracle import REL_TOL
from theory.verify.records import DesignPoint, LowerDesign, PointValue, Row
from theory.verify.untested import UNTESTED

__all__ = [
    "LowerResult", "ScaledLower", "QUICK", "at", "controls_of", "evaluate_claims", "judge",
    "verify_lower",
]  # fmt: skip

VIOLATED, NOT_SHOWN_FALSE = "violated", "not shown false"
#: a claim above 0 counts only beyond this times the scale ``2 L F0 + sigma^2 + zeta^2`` of a
#: design (a value that is 0 in exact arithmetic may come out as 1e-33)
ATOL = 1e-12
OWN, KNOWN = "its own instances", "the known worst case of the class"
#: the sizes of :func:`verify_lower` for ``palsgd verify --quick``
QUICK = {"scale": 0.5, "rounds": 1, "top": 2, "k": 2}
#: designs per family at scale 1 (the two-curvature instances cost a step-by-step run each)
SIZES = {"quadratic": 192, "two_curvature": 24}
_KEYS = ("alpha", "L", "sigma", "F0", "zeta", "K", "H", "T", "p", "eta", "gamma", "mu")
_TEXT_KEYS = ("outer", "measured", "coins")


@dataclass(frozen=True, eq=False)
class ScaledLower:
    """A false variant of a lower bound: ``factor`` times it, or it without term ``drop``."""

    parent: Any
    name: str
    factor: float = 1.0
    drop: int | None = None

    def __getattr__(self, attr: str) -> Any:  # parameters, algorithms, attained_on, ...
        return getattr(self.parent, attr)

    def evaluate(self, **values: Any) -> Any:
        if self.drop is None:
            return self.factor * np.asarray(self.parent.evaluate(**values), dtype=float)
        vals = self.parent.term_values(**values)
        return sum(v for i, v in enumerate(vals) if i != self.drop)


@dataclass
class LowerResult:
    """The check of one lower bound (or control): the largest ratio claimed/attained."""

    bound: str
    verdict: str
    designs: int
    inside: int
    worst_ratio: float | None
    worst_claimed: float | None = None
    worst_attained: float | None = None
    refuted_by: str = ""
    worst_design: LowerDesign = field(default_factory=dict)
    worst_command: str = ""
    elapsed_s: float = 0.0

    def to_dict(self) -> Row:
        return asdict(self)


def _family(lb: Any) -> str:
    """The instances ``lb`` is attained on (``""``: none declared; then only the known
    worst cases of the class can refute it)."""
    return getattr(lb, "attained_on", "")


def _args(lb: Any, d: LowerDesign) -> DesignPoint:
    """The keyword arguments ``lb.evaluate`` takes at design ``d``."""
    keys = set(lb.parameters) | set(getattr(lb, "optional", {}))
    args = {k: d[k] for k in keys}
    if _family(lb) == "two_curvature":
        args.update(measured=d["measured"], coins=d["coins"])
        if d["outer"] != "average":
            args["outer"] = d["outer"]
    return args


def evaluate_claims(lb: Any, ds: list[LowerDesign]) -> np.ndarray:
    """``lb`` at every design (vectorised for a closed form, one by one otherwise)."""
    if not ds:
        return np.zeros(0)
    if _family(lb) != "two_curvature":
        cols = {k: np.array([d[k] for d in ds]) for k in lb.parameters}
        return np.asarray(lb.evaluate(**cols), dtype=float) * np.ones(len(ds))
    return np.array([float(lb.evaluate(**_args(lb, d))) for d in ds])


def attained(lb: Any, ds: list[LowerDesign]) -> tuple[np.ndarray, np.ndarray]:
    """``(own, known)`` at every design: the exact value of ``lb``'s instances and the known
    worst case of the class (``nan`` where none applies)."""
    if not ds:
        return np.zeros(0), np.zeros(0)
    cols = {k: np.array([d[k] for d in ds]) for k in _KEYS}
    if _family(lb) == "quadratic":
        own = quadratic_witness(cols)
    elif _family(lb) == "two_curvature":
        own = hetero_witness(ds, b_grid=tuple(lb.b_grid))
    else:
        own = np.full(len(ds), np.nan)
    known = known_worst_case(cols, heterogeneous=_family(lb) == "two_curvature")
    return own, known


def refuted_by(claimed: float, own: float, known: float) -> str:
    """Which oracle attains less than ``claimed`` (both, when both do)."""
    tol = 1 + REL_TOL
    which = [w for w, v in ((OWN, own), (KNOWN, known)) if np.isfinite(v) and claimed > v * tol]
    return " and ".join(which)


def scale_of(ds: list[LowerDesign]) -> np.ndarray:
    """The scale ``2 L F0 + sigma^2 + zeta^2`` of each design (of :data:`ATOL`)."""
    return np.array([2 * d["L"] * d["F0"] + d["sigma"] ** 2 + d["zeta"] ** 2 for d in ds])


def _ratios(claimed, own, known, ds):
    """claimed/attained per design (``nan``: no test there), attained the smaller of the
    exact value of the bound's own instances and the known worst case."""
    scale = scale_of(ds)
    best = np.fmin(own, known)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(best > 0, claimed / best, np.where(claimed > ATOL * scale, np.inf, 0.0))
    r = np.where(np.isfinite(best) & np.isfinite(claimed), r, np.nan)
    return r


def judge(lb: Any, ds: list[LowerDesign], own, known, claimed=None) -> LowerResult:
    """The verdict of ``lb`` at the designs ``ds`` against the attained values."""
    claimed = evaluate_claims(lb, ds) if claimed is None else claimed
    with np.errstate(all="ignore"):
        r = _ratios(claimed, own, known, ds)
    res = LowerResult(lb.name, NOT_SHOWN_FALSE, len(ds), int(np.isfinite(r).sum()), None)
    if not res.inside:
        res.verdict = UNTESTED
    else:
        i = int(np.nanargmax(r))
        res.worst_ratio = float(r[i])
        res.worst_claimed = float(claimed[i])
        res.worst_attained = float(np.fmin(own[i], known[i]))
        res.worst_design = dict(ds[i])
        res.worst_command = command(lb.name, ds[i], getattr(lb, "bound_file", None))
        if res.worst_ratio > 1 + REL_TOL:
            res.verdict = VIOLATED
            res.refuted_by = refuted_by(claimed[i], own[i], known[i])
    return res


def verify_lower(
    lb: Any, *, scale: float = 1.0, rounds: int = 2, top: int = 3, k: int = 2, seed: int = 0
) -> tuple[LowerResult, list[LowerDesign], tuple[np.ndarray, np.ndarray]]:
    """Check ``lb`` on ``scale`` x :data:`SIZES` designs plus ``rounds`` of ``top x k``
    perturbations of the worst; returns the result, the designs and the attained values
    (for the controls)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    family = _family(lb) or "quadratic"
    ds = designs(family, rng, max(8, int(SIZES[family] * scale)))
    claimed = evaluate_claims(lb, ds)
    own, known = attained(lb, ds)
    for _ in range(rounds):
        with np.errstate(all="ignore"):
            r = _ratios(claimed, own, known, ds)
        order = [int(i) for i in np.argsort(-np.nan_to_num(r, nan=-1.0))[:top]]
        new = [e for i in order for e in perturb(ds[i], rng, k)]
        o2, k2 = attained(lb, new)
        ds, claimed = ds + new, np.concatenate([claimed, evaluate_claims(lb, new)])
        own, known = np.concatenate([own, o2]), np.concatenate([known, k2])
    res = judge(lb, ds, own, known, claimed)
    res.elapsed_s = time.perf_counter() - t0
    return res, ds, (own, known)


def controls_of(lb: Any, ds: list[LowerDesign] | None = None) -> list[Control]:
    """The negative controls of ``lb`` (module docstring); a term counts as removable when
    it is negative at one of the designs ``ds`` (default: a fresh quadratic sample)."""
    out = [
        Control(lb.name, "scaled", None, ScaledLower(lb, f"{lb.name}~scaled[{f:g}]", factor=f))
        for f in (1.5, 2.0)
    ]
    terms = getattr(lb, "terms", ())
    if terms:
        ds = ds if ds is not None else designs("quadratic", np.random.default_rng(0), 64)
        cols = {k: np.array([d[k] for d in ds]) for k in lb.parameters}
        for i, v in enumerate(lb.term_values(**cols)):
            if np.any(np.asarray(v) < 0):
                name = f"{lb.name}~removed[{i}]"
                out.append(Control(lb.name, "removed", terms[i][0], ScaledLower(lb, name, drop=i)))
    if getattr(lb, "charge_region", False):
        name = f"{lb.name}~removed[region]"
        variant = dataclasses.replace(lb, name=name, charge_region=False)
        out.append(Control(lb.name, "removed", "the region's (L - b) R/2", variant))
    return out


def command(name: str, d: LowerDesign, bound_file: str | None = None) -> str:
    """The one-line command that evaluates design ``d`` again (``bound_file``: the file
    that defines the bound, for a lower bound of a bound file)."""
    shown = " ".join(f"{k}={d[k]}" if k in _TEXT_KEYS else f"{k}={d[k]:.17g}" for k in d)
    if "~" in name:
        kw = ", ".join(f"{k}={d[k]!r}" for k in d)
        return f'python -c "from theory.verify.lower import at; at({name!r}, {kw})"'
    src = f" --bound-file {shlex.quote(bound_file)}" if bound_file else ""
    return f"palsgd verify{src} --bounds {name} --at '{shown}'"


def _resolve(name: str) -> Any:
    parent = name.split("~", 1)[0]
    lb = get_lower(parent)
    if name == parent:
        return lb
    ctrls = {c.bound.name: c.bound for c in controls_of(lb)}
    return ctrls[check_choice("control", name, sorted(ctrls))]


def parse_at(text: str) -> LowerDesign:
    """``'alpha=0.1 L=1 ...'`` into a design (missing keys: no noise, gap or heterogeneity,
    ``K = H = 1``, no pulls, outer averaging, iterates, independent coins)."""
    d: LowerDesign = dict(
        sigma=0.0, F0=0.0, zeta=0.0, K=1, H=1, p=0.0, eta=0.0, gamma=1.0, mu=0.0,
        outer="average", measured="iterates", coins="independent",
    )  # fmt: skip
    for item in text.replace(",", " ").split():
        key, sep, val = item.partition("=")
        if not sep or key not in (*_KEYS, *_TEXT_KEYS):
            raise UserInputError(
                f"--at: cannot read {item!r}; expected key=value with keys {[*_KEYS, *_TEXT_KEYS]}"
            )
        if key in _TEXT_KEYS:
            d[key] = val.strip("'\"")
            continue
        try:
            d[key] = float(val)
        except ValueError:
            raise UserInputError(f"--at: {key} = {val!r} is not a number") from None
        if not math.isfinite(d[key]) or d[key] < 0:
            raise UserInputError(f"--at: {key} = {val} must be a finite nonnegative number")
    for need in ("alpha", "L", "T"):
        if need not in d:
            raise UserInputError(f"--at: {need} is required")
    for k in ("K", "H", "T"):
        if d[k] < 1 or d[k] != int(d[k]):
            raise UserInputError(f"--at: {k} = {d[k]:g} must be a positive integer")
        d[k] = int(d[k])
    return d


def at(name: str, bound: Any = None, **design: Any) -> PointValue:
    """Print and return, at one design, what the lower bound ``name`` (registered, or a
    control ``parent~kind[...]``; or ``bound`` itself, a lower bound of a bound file)
    claims, what its own instances attain exactly, the known worst case of the class, and
    whether the claim is refuted there."""
    lb = bound if bound is not None else _resolve(name)
    d = parse_at(" ".join(f"{k}={v}" for k, v in design.items()))
    claimed = float(evaluate_claims(lb, [d])[0])
    own, known = attained(lb, [d])
    res = judge(lb, [d], own, known, np.array([claimed]))
    out = {
        "claimed": claimed,
        "own_instances": float(own[0]),
        "known_worst_case": None if math.isnan(known[0]) else float(known[0]),
        "ratio": res.worst_ratio,
        "violated": res.verdict == VIOLATED,
        "refuted_by": res.refuted_by,
    }
    kw = "" if out["known_worst_case"] is None else f", known worst case {known[0]:.10g}"
    print(f"{name}: claims {claimed:.10g}; its own instances attain {own[0]:.10g}{kw}")
    ratio = "-" if res.worst_ratio is None else f"{res.worst_ratio:.6g}"
    verdict = f"VIOLATED (refuted by {res.refuted_by})" if out["violated"] else "not violated here"
    print(f"  claimed/attained {ratio}: {verdict}")
    return out

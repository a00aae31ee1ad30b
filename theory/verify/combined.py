"""The verifier's joint exact stages: the sources of a bound acting together.

The exact stage puts one source at a time on quadratics with one Hessian, and the
heterogeneous stage (:mod:`theory.verify.hetero`) puts heterogeneity alone (``F0 = 0``,
``sigma = 0``) on two-curvature instances. A statement that trades slack in one term for
sharpness in another passes both; and with one Hessian Local SGD's mean is minibatch SGD
while the heterogeneous instances have no noise, so no oracle ever sees a noise drift term.
Two stages here close that, on the instances of :mod:`theory.verify.joint` (exact values
from the map's engine, :func:`theory.compare.averages.exact_averages`):

- ``gap``: **initial gap and heterogeneity together**: started at ``x0 = start * c`` away
  from the optimum, so ``F0 > 0`` and ``zeta > 0`` at once (``sigma = 0``);
- ``noise``: **per-worker Hessians with noise**: Rademacher noise ``+-s`` (``sigma = s``),
  started at the optimum, the noise's reach charged to the heterogeneity budget; the search
  climbs towards designs where the noise terms carry at least half of the bound.

Each bound the heterogeneous stage covers (:func:`theory.verify.hetero.coverage`) is judged
at the instance's own ``F0``, ``sigma`` and ``zeta`` on random and long-horizon designs
(:mod:`theory.verify.hetero_designs`: ``b``, ``start``, ``noise`` free), then rounds of
perturbing the worst. A design with a ratio above ``1 + REL_TOL`` inside the bound's
conditions makes it **violated**: the instance is explicit and in the class, so the
statement is false. A bound with outer momentum is judged under each outer update it claims
(one row per update). Reproduce a design with :func:`at` (the command of the report).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import UserInputError
from core.validation import check_choice
from theory.bound import Bound
from theory.bounds import get
from theory.verify import hetero_designs, pipeline
from theory.verify.controls import controls_of
from theory.verify.hetero import NOT_SHOWN_FALSE, VIOLATED, HeteroResult, _inside, _value
from theory.verify.joint import heterogeneity_scale, start_profile
from theory.verify.oracle import REL_TOL, family_of
from theory.verify.pipeline import Design
from theory.verify.records import DesignPoint, PointValue, Row
from theory.verify.untested import UNTESTED

__all__ = [
    "STAGES", "QUICK", "SIZES", "JointResult", "exact_at", "judge", "verify_joint", "at",
    "COMBINED_COLUMNS", "combined_lines",
]  # fmt: skip

#: the joint stages: name -> what acts together
STAGES = {"gap": "initial gap + heterogeneity", "noise": "noise + per-worker Hessians"}
#: default sizes per stage (random, long-horizon, search rounds, top designs, moves each)
SIZES = {
    "gap": {"n": 16, "long": 24, "rounds": 3, "top": 5, "k": 3},
    "noise": {"n": 32, "long": 0, "rounds": 3, "top": 4, "k": 3},
}
#: the sizes for ``palsgd verify --quick``
QUICK = {"n": 4, "long": 2, "rounds": 1, "top": 2, "k": 2}
#: more workers cost ``K^2`` in the engine; the instances need only two groups
MAX_K = 3
#: the design values shown and passed to :func:`at`
_SHOWN = ("alpha", "L", "zeta", "K", "H", "T", "p", "eta", "gamma", "mu", "b", "start", "noise")
#: columns of ``combined.csv`` (one row per bound and joint stage)
COMBINED_COLUMNS = (
    "bound", "stage", "verdict", "designs", "inside", "worst_ratio", "worst_F0",
    "worst_sigma", "elapsed_s", "worst_command",
)  # fmt: skip


@dataclass
class JointResult(HeteroResult):
    """The check of one bound (or control) in one joint stage (:data:`STAGES`)."""

    stage: str = ""
    worst_F0: float | None = None
    worst_sigma: float | None = None


def _expand(bound: Bound, d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One row per design and outer update the bound claims (``outer``: strings)."""
    outers = tuple(bound.outers)
    n = d["alpha"].size
    out = {k: np.repeat(v, len(outers)) for k, v in d.items()}
    out["outer"] = np.tile(np.array(outers, dtype=object), n)
    return out


def exact_at(bound: Bound, d: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
    """The exact value at each row in ``mask`` (NaN elsewhere, 0 where the run leaves every
    region; the ``"joint"`` oracle, :mod:`theory.verify.oracle_hessians`); sets the rows'
    ``F0`` and ``sigma`` to the instance's."""
    design = Design(family_of(bound).spec, "joint", d, bound=bound, active=mask)
    m = pipeline.measure(design, "joint")
    for key in ("F0", "sigma"):
        d[key][mask] = m.companions[key][mask]
    return m.measured


#: the starts tried per row by :func:`solve_starts`: both signs, ``1e-4 .. 1e2`` times ``c``
_STARTS = np.concatenate([-np.geomspace(1e-4, 1e2, 41), np.geomspace(1e-4, 1e2, 41)])


def _instance_args(bound: Bound, d: dict[str, np.ndarray], i: int, fam: Any) -> DesignPoint:
    """The keyword arguments of :func:`theory.verify.joint.joint_instance` at row ``i``
    (``fam``: the bound's :func:`theory.verify.oracle.family_of`)."""
    v = {k: float(d[k][i]) for k in _SHOWN}
    outer = str(d["outer"][i])
    return dict(
        alpha=v["alpha"], L=v["L"], K=int(v["K"]), H=int(v["H"]), T=int(v["T"]),
        b=v["b"] * v["L"], p=v["p"], eta=v["eta"], outer=outer,
        gamma=v["gamma"] if outer != "average" else 1.0,
        mu=v["mu"] if outer != "average" else 0.0,
        measured=getattr(bound, "measured", "iterates"), algorithm=fam.algorithm,
        coins=fam.coins,
    )  # fmt: skip


def solve_starts(bound: Bound, d: dict[str, np.ndarray], mask: np.ndarray) -> None:
    """Set the ``start`` of each row in ``mask`` to the one of :data:`_STARTS` (or its own)
    with the largest ratio, the start being solved for rather than sampled.

    The measured value is exactly quadratic in the start and the region at most linear in
    it (:func:`theory.verify.joint.start_profile`), so the ratio is known in closed form
    on a grid; the exact instance at the chosen start has a region no larger, hence a larger
    ``c``, and is evaluated afterwards (:func:`exact_at`)."""
    fam = family_of(bound)
    for i in np.flatnonzero(mask):
        kw = _instance_args(bound, d, i, fam)
        prof = start_profile(**kw)
        if prof is None:
            continue
        s = np.append(_STARTS, d["start"][i])
        L, b, K = kw["L"], kw["b"], kw["K"]
        c = heterogeneity_scale(float(d["zeta"][i]), K, L, b, np.abs(s) * prof.UP + prof.UQ)
        value = c * c * (prof.A * s * s + 2.0 * prof.B * s + prof.C)
        g = {k: np.full(s.size, d[k][i]) for k in d}
        g["F0"], g["sigma"] = 0.25 * (L + b) * (s * c) ** 2, np.zeros(s.size)
        inside, ratio = _ratios(bound, g, value)
        if inside.any():
            d["start"][i] = s[int(np.argmax(np.where(inside, ratio, -1.0)))]


def _ratios(bound: Bound, d: dict[str, np.ndarray], exact: np.ndarray):
    inside = _inside(bound, d) & np.isfinite(exact)
    value = _value(bound, d)
    ratio = np.where(inside & (value > 0), exact / np.where(value > 0, value, 1.0), 0.0)
    return inside, np.where(inside & (value <= 0) & (exact > 0), np.inf, ratio)


def _score(bound: Bound, d: dict[str, np.ndarray], exact: np.ndarray, stage: str) -> np.ndarray:
    """What the search climbs: the ratio; in the ``noise`` stage damped by
    ``min(1, 2 share)^4``, ``share`` the part of the bound that vanishes with ``sigma``, so
    that it climbs towards designs where the noise terms carry at least half of it."""
    _, ratio = _ratios(bound, d, exact)
    if stage != "noise":
        return ratio
    whole = _value(bound, d)
    quiet = _value(bound, {**d, "sigma": np.zeros_like(d["sigma"])})
    with np.errstate(all="ignore"):
        share = np.where(whole > 0, 1.0 - quiet / np.where(whole > 0, whole, 1.0), 0.0)
    return ratio * np.clip(2.0 * share, 0.0, 1.0) ** 4


def judge(bound: Bound, d: dict[str, np.ndarray], exact: np.ndarray, stage: str) -> JointResult:
    """The verdict of ``bound`` against the exact values at the rows ``d`` of ``stage``."""
    inside, ratio = _ratios(bound, d, exact)
    res = JointResult(bound.name, NOT_SHOWN_FALSE, int(exact.size), int(inside.sum()), None)
    res.stage = stage
    if not inside.any():
        res.verdict = UNTESTED
        return res
    i = int(np.argmax(ratio))
    res.worst_ratio = float(ratio[i])
    res.worst_design = {k: float(d[k][i]) for k in _SHOWN} | {"outer": str(d["outer"][i])}
    res.worst_F0, res.worst_sigma = float(d["F0"][i]), float(d["sigma"][i])
    shown = ", ".join(
        f"{k}={v:.17g}" if isinstance(v, float) else f"{k}={v!r}"
        for k, v in res.worst_design.items()
    )
    res.worst_command = (
        f"python -c \"from theory.verify.combined import at; at('{bound.name}', "
        f"stage='{stage}', {shown})\""
    )
    if res.worst_ratio > 1.0 + REL_TOL:
        res.verdict = VIOLATED
    return res


def _designs(bound: Bound, stage: str, n: int, long: int, rng) -> dict[str, np.ndarray]:
    d = hetero_designs.draw(bound, n, rng, joint=stage, max_K=MAX_K)
    extra = hetero_designs.long_horizon(bound, long, rng, joint=stage)
    if extra:
        d = {k: np.concatenate([v, extra[k]]) for k, v in d.items()}
    # full rounds: the engine counts whole rounds
    d["T"] = np.maximum(d["H"], np.floor(d["T"] / d["H"]) * d["H"])
    return _expand(bound, d)


def _top(bound: Bound, d, exact, stage: str, top: int) -> np.ndarray:
    score = _score(bound, d, exact, stage)
    worst = np.argsort(-score)[:top]
    return worst[score[worst] > 0]


def _with_solved_starts(bound: Bound, d: dict[str, np.ndarray], rows: np.ndarray):
    """Copies of ``rows`` with their start solved for (:func:`solve_starts`)."""
    new = {key: v[rows].copy() for key, v in d.items()}
    solve_starts(bound, new, _inside(bound, new))
    return new


def verify_joint(
    bound: Bound, stage: str, *, n: int | None = None, long: int | None = None,
    rounds: int | None = None, top: int | None = None, k: int | None = None, seed: int = 0,
) -> tuple[JointResult, dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """Check ``bound`` in ``stage`` (:data:`STAGES`) on ``n`` random and ``long``
    long-horizon designs, then ``rounds`` of ``top x k`` moves around the worst, each round's
    moves ``0.6`` times as wide (defaults: :data:`SIZES`); returns the result, the rows and
    their exact values (for the controls). In the ``gap`` stage each round also adds its
    ``top`` designs with their start solved for (:func:`solve_starts`), and so does a last
    pass after the rounds."""
    check_choice("joint stage", stage, tuple(STAGES))
    size = {**SIZES[stage]}
    for key, val in (("n", n), ("long", long), ("rounds", rounds), ("top", top), ("k", k)):
        if val is not None:
            size[key] = val
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    d = _designs(bound, stage, size["n"], size["long"], rng)
    exact = exact_at(bound, d, _inside(bound, d))
    for r in range(size["rounds"] + (stage == "gap")):
        worst = _top(bound, d, exact, stage, size["top"])
        if worst.size == 0:
            break
        parts = [_with_solved_starts(bound, d, worst)] if stage == "gap" else []
        if r < size["rounds"]:
            base = {key: v for key, v in d.items() if key != "outer"}
            new = hetero_designs.perturb(bound, base, worst, rng, size["k"], scale=0.6**r)
            new["T"] = np.maximum(new["H"], np.floor(new["T"] / new["H"]) * new["H"])
            new["outer"] = np.repeat(d["outer"][worst], size["k"])
            parts.append(new)
        for new in parts:
            new["F0"], new["sigma"] = np.zeros_like(new["L"]), np.zeros_like(new["L"])
            low = exact_at(bound, new, _inside(bound, new))
            d = {key: np.concatenate([d[key], new[key]]) for key in d}
            exact = np.concatenate([exact, low])
    res = judge(bound, d, exact, stage)
    res.elapsed_s = time.perf_counter() - t0
    return res, d, exact


def at(name: str, stage: str = "gap", **design: Any) -> PointValue:
    """Print and return the exact value, the bound, their ratio, whether the design is inside
    the bound's conditions, and the instance's ``F0``, ``sigma`` and ``zeta``, at one design
    (the command of the report).

    ``name``: a registered bound or a negative control of one (``parent~kind[i]``);
    ``design``: ``alpha, L, zeta, K, H, T, b`` (``b`` as a fraction of ``L``) and, as the
    bound uses them, ``p, eta, gamma, mu, outer``; ``start = x0/c``, ``noise = s/c``.
    """
    check_choice("joint stage", stage, tuple(STAGES))
    parent = name.split("~", 1)[0]
    bound = get(parent)
    if name != parent:
        controls = {c.bound.name: c.bound for c in controls_of(bound)}
        bound = controls[check_choice("control", name, sorted(controls))]
    missing = sorted({"alpha", "L", "zeta", "K", "H", "T", "b"} - set(design))
    if missing:
        raise UserInputError(f"at({name!r}): missing design value(s) {missing}")
    outer = str(design.pop("outer", bound.outers[0]))
    d = {key: np.array([float(v)]) for key, v in design.items()}
    for key, default in (("p", 0.0), ("eta", 0.0), ("gamma", 1.0), ("mu", 0.0)):
        d.setdefault(key, np.array([default]))
    for key in ("start", "noise", "sigma", "F0"):
        d.setdefault(key, np.zeros(1))
    d["outer"] = np.array([outer], dtype=object)
    exact = float(exact_at(bound, d, np.ones(1, dtype=bool))[0])
    value = float(_value(bound, d)[0])
    inside = bool(_inside(bound, d)[0])
    ratio = exact / value if value > 0 else math.inf
    out = {
        "exact": exact, "bound": value, "ratio": ratio, "inside": inside,
        "F0": float(d["F0"][0]), "sigma": float(d["sigma"][0]), "zeta": float(d["zeta"][0]),
    }  # fmt: skip
    where = "" if inside else " (outside the bound's conditions: not a test of it)"
    print(
        f"{name} [{STAGES[stage]}]: exact {exact:.6g}, bound {value:.6g}, ratio {ratio:.6g} "
        f"(F0 {out['F0']:.4g}, sigma {out['sigma']:.4g}, zeta {out['zeta']:.4g}){where}"
    )
    return out


def combined_lines(rows: list[Row]) -> list[str]:
    """The joint stages in ``summary.txt``: one line per stage, then the violated bounds and
    each bound's worst design."""
    if not rows:
        return []
    lines = ["", "joint instances (exact value / bound at the instance's own F0, sigma, zeta):"]
    for stage, what in STAGES.items():
        mine = [r for r in rows if r["stage"] == stage]
        if not mine:
            continue
        bad = [r["bound"] for r in mine if r["verdict"] == VIOLATED]
        worst = max((r for r in mine if r["worst_ratio"] is not None),
                    key=lambda r: float(r["worst_ratio"]), default=None)  # fmt: skip
        top = (
            "" if worst is None else f"; worst ratio {worst['worst_ratio']:.4g} ({worst['bound']})"
        )
        lines.append(
            f"  {what}: {len(mine)} bound(s), {sum(r['inside'] for r in mine)} designs inside "
            f"their conditions, {len(bad)} violated{top}"
            + (f": !! VIOLATED !! {', '.join(bad)}" if bad else "")
        )
    for r in rows:
        if r["worst_command"]:
            lines.append(
                f"  {r['bound']} [{r['stage']}] {r['worst_ratio']:.4g}: {r['worst_command']}"
            )
    return lines

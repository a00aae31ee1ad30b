"""The class stage of ``palsgd verify``: every bound against the worst case of its class.

For each bound at ``sigma = 0`` designs inside its conditions with short horizons, the class
oracle (:mod:`theory.worstcase`) gives ``W``, the worst case of the measured quantity over
every problem of the class (an upper bound on it: the relaxation is named), and
:mod:`theory.worstcase.judge` gives the verdict: **certified** (the bound is at least ``W``),
**exceeded** on the relaxed class, or **refuted** by an explicit instance built from the
worst case (:mod:`theory.worstcase.lift`). A lower bound above ``W`` is refuted with ``W``
as the proof.

Every ``K``: the designs use the ``"compact"`` relaxation at ``K = 2``, whose value is the
same for every ``K >= 2`` when the workers are exchangeable (no pulls, or shared coins;
docs/verification.md, section 11, "Two relaxations, and every K from one small SDP"); the bound is then judged at
``K`` in :data:`KS` with that one value, so a design certified covers each of them.
PALSGD with independent coins is judged at ``K = 2`` only (the coin paths of different
workers differ). Designs: ``L``, ``F0`` log-uniform in ``[0.1, 10]``, ``zeta`` 0 or
log-uniform around ``sqrt(L F0)``, ``H`` 2 or 3, horizons of 2-6 steps (2-3 with pulls, or
one round at the anchors: every coin path is enumerated), the step at fractions of the bound's largest or, for a
statement made at one step, that step. The bound's negative controls are judged on the same
designs and the same ``W`` (rejected only when an explicit instance refutes them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory.algorithm import AlgorithmSpec
from theory.verify import pipeline
from theory.verify.pinned import pinned_step, pinned_values
from theory.verify.records import DesignPoint, Row
from theory.worstcase.design import ClassDesign
from theory.worstcase.judge import (
    CERTIFIED,
    CONSISTENT,
    EXCEEDED,
    REFUTED,
    SOLVER_RTOL,
    UNSOLVED,
    ClassVerdict,
    bound_args,
    inside,
    judge_lower,
    judge_upper,
    tightness,
)  # fmt: skip
from theory.worstcase.lift import lift, probe

__all__ = [
    "ClassResult", "KS", "QUICK", "class_coverage", "class_designs", "class_stage",
    "verify_class",
]  # fmt: skip


#: the numbers of workers a compact design judges a bound at
KS = (2, 3, 4, 8, 64)
#: designs per bound (default run) and in ``--quick``
DESIGNS, QUICK = 4, 2
#: designs lifted to explicit instances per bound at most (each takes seconds; the bound's
#: controls reuse them)
LIFTS = 1


@dataclass
class ClassResult:
    """One bound (or control) over its class designs: the verdict counts, the worst design
    and the class tightness ``max W / B`` (1: some problem of the class attains the bound)."""

    bound: str
    kind: str
    verdict: str
    designs: int
    certified: int
    exceeded: int
    refuted: int
    class_tightness: float | None
    worst: Row = field(default_factory=dict)
    relaxation: str = "compact"
    note: str = ""
    elapsed_s: float = 0.0

    @property
    def inside(self) -> int:
        """Designs judged inside the bound's conditions (:mod:`theory.verify.untested`)."""
        return self.designs

    def to_dict(self) -> Row:
        return {**dataclasses.asdict(self), "inside": self.inside}


def _spec(bound: Any) -> AlgorithmSpec | None:
    if getattr(bound, "kind", "upper") == "lower":
        names = [n for n in bound.algorithms if not AlgorithmSpec.of(n).definition.elastic]
        return AlgorithmSpec.of(names[0]) if names else None
    return getattr(bound, "algorithm", None)


def class_coverage(bound: Any) -> str:
    """``""`` when the class stage judges ``bound``, else why not."""
    spec = _spec(bound)
    if spec is None:
        return "it names no algorithm the class oracle runs"
    if spec.definition.elastic:
        return f"the class oracle does not run {spec.kind} (elastic mixing)"
    if spec.sync_delay:
        return "the class oracle runs the blocking sync only"
    return ""


def _symmetric(spec: AlgorithmSpec) -> bool:
    return not (spec.pulls and not spec.shared_coins)


def _iid(bound: Any) -> bool:
    """Whether ``bound`` declares identical workers (its class has ``zeta = 0``)."""
    if getattr(bound, "kind", "upper") == "lower":
        return "zeta" not in bound.parameters
    from theory.verify.oracle import family_of

    return bool(family_of(bound).iid)


def _candidates(bound: Any, spec: AlgorithmSpec, rng: np.random.Generator, n: int):
    """Random designs (parameters only; the step is set by :func:`class_designs`)."""
    row, measured = spec.definition, getattr(bound, "measured", "iterates")
    iid = _iid(bound)
    outers = getattr(bound, "outers", (spec.outer,))
    for _ in range(n):
        L, F0 = 10 ** rng.uniform(-1, 1, 2)
        zeta = (
            0.0
            if iid or rng.random() < 0.25
            else float(np.sqrt(L * F0) * 10 ** rng.uniform(-1, 0.7))
        )
        H = int(rng.choice((2, 3))) if row.rounds else 1
        kw: DesignPoint = {"H": H, "coins": spec.coins} if row.rounds else {}
        if row.pulls:
            kw.update(p=float(rng.choice((0.25, 0.5))), eta=float(L * rng.choice((0.5, 2, 8))))
        outer = str(rng.choice(outers))
        if outer != "average":
            kw.update(outer=outer, gamma=float(rng.choice((0.5, 0.7, 1.0))),
                      mu=float(rng.choice((0.0, 0.5, 0.9))))  # fmt: skip
        if row.pulls and not spec.shared_coins:
            kw["H"], T = 2, 2
        elif row.pulls:
            T = 3 if measured == "iterates" else kw["H"]
        else:
            T = (
                int(rng.choice((2, 3, 4, 6)))
                if measured == "iterates"
                else H * int(rng.choice((2, 3)))
            )
        T = T if measured == "iterates" else max(kw.get("H", 1), T - T % kw.get("H", 1))
        yield dict(L=float(L), F0=float(F0), zeta=zeta, T=T, kw=kw, measured=measured)


def class_designs(bound: Any, n: int, seed: int) -> list[ClassDesign]:
    """Up to ``n`` designs of ``bound`` inside its conditions at ``K = 2`` (module docstring)."""
    spec = _spec(bound)
    rng = np.random.default_rng(seed)
    pinned = getattr(bound, "kind", "upper") != "lower" and pinned_step(bound)
    out: list[ClassDesign] = []
    for c in _candidates(bound, spec, rng, 40 * n):
        try:
            base = AlgorithmSpec.of(spec.kind, alpha=1.0, **c["kw"])
            d = ClassDesign(base, 2, c["T"], c["L"], c["zeta"], c["F0"], c["measured"])
        except UserInputError:
            continue
        args = {k: v for k, v in bound_args(bound, d).items() if k != "alpha"}
        with np.errstate(all="ignore"):
            if pinned:  # the step the statement is made at (a root of its pinning conditions)
                vals = {k: np.asarray([v], dtype=float) for k, v in args.items()}
                alpha = float(pinned_values(bound, vals, 1)[0])
            elif getattr(bound, "kind", "upper") == "lower":
                alpha = float(rng.choice((1.0, 0.5, 0.1))) / c["L"]
            else:
                top = float(np.asarray(bound.max_step(**args)))
                top = min(top, 2.0 / c["L"]) if np.isfinite(top) else 2.0 / c["L"]
                alpha = top * float(rng.choice((1.0, 0.5, 0.25, 0.1)))
        if not (np.isfinite(alpha) and alpha > 0):
            continue
        try:
            d = dataclasses.replace(d, spec=base.replace(alpha=alpha))
        except UserInputError:
            continue
        if inside(bound, d):
            out.append(d)
        if len(out) >= n:
            break
    return out


def _neighbours(bound: Any, designs: list[ClassDesign], values: list[Any]) -> list[ClassDesign]:
    """The search step: around the design where the class uses most of the bound (at
    ``K = 2``), the same design with the step halved and doubled, ``zeta`` divided and
    multiplied by 3, and the shortest horizon (2 steps; one round for anchors); those
    inside the bound's conditions."""
    if not designs:
        return []
    lower = _kind(bound) == "lower"

    def share(d: ClassDesign, w: Any) -> float:
        b = float(np.asarray(bound.evaluate(**bound_args(bound, d))))
        return tightness(b, w.value) if lower else tightness(w.value, b)

    best = max(zip(designs, values, strict=True), key=lambda dw: share(*dw))[0]
    s, out = best.spec, []
    short = s.H if best.measured == "anchors" else 2
    tries = [dict(spec=s.replace(alpha=s.alpha * f)) for f in (0.5, 2.0)]
    if best.paths == 1:  # a coin-path design costs seconds: its step only
        tries += [dict(zeta=best.zeta * f) for f in (1 / 3, 3.0) if best.zeta > 0]
        tries += [dict(T=short)] if best.T > short else []
    for change in tries:
        try:
            d = dataclasses.replace(best, **change)
        except UserInputError:
            continue
        if inside(bound, d):
            out.append(d)
    return out


def _ks(bound: Any, design: ClassDesign) -> list[ClassDesign]:
    """``design`` at each ``K`` of :data:`KS` inside the bound's conditions (``K = 2`` only
    for non-exchangeable workers)."""
    if not _symmetric(design.spec):
        return [design]
    out = []
    for K in KS:
        d = dataclasses.replace(design, K=K)
        if inside(bound, d):
            out.append(d)
    return out


class _Lifter:
    """The explicit instances of one bound's designs, built at most ``budget`` times and kept:
    the bound and its controls share them (an instance's value does not depend on the
    statement)."""

    def __init__(self, budget: int) -> None:
        self.budget, self.values, self.full = budget, {}, {}

    def full_value(self, design: ClassDesign) -> Any:
        key = id(design)
        if key not in self.full:
            self.full[key] = _solve(design, "full")
        return self.full[key]

    def __call__(self, design: ClassDesign, target: float) -> float | None:
        """The largest explicit value found at ``design``: the :func:`probe` instances
        (milliseconds), then, while the budget lasts and only for a design without coin
        paths, the :func:`lift` search (seconds), unless the probes already exceed
        ``target``."""
        key = id(design)
        if key not in self.values:
            self.values[key] = (probe(design).value, False)
        value, searched = self.values[key]
        if (value is None or value <= target) and not searched and self.budget > 0:
            if design.paths == 1:
                self.budget -= 1
                found = lift(design, starts=3, target=target).value
                value = found if value is None or (found or 0) > value else value
            self.values[key] = (value, True)
        return value


def _judge(
    bound: Any, design: ClassDesign, wc: Any, lifter: _Lifter, control: bool = False
) -> ClassVerdict | None:
    """The worst ``K`` of ``design`` for ``bound``, judged with one oracle value for every
    ``K`` (the compact relaxation's). An exceeded upper bound is then tried on the full
    relaxation at ``K = 2`` and on an explicit instance (at most ``lifts[0]`` per bound): the
    one-dimensional instance of :mod:`theory.worstcase.lift` runs the same way for every even
    ``K``, so its value refutes the bound at each even ``K`` where it is larger."""
    lower = getattr(bound, "kind", "upper") == "lower"
    judged = []
    for d in _ks(bound, design):
        w = dataclasses.replace(wc, design=d)
        judged.append(judge_lower(bound, d, relaxation="compact", wc=w) if lower
                      else judge_upper(bound, d, relaxation="compact", wc=w, do_lift=False,
                                       refine=False))  # fmt: skip
    if not judged:
        return None
    worst = max(judged, key=lambda v: v.tightness)
    if lower or worst.verdict != EXCEEDED:
        return worst
    refine = design.paths == 1 and not control  # a control is only ever refuted by an instance
    full = lifter.full_value(design) if refine else wc  # design is at K = 2
    exceeded = [v for v in judged if full.ok and v.bound_value < full.value * (1 - SOLVER_RTOL)]
    if not exceeded:
        v = dataclasses.replace(worst, verdict=CERTIFIED, class_value=full.value,
                                relaxation="full" if refine else "compact", tightness=tightness(full.value, worst.bound_value))  # fmt: skip
        return v
    worst = max(exceeded, key=lambda v: v.tightness)
    relax = "full" if refine else "compact"
    worst = dataclasses.replace(worst, class_value=full.value, relaxation=relax,
                                tightness=tightness(full.value, worst.bound_value))  # fmt: skip
    value = lifter(design, max(v.bound_value for v in exceeded))
    if value is None:
        return worst
    even = [v for v in exceeded if v.design["K"] % 2 == 0 and value > v.bound_value * (1 + 1e-9)]
    if even:
        return dataclasses.replace(max(even, key=lambda v: v.tightness), verdict=REFUTED,
                                   lifted=value)  # fmt: skip
    return dataclasses.replace(worst, lifted=value)


def verify_class(
    bound: Any, *, n: int = DESIGNS, seed: int = 0, controls: Sequence[Any] = (),
    lifts: int = LIFTS,
) -> tuple[ClassResult, list[Row]]:  # fmt: skip
    """``bound`` over its class designs, and its ``controls`` (objects with ``.bound`` and a
    ``.klass`` slot for their :class:`ClassResult`) on the same oracle values; returns the
    bound's result and the design rows."""
    start = time.perf_counter()
    why = class_coverage(bound)
    if why:
        return ClassResult(bound.name, _kind(bound), "not covered", 0, 0, 0, 0, None, note=why), []
    designs = class_designs(bound, n, seed)
    values = [_solve(d) for d in designs]
    for d in _neighbours(bound, designs, values):
        designs.append(d)
        values.append(_solve(d))
    rows: list[Row] = []
    lifter = _Lifter(lifts)
    result = _summarise(bound, designs, values, lifter, rows)
    result.elapsed_s = time.perf_counter() - start
    for c in controls:
        c.klass = _summarise(c.bound, designs, values, lifter, None, control=True)
    return result, rows


def _solve(d: ClassDesign, relaxation: str = "compact") -> Any:
    """The class worst case of ``d`` (the ``"class"`` oracle, :mod:`theory.verify.oracle_class`)."""
    from theory.verify.oracle_class import design_of

    return pipeline.measure(design_of(d, relaxation), "class").companions["solution"]


def _kind(bound: Any) -> str:
    return getattr(bound, "kind", "upper")


def _summarise(bound, designs, values, lifter, rows, control: bool = False) -> ClassResult:
    verdicts = [v for d, wc in zip(designs, values, strict=True)
                if (v := _judge(bound, d, wc, lifter, control)) is not None]  # fmt: skip
    if rows is not None:
        rows += [v.to_dict() for v in verdicts]
    count = {k: sum(v.verdict == k for v in verdicts) for k in (CERTIFIED, EXCEEDED, REFUTED)}
    count[CERTIFIED] += sum(v.verdict == CONSISTENT for v in verdicts)
    unsolved = sum(v.verdict == UNSOLVED for v in verdicts)
    judged = [v for v in verdicts if v.verdict != UNSOLVED]
    tight = max((v.tightness for v in judged), default=None)
    worst = max(judged, key=lambda v: v.tightness).to_dict() if judged else {}
    if not judged:
        verdict, note = "untested", "no design inside its conditions was solved"
    elif count[REFUTED]:
        verdict, note = REFUTED, f"an explicit instance exceeds it ({count[REFUTED]} design(s))"
    elif count[EXCEEDED]:
        verdict, note = EXCEEDED, "above the relaxed class only: not shown false"
    elif _kind(bound) == "lower":
        verdict, note = CONSISTENT, f"at most the class worst case at {len(judged)} design(s)"
    else:
        verdict, note = CERTIFIED, f"at {len(judged)} design(s), compact relaxation"
    if unsolved:
        note += f"; {unsolved} design(s) unsolved"
    return ClassResult(bound.name, _kind(bound), verdict, len(judged), count[CERTIFIED],
                       count[EXCEEDED], count[REFUTED], tight, worst, "compact", note)  # fmt: skip


def class_stage(
    bounds: Sequence[Any], controls: Sequence[Any], *, n: int, seed: int, progress: Any = None
) -> tuple[list[ClassResult], list[Row]]:
    """Every bound of the run (upper and lower) through :func:`verify_class`, its negative
    controls (``controls``, matched by ``parent``) judged on the same values; returns the
    per-bound results and the design rows."""
    from theory.verify.sampling import _child_seed

    results, rows = [], []
    for i, b in enumerate(bounds):
        mine = [c for c in controls if c.parent == b.name]
        res, design_rows = verify_class(b, n=n, seed=_child_seed(seed, 30, i), controls=mine)
        results.append(res)
        rows += design_rows
        if progress is not None:
            progress.update(1)
    return results, rows

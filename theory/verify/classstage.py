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
docs/verification.md, section "The class"); the bound is then judged at
``K`` in :data:`KS` with that one value, so a design certified covers each of them.
PALSGD with independent coins is judged at ``K = 2`` only (the coin paths of different
workers differ). Designs: ``L``, ``F0`` log-uniform in ``[0.1, 10]``, ``zeta`` 0 or
log-uniform around ``sqrt(L F0)``, ``H`` 2 or 3, horizons of 4-6 steps (2-4 with pulls:
every coin path is enumerated), the step at fractions of the bound's largest or, for a
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
from theory.verify.pinned import pinned_step
from theory.worstcase.design import ClassDesign
from theory.worstcase.judge import (
    CERTIFIED, EXCEEDED, REFUTED, UNSOLVED, ClassVerdict, bound_args, judge_lower, judge_upper,
)  # fmt: skip
from theory.worstcase.lift import lift
from theory.worstcase.pep import solve

__all__ = ["ClassResult", "KS", "QUICK", "class_coverage", "class_designs", "verify_class"]

#: the numbers of workers a compact design judges a bound at
KS = (2, 3, 4, 8, 64)
#: designs per bound (default run) and in ``--quick``
DESIGNS, QUICK = 4, 2
#: explicit instances built per bound at most (each takes seconds)
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
    worst: dict[str, Any] = field(default_factory=dict)
    relaxation: str = "compact"
    note: str = ""
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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


def _candidates(bound: Any, spec: AlgorithmSpec, rng: np.random.Generator, n: int):
    """Random designs (parameters only; the step is set by :func:`class_designs`)."""
    row, measured = spec.definition, getattr(bound, "measured", "iterates")
    outers = getattr(bound, "outers", (spec.outer,))
    for _ in range(n):
        L, F0 = 10 ** rng.uniform(-1, 1, 2)
        zeta = 0.0 if rng.random() < 0.25 else float(np.sqrt(L * F0) * 10 ** rng.uniform(-1, 0.7))
        H = int(rng.choice((2, 3))) if row.rounds else 1
        kw: dict[str, Any] = {"H": H, "coins": spec.coins} if row.rounds else {}
        if row.pulls:
            kw.update(p=float(rng.choice((0.25, 0.5))), eta=float(L * rng.choice((0.5, 2, 8))))
        outer = str(rng.choice(outers))
        if outer != "average":
            kw.update(outer=outer, gamma=float(rng.choice((0.5, 0.7, 1.0))),
                      mu=float(rng.choice((0.0, 0.5, 0.9))))  # fmt: skip
        if row.pulls and not spec.shared_coins:
            kw["H"], T = 2, 2
        elif row.pulls:
            T = 4 if measured == "iterates" or kw["H"] == 2 else 3
        else:
            T = int(rng.choice((4, 6))) if measured == "iterates" else H * int(rng.choice((2, 3)))
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
            if pinned:
                alpha = float(np.asarray(bound.recommended_step_value(**args)))
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
        with np.errstate(all="ignore"):
            inside = bool(np.asarray(bound.conditions_hold(**bound_args(bound, d))))
        if inside:
            out.append(d)
        if len(out) >= n:
            break
    return out


def _ks(bound: Any, design: ClassDesign) -> list[ClassDesign]:
    """``design`` at each ``K`` of :data:`KS` inside the bound's conditions (``K = 2`` only
    for non-exchangeable workers)."""
    if not _symmetric(design.spec):
        return [design]
    out = []
    for K in KS:
        d = dataclasses.replace(design, K=K)
        with np.errstate(all="ignore"):
            if bool(np.asarray(bound.conditions_hold(**bound_args(bound, d)))):
                out.append(d)
    return out


def _judge(bound: Any, design: ClassDesign, wc: Any, lifts: list[int]) -> ClassVerdict:
    """The worst ``K`` of ``design`` for ``bound`` (one oracle value for all of them)."""
    lower = getattr(bound, "kind", "upper") == "lower"
    worst = None
    for d in _ks(bound, design):
        w = dataclasses.replace(wc, design=d)
        v = (judge_lower(bound, d, relaxation="compact", wc=w) if lower
             else judge_upper(bound, d, relaxation="compact", wc=w, do_lift=False))  # fmt: skip
        if worst is None or v.tightness > worst[0].tightness:
            worst = (v, d)
    if worst is None:
        return None
    v, d = worst
    if v.verdict == EXCEEDED and lifts[0] > 0:
        lifts[0] -= 1
        v = judge_upper(bound, d, relaxation="compact", do_lift=True)
    return v


def verify_class(
    bound: Any, *, n: int = DESIGNS, seed: int = 0, controls: Sequence[Any] = (),
    lifts: int = LIFTS,
) -> tuple[ClassResult, list[dict[str, Any]]]:  # fmt: skip
    """``bound`` over its class designs, and its ``controls`` (objects with ``.bound`` and a
    ``.klass`` slot for their :class:`ClassResult`) on the same oracle values; returns the
    bound's result and the design rows."""
    start = time.perf_counter()
    why = class_coverage(bound)
    if why:
        return ClassResult(bound.name, _kind(bound), "not covered", 0, 0, 0, 0, None, note=why), []
    designs = class_designs(bound, n, seed)
    values = [solve(d, "compact") for d in designs]
    rows: list[dict[str, Any]] = []
    result = _summarise(bound, designs, values, [lifts], rows)
    result.elapsed_s = time.perf_counter() - start
    for c in controls:
        c.klass = _summarise(c.bound, designs, values, [lifts], None)
    return result, rows


def _kind(bound: Any) -> str:
    return getattr(bound, "kind", "upper")


def _summarise(bound, designs, values, lifts, rows) -> ClassResult:
    verdicts = [v for d, wc in zip(designs, values, strict=True)
                if (v := _judge(bound, d, wc, lifts)) is not None]  # fmt: skip
    if rows is not None:
        rows += [v.to_dict() for v in verdicts]
    count = {k: sum(v.verdict == k for v in verdicts) for k in (CERTIFIED, EXCEEDED, REFUTED)}
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
    else:
        verdict, note = CERTIFIED, f"at {len(judged)} design(s), compact relaxation"
    if unsolved:
        note += f"; {unsolved} design(s) unsolved"
    return ClassResult(bound.name, _kind(bound), verdict, len(judged), count[CERTIFIED],
                       count[EXCEEDED], count[REFUTED], tight, worst, "compact", note)  # fmt: skip

"""A statement against the class: certified, exceeded on the relaxed class, or refuted.

An upper bound states that the measured quantity is at most ``B`` on every problem of the
class. At one design :func:`judge_upper` compares ``B`` with the class oracle's value ``W``
(an upper bound on the true worst case, :mod:`theory.worstcase.pep`):

* ``B >= W (1 - SOLVER_RTOL)``: **certified** at that design, on the relaxation named (the
  SDP's value is accurate to about 2e-5 relative; :data:`SOLVER_RTOL` allows for it);
* ``B < W (1 - SOLVER_RTOL)``: **exceeded** on the relaxed class; then :func:`lift` builds
  explicit functions of the class: if one reaches above ``B`` the statement is **refuted**
  there (the instance's value, recomputed on the built function, is the proof); otherwise it
  stays "exceeded (relaxed class)", never reported as false.

A lower bound states that the worst case over the class is at least ``B``: ``B > W (1 +
SOLVER_RTOL)`` **refutes** it, with ``W`` as the proof (:func:`judge_lower`); otherwise it is
consistent with the class. The **class tightness** of a design is ``W / B``: how much of
the bound the worst problem of the class uses (1: tight; the instance tightness of
:mod:`theory.verify.exact` measures the same on the verifier's own instances).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from theory.worstcase.design import ClassDesign
from theory.worstcase.lift import lift
from theory.worstcase.pep import WorstCase, solve

__all__ = [
    "ClassVerdict", "CERTIFIED", "EXCEEDED", "REFUTED", "CONSISTENT", "OUTSIDE", "UNSOLVED",
    "SOLVER_RTOL", "bound_args", "tightness", "covers", "inside", "judge_upper", "judge_lower",
]  # fmt: skip

CERTIFIED, EXCEEDED, REFUTED = "certified", "exceeded (relaxed class)", "refuted"
CONSISTENT, OUTSIDE, UNSOLVED = "consistent", "outside its conditions", "solver failed"
#: relative accuracy allowed for the SDP's value: Clarabel often stops "almost solved" on
#: these problems, its dual value then within about 2e-5 of the exact worst case (measured:
#: Local SGD at zeta = 0, where the worst case is the quadratic's closed form)
SOLVER_RTOL = 1e-4


@dataclass
class ClassVerdict:
    """One bound at one class design: the values and the verdict (module docstring).

    ``bound_value``: the statement's right-hand side at the design (``sigma = 0``);
    ``class_value``: the oracle's ``W``; ``tightness``: ``W / B`` for an upper bound (the
    share of the bound the worst problem uses), ``B / W`` for a lower bound (the share of the
    worst case it reaches); ``lifted``: the value
    reached by an explicit instance (when one was built); ``dual_residual``: the dual
    certificate's residual (normalised units)."""

    bound: str
    kind: str
    verdict: str
    bound_value: float
    class_value: float
    tightness: float
    relaxation: str
    lifted: float | None
    dual_residual: float
    status: str
    elapsed_s: float
    design: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bound_args(bound: Any, design: ClassDesign) -> dict[str, float]:
    """The bound's parameters at ``design`` (``sigma = 0``)."""
    s = design.spec
    values = {
        "L": design.L, "sigma": 0.0, "zeta": design.zeta, "F0": design.F0, "K": design.K,
        "H": s.H, "T": design.T, "alpha": s.alpha, "p": s.p, "eta": s.eta, "gamma": s.gamma,
        "mu": s.mu, "T0": s.T0, "R": design.R,
    }  # fmt: skip
    return {k: v for k, v in values.items() if k in bound.parameters}


def inside(bound: Any, design: ClassDesign) -> bool:
    """Whether ``design`` is inside the bound's conditions (a statement without
    ``conditions_hold``, such as a lower bound: where its value is a finite number, ``nan``
    marking a failed condition)."""
    held = getattr(bound, "conditions_hold", None)
    with np.errstate(all="ignore"):
        if held is None:
            return bool(np.isfinite(np.asarray(bound.evaluate(**bound_args(bound, design)))))
        return bool(np.asarray(held(**bound_args(bound, design))))


def covers(bound: Any, design: ClassDesign) -> bool:
    """Whether ``bound`` speaks of the design's algorithm (its kind among the bound's)."""
    return design.spec.kind in tuple(getattr(bound, "algorithms", ()))


def tightness(w: float, b: float) -> float:
    """``w / b``, the class tightness (``inf`` for a positive worst case over a zero bound)."""
    if b > 0:
        return w / b
    return float(np.inf) if w > 0 else 1.0


def _verdict(bound: Any, kind: str, verdict: str, b: float, wc: WorstCase, relaxation: str,
             lifted: float | None = None) -> ClassVerdict:  # fmt: skip
    # an upper bound: the share of it the worst problem uses; a lower bound: the share of the
    # worst case it reaches
    tight = tightness(b, wc.value) if kind == "lower" else tightness(wc.value, b)
    return ClassVerdict(
        bound.name, kind, verdict, float(b), float(wc.value), float(tight), relaxation, lifted,
        float(wc.dual_residual), wc.status, float(wc.elapsed_s), wc.design.describe(),
    )  # fmt: skip


def _start(
    bound: Any, design: ClassDesign, kind: str, relaxation: str, wc: WorstCase | None
) -> tuple[WorstCase, float, ClassVerdict | None]:
    """The oracle value (solved unless given), the bound's value, and the verdict already
    decided: outside the bound's conditions, or the solver failed."""
    wc = solve(design, relaxation) if wc is None else wc
    b = float(np.asarray(bound.evaluate(**bound_args(bound, design))))
    if not inside(bound, design):
        return wc, b, _verdict(bound, kind, OUTSIDE, b, wc, relaxation)
    if not wc.ok:
        return wc, b, _verdict(bound, kind, UNSOLVED, b, wc, relaxation)
    return wc, b, None


def judge_upper(
    bound: Any, design: ClassDesign, *, relaxation: str = "full", do_lift: bool = True,
    wc: WorstCase | None = None, refine: bool = True, lift_starts: int = 6,
) -> ClassVerdict:  # fmt: skip
    """The upper bound ``bound`` at ``design`` (module docstring); ``wc``: an oracle value
    already computed for ``design`` on ``relaxation``. ``refine``: an exceeded bound on the
    compact relaxation is judged again on the full one (at ``K <= 2``). ``lift_starts``:
    the starts of the explicit-instance search (:func:`~theory.worstcase.lift.lift`)."""
    wc, b, done = _start(bound, design, "upper", relaxation, wc)
    if done is not None:
        return done
    if b >= wc.value * (1 - SOLVER_RTOL):
        return _verdict(bound, "upper", CERTIFIED, b, wc, relaxation)
    if refine and relaxation != "full" and design.K <= 2:
        full = solve(design, "full")  # the tighter relaxation before any lift
        if full.ok and b >= full.value * (1 - SOLVER_RTOL):
            return _verdict(bound, "upper", CERTIFIED, b, full, "full")
        wc, relaxation = (full, "full") if full.ok else (wc, relaxation)
    lifted = lift(design, starts=lift_starts, target=b * (1 + 1e-9)).value if do_lift else None
    if lifted is not None and lifted > b * (1 + 1e-9):
        return _verdict(bound, "upper", REFUTED, b, wc, relaxation, lifted)
    return _verdict(bound, "upper", EXCEEDED, b, wc, relaxation, lifted)


def judge_lower(
    bound: Any, design: ClassDesign, *, relaxation: str = "full", wc: WorstCase | None = None
) -> ClassVerdict:
    """The lower bound ``bound`` at ``design``: refuted when above the class worst case."""
    wc, b, done = _start(bound, design, "lower", relaxation, wc)
    if done is not None:
        return done
    ok = b <= wc.value * (1 + SOLVER_RTOL)
    return _verdict(bound, "lower", CONSISTENT if ok else REFUTED, b, wc, relaxation)

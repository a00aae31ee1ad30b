"""Negative controls: false variants of a bound that the verifier must reject.

For a bound with additive terms ``t_1 + ... + t_n`` the controls are: each term halved,
each term removed, and the whole bound scaled by 0.9 (with the bound's own conditions).
Each control is verified exactly like any other bound (:func:`theory.verify.exact.
verify_exact`, same budget, no hint of which term changed). A control the verifier finds
violated is **rejected**; one it does not is reported **not shown false**: it may still be
true (a term that is loose by more than a factor of two can be halved without making the
bound false), and it never counts as a pass of the verifier. The detection power of a run
is the share of rejected controls.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from theory.bound import Bound
from theory.verify.designs import isolating, random_points, space_of
from theory.verify.exact import VIOLATED, Budget, ExactResult, verify_exact
from theory.verify.oracle import family_of

__all__ = ["Control", "controls_of", "run_controls", "power"]

REJECTED, NOT_SHOWN_FALSE = "rejected", "not shown false"


@dataclass
class Control:
    """A false variant of ``parent``: ``kind`` (``halved``, ``removed``, ``scaled``), the
    term it changes (``None`` for the scaled bound) and the result of verifying it."""

    parent: str
    kind: str
    term: str | None
    bound: Bound
    result: ExactResult | None = None
    hetero: Any = None  # a theory.verify.hetero.HeteroResult, for heterogeneous bounds
    #: theory.verify.combined.JointResult, one per joint stage (heterogeneous bounds)
    joint: list[Any] = field(default_factory=list)
    klass: Any = None  # a theory.verify.classstage.ClassResult: the class stage's verdict

    @property
    def rejected_by(self) -> str:
        """``"quadratics"``, ``"heterogeneous instances"``, ``"joint instances (STAGE)"``
        (:mod:`theory.verify.combined`; the first that rejects) or ``""``."""
        if self.result is not None and self.result.verdict == VIOLATED:
            return getattr(self.result, "refuted_by", "") or "quadratics"
        if self.hetero is not None and self.hetero.verdict == VIOLATED:
            return "heterogeneous instances"
        for j in self.joint:
            if j.verdict == VIOLATED:
                return f"joint instances ({j.stage})"
        if self.klass is not None and self.klass.verdict == "refuted":
            return "class (explicit instance)"
        return ""

    @property
    def status(self) -> str:
        if self.result is None:
            return "not run"
        return REJECTED if self.rejected_by else NOT_SHOWN_FALSE

    def _evidence(self) -> Any:
        """The result that rejected the control (the exact stage's when none did)."""
        by = self.rejected_by
        if by == "heterogeneous instances":
            return self.hetero
        return next((j for j in self.joint if by == f"joint instances ({j.stage})"), self.result)

    def to_dict(self) -> dict:
        r = self._evidence()
        k = self.klass
        return {
            "bound": self.parent,
            "control": self.bound.name,
            "kind": self.kind,
            "term": self.term,
            "status": self.status,
            "rejected_by": self.rejected_by,
            "worst_ratio": None if r is None else r.worst_ratio,
            "command": "" if r is None else r.worst_command,
            "class_verdict": None if k is None else k.verdict,
            "class_tightness": None if k is None else k.class_tightness,
        }


def controls_of(bound: Bound) -> list[Control]:
    """The negative controls of ``bound`` (see the module docstring)."""
    terms = list(bound.terms)
    out = []
    for i, t in enumerate(terms):
        for kind, new in (("halved", bound.expression - t / 2), ("removed", bound.expression - t)):
            if len(terms) == 1 and kind == "removed":
                continue
            name = f"{bound.name}~{kind}[{i}]"
            out.append(Control(bound.name, kind, str(t), _variant(bound, name, new)))
    name = f"{bound.name}~scaled[0.9]"
    out.append(Control(bound.name, "scaled", None, _variant(bound, name, bound.expression * 0.9)))
    return out


def _variant(bound: Bound, name: str, expr: sp.Expr) -> Bound:
    return dataclasses.replace(bound, name=name, expression=expr, title=f"control {name}")


def run_controls(
    bound: Bound,
    *,
    budget: Budget | None = None,
    seed: int = 0,
    progress=None,
    controls: list[Control] | None = None,
) -> list[Control]:
    """Verify every control of ``bound`` (``controls``: those of :func:`controls_of`, when
    already built); all start from the same initial designs."""
    budget = budget or Budget()
    space = space_of(family_of(bound))
    rng = np.random.default_rng(seed)
    xi, mi = isolating(space, rng, budget.isolating)
    xr, mr = random_points(space, rng, budget.random)
    start = (np.concatenate([xi, xr]), np.concatenate([mi, mr]))
    ctrls = controls_of(bound) if controls is None else controls
    for k, c in enumerate(ctrls):
        c.result = verify_exact(c.bound, budget=budget, seed=seed + 1 + k, start=start)
        if progress is not None:
            progress.update(1)
    return ctrls


def power(controls: list[Control]) -> dict:
    """Detection power: controls rejected / controls run, overall, per bound and per kind
    of statement (``"upper"``, ``"lower"``: the controls of the lower bounds,
    :mod:`theory.verify.lower`)."""
    run = [c for c in controls if c.result is not None]
    per: dict[str, dict[str, int]] = {}
    kinds: dict[str, dict[str, float]] = {}
    for c in run:
        kind = getattr(c.bound, "kind", "upper")
        for d in (per.setdefault(c.parent, {}), kinds.setdefault(kind, {})):
            d["controls"] = d.get("controls", 0) + 1
            d["rejected"] = d.get("rejected", 0) + (c.status == REJECTED)
    for d in kinds.values():
        d["power"] = d["rejected"] / d["controls"]
    n, k = len(run), sum(c.status == REJECTED for c in run)
    return {
        "controls": n,
        "rejected": k,
        "power": k / n if n else None,
        "per_bound": per,
        "by_kind": kinds,
    }

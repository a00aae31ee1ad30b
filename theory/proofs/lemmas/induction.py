"""Induction lemmas: a claim for every integer ``n >= n0`` from a base case and a step."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import sympy as sp

from theory.proofs.lemmas.deciders import is_zero
from theory.proofs.lemmas.kinds import CheckResult, Inequality, Lemma, mapped_sides


@dataclass(frozen=True)
class Induction(Lemma):
    """``lhs(n) <= rhs(n)`` for every integer ``n >= start``, by induction on ``var = n``.

    ``advance`` maps the claim at ``n`` to the claim at ``n + 1``: ``var -> var + 1`` and each
    partial-sum symbol to itself plus its new term (``S -> S + x_n``). ``base_subs`` gives the
    partial sums at ``n = start``. ``base`` is a certificate whose sides must equal the claim
    at ``start``; ``step`` is a certificate whose sides must equal the advanced claim and
    which has an inequality hypothesis named ``"IH"`` with the claim's slack ``rhs - lhs``
    (the induction hypothesis); its domain must let ``var`` range over every value
    ``>= start`` (checked). ``extra`` are
    cross-checks (for example instances) that must also check. All of this is verified by
    :meth:`check`, so neither certificate can prove a different claim.
    """

    lhs: Any = 0
    rhs: Any = 0
    var: sp.Symbol = sp.Symbol("n")
    start: int = 0
    advance: Mapping[sp.Expr, sp.Expr] = field(default_factory=dict)
    base_subs: Mapping[sp.Expr, sp.Expr] = field(default_factory=dict)
    base: Inequality | None = None
    step: Inequality | None = None
    extra: tuple[Lemma, ...] = ()
    method: ClassVar[str] = "induction"

    @property
    def how_checked(self) -> str:
        return (
            "induction: base-case and inductive-step certificates, each checked as an "
            "identity, and their sides checked equal to the claim at the base and advanced"
        )

    def _at_base(self, x: Any) -> sp.Expr:
        at = sp.sympify(x).xreplace({self.var: sp.Integer(self.start)})
        return at.xreplace(dict(self.base_subs))

    def _advanced(self, x: Any) -> sp.Expr:
        return sp.sympify(x).xreplace(dict(self.advance))

    def _structure(self) -> str | None:
        if self.base is None or self.step is None:
            return "base case or inductive step missing"
        if not is_zero(sp.sympify(self.base.lhs) - self._at_base(self.lhs)) or not is_zero(
            sp.sympify(self.base.rhs) - self._at_base(self.rhs)
        ):
            return "the base case is not the claim at the start"
        if not is_zero(sp.sympify(self.step.lhs) - self._advanced(self.lhs)) or not is_zero(
            sp.sympify(self.step.rhs) - self._advanced(self.rhs)
        ):
            return "the inductive step does not conclude the claim at n + 1"
        if self.advance.get(self.var) is None or not is_zero(
            sp.sympify(self.advance[self.var]) - self.var - 1
        ):
            return "advance must map n to n + 1"
        if not self._step_covers_every_n():
            return f"the inductive step's domain does not cover every n >= {self.start}"
        ih = [h for h in self.step.hypotheses if h.name == "IH"]
        slack = sp.sympify(self.rhs) - sp.sympify(self.lhs)
        if len(ih) != 1 or ih[0].equality or not is_zero(ih[0].slack - slack):
            return "the inductive step does not assume exactly the claim at n (IH)"
        return None

    def _step_covers_every_n(self) -> bool:
        """The step is certified on a domain where ``n`` ranges over all of ``[start, oo)``:
        ``n -> start + s`` with ``s`` a nonnegative symbol, or ``n`` itself nonnegative
        (positive) by assumption and ``start = 0`` (``start = 1``)."""
        sub = self.step.domain.substitutions.get(self.var)  # type: ignore[union-attr]
        if sub is None:
            floor = 1 if self.var.is_positive else 0 if self.var.is_nonnegative else None
            return floor is not None and self.start == floor
        rest = sp.expand(sp.sympify(sub) - self.start)
        return isinstance(rest, sp.Symbol) and bool(rest.is_nonnegative)

    def check(self) -> CheckResult:
        problem = self._structure()
        if problem is not None:
            return self.result(False, problem)
        for part in (self.base, self.step, *self.extra):
            res = part.check()  # type: ignore[union-attr]
            if not res.ok:
                return self.result(False, f"{part.key}: {res.detail}")
        return self.result(
            True,
            f"base n = {self.start} and step n -> n + 1 certified; {len(self.extra)} cross-checks",
        )

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Induction:
        return replace(
            self,
            **mapped_sides(fn, self),
            base=self.base.map(fn) if self.base is not None else None,
            step=self.step.map(fn) if self.step is not None else None,
            extra=tuple(e.map(fn) for e in self.extra),
        )

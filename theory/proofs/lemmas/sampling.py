"""Exact-rational sampling of an inequality inside a region (a cross-check only)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar

import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

from theory.proofs.lemmas.kinds import CheckResult, Lemma, mapped_sides


def _random_rational(rng: random.Random, lo: Fraction, hi: Fraction, log: bool) -> Fraction:
    if log and lo > 0:
        # log-uniform point, rounded to a rational with a modest denominator
        x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        return min(max(Fraction(x).limit_denominator(10**6), lo), hi)
    num = rng.randint(0, 10**6)
    return lo + (hi - lo) * Fraction(num, 10**6)


class _ExactPrinter(PythonCodePrinter):
    """Prints sympy rationals as ``Fraction`` so that evaluation stays exact."""

    def _print_Rational(self, expr: sp.Rational) -> str:
        return f"Fraction({expr.p}, {expr.q})"

    def _print_Integer(self, expr: sp.Integer) -> str:
        return f"Fraction({expr.p})"

    def _print_Half(self, expr: sp.Rational) -> str:
        return "Fraction(1, 2)"

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        base, ex = expr.as_base_exp()
        if ex.is_Integer:
            return f"({self._print(base)})**({int(ex)})"
        raise ValueError(f"exact evaluation needs integer powers, got {expr}")


def exact_function(expr: sp.Expr, syms: Sequence[sp.Symbol]) -> Callable[..., Fraction]:
    """Compile ``expr`` to a Python function of ``syms`` that computes with exact ``Fraction``s.

    Only rational operations and integer powers are allowed (no radicals or functions).
    """
    names = [f"_x{i}" for i in range(len(syms))]
    body = _ExactPrinter().doprint(
        sp.sympify(expr).subs(dict(zip(syms, sp.symbols(names), strict=True)))
    )
    code = f"def _f({', '.join(names)}):\n    return {body}\n"
    namespace: dict[str, Any] = {"Fraction": Fraction}
    exec(code, namespace)  # noqa: S102 - code generated from a sympy expression above
    return namespace["_f"]


@dataclass(frozen=True)
class SampledInequality(Lemma):
    """``lhs <= rhs`` checked at ``n`` random rational points inside ``region``.

    ``ranges`` gives ``(low, high)`` per symbol (rationals); ``integers`` lists symbols
    drawn as integers; ``log_scale`` symbols are drawn log-uniformly. Points outside
    ``region`` (a tuple of sympy relations) are discarded; the check fails if any kept
    point violates the inequality or fewer than ``min_kept`` points are kept.
    """

    lhs: sp.Expr = sp.S.Zero
    rhs: sp.Expr = sp.S.Zero
    ranges: Mapping[sp.Symbol, tuple[Any, Any]] = field(default_factory=dict)
    region: tuple[sp.core.relational.Relational, ...] = ()
    integers: tuple[sp.Symbol, ...] = ()
    log_scale: tuple[sp.Symbol, ...] = ()
    n: int = 400
    min_kept: int = 50
    seed: int = 0
    method: ClassVar[str] = "sampling"

    def check(self) -> CheckResult:
        rng = random.Random(self.seed)
        free = (sp.sympify(self.rhs) - sp.sympify(self.lhs)).free_symbols
        for rel in self.region:
            free |= getattr(rel, "free_symbols", set())
        missing = free - set(self.ranges)
        if missing:
            raise KeyError(f"{self.key}: no sampling range for {sorted(map(str, missing))}")
        syms = sorted(self.ranges, key=lambda s: s.name)
        slack = exact_function(sp.sympify(self.rhs) - sp.sympify(self.lhs), syms)
        if any(r is sp.false for r in self.region):
            return self.result(False, "the region is empty (a relation is False)")
        rels = [r for r in self.region if r is not sp.true]
        region = [
            exact_function(r.rhs - r.lhs if r.rel_op in ("<=", "<") else r.lhs - r.rhs, syms)
            for r in rels
        ]
        strict = [r.rel_op in ("<", ">") for r in rels]
        kept = 0
        for _ in range(self.n):
            point = []
            for s in syms:
                lo_f, hi_f = (Fraction(str(x)) for x in self.ranges[s])
                if s in self.integers:
                    point.append(Fraction(rng.randint(int(lo_f), int(hi_f))))
                else:
                    point.append(_random_rational(rng, lo_f, hi_f, s in self.log_scale))
            inside = True
            for fn, st in zip(region, strict, strict=True):
                m = fn(*point)
                if m < 0 or (st and m == 0):
                    inside = False
                    break
            if not inside:
                continue
            kept += 1
            value = slack(*point)
            if value < 0:
                shown = {s.name: str(v) for s, v in zip(syms, point, strict=True)}
                return self.result(False, f"violated at {shown}: rhs - lhs = {value}")
        if kept < self.min_kept:
            return self.result(False, f"only {kept} of {self.n} points inside the region")
        return self.result(True, f"{kept} rational points, no violation")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> SampledInequality:
        return replace(self, **mapped_sides(fn, self))

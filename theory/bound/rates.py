"""A bound's rate: the bound after substituting a step schedule, grouped by powers of ``T``.

:func:`rate_terms` gives the simplified groups (:class:`RateTerm`, slowest-decaying first)
that :meth:`theory.bound.Bound.rate` shows; :func:`speedup_exprs` the expanded (leading,
rest) split that :meth:`theory.bound.Bound.max_H` compiles (no simplification: it costs
seconds for the PALSGD bounds and does not change the values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy as sp

from core.errors import UserInputError
from theory import symbols as S

if TYPE_CHECKING:
    from theory.bound import Bound

__all__ = ["RateTerm", "rate_groups", "rate_terms", "speedup_exprs"]


@dataclass(frozen=True)
class RateTerm:
    """One group of the rate: ``coefficient * T**t_exponent`` (coefficient free of T)."""

    coefficient: sp.Expr
    t_exponent: sp.Rational

    @property
    def expression(self) -> sp.Expr:
        return self.coefficient * S.T**self.t_exponent

    def __str__(self) -> str:
        return f"({self.coefficient}) * T^({self.t_exponent})"


def rate_groups(bound: Bound, step: sp.Expr) -> dict[sp.Expr, sp.Expr]:
    """The bound at ``step`` as ``{exponent of T: T-free coefficient}``, expanded only."""
    expr = sp.expand(sp.powsimp(bound.expression.subs(bound.step_symbol, step), force=True))
    groups: dict[sp.Expr, sp.Expr] = {}
    for term in sp.Add.make_args(expr):
        coeff, expo = sp.powsimp(term, force=True).as_coeff_exponent(S.T)
        if S.T in coeff.free_symbols:
            raise UserInputError(
                f"bound {bound.name!r}: term {term} is not a power of T times a T-free factor"
            )
        groups[expo] = groups.get(expo, 0) + coeff
    return groups


def rate_terms(bound: Bound, step: sp.Expr) -> list[RateTerm]:
    """The simplified groups of :func:`rate_groups`, slowest-decaying first."""
    groups = rate_groups(bound, step)
    out = [RateTerm(sp.factor(sp.simplify(c)), e) for e, c in groups.items() if c != 0]
    out.sort(key=lambda r: -float(r.t_exponent))
    return out


def speedup_exprs(bound: Bound, step: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(leading, rest) of the rate at ``step``, from the expanded groups of :func:`rate_groups`."""
    groups = {e: c for e, c in rate_groups(bound, step).items() if c != 0}
    e0 = max(groups, key=float)
    lead = groups[e0] * S.T**e0
    rest = sp.Add(*(c * S.T**e for e, c in groups.items() if e != e0))
    return lead, rest

"""Deciders: exact zero test of rational expressions, the sign-check domain, and
structural nonnegativity."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy as sp


def is_zero(expr: Any) -> bool:
    """True iff ``expr`` (a scalar or a matrix) is identically zero.

    The expression is expanded into terms ``n_i / d_i``; every term is multiplied by one
    common multiple ``M`` of the denominators (``M`` is a product of powers of the
    denominators' factors, nonzero as a function), so that ``sum_i n_i/d_i == 0`` iff the
    polynomial ``sum_i n_i M/d_i`` expands to zero. Expressions with non-polynomial atoms
    that do not cancel this way fall back to ``sympy.simplify``.
    """
    if isinstance(expr, sp.MatrixBase):
        return all(is_zero(e) for e in expr)
    e = sp.expand(sp.sympify(expr))
    if e == 0:
        return True
    split = []
    common: dict[sp.Expr, int] = {}
    factored: dict[sp.Expr, tuple[sp.Expr, dict[sp.Expr, int]]] = {}
    for term in sp.Add.make_args(e):
        num, den = sp.fraction(term)
        if den not in factored:
            try:
                const, facs = sp.factor_list(den)
            except sp.PolynomialError:
                const, facs = sp.S.One, [(den, 1)]
            powers: dict[sp.Expr, int] = {}
            for base, ex in facs:
                powers[base] = powers.get(base, 0) + int(ex)
            factored[den] = (const, powers)
        const, powers = factored[den]
        for base, ex in powers.items():
            common[base] = max(common.get(base, 0), ex)
        split.append((num / const, powers))
    total = sp.Add(
        *(
            num * sp.Mul(*(b ** (common[b] - powers.get(b, 0)) for b in common))
            for num, powers in split
        )
    )
    if sp.expand(total) == 0:
        return True
    if total.is_polynomial() or all(
        a.is_Symbol or a.is_Number or isinstance(a, sp.Indexed) for a in total.atoms()
    ):
        return False  # a nonzero polynomial: the identity is false
    return sp.simplify(e) == 0


@dataclass(frozen=True)
class Domain:
    """The parameter region a certificate is checked on, as a reparametrisation.

    ``substitutions`` maps a constrained symbol to an expression in symbols whose sympy
    assumptions encode the constraint, e.g. ``p -> u/(1+u)`` with ``u > 0`` encodes
    ``0 < p < 1`` and ``H -> 1 + h`` with ``h >= 0`` encodes ``H >= 1``. After substitution
    every parameter symbol must be nonnegative by assumption.
    """

    substitutions: Mapping[sp.Symbol, sp.Expr] = field(default_factory=dict)
    description: str = ""

    def apply(self, expr: Any) -> sp.Expr:
        e = sp.sympify(expr)
        return e.subs(dict(self.substitutions)) if self.substitutions else e


def _poly_nonnegative(e: sp.Expr) -> bool:
    """Rational function in nonnegative symbols with all-nonnegative (or all-nonpositive
    numerator and denominator) coefficients."""
    syms = e.free_symbols
    if not all(s.is_nonnegative for s in syms):
        return False
    num, den = sp.fraction(sp.cancel(sp.together(e)))
    out = []
    for part in (num, den):
        part = sp.expand(part)
        if part.is_number:
            out.append(1 if part > 0 else (-1 if part < 0 else 0))
            continue
        coeffs = sp.Poly(part, *sorted(syms, key=lambda s: s.name)).coeffs()
        if not all(c.is_real for c in coeffs):
            return False
        if all(c >= 0 for c in coeffs):
            out.append(1)
        elif all(c <= 0 for c in coeffs):
            out.append(-1)
        else:
            return False
    if out[1] == 0:
        return False
    return out[0] == 0 or out[0] == out[1]


def _structurally_nonnegative(e: sp.Expr) -> bool:
    if e.is_number:
        return bool(e.is_real and e >= 0)
    if e.is_nonnegative:
        return True
    if e.is_Pow:
        base, ex = e.as_base_exp()
        if ex.is_integer and ex.is_even and base.is_real is not False:
            return True
        return bool(ex.is_real) and _structurally_nonnegative(base)
    if e.is_Mul or e.is_Add:
        if all(_structurally_nonnegative(a) for a in e.args):
            return True
    if isinstance(e, sp.MatrixBase):
        return False
    try:
        return _poly_nonnegative(e)
    except (sp.PolynomialError, sp.GeneratorsNeeded, TypeError):
        return False


def manifestly_nonnegative(expr: Any, domain: Domain | None = None) -> bool:
    """True if ``expr`` is nonnegative for a structural reason on ``domain``.

    Sound but incomplete: sums and products of nonnegative parts, even powers, powers of
    nonnegative bases, symbols that are nonnegative by assumption, and rational functions
    in nonnegative symbols whose numerator and denominator have coefficients of one sign.
    ``False`` means "not shown", never "negative".
    """
    e = sp.sympify(expr)
    if domain is not None:
        e = domain.apply(e)
    return _structurally_nonnegative(e) or _structurally_nonnegative(sp.factor(e))

"""A small framework for machine-checked proof steps.

A proof is a numbered chain of :class:`Lemma` objects. Each lemma states one fact as sympy
expressions and says how it is checked:

``identity``
    ``lhs == rhs``, decided by reducing ``lhs - rhs`` to a canonical rational form
    (:func:`is_zero`). Expectations over a Bernoulli coin and the gradient noise are written
    out as probability-weighted sums over the branches (:class:`Branches`, :func:`expect`).

``certificate``
    ``lhs <= rhs``, proved by an explicit certificate: the identity

        rhs - lhs == sum_i m_i * h_i + sum_j n_j

    where each ``h_i`` is the slack of a hypothesis (``h_i >= 0``: an assumption, a
    step-size condition or an earlier lemma; or ``h_i == 0``, whose multiplier may have any
    sign), each multiplier ``m_i`` of an inequality hypothesis and each extra term ``n_j``
    is *manifestly nonnegative* (:func:`manifestly_nonnegative`: built from squares,
    nonnegative symbols and nonnegative constants by sums, products and quotients, after
    the :class:`Domain` reparametrisation). Sums of squares (SOS) are the special case
    without hypotheses. The identity is checked like an ``identity`` lemma.

``sampling``
    ``lhs <= rhs`` checked at many random points with exact rationals (sympy ``Rational``)
    inside a region given by relations; used only as a cross-check or where no
    certificate is given, and always labelled as such.

``cited``
    A published fact (for example the descent lemma of an L-smooth function), with its
    reference and a numerical spot check.

Vector quantities are explicit small-dimensional symbolic vectors (:func:`vector`). Every
identity and certificate in this project is a polynomial of degree two in the vectors, so it
holds in every dimension as soon as it holds coordinate-wise, that is, as a polynomial
identity in the coordinates of the small vectors used here.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar

import sympy as sp
from sympy.printing.pycode import PythonCodePrinter

__all__ = [
    "Branches",
    "CheckResult",
    "Cited",
    "Domain",
    "Family",
    "Hypothesis",
    "Identity",
    "Inequality",
    "Lemma",
    "SampledInequality",
    "by_key",
    "check_all",
    "dot",
    "exact_function",
    "expect",
    "from_lemma",
    "is_zero",
    "manifestly_nonnegative",
    "mean_zero_two_point",
    "sqnorm",
    "vector",
]


# ----------------------------------------------------------------------------- vectors
def vector(name: str, dim: int = 2) -> sp.Matrix:
    """A column vector of ``dim`` real symbols ``name_0, ..., name_{dim-1}``."""
    return sp.Matrix([sp.Symbol(f"{name}_{i}", real=True) for i in range(dim)])


def dot(u: sp.Matrix, v: sp.Matrix) -> sp.Expr:
    """Euclidean inner product of two column vectors."""
    return sp.Add(*(a * b for a, b in zip(u, v, strict=True)))


def sqnorm(u: sp.Matrix) -> sp.Expr:
    """Squared Euclidean norm ``||u||^2``."""
    return dot(u, u)


# ----------------------------------------------------------------------------- expectations
@dataclass(frozen=True)
class Branches:
    """A finite probability distribution: ``(probability, value)`` pairs.

    Probabilities are sympy expressions (for example ``p`` and ``1 - p`` for a Bernoulli
    coin); values are anything the function passed to :func:`expect` accepts.
    """

    outcomes: tuple[tuple[sp.Expr, Any], ...]

    @classmethod
    def of(cls, *pairs: tuple[Any, Any]) -> Branches:
        return cls(tuple((sp.sympify(pr), v) for pr, v in pairs))

    def total_probability(self) -> sp.Expr:
        return sp.Add(*(pr for pr, _ in self.outcomes))


def expect(fn: Callable[..., Any], *dists: Branches) -> Any:
    """``E fn(X_1, ..., X_n)`` for independent ``X_i ~ dists[i]``: the weighted branch sum."""
    total: Any = None
    for combo in itertools.product(*(d.outcomes for d in dists)):
        weight = sp.Mul(*(pr for pr, _ in combo))
        term = weight * fn(*(v for _, v in combo))
        total = term if total is None else total + term
    return sp.S.Zero if total is None else total


def mean_zero_two_point(name: str, dim: int = 2) -> tuple[Branches, sp.Symbol]:
    """A general two-point mean-zero random vector.

    Value ``v`` with probability ``pi`` and ``-pi v / (1 - pi)`` with probability
    ``1 - pi`` (``v`` a symbolic vector, ``pi`` a symbol in ``(0, 1)``). Returns the
    distribution and ``pi``.
    """
    pi = sp.Symbol(f"pi_{name}", positive=True)
    v = vector(name, dim)
    return Branches.of((pi, v), (1 - pi, -pi * v / (1 - pi))), pi


# ----------------------------------------------------------------------------- deciders
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


# ----------------------------------------------------------------------------- lemmas
@dataclass(frozen=True)
class CheckResult:
    """Outcome of checking one lemma."""

    key: str
    ok: bool
    method: str
    detail: str

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Hypothesis:
    """A fact used by a certificate: ``slack >= 0`` (or ``slack == 0`` if ``equality``).

    ``source`` names where it comes from (an assumption, a condition, a lemma key).
    ``relation`` is set for step-size conditions: the relation ``lhs <= rhs`` whose slack
    ``rhs - lhs`` this is, so that a theorem can collect its conditions from its lemmas.
    """

    name: str
    slack: sp.Expr
    source: str = ""
    equality: bool = False
    relation: sp.core.relational.Relational | None = None
    description: str = ""

    @classmethod
    def condition(cls, name: str, lhs: Any, rhs: Any, description: str = "") -> Hypothesis:
        """The step-size condition ``lhs <= rhs`` as a hypothesis with slack ``rhs - lhs``."""
        lhs, rhs = sp.sympify(lhs), sp.sympify(rhs)
        return cls(
            name,
            rhs - lhs,
            source=f"condition {name}",
            relation=sp.Le(lhs, rhs, evaluate=False),
            description=description,
        )

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Hypothesis:
        rel = self.relation
        if rel is not None:
            rel = sp.Le(fn(rel.lhs), fn(rel.rhs))
        return replace(self, slack=fn(self.slack), relation=rel)


def _map_expr(fn: Callable[[sp.Expr], sp.Expr], x: Any) -> Any:
    if isinstance(x, sp.MatrixBase):
        return x.applyfunc(fn)
    return fn(sp.sympify(x))


@dataclass(frozen=True)
class Lemma:
    """Base class: one numbered, checkable proof step.

    ``key`` is the label used in the docs (``"L4"``), ``statement`` the fact in words and
    formulas, ``proof`` the argument in words, ``uses`` the keys of the facts it relies on.
    """

    key: str
    title: str
    statement: str
    proof: str = ""
    uses: tuple[str, ...] = ()

    method: ClassVar[str] = "abstract"

    def check(self) -> CheckResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Lemma:
        """The same lemma with ``fn`` applied to every expression (e.g. a specialisation)."""
        return self

    @property
    def how_checked(self) -> str:
        return {
            "identity": "identity: lhs - rhs reduces to 0 (sympy cancel/simplify)",
            "certificate": "certificate: rhs - lhs = sum of nonnegative multipliers times "
            "hypothesis slacks plus manifestly nonnegative terms, checked as an identity",
            "sampling": "exact-rational random sampling over the region",
            "cited": "published result; numerical spot check",
        }[self.method]


@dataclass(frozen=True)
class Identity(Lemma):
    """``lhs == rhs`` identically (scalars or matrices)."""

    lhs: Any = 0
    rhs: Any = 0
    method: ClassVar[str] = "identity"

    def check(self) -> CheckResult:
        ok = (
            is_zero(sp.Matrix(self.lhs) - sp.Matrix(self.rhs))
            if isinstance(self.lhs, sp.MatrixBase)
            else is_zero(sp.sympify(self.lhs) - sp.sympify(self.rhs))
        )
        return CheckResult(self.key, ok, self.method, "lhs - rhs == 0" if ok else "lhs != rhs")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Identity:
        return replace(self, lhs=_map_expr(fn, self.lhs), rhs=_map_expr(fn, self.rhs))


@dataclass(frozen=True)
class Inequality(Lemma):
    """``lhs <= rhs`` with a certificate (see the module docstring).

    ``multipliers`` maps hypothesis names to their multipliers; hypotheses not listed get
    multiplier 0. ``nonneg_terms`` are the extra manifestly nonnegative terms (squares,
    products of nonnegative quantities). ``domain`` is where nonnegativity is checked.
    """

    lhs: sp.Expr = sp.S.Zero
    rhs: sp.Expr = sp.S.Zero
    hypotheses: tuple[Hypothesis, ...] = ()
    multipliers: Mapping[str, sp.Expr] = field(default_factory=dict)
    nonneg_terms: tuple[sp.Expr, ...] = ()
    domain: Domain = field(default_factory=Domain)
    method: ClassVar[str] = "certificate"

    @property
    def slack(self) -> sp.Expr:
        return sp.sympify(self.rhs) - sp.sympify(self.lhs)

    def residual(self) -> sp.Expr:
        """``rhs - lhs - sum m_i h_i - sum n_j``: zero iff the certificate identity holds."""
        hyp = {h.name: h for h in self.hypotheses}
        unknown = set(self.multipliers) - set(hyp)
        if unknown:
            raise KeyError(f"{self.key}: multipliers for unknown hypotheses {sorted(unknown)}")
        total = self.slack
        for name, m in self.multipliers.items():
            total -= sp.sympify(m) * hyp[name].slack
        for n in self.nonneg_terms:
            total -= n
        return total

    def check(self) -> CheckResult:
        if not is_zero(self.residual()):
            return CheckResult(self.key, False, self.method, "certificate identity fails")
        hyp = {h.name: h for h in self.hypotheses}
        for name, m in self.multipliers.items():
            if hyp[name].equality:
                continue
            if not manifestly_nonnegative(m, self.domain):
                return CheckResult(
                    self.key, False, self.method, f"multiplier of {name!r} not shown >= 0: {m}"
                )
        for n in self.nonneg_terms:
            if not manifestly_nonnegative(n, self.domain):
                return CheckResult(self.key, False, self.method, f"term not shown >= 0: {n}")
        return CheckResult(
            self.key,
            True,
            self.method,
            f"certificate with {len(self.multipliers)} hypotheses and "
            f"{len(self.nonneg_terms)} nonnegative terms",
        )

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Inequality:
        return replace(
            self,
            lhs=fn(sp.sympify(self.lhs)),
            rhs=fn(sp.sympify(self.rhs)),
            hypotheses=tuple(h.map(fn) for h in self.hypotheses),
            multipliers={k: fn(sp.sympify(v)) for k, v in self.multipliers.items()},
            nonneg_terms=tuple(fn(sp.sympify(n)) for n in self.nonneg_terms),
        )


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
            return CheckResult(
                self.key, False, self.method, "the region is empty (a relation is False)"
            )
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
                return CheckResult(
                    self.key, False, self.method, f"violated at {shown}: rhs - lhs = {value}"
                )
        if kept < self.min_kept:
            return CheckResult(
                self.key, False, self.method, f"only {kept} of {self.n} points inside the region"
            )
        return CheckResult(self.key, True, self.method, f"{kept} rational points, no violation")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> SampledInequality:
        return replace(self, lhs=fn(sp.sympify(self.lhs)), rhs=fn(sp.sympify(self.rhs)))


@dataclass(frozen=True)
class Cited(Lemma):
    """A published fact with its reference and a numerical spot check.

    ``spot_check`` returns ``(ok, detail)``; it must be seeded and deterministic.
    """

    reference: str = ""
    spot_check: Callable[[], tuple[bool, str]] | None = None
    method: ClassVar[str] = "cited"

    def check(self) -> CheckResult:
        if self.spot_check is None:
            return CheckResult(self.key, True, self.method, f"cited: {self.reference}")
        ok, detail = self.spot_check()
        return CheckResult(self.key, bool(ok), self.method, f"{self.reference}; {detail}")


@dataclass(frozen=True)
class Family(Lemma):
    """Several instances of one fact (e.g. for ``t = 1, ..., 4``); all parts must check."""

    parts: tuple[Lemma, ...] = ()

    @property
    def method(self) -> str:  # type: ignore[override]
        methods = sorted({p.method for p in self.parts})
        return methods[0] if len(methods) == 1 else "+".join(methods)

    @property
    def how_checked(self) -> str:
        return "; ".join(sorted({p.how_checked for p in self.parts}))

    def check(self) -> CheckResult:
        for part in self.parts:
            res = part.check()
            if not res.ok:
                return CheckResult(self.key, False, self.method, f"part {part.key}: {res.detail}")
        return CheckResult(self.key, True, self.method, f"{len(self.parts)} parts checked")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Family:
        return replace(self, parts=tuple(p.map(fn) for p in self.parts))


def from_lemma(
    lemma: Lemma,
    name: str,
    subs: Mapping[sp.Expr, sp.Expr] | None = None,
    scale: Any = 1,
) -> Hypothesis:
    """The inequality ``lemma.lhs <= lemma.rhs`` of a scalar lemma as a hypothesis of another.

    The slack is ``scale * (rhs - lhs)`` after ``subs`` (e.g. per-round symbols replaced by
    their sums over rounds), computed from the lemma object, so the hypothesis is never
    retyped: a change to the lemma's constants changes every certificate that uses it.
    ``scale`` must be positive (a positive multiple of a nonnegative slack).
    """
    if not isinstance(lemma, Inequality | SampledInequality):
        raise TypeError(f"{lemma.key} is not an inequality lemma")
    slack = sp.sympify(lemma.rhs) - sp.sympify(lemma.lhs)
    if subs:
        slack = slack.subs(dict(subs))
    return Hypothesis(name, sp.sympify(scale) * slack, source=f"lemma {lemma.key}")


def check_all(lemmas: Iterable[Lemma]) -> list[CheckResult]:
    """Check every lemma; return the results in order."""
    return [lem.check() for lem in lemmas]


def by_key(lemmas: Sequence[Lemma]) -> dict[str, Lemma]:
    """Index a chain by lemma key (keys must be unique)."""
    out: dict[str, Lemma] = {}
    for lem in lemmas:
        if lem.key in out:
            raise ValueError(f"duplicate lemma key {lem.key!r}")
        out[lem.key] = lem
    return out

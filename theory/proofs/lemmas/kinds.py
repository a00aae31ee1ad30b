"""The kinds of lemma: identity, certificate inequality, cited fact, family of parts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import sympy as sp

from theory.proofs.lemmas.deciders import Domain, is_zero, manifestly_nonnegative


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


def mapped_sides(fn: Callable[[sp.Expr], sp.Expr], lemma: Any) -> dict[str, Any]:
    """``lhs`` and ``rhs`` of ``lemma`` with ``fn`` applied (matrices entrywise), as the
    keywords of :func:`dataclasses.replace`."""
    return {"lhs": _map_expr(fn, lemma.lhs), "rhs": _map_expr(fn, lemma.rhs)}


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

    def result(self, ok: bool, detail: str) -> CheckResult:
        """The :class:`CheckResult` of this lemma: ``ok`` and a one-line ``detail``."""
        return CheckResult(self.key, ok, self.method, detail)

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
        return self.result(ok, "lhs - rhs == 0" if ok else "lhs != rhs")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Identity:
        return replace(self, **mapped_sides(fn, self))


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
            return self.result(False, "certificate identity fails")
        hyp = {h.name: h for h in self.hypotheses}
        for name, m in self.multipliers.items():
            if hyp[name].equality:
                continue
            if not manifestly_nonnegative(m, self.domain):
                return self.result(False, f"multiplier of {name!r} not shown >= 0: {m}")
        for n in self.nonneg_terms:
            if not manifestly_nonnegative(n, self.domain):
                return self.result(False, f"term not shown >= 0: {n}")
        return self.result(
            True,
            f"certificate with {len(self.multipliers)} hypotheses and "
            f"{len(self.nonneg_terms)} nonnegative terms",
        )

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Inequality:
        return replace(
            self,
            **mapped_sides(fn, self),
            hypotheses=tuple(h.map(fn) for h in self.hypotheses),
            multipliers={k: fn(sp.sympify(v)) for k, v in self.multipliers.items()},
            nonneg_terms=tuple(fn(sp.sympify(n)) for n in self.nonneg_terms),
        )


@dataclass(frozen=True)
class Cited(Lemma):
    """A published (or argued, uncertified) fact with its reference and a spot check.

    ``spot_check`` returns ``(ok, detail)``; it must be seeded and deterministic. A scalar
    inequality fact may give ``lhs <= rhs`` so that the lemmas using it build their
    hypothesis from this object (:func:`theory.proofs.lemmas.from_lemma`).
    """

    reference: str = ""
    spot_check: Callable[[], tuple[bool, str]] | None = None
    lhs: Any = None
    rhs: Any = None
    method: ClassVar[str] = "cited"

    def check(self) -> CheckResult:
        if self.spot_check is None:
            return self.result(True, f"cited: {self.reference}")
        ok, detail = self.spot_check()
        return self.result(bool(ok), f"{self.reference}; {detail}")


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
                return self.result(False, f"part {part.key}: {res.detail}")
        return self.result(True, f"{len(self.parts)} parts checked")

    def map(self, fn: Callable[[sp.Expr], sp.Expr]) -> Family:
        return replace(self, parts=tuple(p.map(fn) for p in self.parts))

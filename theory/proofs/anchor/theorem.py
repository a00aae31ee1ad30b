"""The assembled Theorem 2 for one drift route: chain, collected conditions, bound.

Part of :mod:`theory.proofs.anchor` (``docs/anchor_theorem.md``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import sympy as sp

from theory.bound import Condition
from theory.proofs import palsgd as theorem1
from theory.proofs.anchor import drift, outer, rounds
from theory.proofs.anchor.notation import (
    GENERIC,
    KINDS,
    H,
    Hlo,
    Hup,
    L,
    R,
    T,
    alpha,
    eta,
    pieces,
    route,
)
from theory.proofs.lemmas import CheckResult, Lemma, by_key


@dataclass(frozen=True)
class AnchorTheorem:
    """Theorem 2 for one drift route: its lemma chain, conditions and bound.

    ``expression`` is the right-hand side of O10 with the generic constants replaced by
    :func:`pieces` and ``R = T/H``; ``conditions`` are the condition hypotheses of the chain
    (O9's absorption condition specialised, and the drift lemma's).
    """

    kind: str
    lemmas: tuple[Lemma, ...]
    conditions: tuple[Condition, ...]
    expression: sp.Expr
    constants: dict[str, sp.Expr]

    def lemma(self, key: str) -> Lemma:
        return by_key(self.lemmas)[key]

    def check(self) -> list[CheckResult]:
        return [lem.check() for lem in self.lemmas]


def _specialise(kind: str) -> dict[sp.Expr, sp.Expr]:
    co = pieces(kind)
    out = {GENERIC[k]: co[k] for k in GENERIC}
    out[Hup] = co["Hup"]
    out[Hlo] = co["Hlo"]
    return out


def build_chain(kind: str, mutate: Callable[[Lemma], Lemma] | None = None) -> list[Lemma]:
    """The lemmas of Theorem 2 for ``kind``, in reading order, each built from the objects
    of the lemmas it uses; ``mutate`` is applied to every lemma as it is built (Theorem 1's
    L4 and L10a included), so a changed lemma reaches all of its users."""
    m = mutate if mutate is not None else (lambda lem: lem)
    t1 = theorem1.Chain("independent", mutate)
    chain = [m(outer.o1_virtual_sequence()), m(outer.o2_young())]
    o3, o4 = m(outer.o3_outer_descent()), m(outer.o4_anchor_step())
    chain += [o3, o4]
    if kind == "pull_aware":
        o6 = m(drift.o6_pull_contraction())
        o7 = m(drift.o7_drift_recursion(o6, t1["L4"], t1["L10a"]))
        chain += [o6, o7, m(drift.o8a_drift_horizon_t(o7)), m(drift.o8b_drift_horizon_cap(o7))]
    else:
        chain.append(m(drift.o8s_summed_drift(kind)))
    o5 = m(rounds.o5_displacement())
    o9 = m(rounds.o9_round(o3, o4, o5))
    return [*chain, o5, o9, m(rounds.o10_theorem(o9))]


def _conditions(kind: str, chain: list[Lemma]) -> list[Condition]:
    sub = _specialise(kind)
    seen: dict[str, Condition] = {}
    for lem in chain:
        inner = [getattr(lem, "step", None), getattr(lem, "base", None)]
        for h in [*getattr(lem, "hypotheses", ())] + [
            h for x in inner if x is not None for h in x.hypotheses
        ]:
            if h.relation is not None and h.name not in seen:
                rel = h.relation
                lhs, rhs = sp.sympify(rel.lhs).xreplace(sub), sp.sympify(rel.rhs).xreplace(sub)
                seen[h.name] = Condition(h.name, sp.Le(lhs, rhs, evaluate=False), h.description)
    if route(kind)[0]:  # the pulls' weights
        seen.setdefault(
            "P1", Condition("P1", sp.Le(alpha * eta, 1), "alpha eta <= 1 (pull weights in [0, 1])")
        )
    out: list[Condition] = []
    if kind == "pull_aware":
        out.append(
            Condition(
                "P0",
                sp.Lt(L, eta),
                "eta > L: the local objective f_k + (eta/2)||x - z||^2 is strongly convex",
            )
        )
    return out + [seen[k] for k in sorted(seen)]


@cache
def theorem(kind: str = "pull_aware") -> AnchorTheorem:
    """Theorem 2 (derived here) with the drift route ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    chain = build_chain(kind)
    o10 = chain[-1]
    expr = sp.sympify(o10.rhs).xreplace(_specialise(kind)).subs(R, T / H)  # type: ignore[attr-defined]
    return AnchorTheorem(kind, tuple(chain), tuple(_conditions(kind, chain)), expr, pieces(kind))

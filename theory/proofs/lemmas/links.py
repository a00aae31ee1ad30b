"""Links between lemmas: hypotheses built from lemma objects, and chain helpers.

:func:`from_lemma` turns a scalar inequality lemma into a hypothesis of another lemma (its
slack ``rhs - lhs``, optionally re-indexed and scaled); :func:`borrow` does the same for a
lemma about vectors whose right-hand side depends on them through squared norms only. The
hypothesis is computed from the lemma object, never retyped, so a changed constant in a
lemma changes (and, if wrong, breaks) every certificate that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sympy as sp

from theory.proofs.lemmas.kinds import CheckResult, Hypothesis, Identity, Lemma


def _sides(lemma: Lemma) -> tuple[sp.Expr, sp.Expr]:
    """``(lhs, rhs)`` of an inequality lemma (certificate, sampled, induction or cited)."""
    lhs, rhs = getattr(lemma, "lhs", None), getattr(lemma, "rhs", None)
    if isinstance(lemma, Identity) or lhs is None or rhs is None:
        raise TypeError(f"{lemma.key} is not an inequality lemma")
    if isinstance(rhs, sp.MatrixBase) or isinstance(lhs, sp.MatrixBase):
        raise TypeError(f"{lemma.key} is not a scalar inequality")
    return sp.sympify(lhs), sp.sympify(rhs)


def from_lemma(
    lemma: Lemma,
    name: str,
    subs: Mapping[sp.Expr, sp.Expr] | None = None,
    scale: Any = 1,
) -> Hypothesis:
    """The inequality ``lemma.lhs <= lemma.rhs`` of a scalar lemma as a hypothesis of another.

    The slack is ``scale * (rhs - lhs)`` after ``subs`` (e.g. per-step symbols replaced by
    their sums over a round divided by its length, with ``scale`` the length: linearity),
    computed from the lemma object. ``scale`` must be positive.
    """
    lhs, rhs = _sides(lemma)
    slack = rhs - lhs
    if subs:
        slack = slack.subs(dict(subs))
    return Hypothesis(name, sp.sympify(scale) * slack, source=f"lemma {lemma.key}")


def borrow(
    lemma: Lemma,
    name: str,
    lhs: sp.Expr,
    norms: Mapping[str, sp.Expr] | None = None,
    subs: Mapping[sp.Expr, sp.Expr] | None = None,
    scale: Any = 1,
) -> Hypothesis:
    """The right-hand side of ``lemma`` as a bound on the scalar ``lhs``: slack ``scale (rhs - lhs)``.

    ``norms`` maps the name of each vector of the lemma to the scalar that stands for its
    squared norm (an average over workers or steps, by linearity): every vector ``v`` is
    replaced by ``(sqrt(norms[v]), 0, ...)``. The right-hand side must depend on its vectors
    through their squared norms only (checked: no square root and no vector may remain).
    ``subs`` then renames scalars of the lemma.
    """
    rhs = _sides(lemma)[1]
    rep: dict[sp.Symbol, sp.Expr] = {}
    for s in rhs.free_symbols:
        base, _, idx = s.name.rpartition("_")
        if base and idx.isdigit() and norms is not None and base in norms:
            rep[s] = sp.sqrt(norms[base]) if idx == "0" else sp.S.Zero
    inst = sp.expand(rhs.xreplace(rep))
    if any(a.exp == sp.Rational(1, 2) for a in inst.atoms(sp.Pow)):
        raise ValueError(f"borrowing {lemma.key}: its rhs is not a function of squared norms")
    left = [s for s in inst.free_symbols if s.name.rpartition("_")[2].isdigit()]
    if left:
        raise ValueError(f"borrowing {lemma.key}: vectors left {sorted(map(str, left))}")
    if subs:
        inst = inst.subs(dict(subs))
    return Hypothesis(name, sp.sympify(scale) * (inst - lhs), source=f"lemma {lemma.key}")


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
